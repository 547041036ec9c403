"""The gross-error screen: a camera turned a quarter or half turn about its optical axis, two
cameras' images swapped or one image under the wrong name, a LiDAR a metre or more off the
cameras, from one frame.

The doctor's fine search (:mod:`~bevviz.calibration.lidar.alignment`) looks within a few degrees of
the stored pose; an error of the first day (a camera mounted upside down, two cables swapped)
lies far outside it, and the fine search then reports a small offset or "inconclusive". This
screen scores the stored pose of every camera with the doctor's own LiDAR-edge evidence
(:class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`: the camera's view edges, or the ring
edges where the view holds too few, kept where the camera sees them, on its finest edge
attraction map) against gross alternatives.

The score of a pose is the *lift* at each edge it brings into the image: the attraction less
its local mean (:data:`bevviz.calibration.lidar.image_support.LOCAL_RAD`), so that a textured
region does not attract any pose. An alternative wins when, on the edges both bring into
view, its lift beats the stored pose's by ``GROSS_T`` standard errors (paired, edge by edge),
by ``MIN_GAIN`` on average, and shows an alignment of its own (``MIN_LIFT``):

1. *The LiDAR* (first): the scan moved along an ego axis by up to 2 m, then refined on every
   axis to maximise the cameras' mean lift; a move of at least ``LIDAR_MIN_MOVE_M`` that most
   cameras (``LIDAR_MAJORITY``, at least two) prefer on their own names the LiDAR, no camera
   is blamed for it, and the cameras are screened with the LiDAR corrected. When most cameras
   whose images have edges see none of the scan's (mean lift below ``MIN_LIFT``), the scan is
   also tried turned about the vertical (``LIDAR_TURNS_DEG``: a scan in its sensor's frame;
   each turn costs the evidence again, 1-2 s; moves forward and up are searched together,
   and a LiDAR named turned leaves the cameras unscreened, as it is placed only roughly);
   if no move makes most cameras see it, the LiDAR
   is no reference and the screen names no camera (a note says so).
2. *Turns about the optical axis* (+90, 180, -90 deg).
3. *Images*: every other camera's image at this camera's pose (stretched to its calibrated
   size). Two cameras whose images fit each other's pose better are *swapped*; one image
   given under two names belongs to the camera whose view it fits (the other is named).

What the thresholds were chosen on, the margins measured and what the screen does not try
(a camera's position or focal length off, turns that point it elsewhere): docs/calibration.md
(the tuning table; ``python scripts/measure_gross.py`` measures them again).

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres. A turn ``T`` is
    a rotation in the camera frame: the corrected pose is ``cam'_from_ego = T @ cam_from_ego``
    with the same optical centre. A LiDAR correction ``M`` moves the scan:
    ``p_ego = M @ p_scan``. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import cv2
import numpy as np

from bevviz.calibration.lidar.alignment import EdgeAlignment, as_lidar_frames
from bevviz.calibration.lidar.edges import view_axes
from bevviz.calibration.lidar.image_support import LOCAL_RAD, local_mean
from bevviz.camera import Camera, Rig
from bevviz.lidar import LidarScan, as_lidar_scan
from bevviz.projection import inside_image
from bevviz.rotations import make_transform

__all__ = [
    "GROSS_T",
    "LIDAR_SENSOR",
    "MIN_SCREEN_EDGES",
    "GrossError",
    "GrossScreen",
    "screen_gross_errors",
    "swapped_images",
]

#: The name the screen gives the LiDAR when it is the sensor at fault.
LIDAR_SENSOR = "LIDAR"
#: Fewest edges an alternative must bring into view to be scored (and the fewest a camera
#: needs to be screened at all).
MIN_SCREEN_EDGES = 60
#: ... and at least this share of the edges the stored pose brings in.
MIN_SHARE_OF_STORED = 0.2
#: An alternative wins when its edges' lift beats the stored pose's by this many standard
#: errors (paired, edge by edge; see the module docstring for the margins measured) ...
GROSS_T = 1.5
#: ... its own mean lift shows an alignment at all (structureless images give none) ...
MIN_LIFT = 0.06
#: ... and it gains this much lift on the stored pose (two near-identical maps differ by
#: tiny amounts with a tiny spread: many standard errors, no evidence).
MIN_GAIN = 0.03
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


@dataclass(frozen=True)
class GrossError:
    """A gross error the screen names.

    Attributes:
        sensor: The camera's name, or :data:`LIDAR_SENSOR`.
        kind: ``"turned"``, ``"swapped"``, ``"wrong image"``, ``"position"``, ``"focal"`` or ``"lidar"``.
        message: One readable sentence ("CAMERA_01 is upside down: 180 deg about its optical axis").
        margin: The evidence's strength: by how many standard errors the winning alternative's
            edges fit better than the stored pose's (turns, swaps, a wrong image); for the LiDAR,
            how many cameras prefer its correction; for one image under two names, by how
            much mean lift it fits the other's view better.
        others: Other sensors the error involves (the swapped camera).
    """

    sensor: str
    kind: str
    message: str
    margin: float
    others: tuple[str, ...] = ()


@dataclass
class GrossScreen:
    """What the screen found.

    Attributes:
        errors: The gross errors named (empty for a clean rig).
        best: Camera -> (label of its best alternative, by how many standard errors its edges
            fit better than the stored pose's: negative when the stored pose fits best).
        lidar_agree: How many cameras prefer the best LiDAR correction on their own.
        fixed: The rig with every named camera error corrected, or None when none is.
        lidar_from_scan: The LiDAR correction found (4, 4) when the LiDAR is named, else None.
        notes: Why a camera could not be screened.

    Convention:
        ``lidar_from_scan`` maps the scan's points to where the cameras put them: ``p = M @ p_scan``.
    """

    errors: list[GrossError] = field(default_factory=list)
    best: dict[str, tuple[str, float]] = field(default_factory=dict)
    lidar_agree: int = 0
    fixed: Rig | None = None
    lidar_from_scan: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def sensors(self) -> list[str]:
        """The sensors named, in order."""
        return [e.sensor for e in self.errors]


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


def _relative(camera: Camera, alt: Camera) -> np.ndarray:
    """``alt_from_cam`` (4, 4): from the stored camera's frame to an alternative pose's."""
    return alt.cam_from_ego @ camera.ego_from_cam


@dataclass
class _View:
    """One camera's evidence: its LiDAR edges (stored camera frame at its exposure) and image map."""

    camera: Camera
    points: np.ndarray
    orient: np.ndarray
    channels: np.ndarray
    sideways: bool

    def values(self, alt_from_cam: np.ndarray, K: np.ndarray, size: tuple[int, int], channels: np.ndarray,
               sideways: bool) -> np.ndarray:
        """Attraction at each edge under a pose relative to the stored one, (M,), NaN outside the image.

        Args:
            alt_from_cam: (4, 4) from the stored camera frame to the pose's.
            K: The pose's intrinsics, (3, 3).
            size: The calibrated (W, H) the image is stretched to.
            channels: The image's attraction (2, h, w).
            sideways: Whether the pose's view rows are image columns (:func:`view_axes`).
        """
        pc = self.points @ alt_from_cam[:3, :3].T + alt_from_cam[:3, 3]
        z = pc[:, 2]
        uv = (pc @ K.T)[:, :2] / np.maximum(z, 1e-6)[:, None]
        keep = (z > 1.0) & inside_image(uv[:, 0], uv[:, 1], size[0], size[1])
        out = np.full(len(pc), np.nan)
        sx, sy = channels.shape[2] / size[0], channels.shape[1] / size[1]
        u = ((uv[:, 0] + 0.5) * sx - 0.5).astype(np.float32)
        v = ((uv[:, 1] + 0.5) * sy - 0.5).astype(np.float32)
        channel = self.orient ^ int(sideways != self.sideways)
        for c in (0, 1):
            m = keep & (channel == c)
            if m.any():
                out[m] = cv2.remap(channels[c], u[m][None], v[m][None], cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_CONSTANT, borderValue=0)[0]
        return out

    def compare(self, v0: np.ndarray, va: np.ndarray) -> tuple[float, float, float]:
        """How much better a pose's values ``va`` are than the stored pose's ``v0``, edge by edge.

        Args:
            v0: :meth:`values` of the stored pose, (M,).
            va: :meth:`values` of the alternative, (M,).

        Returns:
            ``(t, lift, gain)`` on the edges both bring into view: the mean paired difference
            in standard errors, the alternative's mean lift, and the mean difference itself;
            ``(-inf, 0.0, 0.0)`` when fewer than ``MIN_SCREEN_EDGES`` or
            ``MIN_SHARE_OF_STORED`` of the stored pose's do.
        """
        both = ~np.isnan(va) & ~np.isnan(v0)
        n = int(both.sum())
        if n < max(MIN_SCREEN_EDGES, MIN_SHARE_OF_STORED * np.count_nonzero(~np.isnan(v0))):
            return float("-inf"), 0.0, 0.0
        d = va[both] - v0[both]
        return float(d.mean() / max(d.std() / np.sqrt(n), 1e-9)), float(va[both].mean()), float(d.mean())


def _views(rig: Rig, images: Mapping[str, np.ndarray], scan: LidarScan,
           lifts: Mapping[str, np.ndarray] | None = None) -> dict[str, _View]:
    """Each camera's :class:`_View`, from the doctor's own edge alignment (its edges, their
    visibility and its finest attraction map, less its local mean: the *lift*).

    ``lifts`` (camera -> its image's lift channels, (2, h, w), from an earlier call on the
    same images) spares making the images' maps again: only the scan's edges are new."""
    frames = as_lidar_frames(images, scan)
    out = {}
    for n in rig.names:
        if n not in images:
            continue
        known = lifts.get(n) if lifts is not None else None
        ea = EdgeAlignment(rig[n], frames, maps=known is None)
        if not len(ea):
            continue
        if known is None:
            att = ea.maps[0][ea.levels - 1]
            sigma = LOCAL_RAD * 0.5 * (rig[n].K[0, 0] + rig[n].K[1, 1]) * ea.scales[0]
            known = np.stack([c - local_mean(c, sigma) for c in att])
        out[n] = _View(rig[n], ea.points, ea.orient.astype(np.int64), known, bool(view_axes(rig[n])[0, 0] == 0))
    return out


def _duplicates(images: Mapping[str, np.ndarray], views: Mapping[str, _View]) -> list[tuple[str, str, float]]:
    """Cameras given the very image of another: (the camera whose view it fits worse, the
    other, by how much mean lift), one per pair of identical images."""
    out = []
    names = [n for n in views if n in images]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if images[a].shape == images[b].shape and np.array_equal(images[a], images[b]):
                lift = {n: float(np.nanmean(views[n].values(np.eye(4), views[n].camera.K, views[n].camera.size,
                                                            views[n].channels, views[n].sideways)))
                        for n in (a, b)}
                worse, better = (a, b) if lift[a] < lift[b] else (b, a)
                out.append((worse, better, lift[better] - lift[worse]))
    return out


def _wins(t: float, lift: float, gain: float) -> bool:
    """Whether an alternative's :meth:`_View.compare` beats the stored pose (``GROSS_T``,
    ``MIN_LIFT``, ``MIN_GAIN``)."""
    return t >= GROSS_T and lift >= MIN_LIFT and gain >= MIN_GAIN


def _lidar_correction(views: Mapping[str, _View], forward_and_up: bool = False) -> tuple[np.ndarray, int]:
    """The LiDAR move (a translation) that best fits the rig, and how many cameras prefer it
    on their own (``GROSS_T`` and ``MIN_LIFT``): (ego_from_scan (4, 4), that count).

    The search starts from the best move along one ego axis (``LIDAR_MOVES_M``), or with
    ``forward_and_up`` from the best on the grid of forward and vertical moves together (a
    scan in its sensor's frame is off by the mounting, forward and up at once: from a move
    along one axis the refinement stalled on TRI, (0.88, 0.12, 0.25) m for (0.94, 0, 1.84))."""
    base = {n: v.values(np.eye(4), v.camera.K, v.camera.size, v.channels, v.sideways) for n, v in views.items()}

    def moved(t: np.ndarray) -> list[tuple[float, float, float]]:
        M = np.eye(4)
        M[:3, 3] = t
        return [v.compare(base[n], v.values(v.camera.cam_from_ego @ M @ v.camera.ego_from_cam, v.camera.K,
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
    if np.linalg.norm(t) < LIDAR_MIN_MOVE_M:
        return M, 0
    agree = sum(_wins(*c) for c in moved(t))
    return M, int(agree)


def _with_edges(views: Mapping[str, _View]) -> int:
    """How many cameras' images have any edge at all (a flat image has none)."""
    return int(sum(float(np.ptp(v.channels)) > 0 for v in views.values()))


def _aligned(views: Mapping[str, _View], M: np.ndarray) -> int:
    """How many cameras see the scan's edges under the LiDAR move ``M`` (4, 4): mean lift at
    least ``MIN_LIFT``."""
    lifts = [np.nanmean(v.values(v.camera.cam_from_ego @ M @ v.camera.ego_from_cam, v.camera.K, v.camera.size,
                                 v.channels, v.sideways)) for v in views.values()]
    return int(sum(np.nan_to_num(lift) >= MIN_LIFT for lift in lifts))


def _turned_lidar(rig: Rig, images: Mapping[str, np.ndarray], scan: LidarScan, majority: int,
                  lifts: Mapping[str, np.ndarray]) -> tuple[dict[str, _View], np.ndarray, np.ndarray] | None:
    """The scan turned a quarter, a half or three quarters about the ego vertical (a scan in
    its sensor's frame) when most cameras see its edges then and not before: (the views of
    the turned scan, its move (4, 4), the turn (4, 4)), or None. ``lifts``: the images'
    lift channels of the untouched scan's views (the images are the same)."""
    best = None
    for yaw in LIDAR_TURNS_DEG:
        a = np.radians(yaw)
        turn = np.eye(4)
        turn[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        pts = np.array(scan.points)
        pts[:, :3] = pts[:, :3] @ turn[:3, :3].T
        views = _views(rig, images, dataclasses.replace(scan, points=pts), lifts)
        if len(views) < majority:
            continue
        M, _ = _lidar_correction(views, forward_and_up=True)
        n = _aligned(views, M)
        if n >= majority and (best is None or n > best[0]):
            best = (n, views, M, turn)
    return None if best is None else best[1:]


def _lidar_words(M: np.ndarray) -> str:
    t = M[:3, 3]
    yaw = float(np.degrees(np.arctan2(M[1, 0], M[0, 0]))) % 360
    turned = f"turned {yaw:.0f} deg about the vertical (a scan in its sensor's frame?) and " if yaw > 1 else ""
    return (f"the LiDAR is {turned}off the cameras by ({-t[0]:+.2f}, {-t[1]:+.2f}, {-t[2]:+.2f}) m (forward, left, "
            "up): the cameras agree with each other on where it should be, so no camera is blamed")


def screen_gross_errors(rig: Rig, images: Mapping[str, np.ndarray], lidar: object) -> GrossScreen:
    """Screen one frame of a rig for gross errors (see the module docstring).

    Args:
        rig: The rig as stored.
        images: Camera name -> uint8 RGB image (H, W, 3) (any size; stretched to the calibrated one).
        lidar: The frame's scan: a :class:`~bevviz.lidar.LidarScan` or an (N, 3) / (N, 4) array
            in the ego frame (see :func:`bevviz.lidar.as_lidar_scan`).

    Returns:
        :class:`GrossScreen`.

    Raises:
        InputError: naming ``lidar`` or an image when it is malformed.
    """
    scan = as_lidar_scan(lidar)
    screen = GrossScreen()
    views = _views(rig, images, scan)
    for n in rig.names:
        if n not in views or len(views[n].points) < MIN_SCREEN_EDGES:
            screen.notes.append(f"{n}: too few LiDAR edges in view; not screened")
            views.pop(n, None)
    if not views:
        return screen
    lidar_move = np.eye(4)
    majority = max(2, int(np.ceil(LIDAR_MAJORITY * len(views))))
    if len(views) >= 2:
        M, agree = _lidar_correction(views)
        screen.lidar_agree = agree
        if agree >= majority:
            screen.errors.append(GrossError(LIDAR_SENSOR, "lidar", _lidar_words(M), float(agree)))
            screen.lidar_from_scan = lidar_move = M
        elif 2 * _aligned(views, np.eye(4)) < len(views) and _with_edges(views) >= majority:
            # images with edges, and most show none of the LiDAR's: is the LiDAR turned?
            turned = _turned_lidar(rig, images, scan, majority, {n: v.channels for n, v in views.items()})
            if turned is not None:
                views, lidar_move, turn = turned
                screen.lidar_from_scan = lidar_move @ turn
                screen.errors.append(GrossError(LIDAR_SENSOR, "lidar", _lidar_words(screen.lidar_from_scan),
                                                float(_aligned(views, lidar_move))))
                screen.lidar_agree = _aligned(views, lidar_move)
                # a turned scan is placed only roughly (TRI: 0.3 m short of its mounting height), and
                # against it a clean TRI camera's image fit another's better by 1.9 standard errors
                screen.notes.append("the cameras are not screened against a LiDAR the screen had to turn: "
                                    "correct the LiDAR and check again")
                return screen
    if len(views) >= 2 and screen.lidar_from_scan is None and 2 * _aligned(views, lidar_move) < len(views):
        screen.notes.append("fewer than half the cameras see the LiDAR's edges at their stored poses and no move of "
                            "the LiDAR makes them: the LiDAR (or the images) cannot be a reference, so the "
                            "gross-error screen names no camera")
        return screen
    fixed = {n: rig[n] for n in rig.names}
    duplicated = set()
    for n, other, gain in _duplicates(images, views):
        duplicated.add(n)
        if gain < MIN_GAIN:  # a structureless image is evidence of nothing, a copy of it either
            screen.notes.append(f"{n} and {other} carry the same image, which fits neither view better; "
                                "not screened")
            continue
        screen.errors.append(GrossError(n, "wrong image", f"{n}'s image is {other}'s: the same image under both "
                                        f"names; it fits {other}'s view, not {n}'s", gain, (other,)))
    image_t: dict[tuple[str, str], float] = {}
    swaps: dict[str, tuple[str, float]] = {}
    for n, view in views.items():
        if n in duplicated:  # its image is another's: nothing of its own to screen
            continue
        cam = view.camera
        lid = cam.cam_from_ego @ lidar_move @ cam.ego_from_cam  # the LiDAR's correction in this camera's frame
        v0 = view.values(lid, cam.K, cam.size, view.channels, view.sideways)
        best: tuple[str, float, float, float, str, Camera | None] = ("stored", float("-inf"), 0.0, 0.0, "", None)
        # the turns about the optical axis (a quarter turn of a wide image keeps its centre only)
        rolls = [(words, alt, view.values(_relative(cam, alt) @ lid, alt.K, alt.size, view.channels,
                                          bool(view_axes(alt)[0, 0] == 0)))
                 for words, alt in _rolls(cam)]
        for words, alt, v in rolls:
            c = view.compare(v0, v)
            if c[0] > best[1]:
                best = ("turned", *c, words, alt)
        for other, ov in views.items():
            if other != n:  # the other camera's image at this pose
                c = view.compare(v0, view.values(lid, cam.K, cam.size, ov.channels, view.sideways))
                image_t[n, other] = c[0]
                if c[0] > best[1]:
                    best = ("image", *c, other, None)
        kind, t, lift, gain, what, alt = best
        screen.best[n] = (kind if kind != "image" else f"image of {what}", t)
        if not _wins(t, lift, gain):
            continue
        if kind == "image":
            swaps[n] = (what, t)
        else:
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
    if any(e.kind not in ("lidar", "swapped", "wrong image") for e in screen.errors):
        screen.fixed = Rig([fixed[n] for n in rig.names])
    return screen


def swapped_images(images: Mapping[str, np.ndarray], screen: GrossScreen) -> dict[str, np.ndarray]:
    """The images with every swap the screen named undone (a convenience for re-running the doctor)."""
    out = dict(images)
    for e in screen.errors:
        if e.kind == "swapped":
            a, b = e.sensor, e.others[0]
            out[a], out[b] = images[b], images[a]
    return out
