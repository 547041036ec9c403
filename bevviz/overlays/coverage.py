"""BEV coverage to draw: footprints, overlap counts, validity rules compared, sampler differences.

Convention:
    BEV arrays are (H_bev, W_bev) with row 0 at the front (largest x) and column 0 at the
    left (largest y), as :class:`bevviz.bev_grid.BEVGrid` lays them out. See
    docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import check_shape, field_error, to_numpy
from bevviz.overlays.status import STATUS_NAMES, point_status
from bevviz.projection import Projection, project_points

__all__ = [
    "cell_center", "cell_report", "channel_view", "compare_validity", "disagreement", "error_table", "footprints",
    "grid_projection", "overlap_count", "overlap_summary", "subsample_indices", "ValidityComparison"
]


def grid_projection(rig: Rig, grid: BEVGrid, eps: float = 1e-5, bounds: str = "pixel",
                    dtype: torch.dtype = torch.float32) -> Projection:
    """Project every reference point of ``grid`` into every camera.

    Returns:
        :class:`bevviz.projection.Projection` with fields of shape (N_cam, Z, H_bev, W_bev).
    """
    return project_points(grid.points(dtype), rig, eps=eps, bounds=bounds, dtype=dtype)


def cell_center(grid: BEVGrid, row: int, col: int) -> tuple[float, float]:
    """Ego (x, y) of the centre of cell (row, col)."""
    if not (0 <= row < grid.height and 0 <= col < grid.width):
        raise field_error("BEV cell", (row, col), f"outside the {grid.height} x {grid.width} grid")
    res = grid.resolution
    return grid.x_range[1] - (row + 0.5) * res, grid.y_range[1] - (col + 0.5) * res


def cell_report(rig: Rig, grid: BEVGrid, row: int, col: int, eps: float = 1e-5,
                bounds: str = "pixel") -> list[dict]:
    """Where every pillar point of BEV cell (row, col) lands in every camera, and why not.

    Returns:
        One dict per (camera, pillar height) in rig order: ``camera``, ``x``, ``y``, ``z``,
        ``u``, ``v``, ``depth`` and ``status`` (``"valid"``, ``"behind"`` or ``"outside"``).
    """
    x, y = cell_center(grid, row, col)
    pts = np.array([[x, y, z] for z in grid.z_values])  # (Z, 3)
    proj = project_points(pts, rig, eps=eps, bounds=bounds)
    status = point_status(proj)
    uv, depth = to_numpy(proj.uv), to_numpy(proj.depth)
    rows = []
    for c, name in enumerate(rig.names):
        for k, z in enumerate(grid.z_values):
            rows.append({
                "camera": name, "x": round(x, 3), "y": round(y, 3), "z": round(z, 3),
                "u": float(uv[c, k, 0]), "v": float(uv[c, k, 1]), "depth": float(depth[c, k]),
                "status": STATUS_NAMES[status[c, k]],
            })
    return rows


def footprints(proj: Projection) -> np.ndarray:
    """Per-camera BEV footprints: a cell is covered when any of its pillar points is valid.

    Args:
        proj: Projection of a grid's points, fields of shape (N_cam, Z, H_bev, W_bev).

    Returns:
        Shape (N_cam, H_bev, W_bev), bool.
    """
    valid = to_numpy(proj.valid).astype(bool)
    if valid.ndim != 4:
        raise field_error("projection", valid.shape, "expected valid of shape (N_cam, Z, H_bev, W_bev)")
    return valid.any(axis=1)


def overlap_count(footprint: np.ndarray) -> np.ndarray:
    """How many cameras see each BEV cell (0 = blind spot, 2+ = seam), shape (H_bev, W_bev)."""
    return np.asarray(footprint).astype(np.int32).sum(axis=0)


def overlap_summary(count: np.ndarray) -> dict[str, float]:
    """Shares (in %) of BEV cells seen by 0, exactly 1 and 2+ cameras."""
    n = max(count.size, 1)
    return {"blind %": 100.0 * float((count == 0).sum()) / n,
            "single %": 100.0 * float((count == 1).sum()) / n,
            "seam %": 100.0 * float((count >= 2).sum()) / n}


@dataclass(frozen=True)


class ValidityComparison:
    """Footprints under two validity settings (eps, bounds) and where they differ.

    Attributes:
        a, b: Footprints under settings A and B, shape (N_cam, H_bev, W_bev), bool.
        differs: Cells where any camera's validity differs for any pillar point,
            shape (H_bev, W_bev), bool.
        points_differ: Per camera, the number of reference points whose validity differs,
            shape (N_cam,).
    """

    a: np.ndarray
    b: np.ndarray
    differs: np.ndarray
    points_differ: np.ndarray

    @property
    def seen(self) -> np.ndarray:
        """Cells some camera sees under A or B, shape (H_bev, W_bev), bool."""
        return self.a.any(axis=0) | self.b.any(axis=0)

    @property
    def cells_differ(self) -> np.ndarray:
        """Per camera, the number of cells whose footprint membership differs, (N_cam,)."""
        return (self.a != self.b).reshape(self.a.shape[0], -1).sum(axis=1)


def compare_validity(rig: Rig, grid: BEVGrid, setting_a: tuple[float, str],
                     setting_b: tuple[float, str]) -> ValidityComparison:
    """Compare validity under two (eps, bounds) settings, e.g. pixel-centre bounds vs
    BEVFormer's strict 0 < u/W < 1.

    Args:
        rig: The cameras.
        grid: The BEV grid.
        setting_a: (eps, bounds) of setting A.
        setting_b: (eps, bounds) of setting B.
    """
    pa = grid_projection(rig, grid, eps=setting_a[0], bounds=setting_a[1])
    pb = grid_projection(rig, grid, eps=setting_b[0], bounds=setting_b[1])
    va, vb = to_numpy(pa.valid).astype(bool), to_numpy(pb.valid).astype(bool)
    diff = va != vb  # (N, Z, H, W)
    return ValidityComparison(a=va.any(1), b=vb.any(1), differs=diff.any(axis=(0, 1)),
                              points_differ=diff.reshape(diff.shape[0], -1).sum(1))


def disagreement(maps: dict[str, np.ndarray], reference: str | None = None) -> np.ndarray:
    """Largest absolute difference between any of several BEV maps, per cell.

    Args:
        maps: Name -> map of shape (C, H_bev, W_bev) (all the same shape).
        reference: When given, compare every map with this one only; otherwise all pairs.

    Returns:
        Shape (H_bev, W_bev): max over channels and pairs of |m_i - m_j|.
    """
    arrays = {k: to_numpy(v).astype(np.float64) for k, v in maps.items()}
    keys = list(arrays)
    if reference is not None:
        pairs = [(reference, k) for k in keys if k != reference]
    else:
        pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
    first = arrays[keys[0]]
    out = np.zeros(first.shape[-2:])
    for a, b in pairs:
        out = np.maximum(out, np.abs(arrays[a] - arrays[b]).max(axis=0))
    return out


def error_table(maps: dict[str, np.ndarray], reference: str) -> list[dict]:
    """Max and mean |map - reference| for every map (the reference's own row is zero).

    Args:
        maps: Name -> array (all the same shape).
        reference: Key of the reference map.

    Returns:
        One dict per map, in ``maps`` order: ``name``, ``max |diff|``, ``mean |diff|``.
    """
    ref = to_numpy(maps[reference]).astype(np.float64)
    rows = []
    for name, m in maps.items():
        d = np.abs(to_numpy(m).astype(np.float64) - ref)
        rows.append({"name": name, "max |diff|": float(d.max()) if d.size else 0.0,
                     "mean |diff|": float(d.mean()) if d.size else 0.0})
    return rows


def channel_view(features: np.ndarray | torch.Tensor, view: str | int) -> np.ndarray:
    """Reduce a BEV feature map to something to display.

    Args:
        features: Shape (C, H, W).
        view: ``"rgb"`` (the first three channels as an image; needs C >= 3), ``"norm"`` (the
            L2 norm over channels) or a channel index.

    Returns:
        Shape (H, W, 3) for ``"rgb"``, else (H, W); float64.
    """
    f = to_numpy(features).astype(np.float64)
    check_shape(f, (None, None, None), "features")
    if view == "rgb":
        if f.shape[0] < 3:
            raise field_error("view", view, f"an RGB view needs 3 channels, the features have {f.shape[0]}")
        return np.moveaxis(f[:3], 0, -1)
    if view == "norm":
        return np.sqrt((f ** 2).sum(0))
    c = int(view)
    if not 0 <= c < f.shape[0]:
        raise field_error("channel", view, f"must be in [0, {f.shape[0] - 1}]")
    return f[c]


def subsample_indices(mask: np.ndarray, max_points: int, seed: int = 0) -> np.ndarray:
    """Flat indices of at most ``max_points`` True entries of ``mask``, in a seeded random
    order, so that every prefix is itself an even sample (``idx[:n]`` for any ``n``).

    Deterministic for a given mask and seed, so overlays do not flicker between reruns.
    """
    idx = np.flatnonzero(np.asarray(mask))
    order = np.random.default_rng(seed).permutation(idx.size)[:max_points]
    return idx[order]
