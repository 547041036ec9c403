"""bevviz.session.doctor: each piece of evidence computed once; typed methods over the public calibration API."""

from __future__ import annotations

import dataclasses

import pytest

from bevviz.calibration import RefineHistory, perturb_rig
from bevviz.errors import InputError
from bevviz.session import CheckSettings, Doctor, load_scene
from bevviz.session import doctor as doctor_module


@pytest.fixture(scope="module")
def real_doctor(real_root):
    return Doctor(load_scene(str(real_root)), CheckSettings(replicates=8))


def test_the_diagnosis_is_computed_once_and_refine_reuses_its_lidar_evidence(real_doctor, monkeypatch):
    found = real_doctor.diagnose()
    assert real_doctor.diagnose() is found and len(found) == 6
    evidence = real_doctor.evidence()
    assert set(evidence) == set(real_doctor.rig.names)
    assert all(evidence[f.camera] is f.lidar for f in found)  # the diagnosis's own alignment
    seen = {}

    def refine(rig, images, grid, camera, lidar=None, **kwargs):
        seen.update(kwargs, camera=camera, lidar=lidar)
        return rig, None

    monkeypatch.setattr(doctor_module, "refine_extrinsics", refine)
    real_doctor.refine("CAM_FRONT")
    assert seen["camera"] == "CAM_FRONT" and seen["lidar"] is real_doctor.scene.lidar
    assert all(seen["evidence"][f.camera] is f.evidence for f in found)  # not aligned again


def test_a_verdict_on_a_second_look_draws_that_look_and_hands_on_the_evidence_as_made(real_doctor, monkeypatch):
    """Where the verdict rests on a camera's second look, the page draws that look, but a
    refinement (and a later doctor of the same images and scan) gets the evidence as made:
    handed the second look in its place, it would judge it as a first look, with no second."""
    f = next(f for f in real_doctor.diagnose() if f.evidence.second_look is not None)  # one its first look doubts
    look = f.evidence.second_look
    assert f.lidar is f.evidence  # the clean keyframe: every verdict on a first look
    monkeypatch.setattr(f, "lidar", look)  # as a verdict on the second look leaves it
    assert real_doctor.evidence()[f.camera] is look
    seen = {}
    monkeypatch.setattr(doctor_module, "refine_extrinsics", lambda rig, *a, **k: seen.update(k) or (rig, None))
    real_doctor.refine(f.camera)
    assert seen["evidence"][f.camera] is f.evidence and seen["evidence"][f.camera].second_look is look


def test_the_report_reads_the_same_diagnosis(real_doctor):
    report = real_doctor.check()
    found = {f.camera: f for f in real_doctor.diagnose()}
    assert [c.camera for c in report.cameras] == [f.camera for f in real_doctor.diagnose()]
    for c in report.cameras:
        assert c.verdict == found[c.camera].verdict and c.offset_deg == found[c.camera].offset_deg
        assert c.seam_costs and all(0 <= v <= 2 for v in c.seam_costs.values())
    assert report.seam_median == real_doctor.diagnose().seam_median
    assert report.conventions.ranking[0][1] == real_doctor.ranking()[0].score


def test_refine_names_a_camera_that_is_not_in_the_rig(real_doctor):
    with pytest.raises(InputError, match="field 'camera'") as info:
        real_doctor.refine("CAM_NOSE")
    assert info.value.value == "CAM_NOSE"


def test_a_seam_offset_is_estimated_once_per_camera(sample_data):
    if not (sample_data / "rig.json").is_file():
        pytest.skip("sample_data/rig.json is missing")
    scene = load_scene("rig")
    turned = Doctor(dataclasses.replace(scene, rig=perturb_rig(scene.rig, "CAM_FRONT", yaw_deg=2.0)),
                    CheckSettings(lidar=False))
    offset, checked = turned.seam_offset("CAM_FRONT")
    assert offset["yaw"] == pytest.approx(2.0, abs=0.3)
    assert turned.seam_offset("CAM_FRONT") == (offset, checked)


def test_a_scene_without_every_image_is_refused_by_the_doctor_by_name(sample_data, tmp_path):
    if not (sample_data / "rig.json").is_file():
        pytest.skip("sample_data/rig.json is missing")
    scene = load_scene(str(sample_data / "rig.json"), images=str(tmp_path))
    assert not scene.images and "no image found for CAM_FRONT" in scene.missing_images
    with pytest.raises(InputError, match="field 'images'"):
        Doctor(scene).diagnose()
    report = Doctor(scene).check()  # the report says why the doctor did not run
    assert {c.verdict for c in report.cameras} == {"inconclusive"}
    assert any("needs every camera's image" in n for n in report.notes)


def test_the_doctor_adds_up_the_neighbouring_frames_of_a_dataset(nuscenes_root):
    one = Doctor(load_scene(str(nuscenes_root), frames=1), CheckSettings(replicates=4))
    two = Doctor(load_scene(str(nuscenes_root), frames=2), CheckSettings(replicates=4))
    assert one.n_frames == 1 and two.n_frames == 2
    assert len(two.frames) == 2  # the seams see both frames too
    for f in two.diagnose():
        assert f.lidar.frames == 2 and len(f.lidar.points_per_frame) == 2
        assert f.lidar.n_points > one.diagnose().by_camera(f.camera).lidar.n_points
    assert two.check().source["frames"] == 2


def test_the_doctor_uses_no_lidar_point_on_a_cameras_ignore_polygons(sample_data):
    scene = load_scene(str(sample_data / "real_kitti"))
    cam = scene.rig.names[0]
    w, h = scene.rig[cam].size
    whole = dataclasses.replace(scene, ignore={cam: [[[-1, -1], [w, -1], [w, h], [-1, h]]]})
    f = Doctor(whole, CheckSettings(replicates=4)).diagnose().by_camera(cam)
    assert f.lidar.n_points == 0 and f.verdict == "inconclusive" and "too few LiDAR edge points" in f.reason
    assert Doctor(scene, CheckSettings(replicates=4)).diagnose().by_camera(cam).lidar.n_points > 100


def test_a_rig_stored_in_the_lidars_frame_has_its_heights_measured_from_the_ground_the_lidar_sees(sample_data,
                                                                                                 real_doctor):
    # KITTI's ego frame is the Velodyne's: its camera sits 0.07 m *below* z = 0, 1.6 m above the road
    kitti = Doctor(load_scene(str(sample_data / "real_kitti")), CheckSettings(replicates=4))
    cam = kitti.rig.names[0]
    assert kitti.rig[cam].position[2] == pytest.approx(-0.07, abs=0.02)
    assert kitti.ground_z() == pytest.approx(-1.68, abs=0.1)
    assert "ground at z = -1.68 m of the ego frame" in kitti.ground_note()
    sanity = kitti.sanity()[cam]
    assert sanity.height_m == pytest.approx(1.61, abs=0.1) and not sanity.problems
    assert sanity.ground_points > 0
    conventions = kitti.conventions()  # the ranking's physical checks measure from that road too
    assert conventions.ok and any("sit 1.6" in e and "above the ground" in e for e in conventions.evidence)
    # without the LiDAR nothing shows where the road is: a camera at the frame's origin cannot
    # be judged (a note, not a fault)
    blind = Doctor(load_scene(str(sample_data / "real_kitti")), CheckSettings(lidar=False, replicates=4))
    assert blind.ground_note() == "" and not blind.sanity()[cam].problems
    assert "sits -0.07 m from z = 0, at a sensor's origin" in blind.sanity()[cam].notes[0]
    # a rig on the ground keeps z = 0 (the nuScenes keyframe's LiDAR sees its road at 0.00 m)
    assert abs(real_doctor.ground_z()) < 0.1 and real_doctor.ground_note() == ""
    assert all(not s.problems for s in real_doctor.sanity().values())


def test_a_proposed_lidar_correction_is_kept_as_a_rig_the_user_may_apply(real_doctor, monkeypatch):
    """A correction held back as a proposal leaves ``Refinement.rig`` as it was; its
    ``proposed_rig`` is that rig with only the proposed camera replaced."""
    turned = perturb_rig(real_doctor.rig, "CAM_FRONT", yaw_deg=1.0)["CAM_FRONT"]

    def refine(rig, images, grid, camera, lidar=None, **kwargs):
        return rig, RefineHistory(camera, proposal=turned)

    monkeypatch.setattr(doctor_module, "refine_extrinsics", refine)
    kept = real_doctor.refine_lidar("CAM_FRONT")
    assert kept.rig is real_doctor.rig and kept.history.accepted is False
    assert kept.proposed_rig["CAM_FRONT"] == turned
    assert all(kept.proposed_rig[n] == real_doctor.rig[n] for n in real_doctor.rig.names if n != "CAM_FRONT")
    assert real_doctor.refined("lidar", "CAM_FRONT") is kept

    def plain(rig, images, grid, camera, lidar=None, **kwargs):
        return rig, RefineHistory(camera)

    monkeypatch.setattr(doctor_module, "refine_extrinsics", plain)
    assert real_doctor.refine_lidar("CAM_FRONT").proposed_rig is None

