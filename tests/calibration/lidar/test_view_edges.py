"""Edges in a camera's own view: no dataset constants (any intensity scale, any focal length, no point order)."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.edge_maps import oriented_attraction_maps
from bevviz.calibration.lidar.edges import DEPTH, REFLECTIVITY, intensity_ranks, return_ranks, view_axes, view_edges
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.camera import Camera, Rig
from bevviz.lidar import LidarScan


def _camera(f=800.0, width=1600, height=900) -> Camera:
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1]])
    ego_from_cam = np.eye(4)
    ego_from_cam[:3, :3] = np.array([[0.0, 0, 1], [-1, 0, 0], [0, -1, 0]])  # RDF camera looking along ego x
    ego_from_cam[:3, 3] = [0.0, 0.0, 1.6]
    return Camera("CAM_X", K, np.linalg.inv(ego_from_cam), width, height)


def _scan(xyz, intensity) -> LidarScan:
    pts = np.concatenate([np.asarray(xyz, np.float32), np.asarray(intensity, np.float32)[:, None]], axis=1)
    return LidarScan(pts, None, np.zeros(len(pts), np.int16), np.zeros(3))


def _ground(rng, n=6000):
    """Flat ground z = 0 from 4 to 30 m ahead, shuffled (no order), with a painted stripe."""
    r = rng.uniform(4.0, 30.0, n)
    az = rng.uniform(-0.6, 0.6, n)
    xyz = np.stack([r * np.cos(az), r * np.sin(az), np.zeros(n)], axis=1)
    paint = np.abs(xyz[:, 1] - 1.0) < 0.15
    return xyz, paint


def test_intensity_ranks_do_not_depend_on_the_scale_and_a_constant_intensity_has_none():
    x = np.random.default_rng(0).uniform(0, 1, 500)
    np.testing.assert_allclose(intensity_ranks(x), intensity_ranks(255.0 * x))
    np.testing.assert_allclose(intensity_ranks(x), intensity_ranks(np.exp(5 * x)))
    assert intensity_ranks(np.zeros(500)) is None  # an (N, 3) array stored with zeros: depth edges alone
    ranks = intensity_ranks(np.repeat(np.arange(10.0), 50))
    assert np.allclose(ranks[:50], ranks[0])  # ties share one rank


# at the scan's origin, or at a roof LiDAR the scan does not locate (a frame folder's origin
# is the ego origin): the no-returns stack up on one position either way
@pytest.mark.parametrize("sensor", [(0.0, 0.0, 0.0), (0.9, 0.0, 1.8)])
def test_no_returns_stored_at_the_sensor_leave_the_edges_and_their_ranks_as_they_are(sensor):
    """An organised cloud (a range image flattened) keeps its no-returns as points at the
    LiDAR with intensity 0: ranked with the returns, they would squeeze every real rank."""
    rng = np.random.default_rng(3)
    xyz, paint = _ground(rng)
    intensity = np.where(paint, 0.9, 0.1) + rng.uniform(0.0, 0.01, len(xyz))
    plain = _scan(xyz, intensity)
    k = len(xyz) // 2
    holes = _scan(np.concatenate([xyz, np.tile(sensor, (k, 1))]), np.concatenate([intensity, np.zeros(k)]))
    ranks = return_ranks(holes)
    assert np.all(np.isnan(ranks[len(xyz):]))
    np.testing.assert_allclose(ranks[: len(xyz)], intensity_ranks(plain.intensity))
    a, b = view_edges(plain, _camera()), view_edges(holes, _camera())
    assert a.n_reflectivity >= 10
    np.testing.assert_array_equal(a.kind, b.kind)
    np.testing.assert_allclose(a.points, b.points)
    squeezed = view_edges(holes, _camera(), None, intensity_ranks(holes.intensity))  # ranked with the holes
    assert squeezed.n_reflectivity < a.n_reflectivity


def test_the_ground_makes_no_depth_edges_however_steeply_its_depth_changes():
    rng = np.random.default_rng(1)
    xyz, paint = _ground(rng)
    # intensity falls smoothly with range (a uniform surface: neighbours have near ranks)
    edges = view_edges(_scan(xyz, np.where(paint, 0.9, 0.1) - 0.001 * np.linalg.norm(xyz, axis=1)), _camera())
    # Points scattered at random (not along scan lines) link across rows too: a handful of
    # links in 6000 points straddle a row step the one-sided continuation does not model.
    assert edges.n_depth <= 0.005 * len(xyz)
    assert edges.n_reflectivity >= 10  # the stripe's two borders (10 with the points in one order)
    lateral = edges.points[edges.kind == REFLECTIVITY, 1]
    assert (np.abs(np.abs(lateral - 1.0) - 0.15) < 0.2).mean() > 0.9


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_a_pole_makes_silhouettes_between_its_points_and_the_wall_at_any_focal_length(scale):
    rng = np.random.default_rng(2)
    n = 8000
    y, z = rng.uniform(-4, 4, n), rng.uniform(0.2, 3.0, n)
    x = np.where(np.abs(y) < 0.15, 8.0, 16.0)  # a 30 cm pole at 8 m before a wall at 16 m
    cam = _camera(800.0 * scale, round(1600 * scale), round(900 * scale))
    edges = view_edges(_scan(np.stack([x, y, z], 1), np.full(n, 0.5)), cam)
    depth = edges.points[edges.kind == DEPTH]
    assert len(depth) > 20 and edges.n_reflectivity == 0
    assert np.allclose(depth[:, 0], 8.0, atol=0.05)  # at the pole's depth
    assert np.mean(np.abs(np.abs(depth[:, 1]) - 0.15) < 0.1) > 0.8  # on its silhouettes, between the returns
    assert set(np.unique(edges.orient)) <= {0, 1}


def test_points_under_an_ignore_polygon_are_not_evidence():
    rng = np.random.default_rng(1)
    xyz, paint = _ground(rng)
    cam = _camera()
    scan = _scan(xyz, np.where(paint, 0.9, 0.1))
    masks = ignore_masks(Rig([cam]), {"CAM_X": [[[0, 450], [1599, 450], [1599, 899], [0, 899]]]})
    assert masks["CAM_X"].shape == (900, 1600) and masks["CAM_X"][800, 10] and not masks["CAM_X"][100, 10]
    assert len(view_edges(scan, cam, masks["CAM_X"])) == 0  # the whole ground lies below the horizon
    with pytest.raises(ValueError, match="ignore"):
        ignore_masks(Rig([cam]), {"CAM_Y": [[[0, 0], [1, 0], [0, 1]]]})
    with pytest.raises(ValueError, match="ignore"):
        ignore_masks(Rig([cam]), {"CAM_X": [[[0, 0], [1, 0]]]})


def test_oriented_maps_attract_each_edge_kind_to_its_own_gradients():
    img = np.zeros((200, 400, 3), np.uint8)
    img[:, 200:] = 200  # one vertical edge: a horizontal gradient only
    coarse, fine = oriented_attraction_maps(img, focal_px=500.0)
    assert fine.shape == (2, 200, 400)
    assert fine[0, 100, 200] > 0.99 and fine[0, 100, 260] < 0.05  # channel 0: the vertical edge
    assert fine[1, 100, 200] < fine[0, 100, 200]  # channel 1 (vertical gradients) does not hold it
    wide, _ = oriented_attraction_maps(img, focal_px=1000.0)  # the same angles at twice the focal length
    assert wide[0, 100, 230] > coarse[0, 100, 230]


def test_view_axes_follow_the_world_up_not_the_image_rows():
    cam = _camera()
    np.testing.assert_array_equal(view_axes(cam), np.eye(2))
    np.testing.assert_array_equal(view_axes(cam.rot90(2)), -np.eye(2))
    np.testing.assert_array_equal(view_axes(cam.rot90(1)), [[0, -1], [1, 0]])  # rows of the view: image columns
    np.testing.assert_array_equal(view_axes(cam.rot90(3)), [[0, 1], [-1, 0]])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_camera_mounted_on_its_side_or_upside_down_finds_the_edges_of_an_upright_one(k):
    """The LiDAR's scan lines run along the world's horizontal, whatever the image rows do: a
    camera turned on its mount (portrait images) links the same points and finds the same
    edges, each scored on the image gradients across its link (orient turns with the image)."""
    rng = np.random.default_rng(3)
    n = 8000
    y, z = rng.uniform(-4, 4, n), rng.uniform(0.2, 3.0, n)
    pole = _scan(np.stack([np.where(np.abs(y) < 0.15, 8.0, 16.0), y, z], 1), np.full(n, 0.5))  # before a wall
    ground, paint = _ground(rng)
    painted = _scan(ground, np.where(paint, 0.9, 0.1) - 0.001 * np.linalg.norm(ground, axis=1))
    cam = _camera()
    for scan in (pole, painted):
        upright, turned = view_edges(scan, cam), view_edges(scan, cam.rot90(k))
        assert len(upright) > 10
        assert (turned.n_depth, turned.n_reflectivity) == (upright.n_depth, upright.n_reflectivity)
        order_a, order_b = (np.lexsort(e.points.T[::-1]) for e in (upright, turned))
        np.testing.assert_allclose(turned.points[order_b], upright.points[order_a], atol=1e-6)
        np.testing.assert_array_equal(turned.orient[order_b], upright.orient[order_a] ^ (k % 2))
