"""BEV grid: metric ranges, resolution and pillar heights -> 3D reference points.

Convention:
    Ego frame x forward, y left, z up. The grid is stored and displayed as seen from above
    with the car pointing up: row 0 is the far front (largest x), column 0 is the far left
    (largest y). Cell (i, j) has its centre at
    ``x = x_max - (i + 0.5) * res``, ``y = y_max - (j + 0.5) * res``.
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

import numpy as np
import torch

from bevviz.checks import (
    MAX_BEV_POINTS,
    MAX_BEV_SIDE,
    MIN_BEV_RESOLUTION,
    as_float_array,
    check_at_most,
    field_error,
    limit_error,
)

# BEVFormer on nuScenes: pc_range z in [-5, 3] with 4 points per pillar.
BEVFORMER_Z_RANGE = (-5.0, 3.0)


def pillar_heights(z_min: float = BEVFORMER_Z_RANGE[0], z_max: float = BEVFORMER_Z_RANGE[1],
                   num_points: int = 4) -> tuple[float, ...]:
    """Pillar heights spread as BEVFormer's ``get_reference_points`` spreads them.

    BEVFormer samples ``linspace(0.5, Z - 0.5, n) / Z`` of the z range ``Z = z_max - z_min``,
    i.e. ``z_min + linspace(0.5, Z - 0.5, n)`` metres; for [-5, 3] and n = 4:
    (-4.5, -2.1667, 0.1667, 2.5).
    """
    if num_points < 1:
        raise field_error("num_points", num_points, "a pillar needs at least one point")
    span = z_max - z_min
    if span <= 1.0 and num_points > 1:
        raise field_error("z range", (z_min, z_max), "must span more than 1 m for BEVFormer's spread")
    return tuple(float(z) for z in z_min + np.linspace(0.5, span - 0.5, num_points))


@dataclass(frozen=True)
class BEVGrid:
    """A BEV grid of pillars.

    Args:
        x_range: (x_min, x_max) metres along ego x (forward).
        y_range: (y_min, y_max) metres along ego y (left).
        z_values: Heights (metres, ego z) of the points in each pillar, length Z.
        resolution: Cell size in metres.

    Defaults are BEVFormer's nuScenes setting: 200 x 200 cells of 0.512 m over
    [-51.2, 51.2] m, 4 pillar points over z in [-5, 3].

    Raises:
        InputError: naming the field and the value: a range not (min, max) or not a whole
            number of at least one cell, no finite height, a resolution not finite or finer
            than :data:`bevviz.checks.MIN_BEV_RESOLUTION`, more than
            :data:`bevviz.checks.MAX_BEV_SIDE` cells along a side, or more than
            :data:`bevviz.checks.MAX_BEV_POINTS` points (cells x heights). Nothing of the
            grid's size is allocated before these checks.
    """

    x_range: tuple[float, float] = (-51.2, 51.2)
    y_range: tuple[float, float] = (-51.2, 51.2)
    z_values: tuple[float, ...] = pillar_heights()
    resolution: float = 0.512

    def __post_init__(self) -> None:
        for name in ("x_range", "y_range"):
            value = getattr(self, name)
            arr = as_float_array(value, name)
            if arr.shape != (2,) or not np.isfinite(arr).all() or arr[1] <= arr[0]:
                raise field_error(name, value, "must be (min, max) with max > min, finite")
            object.__setattr__(self, name, (float(arr[0]), float(arr[1])))
        if isinstance(self.z_values, Sized):  # before converting: a huge sequence fails fast
            check_at_most(len(self.z_values), MAX_BEV_POINTS, "MAX_BEV_POINTS", "z_values",
                          shown=f"{len(self.z_values)} heights")
        zs = tuple(float(z) for z in np.atleast_1d(as_float_array(self.z_values, "z_values")))
        if not zs or not all(np.isfinite(zs)):
            raise field_error("z_values", self.z_values, "need at least one finite height")
        object.__setattr__(self, "z_values", zs)
        res = as_float_array(self.resolution, "resolution")
        if res.shape != () or not np.isfinite(res) or res <= 0:
            raise field_error("resolution", self.resolution, "must be finite and > 0")
        res = float(res)
        if res < MIN_BEV_RESOLUTION:
            raise field_error("resolution", res, f"finer than MIN_BEV_RESOLUTION = {MIN_BEV_RESOLUTION} m")
        object.__setattr__(self, "resolution", res)
        for name, (lo, hi) in (("x_range", self.x_range), ("y_range", self.y_range)):
            cells = (hi - lo) / res  # finite ranges can still span inf (-1e308, 1e308)
            if not np.isfinite(cells):
                raise field_error(name, (lo, hi), f"span is not a finite number of {res} m cells")
            if cells < 1 - 1e-6:
                raise field_error(name, (lo, hi), f"span of {hi - lo} m is less than one {res} m cell; "
                                                  "a grid needs at least one cell")
            if abs(cells - round(cells)) > 1e-6:
                raise field_error(name, (lo, hi), f"span is not a whole number of {res} m cells ({cells:.4f})")
            if round(cells) > MAX_BEV_SIDE:
                raise limit_error(name, f"{round(cells)} cells", "MAX_BEV_SIDE", MAX_BEV_SIDE)
        points = self.height * self.width * self.num_z
        check_at_most(points, MAX_BEV_POINTS, "MAX_BEV_POINTS", "resolution",
                      shown=f"{self.height} x {self.width} cells x {self.num_z} heights = {points} points")

    @property
    def height(self) -> int:
        """H_bev: number of rows (along x)."""
        return int(round((self.x_range[1] - self.x_range[0]) / self.resolution))

    @property
    def width(self) -> int:
        """W_bev: number of columns (along y)."""
        return int(round((self.y_range[1] - self.y_range[0]) / self.resolution))

    @property
    def shape(self) -> tuple[int, int]:
        """(H_bev, W_bev)."""
        return self.height, self.width

    @property
    def num_z(self) -> int:
        """Z: points per pillar."""
        return len(self.z_values)

    def with_z(self, z_values) -> BEVGrid:
        """The same grid with other pillar heights (e.g. ``(0.0,)`` for the ground plane)."""
        return BEVGrid(self.x_range, self.y_range, tuple(z_values), self.resolution)

    def cell_centers(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """Cell-centre coordinates: x per row, shape (H_bev,), decreasing; y per column,
        shape (W_bev,), decreasing (left of the car is on the left of the display)."""
        res = self.resolution
        xs = self.x_range[1] - (torch.arange(self.height, dtype=dtype) + 0.5) * res
        ys = self.y_range[1] - (torch.arange(self.width, dtype=dtype) + 0.5) * res
        return xs, ys

    def points(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """3D reference points at every cell centre and pillar height.

        Returns:
            Points in the ego frame, shape (Z, H_bev, W_bev, 3).
        """
        xs, ys = self.cell_centers(dtype)
        zs = torch.tensor(self.z_values, dtype=dtype)
        Z, H, W = len(zs), len(xs), len(ys)
        return torch.stack([
            xs.view(1, H, 1).expand(Z, H, W),
            ys.view(1, 1, W).expand(Z, H, W),
            zs.view(Z, 1, 1).expand(Z, H, W),
        ], dim=-1)

    def cell_of(self, x: float, y: float) -> tuple[int, int] | None:
        """(row, col) of the cell holding ego point (x, y), or None outside the grid (or NaN)."""
        if not (np.isfinite(x) and np.isfinite(y)):
            return None
        if not (self.x_range[0] < x <= self.x_range[1] and self.y_range[0] < y <= self.y_range[1]):
            return None
        # Clamp: rounding in the division can give H (or W) for a point just inside the far edge.
        i = min(int(np.floor((self.x_range[1] - x) / self.resolution)), self.height - 1)
        j = min(int(np.floor((self.y_range[1] - y) / self.resolution)), self.width - 1)
        return i, j

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"x_range": list(self.x_range), "y_range": list(self.y_range),
                "z_values": list(self.z_values), "resolution": self.resolution}
