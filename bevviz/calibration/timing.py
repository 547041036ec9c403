"""Timing witness: does a LiDAR displaced along the car's axis explain a camera's offset?

A moving car whose LiDAR sweep and camera exposure are not matched in time (a wrong
timestamp, an unsynchronised trigger, a missing ego-motion compensation) sees its LiDAR
points displaced along its direction of travel by speed x time error: at 10 m/s, 20 ms is
0.2 m. A rotation-only alignment turns the camera to absorb that displacement, so every
camera of the rig looks rotated at once (on the embedded nuScenes keyframe, moving at about
9 m/s, a doubled ego-motion compensation turns CAM_FRONT_LEFT by 1.2 deg of yaw). A
rotation moves near and far points by the same angle, a displacement moves near points
more: fitted together, the two separate.

The fit (:func:`timing_fit`): for each displacement ``s`` of the edge points along the
car's forward axis (ego x), from ``-MAX_SHIFT_M`` to ``MAX_SHIFT_M`` in ``SHIFT_STEP_M``
steps, the camera's rotation is optimised again (from the rotation-only optimum and from
the stored pose); the best pair is the *joint optimum*. Its offset is what the camera's
rotation would be if the LiDAR were displaced; the LiDAR verdict
(:func:`bevviz.calibration.verdicts.lidar_verdict`) does not call a camera miscalibrated
when the joint optimum puts it within tolerance (a displacement along the car's axis, from a
timing error or a translation error of the calibration, explains the evidence as well as a
rotation does). On correctly calibrated cameras and on injected rotation faults of the
development frames the joint optimum stays within 0.2 m of no displacement.

Convention:
    ``shift_m`` moves the LiDAR points *forward* (ego +x) relative to the camera;
    offsets are body-frame (FLU) ``(roll, pitch, yaw)`` degrees as in
    :mod:`bevviz.calibration.lidar`. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = ["MAX_SHIFT_M", "SHIFT_STEP_M", "TimingFit", "timing_fit"]

#: Largest displacement (metres) along the car's forward axis tried: 40 ms at 20 m/s.
MAX_SHIFT_M = 0.8
#: Spacing (metres) of the displacements tried.
SHIFT_STEP_M = 0.1


class _Alignment(Protocol):  # bevviz.calibration.lidar.EdgeAlignment (which imports this module)
    levels: int

    def refine(self, d_deg: np.ndarray, level: int, weights: np.ndarray | None = None, step: float = 0.25,
               stop: float = 0.01, shift_m: np.ndarray | None = None) -> tuple[np.ndarray, float]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class TimingFit:
    """The joint optimum of rotation and displacement along the car's axis.

    Attributes:
        shift_m: Displacement of the LiDAR points along the car's forward axis at the joint
            optimum (metres; 0 when no displacement helps).
        offset_deg: The camera's offset at the joint optimum, (3,) degrees (as
            :attr:`bevviz.calibration.lidar.CameraEvidence.offset_deg`); NaN when not fitted.
        gain: Finest-level score of the joint optimum minus that of the rotation-only optimum (>= 0).
    """

    shift_m: float = 0.0
    offset_deg: np.ndarray = field(default_factory=lambda: np.full(3, np.nan))
    gain: float = 0.0

    @property
    def fitted(self) -> bool:
        """Whether the fit ran (a camera with edge points)."""
        return bool(np.all(np.isfinite(self.offset_deg)))


def _optimise(al: _Alignment, start: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, float]:
    d, s = np.asarray(start, dtype=np.float64), -np.inf
    for level in range(al.levels):
        d, s = al.refine(d, level, step=0.25 if level == 0 else 0.1, shift_m=shift)
    return d, s


def timing_fit(al: _Alignment, best_deg: np.ndarray, best_score: float, forward_cam: np.ndarray) -> TimingFit:
    """Fit rotation and a displacement along the car's forward axis together.

    Args:
        al: The camera's :class:`~bevviz.calibration.lidar.EdgeAlignment`.
        best_deg: The rotation-only optimum as a hypothesis (minus the offset), (3,) degrees.
        best_score: Its finest-level score.
        forward_cam: The car's forward axis (ego +x) in the camera frame, (3,) unit vector.

    Returns:
        :class:`TimingFit` (offset NaN when ``al`` holds no edge point).

    Convention:
        See the module: the displacement moves the points forward (ego +x).
    """
    if len(al) == 0 or al.levels == 0:
        return TimingFit()
    forward = np.asarray(forward_cam, dtype=np.float64)
    best_d, best_s, best_shift = np.asarray(best_deg, dtype=np.float64), float(best_score), 0.0
    n = int(round(MAX_SHIFT_M / SHIFT_STEP_M))
    for k in [k for k in range(-n, n + 1) if k]:
        shift = k * SHIFT_STEP_M
        for start in (np.asarray(best_deg, dtype=np.float64), np.zeros(3)):
            d, s = _optimise(al, start, shift * forward)
            if s > best_s:
                best_d, best_s, best_shift = d, s, shift
    return TimingFit(shift_m=float(best_shift), offset_deg=-best_d, gain=float(best_s - best_score))
