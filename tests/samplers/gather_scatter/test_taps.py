"""bevviz.samplers.gather_scatter.taps: stage 1 (taps, then a gather equals grid_sample) and the
index dtype, with F.grid_sample as the oracle."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.reference import MODES, PADDING_MODES

DTYPES = [torch.float32, torch.float64]


def _features(n, c, h, w, dtype, seed=0):
    return torch.randn(n, c, h, w, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _oracle(x, g, mode, padding_mode, align_corners):
    return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def _tol(mode, dtype, tolerance):
    # nearest is a pure gather: it must be bit-exact, ties at pixel edges included.
    return 0.0 if mode == "nearest" else tolerance[dtype]


# ----------------------------------------------------------------------------- two stages


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
def test_gather_points_equals_grid_sample(padding_mode, align_corners, dtype, edge_grid, matches,
                                          tolerance):
    x = _features(2, 5, 4, 6, dtype)
    pts = edge_grid(2, 4, 6, align_corners, dtype).reshape(2, -1, 2)
    res = gs.gather_points(x, pts, padding_mode, align_corners)
    assert res.indices.shape == res.weights.shape == res.valid.shape == (2, pts.shape[1], 4)
    assert res.indices.dtype == torch.int32 and res.valid.dtype == torch.bool
    assert res.table.shape == (2 * 4 * 6 + 1, 5) and torch.all(res.table[-1] == 0)
    expected = _oracle(x, pts[:, :, None], "bilinear", padding_mode, align_corners)[..., 0]
    matches(res.values(), expected.transpose(1, 2), tolerance[dtype])
    # invalid taps point at the sentinel and weigh nothing (NaN only for non-finite points)
    assert torch.all(res.indices[~res.valid] == 2 * 4 * 6)
    finite = torch.isfinite(pts).all(-1, keepdim=True).expand_as(res.weights)
    assert torch.all(res.weights[~res.valid & finite] == 0)


@pytest.mark.parametrize("mode", MODES)
def test_compute_taps_then_gather_equals_grid_sample(mode, edge_grid, matches, tolerance):
    x = _features(3, 4, 5, 3, torch.float64)
    pts = edge_grid(3, 5, 3, True, torch.float64).reshape(3, -1, 2)
    taps = gs.compute_taps(pts, 5, 3, mode, "reflection", True)
    assert taps.num_taps == {"nearest": 1, "bilinear": 4, "bicubic": 16}[mode]
    assert taps.sentinel == 3 * 5 * 3
    expected = _oracle(x, pts[:, :, None], mode, "reflection", True)[..., 0].transpose(1, 2)
    matches(gs.gather(x, taps), expected, _tol(mode, torch.float64, tolerance))


def test_bilinear_taps_by_hand():
    # features 1 x 1 x 2 x 3 with values 0..5; rows y=0: 0 1 2, y=1: 3 4 5
    x = torch.arange(6.0).view(1, 1, 2, 3)
    pts = torch.tensor([[[0.25, 0.5], [-0.75, 0.0], [2.0, 1.0]]])  # pixel (u, v)
    taps = gs.bilinear_taps(pts, 2, 3, coords="pixel")
    assert taps.indices.tolist() == [[[0, 1, 3, 4], [6, 0, 6, 3], [5, 6, 6, 6]]]
    assert taps.valid.tolist() == [[[True] * 4, [False, True, False, True],
                                    [True, False, False, False]]]
    assert taps.weights.tolist() == [[[0.375, 0.125, 0.375, 0.125], [0.0, 0.25, 0.0, 0.0],
                                      [1.0, 0.0, 0.0, 0.0]]]
    assert gs.gather(x, taps).flatten().tolist() == [1.75, 0.0, 5.0]


def test_indices_of_second_image_are_offset():
    pts = torch.tensor([[[1.0, 1.0]], [[1.0, 1.0]]])
    taps = gs.bilinear_taps(pts, 3, 4, coords="pixel", padding_mode="border")
    assert taps.indices[:, 0, 0].tolist() == [5, 12 + 5]


@pytest.mark.parametrize("align_corners", [False, True])
def test_integer_pixel_coords_sample_pixels_exactly(align_corners):
    x = _features(2, 3, 5, 7, torch.float32)
    v, u = torch.meshgrid(torch.arange(5.0), torch.arange(7.0), indexing="ij")
    pts = torch.stack([u, v], -1).reshape(1, -1, 2).expand(2, -1, -1)
    res = gs.gather_points(x, pts, "zeros", align_corners, coords="pixel")
    assert torch.equal(res.values(), x.permute(0, 2, 3, 1).reshape(2, -1, 3))


# ----------------------------------------------------------------------------- index dtype


def test_index_dtype_bound():
    assert gs.index_dtype(0) == torch.int32
    assert gs.index_dtype(2**31 - 1) == torch.int32
    assert gs.index_dtype(2**31) == torch.int64


@pytest.mark.parametrize(
    "n,height,width,dtype",
    [(2, 693, 1549411, torch.int32), (2, 2**15, 2**15, torch.int64)],
    ids=["2**31-2", "2**31"],
)
def test_indices_at_the_int32_limit(n, height, width, dtype):
    # Pure geometry, so huge feature maps need no feature memory.
    num_rows = n * height * width
    pts = torch.tensor([[0.0, 0.0], [width - 2.0, height - 1.0], [width - 1.5, height - 1.0],
                        [-3.0, 0.0]], dtype=torch.float64).expand(n, -1, -1)
    taps = gs.bilinear_taps(pts, height, width, coords="pixel")
    assert taps.indices.dtype == dtype and taps.sentinel == num_rows
    last = n - 1
    base = last * height * width + (height - 1) * width
    assert taps.indices[last, :, 0].tolist() == [last * height * width, base + width - 2,
                                                 base + width - 2, num_rows]
    assert taps.indices[last, 2, 1].item() == base + width - 1
    assert taps.indices[last, 2, 2:].tolist() == [num_rows, num_rows]  # row y = H is outside
    assert taps.valid[last, 3].tolist() == [False, False, False, False]


def test_int64_fallback_for_many_images():
    pts = torch.tensor([[[1.0, 1.0]]] * 3, dtype=torch.float64)
    taps = gs.bilinear_taps(pts, 2**15, 2**15, coords="pixel")  # N*H*W = 3 * 2**30
    assert taps.indices.dtype == torch.int64
    assert taps.indices[2, 0, 0].item() == 2 * 2**30 + 2**15 + 1
