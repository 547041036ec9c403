"""Tests for bevviz.bev_grid: BEVFormer defaults, cell centres, display orientation, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bevviz.bev_grid import BEVGrid, pillar_heights


def bevformer_reference_z(num_points: int = 4, z_min: float = -5.0, z_max: float = 3.0) -> np.ndarray:
    """BEVFormer's get_reference_points('3d') heights, rewritten here: normalised
    ``linspace(0.5, Z - 0.5, n) / Z`` with Z = 8, then de-normalised with pc_range in
    point_sampling: ``z * (z_max - z_min) + z_min``."""
    Z = 8
    zs = np.linspace(0.5, Z - 0.5, num_points) / Z
    return zs * (z_max - z_min) + z_min


# --- BEVFormer defaults ---------------------------------------------------------------------

def test_bevformer_defaults():
    grid = BEVGrid()
    assert grid.shape == (200, 200) and grid.height == 200 and grid.width == 200
    assert grid.resolution == 0.512
    assert grid.x_range == (-51.2, 51.2) and grid.y_range == (-51.2, 51.2)
    np.testing.assert_allclose(grid.z_values, [-4.5, -2.1666666667, 0.1666666667, 2.5], atol=1e-9)
    np.testing.assert_allclose(grid.z_values, bevformer_reference_z(), atol=1e-12)
    assert grid.num_z == 4


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_pillar_heights_match_bevformer_spread(n):
    np.testing.assert_allclose(pillar_heights(num_points=n), bevformer_reference_z(n), atol=1e-12)


def test_pillar_heights_other_range():
    np.testing.assert_allclose(pillar_heights(-3.0, 5.0, 3), [-2.5, 1.0, 4.5])


def test_pillar_heights_errors():
    with pytest.raises(ValueError, match=r"field 'num_points': a pillar needs at least one point \(got 0\)"):
        pillar_heights(num_points=0)
    with pytest.raises(ValueError, match=r"field 'z range': must span more than 1 m .* \(got \(0\.0, 0\.5\)\)"):
        pillar_heights(0.0, 0.5, 4)


# --- points and cell centres ----------------------------------------------------------------

def test_points_shape_and_dtype():
    grid = BEVGrid()
    pts = grid.points()
    assert pts.shape == (4, 200, 200, 3) and pts.dtype == torch.float64
    assert grid.points(torch.float32).dtype == torch.float32


def test_cell_centres():
    grid = BEVGrid()
    xs, ys = grid.cell_centers()
    assert xs.shape == (200,) and ys.shape == (200,)
    assert xs[0].item() == pytest.approx(51.2 - 0.256) and xs[-1].item() == pytest.approx(-51.2 + 0.256)
    assert ys[0].item() == pytest.approx(51.2 - 0.256) and ys[-1].item() == pytest.approx(-51.2 + 0.256)
    np.testing.assert_allclose(torch.diff(xs).numpy(), -0.512, atol=1e-12)
    np.testing.assert_allclose(torch.diff(ys).numpy(), -0.512, atol=1e-12)
    # Same set of centres as BEVFormer's (linspace(0.5, W - 0.5, W) / W) * range + min, reversed.
    bevformer = (np.linspace(0.5, 199.5, 200) / 200) * 102.4 - 51.2
    np.testing.assert_allclose(xs.numpy()[::-1], bevformer, atol=1e-12)


def test_points_are_cell_centres_at_every_height():
    grid = BEVGrid()
    pts = grid.points()
    xs, ys = grid.cell_centers()
    for k, z in enumerate(grid.z_values):
        np.testing.assert_array_equal(pts[k, :, :, 0].numpy(), xs[:, None].expand(200, 200).numpy())
        np.testing.assert_array_equal(pts[k, :, :, 1].numpy(), ys[None, :].expand(200, 200).numpy())
        assert torch.all(pts[k, :, :, 2] == z)


def test_display_orientation():
    """Row 0 is the far front (largest x), column 0 the far left (largest y)."""
    grid = BEVGrid(x_range=(-10.0, 30.0), y_range=(-20.0, 20.0), z_values=(0.0,), resolution=1.0)
    pts = grid.points()[0]
    assert pts.shape == (40, 40, 3)
    top_left = pts[0, 0]
    assert top_left[0].item() == 29.5 and top_left[1].item() == 19.5
    assert pts[-1, -1, 0].item() == -9.5 and pts[-1, -1, 1].item() == -19.5
    assert torch.all(pts[:-1, :, 0] > pts[1:, :, 0])  # going down the rows = going backwards
    assert torch.all(pts[:, :-1, 1] > pts[:, 1:, 1])  # going right in the columns = going right (y falls)


def test_non_square_grid():
    grid = BEVGrid(x_range=(0.0, 60.0), y_range=(-15.0, 15.0), z_values=(0.0, 1.0), resolution=0.5)
    assert grid.shape == (120, 60) and grid.points().shape == (2, 120, 60, 3)


# --- cell_of --------------------------------------------------------------------------------

def test_cell_of_is_inverse_of_cell_centres():
    grid = BEVGrid()
    xs, ys = grid.cell_centers()
    for i in [0, 1, 57, 100, 199]:
        for j in [0, 13, 99, 199]:
            assert grid.cell_of(xs[i].item(), ys[j].item()) == (i, j)


GRID = BEVGrid()
inside = st.floats(-51.2, 51.2, exclude_min=True)


@settings(max_examples=150, deadline=None)
@given(inside, inside)
def test_cell_of_contains_the_point(x, y):
    cell = GRID.cell_of(x, y)
    assert cell is not None
    i, j = cell
    assert 0 <= i < 200 and 0 <= j < 200
    # Cell (i, j) has its centre at x = 51.2 - (i + 0.5) * 0.512 (and the same for y).
    assert abs(51.2 - (i + 0.5) * 0.512 - x) <= 0.256 + 1e-9
    assert abs(51.2 - (j + 0.5) * 0.512 - y) <= 0.256 + 1e-9


def test_cell_of_just_inside_the_far_edges():
    """Rounding in (y_max - y) / res gave column W (and None) for points a hair inside y_min."""
    just_inside = float(np.nextafter(-51.2, 0.0))
    assert GRID.cell_of(0.0, just_inside) == (100, 199)
    assert GRID.cell_of(just_inside, 0.0) == (199, 100)


@pytest.mark.parametrize("x, y", [(np.nan, 0.0), (0.0, np.nan), (np.inf, 0.0), (0.0, -np.inf)])
def test_cell_of_non_finite_is_outside(x, y):
    assert GRID.cell_of(x, y) is None


def test_cell_of_outside_and_edges():
    grid = BEVGrid()
    assert grid.cell_of(60.0, 0.0) is None and grid.cell_of(0.0, -60.0) is None
    assert grid.cell_of(-51.2 - 1e-6, 0.0) is None
    assert grid.cell_of(51.2, 51.2) == (0, 0)  # the front-left corner belongs to cell (0, 0)
    assert grid.cell_of(10.0, 0.1) == (80, 99)  # 10 m ahead, 0.1 m left: just left of centre
    assert grid.cell_of(10.0, -0.1) == (80, 100)


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, pattern", [
    ({"x_range": (10.0, -10.0)},
     r"field 'x_range': must be \(min, max\) with max > min, finite \(got \(10\.0, -10\.0\)\)"),
    ({"y_range": (5.0, 5.0)}, r"field 'y_range': must be \(min, max\) with max > min"),
    ({"x_range": (-np.inf, 10.0)}, r"field 'x_range': .*finite \(got \(-inf, 10\.0\)\)"),
    ({"y_range": (0.0, np.nan)}, r"field 'y_range'"),
    ({"x_range": (0.0, 1.0, 2.0)}, r"field 'x_range'"),
    ({"x_range": 5.0}, r"field 'x_range': must be \(min, max\) .*\(got 5\.0\)"),
    ({"y_range": ("a", "b")}, r"field 'y_range': must be numeric \(got \('a', 'b'\)\)"),
    ({"resolution": 0.0}, r"field 'resolution': must be finite and > 0 \(got 0\.0\)"),
    ({"resolution": -0.5}, r"field 'resolution': must be finite and > 0 \(got -0\.5\)"),
    ({"resolution": np.nan}, r"field 'resolution'"),
    ({"resolution": 0.3}, r"field 'x_range': span is not a whole number of 0\.3 m cells \(341\.3333\)"),
    ({"resolution": 0.01}, r"field 'x_range': more than MAX_BEV_SIDE = 4096 \(got '10240 cells'\)"),
    ({"z_values": ()}, r"field 'z_values': need at least one finite height"),
    ({"z_values": (0.0, np.inf)}, r"field 'z_values'"),
])
def test_bad_grid_raises_named_error(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        BEVGrid(**kwargs)


# --- limits (issue 14) -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, pattern", [
    ({"resolution": 1e9}, r"field 'x_range': span of 102\.4 m is less than one 1000000000\.0 m cell; a grid needs at "
                          r"least one cell"),
    ({"resolution": 200.0}, r"field 'x_range': span of 102\.4 m is less than one 200\.0 m cell"),
    ({"resolution": 1e-3}, r"field 'resolution': finer than MIN_BEV_RESOLUTION = 0\.01 m \(got 0\.001\)"),
    ({"resolution": 1e-300}, r"field 'resolution': finer than MIN_BEV_RESOLUTION"),
    ({"x_range": (-1e308, 1e308), "resolution": 1e300},
     r"field 'x_range': span is not a finite number of 1e\+300 m cells"),
    ({"x_range": (-100.0, 100.0), "y_range": (-100.0, 100.0), "resolution": 0.05},
     r"field 'resolution': more than MAX_BEV_POINTS = 4194304 "
     r"\(got '4000 x 4000 cells x 4 heights = 64000000 points'\)"),
    ({"z_values": tuple(np.linspace(-5, 3, 4096)), "resolution": 0.8},
     r"field 'resolution': more than MAX_BEV_POINTS.*128 x 128 cells x 4096 heights"),
    ({"z_values": range(10 ** 8)},
     r"field 'z_values': more than MAX_BEV_POINTS = 4194304 \(got '100000000 heights'\)"),
    ({"resolution": "fine"}, r"field 'resolution': must be numeric"),
    ({"resolution": [0.5, 0.5]}, r"field 'resolution': must be finite and > 0"),
])
def test_grid_limits_fail_before_allocating_with_a_named_error(kwargs, pattern, allocates_at_most):
    with allocates_at_most(16), pytest.raises(ValueError, match=pattern):
        BEVGrid(**kwargs)


def test_the_largest_grids_within_the_limits_still_build():
    assert BEVGrid((-1024 * 0.1, 1024 * 0.1), (-1024 * 0.1, 1024 * 0.1), (0.0,), 0.1).shape == (2048, 2048)
    assert BEVGrid((0.0, 40.96), (0.0, 0.01), (0.0,), 0.01).shape == (4096, 1)
    assert BEVGrid((0.0, 1e6), (0.0, 1e6), (0.0,), 1e6).shape == (1, 1)


def test_with_z_and_to_dict():
    grid = BEVGrid().with_z([0.0])
    assert grid.z_values == (0.0,) and grid.points().shape == (1, 200, 200, 3)
    d = BEVGrid().to_dict()
    assert d["x_range"] == [-51.2, 51.2] and d["resolution"] == 0.512 and len(d["z_values"]) == 4
    assert BEVGrid(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}) == BEVGrid()


def test_grid_is_hashable_value():
    assert BEVGrid() == BEVGrid() and hash(BEVGrid()) == hash(BEVGrid())
    assert BEVGrid() != BEVGrid().with_z([0.0])
