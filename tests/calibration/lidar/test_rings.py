"""The scan lines of a scan without a ring index: from its firing order, or from its elevations."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from bevviz.calibration.lidar.edges import lidar_edges
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.lidar.rings import elevation_rings, firing_period, scan_lines, spin_axis, with_rings
from bevviz.io.frame_folder import load_frame_folder
from bevviz.lidar import LidarScan
from bevviz.rotations import make_transform


def _spinning_scan(n_az=400, lasers=32, seed=0, tilt_deg=(0.0, 0.0), origin=(0.0, 0.0, 0.0), ground_m=None):
    """A spinning LiDAR in a room of walls 12-15 m away, stored in firing order (all lasers per
    azimuth): points (n_az * lasers, 3) in the ego frame and each one's laser. Its spin axis
    tilted ``tilt_deg`` (about x, then y), at ``origin``; with ``ground_m`` a road that far below."""
    rng = np.random.default_rng(seed)
    elev = np.radians(np.linspace(-25.0, 10.0, lasers))
    az = np.radians(np.arange(n_az) * 360.0 / n_az)
    A, E = np.meshgrid(az, elev, indexing="ij")  # (n_az, lasers): firing order
    r = 12.0 + 3.0 * np.sin(3 * A) + rng.normal(0, 0.01, A.shape)
    if ground_m is not None:
        r = np.where(E < 0, np.minimum(r, ground_m / np.maximum(np.sin(-E), 1e-9)), r)
    xyz = np.stack([r * np.cos(E) * np.cos(A), r * np.cos(E) * np.sin(A), r * np.sin(E)], -1).reshape(-1, 3)
    ax, ay = np.radians(tilt_deg)
    turn = make_transform(np.array([[1.0, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
                          @ np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1.0, 0], [-np.sin(ay), 0, np.cos(ay)]]),
                          np.asarray(origin, dtype=np.float64))
    return xyz @ turn[:3, :3].T + turn[:3, 3], np.tile(np.arange(lasers), n_az)


def _as_scan(xyz, ring=None, origin=(0.0, 0.0, 0.0)) -> LidarScan:
    pts = np.concatenate([xyz, np.full((len(xyz), 1), 20.0)], axis=1).astype(np.float32)
    return LidarScan(pts, ring, np.zeros(len(pts), dtype=np.int16), np.asarray(origin, dtype=np.float64))


def test_the_firing_period_of_a_spinning_lidar_is_found_from_the_point_order():
    xyz, ring = _spinning_scan()
    assert firing_period(xyz) == 32
    assert firing_period(xyz[np.random.default_rng(1).permutation(len(xyz))]) is None  # no order: no period
    scan = with_rings(_as_scan(xyz))
    np.testing.assert_array_equal(scan.ring, ring)
    ringed = _as_scan(xyz, ring=ring.astype(np.int16))
    assert with_rings(ringed) is ringed  # a scan with rings keeps them
    np.testing.assert_array_equal(scan_lines(_as_scan(xyz)), ring)


def test_points_stored_ring_after_ring_or_merged_have_no_firing_period():
    xyz, ring = _spinning_scan()
    by_ring = xyz[np.argsort(ring, kind="stable")]  # KITTI's order: one laser's turn after another
    assert firing_period(by_ring) is None
    other = _spinning_scan(lasers=20, seed=1)[0]
    other = other[np.random.default_rng(2).permutation(len(other))][:1500]  # a small block in no order
    assert firing_period(np.concatenate([xyz, other])) is None
    assert firing_period(np.concatenate([xyz, xyz])) == 32  # two sweeps of one sensor: one period


@pytest.mark.parametrize("tilt", [(0.0, 0.0), (1.4, -0.6), (-3.0, 2.5)])
def test_a_tilted_lidar_in_no_order_gets_its_lasers_back_from_its_elevations(tilt):
    """Shuffled, with no ring index and no firing order: the spin axis is found (within a few
    hundredths of a degree) and every point of the walls is given its own laser."""
    origin = (0.9, 0.0, 1.8)
    xyz, ring = _spinning_scan(n_az=900, tilt_deg=tilt, origin=origin)
    perm = np.random.default_rng(3).permutation(len(xyz))
    xyz, ring = xyz[perm], ring[perm]
    assert firing_period(xyz, np.array(origin)) is None
    d = xyz - origin
    axis = spin_axis(d / np.linalg.norm(d, axis=1, keepdims=True))
    ax, ay = np.radians(tilt)
    truth = np.array([np.cos(ax) * np.sin(ay), -np.sin(ax), np.cos(ax) * np.cos(ay)])
    assert np.degrees(np.arccos(min(1.0, float(axis @ truth)))) < 0.05
    got = scan_lines(_as_scan(xyz, origin=origin))
    np.testing.assert_array_equal(got, ring)  # numbered upwards, as the lasers are


def test_lasers_the_road_merges_are_left_on_no_line_and_the_rest_kept():
    """With a road 1.8 m below, the low lasers' returns lie near the LiDAR; where a laser's
    returns are all separate from its neighbours' it is kept, exactly; a point is never given
    another laser's line."""
    xyz, ring = _spinning_scan(n_az=900, ground_m=1.8, tilt_deg=(0.5, 0.3))
    xyz = xyz + np.random.default_rng(4).normal(0.0, 0.02, xyz.shape) * (np.linalg.norm(xyz, axis=1) < 6)[:, None]
    got = elevation_rings(xyz)
    assert got is not None
    on = got >= 0
    assert on.mean() > 0.5
    for laser in np.unique(got[on]):  # each line holds one laser's points only
        assert len(np.unique(ring[got == laser])) == 1


def test_points_that_show_no_lasers_get_no_lines():
    rng = np.random.default_rng(5)
    direction = rng.normal(size=(20000, 3))
    cloud = 20.0 * direction / np.linalg.norm(direction, axis=1, keepdims=True)  # elevations everywhere
    assert elevation_rings(cloud) is None
    xyz, _ = _spinning_scan(n_az=900)
    second, _ = _spinning_scan(n_az=900, origin=(0.0, 1.5, 0.4), seed=1)  # two LiDARs merged: one origin fits none
    assert elevation_rings(np.concatenate([xyz, second])) is None
    assert scan_lines(_as_scan(np.zeros((0, 3)))) is None


def test_a_frame_folder_that_locates_its_lidar_gets_its_rings_from_the_elevations(tmp_path, sample_data):
    """A frame folder's cloud is in the ego frame, its LiDAR at the ego origin unless
    ``exposure.json`` says where (``lidar_origin``): a roof LiDAR 1.8 m up, its points
    shuffled, shows its lasers about its own centre and none about the ego origin."""
    origin = (0.9, 0.0, 1.8)
    xyz, ring = _spinning_scan(n_az=900, tilt_deg=(0.6, -0.4), origin=origin)
    perm = np.random.default_rng(6).permutation(len(xyz))
    folder = tmp_path / "frame"
    shutil.copytree(sample_data / "real_kitti", folder)
    np.save(folder / "lidar_ego.npy", np.c_[xyz[perm], np.full(len(xyz), 20.0)].astype(np.float32))
    assert scan_lines(load_frame_folder(folder).scan) is None  # about the ego origin: no lasers
    (folder / "exposure.json").write_text(json.dumps({"lidar_origin": list(origin)}))
    scan = load_frame_folder(folder).scan
    np.testing.assert_array_equal(scan.origin, origin)
    np.testing.assert_array_equal(scan_lines(scan), ring[perm])


def test_lines_of_another_length_are_refused():
    xyz, ring = _spinning_scan()
    with pytest.raises(ValueError, match="lines"):
        lidar_edges(_as_scan(xyz), ring[:-1])
    with pytest.raises(ValueError, match="lines"):
        lidar_edges(_as_scan(xyz), ring.astype(np.float64))


@pytest.mark.slow
def test_the_keyframe_shuffled_is_read_along_the_lines_its_elevations_show(real_sample):
    """The nuScenes keyframe without its ring index: in its stored (firing) order the rings are
    its own; shuffled, the elevations give back its 17 upper lasers exactly (the lower 15,
    whose near returns scatter over degrees, are on no line), and their edges are those of the
    same points read along their own ring index."""
    _, images, scan = real_sample
    plain = dataclasses.replace(scan, ring=None)
    np.testing.assert_array_equal(scan_lines(plain), np.arange(len(scan)) % 32)
    perm = np.random.default_rng(0).permutation(len(scan))
    shuffled = dataclasses.replace(scan, points=scan.points[perm], ring=None, sweep=scan.sweep[perm])
    lines = scan_lines(shuffled)
    on = lines >= 0
    true = scan.ring[perm].astype(np.int64)
    assert 15 <= len(np.unique(lines[on])) <= 32 and on.mean() > 0.35
    for laser in np.unique(lines[on]):
        assert len(np.unique(true[lines == laser])) == 1
    ref = lidar_edges(shuffled, np.where(on, true, -1))  # the same points with their own rings
    got = as_lidar_frames(images, shuffled)[0].ring_edges
    np.testing.assert_array_equal(got.points, ref.points)
    np.testing.assert_array_equal(got.kind, ref.kind)
