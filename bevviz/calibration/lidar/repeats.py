"""Frames that repeat a view, counted once (a parked car), and images that froze while the car moved.

Pooling frames is worth something because each frame brings edges seen from another place:
other silhouettes, other pixels, other texture under them. A car that did not move between
two frames brings the same edges onto the same pixels again; its second frame is the first
one's evidence over again, not more of it. Pooled as if it were independent, it shrinks
every bootstrap spread and grows every paired t by about the square root of the copies
(the embedded frames given three times: nuScenes CAM_FRONT_RIGHT's roll spread 0.21 -> 0.04
deg, TRI CAMERA_07's 1.21 -> 0.03, and CAMERA_07 called "ok"), so a verdict would rest on a
certainty the drive does not hold, and a camera the LiDAR puts just beyond the tolerance
would stand that much nearer a conviction.

:func:`repeated_views` first asks whether a frame's sweep, as it stands, overlaps the last
frame kept: at least ``OVERLAP_MIN`` of its returns within ``OVERLAP_M`` of that frame's
(a few milliseconds; a car that drove on overlaps less, and the frame is kept without
more). Where it does, it registers the sweep onto that frame's
(:func:`~bevviz.calibration.lidar.ego_motion.estimate_motion`, 0.15-0.8 s): a frame the registration
places less than ``REPEAT_MOVE_M`` and ``REPEAT_TURN_DEG`` from it, with a residual under
``REPEAT_RMSE_M``, repeats that frame's view and is left out of the pooled evidence, with
a reason. A registration that cannot be used (too few planar pairs, a direction not
pinned: a flat or corridor scene) leaves the frame in: that the frames differ is then not
known, and the frame agreement (:mod:`~bevviz.calibration.lidar.frame_agreement`) still
judges it.

The opposite case, :func:`frozen_images`: the sweeps moved but one camera's image did not
(a stalled driver, a recording that copied one frame). Such a frame is no evidence of where
that camera points; the doctor leaves it out of that camera's evidence, and the gross-error
screen names the camera.

What the constants were chosen on (docs/calibration.md, "Frames that repeat a view"): the
TRI drive's consecutive sweeps register 1.26-1.28 m apart (residual 0.022 m); a sweep given
twice, or again with 2 cm of range noise, 0.001 m and 0.002 deg; two KITTI frames of
different places registered (wrongly) 0.16 m and 3.5 deg apart, residual 0.094 m, and are
told apart by the residual and the turn; the synthetic sample's keyframes lie 0.5 m apart.
Overlap within 0.2 m: a sweep and its noisy copy 1.00, moved 0.1 m 1.00, moved 0.25 m
0.56-0.83, 0.5 m 0.46, TRI t0 -> t1 0.46, the two KITTI places 0.28; a simulated parked sweep
(another azimuth phase, 25 or 40 % of the returns moved 3 m) 0.76-0.85 or 0.61-0.74, and it
registers within 0.002 m and 0.003 deg.

Convention:
    Frames are numbered from 1 in the order given (as the doctor's reports number them);
    each scan is in its own frame's ego frame (x forward, y left, z up, metres).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from bevviz.calibration.lidar.ego_motion import MotionEstimate, estimate_motion
from bevviz.errors import InputError
from bevviz.lidar import LidarScan

__all__ = ["OVERLAP_M", "OVERLAP_MIN", "REPEAT_MOVE_M", "REPEAT_RMSE_M", "REPEAT_TURN_DEG", "RepeatedViews",
           "frozen_images", "frozen_words", "repeated_views"]

#: A sweep is registered onto the last frame kept only where at least ``OVERLAP_MIN`` of its
#: returns (a fixed sample of ``_OVERLAP_SAMPLE``) lie within ``OVERLAP_M`` (metres) of that
#: frame's returns as they stand: a parked car's next sweep does (its points slide along the
#: rings by at most half their spacing; with another azimuth phase and 40 % of the returns on
#: things that moved, 0.61-0.74 on the development scans), a car that drove half a metre or
#: more does not (0.46 on the TRI drive), and the registration (0.15-0.8 s) is then not needed.
#: The gate only spares time: what it lets through, the registration decides.
OVERLAP_M = 0.2
OVERLAP_MIN = 0.5
_OVERLAP_SAMPLE = 4000

#: A frame registered less than this far (metres) from the last frame kept repeats its view:
#: a parked car moves 0, a creeping one a few centimetres a frame; the development drives'
#: keyframes lie 0.5 m (the synthetic sample) to 1.3 m (TRI) apart.
REPEAT_MOVE_M = 0.25
#: ... and turned less than this (degrees).
REPEAT_TURN_DEG = 1.0
#: ... with a robust point-to-plane residual (metres) under this: a registration of two
#: places that are not one (two KITTI frames: 0.094 m) does not count as a repeat; the same
#: place registers to the LiDAR's noise (0.02 m on the TRI drive).
REPEAT_RMSE_M = 0.05


@dataclass(frozen=True)
class RepeatedViews:
    """Which frames of a drive repeat an earlier frame's view.

    Attributes:
        kept: Indices (from 0) of the frames kept, ascending: the first always.
        repeats: Index of a frame left out -> (index of the kept frame it repeats, metres
            and degrees the registration puts between them).
    """

    kept: tuple[int, ...]
    repeats: dict[int, tuple[int, float, float]] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        """A sentence for the report ("" when no frame repeats another)."""
        if not self.repeats:
            return ""
        by_kept: dict[int, list[int]] = {}
        for k, (j, _, _) in sorted(self.repeats.items()):
            by_kept.setdefault(j, []).append(k)
        parts = [f"frame{'s' if len(ks) > 1 else ''} {', '.join(str(k + 1) for k in ks)} "
                 f"repeat{'' if len(ks) > 1 else 's'} frame {j + 1}'s view" for j, ks in by_kept.items()]
        move = max(m for _, m, _ in self.repeats.values())
        turn = max(t for _, _, t in self.repeats.values())
        return (f"{'; '.join(parts)} (the sweeps registered within {move:.2f} m and {turn:.2f} deg: a "
                f"parked car, or the same scan given again): a view seen again is counted once "
                f"({len(self.kept)} of {len(self.kept) + len(self.repeats)} frames pooled)")


def _is_repeat(m: MotionEstimate) -> bool:
    return (m.ok and m.translation_m < REPEAT_MOVE_M and m.rotation_deg < REPEAT_TURN_DEG
            and m.rmse_m < REPEAT_RMSE_M)


def _returns(scan: LidarScan) -> np.ndarray:
    """The scan's returns, (N, 3) float64 (ego frame)."""
    return np.asarray(scan.xyz, dtype=np.float64)[scan.returns()]


def _overlap(tree: cKDTree, later: LidarScan) -> float:
    """Share of ``later``'s returns (a fixed sample) within ``OVERLAP_M`` of the tree's points."""
    pts = _returns(later)
    if not len(pts) or not tree.n:
        return 0.0
    pts = pts[np.random.default_rng(0).choice(len(pts), min(len(pts), _OVERLAP_SAMPLE), replace=False)]
    d, _ = tree.query(pts, distance_upper_bound=OVERLAP_M)
    return float(np.mean(np.isfinite(d)))


def repeated_views(scans: Sequence[LidarScan]) -> RepeatedViews:
    """Which frames repeat an earlier frame's view (module docstring).

    Args:
        scans: One scan per frame, in order, each in its own frame's ego frame.

    Returns:
        :class:`RepeatedViews`. A frame whose scan is too small to register (fewer than
        ``ego_motion.MIN_PAIRS`` returns after thinning) is kept: whether its view differs
        is not known.
    """
    if not scans:
        return RepeatedViews(())
    kept, repeats = [0], {}
    tree, tree_of = None, -1  # the returns of the last frame kept, for the overlap test
    for k in range(1, len(scans)):
        j = kept[-1]
        if tree_of != j:
            tree, tree_of = cKDTree(_returns(scans[j])), j
        m = _registered(scans[j], scans[k]) if _overlap(tree, scans[k]) >= OVERLAP_MIN else None
        if m is not None and _is_repeat(m):
            repeats[k] = (j, m.translation_m, m.rotation_deg)
        else:  # the car drove on, or whether it did is not known: another view
            kept.append(k)
    return RepeatedViews(tuple(kept), repeats)


def _registered(earlier: LidarScan, later: LidarScan) -> MotionEstimate | None:
    """The registration of ``earlier`` onto ``later``, None where a scan is too small to register."""
    try:
        return estimate_motion(earlier, later)
    except InputError:
        return None


def frozen_images(images: Sequence[Mapping[str, np.ndarray]], views: RepeatedViews) -> dict[str, tuple[int, ...]]:
    """Cameras whose image stays the same, pixel for pixel, while the LiDAR saw the car move:
    a frozen image stream (a stalled driver, a recording that copied one frame), or a camera
    that delivers one fixed picture. Such a frame is evidence of nothing for that camera.

    Only the frames ``views`` keeps (distinct views: the sweeps moved) are compared, each with
    the camera's image in the last kept frame that holds one; a parked car's frames, whose
    images may well match, are repeats and never compared. Only identical images count (a
    real sensor's noise makes two exposures differ somewhere, even at night), and a
    structureless image (every pixel alike: a black or grey frame) is left to the checks of
    structureless images.

    Args:
        images: One frame's images per frame, in order (camera name -> uint8 RGB (H, W, 3)).
        views: :func:`repeated_views` of the same frames' scans.

    Returns:
        Camera name -> indices (from 0) of the frames whose image of it repeats an earlier
        distinct view's; cameras without any are absent.
    """
    out: dict[str, list[int]] = {}
    last: dict[str, np.ndarray] = {}
    for k in views.kept:
        for name, img in images[k].items():
            arr = np.asarray(img)
            before = last.get(name)
            if before is not None and before.shape == arr.shape and np.array_equal(before, arr) and np.ptp(arr) > 0:
                out.setdefault(name, []).append(k)
            last[name] = arr
    return {n: tuple(ks) for n, ks in out.items()}


def frozen_words(camera: str, frames: Sequence[int]) -> str:
    """The sentence for a camera whose image repeated in ``frames`` (indices from 0)."""
    which = ", ".join(str(k + 1) for k in frames)
    return (f"{camera}'s image in frame{'s' if len(frames) > 1 else ''} {which} is the image of the frame before, "
            "pixel for pixel, though the LiDAR saw the car move: its image stream is frozen (or the frames "
            "carry a copy of one picture), and such a frame is no evidence of where it points")
