"""The null test: structureless and heavily blurred images support no LiDAR verdict, real
ones keep theirs (the full matrix, 20 noise seeds a frame: scripts/measure_null.py)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from bevviz.calibration import INCONCLUSIVE, MISCALIBRATED, OK, DiagnoseSettings, diagnose, perturb_rig
from bevviz.calibration.lidar.image_support import MIN_IMAGE_LIFT, MIN_IMAGE_SHARPNESS, image_lift, image_support
from bevviz.calibration.verdicts import RULE
from bevviz.io.frame_folder import load_frame_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tri(sample_data):
    if not (sample_data / "real_tri" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri is missing")
    return load_frame_folder(sample_data / "real_tri")


def test_a_flat_image_has_no_lift_and_a_real_one_has(real_sample):
    rig, images, _ = real_sample
    cam = rig["CAM_FRONT"]
    uv = np.random.default_rng(0).uniform([0, 0], [cam.width - 1, cam.height - 1], (500, 2))
    assert image_lift(np.full(images["CAM_FRONT"].shape, 128, np.uint8), cam, uv) == 0.0
    assert image_lift(images["CAM_FRONT"], cam, np.zeros((0, 2))) == 0.0


def test_noise_that_convicted_a_camera_now_convicts_none_and_says_why(tri):
    rng = np.random.default_rng(3)  # this draw made the doctor call CAMERA_05 miscalibrated
    noise = {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in tri.images.items()}
    found = diagnose(tri.rig, noise, lidar=tri.scan, settings=DiagnoseSettings(replicates=8))
    assert all(f.verdict == INCONCLUSIVE for f in found), [f.reason for f in found]
    assert any("too little of the LiDAR's edges" in f.reason for f in found)


def test_a_real_fault_is_still_convicted(tri):
    bad = perturb_rig(tri.rig, "CAMERA_05", yaw_deg=2.0, pitch_deg=1.0)
    found = diagnose(bad, tri.images, lidar=tri.scan, settings=DiagnoseSettings(replicates=8))
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == ["CAMERA_05"]
    f = found.by_camera("CAMERA_05")
    assert image_lift(tri.images["CAMERA_05"], bad["CAMERA_05"], f.lidar.uv_best) >= MIN_IMAGE_LIFT


def _structureless(images, seed, level):
    """(kind, images): a draw of uniform noise, then flat images of one grey ``level``."""
    rng = np.random.default_rng(seed)
    yield f"noise {seed}", {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in images.items()}
    yield f"level {level}", {n: np.full(im.shape, level, np.uint8) for n, im in images.items()}


@pytest.mark.parametrize(("frame", "level"), [("real-nuscenes", 0), ("real_tri", 128), ("real_kitti", 255)])
def test_structureless_images_with_the_real_scan_are_inconclusive(dev_frames, frame, level):
    """One noise draw and one flat level a frame (CI's share; 20 draws and every level a frame:
    scripts/measure_null.py)."""
    rig, images, scan = dev_frames[frame]
    for kind, flat in _structureless(images, 11, level):
        found = diagnose(rig, flat, lidar=scan, settings=DiagnoseSettings(replicates=8))
        assert {f.verdict for f in found} == {INCONCLUSIVE}, (kind, [f.reason for f in found])


def test_a_blurred_image_loses_its_sharpness_not_all_its_lift(real_sample, real_evidence):
    rig, images, _ = real_sample
    cam = rig["CAM_BACK_LEFT"]
    uv = real_evidence["CAM_BACK_LEFT"].uv_best
    sharp = image_support(images["CAM_BACK_LEFT"], cam, uv, RULE.tolerance_deg)
    blurred = image_support(cv2.GaussianBlur(images["CAM_BACK_LEFT"], (0, 0), 25), cam, uv, RULE.tolerance_deg)
    assert sharp.lift == pytest.approx(image_lift(images["CAM_BACK_LEFT"], cam, uv))
    assert sharp.sharpness >= 2 * MIN_IMAGE_SHARPNESS
    assert blurred.lift >= MIN_IMAGE_LIFT > 0  # the blur keeps lift enough: the lift alone would let it judge
    assert blurred.sharpness < MIN_IMAGE_SHARPNESS


def test_a_heavy_blur_neither_clears_nor_convicts(real_sample):
    rig, images, scan = real_sample
    blurred = {n: cv2.GaussianBlur(im, (0, 0), 25) for n, im in images.items()}
    for k, r in enumerate((rig, perturb_rig(rig, "CAM_BACK_LEFT", yaw_deg=2.0, pitch_deg=1.0))):
        found = diagnose(r, blurred, lidar=scan, settings=DiagnoseSettings(replicates=8))
        assert not [f.camera for f in found if f.verdict in (OK, MISCALIBRATED)], [f.reason for f in found]
        if k == 0:  # the LiDAR had cleared it, bootstrap spread 1.1 deg: no longer
            assert found.by_camera("CAM_BACK_LEFT").witnesses["lidar"] == INCONCLUSIVE
