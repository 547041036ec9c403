"""Sync witness: does a LiDAR displaced along the car's axis (a timing error) explain a camera's offset?

A moving car whose LiDAR sweep and camera exposure are not matched in time (a wrong
timestamp, an unsynchronised trigger, a missing ego-motion compensation) sees its LiDAR
points displaced along its direction of travel by speed x time error: at 10 m/s, 20 ms is
0.2 m. A rotation-only alignment turns the camera to absorb that displacement, so every
camera of the rig looks rotated at once (a car at about 9 m/s with its ego motion
compensated twice: a front-left camera turned by about a degree of yaw). A rotation
moves near and far points by the same angle, a displacement moves near points
more: fitted together, the two separate.

The fit (:func:`timing_fit`): for each displacement ``s`` of the edge points along the
car's forward axis (ego x), from ``-MAX_SHIFT_M`` to ``MAX_SHIFT_M`` in ``SHIFT_STEP_M``
steps, the camera's rotation is optimised again (from the previous displacement's optimum
and from the stored pose); the best pair is the *joint optimum*. The LiDAR verdict
(:func:`bevviz.calibration.verdicts.lidar_verdict`) does not call a camera miscalibrated
when some displacement explains the evidence at least as well as the rotation-only optimum
*and* puts the camera within the tolerance of where the rig consensus puts it, or of where
the LiDAR itself does (:meth:`TimingFit.explaining`: a displacement along the car's axis,
from a timing error or a translation error of the calibration, explains it as well as a
rotation does; the displacement shifts the other cameras' evidence too, so the consensus
alone is no fixed reference). What the check costs and saves on the development frames:
docs/calibration.md (tuning table).

Convention:
    ``shift_m`` moves the LiDAR points *forward* (ego +x) relative to the camera;
    offsets are body-frame (FLU) ``(roll, pitch, yaw)`` degrees as in
    :mod:`bevviz.calibration.lidar.evidence`. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bevviz.rotations import within_every_axis

__all__ = ["MAX_SHIFT_M", "RIG_GAIN_Z", "RIG_SHARE", "RIG_SHIFT_M", "SHIFT_STEP_M", "TimingFit", "rig_timing",
           "timing_fit"]

#: Largest displacement (metres) along the car's forward axis tried: 50 ms (half a sweep) at
#: 32 m/s, a highway (docs/calibration.md, tuning table).
MAX_SHIFT_M = 1.6
#: Spacing (metres) of the displacements tried.
SHIFT_STEP_M = 0.1
#: The rig looks out of sync when at least ``RIG_SHARE`` of its cameras with evidence (two at
#: least) align best with the LiDAR displaced by ``RIG_SHIFT_M`` or more the same way, each
#: gaining at least ``RIG_GAIN_Z`` robust z over no displacement (a calibration fault is one
#: camera's; a timing error moves them all; a camera whose score barely changes along the
#: axis says nothing; nor does a camera whose joint optimum is the fit's last displacement,
#: :attr:`TimingFit.at_end`). A note, so it errs on the side of silence (docs/calibration.md,
#: tuning table).
RIG_SHIFT_M = 0.2
RIG_SHARE = 2 / 3
RIG_GAIN_Z = 0.2


class _Alignment(Protocol):  # lidar.alignment.EdgeAlignment, as lidar.evidence uses it
    levels: int

    def refine_many(self, starts_deg: np.ndarray, level: int, weights: np.ndarray | None = None,
                    step: float = 0.25, stop: float = 0.01,
                    shift_m: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class TimingFit:
    """Rotation and displacement along the car's axis, fitted together.

    Attributes:
        shifts_m: The displacements tried, (K,) metres (0 included: the rotation-only fit).
        offsets_deg: The camera's best offset at each displacement, (K, 3) degrees (as
            :attr:`bevviz.calibration.lidar.evidence.CameraEvidence.offset_deg`).
        scores: The finest-level alignment score there, (K,).
        rotation_score: The rotation-only optimum's score (no displacement).
        score_spread: The robust spread of the camera's score landscape (the unit of
            :attr:`gain_z`; :attr:`bevviz.calibration.lidar.evidence.CameraEvidence.score_spread`).
    """

    shifts_m: np.ndarray = field(default_factory=lambda: np.zeros(0))
    offsets_deg: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rotation_score: float = float("nan")
    score_spread: float = float("nan")

    @property
    def fitted(self) -> bool:
        """Whether the fit ran (a camera with edge points)."""
        return len(self.shifts_m) > 0

    @property
    def shift_m(self) -> float:
        """Displacement at the joint optimum (metres; 0 when none helps or not fitted)."""
        return float(self.shifts_m[int(np.argmax(self.scores))]) if self.fitted else 0.0

    @property
    def offset_deg(self) -> np.ndarray:
        """The camera's offset at the joint optimum, (3,) degrees (NaN when not fitted)."""
        return self.offsets_deg[int(np.argmax(self.scores))] if self.fitted else np.full(3, np.nan)

    @property
    def at_end(self) -> bool:
        """Whether the joint optimum is the largest displacement tried: the score may keep
        rising beyond it, so it is no optimum (False when not fitted)."""
        if not self.fitted:
            return False
        end = float(np.max(np.abs(self.shifts_m)))
        return end > 0 and abs(self.shift_m) >= end - 1e-9

    @property
    def gain(self) -> float:
        """Joint optimum's score minus the rotation-only optimum's (>= 0; 0 when not fitted)."""
        return float(np.max(self.scores) - self.rotation_score) if self.fitted else 0.0

    @property
    def gain_z(self) -> float:
        """:attr:`gain` in units of :attr:`score_spread` (0 when either is unknown)."""
        z = self.gain / self.score_spread if np.isfinite(self.score_spread) and self.score_spread > 0 else 0.0
        return float(z)

    def explaining(self, expected_deg: np.ndarray, tolerance_deg: float) -> int | None:
        """The displacement that explains the evidence as well as the rotation-only optimum
        does (score at least its score) with the camera within ``tolerance_deg`` of
        ``expected_deg`` (3,) on every axis (:func:`~bevviz.rotations.within_every_axis`): its
        index into :attr:`shifts_m` (the best scoring such), or None."""
        if not self.fitted:
            return None
        ok = ((self.shifts_m != 0) & (self.scores >= self.rotation_score)
              & within_every_axis(self.offsets_deg - np.asarray(expected_deg), tolerance_deg))
        if not ok.any():
            return None
        return int(np.flatnonzero(ok)[np.argmax(self.scores[ok])])


def rig_timing(fits: Mapping[str, TimingFit]) -> str:
    """A rig-level statement when the cameras agree that the LiDAR is displaced ("" when not).

    Args:
        fits: Camera name -> its :class:`TimingFit` (cameras with enough evidence only).

    Returns:
        One sentence naming the cameras, the median displacement and what to check; "".
    """
    fitted = {n: f for n, f in fits.items() if f.fitted}
    if len(fitted) < 2:
        return ""
    for sign in (-1, 1):
        agree = sorted(n for n, f in fitted.items() if sign * f.shift_m >= RIG_SHIFT_M - 1e-9
                       and f.gain_z >= RIG_GAIN_Z and not f.at_end)
        if len(agree) >= 2 and len(agree) >= RIG_SHARE * len(fitted):
            med = float(np.median([fitted[n].shift_m for n in agree]))
            return (f"{len(agree)} of {len(fitted)} cameras ({', '.join(agree)}) align best with the LiDAR points "
                    f"displaced {med:+.1f} m along the car's axis: the LiDAR and the images look out of sync (check "
                    "the timestamps and the ego-motion compensation) rather than miscalibrated")
    return ""


def _optimise(al: _Alignment, starts: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, float]:
    """The best of the rotation searches from each start (K, 3) at a fixed displacement."""
    ds = np.asarray(starts, dtype=np.float64)
    ss = np.full(len(ds), -np.inf)
    for level in range(al.levels):
        ds, ss = al.refine_many(ds, level, step=0.25 if level == 0 else 0.1, shift_m=shift)
    k = int(np.argmax(ss))
    return ds[k], float(ss[k])


def timing_fit(al: _Alignment, best_deg: np.ndarray, best_score: float, forward_cam: np.ndarray,
               score_spread: float = float("nan")) -> TimingFit:
    """Fit rotation and a displacement along the car's forward axis together.

    Walking outward from no displacement in each direction, the rotation at each
    displacement is optimised from the previous displacement's optimum (following the
    rotation-only optimum as it moves) and from the stored pose; the better is kept.

    Args:
        al: The camera's :class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`.
        best_deg: The rotation-only optimum as a hypothesis (minus the offset), (3,) degrees.
        best_score: Its finest-level score.
        forward_cam: The car's forward axis (ego +x) in the camera frame, (3,) unit vector.
        score_spread: The robust spread of the score landscape (for :attr:`TimingFit.gain_z`).

    Returns:
        :class:`TimingFit` (empty when ``al`` holds no edge point).

    Convention:
        See the module: the displacement moves the points forward (ego +x).
    """
    if len(al) == 0 or al.levels == 0:
        return TimingFit()
    forward = np.asarray(forward_cam, dtype=np.float64)
    best = np.asarray(best_deg, dtype=np.float64)
    n = int(round(MAX_SHIFT_M / SHIFT_STEP_M))
    rows = {0: (best, float(best_score))}
    for sign in (-1, 1):
        prev = best
        for k in range(1, n + 1):
            shift = sign * k * SHIFT_STEP_M * forward
            d, sc = _optimise(al, np.stack([prev, np.zeros(3)]), shift)
            rows[sign * k] = (d, sc)
            prev = d
    keys = sorted(rows)
    return TimingFit(shifts_m=np.array([k * SHIFT_STEP_M for k in keys]),
                     offsets_deg=np.array([-rows[k][0] for k in keys]),
                     scores=np.array([rows[k][1] for k in keys]), rotation_score=float(best_score),
                     score_spread=float(score_spread))
