"""bevviz.calibration.diagnose: which camera is off, on the embedded sample.

The embedded sample (``sample_data/nuscenes``) holds four frames of ONE physical rig (two
scenes x two samples; every image rendered with the true calibration). Boxes standing at the
road side hide some seams in each frame, so the injected-fault tests use all four frames.
Diagnosis runs on each camera with a fault about one axis, every axis twice (``sweeps.SUBSET``;
``BEVVIZ_FULL=1``: every camera x every axis; seeded magnitude in [1, 3] deg and sign), and on
the miscalibrated scene B.
"""

from __future__ import annotations

import json

import pytest

from bevviz import calibration as cal
from bevviz.calibration import (
    CameraFinding,
    DiagnoseSettings,
    GroundTruth,
    diagnose,
    perturb_rig,
    seam_grid,
)
from bevviz.camera import NUSCENES_CAMERAS
from bevviz.io.images import read_image
from bevviz.io.nuscenes import ego_pose, list_samples, list_scenes, open_dataset
from bevviz.rotations import rotation_angle_deg

from .sweeps import FULL, SUBSET

AXES = ("roll_deg", "pitch_deg", "yaw_deg")


DIAG_GRID = seam_grid(radius=30.0, resolution=0.5)


@pytest.mark.parametrize("camera,axis", [(c, a) for c in NUSCENES_CAMERAS for a in AXES] if FULL else SUBSET)
def test_diagnose_names_the_faulty_camera_first(truth, frames, camera, axis, injected):
    deg = injected(camera, axis)
    bad = perturb_rig(truth, camera, **{axis: deg})
    found = diagnose(bad, frames, DIAG_GRID, settings=DiagnoseSettings(suspects=2))
    rank = [f.camera for f in found].index(camera) + 1
    print(f"diagnose {camera} {axis} {deg:+.2f} deg: rank {rank}, score {found[0].score:.3f} "
          f"vs next {found[1].score:.3f}")
    assert all(isinstance(f, CameraFinding) for f in found)
    assert [f.camera for f in found][0] == camera, [(f.camera, round(f.score, 3)) for f in found]
    assert found[0].score > found[1].score
    assert found[0].reason.startswith(camera) and "deg" in found[0].reason


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("camera", NUSCENES_CAMERAS)
def test_quick_diagnosis_of_one_frame_points_at_the_faulty_camera_only(truth, samples, camera, axis):
    # The app's live view: the default frame alone, seam costs only. A 1 deg error makes
    # the faulty camera stand out; every other camera stays below the threshold.
    images = samples[0][2]
    bad = perturb_rig(truth, camera, **{axis: 1.0})
    quick = diagnose(bad, images, settings=DiagnoseSettings(thorough=False))
    suspect = cal.standout(quick)
    assert suspect is not None and suspect.camera == camera, [(f.camera, round(f.score, 2)) for f in quick]
    assert all(f.score < cal.STANDOUT_RATIO for f in quick if f.camera != camera)


def test_quick_diagnosis_of_the_true_rig_names_no_camera(truth, samples):
    # No box stands in a seam of the sample (see tests/synthetic/test_world.py), so nothing
    # on the true rig may look suspicious.
    for _, _, images in samples:
        quick = diagnose(truth, images, settings=DiagnoseSettings(thorough=False))
        assert cal.standout(quick) is None, [(f.camera, round(f.score, 2)) for f in quick]
    assert cal.standout([]) is None


def _ground_truth(nuscenes_root, world_from_ego=None) -> GroundTruth:
    meta = json.loads((nuscenes_root.parent / "ground_texture.json").read_text())
    return GroundTruth(read_image(nuscenes_root.parent / meta["image"]), tuple(meta["x_range"]),
                       tuple(meta["y_range"]), world_from_ego)


def test_diagnose_ground_truth_mode(truth, samples, nuscenes_root):
    images = samples[0][2]  # scene A, first sample: ego pose = identity = the texture's frame
    bad = perturb_rig(truth, "CAM_BACK_LEFT", pitch_deg=1.0)
    found = diagnose(bad, images, DIAG_GRID, ground_truth=_ground_truth(nuscenes_root))
    assert found[0].camera == "CAM_BACK_LEFT"
    assert found[0].gt_cost is not None and "ground-truth" in found[0].reason
    assert found[0].score > 1.3 * found[1].score


def _rows(found):
    return [(f.camera, f.score, f.verdict, f.doubt, f.reason) for f in found]


def test_diagnose_asks_the_one_question_its_inputs_allow(truth, samples, nuscenes_root):
    """One function per question: diagnose without LiDAR and not thorough is rank_seams, with a
    known texture against_texture; every inconclusive finding carries a doubt, no sure one does."""
    images = samples[0][2]
    bad = perturb_rig(truth, "CAM_BACK_LEFT", pitch_deg=1.0)
    quick = cal.rank_seams(bad, DiagnoseSettings().analyses(bad, images, DIAG_GRID))
    assert _rows(quick) == _rows(diagnose(bad, images, DIAG_GRID, settings=DiagnoseSettings(thorough=False)))
    gt = _ground_truth(nuscenes_root)
    texture = cal.against_texture(bad, DiagnoseSettings().analyses(bad, images, DIAG_GRID, gt)[0])
    assert _rows(texture) == _rows(diagnose(bad, images, DIAG_GRID, ground_truth=gt))
    for f in [*quick, *texture]:
        assert (f.doubt is not None) == (f.verdict == cal.INCONCLUSIVE), (f.camera, f.verdict, f.doubt)
        assert f.doubt is None or isinstance(f.doubt, cal.Doubt)


def test_diagnose_ground_truth_mode_scene_b_with_ego_pose(samples, nuscenes_root):
    """Scene B's samples sit at other ego poses: the texture is looked up through them."""
    nusc = open_dataset(nuscenes_root)
    record = json.loads((nuscenes_root / "miscalibration.json").read_text())
    scene = [sc for sc in list_scenes(nusc) if sc.name == record["scene"]][0]
    token = list_samples(nusc, scene.token)[1].token
    pose = ego_pose(nusc, token)
    assert abs(pose[0, 3]) > 1.0  # not the identity
    rig_b, images = [(r, i) for name, r, i in samples if name == record["scene"]][1]
    found = diagnose(rig_b, images, DIAG_GRID, ground_truth=_ground_truth(nuscenes_root, pose))
    assert found[0].camera == record["camera"], [(f.camera, round(f.score, 2)) for f in found]


def test_scene_b_miscalibration_is_diagnosed(scene_b):
    """Scene B stores CAM_FRONT_RIGHT with a known rotation error (its images use the truth)."""
    record, rig_b, frames_b, true_R = scene_b
    camera = record["camera"]
    before = rotation_angle_deg(rig_b[camera].ego_from_cam[:3, :3], true_R)
    assert before == pytest.approx(record["rotation_error"]["degrees"], abs=1e-6)
    for frames in (frames_b, frames_b[:1], frames_b[1:]):  # both samples, and each alone
        found = diagnose(rig_b, frames, DIAG_GRID)
        assert found[0].camera == camera, [(f.camera, round(f.score, 3)) for f in found]
