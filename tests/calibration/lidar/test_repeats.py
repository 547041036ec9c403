"""Frames that repeat a view (bevviz.calibration.lidar.repeats): a parked car's frames count once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration.gross import screen_gross_errors
from bevviz.calibration.lidar.evidence import lidar_evidence
from bevviz.calibration.lidar.repeats import REPEAT_MOVE_M, frozen_images, frozen_words, repeated_views
from bevviz.lidar import LidarScan, as_lidar_scan
from bevviz.rotations import make_transform, rpy_to_matrix


def _noisy(scan: LidarScan, seed: int, sigma_m: float = 0.02) -> LidarScan:
    """The same sweep again with ``sigma_m`` of range noise: a parked car's next sweep."""
    rng = np.random.default_rng(seed)
    p = scan.points.copy()
    r = np.linalg.norm(p[:, :3], axis=1, keepdims=True)
    p[:, :3] *= 1 + rng.normal(0.0, sigma_m, (len(p), 1)) / np.maximum(r, 1e-3)
    return dataclasses.replace(scan, points=p)


def _parked(scan: LidarScan, seed: int, moving: float) -> LidarScan:
    """A parked car's next sweep, as a spinning LiDAR gives it: another azimuth phase (up to
    0.1 deg), 2 cm of range noise, and a share ``moving`` of the returns on things that moved
    (3 m in the ground plane)."""
    rng = np.random.default_rng(seed)
    p = _noisy(scan, seed).points.copy()
    a = np.radians(rng.uniform(-0.1, 0.1))
    xy = p[:, :2].astype(np.float64) @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]).T
    moved = rng.random(len(p)) < moving
    xy[moved] += rng.normal(0.0, 3.0, (int(moved.sum()), 2))
    p[:, :2] = xy.astype(p.dtype)
    return dataclasses.replace(scan, points=p)


def _moved(scan: LidarScan, t_m: tuple[float, float, float], yaw_deg: float = 0.0) -> LidarScan:
    """The sweep as the car sees it after moving by ``t_m`` (and turning ``yaw_deg``)."""
    b_from_a = np.linalg.inv(make_transform(rpy_to_matrix(0.0, 0.0, np.radians(yaw_deg)), np.array(t_m)))
    p = scan.points.copy()
    p[:, :3] = (p[:, :3].astype(np.float64) @ b_from_a[:3, :3].T + b_from_a[:3, 3]).astype(p.dtype)
    return dataclasses.replace(scan, points=p)


@pytest.fixture(scope="module")
def sweep(tri_drive) -> LidarScan:
    return as_lidar_scan(tri_drive[0].scan)


def test_a_parked_cars_sweeps_repeat_the_first_view(sweep):
    views = repeated_views([sweep, sweep, _noisy(sweep, 1)])
    assert views.kept == (0,)
    assert sorted(views.repeats) == [1, 2]
    assert all(j == 0 and move < 0.02 and turn < 0.05 for j, move, turn in views.repeats.values())
    assert views.reason.startswith("frames 2, 3 repeat frame 1's view")
    assert "(1 of 3 frames pooled)" in views.reason


@pytest.mark.parametrize("moving", [0.0, 0.4])
def test_a_parked_sweep_with_traffic_repeats_the_view(sweep, moving):
    views = repeated_views([sweep, _parked(sweep, 4, moving)])
    assert views.kept == (0,) and views.repeats[1][1] < 0.02


def test_the_moving_tri_drive_keeps_every_frame(tri_drive):
    """Its sweeps lie 1.26-1.28 m apart: three views."""
    views = repeated_views([as_lidar_scan(f.scan) for f in tri_drive])
    assert views.kept == (0, 1, 2) and not views.repeats and views.reason == ""


@pytest.mark.parametrize("t_m, yaw_deg, repeat", [((0.1, 0.0, 0.0), 0.0, True),
                                                   ((2 * REPEAT_MOVE_M, 0.0, 0.0), 0.0, False),
                                                   ((0.0, 0.0, 0.0), 3.0, False),
                                                   ((1.0, 0.3, 0.0), 1.0, False)])
def test_a_frame_repeats_only_where_the_car_stood_nearly_still(sweep, t_m, yaw_deg, repeat):
    views = repeated_views([sweep, _moved(_noisy(sweep, 2), t_m, yaw_deg)])
    assert (1 in views.repeats) is repeat
    assert views.kept == ((0,) if repeat else (0, 1))


def test_a_scan_too_small_to_register_is_kept(sweep):
    """Too few returns to register: whether the views differ is unknown, so both count."""
    tiny = as_lidar_scan(np.random.default_rng(0).uniform(-20, 20, (200, 3)).astype(np.float32))
    assert repeated_views([tiny, tiny]).kept == (0, 1)
    assert repeated_views([sweep]).kept == (0,)
    assert repeated_views([]).kept == ()


def test_evidence_of_a_frame_given_twice_is_that_frames_evidence(tri_drive):
    """A repeated frame adds no certainty: the same offset, the same bootstrap spread, and
    the evidence says which frame it left out and why."""
    f = tri_drive[0]
    cam = f.rig.names[1]
    one = lidar_evidence(f.rig, f.images, f.scan, cameras=[cam], second_look=False)[cam]
    two = lidar_evidence(f.rig, [f.images, f.images], [f.scan, _noisy(as_lidar_scan(f.scan), 3)],
                         cameras=[cam], second_look=False)[cam]
    assert two.frames == one.frames == 1 and two.repeats == (1,) and not one.repeats
    assert "frame 2 repeats frame 1's view" in two.repeats_reason
    np.testing.assert_allclose(two.offset_deg, one.offset_deg)
    np.testing.assert_allclose(two.replicates_deg, one.replicates_deg)


def test_the_gross_screen_pools_a_repeated_view_once(tri_drive):
    f = tri_drive[0]
    screen = screen_gross_errors(f.rig, f.images, f.scan, [(f.images, f.scan)])
    assert screen.frames == 1 and not screen.errors
    assert any("frame 2 repeats frame 1's view" in n for n in screen.notes)


def _frozen_drive(tri_drive, camera: str):
    """The drive's images with ``camera`` showing its first image in every frame."""
    images = [dict(f.images) for f in tri_drive]
    for imgs in images[1:]:
        imgs[camera] = tri_drive[0].images[camera]
    return images


def test_an_image_that_stays_while_the_car_moves_is_frozen(tri_drive, sweep):
    moving = repeated_views([as_lidar_scan(f.scan) for f in tri_drive])
    images = _frozen_drive(tri_drive, "CAMERA_05")
    assert frozen_images(images, moving) == {"CAMERA_05": (1, 2)}
    assert frozen_words("CAMERA_05", (1, 2)).startswith("CAMERA_05's image in frames 2, 3 is the image of the frame")
    # one pixel changed: a real exposure, not a frozen one
    images[2]["CAMERA_05"] = images[2]["CAMERA_05"].copy()
    images[2]["CAMERA_05"][0, 0, 0] ^= 1
    assert frozen_images(images, moving) == {"CAMERA_05": (1,)}
    # a parked car's images may match: its frames repeat the view and are never compared
    parked = repeated_views([sweep, sweep, sweep])
    assert frozen_images(_frozen_drive(tri_drive, "CAMERA_05"), parked) == {}
    # an image without structure (every pixel alike) is left to the checks of structureless images
    black = [{"CAMERA_05": np.zeros((8, 8, 3), np.uint8)} for _ in range(3)]
    assert frozen_images(black, moving) == {}


def test_a_frozen_camera_is_judged_on_its_first_frame_and_the_screen_names_it(tri_drive):
    rig = tri_drive[0].rig
    images = _frozen_drive(tri_drive, "CAMERA_05")
    scans = [f.scan for f in tri_drive]
    ev = lidar_evidence(rig, images, scans, cameras=["CAMERA_05", "CAMERA_06"], second_look=False)
    assert ev["CAMERA_05"].frozen == (1, 2) and ev["CAMERA_05"].frames == 1
    assert "frozen" in ev["CAMERA_05"].frozen_reason
    assert ev["CAMERA_06"].frozen == () and ev["CAMERA_06"].frames == 3  # the other cameras keep every frame
    one = lidar_evidence(rig, tri_drive[0].images, tri_drive[0].scan, cameras=["CAMERA_05"], second_look=False)
    np.testing.assert_allclose(ev["CAMERA_05"].offset_deg, one["CAMERA_05"].offset_deg)
    screen = screen_gross_errors(rig, images[0], scans[0], list(zip(images[1:], scans[1:])))
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_05", "frozen")]
    assert screen.frames == 1  # the frames where it froze are not pooled
