"""Tests for bevviz.rotations: quaternions (both orders), matrices, roll/pitch/yaw, Rodrigues."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pyquaternion import Quaternion

from bevviz.errors import InputError
from bevviz.rotations import (
    axis_angle_to_matrix,
    matrix_to_quaternion,
    matrix_to_rpy,
    offset_angle_deg,
    quaternion_to_matrix,
    rotation_angle_deg,
    rpy_to_matrices,
    rpy_to_matrix,
    unit_quaternion_to_matrix,
    within_every_axis,
)

finite = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)
quaternions = st.tuples(finite, finite, finite, finite).filter(lambda q: np.linalg.norm(q) > 1e-3)
angles = st.floats(-np.pi, np.pi, allow_nan=False)


def _assert_rotation(R: np.ndarray) -> None:
    assert R.shape == (3, 3)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)


# --- quaternion <-> matrix ------------------------------------------------------------------

def test_identity_quaternion():
    np.testing.assert_array_equal(quaternion_to_matrix([1, 0, 0, 0]), np.eye(3))
    np.testing.assert_array_equal(quaternion_to_matrix([0, 0, 0, 1], order="xyzw"), np.eye(3))


def test_quarter_turn_about_z_rotates_x_to_y():
    s = np.sqrt(0.5)
    R = quaternion_to_matrix([s, 0, 0, s])  # 90 deg about z, Hamilton
    np.testing.assert_allclose(R @ [1, 0, 0], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(R @ [0, 1, 0], [-1, 0, 0], atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(quaternions)
def test_quaternion_to_matrix_matches_pyquaternion(q):
    R = quaternion_to_matrix(q)
    _assert_rotation(R)
    np.testing.assert_allclose(R, Quaternion(np.array(q) / np.linalg.norm(q)).rotation_matrix, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(quaternions)
def test_xyzw_is_wxyz_rolled(q):
    w, x, y, z = q
    np.testing.assert_allclose(quaternion_to_matrix([x, y, z, w], order="xyzw"), quaternion_to_matrix(q), atol=1e-14)


@settings(max_examples=300, deadline=None)
@given(quaternions, st.sampled_from(["wxyz", "xyzw"]))
def test_quaternion_matrix_round_trip_up_to_sign(q, order):
    q = np.array(q) / np.linalg.norm(q)
    back = matrix_to_quaternion(quaternion_to_matrix(q, order), order)
    assert np.linalg.norm(back) == pytest.approx(1.0)
    scalar = back[0] if order == "wxyz" else back[3]
    assert scalar >= 0
    assert min(np.abs(back - q).max(), np.abs(back + q).max()) < 1e-9


@settings(max_examples=200, deadline=None)
@given(angles, st.floats(-1.5, 1.5), angles)
def test_matrix_quaternion_matrix_round_trip(roll, pitch, yaw):
    R = rpy_to_matrix(roll, pitch, yaw)
    np.testing.assert_allclose(quaternion_to_matrix(matrix_to_quaternion(R)), R, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(angles, angles, angles)
def test_rpy_is_yaw_after_pitch_after_roll_one_or_many_at_once(roll, pitch, yaw):
    def about(axis: int, a: float) -> np.ndarray:
        c, s = np.cos(a), np.sin(a)
        i, j = [k for k in range(3) if k != axis]
        R = np.eye(3)
        R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
        return R if axis != 1 else R.T  # about y the sine terms swap places

    expected = about(2, yaw) @ about(1, pitch) @ about(0, roll)
    np.testing.assert_allclose(rpy_to_matrix(roll, pitch, yaw), expected, atol=1e-12)
    many = rpy_to_matrices(np.array([[roll, pitch, yaw], [0.0, 0.0, 0.0], [roll, pitch, yaw]]))
    assert many.shape == (3, 3, 3)
    np.testing.assert_array_equal(many[0], rpy_to_matrix(roll, pitch, yaw))
    np.testing.assert_array_equal(many[1], np.eye(3))
    np.testing.assert_array_equal(many[2], many[0])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_matrix_to_quaternion_half_turns(axis):
    """Trace -1: every Shepperd branch other than the w one must be exercised correctly."""
    R = -np.eye(3)
    R[axis, axis] = 1.0
    q = matrix_to_quaternion(R)
    expected = np.zeros(4)
    expected[1 + axis] = 1.0
    np.testing.assert_allclose(np.abs(q), expected, atol=1e-15)
    np.testing.assert_allclose(quaternion_to_matrix(q), R, atol=1e-15)


def test_quaternion_is_normalised():
    np.testing.assert_allclose(quaternion_to_matrix([2, 0, 0, 0]), np.eye(3))


@pytest.mark.parametrize("q", [[0, 0, 0, 0], [1e-12, 0, 0, 0]])
def test_zero_norm_quaternion_rejected(q):
    with pytest.raises(ValueError, match=r"camera CAM_X: field 'rotation': quaternion has zero norm"):
        quaternion_to_matrix(q, camera="CAM_X")


def test_a_stored_quaternion_is_normalised_within_the_tolerance_only():
    q = np.array([0.5, -0.5, 0.5, -0.5])
    np.testing.assert_allclose(unit_quaternion_to_matrix(q * (1 + 1e-7)), quaternion_to_matrix(q), atol=1e-15)
    np.testing.assert_allclose(unit_quaternion_to_matrix(np.roll(q, -1), "xyzw"), quaternion_to_matrix(q), atol=1e-15)
    with pytest.raises(ValueError, match=r"camera CAM_X: field 'ego_pose\.rotation': quaternion norm is 1\.002, not 1 "
                                         r"\(off by more than QUATERNION_NORM_TOL = 0\.001\); store a unit quaternion"):
        unit_quaternion_to_matrix(q * 1.002, field="ego_pose.rotation", camera="CAM_X")
    with pytest.raises(ValueError, match=r"field 'rotation': quaternion has zero norm"):
        unit_quaternion_to_matrix([0, 0, 0, 0])


@pytest.mark.parametrize("q", [[np.nan, 0, 0, 1], [1, np.inf, 0, 0]])
def test_non_finite_quaternion_rejected(q):
    with pytest.raises(ValueError, match=r"field 'rotation': quaternion must be finite"):
        quaternion_to_matrix(q)


def test_quaternion_wrong_shape_and_order_rejected():
    with pytest.raises(ValueError, match=r"field 'rotation': expected shape \(4,\), got shape \(3,\)"):
        quaternion_to_matrix([1, 0, 0])
    with pytest.raises(ValueError, match=r"field 'quaternion order'.*'zyxw'"):
        quaternion_to_matrix([1, 0, 0, 0], order="zyxw")
    with pytest.raises(ValueError, match=r"field 'quaternion order'"):
        matrix_to_quaternion(np.eye(3), order="wzyx")


# --- roll / pitch / yaw ---------------------------------------------------------------------

def test_rpy_composition_order():
    roll, pitch, yaw = 0.3, -0.2, 1.1
    Rx = Quaternion(axis=[1, 0, 0], angle=roll).rotation_matrix
    Ry = Quaternion(axis=[0, 1, 0], angle=pitch).rotation_matrix
    Rz = Quaternion(axis=[0, 0, 1], angle=yaw).rotation_matrix
    np.testing.assert_allclose(rpy_to_matrix(roll, pitch, yaw), Rz @ Ry @ Rx, atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(angles, st.floats(-1.5, 1.5), angles)
def test_rpy_round_trip(roll, pitch, yaw):
    R = rpy_to_matrix(roll, pitch, yaw)
    _assert_rotation(R)
    np.testing.assert_allclose(rpy_to_matrix(*matrix_to_rpy(R)), R, atol=1e-12)


def test_positive_yaw_turns_forward_to_left():
    np.testing.assert_allclose(rpy_to_matrix(0, 0, np.pi / 2) @ [1, 0, 0], [0, 1, 0], atol=1e-15)


# --- Rodrigues ------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(st.tuples(finite, finite, finite))
def test_axis_angle_matches_pyquaternion(omega):
    omega = np.array(omega) * 3.0
    R = axis_angle_to_matrix(torch.tensor(omega, dtype=torch.float64)).numpy()
    theta = np.linalg.norm(omega)
    ref = np.eye(3) if theta == 0 else Quaternion(axis=omega / theta, angle=theta).rotation_matrix
    np.testing.assert_allclose(R, ref, atol=1e-12)


def test_axis_angle_batched_shape_and_dtype():
    omega = torch.randn(5, 2, 3, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    R = axis_angle_to_matrix(omega)
    assert R.shape == (5, 2, 3, 3) and R.dtype == torch.float32
    np.testing.assert_allclose((R @ R.transpose(-1, -2)).numpy(), np.broadcast_to(np.eye(3), (5, 2, 3, 3)), atol=1e-5)


def test_axis_angle_smooth_gradient_at_zero():
    """At omega = 0 the gradient of R is the skew generator, finite (no 0/0 NaN)."""
    omega = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    R = axis_angle_to_matrix(omega)
    # d R[1, 0] / d omega_z = 1 (skew(omega)[1, 0] = omega_z)
    (g,) = torch.autograd.grad(R[1, 0], omega)
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0, 1.0], atol=1e-15)
    assert torch.autograd.gradcheck(axis_angle_to_matrix, (torch.tensor([1e-6, -2e-6, 3e-7], dtype=torch.float64,
                                                                         requires_grad=True),))
    assert torch.autograd.gradcheck(axis_angle_to_matrix, (torch.tensor([0.4, -1.2, 0.7], dtype=torch.float64,
                                                                         requires_grad=True),))


def test_axis_angle_wrong_shape():
    with pytest.raises(ValueError, match=r"field 'omega'"):
        axis_angle_to_matrix(torch.zeros(4))


# --- angle between rotations ----------------------------------------------------------------

@pytest.mark.parametrize("deg", [0.0, 1.0, 37.5, 90.0, 179.0])
def test_rotation_angle_deg(deg):
    Ra = rpy_to_matrix(0.2, -0.1, 0.4)
    Rb = Ra @ Quaternion(axis=[1, 2, 3], degrees=deg).rotation_matrix
    assert rotation_angle_deg(Ra, Rb) == pytest.approx(deg, abs=1e-5)
    assert rotation_angle_deg(Rb, Ra) == pytest.approx(deg, abs=1e-5)


# --- the size of a small turn (the doctor's tolerance) ----------------------------------------

@settings(max_examples=60, deadline=None)
@given(direction=st.tuples(finite, finite, finite).filter(lambda v: np.linalg.norm(v) > 1e-3),
       size=st.floats(0.01, 5.0))
def test_a_turns_size_is_the_angle_of_the_rotation_it_composes(direction, size):
    rpy = np.asarray(direction) / np.linalg.norm(direction) * size
    R = rpy_to_matrix(*np.radians(rpy))
    exact = rotation_angle_deg(np.eye(3), R)
    bound = 0.002 if size <= 1.0 else 0.01  # the docstring's claim
    assert offset_angle_deg(rpy) == pytest.approx(exact, rel=bound)


def test_a_turn_below_the_tolerance_on_every_axis_can_be_beyond_it_as_an_angle():
    turns = np.array([[0.4, 0.0, 0.4], [0.3, 0.0, 0.3], [0.0, -0.6, 0.0]])
    np.testing.assert_allclose(offset_angle_deg(turns), [0.5657, 0.4243, 0.6], atol=1e-4)
    assert within_every_axis(turns, 0.5).tolist() == [True, True, False]
    assert offset_angle_deg(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(InputError, match="rpy_deg"):
        offset_angle_deg(np.zeros(2))
