"""Step 4 of the gross-error screen (:mod:`~bevviz.calibration.gross.screen`): a camera whose
optical centre is a metre or two off, or whose focal lengths are 10-20 % off.

The alternatives (:func:`pose_alternatives`): the optical centre moved ``POSITION_MOVES_M``
along each ego axis either way, the focal lengths (fx and fy together, principal point kept)
scaled by ``FOCAL_SCALES``, and next to the best of those the scales between the steps
(:func:`finer_focal`). A small rotation mimics a position change (a metre at 30 m is 2 deg), so
the stored position at its best small rotation is compared with the alternatives that fit best,
each at its own best small rotation (:func:`best_pose`), under stricter thresholds than the
turns and images of steps 2-3 (:func:`pose_wins`: ``POSE_T``, ``POSE_MIN_GAIN``). The edges
seen from the stored place favour it, so the best alternative is looked at again on the edges
seen from its own place (:func:`second_look`), and wins on the first look or on the two looks'
mean (:func:`both_looks`; for a camera in the road also on the second look alone). The screen names one only
where one camera alone of a rig of at least ``POSE_MIN_CAMERAS`` prefers it, and says how far
off when the edges pin the size (:func:`sizes_that_fit`). For a camera it names for nothing,
:func:`not_ruled_out` lists the alternatives its edges cannot exclude. What the values were
chosen on: docs/gross_errors.md (the tuning table).

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres. A position
    alternative moves the optical centre by a vector in the ego frame (its rotation kept); a
    focal alternative scales fx and fy (principal point kept). ``lid`` (4, 4) is the LiDAR's
    correction in the stored camera's frame (:func:`~bevviz.calibration.gross.views.in_camera`).
    See docs/conventions.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from bevviz.calibration.gross.views import (
    GROSS_T,
    MIN_LIFT,
    EdgeView,
    relative_pose,
    rotated_best,
    seen_from,
    walked_many,
)
from bevviz.calibration.lidar.frames import LidarFrame
from bevviz.calibration.perturbations import perturb_camera
from bevviz.camera import Camera

__all__ = [
    "AXIS_WORDS", "FOCAL_FINE_REACH", "FOCAL_FINE_STEP", "FOCAL_MIN_OFF", "FOCAL_SCALES", "MIN_HEIGHT_M", "POSE_CELLS",
    "POSE_MIN_CAMERAS", "POSE_MIN_GAIN", "POSE_REFINED", "POSE_T", "POSITION_MOVES_M", "SECOND_LOOK_T",
    "best_pose", "both_looks", "finer_focal", "focal_alternative", "not_ruled_out", "not_ruled_out_words",
    "other_reading", "pose_alternatives", "pose_offset", "pose_values", "pose_wins", "second_look", "short_words",
    "sizes_that_fit",
]

#: A camera's optical centre moved by these distances (metres) along each ego axis, both
#: ways, and its focal lengths (fx and fy together, principal point kept) scaled by these:
#: the position and focal alternatives (step 4 of the module docstring).
POSITION_MOVES_M = (1.0, 1.5, 2.0)
#: A position alternative must keep the optical centre at least this high (metres) above the
#: ground the LiDAR sees (:func:`bevviz.lidar.ground_height`): no camera is mounted in the
#: road, and a camera moved 2 m down (TRI, 1.55 m up: 0.45 m under the road) fitted "1 m
#: lower" better than its stored place on TRI t2, a fix that would have left it further off.
MIN_HEIGHT_M = 0.2
FOCAL_SCALES = (0.8, 0.85, 0.9, 1.1, 1.15, 1.2)
#: Between those steps, next to the focal scale that fits best: scales ``FOCAL_FINE_STEP``
#: apart within ``FOCAL_FINE_REACH`` of it, none nearer 1 than ``FOCAL_MIN_OFF`` (a focal
#: length 10 % off wants x 0.909 or x 1.111): :func:`finer_focal`.
FOCAL_FINE_STEP = 0.01
FOCAL_FINE_REACH = 0.02
FOCAL_MIN_OFF = 0.09
#: A position or focal alternative wins when, at its own best small rotation (the
#: ``POSE_REFINED`` alternatives that fit best as they are), it beats the stored position *at
#: its best rotation* (a grid of turns within 3 deg, then a finer walk: :func:`rotated_best`)
#: by ``POSE_T`` standard errors and ``POSE_MIN_GAIN`` mean lift (and shows ``MIN_LIFT``),
#: either on the edges seen from the stored place (which favour it) or on average over two
#: looks: those edges and the edges seen from the alternative's place (:func:`second_look`,
#: made where the first look gives the alternative at least ``SECOND_LOOK_T``). A metre at
#: 30 m is 2 deg: against the stored pose itself a camera turned 2 deg preferred a position
#: alternative by up to 4.2. What the values were chosen on: docs/gross_errors.md (the tuning
#: table).
POSE_T = 2.0
SECOND_LOOK_T = 0.0
#: ``POSE_MIN_GAIN`` is a floor of size, not of evidence: by cell, ``POSE_T`` holds the clean
#: and the 2-deg-turned cameras whatever their gain, and ``MIN_LIFT`` structureless images
#: (they lift under 0.022); at 0.03 it held 9 moves of the TRI drive that stood 2.0-3.9
#: standard errors by cell (gains 0.015-0.029).
POSE_MIN_GAIN = 0.015
#: The standard errors of those comparisons count the edges of one image cell (the image cut
#: into ``POSE_CELLS`` x ``POSE_CELLS``) as one cluster (:meth:`EdgeView.compare`): edges along
#: one silhouette, and the same structure seen in every frame of a drive, are not independent.
#: Counted edge by edge, a drive's three frames put a clean TRI camera's best position at 2.4
#: standard errors where each frame alone gave at most 1.6.
POSE_CELLS = 8
#: How many alternatives (those that fit best as they are) are compared at their own best small
#: rotation: a camera's true pose fits the LiDAR's edges only to within the dataset's own
#: LiDAR-camera calibration, a few tenths of a degree, so an alternative held at the stored
#: rotation loses to a stored position free to turn.
POSE_REFINED = 4
#: Fewest screened cameras of a rig for a position or focal error to be named, and only one
#: camera of them may prefer such an alternative: a LiDAR (or an ego frame) off moves every
#: camera's evidence alike (TRI's scan 1.2 m up, before the LiDAR test placed it, made five
#: of six cameras prefer a position alternative); a one-camera rig cannot tell its
#: camera's position from its LiDAR's.
POSE_MIN_CAMERAS = 3

#: How a move along each ego axis (x, y, z), either way, is said: a position alternative's words.
AXIS_WORDS = (("further forward", "further back"), ("further left", "further right"), ("higher", "lower"))


def pose_alternatives(camera: Camera, ground_z: float | None = None) -> list[tuple[str, str, Camera]]:
    """(kind, words, camera) of every position and focal alternative (step 4); with
    ``ground_z`` (the ego z of the ground, metres) only the positions at least
    ``MIN_HEIGHT_M`` above it."""
    out = []
    for ax, h, sign in itertools.product(range(3), POSITION_MOVES_M, (1.0, -1.0)):
        alt = perturb_camera(camera, translation=np.eye(3)[ax] * sign * h)
        if ground_z is not None and alt.position[2] < ground_z + MIN_HEIGHT_M:
            continue
        words = (f"'s position is off by about {h:g} m: the LiDAR's edges fit it {h:g} m "
                 f"{AXIS_WORDS[ax][0 if sign > 0 else 1]} (ego {'+' if sign > 0 else '-'}{'xyz'[ax]})")
        out.append(("position", words, alt))
    return out + [focal_alternative(camera, s) for s in FOCAL_SCALES]


def focal_alternative(camera: Camera, s: float) -> tuple[str, str, Camera]:
    """("focal", words, ``camera`` with fx and fy scaled by ``s``, principal point kept)."""
    words = (f"'s focal length is off by about {abs(1 / s - 1):.0%}: the LiDAR's edges fit fx and fy x {s:g} "
             f"(the stored ones are too {'long' if s < 1 else 'short'})")
    return "focal", words, perturb_camera(camera, fx_scale=s, fy_scale=s)


def finer_focal(view: EdgeView, alternatives: list[tuple[str, str, Camera, np.ndarray]], reference: np.ndarray,
                 lid: np.ndarray) -> list[tuple[str, str, Camera, np.ndarray]]:
    """Focal alternatives between the steps of ``FOCAL_SCALES``, next to the one that fits best
    against ``reference`` (values (M,)): scales ``FOCAL_FINE_STEP`` apart within
    ``FOCAL_FINE_REACH`` of it, on its side of 1 and at least ``FOCAL_MIN_OFF`` from 1, with
    their values (M,), as :func:`pose_values` gives them. A focal length 15 % too long wants
    x 0.87, half-way between two steps: 3.4 standard errors (at x 0.88) where its best step
    gave 2.5 (nuScenes CAM_FRONT). ``lid`` (4, 4): the LiDAR's correction in the camera's frame."""
    cam = view.camera
    focal = [a for a in alternatives if a[0] == "focal"]
    if not focal:
        return []
    best = max(focal, key=lambda a: view.compare(reference, a[3], POSE_CELLS)[0])[2]
    s0 = round(1.0 + float(pose_offset(cam, "focal", best)[0]), 4)
    reach = int(round(FOCAL_FINE_REACH / FOCAL_FINE_STEP))
    scales = [round(s0 + k * FOCAL_FINE_STEP, 4) for k in range(-reach, reach + 1)]
    scales = [s for s in scales
              if s not in FOCAL_SCALES and (s - 1.0) * (s0 - 1.0) > 0 and abs(s - 1.0) >= FOCAL_MIN_OFF]
    out = []
    for s in scales:
        kind, words, alt = focal_alternative(cam, s)
        out.append((kind, words, alt, view.values(relative_pose(cam, alt) @ lid, alt.K, alt.size, view.channels,
                                                  view.sideways)))
    return out


def pose_offset(camera: Camera, kind: str, alt: Camera) -> np.ndarray:
    """How a position or focal alternative differs from ``camera``: its optical centre's move
    (3,; ego metres) for ``kind`` "position", else its focal scale less 1 (1,)."""
    if kind == "position":
        return alt.position - camera.position
    return np.array([alt.K[0, 0] / camera.K[0, 0] - 1.0])


def short_words(camera: Camera, kind: str, alt: Camera) -> str:
    """A position or focal alternative in a few words: "the camera 1.5 m higher", "fx and fy x 0.9"."""
    d = pose_offset(camera, kind, alt)
    if kind == "focal":
        return f"fx and fy x {d[0] + 1.0:.3g}"
    ax = int(np.argmax(np.abs(d)))
    return f"the camera {abs(d[ax]):g} m {AXIS_WORDS[ax][0 if d[ax] > 0 else 1]}"


def pose_values(view: EdgeView, lid: np.ndarray,
                ground_z: float | None = None) -> list[tuple[str, str, Camera, np.ndarray]]:
    """(kind, words, camera, its values (M,)) of every position and focal alternative
    (:func:`pose_alternatives`, above ``ground_z``), ``lid`` (4, 4) the LiDAR's correction in
    the camera's frame."""
    cam = view.camera
    return [(kind, words, alt, view.values(relative_pose(cam, alt) @ lid, alt.K, alt.size, view.channels,
                                           view.sideways))
            for kind, words, alt in pose_alternatives(cam, ground_z)]


def best_pose(view: EdgeView, alternatives: list[tuple[str, str, Camera, np.ndarray]], reference: np.ndarray,
               lid: np.ndarray | None = None,
               cells: int | None = POSE_CELLS) -> tuple[str, float, float, float, str, Camera, np.ndarray]:
    """The best of the position and focal ``alternatives`` (:func:`pose_values`) against
    ``reference`` (values (M,)): ``(kind, t, lift, gain, words, camera, its values (M,))``,
    the one that beats ``reference`` by most standard errors (:meth:`EdgeView.compare` with
    ``cells``: the step's own, clustered by image cell; None: edge by edge, the units the
    turns' thresholds were set in). With ``lid`` (4, 4; the LiDAR's correction in the
    camera's frame) the ``POSE_REFINED`` alternatives that fit best as they are are compared at
    their own best small rotation instead (:func:`rotated_best` without its grid)."""
    if lid is not None:
        alternatives = alternatives + finer_focal(view, alternatives, reference, lid)
        ranked = sorted(alternatives, key=lambda a: -view.compare(reference, a[3], cells)[0])
        alternatives = [(kind, words, alt, rotated_best(view, relative_pose(view.camera, alt) @ lid, alt.K, alt.size,
                                                        grid=False))
                        for kind, words, alt, _ in ranked[:POSE_REFINED]]
    best: tuple = ("", float("-inf"), 0.0, 0.0, "", view.camera, reference)
    for kind, words, alt, v in alternatives:
        c = view.compare(reference, v, cells)
        if c[0] > best[1]:
            best = (kind, *c, words, alt, v)
    return best


def pose_wins(pose: tuple) -> bool:
    """Whether a position or focal alternative (as :func:`best_pose` returns it) beats the
    stored position by ``POSE_T`` standard errors and ``POSE_MIN_GAIN``, and shows ``MIN_LIFT``."""
    return pose[1] >= POSE_T and pose[2] >= MIN_LIFT and pose[3] >= POSE_MIN_GAIN


def second_look(view: EdgeView, pose: tuple, frames: Sequence[LidarFrame]) -> tuple:
    """The best position or focal alternative (``pose``, as :func:`best_pose` returns it)
    judged once more on the edges seen from its own place (:func:`seen_from`): ``pose`` with
    the second look's own ``(t, lift, gain)`` (``t`` -inf where the alternative's place shows
    too few edges). ``frames``: the frames the view holds, each scan where the cameras put it.

    A camera's edges are chosen from where it stands: edges chosen from the stored place
    favour the stored place, those chosen from the alternative's favour the alternative (TRI
    CAMERA_06 clean: -3.8 standard errors on the first, -0.7 on the second; moved 2 m down:
    +0.9 and +5.9). The mean of the two (:func:`both_looks`) takes neither side."""
    kind, _, _, _, words, alt, v_alt = pose
    seen = seen_from(view, alt, frames)
    if seen is None:
        return kind, float("-inf"), 0.0, 0.0, words, alt, v_alt
    cam = view.camera
    stored = rotated_best(seen, relative_pose(alt, cam), cam.K, cam.size)
    t2, lift2, gain2 = seen.compare(stored, rotated_best(seen, np.eye(4), alt.K, alt.size, grid=False), POSE_CELLS)
    return kind, t2, lift2, gain2, words, alt, v_alt


def both_looks(first: tuple, second: tuple) -> tuple:
    """One alternative's two looks (:func:`best_pose`'s and :func:`second_look`'s) averaged:
    ``first`` with its ``(t, lift, gain)`` the mean of the two looks'."""
    kind, t, lift, gain, words, alt, v_alt = first
    t2, lift2, gain2 = second[1:4]
    return kind, 0.5 * (t + t2), 0.5 * (lift + lift2), 0.5 * (gain + gain2), words, alt, v_alt


def sizes_that_fit(view: EdgeView, lid: np.ndarray, kind: str, alt: Camera, v_alt: np.ndarray,
                   ground_z: float | None = None) -> list[float]:
    """The sizes of the alternatives of ``kind`` in ``alt``'s direction (a move along the same
    axis and sign, or a focal scale on the same side of 1) that fit about as well as ``alt``
    at their own best small rotation (within ``GROSS_T`` standard errors of ``v_alt`` (M,)),
    ``alt``'s own included: metres, or focal scales; sorted. More than one: the edges do not
    pin the size. ``lid`` (4, 4): the LiDAR's correction in the camera's frame; ``ground_z``:
    as :func:`pose_alternatives` takes it."""
    cam = view.camera

    def size(d: np.ndarray) -> float:
        return float(np.linalg.norm(d)) if kind == "position" else float(d[0] + 1.0)

    d0 = pose_offset(cam, kind, alt)
    out = [size(d0)]
    for k, _, a in pose_alternatives(cam, ground_z):
        d = pose_offset(cam, kind, a)
        if k != kind or np.allclose(d, d0) or np.dot(d, d0) < np.linalg.norm(d) * np.linalg.norm(d0) * (1 - 1e-9):
            continue  # another kind, ``alt`` itself, or not the same direction
        v = rotated_best(view, relative_pose(cam, a) @ lid, a.K, a.size, grid=False)
        if view.compare(v_alt, v)[0] > -GROSS_T:
            out.append(size(d))
    return sorted(out)


def other_reading(view: EdgeView, lid: np.ndarray, kind: str, v_alt: np.ndarray,
                  ground_z: float | None = None) -> tuple | None:
    """The best alternative of the other kind (a focal scale for a move, a move for a focal
    scale; as :func:`best_pose` returns it) where, at its own best small rotation, it fits
    about as well as the winner's values ``v_alt`` (M,): within ``GROSS_T`` standard errors,
    edge by edge, as :func:`sizes_that_fit` asks of other sizes; else None. A camera moved
    along its optical axis and one with a longer focal length shift far edges alike (TRI
    CAMERA_09 moved 2 m forward, the drive's frames pooled, fitted fx and fy x 1.09 best).
    ``lid`` (4, 4): the LiDAR's correction in the camera's frame; ``ground_z``: as
    :func:`pose_alternatives` takes it."""
    others = [a for a in pose_values(view, lid, ground_z) if a[0] != kind]
    rival = best_pose(view, others, v_alt, lid, cells=None)
    return rival if rival[1] > -GROSS_T else None


def not_ruled_out(view: EdgeView, alternatives: list[tuple[str, str, Camera, np.ndarray]], reference: np.ndarray,
                  lid: np.ndarray) -> list[tuple[str, Camera]]:
    """(kind, camera) of the position and focal ``alternatives`` (:func:`pose_values`) that the
    edges do not rule out: on its walk to its own best small rotation (:func:`walked_many`,
    stopped there) each comes within ``POSE_T`` standard errors (by cell) of ``reference``
    (values (M,): the stored position at its best small rotation), or brings too few of the
    stored pose's edges into view to be compared.

    The edges are those seen from the stored place, which favour it (:func:`second_look`), so
    the list is what even that look cannot exclude: an alternative left out of it is not
    thereby shown wrong, one in it is not shown right. ``lid`` (4, 4): the LiDAR's correction
    in the camera's frame."""
    if not alternatives:
        return []

    def open_(v: np.ndarray) -> bool:
        t = view.compare(reference, v, POSE_CELLS)[0]
        return t > -POSE_T or t == float("-inf")  # -inf: too few edges in view to compare

    cam = view.camera
    walked = walked_many(view, np.stack([relative_pose(cam, a[2]) @ lid for a in alternatives]),
                         np.stack([a[2].K for a in alternatives]), cam.size, np.stack([a[3] for a in alternatives]),
                         stop=open_)
    return [(kind, alt) for (kind, _, alt, _), v in zip(alternatives, walked, strict=True) if open_(v)]


def not_ruled_out_words(camera: Camera, open_: Sequence[tuple[str, Camera]]) -> str:
    """:func:`not_ruled_out`'s list in words, sizes gathered by direction: "1-2 m further
    forward, 1 m higher, fx and fy x 1.1-1.2" ("" for none)."""
    parts = []
    for ax, sign in itertools.product(range(3), (1.0, -1.0)):
        sizes = sorted(float(abs(d[ax])) for k, a in open_ if k == "position"
                       for d in [pose_offset(camera, k, a)] if np.sign(d[ax]) == sign and abs(d[ax]) > 0.5)
        if sizes:
            span = f"{sizes[0]:g}" if len(sizes) == 1 else f"{sizes[0]:g}-{sizes[-1]:g}"
            parts.append(f"{span} m {AXIS_WORDS[ax][0 if sign > 0 else 1]}")
    for side in (-1.0, 1.0):
        scales = sorted(round(float(pose_offset(camera, k, a)[0]) + 1.0, 3) for k, a in open_
                        if k == "focal" and np.sign(pose_offset(camera, k, a)[0]) == side)
        if scales:
            span = f"{scales[0]:g}" if len(scales) == 1 else f"{scales[0]:g}-{scales[-1]:g}"
            parts.append(f"fx and fy x {span}")
    return ", ".join(parts)
