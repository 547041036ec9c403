"""A known ground texture (the synthetic sample's, say) and the one way to resample it.

:class:`GroundTruth` is what the app's scenes carry and what the seam analysis compares
each camera with: bilinear samples at ground points (:meth:`GroundTruth.sample`, the
gather-scatter sampler) or nearest texels on a BEV grid (:meth:`GroundTruth.to_bev`, for
display).

Convention:
    The texture is laid out as a BEV grid in its own (world) frame: row 0 at the largest x,
    column 0 at the largest y; ground points are at z = 0. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.seams.pyramid import sample_at_pixels
from bevviz.checks import check_shape

__all__ = ["GroundTruth"]


@dataclass(frozen=True)
class GroundTruth:
    """A known BEV ground texture.

    Args:
        texture: Colours, shape (H_t, W_t, 3), uint8 or float in [0, 1]; row 0 is the far
            front, column 0 the far left (BEV display orientation).
        x_range: (x_min, x_max) metres covered by the rows (texture frame).
        y_range: (y_min, y_max) metres covered by the columns (texture frame).
        world_from_ego: Pose of the ego frame in the texture's frame, shape (4, 4) (a
            nuScenes ``ego_pose``); None = identity.

    Convention:
        Texel (i, j) has its centre at ``x = x_max - (i + 0.5) dx``, ``y = y_max - (j + 0.5)
        dy`` (as :class:`~bevviz.bev_grid.BEVGrid`).
    """

    texture: np.ndarray
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    world_from_ego: np.ndarray | None = None

    def sample(self, points_xy: torch.Tensor) -> torch.Tensor:
        """Texture colours at ego (x, y) on the ground, shape (P, 2) -> (3, P), float32 in [0, 1]."""
        tex = np.asarray(self.texture)
        check_shape(tex, (None, None, 3), "ground_truth texture")
        t = torch.from_numpy(np.ascontiguousarray(tex, dtype=np.float32) / (255.0 if tex.dtype == np.uint8 else 1.0))
        t = t.permute(2, 0, 1).contiguous()
        pts = torch.as_tensor(points_xy, dtype=torch.float64)[:, :2]
        if self.world_from_ego is not None:
            T = torch.as_tensor(np.asarray(self.world_from_ego, dtype=np.float64))
            check_shape(T, (4, 4), "world_from_ego")
            pts = pts @ T[:2, :2].T + T[:2, 3]  # ground points: z = 0
        H_t, W_t = tex.shape[:2]
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        u = (y1 - pts[:, 1]) / ((y1 - y0) / W_t) - 0.5  # columns: y decreasing
        v = (x1 - pts[:, 0]) / ((x1 - x0) / H_t) - 0.5  # rows: x decreasing
        return sample_at_pixels(t, torch.stack([u, v], -1).float(), W_t, H_t)

    def to_bev(self, grid: BEVGrid) -> np.ndarray:
        """The texture on ``grid`` (ego frame), nearest texel per cell centre.

        Args:
            grid: The BEV grid to sample it on (only its cells are used, not its heights).

        Returns:
            Shape (H_bev, W_bev, C), the texture's dtype; cells outside the texture are 0.

        Convention:
            Texel rows run along x (row 0 at ``x_max``), columns along y (column 0 at
            ``y_max``); the cell centre at z = 0 is moved by ``world_from_ego`` first. See
            docs/conventions.md.
        """
        tex = np.asarray(self.texture)
        Ht, Wt = tex.shape[:2]
        xs, ys = (c.numpy() for c in grid.cell_centers())
        pts = np.stack(np.broadcast_arrays(xs[:, None], ys[None, :], np.zeros(1)), axis=-1)  # (H, W, 3)
        if self.world_from_ego is not None:
            T = np.asarray(self.world_from_ego, dtype=np.float64)
            check_shape(T, (4, 4), "world_from_ego")
            pts = pts @ T[:3, :3].T + T[:3, 3]
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        ri = np.floor((x1 - pts[..., 0]) / (x1 - x0) * Ht).astype(np.int64)
        ci = np.floor((y1 - pts[..., 1]) / (y1 - y0) * Wt).astype(np.int64)
        inside = (ri >= 0) & (ri < Ht) & (ci >= 0) & (ci < Wt)
        out = tex[np.clip(ri, 0, Ht - 1), np.clip(ci, 0, Wt - 1)]
        out[~inside] = 0
        return out

    @classmethod
    def on_grid(cls, texture: np.ndarray, grid: BEVGrid) -> GroundTruth:
        """A texture given cell by cell on ``grid``, shape (H_bev, W_bev, 3)."""
        check_shape(np.asarray(texture), (grid.height, grid.width, 3), "ground_truth")
        return cls(np.asarray(texture), grid.x_range, grid.y_range)
