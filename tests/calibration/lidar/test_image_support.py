"""The null test: structureless images support no LiDAR verdict, real ones keep theirs."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration import INCONCLUSIVE, MISCALIBRATED, DiagnoseSettings, diagnose, perturb_rig
from bevviz.calibration.lidar.image_support import MIN_IMAGE_LIFT, image_lift
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
