"""Ego motion from the frames themselves: two LiDAR sweeps registered to each other.

A drive whose source gives no ego poses (a rosbag export, a folder of frames) still holds
the car's motion: the static world seen by two consecutive sweeps. :func:`estimate_motion`
registers sweep ``a`` onto sweep ``b`` (point-to-plane ICP with a robust weight, coarse to
fine) and returns ``b_from_a``; :func:`motion_at` scales that motion to another instant
(a camera's exposure) under constant velocity, which is what
:attr:`bevviz.lidar.LidarScan.exposure_from_keyframe` holds.

What it measured (``python scripts/measure_ego_motion.py``, docs/calibration.md, "Ego motion
from the sweeps"): on the TRI drive (three sweeps one second apart, the car at 1.3 m/s) the
registered motion agrees with the dataset's own LiDAR poses within a few millimetres and
hundredths of a degree; the exposure offsets *derived from the time stamps* do not agree
with the dataset's per-camera poses (the stamps put the cameras 11-12 cm behind the sweep,
the poses 3-5 cm), so a motion estimated this way is a measurement of the car, not of
where a source's stamps put each exposure. :func:`exposure_motions` gives a drive whose
frames carry times but no motion (``exposure.json`` without ``exposure_from_keyframe``) its
motion to each exposure; :func:`bevviz.session.frame_folder_scene` uses it.

Convention:
    Ego frame x forward, y left, z up, metres. ``b_from_a`` is the 4x4 column-vector
    transform ``ego(t_b) from ego(t_a)``: a static point ``p_a`` seen at ``t_a`` is
    ``b_from_a @ p_a`` at ``t_b`` (a car driving forward makes its x-translation
    negative). :func:`motion_at` returns ``ego(t) from ego(t_a)`` in the same sense, the
    convention of ``LidarScan.exposure_from_keyframe``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree

from bevviz.checks import check_shape, field_error
from bevviz.lidar import LidarScan
from bevviz.rotations import axis_angle_to_matrix

__all__ = ["ICP_SCHEDULE_M", "MAX_CONDITION", "MIN_PAIRS", "PRIOR_SPEEDS_MPS", "VOXEL_M", "ExposureMotions",
           "MotionEstimate",
           "estimate_motion", "exposure_motions", "motion_at"]

#: Voxel (metres) the sweeps are thinned to before registration: one point per voxel keeps
#: the geometry and makes a 50k-point sweep about 35k points.
VOXEL_M = 0.2
#: Correspondence distances (metres), coarse to fine; each stage iterates until its update
#: is below a micrometre or ``_ITERATIONS`` passes. Two metres cover 20 m/s between 10 Hz
#: sweeps; consecutive keyframes further apart need a motion prior.
ICP_SCHEDULE_M = (2.0, 1.0, 0.5, 0.25)
_ITERATIONS = 12
#: Fewest planar point pairs a registration must keep at its finest stage.
MIN_PAIRS = 500
#: Largest ratio of the largest to the smallest eigenvalue of the registration's normal
#: matrix (rotation in radians scaled by the cloud's median range, translation in metres):
#: above it one direction is not pinned (a flat road alone pins no forward motion; a
#: tunnel none along its axis) and the estimate is reported as degenerate. On the TRI
#: drive the whole sweeps give 26-30; their ground alone (returns within 0.1-0.3 m of the
#: ground height) 865-2196, and registered 0.16-0.74 m where the car drove 1.26-1.28 m.
MAX_CONDITION = 300.0
#: Neighbours of a point its plane is fitted to, and the largest ratio of the plane's
#: smallest to its middle spread for the point to count as planar.
_NORMAL_K = 12
_PLANARITY = 0.1


@dataclass(frozen=True)
class MotionEstimate:
    """One registration of two sweeps.

    Attributes:
        b_from_a: (4, 4) float64 ``ego(t_b) from ego(t_a)``.
        pairs: Planar point pairs the finest stage kept.
        rmse_m: Robust point-to-plane residual (1.4826 x median absolute, metres) of those.
        condition: Ratio of the largest to the smallest eigenvalue of the finest stage's
            normal matrix (rotation scaled by the cloud's radius).
        reason: "" when the estimate pins all six degrees of freedom, else why not (too
            few pairs, a direction not pinned).
    """

    b_from_a: np.ndarray
    pairs: int
    rmse_m: float
    condition: float
    reason: str

    @property
    def ok(self) -> bool:
        """Whether the estimate can be used: enough pairs and every direction pinned."""
        return not self.reason

    @property
    def translation_m(self) -> float:
        """Length of the translation of :attr:`b_from_a`, metres."""
        return float(np.linalg.norm(self.b_from_a[:3, 3]))

    @property
    def rotation_deg(self) -> float:
        """Angle of the rotation of :attr:`b_from_a`, degrees."""
        cos = (np.trace(self.b_from_a[:3, :3]) - 1.0) / 2.0
        return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def _thinned(points: np.ndarray, voxel_m: float) -> np.ndarray:
    """One point per occupied voxel. (N, 3) -> (M, 3) float64."""
    keys = np.floor(points / voxel_m).astype(np.int64)
    _, first = np.unique(keys, axis=0, return_index=True)
    return points[np.sort(first)]


def _sweep_points(scan: object, field: str) -> np.ndarray:
    """The LiDAR returns of a scan (:meth:`LidarScan.returns`), thinned: (M, 3) float64."""
    if not isinstance(scan, LidarScan):
        raise field_error(field, type(scan).__name__, "must be a bevviz.lidar.LidarScan")
    xyz = np.asarray(scan.xyz, dtype=np.float64)[scan.returns()]
    pts = _thinned(xyz, VOXEL_M) if len(xyz) else xyz
    if len(pts) < MIN_PAIRS:
        raise field_error(field, f"{len(pts)} points after thinning to {VOXEL_M} m",
                          f"a sweep needs at least {MIN_PAIRS} to register")
    return pts


def _planes(points: np.ndarray, tree: cKDTree) -> tuple[np.ndarray, np.ndarray]:
    """Unit normals (M, 3) of the planes through each point's neighbours and whether each is planar (M,)."""
    _, nb = tree.query(points, k=_NORMAL_K)
    local = points[nb] - points[nb].mean(axis=1, keepdims=True)  # (M, K, 3)
    cov = np.einsum("mki,mkj->mij", local, local) / _NORMAL_K
    spread, axes = np.linalg.eigh(cov)  # ascending
    return axes[:, :, 0], spread[:, 0] < _PLANARITY * spread[:, 1]


def _update(a: np.ndarray, b: np.ndarray, normals: np.ndarray, planar: np.ndarray, tree: cKDTree,
            T: np.ndarray, max_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Gauss-Newton step of robust point-to-plane ICP.

    Returns:
        The step (6,) ``(omega, v)`` (applied on the left), the normal matrix (6, 6) and
        the residuals (P,) of the planar pairs within ``max_m``.
    """
    moved = a @ T[:3, :3].T + T[:3, 3]
    dist, j = tree.query(moved, distance_upper_bound=max_m)
    keep = np.isfinite(dist)
    keep[keep] &= planar[j[keep]]
    p, n = moved[keep], normals[j[keep]]
    r = np.einsum("pi,pi->p", p - b[j[keep]], n)
    if len(r) < 6:
        return np.zeros(6), np.zeros((6, 6)), r
    jac = np.hstack([np.cross(p, n), n])  # d r / d (omega, v)
    scale = 1.4826 * np.median(np.abs(r)) + 1e-3
    w = 1.0 / np.maximum(1.0, np.abs(r) / (2.0 * scale))  # Huber weights
    H = (jac * w[:, None]).T @ jac
    g = (jac * w[:, None]).T @ r
    return -np.linalg.lstsq(H, g, rcond=None)[0], H, r


def _step_matrix(step: np.ndarray) -> np.ndarray:
    """The 4x4 transform of a step ``(omega, v)``: rotation exp(omega), then translation v."""
    D = np.eye(4)
    D[:3, :3] = axis_angle_to_matrix(torch.from_numpy(step[:3].copy())).numpy()
    D[:3, 3] = step[3:]
    return D


def estimate_motion(scan_a: LidarScan, scan_b: LidarScan, prior_b_from_a: np.ndarray | None = None) -> MotionEstimate:
    """Register sweep ``a`` onto sweep ``b``: the car's motion between them.

    Args:
        scan_a: The earlier sweep (ego frame at ``t_a``); only its returns are used.
        scan_b: The later sweep (ego frame at ``t_b``).
        prior_b_from_a: (4, 4) start of the search, identity when None (motions under
            about 2 m and a few degrees need none).

    Returns:
        The estimate; :attr:`MotionEstimate.reason` says why it cannot be used when a
        direction is not pinned or too few pairs remain (it never raises for that).

    Raises:
        InputError: A scan that is not a ``LidarScan``, holds fewer than ``MIN_PAIRS``
            thinned returns, or a prior that is not a (4, 4) transform.

    Convention:
        ``b_from_a`` maps points of ``ego(t_a)`` into ``ego(t_b)`` (module docstring).
    """
    a = _sweep_points(scan_a, "scan_a")
    b = _sweep_points(scan_b, "scan_b")
    T = np.eye(4)
    if prior_b_from_a is not None:
        check_shape(prior_b_from_a, (4, 4), "prior_b_from_a")
        T = np.asarray(prior_b_from_a, dtype=np.float64).copy()
    tree = cKDTree(b)
    normals, planar = _planes(b, tree)
    H, r = np.zeros((6, 6)), np.zeros(0)
    for max_m in ICP_SCHEDULE_M:
        for _ in range(_ITERATIONS):
            step, H, r = _update(a, b, normals, planar, tree, T, max_m)
            T = _step_matrix(step) @ T
            if np.linalg.norm(step) < 1e-6:
                break
    radius = float(np.median(np.linalg.norm(a, axis=1)))
    S = np.diag([radius] * 3 + [1.0] * 3)
    eig = np.linalg.eigvalsh(np.linalg.inv(S) @ H @ np.linalg.inv(S)) if len(r) >= 6 else np.zeros(6)
    condition = float(eig[-1] / eig[0]) if eig[0] > 0 else float("inf")
    reason = ""
    if len(r) < MIN_PAIRS:
        reason = f"only {len(r)} planar point pairs agree (fewer than {MIN_PAIRS})"
    elif condition > MAX_CONDITION:
        reason = (f"a direction is not pinned (condition {condition:.0f} > {MAX_CONDITION:.0f}: "
                  "a flat or corridor scene)")
    rmse = float(1.4826 * np.median(np.abs(r))) if len(r) else float("nan")
    return MotionEstimate(b_from_a=T, pairs=int(len(r)), rmse_m=rmse, condition=condition, reason=reason)


def motion_at(b_from_a: np.ndarray, dt_s: float, offset_s: float) -> np.ndarray:
    """The motion ``ego(t_a + offset) from ego(t_a)`` under constant velocity.

    Args:
        b_from_a: (4, 4) ``ego(t_b) from ego(t_a)``, e.g. :attr:`MotionEstimate.b_from_a`.
        dt_s: ``t_b - t_a`` in seconds (non-zero).
        offset_s: The instant wanted, seconds after ``t_a`` (negative: before).

    Returns:
        (4, 4) float64: the rotation vector and the translation of ``b_from_a`` scaled by
        ``offset_s / dt_s`` (exact for straight driving; for a turn of theta radians over
        the interval the translation errs by less than theta x |t| / 2).

    Raises:
        InputError: ``b_from_a`` not (4, 4), or ``dt_s`` zero or not finite.

    Convention:
        As ``LidarScan.exposure_from_keyframe`` with ``t_a`` the keyframe: pass a camera's
        exposure time minus the sweep's time as ``offset_s``.
    """
    check_shape(b_from_a, (4, 4), "b_from_a")
    if not np.isfinite(dt_s) or dt_s == 0:
        raise field_error("dt_s", dt_s, "must be a finite, non-zero number of seconds")
    M = np.asarray(b_from_a, dtype=np.float64)
    R = M[:3, :3]
    cos = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    theta = float(np.arccos(cos))
    axis_part = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / 2.0
    omega = axis_part * (theta / np.sin(theta) if theta > 1e-9 else 1.0)
    s = offset_s / dt_s
    out = np.eye(4)
    out[:3, :3] = axis_angle_to_matrix(torch.from_numpy(omega * s)).numpy()
    out[:3, 3] = M[:3, 3] * s
    return out


#: Forward speeds (m/s) tried as starts when two sweeps do not register from rest or from the
#: pair before: the registration's coarsest stage reaches about 2 m from its start, so
#: keyframes half a second apart at motorway speed (15 m) need a start near the motion.
PRIOR_SPEEDS_MPS = (5.0, 10.0, 20.0, 30.0, 40.0)


def _register(scan_a: LidarScan, scan_b: LidarScan, prior: np.ndarray | None, dt_s: float) -> MotionEstimate:
    """:func:`estimate_motion` from ``prior`` (or rest); where that does not pin the motion,
    from forward motion at each of :data:`PRIOR_SPEEDS_MPS` over ``dt_s``, keeping the usable
    estimate that fits closest (least ``rmse_m``)."""
    first = estimate_motion(scan_a, scan_b, prior)
    if first.ok:
        return first
    tried = []
    for v in PRIOR_SPEEDS_MPS:
        start = np.eye(4)
        start[0, 3] = -v * dt_s  # driving forward moves the static world back (module docstring)
        est = estimate_motion(scan_a, scan_b, start)
        if est.ok:
            tried.append(est)
    return min(tried, key=lambda e: e.rmse_m) if tried else first


@dataclass(frozen=True)
class ExposureMotions:
    """Each frame's ego motion to its cameras' exposures, estimated from its sweeps.

    Attributes:
        motions: Per frame, camera name -> (4, 4) ``ego(t_cam) from ego(t_lidar)`` (the form of
            :attr:`bevviz.lidar.LidarScan.exposure_from_keyframe`); empty dicts when ``reason``.
        estimates: The registration of each pair of consecutive sweeps (frame k onto k + 1).
        reason: Why no motion could be estimated ("" when it was).
    """

    motions: list[dict[str, np.ndarray]]
    estimates: list[MotionEstimate]
    reason: str = ""


def exposure_motions(scans: list[LidarScan], lidar_times_s: list[float],
                     camera_times_s: list[dict[str, float]]) -> ExposureMotions:
    """The motion from each sweep to each camera's exposure, from the sweeps themselves.

    Consecutive sweeps are registered (:func:`estimate_motion`: from the pair before's
    velocity, else from rest, else from forward speeds up to 40 m/s, :data:`PRIOR_SPEEDS_MPS`,
    keeping the closest fit); frame k takes the car's
    velocity from its own pair (k onto k + 1), the last frame from the pair before it; each
    camera's motion is that velocity over its exposure's offset from the sweep
    (:func:`motion_at`). The offsets come from the source's time stamps, which may disagree
    with where its poses put the exposures (docs/calibration.md, "Ego motion from the sweeps").

    Args:
        scans: Two or more sweeps of one drive, in time order (ego frame at each sweep's time).
        lidar_times_s: Each sweep's instant, seconds (increasing).
        camera_times_s: Per frame, camera name -> its exposure's instant, seconds.

    Returns:
        :class:`ExposureMotions`; a registration that does not pin the motion down, or a
        sweep time that does not increase, gives no motion and says why (nothing raises).

    Convention:
        ``exposure_from_keyframe[cam] = ego(t_cam) from ego(t_lidar)`` (module docstring).
    """
    n = len(scans)
    if n < 2 or len(lidar_times_s) != n or len(camera_times_s) != n:
        return ExposureMotions([{} for _ in range(n)], [], "needs two or more sweeps, each with its time")
    dts = np.diff(np.asarray(lidar_times_s, dtype=np.float64))
    if not np.all(dts > 0):
        return ExposureMotions([{} for _ in range(n)], [], "the sweeps' times do not increase")
    estimates: list[MotionEstimate] = []
    for k in range(n - 1):
        # the pair before at this pair's interval: constant velocity, the likeliest start
        prior = motion_at(estimates[-1].b_from_a, float(dts[k - 1]), float(dts[k])) if estimates and \
            estimates[-1].ok else None
        estimates.append(_register(scans[k], scans[k + 1], prior, float(dts[k])))
    bad = [f"{k} -> {k + 1}: {e.reason}" for k, e in enumerate(estimates) if not e.ok]
    if bad:
        return ExposureMotions([{} for _ in range(n)], estimates, "the sweeps do not register (" + "; ".join(bad) + ")")
    motions = []
    for k in range(n):
        j = min(k, n - 2)
        motions.append({cam: motion_at(estimates[j].b_from_a, float(dts[j]), t - lidar_times_s[k])
                        for cam, t in camera_times_s[k].items()})
    return ExposureMotions(motions, estimates)
