"""Rig consensus: what the cameras' LiDAR offsets have in common, and what is each camera's own.

Per-camera offsets (:mod:`~bevviz.calibration.lidar.evidence`) are measured against the LiDAR, so
an error of the LiDAR itself moves *every* camera's offset, in a pattern that depends on
each camera's mounting:

* a LiDAR-to-ego rotation ``w`` (ego frame, degrees) appears in camera ``c`` as the
  body-frame offset ``-FLU_FROM_RDF @ R_c @ w`` (``R_c`` its ``cam_from_ego`` rotation):
  the same yaw for every camera, pitch and roll traded around the ring;
* an error of the LiDAR's beam elevations or height appears as the same turn ``b`` about
  every camera's level axis (:func:`level_axis`: its body *pitch* axis when it is mounted
  upright, its yaw axis when it is mounted a quarter turn on its side).

The consensus fits these four numbers to all cameras' offsets (weighted least squares,
weights ``1 / (sd^2 + SYSTEMATIC_DEG^2)``) and sets aside up to ``MAX_OUTLIERS`` cameras
whose removal lowers the misfit (chi-square) by more than ``OUTLIER_PENALTY``: a single
miscalibrated camera cannot bend the consensus. What is left of a camera's offset, its
*residual*, is that camera's own error. Fewer than ``MIN_CAMERAS`` cameras with evidence
give no consensus (residual = offset).

Convention:
    Offsets and residuals are body-frame (FLU) ``(roll, pitch, yaw)`` degrees as in
    :mod:`bevviz.calibration.lidar.evidence`; ``lidar_rotation_deg`` is an ego-frame rotation
    vector (x, y, z) in degrees. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.camera import Camera, Rig
from bevviz.rotations import FLU_FROM_RDF, offset_angle_deg

__all__ = ["MIN_CAMERAS", "SYSTEMATIC_DEG", "RigConsensus", "level_axis", "rig_consensus"]

#: Systematic floor (degrees) added to every camera's bootstrap spread when weighting.
SYSTEMATIC_DEG = 0.15
#: Chi-square drop that justifies setting a camera aside (about a 3-sigma misfit).
OUTLIER_PENALTY = 9.0
#: At most this many cameras are set aside.
MAX_OUTLIERS = 2
#: Fewest cameras with evidence (after setting aside) for a consensus.
MIN_CAMERAS = 4
#: Huber threshold (in units of each offset's uncertainty) and IRLS iterations of the fit:
#: one camera's large offsets pull the common part linearly, not quadratically.
HUBER_K = 2.0
HUBER_ITERATIONS = 8
#: A camera whose view is within asin(this) of the vertical has no level axis (see :func:`level_axis`).
LEVEL_AXIS_MIN = 1e-3
#: Smallest spread used for a camera (degrees), so that no camera gets infinite weight.
MIN_SD_DEG = 0.05


@dataclass
class RigConsensus:
    """The common part of the cameras' offsets.

    Attributes:
        lidar_rotation_deg: Ego-frame rotation (x, y, z) of the LiDAR relative to the cameras
            that best explains the common part, (3,) degrees.
        common_pitch_deg: Body pitch shared by every camera (LiDAR elevation / height), degrees.
        excluded: Cameras set aside as outliers (their own errors did not fit the rest).
        cameras: Cameras with evidence that took part.
        expected_deg: Camera -> the offset the consensus predicts for it, (3,) degrees.
        expected_replicates_deg: Camera -> the same for each bootstrap replicate, (B, 3): the
            consensus is refitted on every replicate (with its own choice of outliers), so
            its uncertainty reaches each camera's residual.
        expected_by_others_deg: Camera -> where the *other* cameras put it, one (3,) offset per
            plausible model (within ``MODEL_MARGIN`` of the best): a camera is only called
            off when it is off under each of them (the verdict must not hang on a modelling
            choice, nor on the camera's own pull on the fit).
        chi2: Misfit of the cameras that took part.
        fitted: False when too few cameras had evidence (everything zero, residual = offset).
        landscapes: Camera -> (robust z of its optimum, robust z of its stored pose, degrees
            of its optimum from the stored pose on the worst axis) for every camera with at
            least ``min_points`` edge points (the left-out one too), fitted or not: whether
            the *other* cameras line up with the LiDAR where they are stored
            (:func:`~bevviz.calibration.verdicts.lidar_verdict` asks before it convicts one).
    """

    lidar_rotation_deg: np.ndarray = field(default_factory=lambda: np.zeros(3))
    common_pitch_deg: float = 0.0
    excluded: list[str] = field(default_factory=list)
    cameras: list[str] = field(default_factory=list)
    expected_deg: dict[str, np.ndarray] = field(default_factory=dict)
    expected_replicates_deg: dict[str, np.ndarray] = field(default_factory=dict)
    expected_by_others_deg: dict[str, list[np.ndarray]] = field(default_factory=dict)
    chi2: float = 0.0
    fitted: bool = False
    landscapes: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    def residual(self, evidence: CameraEvidence) -> np.ndarray:
        """Replicate residuals of one camera: its own error, (B, 3) degrees (B >= 1)."""
        reps = evidence.replicates_deg if len(evidence.replicates_deg) else evidence.offset_deg[None]
        expected = self.expected_replicates_deg.get(evidence.camera)
        if expected is None or expected.shape != reps.shape:
            expected = self.expected_deg.get(evidence.camera, np.zeros(3))
        return reps - expected

    @property
    def magnitude_deg(self) -> float:
        """Largest common offset any camera sees (degrees, :func:`~bevviz.rotations.offset_angle_deg`):
        how far the LiDAR is off as a whole."""
        return max((float(offset_angle_deg(v)) for v in self.expected_deg.values()), default=0.0)


def level_axis(camera: Camera) -> np.ndarray:
    """The body axis about which a vertical shift of the LiDAR's points turns ``camera``, (3,).

    A LiDAR elevation or height error moves every point along the world's vertical; a camera
    sees that as a turn about the horizontal axis across its view, ``up x forward``. For an
    upright camera that is its body pitch axis, ``(0, 1, 0)``; upside down it is ``(0, -1, 0)``,
    turned a quarter on its mount (portrait images) its yaw axis. A camera looking straight up
    or down gets zeros (the shift runs along its view).

    Convention:
        Body frame (FLU) of the camera as :mod:`bevviz.calibration.lidar.evidence`; world up is ego +z.
    """
    up = camera.cam_from_ego[:3, 2]  # ego +z in the camera frame (RDF)
    across = np.cross(up, np.array([0.0, 0.0, 1.0]))
    n = float(np.linalg.norm(across))
    return FLU_FROM_RDF @ (across / n) if n > LEVEL_AXIS_MIN else np.zeros(3)


def _design(rig: Rig, name: str) -> np.ndarray:
    """(3, 4): body offset of camera ``name`` per (LiDAR rotation x, y, z; common pitch)."""
    rot = -FLU_FROM_RDF @ rig[name].cam_from_ego[:3, :3]
    return np.concatenate([rot, level_axis(rig[name])[:, None]], axis=1)


#: Candidate common models (columns of :func:`_design`): none, common pitch, LiDAR rotation, both.
MODELS = ((), (3,), (0, 1, 2), (0, 1, 2, 3))
#: Chi-square price of each parameter when choosing the model (a parameter must explain
#: more than a 2-sigma misfit to be kept).
PARAM_PENALTY = 4.0
#: Models whose cost is within this of the best one are plausible too: less than the price
#: of one parameter apart, the data cannot tell them apart.
MODEL_MARGIN = PARAM_PENALTY


def _fit(names, X, y, sd, exclude, cols=(0, 1, 2, 3)) -> tuple[np.ndarray, float]:
    """Huber-weighted least squares (IRLS) of the common model; returns (params (4,), chi2)."""
    use = [n for n in names if n not in exclude]
    if not cols:
        w = np.concatenate([1.0 / np.sqrt(sd[n] ** 2 + SYSTEMATIC_DEG ** 2) for n in use])
        return np.zeros(4), float(np.sum((np.concatenate([y[n] for n in use]) * w) ** 2))
    full = np.zeros(4)
    A = np.concatenate([X[n][:, list(cols)] for n in use])
    b = np.concatenate([y[n] for n in use])
    w = np.concatenate([1.0 / np.sqrt(sd[n] ** 2 + SYSTEMATIC_DEG ** 2) for n in use])
    h = np.ones_like(w)
    for _ in range(HUBER_ITERATIONS):
        sw = w * np.sqrt(h)
        p, *_ = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)
        z = np.abs((b - A @ p) * w)
        h = np.minimum(1.0, HUBER_K / np.maximum(z, 1e-12))
    chi2 = float(np.sum(((b - A @ p) * w) ** 2))
    full[list(cols)] = p
    return full, chi2


def _select(names, X, y, sd, cols=(0, 1, 2, 3)) -> tuple[np.ndarray, float, list[str]]:
    """Fit with up to MAX_OUTLIERS cameras set aside where that lowers chi2 by OUTLIER_PENALTY."""
    out: list[str] = []
    p, chi2 = _fit(names, X, y, sd, out, cols)
    while len(out) < MAX_OUTLIERS and len(names) - len(out) - 1 >= MIN_CAMERAS:
        trials = [(_fit(names, X, y, sd, out + [n], cols), n) for n in names if n not in out]
        (p_n, chi2_n), worst = min(trials, key=lambda t: t[0][1])
        if chi2_n + OUTLIER_PENALTY >= chi2:
            break
        out.append(worst)
        p, chi2 = p_n, chi2_n
    return p, chi2, out


def rig_consensus(rig: Rig, evidence: Mapping[str, CameraEvidence], min_points: int = 1,
                  leave_out: str | None = None) -> RigConsensus:
    """Fit the common offset of the cameras (see the module docstring).

    The fit runs on the cameras' median offsets (the point estimate) and again on every
    bootstrap replicate (when all cameras have the same number of replicates).

    Args:
        rig: The rig the evidence was measured on.
        evidence: Camera name -> :class:`CameraEvidence`.
        min_points: Cameras with fewer edge points take no part.
        leave_out: A camera kept out of the fit whose offset is still predicted (a
            refinement asks where the *other* cameras put it).

    Returns:
        :class:`RigConsensus` (``fitted`` False when fewer than ``MIN_CAMERAS`` cameras qualify).
    """
    landscapes = {n: (float(evidence[n].z_best), float(evidence[n].z_stored),
                      float(np.max(np.abs(evidence[n].offset_deg)))) for n in rig.names
                  if n in evidence and evidence[n].n_points >= min_points}
    names = [n for n in rig.names if n in evidence and evidence[n].n_points >= min_points and n != leave_out]
    if len(names) < MIN_CAMERAS:
        return RigConsensus(cameras=names, landscapes=landscapes)
    X = {n: _design(rig, n) for n in names}
    predict = [*names, leave_out] if leave_out is not None and leave_out in evidence else names
    X_all = {**X, **{n: _design(rig, n) for n in predict}}
    reps = {n: evidence[n].replicates_deg for n in names}
    y = {n: evidence[n].central_offset_deg for n in names}
    sd = {n: np.maximum(np.nan_to_num(evidence[n].sd_deg, nan=3.0, posinf=3.0), MIN_SD_DEG) for n in names}
    fits = [(_select(names, X, y, sd, cols), cols) for cols in MODELS]
    costs = [f[0][1] + OUTLIER_PENALTY * len(f[0][2]) + PARAM_PENALTY * len(f[1]) for f in fits]
    (p, chi2, out), cols = fits[int(np.argmin(costs))]
    plausible = [f[1] for f, c in zip(fits, costs) if c <= min(costs) + MODEL_MARGIN]
    expected = {n: X_all[n] @ p for n in predict}
    # Where the others put each camera, under every plausible model (for the verdicts).
    loo: dict[str, list[np.ndarray]] = {}
    for n in predict:
        others = [m for m in names if m != n]
        if len(others) >= MIN_CAMERAS:
            loo[n] = [X_all[n] @ _select(others, X, y, sd, c)[0] for c in plausible]
    counts = {len(r) for r in reps.values()}
    expected_reps: dict[str, np.ndarray] = {}
    if len(counts) == 1 and min(counts) > 0:
        per = [_select(names, X, {n: reps[n][b] for n in names}, sd, cols)[0] for b in range(counts.pop())]
        expected_reps = {n: np.array([X_all[n] @ pb for pb in per]) for n in predict}
    return RigConsensus(lidar_rotation_deg=p[:3].copy(), common_pitch_deg=float(p[3]), excluded=out,
                        cameras=names, expected_deg=expected, expected_replicates_deg=expected_reps,
                        expected_by_others_deg=loo, chi2=chi2, fitted=True, landscapes=landscapes)
