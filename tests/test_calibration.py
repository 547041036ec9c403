"""bevviz.calibration: perturbations, seam costs, diagnosis and refinement on the embedded sample.

The embedded sample (``sample_data/nuscenes``) holds four frames of ONE physical rig (two
scenes x two samples; every image rendered with the true calibration). Boxes standing at the
road side hide some seams in each frame, so the injected-fault tests use all four frames.

Default run: diagnosis on every camera x every rotation axis (seeded magnitude in [1, 3] deg
and sign), refinement on a representative subset, and the miscalibrated scene B. Set
``BEVVIZ_FULL=1`` for the refinement sweep over every camera x axis x both signs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bevviz import calibration as cal
from bevviz.calibration import (
    CameraFinding,
    GroundTruth,
    ImagePyramid,
    analyze_seams,
    camera_delta,
    diagnose,
    perturb_camera,
    perturb_rig,
    refine,
    refine_extrinsics,
    seam_cost,
    seam_grid,
    seams,
)
from bevviz.camera import NUSCENES_CAMERAS, Rig
from bevviz.rotations import quaternion_to_matrix, rotation_angle_deg
from bevviz.samplers.gather_scatter import taps as gs_taps
from bevviz.synthetic import nuscenes_like_rig

ROOT = Path(__file__).resolve().parents[1]
NUSCENES_ROOT = ROOT / "sample_data" / "nuscenes"
FULL = os.environ.get("BEVVIZ_FULL") == "1"
AXES = ("roll_deg", "pitch_deg", "yaw_deg")
#: Residual target (degrees) after refinement, from the issue.
TARGET_DEG = 0.2

needs_sample = pytest.mark.skipif(not (NUSCENES_ROOT / "v1.0-mini").is_dir(),
                                  reason="sample_data/nuscenes is missing")


def injected(camera: str, axis: str, salt: int = 0) -> float:
    """Seeded fault for (camera, axis): magnitude uniform in [1, 3] deg, random sign."""
    seed = 1000 * NUSCENES_CAMERAS.index(camera) + 10 * AXES.index(axis) + salt
    rng = np.random.default_rng(seed)
    return float(rng.uniform(1.0, 3.0) * rng.choice([-1.0, 1.0]))


@pytest.fixture(scope="module")
def truth() -> Rig:
    return nuscenes_like_rig()


@pytest.fixture(scope="module")
def samples():
    """[(scene name, rig as stored, images)] for the four samples, and the dataset handle."""
    from bevviz.io.nuscenes import list_samples, list_scenes, load_sample_from, open_dataset

    nusc = open_dataset(NUSCENES_ROOT)
    out = []
    for sc in list_scenes(nusc):
        for s in list_samples(nusc, sc.token):
            rig, images = load_sample_from(nusc, s.token)
            out.append((sc.name, rig, images))
    return out


@pytest.fixture(scope="module")
def frames(samples):
    """All four frames as image pyramids (shared caches across tests)."""
    return [ImagePyramid(images) for _, _, images in samples]


# --------------------------------------------------------------------------------------
# Perturbations
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Seam costs
# --------------------------------------------------------------------------------------

def test_seam_cost_ignores_exposure_and_sees_misalignment():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, size=(3, 500))
    assert seam_cost(a, 1.3 * a + 0.1) == pytest.approx(0.0, abs=1e-6)  # gain and offset
    assert seam_cost(a, rng.uniform(0, 1, size=(3, 500))) == pytest.approx(1.0, abs=0.15)
    with pytest.raises(ValueError, match="'b'"):
        seam_cost(a, a[:, :10])


def test_border_weight_is_continuous():
    uv = torch.tensor([[-1.0, 50.0], [-0.5, 50.0], [15.5, 50.0], [31.5, 50.0], [100.0, 50.0]])
    w = seams.border_weight(uv, 200, 100, 32.0)
    assert w.tolist() == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])


@needs_sample
def test_true_rig_has_the_six_ring_seams(truth, frames):
    a = analyze_seams(truth, frames[0], seam_grid(resolution=0.4))
    pairs = {frozenset((p.a, p.b)) for p in a.pairs}
    ring = {frozenset((NUSCENES_CAMERAS[i], NUSCENES_CAMERAS[(i + 1) % 6])) for i in range(6)}
    assert pairs == ring
    H, W = a.grid.shape
    assert a.mosaic().shape == (H, W, 3) and a.bev.shape == (6, 3, H, W)
    err = a.seam_error_map()
    assert np.isfinite(err[a.overlap_count() >= 2]).all() and np.isnan(err[a.overlap_count() < 2]).all()
    # Seams the boxes leave clear agree well; the median is far from "unrelated" (1).
    assert min(p.cost for p in a.pairs) < 0.15
    assert a.median_cost < 0.8
    assert len(a.table()) == 6


@needs_sample
def test_refinement_gradient_matches_finite_differences(truth, frames):
    """The seam loss is differentiable in the rotation through the gather-scatter sampler."""
    bad = perturb_rig(truth, "CAM_FRONT_RIGHT", yaw_deg=1.0, pitch_deg=0.5)
    lv = cal.Level(stride=4, blur=2.0, cell=0.5, steps=0, lr_deg=0.1)
    nbrs = cal.seam_neighbours(bad, "CAM_FRONT_RIGHT")
    obj = refine._SeamObjective(bad, [frames[1].levels(bad, ["CAM_FRONT_RIGHT", *nbrs], lv.stride, lv.blur)],
                             refine._level_grid(seam_grid(), lv.cell), "CAM_FRONT_RIGHT", nbrs, cal.SEAM_RING, None,
                             kind="ncc", ramp=lv.ramp)
    calls = []
    original = gs_taps.compute_taps
    gs_taps.compute_taps = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        rot = torch.zeros(3, requires_grad=True)
        obj.loss(rot, torch.zeros(3)).backward()
    finally:
        gs_taps.compute_taps = original
    assert calls, "the refined camera must be sampled through the gather-scatter taps"
    h = 0.05
    for k in range(3):
        e = torch.zeros(3)
        e[k] = h
        fd = (float(obj.loss(e, torch.zeros(3))) - float(obj.loss(-e, torch.zeros(3)))) / (2 * h)
        assert float(rot.grad[k]) == pytest.approx(fd, rel=0.15, abs=2e-3)


# --------------------------------------------------------------------------------------
# Diagnosis: every camera x every axis
# --------------------------------------------------------------------------------------

DIAG_GRID = seam_grid(radius=30.0, resolution=0.5)


@needs_sample
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("camera", NUSCENES_CAMERAS)
def test_diagnose_names_the_faulty_camera_first(truth, frames, camera, axis):
    deg = injected(camera, axis)
    bad = perturb_rig(truth, camera, **{axis: deg})
    found = diagnose(bad, frames, DIAG_GRID, suspects=2)
    rank = [f.camera for f in found].index(camera) + 1
    print(f"diagnose {camera} {axis} {deg:+.2f} deg: rank {rank}, score {found[0].score:.3f} "
          f"vs next {found[1].score:.3f}")
    assert all(isinstance(f, CameraFinding) for f in found)
    assert [f.camera for f in found][0] == camera, [(f.camera, round(f.score, 3)) for f in found]
    assert found[0].score > found[1].score
    assert found[0].reason.startswith(camera) and "deg" in found[0].reason


@needs_sample
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("camera", NUSCENES_CAMERAS)
def test_quick_diagnosis_of_one_frame_points_at_the_faulty_camera_only(truth, samples, camera, axis):
    # The app's live view: the default frame alone, seam costs only. A 1 deg error makes
    # the faulty camera stand out; every other camera stays below the threshold.
    images = samples[0][2]
    bad = perturb_rig(truth, camera, **{axis: 1.0})
    quick = diagnose(bad, images, thorough=False)
    suspect = cal.standout(quick)
    assert suspect is not None and suspect.camera == camera, [(f.camera, round(f.score, 2)) for f in quick]
    assert all(f.score < cal.STANDOUT_RATIO for f in quick if f.camera != camera)


@needs_sample
def test_quick_diagnosis_of_the_true_rig_names_no_camera(truth, samples):
    # No box stands in a seam of the sample (see tests/test_synthetic.py), so nothing
    # on the true rig may look suspicious.
    for _, _, images in samples:
        quick = diagnose(truth, images, thorough=False)
        assert cal.standout(quick) is None, [(f.camera, round(f.score, 2)) for f in quick]
    assert cal.standout([]) is None


def _ground_truth(world_from_ego=None) -> GroundTruth:
    from bevviz.io.images import read_image

    meta = json.loads((ROOT / "sample_data" / "ground_texture.json").read_text())
    return GroundTruth(read_image(ROOT / "sample_data" / meta["image"]), tuple(meta["x_range"]),
                       tuple(meta["y_range"]), world_from_ego)


@needs_sample
def test_diagnose_ground_truth_mode(truth, samples):
    images = samples[0][2]  # scene A, first sample: ego pose = identity = the texture's frame
    bad = perturb_rig(truth, "CAM_BACK_LEFT", pitch_deg=1.0)
    found = diagnose(bad, images, DIAG_GRID, ground_truth=_ground_truth())
    assert found[0].camera == "CAM_BACK_LEFT"
    assert found[0].gt_cost is not None and "ground-truth" in found[0].reason
    assert found[0].score > 1.3 * found[1].score


@needs_sample
def test_diagnose_ground_truth_mode_scene_b_with_ego_pose(samples):
    """Scene B's samples sit at other ego poses: the texture is looked up through them."""
    from bevviz.io.nuscenes import ego_pose, list_samples, list_scenes, open_dataset

    nusc = open_dataset(NUSCENES_ROOT)
    record = json.loads((NUSCENES_ROOT / "miscalibration.json").read_text())
    scene = [sc for sc in list_scenes(nusc) if sc.name == record["scene"]][0]
    token = list_samples(nusc, scene.token)[1].token
    pose = ego_pose(nusc, token)
    assert abs(pose[0, 3]) > 1.0  # not the identity
    rig_b, images = [(r, i) for name, r, i in samples if name == record["scene"]][1]
    found = diagnose(rig_b, images, DIAG_GRID, ground_truth=_ground_truth(pose))
    assert found[0].camera == record["camera"], [(f.camera, round(f.score, 2)) for f in found]


# --------------------------------------------------------------------------------------
# Refinement
# --------------------------------------------------------------------------------------

SUBSET = [("CAM_FRONT", "yaw_deg"), ("CAM_FRONT_RIGHT", "pitch_deg"), ("CAM_BACK_RIGHT", "roll_deg"),
          ("CAM_BACK", "pitch_deg"), ("CAM_BACK_LEFT", "yaw_deg"), ("CAM_FRONT_LEFT", "roll_deg")]
SWEEP = [(c, a, s) for c in NUSCENES_CAMERAS for a in AXES for s in (0, 1)] if FULL else [(c, a, 0) for c, a in SUBSET]


@needs_sample
@pytest.mark.parametrize("camera,axis,salt", SWEEP)
def test_refine_recovers_injected_rotation(truth, frames, camera, axis, salt):
    deg = injected(camera, axis, salt)
    bad = perturb_rig(truth, camera, **{axis: deg})
    steps = []
    new, hist = refine_extrinsics(bad, frames, None, camera, progress=lambda k, n, loss: steps.append((k, n)))
    residual = rotation_angle_deg(new[camera].cam_from_ego[:3, :3], truth[camera].cam_from_ego[:3, :3])
    print(f"{camera} {axis} {deg:+.2f} deg -> residual {residual:.3f} deg ({hist.seconds:.1f} s)")
    assert residual < TARGET_DEG
    # Only the refined camera moved; the history is complete.
    assert all(new[n] == bad[n] for n in bad.names if n != camera)
    total = sum(lv.steps for lv in cal.DEFAULT_LEVELS)
    assert len(hist.steps) == total
    # Progress counts every step run, the search's alternative starts included, up to n.
    n = steps[-1][1]
    stage = sum(lv.steps for lv in cal.DEFAULT_LEVELS[:cal.SEARCH_LEVELS])
    assert steps == [(k, n) for k in range(1, n + 1)] and (n - total) % stage == 0
    assert hist.final_loss < hist.initial_loss
    assert set(hist.neighbours) == set(cal.seam_neighbours(truth, camera))
    assert hist.delta.angle_deg == pytest.approx(abs(deg), abs=TARGET_DEG)
    assert hist.rows()[0]["loss"] == hist.losses[0]


@needs_sample
def test_search_escapes_the_false_minimum_of_a_periodic_ground(truth, frames):
    # CAM_BACK_LEFT's seams lie on the 1 m checker: a yaw error of 2 deg is one pattern
    # period from a false minimum near +3.2 deg, where plain descent ends.
    bad = perturb_rig(truth, "CAM_BACK_LEFT", yaw_deg=2.0)
    residual = {}
    for search in (0.0, cal.SEARCH_DEG):
        new, hist = refine_extrinsics(bad, frames, None, "CAM_BACK_LEFT", search_deg=search)
        residual[search] = rotation_angle_deg(new["CAM_BACK_LEFT"].cam_from_ego[:3, :3],
                                              truth["CAM_BACK_LEFT"].cam_from_ego[:3, :3])
        if search:
            assert hist.search_start_deg[2] < -1.0  # the kept run started from the yaw scan
        else:
            assert hist.search_start_deg == (0.0, 0.0, 0.0)
    print(f"CAM_BACK_LEFT yaw +2 deg: residual without search {residual[0.0]:.3f} deg, "
          f"with {residual[cal.SEARCH_DEG]:.3f} deg")
    assert residual[0.0] > 1.0 and residual[cal.SEARCH_DEG] < TARGET_DEG


def test_search_starts_are_the_per_axis_scan_minima_below_the_start():
    # A loss with its global minimum at yaw -2 (a false one at 0, where we start) and a
    # pitch bowl centred at 0: only the yaw scan offers a start.
    def loss(r):
        yaw, pitch = float(r[2]), float(r[1])
        return min((yaw + 2.0) ** 2, 0.5 + yaw ** 2) + pitch ** 2 + abs(float(r[0]))

    starts = refine._search_starts(loss, 4.0)
    assert len(starts) == 1 and torch.equal(starts[0], torch.tensor([0.0, 0.0, -2.0]))
    assert refine._search_starts(lambda r: float(r.abs().sum()), 4.0) == []

    # Two minima below the start on one axis (the false one, one period away, lower):
    # both become starts, lowest first; per_axis caps them.
    def periodic(r):
        yaw = float(r[2])
        return min((yaw + 2.0) ** 2 + 0.1, (yaw - 3.0) ** 2, 0.5 + yaw ** 2)

    both = refine._search_starts(periodic, 4.0)
    assert [float(s[2]) for s in both] == [3.0, -2.0]
    assert [float(s[2]) for s in refine._search_starts(periodic, 4.0, per_axis=1)] == [3.0]


@needs_sample
@pytest.mark.parametrize("camera,axis", SUBSET + [("CAM_BACK_LEFT", "yaw_deg")])
def test_refine_from_the_default_frame_alone(truth, frames, camera, axis):
    # What the app does with the embedded sample: one frame (scene A's first sample, the
    # images of sample_data/rig.json). CAM_BACK_LEFT yaw is the checker's false-minimum case.
    deg = injected(camera, axis)
    new, hist = refine_extrinsics(perturb_rig(truth, camera, **{axis: deg}), frames[:1], None, camera)
    residual = rotation_angle_deg(new[camera].cam_from_ego[:3, :3], truth[camera].cam_from_ego[:3, :3])
    print(f"one frame: {camera} {axis} {deg:+.2f} deg -> residual {residual:.3f} deg ({hist.seconds:.1f} s)")
    assert residual < TARGET_DEG


@pytest.fixture(scope="module")
def scene_b(samples):
    """(record, rig as stored in scene B, scene B's frames, true ego_from_cam rotation)."""
    record = json.loads((NUSCENES_ROOT / "miscalibration.json").read_text())
    frames_b = [(rig, images) for name, rig, images in samples if name == record["scene"]]
    assert len(frames_b) == 2
    true_R = quaternion_to_matrix(record["true_rotation_wxyz"])  # calibrated_sensor: ego_from_cam
    return record, frames_b[0][0], [ImagePyramid(images) for _, images in frames_b], true_R


@needs_sample
def test_scene_b_miscalibration_is_diagnosed(scene_b):
    """Scene B stores CAM_FRONT_RIGHT with a known rotation error (its images use the truth)."""
    record, rig_b, frames_b, true_R = scene_b
    camera = record["camera"]
    before = rotation_angle_deg(rig_b[camera].ego_from_cam[:3, :3], true_R)
    assert before == pytest.approx(record["rotation_error"]["degrees"], abs=1e-6)
    for frames in (frames_b, frames_b[:1], frames_b[1:]):  # both samples, and each alone
        found = diagnose(rig_b, frames, DIAG_GRID)
        assert found[0].camera == camera, [(f.camera, round(f.score, 3)) for f in found]


@needs_sample
def test_scene_b_miscalibration_is_corrected(scene_b, frames):
    """Refined from scene B's own two samples, and from all four samples of the same rig."""
    record, rig_b, frames_b, true_R = scene_b
    camera = record["camera"]
    for name, use in (("scene B", frames_b), ("all samples", frames)):
        new, hist = refine_extrinsics(rig_b, use, None, camera)
        after = rotation_angle_deg(new[camera].ego_from_cam[:3, :3], true_R)
        print(f"scene B {camera}: 2.000 deg -> {after:.3f} deg ({name}, {hist.seconds:.1f} s)")
        assert after < TARGET_DEG


def test_refine_errors_are_named(truth):
    with pytest.raises(ValueError, match="camera.*CAM_NOPE"):
        refine_extrinsics(truth, {}, None, "CAM_NOPE")
    lonely = truth.subset(["CAM_FRONT", "CAM_BACK"])
    with pytest.raises(ValueError, match="no seam"):
        refine_extrinsics(lonely, {}, None, "CAM_FRONT")
    with pytest.raises(ValueError, match="images"):
        cal.as_frames([1, 2])

