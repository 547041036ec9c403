"""Tests for bevviz.features: shapes, ranges, determinism and pixel-centre alignment."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bevviz.features import conv_features, conv_stack, conv_weights, resize_area, rgb_features, stack_images
from bevviz.synthetic import nuscenes_like_rig


def _smooth_images(rig, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for cam in rig:
        z = torch.rand(1, 3, 6, 9, generator=gen)
        im = F.interpolate(z, size=(cam.height, cam.width), mode="bilinear", align_corners=False)
        out[cam.name] = (im[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    return out


@pytest.fixture(scope="module")
def small_rig():
    return nuscenes_like_rig(size=(160, 90))


def test_rgb_features_shape_range_and_area_average(small_rig):
    imgs = _smooth_images(small_rig)
    f = rgb_features(imgs, small_rig, stride=2)
    assert f.shape == (6, 3, 45, 80) and f.dtype == torch.float32
    assert 0.0 <= float(f.min()) and float(f.max()) <= 1.0
    # Stride 2 divides 90 x 160: each feature pixel is the mean of a 2x2 block, in rig order.
    cam = small_rig.names[3]
    block = imgs[cam][4:6, 10:12].astype(np.float64).mean(axis=(0, 1)) / 255.0
    np.testing.assert_allclose(f[3, :, 2, 5].numpy(), block, atol=1e-6)


def test_rgb_features_non_dividing_stride_is_a_resize(small_rig):
    # 90 rows at stride 16 -> 5 rows covering the WHOLE image (a resize), not a crop to 80 rows.
    imgs = {n: np.zeros((90, 160, 3), np.uint8) for n in small_rig.names}
    for n in small_rig.names:
        imgs[n][80:] = 255  # only the last 10 rows are bright
    f = rgb_features(imgs, small_rig, stride=16)
    assert f.shape == (6, 3, 5, 10)
    assert float(f[:, :, -1].min()) > 0.5  # a crop would have dropped rows 80..89 entirely


def test_resize_area_keeps_pixel_centres():
    # A linear ramp u -> u stays the ramp u' = (u + 0.5) / s - 0.5 after an area resize by 1/s.
    W = 64
    ramp = torch.arange(W, dtype=torch.float64).view(1, 1, 1, W).expand(1, 1, 4, W)
    out = resize_area(ramp, 2, 16)
    expect = (torch.arange(16, dtype=torch.float64) + 0.5) * 4 - 0.5
    torch.testing.assert_close(out[0, 0, 0], expect)


def test_conv_features_shape_scale_determinism(small_rig):
    imgs = _smooth_images(small_rig)
    f = conv_features(imgs, small_rig, channels=64, stride=8, seed=0)
    assert f.shape == (6, 64, 11, 20) and f.dtype == torch.float32
    assert float(f.abs().max()) < 1.0
    std = f.std(dim=(0, 2, 3))
    assert float(std.mean()) > 0.2, "features should be unit-scale, not collapsed"
    torch.testing.assert_close(f, conv_features(imgs, small_rig, channels=64, stride=8, seed=0), rtol=0, atol=0)
    assert float((f - conv_features(imgs, small_rig, channels=64, stride=8, seed=1)).abs().max()) > 0.1


def test_conv_features_full_size_shape():
    rig = nuscenes_like_rig().subset(["CAM_FRONT"])  # one camera keeps it cheap
    imgs = {"CAM_FRONT": np.full((900, 1600, 3), 128, np.uint8)}
    f = conv_features(imgs, rig)
    assert f.shape == (1, 64, 56, 100)


def test_conv_stack_is_centred_flip_equivariant():
    # Centred ops commute with a mirror when the kernels are mirrored too; a stride-2 3x3 conv
    # (half-pixel shift per layer) would break this.
    x = torch.rand(1, 3, 32, 48, generator=torch.Generator().manual_seed(3))
    layers = conv_weights(8, seed=2)
    flipped = [(w.flip(-1), b) for w, b in layers]
    out = conv_stack(x, layers, 16)
    out_flip = conv_stack(x.flip(-1), flipped, 16)
    torch.testing.assert_close(out_flip, out.flip(-1), atol=1e-5, rtol=0)

    def strided(x, layers):
        for w, b in layers:
            x = torch.tanh(F.conv2d(x, w, b, stride=2, padding=1))
        return x

    shifted = (strided(x.flip(-1), flipped) - strided(x, layers).flip(-1)).abs().max()
    assert float(shifted) > 1e-3  # the test can tell the difference


def test_stack_images_errors(small_rig):
    imgs = _smooth_images(small_rig)
    missing = dict(imgs)
    missing.pop("CAM_BACK")
    with pytest.raises(ValueError, match="CAM_BACK"):
        stack_images(missing, small_rig)
    bad = dict(imgs, CAM_FRONT=imgs["CAM_FRONT"][:, :-1])
    with pytest.raises(ValueError, match="CAM_FRONT.*image"):
        stack_images(bad, small_rig)
    wrong_dtype = dict(imgs, CAM_FRONT=imgs["CAM_FRONT"].astype(np.float32))
    with pytest.raises(ValueError, match="dtype"):
        stack_images(wrong_dtype, small_rig)
    with pytest.raises(ValueError, match="stride"):
        conv_features(imgs, small_rig, stride=3)
    with pytest.raises(ValueError, match="stride"):
        rgb_features(imgs, small_rig, stride=1000)
