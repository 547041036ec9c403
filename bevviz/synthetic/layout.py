"""The street, in metres: its colours, painted markings and the boxes standing on it.

Everything the texture painter (:mod:`~bevviz.synthetic.texture`), the ray caster
(:mod:`~bevviz.synthetic.world`) and the renderer read about the scene. All ground-feature
edges lie on multiples of 0.1 m, i.e. on texel edges of the 0.1 m texture, so every texel
is cleanly in or out.

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres. See
    docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bevviz.rotations import rpy_to_matrix

__all__ = [
    "ASPHALT", "BOXES", "CHECKER", "CROSSWALK_Y", "CROSSWALKS_X", "DASH_LENGTH", "DASH_PERIOD", "EXPOSURE_GAINS",
    "FAR_GROUND", "LABEL", "LABEL_PLATE", "LEFT_SIDEWALK_Y", "RIGHT_SIDEWALK_Y", "RING", "ROAD_Y", "SIDEWALK",
    "SIDEWALK_JOINT", "SKY_HORIZON", "SKY_ZENITH", "STOP_LINE", "SUN", "TEXTURE_EXTENT", "TEXTURE_RESOLUTION",
    "TILE_PALETTE", "VIGNETTE", "WHITE", "YELLOW", "Box", "Marking", "road_markings"
]


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
#: as a seam mismatch on a correct rig (tested in ``tests/synthetic/test_world.py``). So the
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
