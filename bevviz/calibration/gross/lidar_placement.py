"""Where the LiDAR lies against the cameras: the gross-error screen's first step.

A LiDAR a metre or more off the cameras (its calibration wrong, or its scan left in its
sensor's frame) moves every camera's evidence alike. The scan is moved along the ego axes to
where the cameras' images lift its edges most (:func:`lidar_correction`), chosen again from
there (:func:`replaced_lidar`: a camera's edges are those it sees from where the scan lies),
and tried turned about the vertical when most cameras see none of its edges
(:func:`turned_lidar`). A move most cameras prefer on their own names the LiDAR
(``LIDAR_MAJORITY``, at least ``LIDAR_MIN_MOVE_M``). What the constants were chosen on:
docs/gross_errors.md (the tuning table).

Convention:
    Ego frame x forward, y left, z up, metres. A LiDAR correction ``M`` (4, 4) moves the scan:
    ``p_ego = M @ p_scan``. See docs/conventions.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from bevviz.calibration.gross.views import (
    MIN_LIFT,
    MIN_SCREEN_EDGES,
    EdgeView,
    frame_views,
    in_camera,
    wins,
)
from bevviz.calibration.lidar.frames import LidarFrame, moved_frame
from bevviz.camera import Rig

__all__ = ["LIDAR_MAJORITY", "LIDAR_MIN_MOVE_M", "LIDAR_MOVES_M", "LIDAR_STEP_M", "LIDAR_TURNS_DEG", "aligned",
           "lidar_correction", "lidar_words", "replaced_lidar", "turned_lidar", "with_edges"]

#: LiDAR moves searched along each ego axis (metres), then refined on every axis from
#: ``LIDAR_STEP_M`` halving to an eighth of it.
LIDAR_MOVES_M = (-2.0, -1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0)
LIDAR_STEP_M = 0.5
#: Turns about the ego vertical tried (degrees) when most cameras see none of the scan's edges.
LIDAR_TURNS_DEG = (90.0, 180.0, 270.0)
#: Share of the screened cameras that must prefer the LiDAR's correction on their own ...
LIDAR_MAJORITY = 0.5
#: ... and the least correction (metres) the screen names: a gross error, not a fine one.
LIDAR_MIN_MOVE_M = 0.75


def lidar_correction(views: Mapping[str, EdgeView], forward_and_up: bool = False,
                     given: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """The LiDAR move (a translation) that best fits the rig, and how many cameras prefer it
    on their own (``GROSS_T`` and ``MIN_LIFT``): (ego_from_scan (4, 4), that count).

    The search starts from the best move along one ego axis (``LIDAR_MOVES_M``), or with
    ``forward_and_up`` from the best on the grid of forward and vertical moves together (a
    scan in its sensor's frame is off by the mounting, forward and up at once: from a move
    along one axis the refinement stalled on TRI, (0.88, 0.12, 0.25) m for (0.94, 0, 1.84)).

    ``given`` (4, 4; a translation): where the scan was given, relative to the views' scan
    (the views of a scan already moved: :func:`replaced_lidar`); each camera's vote compares
    the move with that place, and the move counted is from there. Identity when None."""
    given = np.eye(4) if given is None else given
    base = {n: v.values(in_camera(v.camera, given), v.camera.K, v.camera.size, v.channels, v.sideways)
            for n, v in views.items()}

    def moved(t: np.ndarray) -> list[tuple[float, float, float]]:
        M = np.eye(4)
        M[:3, 3] = t
        return [v.compare(base[n], v.values(in_camera(v.camera, M), v.camera.K,
                                            v.camera.size, v.channels, v.sideways))
                for n, v in views.items()]

    def rig_score(t: np.ndarray) -> float:
        return float(np.mean([lift for _, lift, _ in moved(t)]))

    t = np.zeros(3)
    best = rig_score(t)
    starts = [np.eye(3)[ax] * h for h in LIDAR_MOVES_M for ax in range(3)]
    if forward_and_up:
        starts += [np.array([hx, 0.0, hz]) for hx in LIDAR_MOVES_M for hz in LIDAR_MOVES_M]
    for trial in starts:
        s = rig_score(trial)
        if s > best:
            t, best = trial, s
    step = LIDAR_STEP_M
    while step >= LIDAR_STEP_M / 8:
        better = False
        for ax, sign in itertools.product(range(3), (1.0, -1.0)):
            trial = t.copy()
            trial[ax] += sign * step
            s = rig_score(trial)
            if s > best:
                t, best, better = trial, s, True
        if not better:
            step /= 2
    M = np.eye(4)
    M[:3, 3] = t
    if np.linalg.norm(t - given[:3, 3]) < LIDAR_MIN_MOVE_M:
        return M, 0
    agree = sum(wins(*c) for c in moved(t))
    return M, int(agree)


def replaced_lidar(rig: Rig, frame: LidarFrame, M: np.ndarray, views: Mapping[str, EdgeView]
                   ) -> tuple[dict[str, EdgeView], np.ndarray, int]:
    """The LiDAR search again, from the scan moved by ``M`` (4, 4; the first search's move).

    A camera's edges are the scan's edges it sees from its own place: a scan a metre or more
    off hides some from a camera and shows others it does not see (TRI's scan 1.2 m up: the
    first search went 2.06 m down, and there only two of six cameras' edges lifted enough to
    vote). From where the first search put it, the edges are chosen again and the search and
    the vote run on them, each camera comparing the place found with the place the scan was
    given. Returns (those views, the move found relative to them (4, 4), how many cameras
    prefer it on their own); the views reuse the images' lift maps of ``views``. ``frame``: the
    images with the scan as given (:func:`~bevviz.calibration.lidar.frames.as_lidar_frames`),
    moved rigidly (:func:`~bevviz.calibration.lidar.frames.moved_frame`)."""
    placed = frame_views(Rig([rig[n] for n in views]), moved_frame(frame, M), {n: v.channels for n, v in views.items()})
    placed = {n: v for n, v in placed.items() if len(v.points) >= MIN_SCREEN_EDGES}
    given = np.linalg.inv(M)
    M2, agree = lidar_correction(placed, given=given)
    return placed, M2, agree


def with_edges(views: Mapping[str, EdgeView]) -> int:
    """How many cameras' images have any edge at all (a flat image has none)."""
    return int(sum(max(float(np.ptp(np.nan_to_num(c))) for c in v.channels) > 0 for v in views.values()))


def aligned(views: Mapping[str, EdgeView], M: np.ndarray) -> int:
    """How many cameras see the scan's edges under the LiDAR move ``M`` (4, 4): mean lift at
    least ``MIN_LIFT``."""
    lifts = [np.nanmean(v.values(in_camera(v.camera, M), v.camera.K, v.camera.size,
                                 v.channels, v.sideways)) for v in views.values()]
    return int(sum(np.nan_to_num(lift) >= MIN_LIFT for lift in lifts))


def turned_lidar(rig: Rig, frame: LidarFrame, majority: int, lifts: Mapping[str, tuple[np.ndarray, ...]]
                 ) -> tuple[dict[str, EdgeView], np.ndarray, np.ndarray] | None:
    """The scan turned a quarter, a half or three quarters about the ego vertical (a scan in
    its sensor's frame) when most cameras see its edges then and not before: (the views of
    the turned scan, its move (4, 4), the turn (4, 4)), or None. ``frame``: the images with the
    scan as given, turned rigidly (:func:`~bevviz.calibration.lidar.frames.moved_frame`);
    ``lifts``: the images' lift channels of the untouched scan's views (the images are the same)."""
    best = None
    for yaw in LIDAR_TURNS_DEG:
        a = np.radians(yaw)
        turn = np.eye(4)
        turn[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        views = frame_views(rig, moved_frame(frame, turn), lifts)
        if len(views) < majority:
            continue
        M, _ = lidar_correction(views, forward_and_up=True)
        n = aligned(views, M)
        if n >= majority and (best is None or n > best[0]):
            best = (n, views, M, turn)
    return None if best is None else best[1:]


def lidar_words(M: np.ndarray) -> str:
    """The sentence that names the LiDAR, from its correction ``M`` (4, 4; ``p_ego = M @ p_scan``):
    the scan's offset from where the cameras put it (the correction reversed), and its turn."""
    t = M[:3, 3]
    yaw = float(np.degrees(np.arctan2(M[1, 0], M[0, 0]))) % 360
    turned = f"turned {yaw:.0f} deg about the vertical (a scan in its sensor's frame?) and " if yaw > 1 else ""
    return (f"the LiDAR is {turned}off the cameras by ({-t[0]:+.2f}, {-t[1]:+.2f}, {-t[2]:+.2f}) m (forward, left, "
            "up): the cameras agree with each other on where it should be, so no camera is blamed")
