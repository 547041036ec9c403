"""bevviz.calibration.perturbations: body-frame perturbations and the deltas that invert them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bevviz import calibration as cal
from bevviz.calibration import (
    camera_delta,
    perturb_camera,
)
from bevviz.calibration.perturbations import same_turn
from bevviz.camera import NUSCENES_CAMERAS
from bevviz.rotations import rotation_angle_deg


def test_perturbation_axes_mean_what_they_say(truth):
    cam = truth["CAM_FRONT"]
    axis0 = cam.ego_from_cam[:3, 2]
    down = perturb_camera(cam, pitch_deg=2.0).ego_from_cam[:3, 2]
    assert down[2] < axis0[2] - np.sin(np.radians(1.9))  # pitch > 0 looks down
    left = perturb_camera(cam, yaw_deg=2.0).ego_from_cam[:3, 2]
    assert left[1] > axis0[1] + np.sin(np.radians(1.9))  # yaw > 0 turns left
    rolled = perturb_camera(cam, roll_deg=2.0).ego_from_cam
    np.testing.assert_allclose(rolled[:3, 2], axis0, atol=1e-12)  # roll keeps the optical axis
    assert rotation_angle_deg(rolled[:3, :3], cam.ego_from_cam[:3, :3]) == pytest.approx(2.0)


@pytest.mark.parametrize("name", NUSCENES_CAMERAS)
def test_camera_delta_inverts_perturb_camera(truth, name):
    cam = truth[name]
    moved = perturb_camera(cam, 0.7, -1.3, 2.1, (0.05, -0.02, 0.01), 1.02, 0.99)
    d = camera_delta(cam, moved)
    assert (d.roll_deg, d.pitch_deg, d.yaw_deg) == pytest.approx((0.7, -1.3, 2.1), abs=1e-9)
    assert d.translation_m == pytest.approx((0.05, -0.02, 0.01), abs=1e-12)
    assert (d.fx_scale, d.fy_scale) == pytest.approx((1.02, 0.99))
    assert d.to_dict()["translation_cm"] == pytest.approx([5.0, -2.0, 1.0])


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_same_turn_carries_a_fault_to_a_camera_described_another_way(truth, k):
    """A camera turned on its mount has other body axes: the same physical fault has other
    angles there, and turning it by them gives the turned camera of the faulty one."""
    cam = truth["CAM_FRONT_LEFT"]
    other = cam.rot90(k)
    angles = same_turn(cam, other, 0.7, -1.3, 0.4)
    expected = perturb_camera(cam, 0.7, -1.3, 0.4).rot90(k)
    assert camera_delta(expected, perturb_camera(other, *angles)).angle_deg < 1e-5  # arccos near 1: ~1e-6
    if k % 2:
        assert abs(angles[1]) == pytest.approx(0.4, abs=0.05) and abs(angles[2]) == pytest.approx(1.3, abs=0.05)
    np.testing.assert_allclose(same_turn(cam, cam.resized(0.5), 0.7, -1.3, 0.4), [0.7, -1.3, 0.4], atol=1e-9)


def test_apply_perturbations_and_named_errors(truth):
    rig = cal.apply_perturbations(truth, {"CAM_BACK": {"yaw_deg": 1.5, "z_cm": 10.0}, "CAM_FRONT": {}})
    assert rig["CAM_FRONT"] == truth["CAM_FRONT"]
    d = camera_delta(truth["CAM_BACK"], rig["CAM_BACK"])
    assert d.yaw_deg == pytest.approx(1.5) and d.translation_m[2] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="perturbation.*twist"):
        cal.apply_perturbations(truth, {"CAM_BACK": {"twist": 1.0}})
    with pytest.raises(ValueError, match="fx_scale"):
        perturb_camera(truth["CAM_BACK"], fx_scale=0.0)
    doc = json.loads(cal.deltas_json(truth, rig))
    assert [c["camera"] for c in doc["cameras"]] == truth.names
