"""Per-camera feature maps to sample BEV features from: RGB at a stride, or a fixed conv stack.

Convention:
    A feature map at stride ``s`` is the camera image RESIZED to ``(W // s, H // s)`` with
    pixel centres preserved (an area-average resize over the whole image; when ``H`` is not a
    multiple of ``s`` the effective factor is ``(H // s) / H``, e.g. 56 / 900 for 900 rows at
    stride 16, not 1/16). Because the map covers the same extent as the image, a point has
    the SAME normalised coordinate in the image and in every feature map of it:
    ``g = (2u + 1) / W - 1`` computed with the calibrated image width ``W``, sampled from the
    feature map with ``align_corners=False``. Nothing downstream needs ``Rig.at_stride``
    (which crops the remainder instead of resizing, and differs by up to ``(H mod s) / s``
    feature rows at the far edge).

    Images are a dict camera name -> uint8 RGB array (H, W, 3), in any order; outputs are
    stacked in rig order.
    See docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from bevviz.camera import Rig
from bevviz.checks import check_shape, field_error, positive_int

#: Widths of the conv stack's hidden layers (the last layer has ``channels`` outputs).
CONV_WIDTHS = (16, 32, 64)


def stack_images(images: Mapping[str, np.ndarray], rig: Rig) -> torch.Tensor:
    """Stack a rig's images in rig order as float32 in [0, 1].

    Args:
        images: Camera name -> uint8 RGB array, shape (H, W, 3); one per camera of ``rig``.
            Every image must have its camera's calibrated size.
        rig: The rig (N_cam cameras).

    Returns:
        Images, shape (N_cam, 3, H, W), float32 in [0, 1].

    Raises:
        InputError: a camera's image is missing, not uint8, of the wrong shape, or the
            cameras' image sizes differ.
    """
    if not isinstance(images, Mapping):
        raise field_error("images", type(images).__name__, "must be a dict camera name -> image")
    out = []
    for cam in rig:
        if cam.name not in images:
            raise field_error("images", sorted(images), f"no image for camera {cam.name}")
        img = np.asarray(images[cam.name])
        check_shape(img, (cam.height, cam.width, 3), "image", cam.name)
        if img.dtype != np.uint8:
            raise field_error("image dtype", str(img.dtype), "must be uint8 RGB", cam.name)
        # torch.as_tensor copies read-only arrays (the app's cached images are read-only)
        # instead of aliasing them with a warning.
        out.append(torch.as_tensor(img if img.flags.writeable else img.copy()).permute(2, 0, 1))
    sizes = {tuple(t.shape) for t in out}
    if len(sizes) != 1:
        raise field_error("images", sorted(sizes), "all cameras must share one image size to stack")
    return torch.stack(out).to(torch.float32).div_(255.0)


def resize_area(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Area-average resize that keeps pixel centres (adaptive average pooling).

    Args:
        x: Images or features, shape (N, C, H, W).
        height: Output height.
        width: Output width.

    Returns:
        Resized tensor, shape (N, C, height, width); identical to ``x`` when the size is
        unchanged.

    Convention:
        Output pixel j averages input pixels ``floor(j W / w) .. ceil((j + 1) W / w) - 1``,
        centred at ``(j + 0.5) W / w - 0.5``: the pixel-centre resize ``u' = (u + 0.5) w / W
        - 0.5``, exact when ``W`` is a multiple of ``w``.
    """
    if tuple(x.shape[-2:]) == (height, width):
        return x
    return F.adaptive_avg_pool2d(x, (height, width))


def feature_size(rig: Rig, stride: int) -> tuple[int, int]:
    """Feature map size (H_f, W_f) = (H // s, W // s) of the rig's (shared) image size."""
    s = positive_int(stride, "stride")
    sizes = {(c.width, c.height) for c in rig}
    if len(sizes) != 1:
        raise field_error("image sizes", sorted(sizes), "all cameras must share one image size")
    (W, H), = sizes
    if H // s < 1 or W // s < 1:
        raise field_error("stride", s, f"larger than the image ({W} x {H})")
    return H // s, W // s


def rgb_features(images: Mapping[str, np.ndarray], rig: Rig, stride: int = 1) -> torch.Tensor:
    """RGB images as a 3-channel feature map at ``stride`` (area-average downsample).

    Args:
        images: Camera name -> uint8 RGB image, shape (H, W, 3).
        rig: The rig (N_cam cameras, one shared image size).
        stride: Downsampling factor s.

    Returns:
        Features, shape (N_cam, 3, H // s, W // s), float32 in [0, 1].

    Convention:
        See the module docstring: the full image resized to (W // s, H // s), pixel
        centres kept; sample it with coordinates normalised by the calibrated image size.
    """
    Hf, Wf = feature_size(rig, stride)
    return resize_area(stack_images(images, rig), Hf, Wf).contiguous()


def conv_weights(channels: int = 64, seed: int = 0, in_channels: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed, seeded weights of :func:`conv_features`' stack.

    Args:
        channels: Output channels C of the last layer.
        seed: Seed of the ``torch.Generator`` that draws them.
        in_channels: Input channels (3 for RGB).

    Returns:
        Four (weight, bias) pairs; weight shape (C_out, C_in, 3, 3), bias shape (C_out,),
        float32. Weights are N(0, (gain / sqrt(9 C_in))^2) with a zero-mean kernel sum
        removed from the first layer (so a flat image gives a flat, near-zero response).
    """
    gen = torch.Generator().manual_seed(int(seed))
    widths = (in_channels, *CONV_WIDTHS, positive_int(channels, "channels"))
    layers = []
    for i, (cin, cout) in enumerate(zip(widths[:-1], widths[1:])):
        std = 1.7 / math.sqrt(9 * cin)
        w = torch.randn(cout, cin, 3, 3, generator=gen, dtype=torch.float64) * std
        if i == 0:
            w = w - w.mean(dim=(1, 2, 3), keepdim=True)
        b = torch.randn(cout, generator=gen, dtype=torch.float64) * 0.1
        layers.append((w.float(), b.float()))
    return layers


def conv_stack(x: torch.Tensor, layers: list[tuple[torch.Tensor, torch.Tensor]], stride: int) -> torch.Tensor:
    """Run the conv stack: per layer [2x2 average pool] -> 3x3 conv (stride 1, pad 1) -> tanh.

    The first ``log2(stride)`` layers pool. Every op is centred (a 2x2 pool keeps pixel
    centres, a padded 3x3 stride-1 conv is symmetric), so the output is aligned with the
    resize convention; a stride-2 3x3 conv would shift by half an input pixel per layer
    (7.5 image pixels at stride 16), which is exactly the kind of bug bevviz looks for.

    Args:
        x: Images, shape (N, C_in, H, W) with H, W multiples of ``stride``.
        layers: (weight, bias) pairs from :func:`conv_weights`.
        stride: Power of two, at most 2 ** len(layers).

    Returns:
        Features, shape (N, C, H // stride, W // stride), values in (-1, 1).
    """
    pools = int(round(math.log2(stride)))
    for i, (w, b) in enumerate(layers):
        if i < pools:
            x = F.avg_pool2d(x, 2)
        x = torch.tanh(F.conv2d(x, w, b, padding=1))
    return x


def conv_features(images: Mapping[str, np.ndarray], rig: Rig, channels: int = 64, stride: int = 16,
                  seed: int = 0) -> torch.Tensor:
    """A fixed, seeded conv stack's features: C channels at ``stride`` (no downloads).

    The image (scaled to [-1, 1]) is first area-resized to (H_f s, W_f s) (a no-op when the
    size divides), then four layers of [2x2 average pool] -> 3x3 conv -> tanh, pooling in the
    first log2(s) layers. 900 x 1600 at stride 16 gives 56 x 100.

    Args:
        images: Camera name -> uint8 RGB image, shape (H, W, 3).
        rig: The rig (N_cam cameras, one shared image size).
        channels: Output channels C.
        stride: 1, 2, 4, 8 or 16.
        seed: Weight seed; the same seed always gives the same features.

    Returns:
        Features, shape (N_cam, C, H // s, W // s), float32 in (-1, 1), per-channel standard
        deviation of order 0.5 on natural-looking images.

    Convention:
        See the module docstring: the result is aligned with the pixel-centre resize of the
        whole image, so sample it with coordinates normalised by the calibrated image size.
    """
    s = positive_int(stride, "stride")
    if s not in (1, 2, 4, 8, 16):
        raise field_error("stride", s, "conv_features supports strides 1, 2, 4, 8, 16")
    Hf, Wf = feature_size(rig, s)
    x = stack_images(images, rig).mul_(2.0).sub_(1.0)
    x = resize_area(x, Hf * s, Wf * s)
    with torch.no_grad():
        return conv_stack(x, conv_weights(channels, seed), s).contiguous()
