"""Shared fixtures for sampler tests: edge-rich grids and a NaN-aware comparison."""

from __future__ import annotations

import pytest
import torch

#: Max |diff| against F.grid_sample allowed per dtype (unit-scale features).
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


def _axis_values(size: int, align_corners: bool, nonfinite: bool) -> list[float]:
    """Normalised coordinates along one axis that stress every rule of grid_sample.

    Pixel centres and pixel edges (both conventions), exactly -1, 0, +1, values just
    inside/outside +-1, out-of-range values at several scales (reflection folds them many
    times), and optionally NaN and +-inf.
    """
    vals: list[float] = [-1.0, 0.0, 1.0, 1 - 1e-7, -1 + 1e-7, 1 + 1e-7, -1 - 1e-7]
    pixel_positions = [k * 0.5 for k in range(-2, 2 * size + 2)]  # centres and edges
    for u in pixel_positions:
        vals.append((2 * u + 1) / size - 1)  # align_corners=False
        if size > 1:
            vals.append(2 * u / (size - 1) - 1)  # align_corners=True
    vals += [1.5, -1.5, 2.0, -2.0, 3.0, -3.0, 7.25, -7.25, 1e3 + 0.37, -1e3 - 0.37]
    vals += [123456.789, -98765.4321, 1e30, -1e30]
    if nonfinite:
        vals += [float("nan"), float("inf"), float("-inf")]
    return vals


def make_edge_grid(
    n: int,
    height: int,
    width: int,
    align_corners: bool,
    dtype: torch.dtype,
    nonfinite: bool = True,
    seed: int = 0,
) -> torch.Tensor:
    """Grid ``(n, Hy, Wx, 2)`` pairing every x candidate with every y candidate.

    The first image gets the full product of edge values; further images get shuffled
    copies plus random values in ``[-1.6, 1.6]``.
    """
    gen = torch.Generator().manual_seed(seed)
    xs = torch.tensor(_axis_values(width, align_corners, nonfinite), dtype=torch.float64)
    ys = torch.tensor(_axis_values(height, align_corners, nonfinite), dtype=torch.float64)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    base = torch.stack([gx, gy], -1)  # (len(ys), len(xs), 2)
    grids = [base]
    for _ in range(1, n):
        flat = base.reshape(-1, 2).clone()
        flat[:, 0] = flat[torch.randperm(flat.shape[0], generator=gen), 0]
        rand = torch.rand(flat.shape[0], 2, generator=gen, dtype=torch.float64) * 3.2 - 1.6
        mix = torch.rand(flat.shape[0], generator=gen) < 0.3
        flat[mix] = rand[mix]
        grids.append(flat.view_as(base))
    return torch.stack(grids).to(dtype)


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> float:
    """Same shape, NaN in the same places, and max |diff| <= tol elsewhere; returns it."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    nan_a, nan_e = torch.isnan(actual), torch.isnan(expected)
    assert torch.equal(nan_a, nan_e), (
        f"NaN pattern differs at {int((nan_a != nan_e).sum())} of {actual.numel()} entries"
    )
    if actual.numel() == 0:
        return 0.0
    a, e = actual[~nan_a], expected[~nan_e]
    inf_a, inf_e = torch.isinf(a), torch.isinf(e)
    assert torch.equal(inf_a, inf_e) and torch.equal(a[inf_a], e[inf_e])
    diff = (a[~inf_a] - e[~inf_e]).abs().max().item() if (~inf_a).any() else 0.0
    assert diff <= tol, f"max |diff| {diff:.3e} > {tol:.1e}"
    return diff


@pytest.fixture
def edge_grid():
    """Factory: ``edge_grid(n, H, W, align_corners, dtype, nonfinite=True, seed=0)``."""
    return make_edge_grid


@pytest.fixture
def matches():
    """``matches(actual, expected, tol)``: NaN-aware max-|diff| assertion."""
    return assert_matches


@pytest.fixture
def tolerance():
    """Max |diff| against F.grid_sample per dtype: ``tolerance[dtype]``."""
    return TOLERANCE
