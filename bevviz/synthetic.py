"""Procedural world with known ground truth and a renderer that makes ``sample_data``.

The world is a flat ground plane (z = 0) carrying a painted BEV texture (a road with white
dashed and solid lane lines, a yellow centre line, stop line and crosswalks, a paved
sidewalk, coloured tiles, a 1 m metric checker and labelled 10 m rings) plus a few
boxes standing on it (cars, a truck, poles), each face in its own colour. Every feature is
defined in metres, so tests can project known ground points with the true calibration
and check that they land on pixels of the right colour.

The renderer casts one ray per sub-pixel through any :class:`~bevviz.camera.Rig`
(vectorised numpy, no per-pixel Python loops): ground plane and oriented boxes (slab
method), nearest hit wins, sky gradient above the horizon, trilinear mip-mapped texture
lookups plus 2x2 supersampling against moire, distance haze, and a mild per-camera
exposure gain and vignetting (so seam metrics must be exposure-robust).

Run ``python -m bevviz.synthetic --out sample_data`` to regenerate the embedded sample
bit for bit: a nuScenes-format mini dataset (two scenes, one with a known miscalibrated
camera), a bevviz JSON rig with its images, and the ground texture.

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres. The ego
    frame (x forward, y left, z up) sits on the ground; at the identity ego pose the ego
    and world frames coincide (scene A, first sample, and ``sample_data/rig.json``).
    Cameras are RDF; pixels have integer coordinates at their centres, so a pixel's ray
    is ``K^-1 [u, v, 1]``. The ground texture is stored as BEV is displayed: row 0 is the
    front (max x), column 0 the left (max y); texel (i, j) has its centre at
    ``x = x_max - (i + 0.5) * res``, ``y = y_max - (j + 0.5) * res`` (as :class:`BEVGrid`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.camera import NUSCENES_CAMERAS, Camera, Rig
from bevviz.rotations import STORED_FROM_RDF, invert_transform, make_transform, matrix_to_quaternion, rpy_to_matrix
from bevviz.shapes import as_float_array, check_shape, field_error
from bevviz.storage import NUSCENES, Convention

IMAGE_SIZE = (1600, 900)  # (W, H)

#: A nuScenes-like rig: name, mounting position (ego, metres), yaw / pitch / roll (degrees;
#: yaw about ego z, positive to the left; pitch positive looking down), focal length (px).
#: Positions and focal lengths follow nuScenes scene-0061's calibrated_sensor records;
#: the back camera has the shorter focal length (wider view), as in nuScenes.
NUSCENES_LIKE_MOUNTS = (
    ("CAM_FRONT", (1.700, 0.016, 1.511), (0.0, 0.6, -0.3), 1266.4),
    ("CAM_FRONT_RIGHT", (1.551, -0.493, 1.496), (-55.0, 0.4, 0.5), 1260.8),
    ("CAM_BACK_RIGHT", (1.015, -0.481, 1.562), (-110.0, 0.8, -0.4), 1256.7),
    ("CAM_BACK", (0.028, 0.003, 1.579), (180.0, 0.9, 0.2), 809.2),
    ("CAM_BACK_LEFT", (1.036, 0.484, 1.591), (110.0, 0.5, 0.3), 1256.7),
    ("CAM_FRONT_LEFT", (1.523, 0.495, 1.510), (55.0, 0.7, -0.5), 1272.6),
)


def mounted_camera(name: str, position, yaw_pitch_roll_deg, focal: float,
                   size: tuple[int, int] = IMAGE_SIZE) -> Camera:
    """A camera mounted at ``position`` looking along yaw/pitch/roll.

    Args:
        name: Camera name.
        position: Optical centre in the ego frame, shape (3,).
        yaw_pitch_roll_deg: (yaw, pitch, roll) in degrees of the camera body (FLU axes:
            body x is the optical axis) relative to the ego frame.
        focal: fx = fy in pixels; the principal point is the image centre.
        size: Image size (W, H).

    Convention:
        ``ego_from_cam = [R_body @ flu_from_rdf | position]`` with
        ``R_body = Rz(yaw) Ry(pitch) Rx(roll)``; pitch > 0 tilts the optical axis down.
    """
    yaw, pitch, roll = np.radians(yaw_pitch_roll_deg)
    ego_from_body = rpy_to_matrix(roll, pitch, yaw)
    ego_from_cam = make_transform(ego_from_body @ STORED_FROM_RDF["FLU"], np.asarray(position, float))
    W, H = size
    K = np.array([[focal, 0.0, (W - 1) / 2.0], [0.0, focal, (H - 1) / 2.0], [0.0, 0.0, 1.0]])
    cam_from_ego = np.linalg.inv(ego_from_cam)
    cam_from_ego[3] = [0, 0, 0, 1]
    return Camera(name, K, cam_from_ego, W, H)


def nuscenes_like_rig(size: tuple[int, int] = IMAGE_SIZE) -> Rig:
    """The six-camera nuScenes-like rig of the embedded sample (true calibration)."""
    return Rig(mounted_camera(n, p, a, f, size) for n, p, a, f in NUSCENES_LIKE_MOUNTS)


# ---------------------------------------------------------------------------------------
# World definition (metres, world frame). All ground-feature edges lie on multiples of
# 0.1 m, i.e. on texel edges of the 0.1 m texture, so every texel is cleanly in or out.
# ---------------------------------------------------------------------------------------

TEXTURE_EXTENT = 60.0  # the texture covers x, y in [-60, 60] m
TEXTURE_RESOLUTION = 0.1  # metres per texel

WHITE = (240, 240, 235)
YELLOW = (235, 185, 35)
ASPHALT = (78, 78, 84)
SIDEWALK = (150, 146, 138)
SIDEWALK_JOINT = (118, 114, 108)
CHECKER = ((206, 188, 150), (92, 138, 82))
RING = (205, 60, 200)
LABEL = (20, 20, 20)
LABEL_PLATE = (236, 236, 230)
FAR_GROUND = (112, 124, 100)
SKY_HORIZON = (206, 216, 228)
SKY_ZENITH = (78, 128, 200)
TILE_PALETTE = (
    (200, 70, 60), (60, 110, 200), (70, 170, 90), (215, 140, 50),
    (140, 80, 180), (50, 170, 175), (190, 190, 70), (170, 100, 120),
)

#: Road cross-section (y ranges, metres; y is left).
ROAD_Y = (-5.9, 9.6)
RIGHT_SIDEWALK_Y = (-9.9, -5.9)
LEFT_SIDEWALK_Y = (9.6, 12.6)
#: Crosswalks (x ranges) across the whole carriageway; lane lines stop 0.5 m before them.
CROSSWALKS_X = ((12.0, 16.0), (-20.0, -16.0))
CROSSWALK_Y = (-5.3, 9.0)
STOP_LINE = ((10.8, 11.4), (-5.3, 1.7))  # (x range, y range): ego side, before the front crosswalk
DASH_LENGTH, DASH_PERIOD = 3.0, 9.0


@dataclass(frozen=True)
class Marking:
    """A painted rectangle on the ground, axis-aligned in the world frame.

    Attributes:
        kind: ``"solid"``, ``"dash"``, ``"centre"``, ``"stop"`` or ``"crosswalk"``.
        x: (x_min, x_max) metres.
        y: (y_min, y_max) metres.
        color: RGB uint8 triple.
    """

    kind: str
    x: tuple[float, float]
    y: tuple[float, float]
    color: tuple[int, int, int]


def _cut(x0: float, x1: float, gaps: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The interval [x0, x1] minus the gap intervals."""
    pieces = [(x0, x1)]
    for g0, g1 in gaps:
        out = []
        for a, b in pieces:
            if b <= g0 or a >= g1:
                out.append((a, b))
                continue
            if a < g0:
                out.append((a, g0))
            if b > g1:
                out.append((g1, b))
        pieces = out
    return [(round(a, 6), round(b, 6)) for a, b in pieces if b - a > 1e-6]


def road_markings() -> list[Marking]:
    """All painted road markings of the world, in drawing order.

    Returns:
        Markings (world frame): solid white edge lines, white dashed lane dividers, the
        yellow centre line, a white stop line and two zebra crosswalks.
    """
    lim = TEXTURE_EXTENT - 0.5
    gaps = [(a - 0.5, b + 0.5) for a, b in CROSSWALKS_X]
    marks: list[Marking] = []
    for y in ((-5.6, -5.3), (9.0, 9.3)):  # outer edge lines
        marks += [Marking("solid", seg, y, WHITE) for seg in _cut(-lim, lim, gaps)]
    marks += [Marking("centre", seg, (1.7, 2.0), YELLOW) for seg in _cut(-lim, lim, gaps)]
    for y in ((-2.0, -1.7), (5.4, 5.7)):  # lane dividers: 3 m dashes every 9 m
        for k in range(-6, 7):
            c = DASH_PERIOD * k
            for seg in _cut(c - DASH_LENGTH / 2, c + DASH_LENGTH / 2, gaps + [(-1e9, -lim), (lim, 1e9)]):
                if abs((seg[1] - seg[0]) - DASH_LENGTH) < 1e-6:  # keep whole dashes only
                    marks.append(Marking("dash", seg, y, WHITE))
    marks.append(Marking("stop", STOP_LINE[0], STOP_LINE[1], WHITE))
    for x in CROSSWALKS_X:
        y0 = CROSSWALK_Y[0]
        while y0 + 0.6 <= CROSSWALK_Y[1] + 1e-9:
            marks.append(Marking("crosswalk", x, (round(y0, 6), round(y0 + 0.6, 6)), WHITE))
            y0 += 1.2
    return marks


@dataclass(frozen=True)
class Box:
    """An oriented box standing on the ground.

    Attributes:
        name: Unique name, e.g. ``"car_0"``.
        kind: ``"car"``, ``"truck"`` or ``"pole"``.
        center: (x, y) of the footprint centre, metres (world frame).
        size: (length along the box's x, width along its y, height), metres.
        yaw_deg: Heading of the box's x axis, degrees, counter-clockwise from world x.
        face_colors: RGB per face in the order (+x front, -x back, +y left, -y right,
            +z top, -z bottom), shape (6, 3).
    """

    name: str
    kind: str
    center: tuple[float, float]
    size: tuple[float, float, float]
    yaw_deg: float
    face_colors: tuple[tuple[int, int, int], ...]

    @property
    def center3(self) -> np.ndarray:
        """Box centre (x, y, height / 2), shape (3,)."""
        return np.array([self.center[0], self.center[1], self.size[2] / 2.0])

    @property
    def rotation(self) -> np.ndarray:
        """``world_from_box`` rotation (yaw about z), shape (3, 3)."""
        return rpy_to_matrix(0.0, 0.0, math.radians(self.yaw_deg))

    def corners(self) -> np.ndarray:
        """The 8 corners in the world frame, shape (8, 3)."""
        h = np.array(self.size) / 2.0
        signs = np.array([[sx, sy, sz] for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)], float)
        return (signs * h) @ self.rotation.T + self.center3


def _car_colors(front, side) -> tuple[tuple[int, int, int], ...]:
    back = tuple(int(c * 0.6) for c in front)
    right = tuple(int(c * 0.8) for c in side)
    return (front, back, side, right, (225, 225, 230), (30, 30, 30))


#: Where the boxes stand. No box stands in the ground wedge (3-30 m) that two neighbouring
#: cameras share, in any sample of the embedded dataset (ego x = -8, -3, 0, 5): the
#: calibration doctor compares neighbours on that shared ground, and a box there shows
#: as a seam mismatch on a correct rig (tested in ``tests/test_synthetic.py``). So the
#: cars park ahead of and behind the ego rather than beside it.
BOXES = (
    Box("car_0", "car", (32.5, -7.4), (4.5, 1.9, 1.6), 0.0, _car_colors((220, 40, 40), (40, 90, 220))),
    Box("car_1", "car", (24.0, 0.0), (4.5, 1.9, 1.6), 0.0, _car_colors((30, 200, 60), (230, 120, 20))),
    Box("car_2", "car", (-17.0, 3.8), (4.5, 1.9, 1.6), 180.0, _car_colors((200, 30, 200), (20, 190, 200))),
    Box("car_3", "car", (-22.0, -7.4), (4.5, 1.9, 1.6), 0.0, _car_colors((250, 220, 20), (120, 40, 160))),
    Box("car_4", "car", (-27.0, 11.1), (4.5, 1.9, 1.6), 0.0, _car_colors((20, 160, 230), (220, 60, 120))),
    Box("car_5", "car", (-30.0, 0.0), (4.5, 1.9, 1.6), 0.0, _car_colors((255, 140, 0), (0, 120, 110))),
    Box("truck_0", "truck", (35.0, 7.4), (8.0, 2.5, 3.0), 180.0, _car_colors((160, 30, 30), (30, 60, 140))),
    Box("pole_0", "pole", (0.0, -6.3), (0.25, 0.25, 4.5), 0.0, ((240, 60, 30),) * 4 + ((90, 90, 90),) * 2),
    Box("pole_1", "pole", (-4.0, -6.3), (0.25, 0.25, 4.5), 0.0, ((30, 90, 240),) * 4 + ((90, 90, 90),) * 2),
    Box("pole_2", "pole", (5.0, 10.1), (0.25, 0.25, 4.5), 0.0, ((240, 200, 30),) * 4 + ((90, 90, 90),) * 2),
    Box("pole_3", "pole", (-23.5, 10.1), (0.25, 0.25, 4.5), 0.0, ((30, 200, 120),) * 4 + ((90, 90, 90),) * 2),
    Box("pole_4", "pole", (29.0, -6.3), (0.25, 0.25, 4.5), 0.0, ((200, 30, 200),) * 4 + ((90, 90, 90),) * 2),
)

#: Mild per-camera exposure gains (multiplicative); unknown cameras get 1.0.
EXPOSURE_GAINS = {
    "CAM_FRONT": 1.00, "CAM_FRONT_RIGHT": 0.93, "CAM_BACK_RIGHT": 1.05,
    "CAM_BACK": 0.96, "CAM_BACK_LEFT": 1.07, "CAM_FRONT_LEFT": 0.98,
}
#: Vignetting: brightness * (1 - VIGNETTE * r^2), r = 1 at the image corners.
VIGNETTE = 0.10
SUN = np.array([0.35, 0.45, 0.82]) / np.linalg.norm([0.35, 0.45, 0.82])


# ---------------------------------------------------------------------------------------
# Ground texture
# ---------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------
# World and ray casting
# ---------------------------------------------------------------------------------------

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


def _shade(world: World, origin: np.ndarray, dirs: np.ndarray, sample_angle: float) -> np.ndarray:
    """Colour of unit rays from one origin, RGB float32 (N, 3), before exposure.

    ``sample_angle`` is the angle (radians) one ray stands for, used for the mip level.
    """
    hits = cast_rays(world, origin, dirs)
    color = np.empty((len(dirs), 3), np.float32)
    # Sky: horizon -> zenith gradient by elevation.
    sky = hits.kind == SKY
    if sky.any():
        elev = np.clip(dirs[sky, 2], 0.0, 1.0)
        w = (np.clip(elev / 0.5, 0.0, 1.0) ** 0.6)[:, None]
        color[sky] = (np.float32(SKY_HORIZON) * (1 - w) + np.float32(SKY_ZENITH) * w)
    ground = np.nonzero(hits.kind == GROUND)[0]
    if ground.size:
        t = hits.t[ground]
        cos_inc = np.maximum(np.abs(dirs[ground, 2]), 1e-3)
        footprint = t * sample_angle / np.sqrt(cos_inc)  # geometric mean of the footprint axes
        color[ground] = sample_ground(hits.point[ground], world, footprint)
    boxes = np.nonzero(hits.kind == BOX)[0]
    for i, box in enumerate(world.boxes):
        sel = boxes[hits.box[boxes] == i]
        if not sel.size:
            continue
        f = hits.face[sel].astype(np.int64)
        base = np.asarray(box.face_colors, np.float32)[f]
        normals_box = np.zeros((len(sel), 3))
        normals_box[np.arange(len(sel)), f // 2] = np.where(f % 2 == 0, 1.0, -1.0)
        lambert = np.clip((normals_box @ box.rotation.T) @ SUN, 0.0, 1.0)
        shade = 0.78 + 0.22 * lambert
        # Dark outline along every box edge (within 4 cm of two faces' bounds).
        local = (hits.point[sel] - box.center3) @ box.rotation
        near_edge = (np.abs(np.abs(local) - np.array(box.size) / 2) < 0.04).sum(axis=1) >= 2
        shade = np.where(near_edge, 0.35, shade)
        color[sel] = base * shade[:, None].astype(np.float32)
    # Distance haze towards the horizon colour (none within 30 m).
    if ground.size or boxes.size:
        solid = np.nonzero(hits.kind != SKY)[0]
        h = 1.0 - np.exp(-np.maximum(hits.t[solid] - 30.0, 0.0) / 300.0)
        h = h.astype(np.float32)[:, None]
        color[solid] = color[solid] * (1 - h) + np.float32(SKY_HORIZON) * h
    return color


def camera_rays(camera: Camera, world_from_ego: np.ndarray | None = None,
                uv=None) -> tuple[np.ndarray, np.ndarray]:
    """Rays through pixels of a camera, in the world frame.

    Args:
        camera: The camera.
        world_from_ego: Ego pose (4, 4); identity when None.
        uv: Pixel coordinates (u, v), shape (N, 2); None: every pixel centre in row-major
            order (N = H * W).

    Returns:
        ``(origin, dirs)``: camera centre in the world, shape (3,); unit directions,
        shape (N, 3).

    Convention:
        Pixel centres at integer (u, v); ray direction ``R_world_from_cam K^-1 [u, v, 1]``.
    """
    T = np.eye(4) if world_from_ego is None else as_float_array(world_from_ego, "world_from_ego")
    check_shape(T, (4, 4), "world_from_ego")
    world_from_cam = T @ camera.ego_from_cam
    if uv is None:
        vv, uu = np.mgrid[0:camera.height, 0:camera.width]
        uv = np.stack([uu.ravel(), vv.ravel()], axis=1).astype(float)
    uv = as_float_array(uv, "uv")
    check_shape(uv, (None, 2), "uv")
    pix = np.concatenate([uv, np.ones((len(uv), 1))], axis=1)
    d = pix @ np.linalg.inv(camera.K).T @ world_from_cam[:3, :3].T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return world_from_cam[:3, 3].copy(), d


def exposure_map(camera: Camera, world: World | None = None) -> np.ndarray:
    """Per-pixel brightness factor the renderer applies: exposure gain times vignetting.

    Args:
        camera: The camera (its name selects the gain).
        world: The world (default :func:`default_world`).

    Returns:
        Factor per pixel, float32, shape (H, W): ``gain * (1 - vignette * r^2)`` with r the
        distance from the principal point, normalised to 1 at the farthest image corner.
    """
    world = world or default_world()
    W, H = camera.width, camera.height
    cx, cy = camera.K[0, 2], camera.K[1, 2]
    rmax2 = max(cx + 0.5, W - 0.5 - cx) ** 2 + max(cy + 0.5, H - 0.5 - cy) ** 2
    v = np.arange(H)[:, None] - cy
    u = np.arange(W)[None, :] - cx
    gain = world.exposure_gains.get(camera.name, 1.0)
    return (gain * (1.0 - world.vignette * (u * u + v * v) / rmax2)).astype(np.float32)


def render_camera(camera: Camera, world: World | None = None, world_from_ego: np.ndarray | None = None,
                  supersample: int = 2, exposure: bool = True, rows_per_chunk: int = 64) -> np.ndarray:
    """Render one camera's image of the world.

    Args:
        camera: The camera (cam_from_ego, K, size).
        world: The world (default :func:`default_world`).
        world_from_ego: Ego pose in the world, shape (4, 4); identity when None.
        supersample: s x s rays per pixel, at sub-pixel offsets ``(k + 0.5) / s - 0.5``.
        exposure: Apply the camera's exposure gain and vignetting.
        rows_per_chunk: Image rows processed at once (bounds memory).

    Returns:
        RGB uint8 image, shape (H, W, 3).

    Convention:
        Pixel centres at integer coordinates: pixel (u, v)'s rays pass through
        ``(u + du, v + dv)`` for the supersampling offsets du, dv, symmetric about 0.
    """
    world = world or default_world()
    s = int(supersample)
    if s < 1:
        raise field_error("supersample", supersample, "must be >= 1", camera.name)
    T = np.eye(4) if world_from_ego is None else as_float_array(world_from_ego, "world_from_ego")
    W, H = camera.width, camera.height
    off = (np.arange(s) + 0.5) / s - 0.5
    focal = math.sqrt(camera.K[0, 0] * camera.K[1, 1])
    sample_angle = 1.0 / (focal * s)
    factor = exposure_map(camera, world) if exposure else None
    out = np.empty((H, W, 3), np.uint8)
    us = (np.arange(W)[:, None] + off[None, :]).ravel()  # (W * s,)
    for r0 in range(0, H, rows_per_chunk):
        r1 = min(H, r0 + rows_per_chunk)
        vs = (np.arange(r0, r1)[:, None] + off[None, :]).ravel()  # (rows * s,)
        vv, uu = np.meshgrid(vs, us, indexing="ij")
        origin, dirs = camera_rays(camera, T, np.stack([uu.ravel(), vv.ravel()], axis=1))
        color = _shade(world, origin, dirs, sample_angle)
        color = color.reshape(r1 - r0, s, W, s, 3).mean(axis=(1, 3))
        if factor is not None:
            color = color * factor[r0:r1, :, None]
        out[r0:r1] = np.clip(np.rint(color), 0, 255).astype(np.uint8)
    return out


def render(rig: Rig, world: World | None = None, world_from_ego: np.ndarray | None = None,
           supersample: int = 2, exposure: bool = True) -> dict[str, np.ndarray]:
    """Render every camera of a rig.

    Args:
        rig: The rig (true calibration).
        world: The world (default :func:`default_world`).
        world_from_ego: Ego pose in the world, shape (4, 4) (nuScenes ``ego_pose``:
            ego -> global); identity when None.
        supersample: Rays per pixel along each axis.
        exposure: Apply per-camera exposure gain and vignetting.

    Returns:
        Camera name -> RGB uint8 image, shape (H, W, 3), in rig order.
    """
    return {cam.name: render_camera(cam, world, world_from_ego, supersample, exposure) for cam in rig}


# ---------------------------------------------------------------------------------------
# sample_data writer
# ---------------------------------------------------------------------------------------

JPEG_QUALITY = 85

#: Scenes of the embedded nuScenes-format dataset. Ego poses are translations along the
#: road (world x); scene B stores CAM_FRONT_RIGHT with a yaw error, images use the truth.
SCENES = (
    {"name": "scene-0001", "log": "bevviz-synthetic-a", "ego_x": (0.0, 5.0),
     "description": "bevviz synthetic street, calibrated rig", "error": None},
    {"name": "scene-0002", "log": "bevviz-synthetic-b", "ego_x": (-8.0, -3.0),
     "description": "bevviz synthetic street, CAM_FRONT_RIGHT stored with a 2 deg yaw error",
     "error": {"camera": "CAM_FRONT_RIGHT", "axis": (0.0, 0.0, 1.0), "degrees": 2.0}},
)
LIDAR_MOUNT = (0.943, 0.0, 1.841)
BASE_TIMESTAMP = 1_700_000_000_000_000  # microseconds; fixed, so output is reproducible


def _token(*parts: object) -> str:
    """Deterministic 32-hex nuScenes-style token."""
    return hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()


def _encode(img_rgb: np.ndarray, ext: str) -> bytes:
    """Encode an RGB uint8 image with OpenCV (JPEG quality 85 or PNG level 9)."""
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if ext == ".jpg" else [cv2.IMWRITE_PNG_COMPRESSION, 9]
    ok, buf = cv2.imencode(ext, cv2.cvtColor(np.ascontiguousarray(img_rgb), cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise field_error("image", img_rgb.shape, f"OpenCV could not encode {ext}")
    return buf.tobytes()


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _json(obj: object) -> str:
    return json.dumps(obj, indent=2) + "\n"


def _axis_angle_matrix(axis, degrees: float) -> np.ndarray:
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    th = math.radians(degrees)
    S = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(th) * S + (1 - math.cos(th)) * S @ S


def rig_to_json_dict(rig: Rig, image_paths: dict[str, str] | None = None) -> dict:
    """The bevviz JSON rig format (sensor_to_ego, wxyz, RDF) for ``rig``.

    Used when writing ``sample_data/rig.json``; it follows the format that
    ``bevviz.io.rig_json`` reads.
    """
    cams = []
    for raw in rig.to_raw(NUSCENES):
        entry = {"name": raw.name, "K": raw.K.tolist(), "rotation": list(map(float, raw.rotation)),
                 "translation": list(map(float, raw.translation)), "width": raw.width, "height": raw.height}
        if image_paths and raw.name in image_paths:
            entry["image"] = image_paths[raw.name]
        cams.append(entry)
    return {"format": "bevviz-rig", "version": 1, "convention": NUSCENES.to_dict(), "cameras": cams}


def lidar_scan(world: World, world_from_ego: np.ndarray, beams: int = 16,
               azimuths: int = 360, max_range: float = 70.0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic LIDAR_TOP sweep by ray casting (identity mount rotation).

    Returns:
        ``(points, box_ids)``: nuScenes .pcd.bin rows (x, y, z, intensity, ring) in the
        lidar frame, float32, shape (N, 5); the box index each point hit (-1 for ground),
        shape (N,).
    """
    el = np.radians(np.linspace(-25.0, -2.0, beams))
    az = np.radians(np.arange(azimuths) * 360.0 / azimuths)
    E, A = np.meshgrid(el, az, indexing="ij")
    d_l = np.stack([np.cos(E) * np.cos(A), np.cos(E) * np.sin(A), np.sin(E)], -1).reshape(-1, 3)
    ring = np.repeat(np.arange(beams), azimuths)
    world_from_lidar = world_from_ego @ make_transform(np.eye(3), np.array(LIDAR_MOUNT))
    o = world_from_lidar[:3, 3]
    d_w = d_l @ world_from_lidar[:3, :3].T
    hits = cast_rays(world, o, d_w)
    keep = (hits.kind != SKY) & (hits.t < max_range)
    lum = np.zeros(len(d_l))
    g = keep & (hits.kind == GROUND)
    lum[g] = sample_ground(hits.point[g], world).mean(axis=1)
    lum[keep & (hits.kind == BOX)] = 60.0
    pts = np.concatenate([d_l * hits.t[:, None], (lum / 255.0 * 100.0)[:, None], ring[:, None]], 1)
    return pts[keep].astype(np.float32), hits.box[keep].astype(np.int64)


def write_nuscenes(root: Path, world: World, log=print) -> dict:
    """Write the nuScenes-format mini dataset (v1.0-mini tables, images, lidar, map).

    Args:
        root: Dataset root (``.../nuscenes``); tables go to ``root / "v1.0-mini"``.
        world: The world to render.
        log: Progress printer.

    Returns:
        The miscalibration record written to ``miscalibration.json``, plus the renders of
        scene A's first sample under key ``"first_images"`` (not written to that file).

    Convention:
        ``calibrated_sensor`` holds sensor -> ego (``ego_from_cam``), quaternion w, x, y,
        z, as nuScenes does; ``ego_pose`` holds ego -> global. Global = the world frame.
    """
    rig = nuscenes_like_rig()
    T: dict[str, list] = {k: [] for k in (
        "category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose",
        "log", "scene", "sample", "sample_data", "sample_annotation", "map")}
    T["category"] = [
        {"token": _token("category", n), "name": n, "description": d} for n, d in (
            ("vehicle.car", "Vehicle designed primarily for personal use."),
            ("vehicle.truck", "Vehicles primarily designed to haul cargo."),
            ("movable_object.barrier", "Temporary road barrier (unused in this synthetic sample)."))]
    cat = {c["name"]: c["token"] for c in T["category"]}
    T["attribute"] = [{"token": _token("attribute", n), "name": n, "description": d} for n, d in (
        ("vehicle.parked", "Vehicle is stationary with no driver."),
        ("vehicle.stopped", "Vehicle, with a driver, is stationary."))]
    T["visibility"] = [{"token": str(i + 1), "level": lv, "description": f"visibility of whole object is {lv}"}
                       for i, lv in enumerate(("v0-40", "v40-60", "v60-80", "v80-100"))]
    channels = list(NUSCENES_CAMERAS) + ["LIDAR_TOP"]
    T["sensor"] = [{"token": _token("sensor", ch), "channel": ch,
                    "modality": "lidar" if ch == "LIDAR_TOP" else "camera"} for ch in channels]
    map_token = _token("map", "bevviz-synthetic")
    T["map"] = [{"token": map_token, "log_tokens": [], "category": "semantic_prior",
                 "filename": "maps/bevviz-synthetic-placeholder.png"}]
    raw_true = {r.name: r for r in rig.to_raw(NUSCENES)}
    record: dict = {}
    first_images: dict[str, np.ndarray] = {}
    annotated = [(i, b) for i, b in enumerate(world.boxes) if b.kind in ("car", "truck")]
    for si, sc in enumerate(SCENES):
        log_token = _token("log", sc["log"])
        scene_token = _token("scene", sc["name"])
        T["log"].append({"token": log_token, "logfile": sc["log"], "vehicle": "bevviz-synthetic",
                         "date_captured": "2024-01-01", "location": "synthetic-street"})
        T["map"][0]["log_tokens"].append(log_token)
        cs_tokens = {}
        for ch in channels:
            tok = _token("calibrated_sensor", sc["name"], ch)
            cs_tokens[ch] = tok
            if ch == "LIDAR_TOP":
                T["calibrated_sensor"].append({"token": tok, "sensor_token": _token("sensor", ch),
                                               "translation": list(LIDAR_MOUNT), "rotation": [1.0, 0.0, 0.0, 0.0],
                                               "camera_intrinsic": []})
                continue
            raw = raw_true[ch]
            rot = list(map(float, raw.rotation))
            err = sc["error"]
            if err and err["camera"] == ch:
                R_true = rig[ch].ego_from_cam[:3, :3]
                R_stored = _axis_angle_matrix(err["axis"], err["degrees"]) @ R_true
                rot = list(map(float, matrix_to_quaternion(R_stored, "wxyz")))
                record = {
                    "scene": sc["name"], "scene_token": scene_token, "camera": ch,
                    "calibrated_sensor_token": tok,
                    "rotation_error": {"axis_ego": list(err["axis"]), "degrees": err["degrees"],
                                       "description": "yaw about ego z (left-positive)"},
                    "applied_as": "R_stored = R(axis, degrees) @ R_true, on ego_from_cam "
                                  "(calibrated_sensor.rotation, sensor -> ego); translation unchanged",
                    "true_rotation_wxyz": list(map(float, raw.rotation)),
                    "stored_rotation_wxyz": rot,
                    "translation": list(map(float, raw.translation)),
                    "note": "images of this scene are rendered with the TRUE calibration",
                }
            T["calibrated_sensor"].append({"token": tok, "sensor_token": _token("sensor", ch),
                                           "translation": list(map(float, raw.translation)), "rotation": rot,
                                           "camera_intrinsic": raw.K.tolist()})
        n = len(sc["ego_x"])
        sample_tokens = [_token("sample", sc["name"], k) for k in range(n)]
        inst_tokens = {i: _token("instance", sc["name"], b.name) for i, b in annotated}
        ann_tokens = {(i, k): _token("sample_annotation", sc["name"], b.name, k)
                      for i, b in annotated for k in range(n)}
        for i, b in annotated:
            T["instance"].append({"token": inst_tokens[i], "category_token": cat[f"vehicle.{b.kind}"],
                                  "nbr_annotations": n, "first_annotation_token": ann_tokens[(i, 0)],
                                  "last_annotation_token": ann_tokens[(i, n - 1)]})
        for k, ex in enumerate(sc["ego_x"]):
            ts = BASE_TIMESTAMP + si * 100_000_000 + k * 500_000
            world_from_ego = make_transform(np.eye(3), np.array([ex, 0.0, 0.0]))
            pose_token = _token("ego_pose", sc["name"], k)
            T["ego_pose"].append({"token": pose_token, "timestamp": ts, "rotation": [1.0, 0.0, 0.0, 0.0],
                                  "translation": [float(ex), 0.0, 0.0]})
            T["sample"].append({"token": sample_tokens[k], "timestamp": ts,
                                "prev": sample_tokens[k - 1] if k > 0 else "",
                                "next": sample_tokens[k + 1] if k + 1 < n else "",
                                "scene_token": scene_token})
            t0 = time.perf_counter()
            images = render(rig, world, world_from_ego)
            log(f"  {sc['name']} sample {k}: rendered {len(images)} cameras in {time.perf_counter() - t0:.1f} s")
            if si == 0 and k == 0:
                first_images = images
            for ch in channels:
                sd_token = _token("sample_data", sc["name"], ch, k)
                prev = _token("sample_data", sc["name"], ch, k - 1) if k > 0 else ""
                nxt = _token("sample_data", sc["name"], ch, k + 1) if k + 1 < n else ""
                stem = f"{sc['name']}__{ch}__{ts}"
                if ch == "LIDAR_TOP":
                    pts, hit_box = lidar_scan(world, world_from_ego)
                    fname = f"samples/LIDAR_TOP/{stem}.pcd.bin"
                    _write(root / fname, pts.tobytes())
                    lidar_counts = {i: int((hit_box == i).sum()) for i, _ in annotated}
                    w = h = 0
                    fmt = "pcd"
                else:
                    fname = f"samples/{ch}/{stem}.jpg"
                    _write(root / fname, _encode(images[ch], ".jpg"))
                    w, h, fmt = rig[ch].width, rig[ch].height, "jpg"
                T["sample_data"].append({
                    "token": sd_token, "sample_token": sample_tokens[k], "ego_pose_token": pose_token,
                    "calibrated_sensor_token": cs_tokens[ch], "timestamp": ts, "fileformat": fmt,
                    "is_key_frame": True, "height": h, "width": w, "filename": fname,
                    "prev": prev, "next": nxt})
            for i, b in annotated:
                yaw = math.radians(b.yaw_deg)
                T["sample_annotation"].append({
                    "token": ann_tokens[(i, k)], "sample_token": sample_tokens[k], "instance_token": inst_tokens[i],
                    "visibility_token": "4", "attribute_tokens": [_token("attribute", "vehicle.parked")],
                    "translation": [float(v) for v in b.center3],
                    "size": [b.size[1], b.size[0], b.size[2]],  # nuScenes: width, length, height
                    "rotation": [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)],
                    "prev": ann_tokens[(i, k - 1)] if k > 0 else "",
                    "next": ann_tokens[(i, k + 1)] if k + 1 < n else "",
                    "num_lidar_pts": lidar_counts[i], "num_radar_pts": 0})
        T["scene"].append({"token": scene_token, "log_token": log_token, "nbr_samples": n,
                           "first_sample_token": sample_tokens[0], "last_sample_token": sample_tokens[-1],
                           "name": sc["name"], "description": sc["description"]})
    for name, table in T.items():
        _write(root / "v1.0-mini" / f"{name}.json", _json(table))
    # The devkit opens a map mask per map record; this is a small placeholder (not used).
    _write(root / T["map"][0]["filename"], _encode(np.zeros((16, 16, 3), np.uint8), ".png"))
    _write(root / "miscalibration.json", _json(record))
    return {**record, "first_images": first_images}


README = """# bevviz sample_data (generated: do not edit by hand)

Regenerate bit for bit with `python -m bevviz.synthetic --out sample_data`.

- `nuscenes/`: a nuScenes-format dataset that `NuScenes(version="v1.0-mini",
  dataroot="sample_data/nuscenes")` loads. Two scenes of two key-frame samples each, six
  cameras (1600 x 900 JPEG) plus a ray-cast LIDAR_TOP sweep and box annotations for the
  cars. `scene-0001` is calibrated. In `scene-0002` the stored `calibrated_sensor` of one
  camera carries a known rotation error while its images use the true calibration; the
  truth is in `nuscenes/miscalibration.json`. The map mask is a placeholder. No box
  stands on the ground two neighbouring cameras share, in any sample (the cars park
  ahead of and behind the ego), so seam checks on the true rig find nothing.
- `rig.json` + `images/`: the true rig in the bevviz JSON format (sensor_to_ego, wxyz,
  RDF) with the images of scene-0001's first sample (ego pose = identity).
- `ground_texture.png` + `ground_texture.json`: the painted ground (BEV orientation: row 0
  = front / max x, column 0 = left / max y) and its metric extent.

World frame = nuScenes global frame; at the identity ego pose it equals the ego frame
(x forward, y left, z up, ground at z = 0).
"""


def generate(out: str | os.PathLike, log=print) -> dict[str, str]:
    """Write all of ``sample_data`` into ``out``.

    Args:
        out: Output folder (created if needed).
        log: Progress printer.

    Returns:
        Relative path -> sha256 of every file written.
    """
    out = Path(out)
    world = default_world()
    tex, grid = ground_texture()
    t0 = time.perf_counter()
    _write(out / "ground_texture.png", _encode(tex, ".png"))
    _write(out / "ground_texture.json", _json({
        "x_range": list(grid.x_range), "y_range": list(grid.y_range), "resolution": grid.resolution,
        "shape": [grid.height, grid.width, 3], "image": "ground_texture.png",
        "orientation": "BEV display: row 0 = front (max x), column 0 = left (max y); texel (i, j) centre at "
                       "x = x_max - (i + 0.5) * res, y = y_max - (j + 0.5) * res (as bevviz.bev_grid.BEVGrid)",
        "frame": "world = nuScenes global frame; equals the ego frame at the identity ego pose; ground z = 0",
    }))
    rec = write_nuscenes(out / "nuscenes", world, log)
    images = rec.pop("first_images")
    rig = nuscenes_like_rig()
    paths = {n: f"images/{n}.jpg" for n in rig.names}
    for name, path in paths.items():
        _write(out / path, _encode(images[name], ".jpg"))
    _write(out / "rig.json", _json(rig_to_json_dict(rig, paths)))
    _write(out / "README.md", README)
    log(f"sample_data written to {out} in {time.perf_counter() - t0:.1f} s")
    digests = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            digests[p.relative_to(out).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return digests


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m bevviz.synthetic --out sample_data``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sample_data", help="output folder (default: sample_data)")
    args = parser.parse_args(argv)
    generate(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
