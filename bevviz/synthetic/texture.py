"""The painted ground texture (1200 x 1200 texels of 0.1 m) and known points on its markings.

Convention:
    Stored as BEV is displayed: row 0 is the front (max x), column 0 the left (max y); texel
    (i, j) has its centre at ``x = x_max - (i + 0.5) * res``, ``y = y_max - (j + 0.5) * res``
    (as :class:`~bevviz.bev_grid.BEVGrid`). See docs/conventions.md.
"""

from __future__ import annotations

import math
from functools import lru_cache

import cv2
import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.synthetic.layout import (
    ASPHALT,
    CHECKER,
    FAR_GROUND,
    LABEL,
    LABEL_PLATE,
    LEFT_SIDEWALK_Y,
    RIGHT_SIDEWALK_Y,
    RING,
    ROAD_Y,
    SIDEWALK,
    SIDEWALK_JOINT,
    TEXTURE_EXTENT,
    TEXTURE_RESOLUTION,
    TILE_PALETTE,
    road_markings,
)

__all__ = [
    "build_ground_texture", "ground_texture", "lane_marking_points", "texture_grid"
]


def texture_grid(extent: float = TEXTURE_EXTENT, resolution: float = TEXTURE_RESOLUTION) -> BEVGrid:
    """The metric extent of the ground texture as a one-height :class:`BEVGrid` (z = 0)."""
    return BEVGrid((-extent, extent), (-extent, extent), (0.0,), resolution)


def _to_texel(grid: BEVGrid, x: float, y: float) -> tuple[float, float]:
    """Continuous (col, row) texel coordinates of world (x, y) (texel centres at integers)."""
    return (grid.y_range[1] - y) / grid.resolution - 0.5, (grid.x_range[1] - x) / grid.resolution - 0.5


def _put_label(img: np.ndarray, grid: BEVGrid, text: str, x: float, y: float) -> None:
    """Draw ``text`` on a light plate centred at world (x, y), readable in BEV display
    orientation (front up)."""
    font, scale, thick = cv2.FONT_HERSHEY_SIMPLEX, 0.7, 2
    (tw, th), base = cv2.getTextSize(text, font, scale, thick)
    c, r = _to_texel(grid, x, y)
    x0, y0 = int(round(c - tw / 2)), int(round(r + th / 2))
    cv2.rectangle(img, (x0 - 4, y0 - th - 4), (x0 + tw + 4, y0 + base + 2), LABEL_PLATE, -1)
    cv2.putText(img, text, (x0, y0), font, scale, LABEL, thick, cv2.LINE_AA)


def build_ground_texture(extent: float = TEXTURE_EXTENT,
                         resolution: float = TEXTURE_RESOLUTION) -> tuple[np.ndarray, BEVGrid]:
    """Paint the ground texture.

    Args:
        extent: Half size of the square covered, metres.
        resolution: Metres per texel.

    Returns:
        ``(texture, grid)``: RGB uint8 of shape (H_t, W_t, 3) with H_t = W_t =
        2 * extent / resolution, and its extent as a :class:`BEVGrid` (z = 0).

    Convention:
        Row 0 = front (max x), column 0 = left (max y); texel centres as in BEVGrid.
    """
    grid = texture_grid(extent, resolution)
    xs, ys = (t.numpy() for t in grid.cell_centers())
    X, Y = xs[:, None], ys[None, :]  # (H, 1), (1, W)
    img = np.empty((grid.height, grid.width, 3), np.uint8)
    img[:] = FAR_GROUND

    def paint(mask: np.ndarray, color) -> None:
        img[np.broadcast_to(mask, img.shape[:2])] = color

    # Left of the road: 1 m metric checker.
    left = Y > LEFT_SIDEWALK_Y[1]
    parity = (np.floor(X) + np.floor(Y)).astype(np.int64) % 2
    paint(left & (parity == 0), CHECKER[0])
    paint(left & (parity == 1), CHECKER[1])
    # Right of the road: 2 m coloured tiles, colour from a fixed hash of the tile index.
    right = Y < RIGHT_SIDEWALK_Y[0]
    ti, tj = np.floor(X / 2.0).astype(np.int64), np.floor(Y / 2.0).astype(np.int64)
    tile = (ti * 5 + tj * 3 + (ti * tj) % 7) % len(TILE_PALETTE)
    for k, color in enumerate(TILE_PALETTE):
        paint(right & (tile == k), color)
    # Sidewalks with 1 m paving joints.
    for y0, y1 in (RIGHT_SIDEWALK_Y, LEFT_SIDEWALK_Y):
        band = (Y > y0) & (Y < y1)
        paint(band, SIDEWALK)
        joint = (np.abs(X - np.round(X)) < 0.06) | (np.abs(Y - np.round(Y)) < 0.06)
        paint(band & joint, SIDEWALK_JOINT)
    road = (Y > ROAD_Y[0]) & (Y < ROAD_Y[1])
    paint(road, ASPHALT)
    # Mottled asphalt (fixed seed): smooth +-6 level variation on a 1 m lattice, so the
    # road carries texture for photometric seam checks.
    rng = np.random.default_rng(20240601)
    n = int(round(2 * extent)) + 2
    lattice = rng.uniform(-6.0, 6.0, (n, n)).astype(np.float32)
    mottle = cv2.resize(lattice, (grid.width, grid.height), interpolation=cv2.INTER_LINEAR)
    rows = np.nonzero(np.broadcast_to(road, img.shape[:2]))
    img[rows] = np.clip(img[rows].astype(np.float32) + mottle[rows][:, None], 0, 255).astype(np.uint8)
    # 10 m rings around the origin, with distance labels.
    rho = np.hypot(X, Y)
    for r in range(10, int(extent) + 1, 10):
        paint(np.abs(rho - r) < 0.1, RING)
    for r in range(10, int(extent), 10):  # labels beside the road, never on it
        for bearing in ((90.0, -90.0) if r < 20 else (60.0, 120.0, -60.0, -120.0)):
            b = math.radians(bearing)
            _put_label(img, grid, f"{r} m", (r + 2.2) * math.cos(b), (r + 2.2) * math.sin(b))
    # Painted markings last, so their texels keep their colour.
    for m in road_markings():
        paint((X > m.x[0]) & (X < m.x[1]) & (Y > m.y[0]) & (Y < m.y[1]), m.color)
    return img, grid


@lru_cache(maxsize=2)


def _cached_texture(extent: float, resolution: float) -> tuple[np.ndarray, BEVGrid]:
    img, grid = build_ground_texture(extent, resolution)
    img.setflags(write=False)
    return img, grid


def ground_texture() -> tuple[np.ndarray, BEVGrid]:
    """The world's ground texture (cached, read-only).

    Returns:
        ``(texture, grid)``: RGB uint8 (H_t, W_t, 3) = (1200, 1200, 3) at 0.1 m/texel over
        x, y in [-60, 60] m, and that extent as a :class:`BEVGrid` with ``z_values=(0.0,)``.

    Convention:
        Same display orientation as :class:`BEVGrid`: row 0 = front (max x), column 0 =
        left (max y).
    """
    return _cached_texture(TEXTURE_EXTENT, TEXTURE_RESOLUTION)


def lane_marking_points(inset: float = 0.15) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Known points on painted markings, with their paint colour.

    For every marking: its centre, and its four corners moved ``inset`` metres inwards
    (clamped to the marking's half size); for long solid lines, points every 1.5 m along
    the line's centre. All lie on the ground (z = 0) and within 55 m of the origin along
    x and y (beyond, the renderer fades the texture into the far-ground colour).

    Args:
        inset: How far inside each edge the corner points sit, metres.

    Returns:
        ``(points, colors, kinds)``: world-frame points, shape (N, 3); their paint colour,
        RGB uint8, shape (N, 3); the marking kind of each point (list of N str).

    Convention:
        World frame; equal to the ego frame at the identity ego pose.
    """
    pts, cols, kinds = [], [], []
    for m in road_markings():
        cx, cy = (m.x[0] + m.x[1]) / 2, (m.y[0] + m.y[1]) / 2
        ix = min(inset, (m.x[1] - m.x[0]) / 2)
        iy = min(inset, (m.y[1] - m.y[0]) / 2)
        cand = [(cx, cy)] + [(x, y) for x in (m.x[0] + ix, m.x[1] - ix) for y in (m.y[0] + iy, m.y[1] - iy)]
        if m.x[1] - m.x[0] > 6.0:
            cand += [(float(x), cy) for x in np.arange(math.ceil(m.x[0] / 1.5) * 1.5, m.x[1], 1.5)
                     if m.x[0] + ix <= x <= m.x[1] - ix]
        for x, y in dict.fromkeys(cand):  # ordered de-duplication
            if max(abs(x), abs(y)) > TEXTURE_EXTENT - 5.0:
                continue
            pts.append((x, y, 0.0))
            cols.append(m.color)
            kinds.append(m.kind)
    return np.array(pts, float), np.array(cols, np.uint8), kinds
