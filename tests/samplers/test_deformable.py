"""Tests for the deformable-conv-style sampler: exactness, the floor variant's cost, offsets."""

import math

import pytest
import torch

from bevviz.samplers.deformable import (
    DeformableConfig,
    OffsetNet,
    deformable_bev,
    deformable_bev_reference,
    deformable_reference,
    deformable_sample,
    floor_indices,
    floor_position_error,
    kernel_offsets,
    offset_field,
    tap_positions,
    to_feature_pixels,
    to_normalized,
)


def _data(dtype=torch.float32, seed=0, N=2, C=5, H=7, W=9, P=(3, 4), k=3):
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(N, C, H, W, generator=gen, dtype=dtype)
    g = (torch.rand(N, *P, 2, generator=gen, dtype=dtype) * 2.4 - 1.2)
    off = torch.randn(N, *P, k * k, 2, generator=gen, dtype=dtype) * 1.5
    m = torch.rand(N, *P, k * k, generator=gen, dtype=dtype)
    return f, g, off, m


def test_kernel_offsets_row_major_centred():
    d = kernel_offsets(3, 2.0)
    assert d.shape == (9, 2)
    assert d[0].tolist() == [-2.0, -2.0] and d[1].tolist() == [0.0, -2.0] and d[4].tolist() == [0.0, 0.0]
    assert d.mean(0).abs().max() == 0
    assert kernel_offsets(1).tolist() == [[0.0, 0.0]]


def test_pixel_normalised_round_trip_align_corners_false():
    size = (9, 7)
    assert to_normalized(torch.tensor([[-0.5, 6.5]]), size).tolist() == [[-1.0, 1.0]]
    p = torch.rand(10, 2, dtype=torch.float64) * 8
    torch.testing.assert_close(to_feature_pixels(to_normalized(p, size), size), p)


@pytest.mark.parametrize("with_offsets", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_bilinear_matches_grid_sample_reference(with_offsets, with_mask):
    f, g, off, m = _data()
    off = off if with_offsets else None
    m = m if with_mask else None
    out = deformable_sample(f, g, off, m, rounding="bilinear")
    ref = deformable_reference(f, g, off, m)
    assert out.shape == (2, 5, 3, 4)
    assert float((out - ref).abs().max()) < 1e-5


def test_kernel_1_is_plain_bilinear_sampling():
    f, g, _, _ = _data()
    out = deformable_sample(f, g, kernel_size=1)
    ref = torch.nn.functional.grid_sample(f, g, align_corners=False)
    assert float((out - ref).abs().max()) < 1e-5


def test_default_modulation_is_the_mean():
    # A constant feature map gives back the constant wherever every tap is inside.
    f = torch.full((1, 2, 20, 20), 3.0)
    g = torch.zeros(1, 1, 1, 2)
    out = deformable_sample(f, g, dilation=2.0)
    torch.testing.assert_close(out, torch.full((1, 2, 1, 1), 3.0))


def test_floor_formula_and_position_error():
    W = 100
    # Pixel centres: the left half read themselves, the right half read their left neighbour.
    centres = torch.arange(W, dtype=torch.float64)
    idx, inside = floor_indices(torch.stack([centres, centres * 0], -1), (W, 2))
    assert bool(inside.all())
    assert (idx[:50, 0] == centres[:50].long()).all() and (idx[50:, 0] == centres[50:].long() - 1).all()
    err = floor_position_error(W)
    assert err["mean"] == pytest.approx(-0.5, abs=1e-3)
    assert err["min"] == pytest.approx(-1.5, abs=1e-3) and err["max"] == pytest.approx(0.5, abs=1e-3)
    assert err["centre_shift_fraction"] == pytest.approx(0.5)


def test_floor_deviation_is_bounded_and_nonzero():
    # Smooth features: the floor variant's deviation is bounded by the feature gradient times
    # its 1.5 px worst position error, and clearly nonzero.
    H, W = 40, 60
    yy, xx = torch.meshgrid(torch.arange(H, dtype=torch.float32), torch.arange(W, dtype=torch.float32), indexing="ij")
    f = torch.stack([torch.sin(xx / 6.0), torch.cos(yy / 5.0), (xx + yy) / 50.0]).unsqueeze(0)
    g = torch.rand(1, 500, 2, generator=torch.Generator().manual_seed(1)) * 1.6 - 0.8
    ref = deformable_reference(f, g)
    floor = deformable_sample(f, g, rounding="floor")
    dev = (floor - ref).abs()
    grad_bound = max(1 / 6.0, 1 / 5.0, 2 / 50.0)
    assert float(dev.max()) <= 1.5 * grad_bound * math.sqrt(2) + 1e-6
    assert float(dev.mean()) > 1e-3
    # ... and the bilinear variant on the same data is exact.
    assert float((deformable_sample(f, g) - ref).abs().max()) < 1e-5


def test_floor_equals_exact_sampling_at_left_half_pixel_centres():
    f, _, _, _ = _data(H=6, W=8)
    pix = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [3.0, 0.0]]]).expand(2, 3, 2)
    g = to_normalized(pix, (8, 6))
    floor = deformable_sample(f, g, kernel_size=1, rounding="floor")
    ref = deformable_reference(f, g, kernel_size=1)
    assert float((floor - ref).abs().max()) < 1e-6
    right = to_normalized(torch.tensor([[[6.0, 1.0]]]).expand(2, 1, 2), (8, 6))
    assert float((deformable_sample(f, right, kernel_size=1, rounding="floor")
                  - deformable_reference(f, right, kernel_size=1)).abs().max()) > 1e-3


def test_gradcheck_bilinear_float64():
    f, g, off, m = _data(dtype=torch.float64, N=1, C=2, H=5, W=6, P=(2,), k=2)
    for t in (f, g, off, m):
        t.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda f, g, off, m: deformable_sample(f, g, off, m, kernel_size=2), (f, g, off, m))


def test_floor_gradients_reach_features_not_positions():
    f, g, off, m = _data()
    f.requires_grad_(True)
    off.requires_grad_(True)
    deformable_sample(f, g, off, m, rounding="floor").sum().backward()
    assert f.grad is not None and float(f.grad.abs().sum()) > 0
    assert off.grad is None or float(off.grad.abs().sum()) == 0


def test_offset_sources_seeded_and_bounded():
    f = torch.randn(2, 4, 6, 8, generator=torch.Generator().manual_seed(0))
    assert offset_field(f, DeformableConfig(offsets="zero")) is None
    r1 = offset_field(f, DeformableConfig(offsets="random", offset_scale=2.0, seed=3))
    r2 = offset_field(f, DeformableConfig(offsets="random", offset_scale=2.0, seed=3))
    assert r1.shape == (2, 18, 6, 8) and torch.equal(r1, r2)
    assert 1.5 < float(r1.std()) < 2.5
    net = offset_field(f, DeformableConfig(offsets="net", offset_scale=0.7, seed=1))
    assert net.shape == (2, 18, 6, 8)
    assert float(net.abs().max()) < 0.7 and float(net.abs().max()) > 0.05
    mod = OffsetNet(4, 3, modulated=True)(f)
    assert mod.shape == (2, 27, 6, 8)


def test_tap_positions_are_residual_to_projection():
    g = torch.zeros(1, 1, 2, dtype=torch.float64)
    off = torch.full((1, 1, 9, 2), 0.25, dtype=torch.float64)
    pos = tap_positions(g, (9, 7), off)
    torch.testing.assert_close(pos[0, 0, 4], torch.tensor([4.25, 3.25], dtype=torch.float64))


def _bev_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(3, 6, 10, 14, generator=gen)
    grid = torch.rand(3, 2, 5, 4, 2, generator=gen, dtype=torch.float64) * 2.6 - 1.3
    valid = (grid.abs() <= 1).all(-1)
    w = valid.double() * torch.rand(3, 2, 5, 4, generator=gen, dtype=torch.float64)
    return f, grid, w


@pytest.mark.parametrize("offsets", ["zero", "random", "net"])
@pytest.mark.parametrize("modulated", [False, True])
def test_bev_bilinear_matches_dense_reference(offsets, modulated):
    f, grid, w = _bev_inputs()
    cfg = DeformableConfig(offsets=offsets, offset_scale=1.5, modulated=modulated, seed=2)
    out = deformable_bev(f, grid, w, cfg)
    ref = deformable_bev_reference(f, grid, w, cfg)
    assert out.shape == (6, 5, 4)
    assert float((out - ref).abs().max()) < 1e-5
    per = deformable_bev(f, grid, w, cfg, per_camera=True)
    assert per.shape == (3, 6, 5, 4)
    assert float((per - deformable_bev_reference(f, grid, w, cfg, per_camera=True)).abs().max()) < 1e-5
    torch.testing.assert_close(per.sum(0), out, atol=1e-5, rtol=0)


def test_bev_floor_deviates_and_no_pairs_gives_zeros():
    f, grid, w = _bev_inputs()
    cfg = DeformableConfig(rounding="floor")
    dev = (deformable_bev(f, grid, w, cfg) - deformable_bev_reference(f, grid, w, cfg)).abs()
    assert float(dev.max()) > 1e-3
    assert float(dev.max()) < 2 * float(f.abs().max())
    zero = deformable_bev(f, grid, torch.zeros_like(w), DeformableConfig())
    assert zero.shape == (6, 5, 4) and float(zero.abs().max()) == 0.0


def test_errors_name_the_field():
    f, g, off, m = _data()
    with pytest.raises(ValueError, match="rounding"):
        deformable_sample(f, g, rounding="nearest")
    with pytest.raises(ValueError, match="offsets"):
        deformable_sample(f, g, off[..., :4, :])
    with pytest.raises(ValueError, match="mask"):
        deformable_sample(f, g, off, m[..., :1])
    with pytest.raises(ValueError, match="grid"):
        deformable_sample(f, g[:1])
    with pytest.raises(ValueError, match="offsets"):
        DeformableConfig(offsets="learned")
    with pytest.raises(ValueError, match="dilation"):
        DeformableConfig(dilation=0)
