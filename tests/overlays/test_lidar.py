"""LiDAR points over the cameras (depth buffer, exposure motion) and box wireframes."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.checks import MAX_CAMERA_LIDAR_POINTS
from bevviz.lidar import LidarScan, as_lidar_scan
from bevviz.overlays import lidar as ol
from bevviz.projection import project_points
from bevviz.rotations import make_transform, matrix_to_quaternion, rpy_to_matrix
from bevviz.synthetic import nuscenes_like_rig

RIG = nuscenes_like_rig()
FRONT = RIG["CAM_FRONT"]
IDENTITY_Q = np.array([1.0, 0.0, 0.0, 0.0])


def ahead(cam, depth: float, du: float = 0.0, dv: float = 0.0) -> np.ndarray:
    """The ego-frame point seen at the image centre (+ du, dv pixels) at ``depth``, (3,)."""
    ray = np.linalg.inv(cam.K) @ np.array([cam.width / 2 + du, cam.height / 2 + dv, 1.0])
    p = ray * depth
    T = cam.ego_from_cam
    return T[:3, :3] @ p + T[:3, 3]


def test_depth_buffer_keeps_the_nearest_depth_per_cell():
    uv = np.array([[3.0, 3.0], [4.0, 2.0], [20.0, 3.0]])
    buf = ol.depth_buffer(uv, np.array([10.0, 4.0, 7.0]), (32, 16), 8.0)
    assert buf.shape == (2, 4)
    assert buf[0, 0] == 4.0 and buf[0, 2] == 7.0
    assert np.isinf(buf[1]).all() and np.isinf(buf[0, 1]) and np.isinf(buf[0, 3])


def test_a_near_point_hides_a_far_one_in_the_same_cell():
    uv = np.array([[100.0, 100.0], [101.5, 99.0]])
    keep = ol.unoccluded(uv, np.array([5.0, 20.0]), (1600, 900), 8.0, spread=0)
    assert keep.tolist() == [True, False]
    # The same pair far apart in the image: nothing hides anything.
    apart = ol.unoccluded(np.array([[100.0, 100.0], [500.0, 400.0]]), np.array([5.0, 20.0]), (1600, 900), 8.0)
    assert apart.all()


def test_depth_within_the_tolerance_is_not_hidden():
    uv = np.array([[100.0, 100.0], [101.0, 101.0]])
    assert ol.unoccluded(uv, np.array([10.0, 10.5]), (1600, 900), 8.0).all()  # one slanted surface


def test_nothing_is_hidden_without_occluders():
    assert ol.unoccluded(np.zeros((0, 2)), np.zeros(0), (1600, 900), 8.0).shape == (0,)
    # A wall facing the camera: every point at the same depth, none hidden.
    us, vs = np.meshgrid(np.linspace(0, 1599, 80), np.linspace(0, 899, 45))
    uv = np.stack([us.ravel(), vs.ravel()], axis=1)
    assert ol.unoccluded(uv, np.full(len(uv), 12.0), (1600, 900), 8.0).all()
    empty = ol.lidar_in_cameras(RIG, as_lidar_scan(np.zeros((0, 4), np.float32)))
    assert set(empty) == set(RIG.names)
    assert all(c.drawn == 0 and c.in_view == 0 and c.hidden == 0 for c in empty.values())


def test_camera_lidar_projects_like_project_points_and_hides_what_is_behind():
    near, far = ahead(FRONT, 6.0), ahead(FRONT, 30.0, du=1.0)
    behind = FRONT.position - 5.0 * (ahead(FRONT, 1.0) - FRONT.position)  # behind the camera
    pts = np.stack([near, far, behind])
    out = ol.camera_lidar(FRONT, pts, np.array([10.0, 20.0, 30.0]))
    assert out.in_view == 2 and out.hidden == 1 and out.drawn == 1
    ref = project_points(near[None], RIG)
    np.testing.assert_allclose(out.uv[0], ref.uv[RIG.index("CAM_FRONT"), 0].numpy(), atol=1e-3)
    assert out.depth[0] == pytest.approx(6.0, rel=1e-6) and out.intensity[0] == 10.0


def test_every_camera_sees_the_scan_at_its_own_exposure():
    p = ahead(FRONT, 10.0)
    forward = make_transform(np.eye(3), np.array([-1.0, 0.0, 0.0]))  # the car drove 1 m on before the lidar
    scan = LidarScan(np.array([[*p, 5.0]], np.float32), None, np.zeros(1, np.int16), np.array([0.0, 0.0, 1.8]),
                     exposure_from_keyframe={"CAM_FRONT": np.linalg.inv(forward)})
    moved = ol.lidar_in_cameras(RIG, scan, min_range=0.0)["CAM_FRONT"]
    ref = project_points(scan.points_at("CAM_FRONT"), RIG).uv[RIG.index("CAM_FRONT"), 0].numpy()
    np.testing.assert_allclose(moved.uv[0], ref, atol=1e-3)
    assert moved.depth[0] == pytest.approx(10.0 + np.dot(FRONT.cam_from_ego[2, :3], [1.0, 0, 0]), rel=1e-5)


def test_points_near_the_lidar_are_the_car_itself():
    scan = as_lidar_scan(np.array([[*ahead(FRONT, 10.0), 1.0], [*(FRONT.position + [0.6, 0, 0]), 1.0]]),
                         origin=FRONT.position)
    assert ol.lidar_in_cameras(RIG, scan, min_range=1.5)["CAM_FRONT"].in_view == 1


def test_max_points_keeps_an_even_prefix_sample():
    us, vs = np.meshgrid(np.linspace(-200, 200, 40), np.linspace(-100, 100, 25))
    pts = np.stack([ahead(FRONT, 15.0, du, dv) for du, dv in zip(us.ravel(), vs.ravel())])
    every = ol.camera_lidar(FRONT, pts, np.zeros(len(pts)))
    some = ol.camera_lidar(FRONT, pts, np.zeros(len(pts)), max_points=100)
    assert every.drawn == 1000 and some.drawn == 100 and some.visible == 1000


def test_box_corners_follow_the_devkit_order():
    c = ol.box_corners(np.zeros(3), np.array([2.0, 4.0, 1.0]), IDENTITY_Q)  # w, l, h
    assert c.shape == (8, 3)
    np.testing.assert_allclose(c[0], [2.0, 1.0, 0.5])  # front, left, top
    np.testing.assert_allclose(c[6], [-2.0, -1.0, -0.5])  # back, right, bottom
    q = matrix_to_quaternion(rpy_to_matrix(0.0, 0.0, np.pi / 2))
    turned = ol.box_corners(np.array([5.0, 0.0, 0.0]), np.array([2.0, 4.0, 1.0]), q)
    np.testing.assert_allclose(turned[0], [4.0, 2.0, 0.5], atol=1e-12)  # its front now points left (+y)


def test_box_wireframe_corners_are_the_projected_corners():
    corners = ol.box_corners(ahead(FRONT, 12.0), np.array([1.8, 4.5, 1.6]), IDENTITY_Q)
    segs = ol.box_wireframe(FRONT, corners)
    assert segs.shape == (12, 2, 2)
    ref = project_points(corners, RIG).uv[RIG.index("CAM_FRONT")].numpy()  # (8, 2)
    edges = np.array(ol.BOX_EDGES)
    np.testing.assert_allclose(segs[:, 0], ref[edges[:, 0]], atol=1e-6)
    np.testing.assert_allclose(segs[:, 1], ref[edges[:, 1]], atol=1e-6)


def test_a_box_behind_the_camera_draws_nothing():
    back = FRONT.position - 10.0 * (ahead(FRONT, 1.0) - FRONT.position)
    corners = ol.box_corners(back, np.array([1.8, 4.5, 1.6]), IDENTITY_Q)
    assert ol.box_wireframe(FRONT, corners).shape == (0, 2, 2)


def test_edges_crossing_the_near_plane_are_cut_there():
    centre = FRONT.position + 0.5 * (ahead(FRONT, 1.0) - FRONT.position)  # half a metre ahead
    corners = ol.box_corners(centre, np.array([1.0, 4.0, 1.0]), IDENTITY_Q)
    near = 0.5
    segs = ol.box_wireframe(FRONT, corners, min_depth=near)
    T = FRONT.cam_from_ego
    pc = corners @ T[:3, :3].T + T[:3, 3]
    expected = []
    for i, j in ol.BOX_EDGES:
        a, b = pc[i], pc[j]
        if a[2] <= near and b[2] <= near:
            continue
        if a[2] > near and b[2] > near:
            ends = [a, b]
        else:
            cut = a + (near - a[2]) / (b[2] - a[2]) * (b - a)  # where the edge meets the near plane
            ends = [a if a[2] > near else cut, b if b[2] > near else cut]
        expected.append([(FRONT.K @ e)[:2] / e[2] for e in ends])
    expected = np.array(expected)
    crossing = sum((pc[i, 2] > near) != (pc[j, 2] > near) for i, j in ol.BOX_EDGES)
    assert crossing >= 2 and len(expected) < 12  # some edges cross the plane, some lie behind it
    # Edges wholly off one side of the image are left out; every edge drawn is one expected.
    assert 0 < len(segs) <= len(expected)
    for seg in segs:
        assert np.min(np.abs(expected - seg).reshape(len(expected), -1).max(axis=1)) < 1e-6


def test_boxes_in_cameras_use_each_cameras_motion():
    class Box:
        category, size, rotation = "vehicle.car", np.array([1.8, 4.5, 1.6]), IDENTITY_Q
        center = ahead(FRONT, 15.0)

    still = ol.boxes_in_cameras(RIG, [Box()])
    assert len(still["CAM_FRONT"]) == 12 and still["CAM_FRONT"].categories == ["vehicle.car"] * 12
    assert len(still["CAM_BACK"]) == 0  # in front of the car: the back camera does not see it
    shift = {"CAM_FRONT": make_transform(np.eye(3), np.array([-2.0, 0.0, 0.0]))}
    moved = ol.boxes_in_cameras(RIG, [Box()], shift)["CAM_FRONT"]
    corners = ol.box_corners(Box.center, Box.size, Box.rotation) + [-2.0, 0.0, 0.0]
    np.testing.assert_allclose(moved.segments, ol.box_wireframe(FRONT, corners), atol=1e-9)


def test_a_dense_cloud_is_thinned_to_the_named_limit_evenly_and_the_same_each_time():
    cam = nuscenes_like_rig()["CAM_FRONT"]
    rng = np.random.default_rng(1)
    n = MAX_CAMERA_LIDAR_POINTS + 70_000
    # a wall 10-30 m ahead across the whole view
    uvd = np.stack([rng.uniform(0, cam.width - 1, n), rng.uniform(0, cam.height - 1, n), rng.uniform(10, 30, n)], 1)
    rays = np.linalg.solve(cam.K, np.stack([uvd[:, 0], uvd[:, 1], np.ones(n)])).T * uvd[:, 2:3]
    pts = rays @ np.linalg.inv(cam.cam_from_ego)[:3, :3].T + np.linalg.inv(cam.cam_from_ego)[:3, 3]
    first = ol.camera_lidar(cam, pts, np.zeros(n), max_points=None)
    again = ol.camera_lidar(cam, pts, np.zeros(n), max_points=None)
    assert first.in_view == n and first.thinned == n - MAX_CAMERA_LIDAR_POINTS
    assert first.visible + first.hidden == MAX_CAMERA_LIDAR_POINTS and first.drawn == first.visible
    assert np.array_equal(first.uv, again.uv)  # deterministic
    # even: each half of the image keeps its share
    quarter = (first.uv[:, 0] < cam.width / 2).mean()
    assert abs(quarter - 0.5) < 0.02
