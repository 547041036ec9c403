"""The gross-error screen on every embedded development frame: each gross error tried is
named with the right sensor, and the clean rigs raise none.

Chosen to keep CI short (about 1 s a screen): the errors the screen separates on each frame
(bevviz.calibration.gross's docstring lists those it does not), one or two cameras each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration.gross import GROSS_T, LIDAR_SENSOR, lidar_placement, screen_gross_errors, swapped_images
from bevviz.calibration.gross import pose as pose_module
from bevviz.calibration.gross import screen as screen_module
from bevviz.calibration.gross.screen import IMAGE_SHARPNESS_T
from bevviz.calibration.gross.views import (
    MIN_GAIN,
    MIN_LIFT,
    EdgeView,
    clustered_se,
    edge_views,
    frame_views,
    relative_pose,
    rotated_best,
    seen_from,
)
from bevviz.calibration.lidar.alignment import hypothesis_matrix
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.calibration.perturbations import perturb_camera
from bevviz.camera import Camera, Rig
from bevviz.errors import InputError
from bevviz.lidar import as_lidar_scan, ground_height

ROLL_180 = np.diag([-1.0, -1.0, 1.0])
ROLL_90 = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _turned(camera: Camera, T: np.ndarray) -> Camera:
    M = np.eye(4)
    M[:3, :3] = T
    return camera.replace(cam_from_ego=M @ camera.cam_from_ego)


@pytest.mark.parametrize("frame", ["real-nuscenes", "real_tri", "real_kitti"])
def test_a_clean_rig_raises_no_gross_error(dev_frames, frame):
    rig, images, scan = dev_frames[frame]
    screen = screen_gross_errors(rig, images, scan)
    assert screen.errors == []
    assert screen.fixed is None
    assert max(t for _, t in screen.best.values()) < 0  # the stored pose fits best, every camera
    assert set(screen.best) == set(rig.names)  # every camera was screened
    assert not any("of the road the LiDAR sees" in n for n in screen.notes)  # every camera stands above the road


UPSIDE_DOWN = "is upside down: 180 deg about its optical axis"
QUARTER = "is turned -90 deg about its optical axis"


BOTH = ": the LiDAR's edges fit both about as well, so no fix is offered: look at the image"


@pytest.mark.parametrize("frame, camera, turn, words", [
    ("real-nuscenes", "CAM_FRONT", ROLL_180, UPSIDE_DOWN),
    ("real-nuscenes", "CAM_BACK_RIGHT", ROLL_180, UPSIDE_DOWN),
    ("real-nuscenes", "CAM_BACK_RIGHT", ROLL_90, QUARTER),
    ("real_tri", "CAMERA_06", ROLL_180, UPSIDE_DOWN),
    ("real_tri", "CAMERA_05", ROLL_90, QUARTER),
    ("real_kitti", "image_2", ROLL_180, UPSIDE_DOWN),
    ("real_kitti", "image_2", ROLL_90, QUARTER),
])
def test_a_turned_camera_is_named_and_fixed(dev_frames, frame, camera, turn, words):
    rig, images, scan = dev_frames[frame]
    faulty = rig.replace(_turned(rig[camera], turn))
    screen = screen_gross_errors(faulty, images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [(camera, "turned")]
    assert screen.errors[0].message == f"{camera} {words}"
    assert screen.errors[0].margin >= GROSS_T
    assert np.allclose(screen.fixed[camera].cam_from_ego, rig[camera].cam_from_ego, atol=1e-9)
    assert all(screen.fixed[n] == faulty[n] for n in rig.names if n != camera)


@pytest.mark.parametrize("frame, a, b", [
    ("real-nuscenes", "CAM_BACK", "CAM_FRONT"),  # same size
    ("real-nuscenes", "CAM_BACK_RIGHT", "CAM_FRONT_LEFT"),
    ("real_tri", "CAMERA_01", "CAMERA_07"),
    ("real_tri", "CAMERA_06", "CAMERA_09"),
])
def test_two_swapped_images_are_named_together(dev_frames, frame, a, b):
    rig, images, scan = dev_frames[frame]
    swapped = dict(images)
    swapped[a], swapped[b] = images[b], images[a]
    screen = screen_gross_errors(rig, swapped, scan)
    assert [(e.kind, e.sensor, e.others) for e in screen.errors] == [("swapped", a, (b,))]
    assert screen.errors[0].message == f"{a} and {b} images are swapped"
    assert screen.fixed is None  # the rig is right: the images are to be exchanged
    undone = swapped_images(swapped, screen)
    assert undone[a] is images[a] and undone[b] is images[b]


def test_swapped_images_of_different_sizes_are_named(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    small = {n: im[::2, ::2].copy() for n, im in images.items()}  # every image at half size ...
    small["CAM_FRONT"], small["CAM_BACK"] = images["CAM_BACK"], small["CAM_FRONT"]  # ... but one
    screen = screen_gross_errors(rig, small, scan)
    assert [(e.kind, e.sensor, e.others) for e in screen.errors] == [("swapped", "CAM_BACK", ("CAM_FRONT",))]


@pytest.mark.parametrize("frame, wrong, owner", [
    ("real-nuscenes", "CAM_FRONT", "CAM_BACK"), ("real_tri", "CAMERA_09", "CAMERA_06"),
])
def test_one_image_under_two_names_names_the_camera_it_does_not_fit(dev_frames, frame, wrong, owner):
    rig, images, scan = dev_frames[frame]
    twice = {**images, wrong: images[owner]}
    screen = screen_gross_errors(rig, twice, scan)
    assert [(e.kind, e.sensor, e.others) for e in screen.errors] == [("wrong image", wrong, (owner,))]
    assert f"it fits {owner}'s view, not {wrong}'s" in screen.errors[0].message


@pytest.mark.parametrize("frame, axis, move", [("real-nuscenes", 2, -1.9), ("real_tri", 0, 1.5), ("real_tri", 2, 1.2)])
def test_a_lidar_metres_off_is_named_and_no_camera_is_blamed(dev_frames, frame, axis, move):
    """TRI's scan 1.2 m up is placed from where the first search put it (2.06 m down: from
    there the cameras' edges are chosen again, and four of six vote for 1.31 m)."""
    rig, images, scan = dev_frames[frame]
    off = scan.points.copy()
    off[:, axis] += move
    screen = screen_gross_errors(rig, images, dataclasses.replace(scan, points=off))
    assert screen.sensors == [LIDAR_SENSOR]
    assert "no camera is blamed" in screen.errors[0].message
    assert screen.lidar_from_scan[axis, 3] == pytest.approx(-move, abs=0.15)
    assert screen.fixed is None


def _in_sensor_frame(scan, yaw_deg: float):
    """The scan as a LiDAR mounted at (0.94, 0, 1.84) m and turned ``yaw_deg`` stores it."""
    a = np.radians(yaw_deg)
    R = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    pts = np.array(scan.points)
    pts[:, :3] = (pts[:, :3] - np.array([0.94, 0.0, 1.84])) @ R
    return dataclasses.replace(scan, points=pts)


def test_a_lidar_in_its_sensor_frame_is_named_and_no_camera_is_blamed(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    screen = screen_gross_errors(rig, images, _in_sensor_frame(scan, -90.0))
    assert screen.sensors == [LIDAR_SENSOR]
    assert "turned 270 deg about the vertical" in screen.errors[0].message
    assert screen.lidar_from_scan[:3, 3] == pytest.approx([0.94, 0.0, 1.84], abs=0.15)


def test_a_tri_lidar_in_its_sensor_frame_is_named_and_no_camera_is_screened_against_it(dev_frames):
    """TRI's images lift the turned scan less than nuScenes': the move forward and up is searched
    together (from one axis it stalled at 0.25 m up), and the cameras are not screened against a
    LiDAR placed this roughly (a clean camera's image fit another's by 1.9 standard errors)."""
    rig, images, scan = dev_frames["real_tri"]
    screen = screen_gross_errors(rig, images, _in_sensor_frame(scan, 180.0))
    assert screen.sensors == [LIDAR_SENSOR] and screen.fixed is None
    assert "turned 180 deg about the vertical" in screen.errors[0].message
    assert screen.lidar_from_scan[:3, 3] == pytest.approx([0.94, 0.0, 1.84], abs=0.35)
    assert any("not screened against a LiDAR the screen had to turn" in n for n in screen.notes)


@pytest.mark.parametrize("frame", ["real-nuscenes", "real_tri", "real_kitti"])
def test_structureless_images_raise_no_gross_error(dev_frames, frame):
    rig, images, scan = dev_frames[frame]
    rng = np.random.default_rng(0)
    for seed in range(2):
        noise = {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in images.items()}
        assert screen_gross_errors(rig, noise, scan).errors == [], seed
    for level in (0, 128, 255):
        flat = {n: np.full(im.shape, level, np.uint8) for n, im in images.items()}
        assert screen_gross_errors(rig, flat, scan).errors == [], level


def test_a_rig_of_one_camera_is_screened_alone(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    one = Rig([_turned(rig["CAM_FRONT"], ROLL_180)])
    screen = screen_gross_errors(one, {"CAM_FRONT": images["CAM_FRONT"]}, scan)
    assert screen.sensors == ["CAM_FRONT"]


def _moved(camera: Camera, d) -> Camera:
    """``camera`` with its optical centre moved by ``d`` (ego metres), its orientation kept."""
    M = np.eye(4)
    M[:3, 3] = -np.asarray(d, dtype=np.float64)
    return camera.replace(cam_from_ego=camera.cam_from_ego @ M)


def _zoomed(camera: Camera, s: float) -> Camera:
    K = camera.K.copy()
    K[0, 0] *= s
    K[1, 1] *= s
    return camera.replace(K=K)


@pytest.mark.parametrize("frame, camera, fault, kind, words", [
    ("real-nuscenes", "CAM_BACK_LEFT", lambda c: _moved(c, [0.0, 1.5, 0.0]), "position",
     "1.5 m further right (ego -y)"),
    ("real-nuscenes", "CAM_BACK_LEFT", lambda c: _zoomed(c, 1.1), "focal",
     "fx and fy x 0.89 (the stored ones are too long); fx and fy x 0.89 to x 0.9 fit about as well"),
    # named only since the alternatives are compared at their own best small rotation
    ("real_tri", "CAMERA_05", lambda c: _moved(c, [0.0, 2.0, 0.0]), "position", "2 m further right (ego -y)"),
    ("real_tri", "CAMERA_05", lambda c: _zoomed(c, 0.9), "focal", "fx and fy x 1.1 (the stored ones are too short)"),
    # named only since the scales between FOCAL_SCALES' steps are tried (x 1.11 and x 0.87 gave
    # 4.2 and 3.4 standard errors where x 1.1 and x 0.85 gave 2.8 and 2.5)
    ("real-nuscenes", "CAM_FRONT_RIGHT", lambda c: _zoomed(c, 0.9), "focal",
     "off by about 10%: the LiDAR's edges fit fx and fy x 1.11 (the stored ones are too short)"),
    ("real-nuscenes", "CAM_BACK_RIGHT", lambda c: _zoomed(c, 1.15), "focal",
     "off by about 15%: the LiDAR's edges fit fx and fy x 0.87 (the stored ones are too long)"),
    # named only since the second look, on the edges seen from the alternative's place: the
    # first look, on those seen from the stored place, gave 0.6 and 0.9 standard errors
    ("real_tri", "CAMERA_05", lambda c: _moved(c, [0.0, 0.0, -1.0]), "position", "1 m higher (ego +z)"),
    # named only since the pose step counts its standard errors by image cell (POSE_CELLS), which
    # let POSE_T and POSE_MIN_GAIN come down: 2.5 and 2.7 by cell, gain 0.03-0.04 (under 0.04)
    ("real_tri", "CAMERA_05", lambda c: _moved(c, [0.0, -1.0, 0.0]), "position", "1 m further left (ego +y)"),
    ("real_tri", "CAMERA_07", lambda c: _zoomed(c, 0.9), "focal", "fx and fy x 1.11 (the stored ones are too short)"),
])
def test_a_camera_off_by_a_metre_or_its_focal_length_is_named_and_fixed(dev_frames, frame, camera, fault, kind,
                                                                        words):
    rig, images, scan = dev_frames[frame]
    screen = screen_gross_errors(rig.replace(fault(rig[camera])), images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [(camera, kind)]
    assert words in screen.errors[0].message
    fixed = screen.fixed[camera]
    assert np.allclose(fixed.ego_from_cam[:3, 3], rig[camera].ego_from_cam[:3, 3], atol=0.01)
    assert np.allclose(fixed.K, rig[camera].K, rtol=0.03)  # a fix "lands" within 3 % (docs/gross_errors.md)


def test_no_position_alternative_puts_a_camera_in_the_road(dev_frames):
    """TRI CAMERA_07 stands 1.56 m above the ground its LiDAR sees: of the moves down only the
    metre keeps it MIN_HEIGHT_M up. Moved 2 m down (0.45 m under the road), it is a position
    error whatever its edges say, named without a fix (before: upside down, with a fix, and a
    hedge of "the camera 2 m lower"); two cameras in the road at once point at the LiDAR (a
    note), and only a move the edges prefer is named."""
    rig, images, scan = dev_frames["real_tri"]
    cam = rig["CAMERA_07"]
    ground = ground_height(as_lidar_scan(scan))
    assert 1.3 < cam.position[2] - ground < 1.8
    every = {w for _, w, _ in pose_module.pose_alternatives(cam)}
    kept = {w for _, w, _ in pose_module.pose_alternatives(cam, ground)}
    assert every - kept == {w for w in every if "1.5 m lower" in w or "2 m lower" in w}
    down = np.array([0.0, 0.0, -2.0])
    screen = screen_gross_errors(rig.replace(_moved(cam, down)), images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_07", "position")]
    assert "CAMERA_07 stands 0.5" in screen.errors[0].message and "m under the road the LiDAR sees" in \
        screen.errors[0].message
    assert "no fix is offered" in screen.errors[0].message and screen.fixed is None
    both = rig.replace(_moved(cam, down)).replace(_moved(rig["CAMERA_08"], down))
    screen = screen_gross_errors(both, images, scan)
    assert "CAMERA_07" not in screen.sensors  # its edges prefer no move: the road alone names it no more
    assert any("CAMERA_07, CAMERA_08 stand within 0.2 m of the road" in n and "several cameras at once" in n
               for n in screen.notes)


def test_a_camera_in_the_road_is_moved_up_where_the_edges_seen_from_above_say_so(dev_frames):
    """TRI CAMERA_09 moved 1.5 m down stands 0.06 m under the road: on the edges seen from
    there no move up wins (nor on the two looks' mean), and it was named without a fix. Its
    stored place is no place, so the edges seen from the move up are heard alone too: they
    prefer 1.5 m up, which lands."""
    rig, images, scan = dev_frames["real_tri"]
    cam = rig["CAMERA_09"]
    screen = screen_gross_errors(rig.replace(_moved(cam, [0.0, 0.0, -1.5])), images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_09", "position")]
    assert "the LiDAR's edges fit it 1.5 m higher (ego +z)" in screen.errors[0].message
    assert np.allclose(screen.fixed["CAMERA_09"].position, cam.position, atol=0.01)


def test_a_move_whose_size_the_edges_do_not_pin_says_so(dev_frames):
    """nuScenes CAM_FRONT_LEFT moved 1.5 m sideways: a move of 2 m the same way fits about as
    well (within GROSS_T), so the message names the span and asks for the fix to be checked;
    CAM_BACK_LEFT's 1.5 m move is pinned and its message carries no such remark."""
    rig, images, scan = dev_frames["real-nuscenes"]
    screen = screen_gross_errors(rig.replace(_moved(rig["CAM_FRONT_LEFT"], [0.0, 1.5, 0.0])), images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAM_FRONT_LEFT", "position")]
    assert "1.5 to 2 m fit about as well, so how far is not pinned" in screen.errors[0].message
    screen = screen_gross_errors(rig.replace(_moved(rig["CAM_BACK_LEFT"], [0.0, 1.5, 0.0])), images, scan)
    assert "not pinned" not in screen.errors[0].message


def test_the_edges_seen_from_the_stored_place_are_the_views_own(dev_frames):
    """The second look's edges (seen_from) from the stored place itself are the view's own,
    scored on the same image maps; from a metre higher most are other edges (TRI CAMERA_05)."""
    rig, images, scan = dev_frames["real_tri"]
    frames = as_lidar_frames(images, scan)
    view = frame_views(rig, frames[0])["CAMERA_05"]
    again = seen_from(view, view.camera, frames)
    assert np.array_equal(again.points, view.points) and np.array_equal(again.orient, view.orient)
    assert again.channels[0] is view.channels[0]
    up = _moved(view.camera, [0.0, 0.0, 1.0])
    higher = seen_from(view, up, frames)
    T = relative_pose(up, view.camera)  # stored_from_up
    in_stored = higher.points @ T[:3, :3].T + T[:3, 3]
    near = np.min(np.linalg.norm(in_stored[:, None, :] - view.points[None, :, :], axis=2), axis=1) < 0.05
    assert len(higher.points) >= 100 and near.mean() < 0.5


def test_a_clustered_standard_error_counts_one_value_per_cluster_as_the_plain_one():
    rng = np.random.default_rng(3)
    d = rng.normal(0.02, 0.05, 200)
    assert clustered_se(d, np.arange(200)) == pytest.approx(d.std(ddof=1) / np.sqrt(200))


def test_the_same_edges_pooled_three_times_are_no_more_evidence_in_the_pose_step():
    """Edges seen again (a drive's frames of one structure) fall into the same image cells:
    counted edge by edge their t grows by about sqrt(3); by cell it stays where it was."""
    rng = np.random.default_rng(4)
    cam = Camera("CAM", np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]]), np.eye(4), 640, 480)
    pts = np.column_stack([rng.uniform(-8, 8, 150), rng.uniform(-5, 5, 150), rng.uniform(10, 20, 150)])
    v0, va = rng.normal(0.05, 0.05, 150), rng.normal(0.07, 0.05, 150)
    one = EdgeView(cam, pts, np.zeros(150, np.int64), (np.zeros((2, 4, 4)),), False, np.zeros(150, np.int64))
    three = EdgeView(cam, np.tile(pts, (3, 1)), np.zeros(450, np.int64), (np.zeros((2, 4, 4)),) * 3, False,
                     np.repeat(np.arange(3), 150))
    naive1, naive3 = one.compare(v0, va)[0], three.compare(np.tile(v0, 3), np.tile(va, 3))[0]
    cells1 = one.compare(v0, va, pose_module.POSE_CELLS)[0]
    cells3 = three.compare(np.tile(v0, 3), np.tile(va, 3), pose_module.POSE_CELLS)[0]
    assert naive3 == pytest.approx(naive1 * np.sqrt(3), rel=1e-6)
    assert cells3 == pytest.approx(cells1, rel=1e-6) and 0 < cells1 < naive1 * 1.5


def test_a_small_turn_is_left_to_the_fine_search(dev_frames):
    """A camera turned 2 deg (a metre at 30 m) is not called moved: its position and focal
    alternatives are compared with its best small rotation."""
    for frame, cam in (("real_tri", "CAMERA_01"), ("real_tri", "CAMERA_05"), ("real-nuscenes", "CAM_FRONT_LEFT")):
        rig, images, scan = dev_frames[frame]
        turned = rig.replace(perturb_camera(rig[cam], yaw_deg=2.0))
        assert screen_gross_errors(turned, images, scan).errors == []


@pytest.mark.parametrize("camera, d", [("CAMERA_09", [0.0, -1.0, 0.0]), ("CAMERA_07", [0.0, 0.0, 1.5])])
def test_a_moved_camera_is_not_given_a_textured_image_of_another(dev_frames, camera, d):
    """TRI CAMERA_01's textured image fitted these moved cameras' misplaced edges better than
    their own images did (by 2-6 standard errors), but no better than beside their poses:
    the camera is not called "given CAMERA_01's image" (whose sharpness at a clean camera's
    own pose is what a swap shows)."""
    rig, images, scan = dev_frames["real_tri"]
    screen = screen_gross_errors(rig.replace(_moved(rig[camera], d)), images, scan)
    assert all(e.kind in ("position", "focal") and e.sensor == camera for e in screen.errors), screen.errors
    views = edge_views(rig, images, scan)
    own = views["CAMERA_05"]
    v = own.values(np.eye(4), own.camera.K, own.camera.size, own.channels, own.sideways)
    assert own.sharpness(np.eye(4), own.channels, v) >= IMAGE_SHARPNESS_T


def test_the_stored_pose_is_given_its_best_rotation_beyond_the_attraction(dev_frames):
    """nuScenes CAM_FRONT_LEFT turned 2 deg in yaw: its edges lie outside the attraction at
    every 1 deg step from the stored pose, so a walk from zero stopped short (mean lift 0.05);
    the grid start finds the turn (at least the lift of the true correction, 0.15), and so
    no position alternative (a metre sideways is 2 deg at 30 m) can beat it."""
    rig, images, scan = dev_frames["real-nuscenes"]
    cam = "CAM_FRONT_LEFT"
    turned = rig.replace(perturb_camera(rig[cam], yaw_deg=2.0))
    view = edge_views(turned, images, scan)[cam]
    truth = np.eye(4)
    truth[:3, :3] = hypothesis_matrix(np.array([0.0, 0.0, -2.0]))
    at_truth = np.nanmean(view.values(truth, view.camera.K, view.camera.size, view.channels, view.sideways))
    assert at_truth > 0.1
    assert np.nanmean(rotated_best(view, np.eye(4))) >= at_truth


def test_a_lidar_the_screen_does_not_place_names_no_camera_moved(dev_frames, monkeypatch):
    """TRI's scan 1.2 m up with the LiDAR test made to find nothing (it places this scan; the
    path of a scan it cannot place): the cameras' position alternatives would each fit it, but
    a LiDAR that is no reference names no camera, and the screen says why."""
    for module in (screen_module, lidar_placement):
        monkeypatch.setattr(module, "lidar_correction", lambda views, **_: (np.eye(4), 0))
    rig, images, scan = dev_frames["real_tri"]
    up = scan.points.copy()
    up[:, 2] += 1.2
    screen = screen_gross_errors(rig, images, dataclasses.replace(scan, points=up))
    assert screen.errors == []
    assert any("names no camera" in n or "no camera named" in n for n in screen.notes), screen.notes


def _drive(tri_drive, images=None):
    """(rig, images, scan, more_frames) of the TRI drive, its first frame screened with the others."""
    first, *rest = tri_drive
    return first.rig, first.images if images is None else images, first.scan, [(f.images, f.scan) for f in rest]


def test_a_drive_is_screened_on_its_frames_pooled(tri_drive):
    """The clean drive raises nothing on its three frames pooled; a frame without every
    camera's image is left out."""
    rig, images, scan, more = _drive(tri_drive)
    screen = screen_gross_errors(rig, images, scan, more)
    assert screen.frames == 3 and screen.errors == [] and screen.fixed is None
    partial = {n: im for n, im in more[1][0].items() if n != "CAMERA_05"}
    assert screen_gross_errors(rig, images, scan, [more[0], (partial, more[1][1])]).frames == 2


def test_a_turn_one_frame_cannot_name_is_named_from_the_drive(tri_drive):
    """TRI CAMERA_01 (the camera with fewest edges) turned 90 deg: 1.3 standard errors on t0
    alone (1.5 needed), 2.8 on the drive's three frames pooled."""
    rig, images, scan, more = _drive(tri_drive)
    turned = rig.replace(_turned(rig["CAMERA_01"], ROLL_90))
    screen = screen_gross_errors(turned, images, scan, more)
    assert [(e.sensor, e.kind, e.frames) for e in screen.errors] == [("CAMERA_01", "turned", 3)]
    assert np.allclose(screen.fixed["CAMERA_01"].cam_from_ego, rig["CAMERA_01"].cam_from_ego)


def test_a_small_roll_on_a_drive_is_not_called_a_move(tri_drive):
    """TRI CAMERA_01 (the camera with fewest edges) turned 2 deg in roll, the drive's frames
    pooled: a position 1.5 m higher fitted it by 2.99 standard errors (edge by edge) before the
    stored pose's best small rotation tried the roll line (2.3 since), and the mean of both
    looks by 2.8, under the 3.0 asked then; by image cell (POSE_CELLS) the first look gives 1.1
    and the mean 1.4, under POSE_T (2.0), and nothing is named."""
    rig, images, scan, more = _drive(tri_drive)
    rolled = rig.replace(perturb_camera(rig["CAMERA_01"], roll_deg=2.0))
    screen = screen_gross_errors(rolled, images, scan, more)
    assert screen.errors == [] and screen.pose_best["CAMERA_01"][1] < pose_module.POSE_T


def test_a_refocus_a_move_fits_as_well_is_named_with_both_readings_and_no_fix(tri_drive):
    """TRI CAMERA_09 moved 2 m forward, the drive's frames pooled: its far edges fit a longer
    focal length (x 1.09) best, and the move back fits them about as well (a move along the
    optical axis looks like a zoom): both readings are named and no fix is offered."""
    rig, images, scan, more = _drive(tri_drive)
    moved = rig.replace(perturb_camera(rig["CAMERA_09"], translation=np.array([2.0, 0.0, 0.0])))
    screen = screen_gross_errors(moved, images, scan, more)
    assert [e.sensor for e in screen.errors] == ["CAMERA_09"] and screen.fixed is None
    message = screen.errors[0].message
    assert "or a position error (the camera" in message and "no fix is offered" in message, message


def test_a_move_named_a_turn_is_not_turned_by_its_fix(dev_frames):
    """TRI CAMERA_01 moved 1 m up is named upside down (its edges fit that), but a move, free to
    turn a little, fits them about as well (``TURN_RIVAL_T``): both readings are named and no fix
    is offered (the turn's fix would turn a camera that was only moved)."""
    rig, images, scan = dev_frames["real_tri"]
    moved = rig.replace(perturb_camera(rig["CAMERA_01"], translation=np.array([0.0, 0.0, 1.0])))
    screen = screen_gross_errors(moved, images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_01", "turned")]
    message = screen.errors[0].message
    assert message.startswith(f"CAMERA_01 {UPSIDE_DOWN}, or a position error (the camera ")
    assert message.endswith(BOTH) and screen.fixed is None


def test_a_turn_another_focal_length_fits_as_well_is_named_without_a_fix(dev_frames):
    """TRI CAMERA_01 (the camera with fewest edges) turned 180 deg: the turn wins, but a shorter
    focal length free to turn a little fits its edges about as well. The camera is named, with
    both readings, and no fix is offered."""
    rig, images, scan = dev_frames["real_tri"]
    screen = screen_gross_errors(rig.replace(_turned(rig["CAMERA_01"], ROLL_180)), images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_01", "turned")]
    assert screen.errors[0].message == f"CAMERA_01 {UPSIDE_DOWN}, or a focal error (fx and fy x 0.8){BOTH}"
    assert screen.fixed is None


def test_a_camera_moved_into_the_road_is_named_moved_not_turned(dev_frames):
    """nuScenes CAM_FRONT_RIGHT moved 1.5 m down stands at the road (0.00 m above it): its
    edges fitted a turn of 180 deg, and the screen named it upside down (with a hedge); a camera
    in the road is a position error, and the move back up wins and lands."""
    rig, images, scan = dev_frames["real-nuscenes"]
    moved = rig.replace(perturb_camera(rig["CAM_FRONT_RIGHT"], translation=np.array([0.0, 0.0, -1.5])))
    screen = screen_gross_errors(moved, images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAM_FRONT_RIGHT", "position")]
    assert "the LiDAR's edges fit it 1.5 m higher (ego +z)" in screen.errors[0].message
    assert np.allclose(screen.fixed["CAM_FRONT_RIGHT"].position, rig["CAM_FRONT_RIGHT"].position, atol=0.01)


def test_a_turn_needs_less_lift_of_its_own_than_an_image():
    """TRI's images lift the scan's edges weakly: a camera turned 90 or 180 deg is named with
    ``TURN_MIN_LIFT`` at its true pose (TRI t1 CAMERA_06 turned 90 deg: 0.055), while another
    camera's image still needs ``MIN_LIFT``; the standard errors and gain are asked of both."""
    between = 0.5 * (screen_module.TURN_MIN_LIFT + MIN_LIFT)
    assert screen_module.TURN_MIN_LIFT < MIN_LIFT
    assert screen_module._roll_or_image_wins("turned", GROSS_T, between, MIN_GAIN)
    assert not screen_module._roll_or_image_wins("image", GROSS_T, between, MIN_GAIN)
    assert not screen_module._roll_or_image_wins("turned", GROSS_T, 0.9 * screen_module.TURN_MIN_LIFT, MIN_GAIN)
    assert not screen_module._roll_or_image_wins("turned", 0.9 * GROSS_T, between, MIN_GAIN)
    assert not screen_module._roll_or_image_wins("turned", GROSS_T, between, 0.9 * MIN_GAIN)


def test_a_turn_a_move_explains_as_well_names_the_camera_without_a_fix(dev_frames):
    """TRI CAMERA_07 moved 1 m down: its edges fit it upside down, but a move held at the stored
    rotation fits them at least as well, and no move wins on its own. The camera is named with
    both readings and no fix (a turn's fix would turn a camera that was never turned)."""
    rig, images, scan = dev_frames["real_tri"]
    moved = rig.replace(perturb_camera(rig["CAMERA_07"], translation=np.array([0.0, 0.0, -1.0])))
    screen = screen_gross_errors(moved, images, scan)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAMERA_07", "turned")]
    assert "or a position error" in screen.errors[0].message
    assert "no fix is offered" in screen.errors[0].message
    assert screen.fixed is None


def _lower_third(rig: Rig) -> dict[str, list]:
    """Every camera's lower third as one ignore polygon (a car's bonnet, exaggerated)."""
    return {n: [[(-0.5, rig[n].height * 2 / 3), (rig[n].width, rig[n].height * 2 / 3),
                 (rig[n].width, rig[n].height), (-0.5, rig[n].height)]] for n in rig.names}


def test_pixels_marked_ignored_hold_no_edge_under_any_pose(dev_frames):
    """An ignore polygon hides its pixels from the screen: no edge is chosen there, an edge an
    alternative pose puts there is out of view, a clean rig stays clean and an upside-down
    camera is still named."""
    rig, images, scan = dev_frames["real-nuscenes"]
    ignore = _lower_third(rig)
    masks = ignore_masks(rig, ignore)
    view = frame_views(rig, as_lidar_frames(images, scan, masks)[0])["CAM_FRONT"]
    cam = view.camera
    uv = view.points @ cam.K.T
    assert np.all(uv[:, 1] / uv[:, 2] < cam.height * 2 / 3), "an edge was chosen on ignored pixels"
    lowered = np.eye(4)
    lowered[:3, :3] = hypothesis_matrix(np.array([0.0, -8.0, 0.0]))  # the view tilted: edges move down
    v = view.values(lowered, cam.K, cam.size, view.channels, view.sideways)
    pc = view.points @ lowered[:3, :3].T
    below = (pc @ cam.K.T)[:, 1] / pc[:, 2] > cam.height * 2 / 3 + 2
    assert below.any() and np.isnan(v[below]).all()
    assert screen_gross_errors(rig, images, scan, ignore=ignore).errors == []
    turned = rig.replace(rig["CAM_FRONT"].replace(cam_from_ego=np.diag([-1.0, -1.0, 1.0, 1.0]) @
                                                  rig["CAM_FRONT"].cam_from_ego))
    screen = screen_gross_errors(turned, images, scan, ignore=ignore)
    assert [(e.sensor, e.kind) for e in screen.errors] == [("CAM_FRONT", "turned")]


def test_a_malformed_ignore_polygon_is_a_named_input_error(dev_frames):
    rig, images, scan = dev_frames["real-nuscenes"]
    with pytest.raises(InputError) as err:
        screen_gross_errors(rig, images, scan, ignore={"CAM_NOWHERE": [[(0, 0), (1, 0), (1, 1)]]})
    assert err.value.field == "ignore" and "CAM_NOWHERE" in str(err.value)
