"""A coarse depth buffer: which projected points are not hidden behind nearer points.

Two sensors at different places see different surfaces: a LiDAR on the roof sees over a
car that hides the ground from a bumper camera. Projected into the camera, such points land
on the image of the nearer surface. The buffer keeps the nearest depth per image cell
(:func:`depth_buffer`); a point is hidden when it lies more than ``relative * d + margin``
behind the nearest depth ``d`` of its own cell and the ``spread`` cells around it (a sparse
scan leaves gaps between its points; the neighbourhood closes them).

The buffer has about 200 columns of cells whatever the image size, so a view needs no more
than a few points a cell: :func:`thin_indices` keeps an even, seeded sample of at most
:data:`bevviz.checks.MAX_CAMERA_LIDAR_POINTS` of a dense cloud's points in one view.

Convention:
    Pixels (u, v) at pixel centres, depth along the optical axis in metres, as
    :mod:`bevviz.projection`; cell (i, j) covers ``i = floor((v + 0.5) / cell)``,
    ``j = floor((u + 0.5) / cell)``. See docs/conventions.md.
"""

from __future__ import annotations

import numpy as np

from bevviz.checks import MAX_CAMERA_LIDAR_POINTS, check_shape, field_error
from bevviz.projection import inside_image

__all__ = ["CELL_PX", "MARGIN_M", "MIN_DEPTH_M", "RELATIVE", "SPREAD_CELLS", "depth_buffer", "thin_indices",
           "unoccluded", "visible"]

#: Cell size (pixels of a REFERENCE_WIDTH_PX wide image; callers scale it with
#: :func:`bevviz.projection.reference_pixels`).
CELL_PX = 8.0
#: Cells on each side of a point's own cell whose nearest depth also counts.
SPREAD_CELLS = 1
#: How far behind the nearest depth a point may lie and still count as the same surface.
RELATIVE = 0.1
MARGIN_M = 0.2
#: Occluders nearer than this (metres) are ignored (the lens, the car itself).
MIN_DEPTH_M = 0.5


def thin_indices(n: int, limit: int = MAX_CAMERA_LIDAR_POINTS, seed: int = 0) -> np.ndarray | None:
    """Which of ``n`` points one view keeps: an even, seeded sample of ``limit``, in order.

    Args:
        n: Points in the view.
        limit: Most points kept (default :data:`bevviz.checks.MAX_CAMERA_LIDAR_POINTS`).
        seed: Sampling seed: the same points give the same sample (no flicker between reruns).

    Returns:
        None when ``n <= limit`` (keep every point), else sorted indices, shape (limit,) int64.
    """
    if n <= limit:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def depth_buffer(uv: np.ndarray, depth: np.ndarray, size: tuple[int, int], cell: float) -> np.ndarray:
    """Nearest depth per image cell.

    Args:
        uv: Pixels of points in front of the camera and inside the image, shape (N, 2).
        depth: Their depths, shape (N,), metres.
        size: Image size (W, H).
        cell: Cell side in pixels.

    Returns:
        (ceil(H / cell), ceil(W / cell)) float32: the smallest depth of the points in each
        cell, ``inf`` where a cell holds none.
    """
    if not (np.isfinite(cell) and cell > 0):
        raise field_error("cell", cell, "must be a finite number of pixels > 0")
    w, h = size
    rows, cols = int(np.ceil(h / cell)), int(np.ceil(w / cell))
    buf = np.full(rows * cols, np.inf, dtype=np.float32)
    i = np.clip(((uv[:, 1] + 0.5) / cell).astype(np.int64), 0, rows - 1)
    j = np.clip(((uv[:, 0] + 0.5) / cell).astype(np.int64), 0, cols - 1)
    np.minimum.at(buf, i * cols + j, depth.astype(np.float32))
    return buf.reshape(rows, cols)


def visible(uv: np.ndarray, depth: np.ndarray, occluder_uv: np.ndarray, occluder_depth: np.ndarray,
            size: tuple[int, int], cell: float, spread: int = SPREAD_CELLS, relative: float = RELATIVE,
            margin: float = MARGIN_M) -> np.ndarray:
    """Which points no occluder hides.

    Args:
        uv: Points' pixels, (M, 2).
        depth: Their depths, (M,), metres.
        occluder_uv: Pixels of everything that can hide them (often the whole scan, the
            points themselves included), (N, 2).
        occluder_depth: Their depths, (N,); occluders nearer than ``MIN_DEPTH_M`` or outside
            the image are ignored.
        size: Image size (W, H).
        cell: Cell side in pixels.
        spread: Cells on each side that also count (0: the point's own cell alone).
        relative, margin: Hidden when ``depth > d * (1 + relative) + margin``.

    Returns:
        (M,) bool, True for the visible points (a point with no occluder near is visible).
    """
    check_shape(uv, (None, 2), "uv")
    check_shape(depth, (uv.shape[0],), "depth")
    check_shape(occluder_uv, (None, 2), "occluder_uv")
    if not len(depth):
        return np.zeros(0, dtype=bool)
    w, h = size
    ok = (occluder_depth > MIN_DEPTH_M) & inside_image(occluder_uv[:, 0], occluder_uv[:, 1], w, h)
    buf = depth_buffer(occluder_uv[ok], occluder_depth[ok], size, cell)
    rows, cols = buf.shape
    padded = np.pad(buf, spread, constant_values=np.inf)
    nearest = buf.copy()
    for di in range(-spread, spread + 1):  # min over the (2 spread + 1)^2 cells around
        for dj in range(-spread, spread + 1):
            nearest = np.minimum(nearest, padded[spread + di:spread + di + rows, spread + dj:spread + dj + cols])
    i = np.clip(((uv[:, 1] + 0.5) / cell).astype(np.int64), 0, rows - 1)
    j = np.clip(((uv[:, 0] + 0.5) / cell).astype(np.int64), 0, cols - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        return ~(depth > nearest[i, j].astype(np.float64) * (1.0 + relative) + margin)


def unoccluded(uv: np.ndarray, depth: np.ndarray, size: tuple[int, int], cell: float, spread: int = SPREAD_CELLS,
               relative: float = RELATIVE, margin: float = MARGIN_M) -> np.ndarray:
    """Which of a set of points no nearer point *of the same set* hides: :func:`visible` on itself."""
    return visible(uv, depth, uv, depth, size, cell, spread, relative, margin)
