"""The gross-error screen on every embedded development frame: each gross error tried is
named with the right sensor, and the clean rigs raise none.

Chosen to keep CI short (about 1 s a screen): the errors the screen separates on each frame
(bevviz.calibration.gross's docstring lists those it does not), one or two cameras each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration.frame_folder import load_frame_folder
from bevviz.calibration.gross import GROSS_RATIO, LIDAR_SENSOR, screen_gross_errors, swapped_images
from bevviz.camera import Camera, Rig

ROLL_180 = np.diag([-1.0, -1.0, 1.0])
ROLL_90 = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _turned(camera: Camera, T: np.ndarray) -> Camera:
    M = np.eye(4)
    M[:3, :3] = T
    return camera.replace(cam_from_ego=M @ camera.cam_from_ego)


@pytest.fixture(scope="module")
def dev_frames(real_sample, sample_data):
    """name -> (rig, images, scan) of every embedded development frame."""
    rig, images, scan = real_sample
    out = {"real-nuscenes": (rig, dict(images), scan)}
    for name in ("real_tri", "real_kitti"):
        if not (sample_data / name / "rig.json").is_file():
            pytest.skip(f"sample_data/{name} is missing")
        f = load_frame_folder(sample_data / name)
        out[name] = (f.rig, f.images, f.scan)
    return out


@pytest.mark.parametrize("frame", ["real-nuscenes", "real_tri", "real_kitti"])
def test_a_clean_rig_raises_no_gross_error(dev_frames, frame):
    rig, images, scan = dev_frames[frame]
    screen = screen_gross_errors(rig, images, scan)
    assert screen.errors == []
    assert screen.fixed is None
    assert max(r for _, r in screen.best.values()) < GROSS_RATIO
    assert set(screen.best) == set(rig.names)  # every camera was screened


@pytest.mark.parametrize("frame, camera, turn, words", [
    ("real-nuscenes", "CAM_FRONT", ROLL_180, "is upside down: 180 deg about its optical axis"),
    ("real-nuscenes", "CAM_BACK_RIGHT", ROLL_90, "is turned -90 deg about its optical axis"),
    ("real_tri", "CAMERA_05", ROLL_180, "is upside down: 180 deg about its optical axis"),
    ("real_tri", "CAMERA_05", ROLL_90, "is turned -90 deg about its optical axis"),
    ("real_kitti", "image_2", ROLL_180, "is upside down: 180 deg about its optical axis"),
    ("real_kitti", "image_2", ROLL_90, "is turned -90 deg about its optical axis"),
])
def test_a_turned_camera_is_named_and_fixed(dev_frames, frame, camera, turn, words):
    rig, images, scan = dev_frames[frame]
    faulty = rig.replace(_turned(rig[camera], turn))
    screen = screen_gross_errors(faulty, images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [(camera, "turned")]
    assert screen.errors[0].message == f"{camera} {words}"
    assert screen.errors[0].ratio >= GROSS_RATIO
    assert np.allclose(screen.fixed[camera].cam_from_ego, rig[camera].cam_from_ego, atol=1e-9)
    assert all(screen.fixed[n] == faulty[n] for n in rig.names if n != camera)


def test_two_swapped_images_are_named_together(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    swapped = dict(images)
    swapped["CAM_FRONT"], swapped["CAM_BACK"] = images["CAM_BACK"], images["CAM_FRONT"]
    screen = screen_gross_errors(rig, swapped, scan)
    assert [(e.kind, e.sensor, e.others) for e in screen.errors] == [("swapped", "CAM_BACK", ("CAM_FRONT",))]
    assert screen.errors[0].message == "CAM_BACK and CAM_FRONT images are swapped"
    assert screen.fixed is None  # the rig is right: the images are to be exchanged
    undone = swapped_images(swapped, screen)
    assert undone["CAM_FRONT"] is images["CAM_FRONT"] and undone["CAM_BACK"] is images["CAM_BACK"]


def test_an_image_under_the_wrong_name_names_both_cameras(dev_frames):
    rig, images, scan = dev_frames["real_tri"]
    swapped = dict(images)
    swapped["CAMERA_01"], swapped["CAMERA_07"] = images["CAMERA_07"], images["CAMERA_01"]
    screen = screen_gross_errors(rig, swapped, scan)
    assert len(screen.errors) == 1
    e = screen.errors[0]
    assert {e.sensor, *e.others} == {"CAMERA_01", "CAMERA_07"}
    assert e.kind in ("swapped", "wrong image")


def test_a_lidar_off_by_two_metres_is_named_and_no_camera_is_blamed(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    low = scan.points.copy()
    low[:, 2] -= 1.9
    screen = screen_gross_errors(rig, images, dataclasses.replace(scan, points=low))
    assert screen.sensors == [LIDAR_SENSOR]
    assert "no camera is blamed" in screen.errors[0].message
    assert screen.lidar_from_scan[2, 3] == pytest.approx(1.9, abs=0.15)
    assert screen.fixed is None


def test_structureless_images_raise_no_gross_error(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    rng = np.random.default_rng(0)
    noise = {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in images.items()}
    grey = {n: np.full(im.shape, 128, np.uint8) for n, im in images.items()}
    for imgs in (noise, grey):
        assert screen_gross_errors(rig, imgs, scan).errors == []


def test_a_rig_of_one_camera_is_screened_alone(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    one = Rig([_turned(rig["CAM_FRONT"], ROLL_180)])
    screen = screen_gross_errors(one, {"CAM_FRONT": images["CAM_FRONT"]}, scan)
    assert screen.sensors == ["CAM_FRONT"]
