"""The gross-error screen: a camera turned a quarter or half turn about its optical axis, two
cameras' images swapped or one image under the wrong name, a LiDAR a metre or more off the
cameras, from one frame.

The doctor's fine search (:mod:`~bevviz.calibration.alignment`) looks within a few degrees of
the stored pose; an error of the first day (a camera mounted upside down, two cables swapped)
lies far outside it, and the fine search then reports a small offset or "inconclusive". This
screen scores the stored pose of every camera with the doctor's own LiDAR-edge evidence
(:class:`~bevviz.calibration.alignment.EdgeAlignment`: the camera's view edges, or the ring
edges where the view holds too few, kept where the camera sees them, and the finest edge
attraction map of its image) against gross alternatives, and names an alternative only when
it scores at least ``GROSS_RATIO`` times the stored pose, a margin no clean camera of the
development frames comes near:

1. *The LiDAR* (first): the scan moved along an ego axis by up to 2 m, then refined on every
   axis; when the rig's mean ratio reaches ``GROSS_RATIO`` and most cameras
   (``LIDAR_MAJORITY``, at least two) reach it on their own, the LiDAR is named, no camera is
   blamed for it, and the cameras are screened with the LiDAR corrected.
2. *Turns about the optical axis* (+90, 180, -90 deg), compared on the edges that all four
   turns bring into the image (a quarter turn of a wide image keeps only its centre).
3. *Images*: every other camera's image at this camera's pose (stretched to its calibrated
   size). Two cameras that prefer each other's image (or one that does while the other's own
   fit is no better than the exchange) are *swapped*; one alone has the *wrong image*.

Measured (``tests/calibration/test_gross.py``; the embedded nuScenes keyframe, the TRI and the
KITTI frame): the clean cameras' best alternative scores at most 1.11x the stored pose (TRI
CAMERA_06's quarter turn, CAMERA_09 with CAMERA_01's image); the faults found score 1.36-3.8x.
Not separable with one frame of this evidence, so not named: positions 1-2 m off and focal
lengths 10 % off (their best ratios, 1.0-1.3x, overlap the clean cameras'), turns that point
a camera elsewhere. Two of nine upside-down cameras tried are missed (nuScenes
CAM_BACK_RIGHT 1.22x, TRI CAMERA_01 1.21x) and one is named a quarter turn (TRI CAMERA_06);
a LiDAR 1.9 m low is named on nuScenes, not on TRI (1.02x).

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres. A turn ``T`` is
    a rotation in the camera frame: the corrected pose is ``cam'_from_ego = T @ cam_from_ego``
    with the same optical centre. A LiDAR correction ``M`` moves the scan:
    ``p_ego = M @ p_scan``. See docs/conventions.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import cv2
import numpy as np

from bevviz.calibration.alignment import EdgeAlignment, as_lidar_frames
from bevviz.calibration.lidar_edges import view_axes
from bevviz.camera import Camera, Rig
from bevviz.lidar import LidarScan, as_lidar_scan
from bevviz.projection import inside_image

__all__ = [
    "GROSS_RATIO",
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
MIN_SHARE_OF_STORED = 0.3
#: An alternative must score this many times the stored pose's (clean development cameras:
#: at most 1.11x; see the module docstring).
GROSS_RATIO = 1.25
#: LiDAR moves searched along each ego axis (metres), then refined on every axis from
#: ``LIDAR_STEP_M`` halving to an eighth of it.
LIDAR_MOVES_M = (-2.0, -1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0)
LIDAR_STEP_M = 0.5
#: Share of the screened cameras that must prefer the LiDAR's correction on their own.
LIDAR_MAJORITY = 0.6


@dataclass(frozen=True)
class GrossError:
    """A gross error the screen names.

    Attributes:
        sensor: The camera's name, or :data:`LIDAR_SENSOR`.
        kind: ``"turned"``, ``"swapped"``, ``"wrong image"``, ``"position"``, ``"focal"`` or ``"lidar"``.
        message: One readable sentence ("CAMERA_01 is upside down: 180 deg about its optical axis").
        ratio: The winning alternative's score over the stored pose's.
        others: Other sensors the error involves (the swapped camera).
    """

    sensor: str
    kind: str
    message: str
    ratio: float
    others: tuple[str, ...] = ()


@dataclass
class GrossScreen:
    """What the screen found.

    Attributes:
        errors: The gross errors named (empty for a clean rig).
        best: Camera -> (label of its best alternative, its score over the stored pose's).
        lidar_ratio: The best LiDAR correction's rig score over the stored scan's.
        fixed: The rig with every named camera error corrected, or None when none is.
        lidar_from_scan: The LiDAR correction found (4, 4) when the LiDAR is named, else None.
        notes: Why a camera could not be screened.

    Convention:
        ``lidar_from_scan`` maps the scan's points to where the cameras put them: ``p = M @ p_scan``.
    """

    errors: list[GrossError] = field(default_factory=list)
    best: dict[str, tuple[str, float]] = field(default_factory=dict)
    lidar_ratio: float = 1.0
    fixed: Rig | None = None
    lidar_from_scan: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def sensors(self) -> list[str]:
        """The sensors named, in order."""
        return [e.sensor for e in self.errors]


def _turned(camera: Camera, T: np.ndarray) -> Camera:
    M = np.eye(4)
    M[:3, :3] = T
    return camera.replace(cam_from_ego=M @ camera.cam_from_ego)


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

    def ratio(self, v0: np.ndarray, alt_from_cam: np.ndarray, K: np.ndarray, channels: np.ndarray | None = None,
              sideways: bool | None = None) -> float:
        """The pose's mean attraction over the stored pose's, on the edges both bring into view
        (0.0 when fewer than ``MIN_SCREEN_EDGES`` or ``MIN_SHARE_OF_STORED`` of them do)."""
        va = self.values(alt_from_cam, K, self.camera.size, self.channels if channels is None else channels,
                         self.sideways if sideways is None else sideways)
        both = ~np.isnan(va) & ~np.isnan(v0)
        n = int(both.sum())
        if n < max(MIN_SCREEN_EDGES, MIN_SHARE_OF_STORED * np.count_nonzero(~np.isnan(v0))):
            return 0.0
        return float(va[both].mean() / max(v0[both].mean(), 1e-9))


def _views(rig: Rig, images: Mapping[str, np.ndarray], scan: LidarScan) -> dict[str, _View]:
    """Each camera's :class:`_View`, from the doctor's own edge alignment (its edges, their
    visibility and its finest attraction map)."""
    frames = as_lidar_frames(images, scan)
    out = {}
    for n in rig.names:
        if n not in images:
            continue
        ea = EdgeAlignment(rig[n], frames)
        if not len(ea):
            continue
        ch = ea.maps[0][ea.levels - 1]
        out[n] = _View(rig[n], ea.points, ea.orient.astype(np.int64), ch, bool(view_axes(rig[n])[0, 0] == 0))
    return out


def _lidar_correction(views: Mapping[str, _View]) -> tuple[np.ndarray, float, int]:
    """The LiDAR move (a translation) that best fits the rig: (ego_from_scan (4, 4), the rig's
    mean ratio, cameras that prefer it on their own by ``GROSS_RATIO``)."""
    base = {n: v.values(np.eye(4), v.camera.K, v.camera.size, v.channels, v.sideways) for n, v in views.items()}

    def ratios(t: np.ndarray) -> np.ndarray:
        M = np.eye(4)
        M[:3, 3] = t
        return np.array([v.ratio(base[n], v.camera.cam_from_ego @ M @ v.camera.ego_from_cam, v.camera.K)
                         for n, v in views.items()])

    t, best = np.zeros(3), 1.0
    for h in LIDAR_MOVES_M:
        for ax in range(3):
            trial = np.zeros(3)
            trial[ax] = h
            s = float(ratios(trial).mean())
            if s > best:
                t, best = trial, s
    step = LIDAR_STEP_M
    while step >= LIDAR_STEP_M / 8:
        moved = False
        for ax, sign in itertools.product(range(3), (1.0, -1.0)):
            trial = t.copy()
            trial[ax] += sign * step
            s = float(ratios(trial).mean())
            if s > best:
                t, best, moved = trial, s, True
        if not moved:
            step /= 2
    M = np.eye(4)
    M[:3, 3] = t
    return M, best, int(np.sum(ratios(t) >= GROSS_RATIO))


def _lidar_words(M: np.ndarray) -> str:
    t = M[:3, 3]
    return (f"the LiDAR is off the cameras by ({-t[0]:+.2f}, {-t[1]:+.2f}, {-t[2]:+.2f}) m (forward, left, up): "
            "the cameras agree with each other on where it should be, so no camera is blamed")


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
    if len(views) >= 2:
        M, ratio, agree = _lidar_correction(views)
        screen.lidar_ratio = ratio
        if ratio >= GROSS_RATIO and agree >= max(2, int(np.ceil(LIDAR_MAJORITY * len(views)))):
            screen.errors.append(GrossError(LIDAR_SENSOR, "lidar", _lidar_words(M), ratio))
            screen.lidar_from_scan = lidar_move = M
    fixed = {n: rig[n] for n in rig.names}
    image_ratio: dict[tuple[str, str], float] = {}
    swaps: dict[str, tuple[str, float]] = {}
    for n, view in views.items():
        cam = view.camera
        lid = cam.cam_from_ego @ lidar_move @ cam.ego_from_cam  # the LiDAR's correction in this camera's frame
        v0 = view.values(lid, cam.K, cam.size, view.channels, view.sideways)
        best: tuple[str, float, str, Camera | None] = ("stored", 1.0, "", None)
        # the turns about the optical axis, compared on the edges all four bring into view
        rolls = [(words, alt, view.values(_relative(cam, alt) @ lid, alt.K, alt.size, view.channels,
                                          bool(view_axes(alt)[0, 0] == 0)))
                 for words, alt in _rolls(cam)]
        common = ~np.isnan(v0) & np.logical_and.reduce([~np.isnan(v) for _, _, v in rolls])
        if common.sum() >= MIN_SCREEN_EDGES:
            for words, alt, v in rolls:
                r = float(v[common].mean() / max(v0[common].mean(), 1e-9))
                if r > best[1]:
                    best = ("turned", r, words, alt)
        for other, ov in views.items():
            if other != n:
                r = view.ratio(v0, lid, cam.K, channels=ov.channels)  # the other camera's image at this pose
                image_ratio[n, other] = r
                if r > best[1]:
                    best = ("image", r, other, None)
        screen.best[n] = (best[0] if best[0] != "image" else f"image of {best[2]}", float(best[1]))
        if best[1] < GROSS_RATIO:
            continue
        if best[0] == "image":
            swaps[n] = (best[2], best[1])
        else:
            screen.errors.append(GrossError(n, best[0], f"{n} {best[2]}", float(best[1])))
            fixed[n] = best[3]
    named: set[tuple[str, str]] = set()
    for n, (other, r) in swaps.items():
        a, b = sorted((n, other))
        if (a, b) in named:
            continue
        if swaps.get(other, (None,))[0] == n or (other not in swaps and image_ratio.get((other, n), 0.0) > 1.0):
            named.add((a, b))
            screen.errors.append(GrossError(a, "swapped", f"{a} and {b} images are swapped", float(r), (b,)))
        else:
            screen.errors.append(GrossError(n, "wrong image", f"{n}'s image is {other}'s (it fits {other}'s "
                                            f"view {r:.2f}x better than its own)", float(r), (other,)))
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
