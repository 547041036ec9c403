"""The gross-error screen: a camera turned a quarter or half turn about its optical axis, two
cameras' images swapped or one image under the wrong name, a LiDAR a metre or more off the
cameras, a camera a metre or more off its position or 10-20 % off its focal length, from one
frame or a drive (its frames' edges pooled for steps 2-4 below; on a drive also a camera whose
image froze while the car moved: :func:`~bevviz.calibration.lidar.repeats.frozen_images`).

The doctor's fine search (:mod:`~bevviz.calibration.lidar.alignment`) looks within a few degrees
of the stored pose, far from an error of the first day (a camera upside down, two cables
swapped), and then reports a small offset or "inconclusive". This screen scores the stored
pose of every camera with the doctor's own LiDAR-edge evidence (:class:`~bevviz.calibration.
lidar.alignment.EdgeAlignment`: the view's or the rings' edges the camera sees, on its finest
edge attraction map) against gross alternatives.

The score of a pose is the *lift* at each edge it brings into the image: the attraction less
its local mean (:data:`bevviz.calibration.lidar.image_support.LOCAL_RAD`), so that a textured
region does not attract any pose. An alternative wins when, on the edges both bring into
view, its lift beats the stored pose's by ``GROSS_T`` standard errors (paired, edge by edge),
by ``MIN_GAIN`` on average, and shows an alignment of its own (``MIN_LIFT``):

1. *The LiDAR* (first; :mod:`~bevviz.calibration.gross.lidar_placement`): the scan moved
   along an ego axis by up to 2 m, then refined on every axis to maximise the cameras' mean
   lift; a move of at least ``LIDAR_MIN_MOVE_M`` that most cameras (``LIDAR_MAJORITY``, at
   least two) prefer on their own names the LiDAR, no camera is blamed for it, and the
   cameras are screened with the LiDAR corrected. A camera's edges are those it sees from
   where the scan lies, so after a move that large the edges are chosen again from the moved
   scan, and the search and the vote run once more from there. When most cameras whose
   images have edges see none of the scan's (mean lift below ``MIN_LIFT``), the scan is also
   tried turned about the vertical (``LIDAR_TURNS_DEG``: a scan in its sensor's frame; each
   turn costs the evidence again, 1-2 s; moves forward and up are searched together, and a
   LiDAR named turned leaves the cameras unscreened, as it is placed only roughly); if no
   move makes most cameras see it, the LiDAR is no reference and the screen names no camera
   (a note says so).
2. *Turns about the optical axis* (+90, 180, -90 deg). A turn that a move or refocus, free to
   turn a little, fits about as well (``TURN_RIVAL_T``) is named with both readings and no fix.
3. *Images*: every other camera's image at this camera's pose (stretched to its calibrated
   size), where it also fits that pose better than beside it (``IMAGE_SHARPNESS_T``: a
   textured image lifts misplaced edges about as much anywhere). Two cameras whose images
   fit each other's pose better are *swapped*; one image given under two names belongs to
   the camera whose view it fits (the other is named).
4. *Position and focal length* (cameras nothing above named; :mod:`~bevviz.calibration.gross.pose`):
   the optical centre moved a
   metre or two along an ego axis (``POSITION_MOVES_M``), the focal lengths scaled by 10-20 %
   (``FOCAL_SCALES``; next to the best of them, the scales between its steps:
   ``FOCAL_FINE_STEP``). A small rotation mimics a position change (a metre at 30 m is 2 deg),
   so the stored position at its best rotation within a few degrees (a pitch-yaw grid and a
   roll line, then a finer walk) is compared with the alternatives that fit best, each at its
   own best small rotation (``POSE_REFINED``), under thresholds of their own (``POSE_T``,
   ``POSE_MIN_GAIN``; their standard errors count the edges of one image cell as one piece
   of evidence, ``POSE_CELLS``); one is named only where one camera alone of a rig of at least
   ``POSE_MIN_CAMERAS`` prefers it (several at once point at the LiDAR). The edges seen from
   the stored place favour it, so the best alternative is looked at again on the edges seen
   from its own place, and wins on the first look or on the two looks' mean (a camera that
   stands in the road, whose stored place is no place, also on the second look alone). No
   position alternative puts the camera in the road (``pose.MIN_HEIGHT_M`` above the LiDAR's
   ground).
   A camera this step names for nothing gets a note of the alternatives its edges do not rule
   out (:func:`~bevviz.calibration.gross.pose.not_ruled_out`; ``GrossScreen.not_ruled_out``):
   the screen's silence does not clear them.

What the thresholds were chosen on and what the screen does not try (turns that point a camera
elsewhere; a position or focal length of a one-camera rig): docs/gross_errors.md (the tuning
table); ``python scripts/measure_gross.py`` measures them again.

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres. A turn ``T`` is
    a rotation in the camera frame: the corrected pose is ``cam'_from_ego = T @ cam_from_ego``
    with the same optical centre. A LiDAR correction ``M`` moves the scan:
    ``p_ego = M @ p_scan``. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration.gross.lidar_placement import (
    LIDAR_MAJORITY,
    LIDAR_MIN_MOVE_M,
    aligned,
    lidar_correction,
    lidar_words,
    replaced_lidar,
    turned_lidar,
    with_edges,
)
from bevviz.calibration.gross.pose import (
    MIN_HEIGHT_M,
    POSE_MIN_CAMERAS,
    POSE_T,
    SECOND_LOOK_T,
    best_pose,
    both_looks,
    not_ruled_out,
    not_ruled_out_words,
    other_reading,
    pose_values,
    pose_wins,
    second_look,
    short_words,
    sizes_that_fit,
)
from bevviz.calibration.gross.views import (
    MIN_GAIN,
    MIN_LIFT,
    MIN_SCREEN_EDGES,
    frame_views,
    identical_images,
    in_camera,
    pooled_views,
    relative_pose,
    rotated_best,
    wins,
)
from bevviz.calibration.lidar.edges import view_axes
from bevviz.calibration.lidar.frames import as_lidar_frames, moved_frame, moved_scan
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.calibration.lidar.repeats import frozen_words
from bevviz.camera import Camera, Rig
from bevviz.lidar import as_lidar_scan, ground_height
from bevviz.rotations import make_transform

__all__ = [
    "LIDAR_SENSOR",
    "GrossError",
    "GrossScreen",
    "screen_gross_errors",
    "swapped_images",
]

#: The name the screen gives the LiDAR when it is the sensor at fault.
LIDAR_SENSOR = "LIDAR"
#: A named turn says that a position or focal alternative fits about as well where the best of
#: them, at its own best small rotation, stands above the turn's fit by more than this many
#: standard errors (-0.5: within half a standard error below it). On nuScenes and TRI t0-t2 the
#: six vertical moves of 1-2 m named a turn stood at -0.28 to +2.44; of the 72 turns named
#: right (with KITTI's), four stood above (-0.09 to +0.71: TRI CAMERA_01, 06 and 08 upside
#: down) and the next at -0.59. Such a turn is named with both readings and no fix: a fix
#: offered there turned cameras that were only moved (TRI, 1 m down: 3 of 550 single-frame
#: faults and 1 of 132 on the drive), and a look at the image, not the LiDAR, tells which it is.
TURN_RIVAL_T = -0.5
#: A turn about the optical axis wins with a mean lift of its own of this much (every other
#: alternative needs ``MIN_LIFT``, 0.06): the camera's own image at its true pose. TRI's images
#: lift the scan's edges weakly, and three TRI cameras turned 90 or 180 deg (t1 CAMERA_06 +-90,
#: t2 CAMERA_01 180) beat their stored poses by 2.2-2.5 standard errors with lifts of
#: 0.046-0.056; uniform noise images gave no alternative that passed ``GROSS_T`` and
#: ``MIN_GAIN`` at all (50 screens), and their lift stays under 0.022. A turn whose lift is
#: under ``MIN_LIFT`` yields to a position or focal alternative that wins (on the TRI drive a
#: camera moved 2 m down was named turned without that).
TURN_MIN_LIFT = 0.04
#: An image of another camera wins only where it fits this camera's pose better than the pose
#: turned 2 deg in pitch or yaw by this many standard errors
#: (:meth:`~bevviz.calibration.gross.views.EdgeView.sharpness`): TRI CAMERA_01's image, a
#: textured view, fitted other TRI cameras moved 1-2 m better than their own by up to 7
#: standard errors, but no better than beside their poses (sharpness -2.7 to 0.9); each clean
#: camera's own image at its pose 0.7 (TRI CAMERA_01) and 2.0 to 7.9 on the other 17 (nuScenes,
#: TRI embedded frame and t1). A swap is named from either of its two cameras, so the one
#: camera below it does not hide a swap.
IMAGE_SHARPNESS_T = 1.5


@dataclass(frozen=True)
class GrossError:
    """A gross error the screen names.

    Attributes:
        sensor: The camera's name, or :data:`LIDAR_SENSOR`.
        kind: ``"turned"``, ``"swapped"``, ``"wrong image"``, ``"position"``, ``"focal"``, ``"lidar"``
            or (on a drive) ``"frozen"``: the same image, pixel for pixel, while the car moved.
        message: One readable sentence ("CAMERA_01 is upside down: 180 deg about its optical axis").
        margin: The evidence's strength: by how many standard errors the winning alternative's
            edges fit better than the stored pose's (turns, swaps, a wrong image); for the LiDAR,
            how many cameras prefer its correction; for one image under two names, by how
            much mean lift it fits the other's view better; for a camera in the road, how far
            (metres) it stands below ``pose.MIN_HEIGHT_M`` above the LiDAR's ground.
        others: Other sensors the error involves (the swapped camera).
        frames: How many frames' edges named it (a camera's error on a drive: pooled; the LiDAR: 1).
    """

    sensor: str
    kind: str
    message: str
    margin: float
    others: tuple[str, ...] = ()
    frames: int = 1


@dataclass
class GrossScreen:
    """What the screen found.

    Attributes:
        errors: The gross errors named (empty for a clean rig).
        best: Camera -> (label of its best alternative, by how many standard errors its edges
            fit better than the stored pose's: negative when the stored pose fits best).
        pose_best: Camera -> (``"position"`` or ``"focal"``, by how many standard errors
            (clustered by image cell: ``pose.POSE_CELLS``) its best such alternative fits
            better than the stored position at its best small rotation: the better of the
            first look and the two looks' mean), for the cameras no turn or image settled (a
            turn of little lift, or one a move fits as well, waits for it).
        lidar_agree: How many cameras prefer the best LiDAR correction on their own.
        fixed: The rig with every named camera error corrected, or None when none is.
        lidar_from_scan: The LiDAR correction found (4, 4) when the LiDAR is named, else None.
        notes: Why a camera could not be screened, and what the screen could not rule out.
        frames: How many frames the cameras were screened on (their edges pooled).
        not_ruled_out: Camera -> the position and focal errors (in words: "1-2 m further
            forward, fx and fy x 1.1") that its edges do not rule out, for the cameras the
            screen names for nothing (:func:`~bevviz.calibration.gross.pose.not_ruled_out`):
            the screen's silence about them clears nothing.

    Convention:
        ``lidar_from_scan`` maps the scan's points to where the cameras put them: ``p = M @ p_scan``.
    """

    errors: list[GrossError] = field(default_factory=list)
    best: dict[str, tuple[str, float]] = field(default_factory=dict)
    pose_best: dict[str, tuple[str, float]] = field(default_factory=dict)
    lidar_agree: int = 0
    fixed: Rig | None = None
    lidar_from_scan: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)
    frames: int = 1
    not_ruled_out: dict[str, str] = field(default_factory=dict)

    @property
    def sensors(self) -> list[str]:
        """The sensors named, in order."""
        return [e.sensor for e in self.errors]

    def not_ruled_out_notes(self) -> list[str]:
        """The notes (among :attr:`notes`) that say what :attr:`not_ruled_out` holds, one a camera."""
        frames = f" over {self.frames} frames" if self.frames > 1 else ""
        return [f"{n}: its LiDAR edges{frames} cannot rule out a position or focal error of {words} (each, "
                f"turned a little, comes within {POSE_T:g} standard errors of the stored pose)"
                for n, words in self.not_ruled_out.items()]


def _turned(camera: Camera, T: np.ndarray) -> Camera:
    """``camera`` turned by ``T`` (3, 3) in its own frame about its optical centre."""
    return camera.replace(cam_from_ego=make_transform(T, np.zeros(3)) @ camera.cam_from_ego)


def _rolls(camera: Camera) -> list[tuple[str, Camera]]:
    """(words, the camera turned) for the three turns about the optical axis."""
    out = []
    for k, words in ((1, "is turned +90 deg about its optical axis"),
                     (2, "is upside down: 180 deg about its optical axis"),
                     (3, "is turned -90 deg about its optical axis")):
        a = np.pi / 2 * k
        T = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]]).round(12)
        out.append((words, _turned(camera, T)))
    return out


def _roll_or_image_wins(kind: str, t: float, lift: float, gain: float) -> bool:
    """Whether a turn (``kind`` "turned") or another camera's image ("image"), compared as
    :meth:`EdgeView.compare` gives ``(t, lift, gain)``, beats the stored pose: :func:`wins`, with
    ``TURN_MIN_LIFT`` in place of ``MIN_LIFT`` for a turn."""
    return wins(t, lift, gain, TURN_MIN_LIFT if kind == "turned" else MIN_LIFT)


def screen_gross_errors(rig: Rig, images: Mapping[str, np.ndarray], lidar: object,
                        more_frames: Sequence[tuple[Mapping[str, np.ndarray], object]] = (),
                        ignore: Mapping[str, object] | None = None) -> GrossScreen:
    """Screen one frame of a rig for gross errors (see the module docstring), or a drive.

    Args:
        rig: The rig as stored.
        images: Camera name -> uint8 RGB image (H, W, 3) (any size; stretched to the calibrated one).
        lidar: The frame's scan: a :class:`~bevviz.lidar.LidarScan` or an (N, 3) / (N, 4) array
            in the ego frame (see :func:`bevviz.lidar.as_lidar_scan`).
        more_frames: Other frames of the same rig and calibration (a drive), as (images, scan)
            pairs, each scan in its own frame's ego frame. The LiDAR is judged on the first
            frame; where it is not named, the cameras are screened on the edges of every frame
            that holds each screened camera's image, pooled (``GrossScreen.frames`` says how
            many): a metre at 30 m is 2 deg, and one frame's edges often cannot tell them apart.
        ignore: Optional camera name -> polygons of (u, v) pixels of the calibrated image that
            do not show the world (the car's own body; as :func:`bevviz.calibration.diagnose`
            takes them): no edge is chosen there, and an edge that lands there under any pose
            is out of view.

    Returns:
        :class:`GrossScreen`.

    Raises:
        InputError: naming ``lidar``, an image or ``ignore`` when it is malformed.
    """
    scan = as_lidar_scan(lidar)
    masks = ignore_masks(rig, ignore)
    screen = GrossScreen()
    first = as_lidar_frames(images, scan, masks)[0]
    views = frame_views(rig, first)
    for n in rig.names:
        if n not in views or len(views[n].points) < MIN_SCREEN_EDGES:
            screen.notes.append(f"{n}: too few LiDAR edges in view; not screened")
            views.pop(n, None)
    if not views:
        return screen
    lidar_move = np.eye(4)
    majority = max(2, int(np.ceil(LIDAR_MAJORITY * len(views))))
    if len(views) >= 2:
        M, agree = lidar_correction(views)
        move = M  # relative to the views' scan; M from the scan as given
        if np.linalg.norm(M[:3, 3]) >= LIDAR_MIN_MOVE_M:  # seen from where it fits, the scan shows other edges
            placed, M2, agree2 = replaced_lidar(rig, first, M, views)
            if agree2 >= majority and len(placed) == len(views):
                views, move, agree, M = placed, M2, agree2, M2 @ M
        screen.lidar_agree = agree
        if agree >= majority:
            screen.errors.append(GrossError(LIDAR_SENSOR, "lidar", lidar_words(M), float(agree)))
            screen.lidar_from_scan, lidar_move = M, move
        elif 2 * aligned(views, np.eye(4)) < len(views) and with_edges(views) >= majority:
            # images with edges, and most show none of the LiDAR's: is the LiDAR turned?
            turned = turned_lidar(rig, first, majority, {n: v.channels for n, v in views.items()})
            if turned is not None:
                views, lidar_move, turn = turned
                screen.lidar_from_scan = lidar_move @ turn
                screen.errors.append(GrossError(LIDAR_SENSOR, "lidar", lidar_words(screen.lidar_from_scan),
                                                float(aligned(views, lidar_move))))
                screen.lidar_agree = aligned(views, lidar_move)
                # a turned scan is placed only roughly (TRI: 0.3 m short of its mounting height), and
                # against it a clean TRI camera's image fit another's better by 1.9 standard errors
                screen.notes.append("the cameras are not screened against a LiDAR the screen had to turn: "
                                    "correct the LiDAR and check again")
                return screen
    if len(views) >= 2 and screen.lidar_from_scan is None and 2 * aligned(views, lidar_move) < len(views):
        screen.notes.append("fewer than half the cameras see the LiDAR's edges at their stored poses and no move of "
                            "the LiDAR makes them: the LiDAR (or the images) cannot be a reference, so the "
                            "gross-error screen names no camera")
        return screen
    # the frames the views hold, each scan where the cameras put it (the second look chooses edges again)
    frames = [first if screen.lidar_from_scan is None else moved_frame(first, screen.lidar_from_scan)]
    if more_frames and screen.lidar_from_scan is None:
        views, more, notes, frozen = pooled_views(rig, more_frames, views, (images, scan), masks)
        screen.notes += notes
        screen.errors += [GrossError(n, "frozen", frozen_words(n, ks), float(len(ks))) for n, ks in frozen.items()]
        frames += more
        screen.frames = len(frames)
    # no position alternative puts a camera in the road (``pose.MIN_HEIGHT_M``)
    ground_z = ground_height(scan if screen.lidar_from_scan is None else moved_scan(scan, screen.lidar_from_scan))
    fixed = {n: rig[n] for n in rig.names}
    duplicated = set()
    for n, other, gain in identical_images(images, views):
        duplicated.add(n)
        if gain < MIN_GAIN:  # a structureless image is evidence of nothing, a copy of it either
            screen.notes.append(f"{n} and {other} carry the same image, which fits neither view better; "
                                "not screened")
            continue
        screen.errors.append(GrossError(n, "wrong image", f"{n}'s image is {other}'s: the same image under both "
                                        f"names; it fits {other}'s view, not {n}'s", gain, (other,)))
    image_t: dict[tuple[str, str], float] = {}
    swaps: dict[str, tuple[str, float]] = {}
    moved: dict[str, tuple] = {}
    in_road: dict[str, float] = {}  # camera -> its height above the LiDAR's ground, under MIN_HEIGHT_M
    unsure: dict[str, str] = {}  # camera -> the position and focal errors its edges do not rule out, in words
    for n, view in views.items():
        if n in duplicated:  # its image is another's: nothing of its own to screen
            continue
        cam = view.camera
        lid = in_camera(cam, lidar_move)
        v0 = view.values(lid, cam.K, cam.size, view.channels, view.sideways)
        best: tuple[str, float, float, float, str, Camera | None] = ("stored", float("-inf"), 0.0, 0.0, "", None)
        # the turns about the optical axis (a quarter turn of a wide image keeps its centre only)
        rolls = [(words, alt, view.values(relative_pose(cam, alt) @ lid, alt.K, alt.size, view.channels,
                                          bool(view_axes(alt)[0, 0] == 0)))
                 for words, alt in _rolls(cam)]
        v_best = v0
        for words, alt, v in rolls:
            c = view.compare(v0, v)
            if c[0] > best[1]:
                best, v_best = ("turned", *c, words, alt), v
        for other, ov in views.items():
            if other != n:  # the other camera's image at this pose
                v = view.values(lid, cam.K, cam.size, ov.channels, view.sideways)
                c = view.compare(v0, v)
                image_t[n, other] = c[0]
                if c[0] > best[1] and (not wins(*c) or view.sharpness(lid, ov.channels, v) >= IMAGE_SHARPNESS_T):
                    best, v_best = ("image", *c, other, None), v
        kind, t, lift, gain, what, alt = best
        screen.best[n] = (kind if kind != "image" else f"image of {what}", t)
        # a camera moved or zoomed puts the LiDAR's edges where another image or a turn fits them
        # by chance: a turn or an image is named only where it beats every position and focal
        # alternative too (TRI, 1-2 m or 10-15 %: 71 of 594 such faults were named a wrong image
        # or a quarter turn without this)
        alternatives = pose_values(view, lid, ground_z)
        won = _roll_or_image_wins(kind, t, lift, gain)
        explained = won and view.compare(best_pose(view, alternatives, v0, cells=None)[6], v_best)[0] < 0.0
        weak = won and kind == "turned" and lift < MIN_LIFT  # a move or refocus that wins goes first
        # a camera in the road is a position error whatever its edges say (a turn fitted by chance
        # would be fixed wrongly): TRI cameras moved 2 m down were named turned 90 deg
        height = None if ground_z is None else float(cam.position[2] - ground_z)
        low = height is not None and height < MIN_HEIGHT_M
        if not won or explained or weak or low:
            # each alternative against the stored position at its best small rotation
            reference = rotated_best(view, lid)
            pose = best_pose(view, alternatives, reference, lid)
            # a camera in the road also on the second look alone: its stored place is no place
            alone = low and pose[0] == "position"
            second = second_look(view, pose, frames) if pose[1] >= SECOND_LOOK_T or alone else None
            looks = [pose, *([both_looks(pose, second)] if pose[1] >= SECOND_LOOK_T else []),
                     *([second] if alone else [])]
            screen.pose_best[n] = (pose[0], max(p[1] for p in looks))
            winner = next((p for p in looks if pose_wins(p) and (not low or p[0] == "position")), None)
            if winner is not None:
                moved[n] = winner
            elif not low and not (won and kind == "turned"):  # what the edges cannot exclude
                unsure[n] = not_ruled_out_words(cam, not_ruled_out(view, alternatives, reference, lid))
            if low:
                in_road[n] = height
            if low or not (won and kind == "turned" and winner is None):
                continue
            # a turn that a move held at the stored rotation explains, or one of little lift, where
            # no move or refocus wins: named, the first with both readings and no fix (a gross
            # error missed costs more than a camera named without a fix)
        if kind == "image":
            swaps[n] = (what, t)
            continue
        # a move or refocus free to turn a little may fit about as well as the turn (``TURN_RIVAL_T``)
        rival = best_pose(view, alternatives, v_best, lid, cells=None)
        if explained or rival[1] > TURN_RIVAL_T:  # the LiDAR's edges cannot tell the turn from a move: no fix
            screen.errors.append(GrossError(n, kind, f"{n} {what}, or a {rival[0]} error "
                                            f"({short_words(view.camera, rival[0], rival[5])}): the LiDAR's edges "
                                            "fit both about as well, so no fix is offered: look at the image", t))
            continue
        screen.errors.append(GrossError(n, kind, f"{n} {what}", t))
        fixed[n] = alt
    done: set[str] = set(duplicated)
    for n, (other, t) in sorted(swaps.items(), key=lambda kv: -kv[1][1]):  # the surest first
        if n in done:
            continue
        if other not in done and (swaps.get(other, (None,))[0] == n or image_t.get((other, n), -1.0) > 0.0):
            a, b = sorted((n, other))
            done |= {a, b}
            screen.errors.append(GrossError(a, "swapped", f"{a} and {b} images are swapped", t, (b,)))
        else:
            done.add(n)
            screen.errors.append(GrossError(n, "wrong image", f"{n}'s image is {other}'s (it fits {other}'s "
                                            f"view better than its own by {t:.1f} standard errors)", t, (other,)))
    named_moved = set(moved) if len(moved) == 1 and len(views) >= POSE_MIN_CAMERAS else set()
    if named_moved:
        (n, (kind, t, _, _, words, alt, v_alt)), = moved.items()
        lid = in_camera(views[n].camera, lidar_move)
        # a camera in the road is off in position whatever else fits as well
        if n not in in_road and (other := other_reading(views[n], lid, kind, v_alt, ground_z)) is not None:
            screen.errors.append(GrossError(n, kind, f"{n}{words}, or a {other[0]} error "
                                            f"({short_words(views[n].camera, other[0], other[5])}): the LiDAR's "
                                            "edges fit both about as well, so no fix is offered: look at the image",
                                            t))
        else:
            sizes = sizes_that_fit(views[n], lid, kind, alt, v_alt, ground_z)
            if len(sizes) > 1:
                span = (f"{sizes[0]:g} to {sizes[-1]:g} m" if kind == "position"
                        else f"fx and fy x {sizes[0]:g} to x {sizes[-1]:g}")
                words += f"; {span} fit about as well, so how far is not pinned: check the fix"
            screen.errors.append(GrossError(n, kind, f"{n}{words}", t))
            fixed[n] = alt
    elif moved:
        why = ("several cameras at once: the LiDAR (or the ego frame) is the likelier culprit"
               if len(moved) > 1 else f"a rig of fewer than {POSE_MIN_CAMERAS} cameras cannot tell a camera's "
               "position from the LiDAR's")
        screen.notes.append(f"{', '.join(moved)} fit the LiDAR's edges better moved or with another focal "
                            f"length ({why}); no camera named for it")
    _name_in_road(screen, in_road, named_moved, ground_z, len(views))
    _not_ruled_out_notes(screen, unsure)
    if any(fixed[n] is not rig[n] for n in rig.names):
        screen.fixed = Rig([fixed[n] for n in rig.names])
    screen.errors = [e if e.kind == "lidar" else dataclasses.replace(e, frames=screen.frames) for e in screen.errors]
    return screen


def _name_in_road(screen: GrossScreen, in_road: dict[str, float], named: set[str], ground_z: float | None,
                  n_views: int) -> None:
    """Name the camera that stands in the road (``in_road``: camera -> its height, metres,
    above the LiDAR's ground at ego z ``ground_z``, under ``MIN_HEIGHT_M``), unless its move
    is ``named`` already: a position error without a fix. Only one camera of a rig of at least
    ``POSE_MIN_CAMERAS``: several at once, or a rig too small to tell, point at the LiDAR's
    height (or the ego frame), and get a note.

    Convention:
        Ego frame z up, metres; a camera's height is its optical centre's ego z less the
        ground's (:func:`bevviz.lidar.ground_height`).
    """
    if not in_road:
        return
    if len(in_road) == 1 and n_views >= POSE_MIN_CAMERAS:
        (n, h), = in_road.items()
        if n in named:
            return
        where = f"{-h:.2f} m under" if h < 0 else f"only {h:.2f} m above"
        screen.errors.append(GrossError(n, "position", f"{n} stands {where} the road the LiDAR sees (ego z "
                                        f"{h + ground_z:.2f} m, the road at {ground_z:.2f} m; a camera stands at "
                                        f"least {MIN_HEIGHT_M:g} m above it): its position is off, and the "
                                        "LiDAR's edges do not say where it belongs, so no fix is offered",
                                        MIN_HEIGHT_M - h))
        return
    why = "several cameras at once" if len(in_road) > 1 else f"a rig of fewer than {POSE_MIN_CAMERAS} cameras"
    screen.notes.append(f"{', '.join(in_road)} stand within {MIN_HEIGHT_M:g} m of the road the LiDAR sees or under "
                        f"it ({why}: the LiDAR's height, or the ego frame, is the likelier culprit); no camera named "
                        "for it")


def _not_ruled_out_notes(screen: GrossScreen, unsure: dict[str, str]) -> None:
    """A note for each camera named for nothing whose edges do not rule out some position or
    focal errors (``unsure``: camera -> :func:`~bevviz.calibration.gross.pose.not_ruled_out_words`),
    kept in ``screen.not_ruled_out``: a screen that names nothing has not cleared those."""
    named = set(screen.sensors)
    for n, words in unsure.items():
        if words and n not in named:
            screen.not_ruled_out[n] = words
    screen.notes += screen.not_ruled_out_notes()


def swapped_images(images: Mapping[str, np.ndarray], screen: GrossScreen) -> dict[str, np.ndarray]:
    """The images with every swap the screen named undone (a convenience for re-running the doctor)."""
    out = dict(images)
    for e in screen.errors:
        if e.kind == "swapped":
            a, b = e.sensor, e.others[0]
            out[a], out[b] = images[b], images[a]
    return out
