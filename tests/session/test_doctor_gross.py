"""The gross-error screen in the check: named faults of named sensors flag them (exit 1), and
what cannot be judged is a note (exit 0)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.camera import Rig
from bevviz.session import CheckSettings, Doctor, check_rig, load_scene
from bevviz.session.ground import cameras_grounded
from bevviz.session.scene import Scene

FAST = CheckSettings(replicates=4)


def _doctor(rig, images, lidar=None, settings=FAST) -> Doctor:
    return Doctor(Scene(key="parts", label="rig", rig=rig, images=images, lidar=lidar), settings)


def test_an_upside_down_camera_is_named_flagged_and_fixed(real_sample):
    rig, images, scan = real_sample
    turned = np.diag([-1.0, -1.0, 1.0, 1.0]) @ rig["CAM_FRONT"].cam_from_ego
    doctor = _doctor(rig.replace(rig["CAM_FRONT"].replace(cam_from_ego=turned)), images, scan)
    report = doctor.check()
    assert [(f.sensor, f.kind) for f in report.faults] == [("CAM_FRONT", "turned")]
    assert report.faults[0].message == "CAM_FRONT is upside down: 180 deg about its optical axis"
    assert report.flagged()[0] == "CAM_FRONT" and report.exit_code() == 1
    assert report.to_dict()["faults"][0]["sensor"] == "CAM_FRONT"
    assert np.allclose(doctor.fixed_rig()["CAM_FRONT"].cam_from_ego, rig["CAM_FRONT"].cam_from_ego)


def test_a_lidar_two_metres_low_is_named_and_no_camera_is_flagged(real_sample):
    rig, images, scan = real_sample
    low = scan.points.copy()
    low[:, 2] -= 1.9
    report = _doctor(rig, images, dataclasses.replace(scan, points=low)).check()
    assert report.flagged() == ["LIDAR"] and report.exit_code() == 1
    assert all(not c.sanity.problems and c.verdict != "miscalibrated" for c in report.cameras)


def test_a_lidar_the_screen_cannot_place_flags_no_camera_by_its_height(sample_data):
    """TRI's scan 1.2 m up, judged by the heights alone (the gross-error screen also names this
    LiDAR; a LiDAR it cannot place takes this road): the cameras sit at plausible heights
    above z = 0 and not above that LiDAR's ground, so the heights are judged from z = 0 and
    the note names the LiDAR's height, not six cameras."""
    if not (sample_data / "real_tri" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri is missing")
    scene = load_scene(str(sample_data / "real_tri"))
    high = np.array(scene.lidar.points)
    high[:, 2] += 1.2
    doctor = _doctor(scene.rig, scene.images, dataclasses.replace(scene.lidar, points=high))
    assert cameras_grounded(scene.rig, doctor.ground_z()) and not cameras_grounded(scene.rig, 0.0)
    assert all(not s.problems for s in doctor.sanity().values()), doctor.sanity()
    assert "the LiDAR's points look 1." in doctor.ground_note() and "too high" in doctor.ground_note()


def test_a_rig_in_its_lidars_frame_is_not_grounded_at_z_0(sample_data):
    """KITTI's rig in the Velodyne's frame: the cameras sit near z = 0, the road 1.7 m below."""
    if not (sample_data / "real_kitti" / "rig.json").is_file():
        pytest.skip("sample_data/real_kitti is missing")
    scene = load_scene(str(sample_data / "real_kitti"))
    doctor = _doctor(scene.rig, scene.images, scene.lidar)
    assert doctor.ground_z() < -1.0 and not cameras_grounded(scene.rig, doctor.ground_z())
    assert "stored in a sensor's frame" in doctor.ground_note()


def test_a_clean_rig_names_no_fault(real_sample):
    rig, images, scan = real_sample
    doctor = _doctor(rig, images, scan)
    report = doctor.check()
    assert report.faults == () and doctor.fixed_rig() is None
    assert "LIDAR" not in report.flagged()


def test_a_front_and_rear_rig_that_shares_no_ground_is_a_note_not_a_fault(real_sample):
    rig, images, _ = real_sample
    names = ["CAM_FRONT", "CAM_BACK"]
    report = check_rig(Rig([rig[n] for n in names]), {n: images[n] for n in names}, settings=FAST)
    for c in report.cameras:
        assert not c.sanity.problems
        assert c.sanity.notes == ("shares no ground with any other camera: its seams cannot judge it",)
    assert report.exit_code() == 0 and report.flagged() == []


def test_a_rig_in_a_sensors_frame_without_a_lidar_is_a_note_not_a_fault(sample_data):
    scene = load_scene(str(sample_data / "real_kitti"))
    report = Doctor(scene, CheckSettings(lidar=False, replicates=4)).check()
    assert report.exit_code() == 0
    assert all("cannot be judged" in c.sanity.notes[0] for c in report.cameras)


@pytest.mark.parametrize("settings", [CheckSettings(lidar=False, replicates=4)])
def test_without_a_lidar_nothing_is_screened(real_sample, settings):
    rig, images, scan = real_sample
    assert _doctor(rig, images, scan, settings).gross() is None


def test_a_drive_is_screened_on_all_its_frames(sample_data):
    """A drive (a folder of frame folders): the screen pools the edges of every frame with a scan."""
    if not (sample_data / "real_tri_drive" / "t2" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri_drive is missing")
    scene = load_scene(str(sample_data / "real_tri_drive"))
    screen = Doctor(scene, FAST).gross()
    assert screen is not None and screen.frames == 1 + len(scene.complete_frames) == 3
    assert screen.errors == []
