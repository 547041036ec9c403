"""Rotations and rigid transforms: quaternions, matrices, axis-angle, roll/pitch/yaw, 4x4 poses.

Also the one table of stored camera axes (:data:`STORED_FROM_RDF`), the rotations that take
bevviz's RDF camera axes to the axes other conventions store.

Convention:
    Quaternions are Hamilton quaternions. Internally they are ordered (w, x, y, z), as
    nuScenes and pyquaternion store them; ``order="xyzw"`` (SciPy, ROS, Eigen's coeffs)
    is accepted wherever a quaternion enters or leaves. A quaternion q maps to the matrix R
    with ``R @ p == q * p * conj(q)``. Roll, pitch and yaw are intrinsic rotations about
    x, y and z composed as ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``. Rigid transforms are
    4x4, column vectors, named ``b_from_a``: ``p_b = b_from_a @ p_a``. See
    docs/conventions.md.
"""

from __future__ import annotations

import numpy as np
import torch

from bevviz.checks import QUATERNION_NORM_TOL, as_float_array, check_choice, check_shape, field_error

QUATERNION_ORDERS = ("wxyz", "xyzw")
#: Largest |R R^T - I| of a matrix still accepted as a rotation.
ROTATION_TOL = 1e-4

#: ``stored_from_rdf``: rotation taking RDF camera coordinates to the stored sensor axes.
STORED_FROM_RDF = {
    "RDF": np.eye(3),
    # RUB: x right, y up, z backward.
    "RUB": np.diag([1.0, -1.0, -1.0]),
    # FLU: x forward (= RDF z), y left (= -RDF x), z up (= -RDF y).
    "FLU": np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]),
}
#: A camera's body axes (FLU) from its RDF axes: ``flu = FLU_FROM_RDF @ rdf``.
FLU_FROM_RDF = STORED_FROM_RDF["FLU"]


def validate_rotation(R: object, field_name: str, camera: str | None = None) -> np.ndarray:
    """Check a rotation matrix (orthonormal within 1e-4, det +1); return float64 (3, 3)."""
    r = as_float_array(R, field_name, camera)
    check_shape(r, (3, 3), field_name, camera)
    if not np.all(np.isfinite(r)):
        raise field_error(field_name, r, "must be finite (no NaN or inf)", camera)
    err = float(np.abs(r @ r.T - np.eye(3)).max())
    if err > ROTATION_TOL:
        raise field_error(field_name, r, f"rotation is not orthonormal (max |R R^T - I| = {err:.3g})", camera)
    det = float(np.linalg.det(r))
    if det < 0:
        raise field_error(field_name, r, f"rotation has det {det:.6f}, expected +1 (a reflection)", camera)
    return r


def make_transform(R: np.ndarray, t: np.ndarray) -> np.ndarray:
    """4x4 rigid transform from rotation (3, 3) and translation (3,)."""
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = t
    return T


def invert_transform(T: np.ndarray) -> np.ndarray:
    """Inverse of a rigid 4x4 transform (``a_from_b`` -> ``b_from_a``), exact for rotations."""
    R, t = T[:3, :3], T[:3, 3]
    return make_transform(R.T, -R.T @ t)


def quaternion_to_matrix(q: object, order: str = "wxyz", field: str = "rotation",
                         camera: str | None = None) -> np.ndarray:
    """Convert a unit quaternion to a 3x3 rotation matrix.

    Args:
        q: Quaternion, shape (4,), in ``order``. Normalised here; zero norm is an error.
        order: ``"wxyz"`` or ``"xyzw"``.
        field: Field name for errors.
        camera: Camera name for errors.

    Returns:
        Rotation matrix, shape (3, 3), float64.

    Convention:
        Hamilton quaternion; see the module docstring.
    """
    check_choice(order, QUATERNION_ORDERS, "quaternion order", camera)
    arr = as_float_array(q, field, camera)
    check_shape(arr, (4,), field, camera)
    if not np.all(np.isfinite(arr)):
        raise field_error(field, arr, "quaternion must be finite", camera)
    norm = float(np.linalg.norm(arr))
    if norm < 1e-8:
        raise field_error(field, arr, "quaternion has zero norm", camera)
    if order == "xyzw":
        arr = np.roll(arr, 1)
    w, x, y, z = arr / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def unit_quaternion_to_matrix(q: object, order: str = "wxyz", field: str = "rotation",
                              camera: str | None = None) -> np.ndarray:
    """A *stored* quaternion as a rotation matrix: normalised as :func:`quaternion_to_matrix`
    does, but refused when its norm is off 1 by more than :data:`bevviz.checks.QUATERNION_NORM_TOL`.

    Rounding leaves a stored unit quaternion about 1e-9 (nuScenes) to 1e-7 (float32) off;
    a larger deviation means a wrong field (a vector, a scaled or a truncated quaternion)
    that normalising would silently turn into some rotation.

    Args:
        q: Quaternion, shape (4,), in ``order``.
        order: ``"wxyz"`` or ``"xyzw"``.
        field: Field name for errors.
        camera: Camera name for errors.

    Returns:
        Rotation matrix, shape (3, 3), float64.

    Raises:
        InputError: naming ``field``: what :func:`quaternion_to_matrix` refuses, or
            ``quaternion norm is <norm>, not 1 (off by more than QUATERNION_NORM_TOL = ...)``.

    Convention:
        Hamilton quaternion; see the module docstring.
    """
    R = quaternion_to_matrix(q, order, field, camera)
    arr = as_float_array(q, field, camera)
    norm = float(np.linalg.norm(arr))
    if abs(norm - 1.0) > QUATERNION_NORM_TOL:
        raise field_error(field, arr, f"quaternion norm is {norm:.6g}, not 1 (off by more than "
                                      f"QUATERNION_NORM_TOL = {QUATERNION_NORM_TOL}); store a unit quaternion",
                          camera)
    return R


def matrix_to_quaternion(R: np.ndarray, order: str = "wxyz") -> np.ndarray:
    """Convert a rotation matrix to a unit quaternion with a non-negative scalar part.

    Args:
        R: Rotation matrix, shape (3, 3).
        order: ``"wxyz"`` or ``"xyzw"`` for the returned quaternion.

    Returns:
        Quaternion, shape (4,), float64, w >= 0.

    Convention:
        Inverse of :func:`quaternion_to_matrix` (up to the sign of q).
    """
    check_choice(order, QUATERNION_ORDERS, "quaternion order")
    m = np.asarray(R, dtype=np.float64)
    check_shape(m, (3, 3), "rotation")
    # Shepperd's method: pick the largest of the four squared components for stability.
    trace = np.trace(m)
    cands = np.array([trace, m[0, 0], m[1, 1], m[2, 2]])
    i = int(np.argmax(cands))
    if i == 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = np.array([s / 4, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    elif i == 1:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = np.array([(m[2, 1] - m[1, 2]) / s, s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s])
    elif i == 2:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = np.array([(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s])
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = np.array([(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4])
    q = q / np.linalg.norm(q)
    if q[0] < 0:
        q = -q
    return np.roll(q, -1) if order == "xyzw" else q


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation from roll, pitch, yaw in radians: ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``, shape (3, 3)."""
    return rpy_to_matrices(np.array([[roll, pitch, yaw]], dtype=np.float64))[0]


def rpy_to_matrices(rpy: np.ndarray) -> np.ndarray:
    """:func:`rpy_to_matrix` for many angle triples at once.

    Args:
        rpy: (roll, pitch, yaw) in radians, shape (K, 3).

    Returns:
        ``Rz(yaw) @ Ry(pitch) @ Rx(roll)`` for each row, shape (K, 3, 3), float64.
    """
    a = np.asarray(rpy, dtype=np.float64).reshape(-1, 3)
    cr, cp, cy = np.cos(a).T
    sr, sp, sy = np.sin(a).T
    out = np.empty((len(a), 3, 3))
    out[:, 0, 0] = cy * cp
    out[:, 0, 1] = cy * sp * sr - sy * cr
    out[:, 0, 2] = cy * sp * cr + sy * sr
    out[:, 1, 0] = sy * cp
    out[:, 1, 1] = sy * sp * sr + cy * cr
    out[:, 1, 2] = sy * sp * cr - cy * sr
    out[:, 2, 0] = -sp
    out[:, 2, 1] = cp * sr
    out[:, 2, 2] = cp * cr
    return out


def body_rotation(ego_from_cam_rotation: np.ndarray, roll_deg: float = 0.0, pitch_deg: float = 0.0,
                  yaw_deg: float = 0.0) -> np.ndarray:
    """A camera's rotation turned in its own body frame, as the Calibration Doctor's sliders
    and injected faults turn it.

    Args:
        ego_from_cam_rotation: The camera's ``ego_from_cam`` rotation, shape (3, 3).
        roll_deg: About the optical axis.
        pitch_deg: Positive looks down.
        yaw_deg: Positive turns left.

    Returns:
        The turned ``ego_from_cam`` rotation, shape (3, 3), float64.

    Convention:
        ``ego_from_body' = ego_from_body @ Rz(yaw) Ry(pitch) Rx(roll)`` with the body frame
        FLU (x = optical axis, y = left, z = up in the image), so the angles mean the same
        for every camera whatever its heading: ``ego_from_cam' = ego_from_cam (rdf_from_flu
        Rb flu_from_rdf)``. See docs/conventions.md.
    """
    rb = rpy_to_matrix(*np.radians([roll_deg, pitch_deg, yaw_deg]))
    return np.asarray(ego_from_cam_rotation, dtype=np.float64) @ FLU_FROM_RDF.T @ rb @ FLU_FROM_RDF


def matrix_to_rpy(R: np.ndarray) -> tuple[float, float, float]:
    """Roll, pitch, yaw in radians of ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``, R shape (3, 3)."""
    m = np.asarray(R, dtype=np.float64)
    pitch = float(np.arcsin(np.clip(-m[2, 0], -1.0, 1.0)))
    roll = float(np.arctan2(m[2, 1], m[2, 2]))
    yaw = float(np.arctan2(m[1, 0], m[0, 0]))
    return roll, pitch, yaw


def axis_angle_to_matrix(omega: torch.Tensor) -> torch.Tensor:
    """Differentiable Rodrigues formula.

    Args:
        omega: Rotation vectors (axis * angle in radians), shape (..., 3).

    Returns:
        Rotation matrices, shape (..., 3, 3), same dtype; smooth at omega = 0.
    """
    check_shape(omega, ("...", 3), "omega")
    theta2 = (omega * omega).sum(-1, keepdim=True)[..., None]  # (..., 1, 1)
    zero = torch.zeros_like(omega[..., 0])
    wx, wy, wz = omega.unbind(-1)
    skew = torch.stack([
        torch.stack([zero, -wz, wy], -1),
        torch.stack([wz, zero, -wx], -1),
        torch.stack([-wy, wx, zero], -1),
    ], -2)
    small = theta2 < 1e-8
    theta2_safe = torch.where(small, torch.ones_like(theta2), theta2)
    theta = torch.sqrt(theta2_safe)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(theta)) / theta2_safe)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device).expand_as(skew)
    return eye + a * skew + b * (skew @ skew)


def offset_angle_deg(rpy_deg: np.ndarray) -> np.ndarray:
    """How far a small turn ``(roll, pitch, yaw)`` turns a camera, in degrees, shape (...,).

    The doctor's tolerance and its fault bands are rotation angles ("calibrated within 0.5
    deg", "a fault of 0.5-1 deg about any axis"): a camera turned 0.4 deg in roll and 0.4 in
    yaw is 0.57 deg off, though no single axis is beyond 0.5.

    Args:
        rpy_deg: Turns (roll, pitch, yaw) in degrees, or differences of two turns, shape (..., 3).

    Returns:
        The Euclidean norm of the three angles, shape (...,).

    Convention:
        Body-frame turns composed ``Rz(yaw) Ry(pitch) Rx(roll)`` as :func:`body_rotation`; the
        norm equals the composed rotation's angle within 0.2 % up to 1 deg and 1 % up to 5 deg
        (second-order terms of the composition), and the angle between two such turns as
        closely.
    """
    a = np.asarray(rpy_deg, dtype=np.float64)
    check_shape(a, ("...", 3), "rpy_deg")
    return np.linalg.norm(a, axis=-1)


def within_every_axis(rpy_deg: np.ndarray, tolerance_deg: float) -> np.ndarray:
    """Whether turns ``(roll, pitch, yaw)`` are within ``tolerance_deg`` on every axis, shape (...,).

    Looser than :func:`offset_angle_deg` (a turn of 0.4 deg on each axis passes 0.5 here and
    is 0.69 deg off): the doctor accuses a camera by the angle and lets an explanation (a
    displaced LiDAR, the other cameras' consensus) clear it by this looser test, so a doubt
    errs towards "inconclusive".

    Args:
        rpy_deg: Turns or differences of turns in degrees, shape (..., 3).
        tolerance_deg: The bound, degrees.
    """
    a = np.asarray(rpy_deg, dtype=np.float64)
    check_shape(a, ("...", 3), "rpy_deg")
    return np.all(np.abs(a) <= tolerance_deg, axis=-1)


def rotation_angle_deg(R_a: np.ndarray, R_b: np.ndarray) -> float:
    """Angle in degrees of the relative rotation ``R_a^T R_b`` between two (3, 3) rotations."""
    rel = np.asarray(R_a).T @ np.asarray(R_b)
    cos = np.clip((np.trace(rel) - 1.0) / 2.0, -1.0, 1.0)
    return float(np.degrees(np.arccos(cos)))
