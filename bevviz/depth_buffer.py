"""A coarse depth buffer: which projected points are not hidden behind nearer points.

Two sensors at different places see different surfaces: a LiDAR on the roof sees over a
car that hides the ground from a bumper camera. Projected into the camera, such points land
on the image of the nearer surface. The buffer keeps, per cell of ``cell_px`` pixels, the
nearest depth of any occluder (taking the minimum over the 3 x 3 cells around, so a sparse
scan still closes its surfaces), and a point is visible unless it lies more than
``rel * d + abs_m`` behind that nearest depth ``d``.

Convention:
    Pixels (u, v) at pixel centres, depth along the optical axis in metres, as
    :mod:`bevviz.projection`. See docs/conventions.md.
"""

from __future__ import annotations

import cv2
import numpy as np

from bevviz.shapes import check_shape

__all__ = ["CELL_PX", "REL_TOLERANCE", "ABS_TOLERANCE_M", "visible"]

#: Cell size (pixels at 1600 px image width; scaled with the width).
CELL_PX = 8.0
#: How far behind the nearest depth a point may lie and still count as the same surface.
REL_TOLERANCE = 0.1
ABS_TOLERANCE_M = 0.2


def visible(uv: np.ndarray, depth: np.ndarray, occluder_uv: np.ndarray, occluder_depth: np.ndarray, width: int,
            height: int, cell_px: float = CELL_PX, rel: float = REL_TOLERANCE,
            abs_m: float = ABS_TOLERANCE_M) -> np.ndarray:
    """Which points are not hidden behind the occluders.

    Args:
        uv: Points' pixels, (M, 2).
        depth: Their depths, (M,), metres.
        occluder_uv: Pixels of everything that can hide them (usually the whole scan,
            the points themselves included), (N, 2).
        occluder_depth: Their depths, (N,); occluders behind the camera (depth <= 0.5 m)
            or outside the image are ignored.
        width, height: Image size in pixels.
        cell_px: Cell size in pixels at 1600 px width (scaled with ``width``).
        rel, abs_m: Tolerance: visible unless ``depth > d_min * (1 + rel) + abs_m``.

    Returns:
        (M,) bool.
    """
    check_shape(uv, (None, 2), "uv")
    check_shape(occluder_uv, (None, 2), "occluder_uv")
    cell = cell_px * width / 1600.0
    nx, ny = int(width / cell) + 1, int(height / cell) + 1
    ok = ((occluder_depth > 0.5) & (occluder_uv[:, 0] >= -0.5) & (occluder_uv[:, 0] < width - 0.5)
          & (occluder_uv[:, 1] >= -0.5) & (occluder_uv[:, 1] < height - 0.5))
    zb = np.full((ny, nx), np.inf, dtype=np.float32)
    cx = ((occluder_uv[ok, 0] + 0.5) // cell).astype(np.int64)
    cy = ((occluder_uv[ok, 1] + 0.5) // cell).astype(np.int64)
    np.minimum.at(zb, (cy, cx), occluder_depth[ok].astype(np.float32))
    zb = cv2.erode(zb, np.ones((3, 3), np.uint8))  # the nearest over the 3 x 3 cells around
    px = np.clip(((uv[:, 0] + 0.5) // cell).astype(np.int64), 0, nx - 1)
    py = np.clip(((uv[:, 1] + 0.5) // cell).astype(np.int64), 0, ny - 1)
    limit = zb[py, px].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return ~(depth > limit * (1 + rel) + abs_m)
