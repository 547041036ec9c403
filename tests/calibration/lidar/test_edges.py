"""LiDAR edge points: depth silhouettes and reflectivity jumps along rings and in each view."""

from __future__ import annotations

import dataclasses
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bevviz.calibration.lidar.edges import (
    DEPTH,
    MIN_RANGE_M,
    REFLECTIVITY,
    ROW_SLOPE,
    _log_intensity,
    _next_neighbours,
    in_scan_order,
    lidar_edges,
    view_edges,
)
from bevviz.camera import Camera
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


def _ring_scan(xyz, inten, origin=(0.0, 0.0, 0.0)) -> LidarScan:
    """The test ring (ring 0) and a background ring (ring 1: a wall 30 m away, 20 deg down)
    whose 400 returns span a real scan's intensities (log-normal, median 12) in a smooth ramp
    that makes no edge of its own: the ranks the ring edges read are a real scan's."""
    n = 400
    az = np.radians(np.linspace(100.0, 260.0, n))
    e = np.radians(-20.0)
    wall = 30.0 * np.stack([np.cos(e) * np.cos(az), np.cos(e) * np.sin(az), np.full(n, np.sin(e))], axis=1)
    ramp = np.exp(np.log(12.0) + 0.9 * _probit((np.arange(n) + 0.5) / n))
    return _scan(np.concatenate([xyz, wall + np.asarray(origin)]), np.concatenate([inten, ramp]),
                 ring=np.r_[np.zeros(len(xyz)), np.ones(n)], origin=origin)


def _probit(p):
    return np.array([NormalDist().inv_cdf(float(q)) for q in p])


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
    edges = lidar_edges(_ring_scan(xyz, inten))
    assert edges.n_reflectivity == 2 and edges.n_depth == 0
    mids = 0.5 * (xyz[[29, 35]] + xyz[[30, 36]])
    np.testing.assert_allclose(np.sort(edges.points[:, 1]), np.sort(mids[:, 1]), atol=1e-5)
    assert (edges.kind == REFLECTIVITY).all()


def test_dark_noise_and_gaps_make_no_edges():
    inten = np.full(40, 2.0)
    inten[20:] = 6.0  # a factor of 3, but both sides dark against the rest of the scan (50)
    xyz, inten, _ = _ring(np.full(40, 8.0), inten)
    rest, rest_i, _ = _ring(np.full(200, 8.0), np.full(200, 50.0), elev_deg=-5.0)
    scan = _scan(np.concatenate([xyz, rest]), np.concatenate([inten, rest_i]), ring=np.r_[np.zeros(40), np.ones(200)])
    assert len(lidar_edges(scan)) == 0
    ranges = np.full(40, 10.0)
    ranges[20:] = 3.0
    xyz, inten, _ = _ring(ranges)
    xyz[20:] = xyz[20:] @ np.array([[np.cos(0.1), -np.sin(0.1), 0], [np.sin(0.1), np.cos(0.1), 0], [0, 0, 1]]).T
    # a 5.7 deg azimuth gap between the two parts: not neighbours
    assert lidar_edges(_scan(xyz, inten, ring=np.zeros(40))).n_depth == 0


@pytest.mark.parametrize("scale", [1 / 255, 1.0, 1000.0])
def test_ring_reflectivity_edges_read_any_intensity_scale_alike(scale):
    """Intensities in 0..1, 0..255, raw counts or a logarithmic unit: the same lane marking,
    the same two edges; a scan without intensity (all zeros) gives depth edges only."""
    inten = np.full(80, 5.0)
    inten[30:36] = 60.0
    xyz, inten, _ = _ring(np.full(80, 8.0), inten)
    scan = _ring_scan(xyz, inten)
    ref = lidar_edges(scan)
    assert ref.n_reflectivity == 2
    for unit in (lambda i: i * scale, lambda i: 1000.0 * np.log1p(i * scale), np.sqrt):  # any monotonic unit
        got = lidar_edges(dataclasses.replace(scan, points=np.c_[scan.xyz, unit(scan.intensity)].astype(np.float32)))
        np.testing.assert_array_equal(got.points, ref.points)
    assert lidar_edges(_scan(xyz, inten * 0.0, ring=np.zeros(80))).n_reflectivity == 0


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


def test_a_ring_stored_out_of_order_is_scanned_in_azimuth_order():
    ranges = np.full(100, 10.0)
    ranges[40:45] = 5.0
    xyz, inten, _ = _ring(ranges)
    inten[70:80] = 200.0  # a bright patch: two reflectivity edges
    stored = lidar_edges(_ring_scan(xyz, inten))
    perm = np.random.default_rng(0).permutation(100)
    shuffled = lidar_edges(_ring_scan(xyz[perm], inten[perm]))
    assert stored.n_depth == 2 and stored.n_reflectivity == 2
    order = np.lexsort(stored.points.T)
    np.testing.assert_allclose(shuffled.points[np.lexsort(shuffled.points.T)], stored.points[order], atol=1e-9)


def test_a_ring_in_firing_order_keeps_its_stored_order():
    xyz, _, _ = _ring(np.full(50, 10.0), start_deg=170.0)  # crosses the -180/180 deg seam
    np.testing.assert_array_equal(in_scan_order(xyz), np.arange(50))
    np.testing.assert_array_equal(in_scan_order(xyz[::-1]), np.arange(50))  # the other spin direction
    perm = np.random.default_rng(1).permutation(50)
    az = np.arctan2(xyz[perm][in_scan_order(xyz[perm]), 1], xyz[perm][in_scan_order(xyz[perm]), 0])
    assert np.all(np.diff(az) >= 0)


def _camera(yaw_deg=0.0) -> Camera:
    K = np.array([[800.0, 0, 799.5], [0, 800.0, 449.5], [0, 0, 1]])
    flu_to_rdf = np.array([[0.0, -1, 0], [0, 0, -1], [1, 0, 0]])
    c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
    ego_from_cam = np.eye(4)
    ego_from_cam[:3, :3] = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ flu_to_rdf.T
    return Camera("CAM_X", K, np.linalg.inv(ego_from_cam), 1600, 900)


def test_a_camera_finds_the_pole_silhouettes_in_its_own_view_without_rings():
    ranges = np.full(200, 12.0)
    ranges[90:100] = 6.0
    rows = []
    for elev in (-4.0, -2.0, 0.0, 2.0):
        xyz, _, az = _ring(ranges, elev_deg=elev, start_deg=-20.0)
        rows.append(xyz)
    xyz = np.concatenate(rows)
    shuffled = xyz[np.random.default_rng(2).permutation(len(xyz))]
    edges = view_edges(_scan(shuffled, np.full(len(shuffled), 20.0)), _camera())
    assert edges.camera == "CAM_X" and edges.n_reflectivity == 0
    assert edges.n_depth == 8  # two silhouettes on each of the four rows
    az_edges = np.sort(np.unique(np.round(np.degrees(np.arctan2(edges.points[:, 1], edges.points[:, 0])), 2)))
    np.testing.assert_allclose(az_edges, [az[90] - STEP_DEG / 2, az[99] + STEP_DEG / 2], atol=0.02)
    np.testing.assert_allclose(np.linalg.norm(edges.points, axis=1), 6.0, rtol=0.01)


def test_view_edges_do_not_depend_on_the_storage_order_even_with_coinciding_returns():
    ranges = np.full(200, 12.0)
    ranges[90:100] = 6.0
    rows, inten = [], []
    for k, elev in enumerate((-4.0, -2.0, 0.0, 2.0)):
        xyz, _, _ = _ring(ranges, elev_deg=elev, start_deg=-20.0)
        rows.append(xyz)
        i = 20.0 + np.arange(200) % 5  # a few levels, as a real scan has
        i[40 + 10 * k: 60 + 10 * k] = 90.0  # bright patches: reflectivity edges
        inten.append(i)
    xyz, inten = np.concatenate(rows), np.concatenate(inten)
    # a second sensor returns the same points with other intensities (a merged cloud)
    xyz, inten = np.concatenate([xyz, xyz[::3]]), np.concatenate([inten, inten[::3] + 1.0])
    ref = view_edges(_scan(xyz, inten), _camera())
    assert ref.n_depth > 0 and ref.n_reflectivity > 0
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(xyz))
        got = view_edges(_scan(xyz[perm], inten[perm]), _camera())
        np.testing.assert_array_equal(got.points, ref.points)
        np.testing.assert_array_equal(got.kind, ref.kind)
        np.testing.assert_array_equal(got.orient, ref.orient)


@pytest.mark.slow
def test_the_real_keyframe_has_thousands_of_edges(real_sample):
    _, _, scan = real_sample
    edges = lidar_edges(scan)
    assert edges.n_depth > 1000 and edges.n_reflectivity > 1000


@pytest.mark.slow
def test_the_keyframe_reads_as_it_is_and_in_a_logarithmic_unit_through_its_ranks(real_sample):
    """Ring edges read a linear unit rescaled (the keyframe exactly as it is, and in 0..1) and
    any other unit through its ranks on the reference: the keyframe in a logarithmic unit
    moves by a fraction of the 0.5 jump of an edge."""
    _, _, scan = real_sample
    i = scan.intensity.astype(np.float64)
    np.testing.assert_allclose(_log_intensity(i), np.log1p(i))
    np.testing.assert_allclose(_log_intensity(i / i.max()), np.log1p(i), atol=1e-9)
    moved = np.abs(_log_intensity(1000.0 * np.log1p(i)) - np.log1p(i))
    assert np.median(moved) < 0.06 and np.percentile(moved, 90) < 0.25


def _next_neighbours_brute(along, across, max_step, tol):
    """The definition, point by point: the nearest point further along (0 < d <= max_step)
    within the cone and at most one band of ``max_step`` across away."""
    band = np.floor(across / max_step)
    out = np.full(len(along), -1)
    for i in range(len(along)):
        da = along - along[i]
        ok = ((da > 0) & (da <= max_step) & (np.abs(across - across[i]) <= ROW_SLOPE * da + tol)
              & (np.abs(band - band[i]) <= 1))
        if ok.any():
            cand = np.flatnonzero(ok)
            out[i] = cand[np.argmin(da[cand])]
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 120), seed=st.integers(0, 2**31 - 1), grid=st.sampled_from([0.0, 0.5, 1.0]),
       crowd=st.booleans())
def test_the_neighbour_search_is_the_brute_force_definition(n, seed, grid, crowd):
    rng = np.random.default_rng(seed)
    along, across = rng.uniform(0, 60, n), rng.uniform(0, 30, n)
    if crowd:  # many points in a few pixels (a merged cloud) and exact duplicates
        along[: n // 2] = 30 + rng.normal(0, 0.5, n // 2)
        across[: n // 2] = 15 + rng.normal(0, 0.3, n // 2)
        along[n // 2: n // 2 + n // 8] = along[: n // 8]
        across[n // 2: n // 2 + n // 8] = across[: n // 8]
    if grid:  # quantised pixels: ties in distance
        along, across = np.round(along / grid) * grid, np.round(across / grid) * grid
    got = _next_neighbours(along, across, 4.0, 1.0)
    want = _next_neighbours_brute(along, across, 4.0, 1.0)
    assert np.array_equal(got >= 0, want >= 0)
    has = want >= 0  # the same distance (equally near candidates may differ on a pixel grid)
    assert np.array_equal(along[got[has]] - along[has], along[want[has]] - along[has])
    # and the chosen one is itself inside the cone
    assert np.all(np.abs(across[got[has]] - across[has]) <= ROW_SLOPE * (along[got[has]] - along[has]) + 1.0)
