"""LiDAR edge points: depth silhouettes and reflectivity jumps along rings, ring inference."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar_edges import DEPTH, MIN_RANGE_M, REFLECTIVITY, infer_rings, lidar_edges
from bevviz.lidar import LidarScan

STEP_DEG = 0.2


def _scan(xyz, intensity, ring=None, origin=(0.0, 0.0, 0.0)) -> LidarScan:
    xyz = np.asarray(xyz, dtype=np.float32)
    pts = np.concatenate([xyz, np.asarray(intensity, dtype=np.float32)[:, None]], axis=1)
    return LidarScan(pts, None if ring is None else np.asarray(ring, dtype=np.int16),
                     np.zeros(len(pts), dtype=np.int16), np.asarray(origin, dtype=np.float64))


def _ring(ranges, intensity=None, elev_deg=0.0, start_deg=-10.0):
    """One ring (one laser at ``elev_deg``) scanned in azimuth order at the given ranges (m)."""
    az = np.radians(start_deg + STEP_DEG * np.arange(len(ranges)))
    r = np.asarray(ranges, dtype=np.float64)
    e = np.radians(elev_deg)
    xyz = np.stack([r * np.cos(e) * np.cos(az), r * np.cos(e) * np.sin(az), r * np.sin(e)], axis=1)
    inten = np.full(len(r), 20.0) if intensity is None else np.asarray(intensity, dtype=np.float64)
    return xyz, inten, np.degrees(az)


def test_a_pole_in_front_of_a_wall_gives_its_two_silhouettes_and_nothing_on_flat_surfaces():
    ranges = np.full(100, 10.0)
    ranges[40:45] = 5.0  # a pole at 5 m in front of a wall at 10 m
    xyz, inten, az = _ring(ranges)
    edges = lidar_edges(_scan(xyz, inten, ring=np.zeros(100)))
    assert edges.n_depth == 2 and edges.n_reflectivity == 0
    got = np.sort(np.degrees(np.arctan2(edges.points[:, 1], edges.points[:, 0])))
    # Foreground points 40 and 44, each moved half a step towards the wall behind it.
    np.testing.assert_allclose(got, [az[40] - STEP_DEG / 2, az[44] + STEP_DEG / 2], atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(edges.points, axis=1), 5.0, atol=1e-5)
    assert (edges.kind == DEPTH).all()


def test_a_far_small_step_is_no_edge_but_a_relative_jump_is():
    ranges = np.full(60, 40.0)
    ranges[30:] = 41.0  # 1 m at 40 m: 2.5 %, below the 5 % relative threshold
    xyz, inten, _ = _ring(ranges)
    assert lidar_edges(_scan(xyz, inten, ring=np.zeros(60))).n_depth == 0
    ranges[30:] = 45.0  # 12 %
    xyz, inten, _ = _ring(ranges)
    assert lidar_edges(_scan(xyz, inten, ring=np.zeros(60))).n_depth == 1


def test_a_lane_marking_gives_two_reflectivity_edges_at_the_pair_midpoints():
    inten = np.full(80, 5.0)
    inten[30:36] = 60.0  # bright paint on flat asphalt, same range
    xyz, inten, _ = _ring(np.full(80, 8.0), inten)
    edges = lidar_edges(_scan(xyz, inten, ring=np.zeros(80)))
    assert edges.n_reflectivity == 2 and edges.n_depth == 0
    mids = 0.5 * (xyz[[29, 35]] + xyz[[30, 36]])
    np.testing.assert_allclose(np.sort(edges.points[:, 1]), np.sort(mids[:, 1]), atol=1e-5)
    assert (edges.kind == REFLECTIVITY).all()


def test_dark_noise_and_gaps_make_no_edges():
    inten = np.full(40, 2.0)
    inten[20:] = 6.0  # a factor of 3, but both sides darker than MIN_REFLECTIVITY
    xyz, inten, _ = _ring(np.full(40, 8.0), inten)
    assert len(lidar_edges(_scan(xyz, inten, ring=np.zeros(40)))) == 0
    ranges = np.full(40, 10.0)
    ranges[20:] = 3.0
    xyz, inten, _ = _ring(ranges)
    xyz[20:] = xyz[20:] @ np.array([[np.cos(0.1), -np.sin(0.1), 0], [np.sin(0.1), np.cos(0.1), 0], [0, 0, 1]]).T
    # a 5.7 deg azimuth gap between the two parts: not neighbours
    assert lidar_edges(_scan(xyz, inten, ring=np.zeros(40))).n_depth == 0


def test_points_near_the_sensor_are_dropped_and_the_origin_counts():
    ranges = np.full(50, 6.0)
    ranges[10:15] = 0.5 * MIN_RANGE_M  # the car's own roof
    xyz, inten, _ = _ring(ranges)
    assert lidar_edges(_scan(xyz, inten, ring=np.zeros(50))).n_depth == 0
    ranges = np.full(50, 10.0)
    ranges[20:25] = 5.0
    xyz, inten, _ = _ring(ranges)
    origin = np.array([1.0, -2.0, 1.8])
    moved = lidar_edges(_scan(xyz + origin, inten, ring=np.zeros(50), origin=origin))
    still = lidar_edges(_scan(xyz, inten, ring=np.zeros(50)))
    np.testing.assert_allclose(moved.points - origin, still.points, atol=1e-4)


def test_rings_are_scanned_separately():
    a, ia, _ = _ring(np.full(50, 10.0), elev_deg=-5.0)
    b, ib, _ = _ring(np.full(50, 5.0), elev_deg=-7.0)  # a second ring at another range: no jump inside either
    scan = _scan(np.concatenate([a, b]), np.concatenate([ia, ib]), ring=np.r_[np.zeros(50), np.ones(50)])
    assert len(lidar_edges(scan)) == 0


def test_infer_rings_recovers_the_lasers_of_a_spinning_lidar():
    rng = np.random.default_rng(0)
    elev = np.linspace(-30.0, 10.0, 32)
    ring = rng.integers(0, 32, 4000)
    az = rng.uniform(-np.pi, np.pi, 4000)
    r = rng.uniform(3.0, 60.0, 4000)
    e = np.radians(elev[ring] + rng.normal(0, 0.02, 4000))
    xyz = np.stack([r * np.cos(e) * np.cos(az), r * np.cos(e) * np.sin(az), r * np.sin(e)], axis=1)
    got = infer_rings(xyz, np.zeros(3))
    assert len(np.unique(got)) == 32
    # the same partition as the true rings, in elevation order
    np.testing.assert_array_equal(got, ring)


def test_a_scan_without_rings_is_scanned_by_inferred_rings():
    ranges = np.full(100, 10.0)
    ranges[40:45] = 5.0
    xyz, inten, _ = _ring(ranges, elev_deg=-5.0)
    shuffled = np.random.default_rng(1).permutation(100)
    edges = lidar_edges(_scan(xyz[shuffled], inten[shuffled]))  # no ring, no order
    assert edges.rings_inferred and edges.n_depth == 2


@pytest.mark.slow
def test_the_real_keyframe_has_thousands_of_edges(real_sample):
    _, _, scan = real_sample
    edges = lidar_edges(scan)
    assert edges.n_depth > 1000 and edges.n_reflectivity > 1000
    assert not edges.rings_inferred
