"""The procedural world: a painted ground texture, boxes standing on it, and ray casting.

The world is a flat ground plane (z = 0) carrying a painted BEV texture (a road with white
dashed and solid lane lines, a yellow centre line, stop line and crosswalks, a paved
sidewalk, coloured tiles, a 1 m metric checker and labelled 10 m rings) plus a few boxes
standing on it (cars, a truck, poles), each face in its own colour. Every feature is
defined in metres, so tests can project known ground points with the true calibration
and check that they land on pixels of the right colour. All ground-feature edges lie on
multiples of 0.1 m, i.e. on texel edges of the 0.1 m texture.

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres; at the
    identity ego pose the ego frame (x forward, y left, z up) coincides with it. See
    docs/conventions.md.
    The ground texture is stored as BEV is displayed: row 0 is the front (max x), column 0
    the left (max y); texel (i, j) has its centre at ``x = x_max - (i + 0.5) * res``,
    ``y = y_max - (j + 0.5) * res`` (as :class:`BEVGrid`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import cv2
import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.checks import as_float_array, check_shape
from bevviz.synthetic.layout import BOXES, EXPOSURE_GAINS, FAR_GROUND, VIGNETTE, Box
from bevviz.synthetic.texture import ground_texture

__all__ = [
    "BOX", "GROUND", "SKY", "cast_rays", "default_world", "Hits", "sample_ground", "World"
]


@dataclass(frozen=True, eq=False)


class World:
    """The static scene: ground texture (+ mip pyramid), boxes, sky and exposure model.

    Attributes:
        texture: Ground texture, RGB uint8, shape (H_t, W_t, 3).
        grid: Metric extent of the texture (:class:`BEVGrid`, z = 0).
        boxes: Boxes standing on the ground.
        exposure_gains: Camera name -> multiplicative gain (missing: 1.0).
        vignette: Vignetting strength (0 = none).
    """

    texture: np.ndarray
    grid: BEVGrid
    boxes: tuple[Box, ...] = BOXES
    exposure_gains: dict = field(default_factory=lambda: dict(EXPOSURE_GAINS))
    vignette: float = VIGNETTE
    mips: tuple = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_shape(self.texture, (None, None, 3), "texture")
        levels = [np.ascontiguousarray(self.texture, dtype=np.float32)]
        while min(levels[-1].shape[:2]) >= 16:
            prev = levels[-1]
            levels.append(cv2.resize(prev, (prev.shape[1] // 2, prev.shape[0] // 2),
                                     interpolation=cv2.INTER_AREA))
        object.__setattr__(self, "mips", tuple(levels))


@lru_cache(maxsize=1)


def default_world() -> World:
    """The world of the embedded sample (texture from :func:`ground_texture`, :data:`BOXES`)."""
    tex, grid = ground_texture()
    return World(tex, grid)


@dataclass(frozen=True)


class Hits:
    """Nearest intersections of rays with the world.

    Attributes:
        t: Ray parameter of the hit (distance for unit directions), shape (N,); inf for sky.
        kind: 0 sky, 1 ground, 2 box; shape (N,), int8.
        box: Index into ``world.boxes`` (-1 if not a box), shape (N,), int16.
        face: Face hit, 0..5 in :attr:`Box.face_colors` order (-1 if not a box), shape (N,).
        point: Hit point in the world frame, shape (N, 3) (undefined for sky).
    """

    t: np.ndarray
    kind: np.ndarray
    box: np.ndarray
    face: np.ndarray
    point: np.ndarray


SKY, GROUND, BOX = 0, 1, 2


def _slab(box: Box, origins: np.ndarray, dirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slab test of rays against one box.

    Args:
        box: The box.
        origins: Ray origins, shape (N, 3) (world frame).
        dirs: Ray directions, shape (N, 3).

    Returns:
        ``(t_enter, face)``, shapes (N,): entry parameter (inf where the ray misses the box
        or starts inside it) and the face entered (0..5 in :attr:`Box.face_colors` order).
    """
    R = box.rotation
    o = (origins - box.center3) @ R  # p_box = R^T (p - c), as row vectors
    d = dirs @ R
    half = np.array(box.size) / 2.0
    t_enter = np.full(len(d), -np.inf)
    t_exit = np.full(len(d), np.inf)
    face = np.zeros(len(d), np.int8)
    for k in range(3):
        dk = d[:, k]
        dk = np.where(np.abs(dk) < 1e-12, np.where(dk < 0, -1e-12, 1e-12), dk)
        t_lo, t_hi = (-half[k] - o[:, k]) / dk, (half[k] - o[:, k]) / dk
        near, far = np.minimum(t_lo, t_hi), np.maximum(t_lo, t_hi)
        better = near > t_enter
        t_enter = np.where(better, near, t_enter)
        # Entering through the -half plane (t_lo is the near one) is face 2k + 1, else 2k.
        face = np.where(better, 2 * k + (t_lo <= t_hi), face).astype(np.int8)
        t_exit = np.minimum(t_exit, far)
    hit = (t_exit >= t_enter) & (t_enter > 0)
    return np.where(hit, t_enter, np.inf), face


def cast_rays(world: World, origins, dirs) -> Hits:
    """Nearest hit of each ray with the ground plane z = 0 and the boxes.

    Args:
        world: The world.
        origins: Ray origins in the world frame, shape (N, 3) or (3,).
        dirs: Ray directions in the world frame, shape (N, 3) (need not be unit; ``t``
            is then in units of ``|dir|``).

    Returns:
        :class:`Hits` for the N rays. Boxes occlude the ground: nearest hit wins.
    """
    d = as_float_array(dirs, "dirs")
    check_shape(d, (None, 3), "dirs")
    o = np.broadcast_to(as_float_array(origins, "origins"), d.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ground = np.where(d[:, 2] < 0, -o[:, 2] / d[:, 2], np.inf)
    t_ground = np.where(t_ground > 0, t_ground, np.inf)
    t = t_ground.copy()
    kind = np.where(np.isfinite(t), GROUND, SKY).astype(np.int8)
    box_id = np.full(len(d), -1, np.int16)
    face = np.full(len(d), -1, np.int8)
    shared = np.ndim(origins) == 1  # one origin for all rays (a camera): cull by cones
    d_len = np.sqrt(np.einsum("ij,ij->i", d, d))
    for i, box in enumerate(world.boxes):
        # Cull with the bounding sphere first; the slab test runs on candidates only.
        radius = 0.5 * float(np.linalg.norm(box.size)) + 1e-6
        if shared:
            oc = box.center3 - o[0]
            dist = float(np.linalg.norm(oc))
            if dist <= radius:
                cand = np.arange(len(d))
            else:  # rays within the cone that the sphere subtends
                cos_max = math.sqrt(1.0 - (radius / dist) ** 2)
                cand = np.nonzero(d @ (oc / dist) >= cos_max * d_len)[0]
        else:
            oc = box.center3 - o  # (N, 3)
            tc = np.einsum("ij,ij->i", oc, d) / (d_len * d_len)
            dist2 = np.einsum("ij,ij->i", oc, oc) - tc * tc * d_len * d_len
            cand = np.nonzero((dist2 < radius * radius) & (tc * d_len > -radius))[0]
        if not cand.size:
            continue
        tb, fb = _slab(box, o[cand], d[cand])
        closer = tb < t[cand]
        sel = cand[closer]
        t[sel] = tb[closer]
        kind[sel] = BOX
        box_id[sel] = i
        face[sel] = fb[closer]
    with np.errstate(invalid="ignore"):
        point = o + np.where(np.isfinite(t), t, 0.0)[:, None] * d
    return Hits(t, kind, box_id, face, point)


def _bilinear(level: np.ndarray, grid: BEVGrid, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear lookup (clamped at the border) of one mip level at world (x, y), shape (N, 3)."""
    H, W = level.shape[:2]
    res_r = (grid.x_range[1] - grid.x_range[0]) / H
    res_c = (grid.y_range[1] - grid.y_range[0]) / W
    r = np.clip((grid.x_range[1] - x) / res_r - 0.5, 0.0, H - 1.0)
    c = np.clip((grid.y_range[1] - y) / res_c - 0.5, 0.0, W - 1.0)
    r0 = np.minimum(np.floor(r).astype(np.int64), H - 2)
    c0 = np.minimum(np.floor(c).astype(np.int64), W - 2)
    fr, fc = (r - r0)[:, None].astype(np.float32), (c - c0)[:, None].astype(np.float32)
    a, b = level[r0, c0], level[r0, c0 + 1]
    cc, dd = level[r0 + 1, c0], level[r0 + 1, c0 + 1]
    return (a * (1 - fc) + b * fc) * (1 - fr) + (cc * (1 - fc) + dd * fc) * fr


def sample_ground(points_xy, world: World | None = None, footprint=None) -> np.ndarray:
    """Ground colour at world points (no exposure, vignetting or haze).

    Args:
        points_xy: World (x, y) in metres, shape (N, 2) (extra trailing columns such as z
            are ignored).
        world: The world (default :func:`default_world`).
        footprint: Optional size in metres of the area each sample stands for, shape (N,)
            or scalar; selects the mip level (trilinear). ``None``: finest level (bilinear).

    Returns:
        RGB float32 in [0, 255], shape (N, 3). Outside the texture extent the ground fades
        (over the last 5 m) into a plain far-ground colour.
    """
    world = world or default_world()
    p = as_float_array(points_xy, "points_xy")
    check_shape(p, (None, None), "points_xy")
    x, y = p[:, 0], p[:, 1]
    grid = world.grid
    n_levels = len(world.mips)
    if footprint is None:
        color = _bilinear(world.mips[0], grid, x, y)
    else:
        fp = np.broadcast_to(np.asarray(footprint, float), x.shape)
        with np.errstate(divide="ignore"):
            lev = np.clip(np.log2(np.maximum(fp, 1e-9) / grid.resolution), 0.0, n_levels - 1.0)
        color = np.zeros((len(x), 3), np.float32)
        for L in range(n_levels):
            w = np.maximum(0.0, 1.0 - np.abs(lev - L)).astype(np.float32)
            sel = np.nonzero(w > 0)[0]
            if sel.size:
                color[sel] += w[sel, None] * _bilinear(world.mips[L], grid, x[sel], y[sel])
    edge = max(grid.x_range[1], -grid.x_range[0], grid.y_range[1], -grid.y_range[0])
    fade = np.clip((np.maximum(np.abs(x), np.abs(y)) - (edge - 5.0)) / 5.0, 0.0, 1.0)[:, None]
    return (color * (1 - fade) + np.float32(FAR_GROUND) * fade).astype(np.float32)
