"""The timing witness: a LiDAR displaced along the car's axis is not a rotated camera."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration import DiagnoseSettings, Doubt, diagnose, lidar_verdict
from bevviz.calibration.lidar.alignment import EdgeAlignment
from bevviz.calibration.lidar.evidence import camera_evidence
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.lidar.sync import MAX_SHIFT_M, SHIFT_STEP_M, TimingFit, rig_timing, timing_fit
from bevviz.calibration.verdicts import MISCALIBRATED, TOLERANCE_DEG


def _doubled_motion(scan):
    """The keyframe's scan with each camera's ego motion compensated twice: the LiDAR and the
    images as they look when the camera timestamps are off by the time between them."""
    motion = {}
    for name, T in scan.exposure_from_keyframe.items():
        T2 = np.array(T, dtype=np.float64)
        T2[:3, 3] *= 2.0
        motion[name] = T2
    return dataclasses.replace(scan, exposure_from_keyframe=motion)


def _ahead(scan, metres: float):
    """The scan with its cloud ``metres`` ahead (ego +x) of where the cameras saw the scene."""
    pts = np.array(scan.points)
    pts[:, 0] += metres
    return dataclasses.replace(scan, points=pts)


def test_a_displaced_lidar_is_found_as_a_displacement(real_sample):
    rig, images, scan = real_sample
    cam = rig["CAM_FRONT_LEFT"]  # sideways-looking: a forward displacement is a lateral one
    ev = camera_evidence(cam, as_lidar_frames(images, _ahead(scan, 0.4)), replicates=0)
    assert ev.timing.fitted
    assert ev.timing.shift_m == pytest.approx(-0.4, abs=SHIFT_STEP_M + 1e-9)
    assert ev.timing.gain > 0
    # a rotation-only alignment turns the camera to absorb the displacement (about 1.2 deg of
    # yaw); at the joint optimum that yaw is gone and the camera is nearer its stored pose
    clean = camera_evidence(cam, as_lidar_frames(images, scan), replicates=0).offset_deg
    assert abs(ev.offset_deg[2] - clean[2]) > 2 * TOLERANCE_DEG
    assert abs(ev.timing.offset_deg[2] - clean[2]) < TOLERANCE_DEG
    assert np.linalg.norm(ev.timing.offset_deg - clean) < np.linalg.norm(ev.offset_deg - clean)


def test_a_highway_timing_error_is_within_the_fit(real_sample):
    # 1.5 m: 30 m/s and 50 ms (half a sweep). The fit looked as far as 0.8 m before, and a
    # KITTI frame's cloud displaced 2.5 m convicted its camera; now it reaches 1.6 m
    rig, images, scan = real_sample
    assert MAX_SHIFT_M >= 1.5
    cam = rig["CAM_FRONT_LEFT"]
    ev = camera_evidence(cam, as_lidar_frames(images, _ahead(scan, 1.5)), replicates=0)
    assert ev.timing.shift_m == pytest.approx(-1.5, abs=SHIFT_STEP_M + 1e-9)
    assert ev.timing.gain > 0
    clean = camera_evidence(cam, as_lidar_frames(images, scan), replicates=0).offset_deg
    assert np.max(np.abs(ev.timing.offset_deg - clean)) < TOLERANCE_DEG


def test_the_stored_calibration_needs_no_displacement(real_evidence):
    for ev in real_evidence.values():
        assert abs(ev.timing.shift_m) <= 2 * SHIFT_STEP_M + 1e-9, (ev.camera, ev.timing)


def test_a_timing_error_is_not_called_a_miscalibration(real_sample):
    rig, images, scan = real_sample
    found = diagnose(rig, images, lidar=_doubled_motion(scan), settings=DiagnoseSettings(replicates=16))
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == []
    # CAM_FRONT_LEFT looks turned by about 1.2 deg of yaw to a rotation-only alignment; the
    # reason names the displacement that explains it
    fl = found.by_camera("CAM_FRONT_LEFT")
    assert fl.doubt is Doubt.TIMING, fl.reason


def test_a_fit_without_edge_points_says_so():
    class Empty:
        levels = 0

        def __len__(self):
            return 0

        def refine(self, *a, **k):  # pragma: no cover - never called
            raise AssertionError

    fit = timing_fit(Empty(), np.zeros(3), 0.0, np.array([0.0, 0.0, 1.0]))
    assert not fit.fitted and fit.shift_m == 0.0 and fit.gain == 0.0
    assert not TimingFit().fitted
    assert MAX_SHIFT_M > SHIFT_STEP_M > 0


def test_scores_with_a_shift_move_the_points(real_sample):
    rig, images, scan = real_sample
    al = EdgeAlignment(rig["CAM_FRONT"], as_lidar_frames(images, scan))
    last = al.levels - 1
    assert al.score(np.zeros(3), last, shift_m=np.zeros(3)) == pytest.approx(al.score(np.zeros(3), last))
    assert al.score(np.zeros(3), last, shift_m=np.array([0.0, 2.0, 0.0])) != al.score(np.zeros(3), last)


def _fit(shift_m: float, gain: float = 0.01) -> TimingFit:
    shifts = np.round(np.arange(-MAX_SHIFT_M, MAX_SHIFT_M + 1e-9, SHIFT_STEP_M), 6)
    scores = np.where(np.isclose(shifts, shift_m), 1.0 + gain, 1.0)
    return TimingFit(shifts, np.zeros((len(shifts), 3)), scores, rotation_score=1.0, score_spread=0.02)


def test_the_rig_looks_out_of_sync_only_when_most_cameras_agree():
    assert rig_timing({}) == ""
    assert rig_timing({"A": _fit(-0.4)}) == ""  # one camera: a fault of its own, not the rig's timing
    note = rig_timing({"A": _fit(-0.4), "B": _fit(-0.3), "C": _fit(-0.3), "D": _fit(0.0, gain=0.0)})
    assert "3 of 4 cameras (A, B, C)" in note and "-0.3 m" in note and "out of sync" in note
    assert rig_timing({"A": _fit(-0.4), "B": _fit(0.3), "C": _fit(0.0, 0.0)}) == ""  # no agreement
    assert rig_timing({"A": _fit(-0.1), "B": _fit(-0.1)}) == ""  # below RIG_SHIFT_M
    assert rig_timing({"A": _fit(-0.4, gain=0.001), "B": _fit(-0.4, gain=0.001)}) == ""  # flat: gain 0.05 z
    # the fit's last displacement is no optimum (the score may keep rising beyond it): dark
    # images of a TRI frame put four of six cameras there
    end = {n: _fit(MAX_SHIFT_M) for n in "ABC"}
    assert all(f.at_end for f in end.values()) and not _fit(-0.4).at_end and not TimingFit().at_end
    assert rig_timing(end) == ""
    assert "3 of 3 cameras" in rig_timing({n: _fit(MAX_SHIFT_M - SHIFT_STEP_M) for n in "ABC"})


def test_a_displaced_lidar_is_reported_for_the_rig(real_sample):
    rig, images, scan = real_sample
    found = diagnose(rig, images, lidar=_ahead(scan, 0.3), settings=DiagnoseSettings(replicates=16))
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == []
    assert "out of sync" in found.timing and "-0.3 m" in found.timing, found.timing
    assert diagnose(rig, images, lidar=scan, settings=DiagnoseSettings(replicates=16)).timing == ""


def test_a_lidar_displaced_0_8_m_is_not_called_a_miscalibration(real_sample):
    # 0.8 m (16 m/s and half a sweep): the other cameras' evidence is displaced too, so the
    # rig consensus puts CAM_FRONT_LEFT at pitch +0.9; the displacement puts it where the
    # LiDAR itself does, which the verdict accepts as an explanation as well
    rig, images, scan = real_sample
    found = diagnose(rig, images, lidar=_ahead(scan, 0.8), settings=DiagnoseSettings(replicates=16))
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == []
    assert any(f.doubt is Doubt.TIMING for f in found), [f.reason for f in found]
    # the displacement puts a camera where the LiDAR itself does (not the rig): the verdict's own figures
    cases = [lidar_verdict(f.lidar, found.consensus) for f in found]
    assert any(v.doubt is Doubt.TIMING and not v.why["by_rig"] for v in cases), [v.reason for v in cases]
