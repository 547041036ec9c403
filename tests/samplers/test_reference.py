"""Tests of bevviz.samplers.reference: the oracle wrapper and the pixel <-> grid helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bevviz.samplers import reference as ref

# ----------------------------------------------------------------------------- formulas


@pytest.mark.parametrize("width,height", [(1, 1), (4, 3), (7, 2), (100, 56)])
def test_pixel_edges_map_to_plus_minus_one_without_align_corners(width, height):
    uv = torch.tensor([[-0.5, -0.5], [width - 0.5, height - 0.5]], dtype=torch.float64)
    g = ref.pixel_to_normalized(uv, (width, height), align_corners=False)
    assert torch.equal(g, torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64))


@pytest.mark.parametrize("width,height", [(2, 2), (4, 3), (7, 2), (100, 56)])
def test_pixel_centres_of_corners_map_to_plus_minus_one_with_align_corners(width, height):
    uv = torch.tensor([[0.0, 0.0], [width - 1.0, height - 1.0]], dtype=torch.float64)
    g = ref.pixel_to_normalized(uv, (width, height), align_corners=True)
    assert torch.equal(g, torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64))


def test_exact_formulas_at_centres_and_edges():
    # W=4, H=2; pixel centre u=1 -> (2*1+1)/4 - 1 = -0.25; edge u=1.5 -> 0.0
    uv = np.array([[1.0, 0.0], [1.5, 0.5], [3.0, 1.0]])
    g = ref.pixel_to_normalized(uv, (4, 2), align_corners=False)
    np.testing.assert_array_equal(g, [[-0.25, -0.5], [0.0, 0.0], [0.75, 0.5]])
    g = ref.pixel_to_normalized(uv, (4, 2), align_corners=True)  # 2u/(W-1) - 1
    np.testing.assert_allclose(g, [[2 / 3 - 1, -1.0], [0.0, 0.0], [1.0, 1.0]], rtol=0, atol=1e-15)


def test_size_is_width_first():
    # A non-square image: u runs over W=8, v over H=2.
    uv = torch.tensor([7.5, -0.5])
    g = ref.pixel_to_normalized(uv, (8, 2))
    assert torch.equal(g, torch.tensor([1.0, -1.0]))
    back = ref.normalized_to_pixel(torch.tensor([1.0, -1.0]), (8, 2))
    assert torch.equal(back, uv)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_pixel_normalized_round_trip(align_corners, kind):
    rng = np.random.default_rng(0)
    uv = rng.uniform(-20, 120, size=(5, 7, 2))
    if kind == "torch":
        uv = torch.from_numpy(uv)
    size = (100, 56)
    g = ref.pixel_to_normalized(uv, size, align_corners)
    back = ref.normalized_to_pixel(g, size, align_corners)
    assert type(back) is type(uv)
    np.testing.assert_allclose(np.asarray(back), np.asarray(uv), rtol=0, atol=1e-12)


def test_integer_tensors_become_float():
    uv = torch.tensor([[0, 0], [3, 1]])
    g = ref.pixel_to_normalized(uv, (4, 2))
    assert g.dtype == torch.get_default_dtype()
    assert torch.equal(g, torch.tensor([[-0.75, -0.5], [0.75, 0.5]]))


def test_normalized_to_pixel_size_one_with_align_corners_is_zero():
    g = torch.tensor([[-1.0, 0.3], [0.7, 1.0]])
    assert torch.equal(ref.normalized_to_pixel(g, (1, 1), align_corners=True), torch.zeros(2, 2))


def test_pixel_to_normalized_rejects_size_one_with_align_corners():
    with pytest.raises(ValueError, match="size"):
        ref.pixel_to_normalized(torch.zeros(2), (1, 5), align_corners=True)


@pytest.mark.parametrize("bad", [(0, 3), (3,), (2.5, 3), (-1, 2), "ab"])
def test_bad_sizes_name_the_field(bad):
    with pytest.raises(ValueError, match="'size'"):
        ref.pixel_to_normalized(torch.zeros(2), bad)


def test_bad_uv_shape_names_the_field():
    with pytest.raises(ValueError, match="'uv'"):
        ref.pixel_to_normalized(torch.zeros(3, 3), (4, 4))
    with pytest.raises(ValueError, match="'grid'"):
        ref.normalized_to_pixel(torch.zeros(3), (4, 4))


# ----------------------------------------------------------------------------- stride


def test_image_to_feature_pixel_formula():
    uv = torch.tensor([[-0.5, -0.5], [1.5, 1.5], [5.5, 9.5], [3.0, 0.0]], dtype=torch.float64)
    feat = ref.image_to_feature_pixel(uv, 4)
    # edge stays the edge; the centre of image block 0 (u=1.5 at s=4) is feature pixel 0
    expected = torch.tensor(
        [[-0.5, -0.5], [0.0, 0.0], [1.0, 2.0], [0.375, -0.375]], dtype=torch.float64
    )
    assert torch.equal(feat, expected)


def test_anisotropic_stride_and_round_trip():
    rng = np.random.default_rng(1)
    uv = rng.uniform(-1, 900, size=(10, 2))
    feat = ref.image_to_feature_pixel(uv, (8, 4))
    np.testing.assert_allclose(feat[:, 0], (uv[:, 0] + 0.5) / 8 - 0.5)
    np.testing.assert_allclose(feat[:, 1], (uv[:, 1] + 0.5) / 4 - 0.5)
    np.testing.assert_allclose(ref.feature_to_image_pixel(feat, (8, 4)), uv, rtol=0, atol=1e-12)


def test_feature_pixel_normalises_like_the_image():
    # The same physical point has the same normalised coordinate in the image and in the
    # feature map (align_corners=False): the stride formula and normalisation agree.
    uv = torch.tensor([[17.25, 3.5], [0.0, 55.0], [-0.5, 63.5]], dtype=torch.float64)
    img = ref.pixel_to_normalized(uv, (128, 64))
    feat = ref.pixel_to_normalized(ref.image_to_feature_pixel(uv, 8), (16, 8))
    torch.testing.assert_close(img, feat, rtol=0, atol=1e-14)


@pytest.mark.parametrize("bad", [0, -2, float("nan"), (1, 0), (1, 2, 3), True])
def test_bad_stride_names_the_field(bad):
    with pytest.raises(ValueError, match="'stride'"):
        ref.image_to_feature_pixel(torch.zeros(2), bad)


# ----------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("width,height", [(4, 2), (8, 16), (1, 32)])
def test_integer_pixels_sample_exactly_for_power_of_two_sizes(width, height):
    x = torch.randn(1, 3, height, width, dtype=torch.float64)
    v, u = torch.meshgrid(
        torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64),
        indexing="ij",
    )
    g = ref.pixel_to_normalized(torch.stack([u, v], -1), (width, height), align_corners=False)
    out = ref.grid_sample(x, g[None], align_corners=False)
    assert torch.equal(out, x)


@pytest.mark.parametrize(
    "width,height,align_corners",
    [(5, 3, False), (5, 3, True), (100, 56, False), (100, 56, True), (7, 1, False)],
)
def test_integer_pixels_sample_pixel_values_up_to_rounding(width, height, align_corners):
    # (2u + 1) / W - 1 is not exact in floating point for most W, so "exact" only holds
    # up to the rounding of the normalised coordinate.
    x = torch.randn(2, 3, height, width, dtype=torch.float64)
    v, u = torch.meshgrid(
        torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64),
        indexing="ij",
    )
    g = ref.pixel_to_normalized(torch.stack([u, v], -1), (width, height), align_corners)
    out = ref.grid_sample(x, g.expand(2, -1, -1, -1), align_corners=align_corners)
    torch.testing.assert_close(out, x, rtol=0, atol=1e-12)


def test_grid_sample_wrapper_is_f_grid_sample():
    x = torch.randn(2, 3, 5, 6)
    g = torch.rand(2, 4, 7, 2) * 2.4 - 1.2
    for mode in ref.MODES:
        for pad in ref.PADDING_MODES:
            for ac in (False, True):
                expected = F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac)
                out = ref.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac)
                assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"mode": "linear"}, "mode"),
        ({"padding_mode": "wrap"}, "padding_mode"),
        ({"align_corners": None}, "align_corners"),
        ({"input": torch.zeros(3, 4, 5)}, "input"),
        ({"input": torch.zeros(1, 2, 0, 5)}, "input"),
        ({"input": torch.zeros(1, 2, 3, 4, dtype=torch.int64)}, "input"),
        ({"grid": torch.zeros(1, 2, 3, 3)}, "grid"),
        ({"grid": torch.zeros(2, 2, 3, 2)}, "grid"),
        ({"grid": torch.zeros(1, 2, 3, 2, dtype=torch.float64)}, "grid"),
        ({"grid": [[0.0, 0.0]]}, "grid"),
    ],
)
def test_grid_sample_validation_names_field(kwargs, field):
    args = {"input": torch.zeros(1, 2, 3, 4), "grid": torch.zeros(1, 2, 3, 2)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"'{field}'"):
        ref.grid_sample(**args)
