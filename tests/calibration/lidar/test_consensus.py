"""Rig consensus: a LiDAR-wide error is shared, a single camera's own error is not."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.consensus import MIN_CAMERAS, level_axis, rig_consensus
from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.rotations import FLU_FROM_RDF


def _evidence(rig, offsets, sd=0.08, seed=0, n=24):
    """CameraEvidence with bootstrap replicates scattered around the given offsets (deg)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, off in offsets.items():
        off = np.asarray(off, dtype=np.float64)
        out[name] = CameraEvidence(name, off, off + rng.normal(0, sd, (n, 3)), n_points=400, n_clusters=40)
    return out


def _lidar_pattern(rig, omega_deg):
    """Offsets every camera shows when the LiDAR is rotated by omega (ego frame, degrees)."""
    return {c.name: -FLU_FROM_RDF @ c.cam_from_ego[:3, :3] @ np.asarray(omega_deg, dtype=np.float64) for c in rig}


def test_a_clean_rig_needs_no_common_model(rig):
    con = rig_consensus(rig, _evidence(rig, {n: np.zeros(3) for n in rig.names}))
    assert con.fitted and con.excluded == []
    assert con.magnitude_deg == pytest.approx(0.0, abs=1e-9)  # the model without parameters wins


def test_a_lidar_rotation_is_recovered_and_leaves_no_residual(rig):
    omega = np.array([0.3, -0.8, 1.2])
    ev = _evidence(rig, _lidar_pattern(rig, omega))
    con = rig_consensus(rig, ev)
    np.testing.assert_allclose(con.lidar_rotation_deg, omega, atol=0.08)
    for name in rig.names:
        assert np.max(np.abs(np.median(con.residual(ev[name]), axis=0))) < 0.1


def test_a_common_pitch_is_recovered(rig):
    ev = _evidence(rig, {n: [0.0, -0.5, 0.0] for n in rig.names})
    con = rig_consensus(rig, ev)
    assert con.common_pitch_deg == pytest.approx(-0.5, abs=0.05)
    np.testing.assert_allclose(con.lidar_rotation_deg, 0.0, atol=1e-9)  # the smaller model is enough


def test_the_level_axis_turns_with_the_camera_on_its_mount(rig):
    cam = rig["CAM_FRONT"]
    np.testing.assert_allclose(level_axis(cam), [0.0, 1.0, 0.0], atol=0.02)  # upright: body pitch
    np.testing.assert_allclose(level_axis(cam.rot90(2)), [0.0, -1.0, 0.0], atol=0.02)  # upside down
    np.testing.assert_allclose(np.abs(level_axis(cam.rot90(1))), [0.0, 0.0, 1.0], atol=0.02)  # on its side: yaw
    down = cam.replace(cam_from_ego=np.array([[0.0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]))
    np.testing.assert_array_equal(level_axis(down), np.zeros(3))  # looking straight up: no such axis


def test_a_common_pitch_is_recovered_on_cameras_mounted_on_their_side_or_upside_down(rig):
    """A LiDAR height error moves every point vertically: each camera turns about its level
    axis, whatever its mounting. A rig of sideways and upside-down cameras shows it in their
    yaw and with the other sign; the consensus must still see one common error."""
    turned = rig.map(lambda c: c.rot90({"CAM_BACK": 1, "CAM_FRONT": 2, "CAM_FRONT_LEFT": 3}.get(c.name, 0)))
    ev = _evidence(turned, {c.name: -0.6 * level_axis(c) for c in turned})
    con = rig_consensus(turned, ev)
    assert con.common_pitch_deg == pytest.approx(-0.6, abs=0.05)
    np.testing.assert_allclose(con.lidar_rotation_deg, 0.0, atol=1e-9)
    for name in turned.names:
        assert np.max(np.abs(np.median(con.residual(ev[name]), axis=0))) < 0.1


@pytest.mark.parametrize("faulty", ["CAM_FRONT", "CAM_BACK_LEFT"])
def test_one_miscalibrated_camera_is_set_aside_and_keeps_its_own_error(rig, faulty):
    offsets = {n: np.array([0.0, -0.5, 0.0]) for n in rig.names}
    offsets[faulty] = offsets[faulty] + np.array([0.0, 0.0, 2.0])
    ev = _evidence(rig, offsets)
    con = rig_consensus(rig, ev)
    assert con.excluded == [faulty]
    np.testing.assert_allclose(np.median(con.residual(ev[faulty]), axis=0), [0.0, 0.0, 2.0], atol=0.1)
    for name in rig.names:
        if name != faulty:
            assert np.max(np.abs(np.median(con.residual(ev[name]), axis=0))) < 0.1, name


def test_leave_out_predicts_a_camera_from_the_others(rig):
    offsets = _lidar_pattern(rig, [0.0, 0.0, 1.0])
    offsets["CAM_BACK"] = offsets["CAM_BACK"] + np.array([0.0, 1.0, 0.0])
    ev = _evidence(rig, offsets)
    con = rig_consensus(rig, ev, leave_out="CAM_BACK")
    assert "CAM_BACK" not in con.cameras
    np.testing.assert_allclose(np.median(con.residual(ev["CAM_BACK"]), axis=0), [0.0, 1.0, 0.0], atol=0.1)


def test_too_few_cameras_give_no_consensus(rig):
    few = {n: np.array([0.0, 0.0, 1.0]) for n in rig.names[: MIN_CAMERAS - 1]}
    ev = _evidence(rig, few)
    con = rig_consensus(rig, ev)
    assert not con.fitted
    np.testing.assert_allclose(np.median(con.residual(ev[rig.names[0]]), axis=0), [0.0, 0.0, 1.0], atol=0.1)


def test_cameras_with_too_few_points_take_no_part(rig):
    ev = _evidence(rig, {n: np.zeros(3) for n in rig.names})
    ev["CAM_FRONT"].n_points = 3
    con = rig_consensus(rig, ev, min_points=60)
    assert "CAM_FRONT" not in con.cameras
