"""bevviz.lidar: the LidarScan container, its motion to camera exposure, and as_lidar_scan's named errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bevviz import lidar
from bevviz.camera import Camera
from bevviz.lidar import LidarScan, as_lidar_scan


def _motion(dx: float, yaw_deg: float = 0.0) -> np.ndarray:
    c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    T[0, 3] = dx
    return T


def _scan(n: int = 5, **kw) -> LidarScan:
    rng = np.random.default_rng(0)
    args = dict(points=rng.normal(size=(n, 4)).astype(np.float32), ring=np.arange(n, dtype=np.int16),
                sweep=np.zeros(n, np.int16), origin=np.array([0.9, 0.0, 1.8]), timestamp_us=1_532_402_927_647_951,
                exposure_from_keyframe={"CAM_FRONT": _motion(-0.33)})
    args.update(kw)
    return LidarScan(**args)


# --- the container --------------------------------------------------------------------------

def test_scan_holds_documented_dtypes_read_only():
    scan = _scan(points=np.ones((3, 4)), ring=np.array([0.0, 1.0, 31.0]), sweep=np.array([0, 1, 1]))
    assert scan.points.dtype == np.float32 and scan.points.shape == (3, 4)
    assert scan.ring.dtype == np.int16 and scan.sweep.dtype == np.int16
    assert scan.origin.dtype == np.float64 and scan.origin.shape == (3,)
    assert isinstance(scan.timestamp_us, int) and len(scan) == 3
    for a in (scan.points, scan.ring, scan.sweep, scan.origin, scan.exposure_from_keyframe["CAM_FRONT"]):
        with pytest.raises(ValueError):
            a.flat[0] = 7
    with pytest.raises(TypeError):
        scan.exposure_from_keyframe["CAM_BACK"] = np.eye(4)


def test_points_at_applies_ego_motion_and_defaults_to_identity():
    pts = np.array([[10.0, 2.0, 0.0, 5.0], [0.0, -3.0, 1.0, 0.0]], np.float32)
    T = _motion(-0.4, yaw_deg=90.0)
    scan = _scan(points=pts, ring=None, sweep=np.zeros(2, np.int16), exposure_from_keyframe={"CAM_FRONT_LEFT": T})
    moved = scan.points_at("CAM_FRONT_LEFT")
    assert moved.dtype == np.float64 and moved.shape == (2, 3)
    # yaw 90 deg: (x, y) -> (-y, x), then x - 0.4
    np.testing.assert_allclose(moved, [[-2.4, 10.0, 0.0], [2.6, 0.0, 1.0]], atol=1e-12)
    np.testing.assert_array_equal(scan.points_at("CAM_BACK"), pts[:, :3].astype(np.float64))
    # A bevviz Camera is accepted through its name.
    cam = Camera("CAM_FRONT_LEFT", np.array([[1000.0, 0, 800], [0, 1000, 450], [0, 0, 1]]),
                 np.array([[0.0, -1, 0, 0], [0, 0, -1, 1.5], [1, 0, 0, -1.7], [0, 0, 0, 1]]), 1600, 900)
    np.testing.assert_array_equal(scan.points_at(cam), moved)
    np.testing.assert_array_equal(scan.exposure(cam), T)
    with pytest.raises(ValueError, match=r"field 'camera'.*got 3"):
        scan.points_at(3)


def test_empty_scan_is_allowed():
    scan = _scan(n=0)
    assert len(scan) == 0 and scan.points_at("CAM_FRONT").shape == (0, 3)


@pytest.mark.parametrize("kw, pattern", [
    (dict(points=np.ones((3, 3))), r"field 'points': expected shape \(None, 4\), got shape \(3, 3\)"),
    (dict(points=np.full((5, 4), np.nan)), r"field 'points': must be finite: 5 of 5 points.*row 0.*nan"),
    (dict(points=np.full((5, 4), 1e39)), r"field 'points': must be finite.*row 0"),
    (dict(points=np.array([[object()] * 4] * 5)), r"field 'points'.*dtype object"),
    (dict(ring=np.arange(5) + 0.5), r"field 'ring': must be whole numbers \(got \[0\.5"),
    (dict(ring=np.arange(4)), r"field 'ring': expected shape \(5,\), got shape \(4,\)"),
    (dict(sweep=np.array([0, 0, -1, 0, 0])), r"field 'sweep': values must lie in \[0, 32767\].*-1"),
    (dict(sweep=np.array([0, 0, 40000, 0, 0])), r"field 'sweep'.*40000"),
    (dict(origin=np.zeros(2)), r"field 'origin': expected shape \(3,\), got shape \(2,\)"),
    (dict(origin=np.array([0.0, np.inf, 0.0])), r"field 'origin': must be finite.*inf"),
    (dict(timestamp_us=-1), r"field 'timestamp_us'.*got -1"),
    (dict(timestamp_us=1.5), r"field 'timestamp_us'.*got 1\.5"),
    (dict(exposure_from_keyframe={"CAM_FRONT": np.eye(3)}),
     r"field 'exposure_from_keyframe\[CAM_FRONT\]': expected shape \(4, 4\), got shape \(3, 3\)"),
    (dict(exposure_from_keyframe={"CAM_FRONT": 2 * np.eye(4)}),
     r"field 'exposure_from_keyframe\[CAM_FRONT\]': last row must be"),
    (dict(exposure_from_keyframe={"CAM_FRONT": np.diag([2.0, 1, 1, 1])}),
     r"exposure_from_keyframe\[CAM_FRONT\]'.*not a proper rotation"),
    (dict(exposure_from_keyframe={"": np.eye(4)}), r"field 'exposure_from_keyframe': keys must be camera names"),
    (dict(exposure_from_keyframe=[np.eye(4)]), r"field 'exposure_from_keyframe': must be a mapping.*list"),
])
def test_scan_fields_are_checked_by_name(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        _scan(**kw)


# --- as_lidar_scan --------------------------------------------------------------------------

def test_as_lidar_scan_returns_a_scan_unchanged():
    scan = _scan()
    assert as_lidar_scan(scan) is scan


@pytest.mark.parametrize("make", [
    lambda a: a,
    lambda a: a.astype(np.float32),
    lambda a: torch.from_numpy(a),
    lambda a: torch.from_numpy(a).to(torch.float32),
])
def test_as_lidar_scan_takes_ego_arrays_and_tensors(make):
    xyz = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    scan = as_lidar_scan(make(xyz))
    np.testing.assert_allclose(scan.points, [[1, 2, 3, 0], [4, 5, 6, 0]])
    assert scan.ring is None and scan.sweep.tolist() == [0, 0] and scan.origin.tolist() == [0, 0, 0]
    assert dict(scan.exposure_from_keyframe) == {} and scan.timestamp_us == 0
    np.testing.assert_array_equal(scan.points_at("CAM_FRONT"), scan.xyz)
    xyzi = as_lidar_scan(make(np.c_[xyz, [7.0, 8.0]]), origin=[0.9, 0.0, 1.8], timestamp_us=5)
    assert xyzi.intensity.tolist() == [7.0, 8.0] and xyzi.origin.tolist() == [0.9, 0.0, 1.8]
    assert xyzi.timestamp_us == 5
    ints = as_lidar_scan(np.array([[1, 2, 3]]))
    assert ints.points.dtype == np.float32


def test_as_lidar_scan_allows_zero_points():
    scan = as_lidar_scan(np.zeros((0, 3)))
    assert scan.points.shape == (0, 4) and len(scan) == 0


@pytest.mark.parametrize("value, pattern", [
    ([[1.0, 2.0, 3.0]], r"field 'up\.npy': must be a LidarScan or an \(N, 3\) / \(N, 4\) array.*got 'list'"),
    ("points", r"field 'up\.npy': must be a LidarScan.*got 'str'"),
    (np.ones(3), r"field 'up\.npy': expected shape \(N, 3\).*got 'shape \(3,\)'"),
    (np.ones((4, 5)), r"field 'up\.npy': expected shape \(N, 3\).*got 'shape \(4, 5\)'"),
    (np.ones((2, 3, 3)), r"field 'up\.npy'.*got 'shape \(2, 3, 3\)'"),
    (torch.ones(4, 2), r"field 'up\.npy'.*got 'shape \(4, 2\)'"),
    (np.array([[1.0, np.nan, 0.0]]), r"field 'up\.npy': must be finite: 1 of 1 points.*row 0.*nan"),
    (np.array([[0.0, 0.0, 0.0], [np.inf, 0.0, 0.0]]), r"field 'up\.npy'.*row 1.*inf"),
    (np.array([[1e300, 0.0, 0.0]]), r"field 'up\.npy': must be finite.*row 0"),
    (np.array([[None, 1, 2]], dtype=object), r"field 'up\.npy'.*dtype object"),
    (np.array([["a", "b", "c"]]), r"field 'up\.npy'.*dtype <U1"),
    (np.ones((2, 3), bool), r"field 'up\.npy'.*dtype bool"),
    (np.ones((2, 3), complex), r"field 'up\.npy'.*dtype complex128"),
])
def test_as_lidar_scan_names_the_field_and_the_value(value, pattern):
    with pytest.raises(ValueError, match=pattern):
        as_lidar_scan(value, field="up.npy")


def test_as_lidar_scan_refuses_more_than_max_points(monkeypatch):
    monkeypatch.setattr(lidar, "MAX_LIDAR_POINTS", 10)
    as_lidar_scan(np.zeros((10, 3)))
    with pytest.raises(ValueError, match=r"field 'lidar': more than MAX_LIDAR_POINTS = 10 \(got '11 points'\)"):
        as_lidar_scan(np.zeros((11, 3)))


def test_as_lidar_scan_names_a_bad_origin():
    with pytest.raises(ValueError, match=r"lidar: field 'origin': expected shape \(3,\), got shape \(2,\)"):
        as_lidar_scan(np.zeros((1, 3)), origin=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"field 'origin': must be three numbers"):
        as_lidar_scan(np.zeros((1, 3)), origin=["a", None, 1])


def test_max_points_constant_is_documented():
    assert lidar.MAX_LIDAR_POINTS == 5_000_000
    assert "MAX_LIDAR_POINTS" in (as_lidar_scan.__doc__ or "")


def _ground_scan(ground_z: float, n_ground: int, n_clutter: int, origin=(0.0, 0.0, 0.0)) -> LidarScan:
    """Ground returns at ``ground_z`` (2 cm noise) 3-25 m around ``origin`` and clutter 0-3 m above it."""
    rng = np.random.default_rng(0)
    r, a = rng.uniform(3.5, 24.0, n_ground + n_clutter), rng.uniform(-np.pi, np.pi, n_ground + n_clutter)
    xyz = np.stack([origin[0] + r * np.cos(a), origin[1] + r * np.sin(a), np.full(len(r), ground_z)], axis=1)
    xyz[:n_ground, 2] += rng.normal(0.0, 0.02, n_ground)
    xyz[n_ground:, 2] += rng.uniform(0.3, 3.0, n_clutter)
    pts = np.concatenate([xyz, np.zeros((len(xyz), 1))], axis=1).astype(np.float32)
    return LidarScan(pts, None, np.zeros(len(pts), np.int16), np.asarray(origin, dtype=np.float64))


@pytest.mark.parametrize("ground_z", [0.0, -1.73, 0.4])
def test_the_ground_is_the_densest_height_around_the_lidar(ground_z):
    # a fifth of the returns on the road, the rest on walls, cars and trees above it
    assert lidar.ground_height(_ground_scan(ground_z, 2000, 8000)) == pytest.approx(ground_z, abs=0.03)
    # measured around the scan's origin: returns near the origin but far from the LiDAR count
    far = _ground_scan(ground_z, 2000, 8000, origin=(100.0, 0.0, 2.0))
    assert lidar.ground_height(far) == pytest.approx(ground_z, abs=0.03)


def test_no_ground_height_without_a_dominant_plane_or_enough_returns():
    rng = np.random.default_rng(1)
    spread = rng.uniform([-20, -20, -5], [20, 20, 5], (5000, 3))  # no plane: heights spread evenly
    pts = np.concatenate([spread, np.zeros((5000, 1))], axis=1).astype(np.float32)
    assert lidar.ground_height(as_lidar_scan(pts)) is None
    assert lidar.ground_height(_ground_scan(-1.7, 50, 0)) is None  # 50 returns in range: too few
    assert lidar.ground_height(as_lidar_scan(np.zeros((0, 4), np.float32))) is None


def test_a_stack_of_no_returns_is_not_a_return_wherever_the_sensor_is():
    rng = np.random.default_rng(0)
    xyz = rng.uniform(-30.0, 30.0, (1000, 3))
    stack = np.tile([0.9, 0.0, 1.8], (lidar.STACK_MIN_POINTS, 1))  # a roof LiDAR's no-returns
    few = np.tile([5.0, 5.0, 0.0], (lidar.STACK_MIN_POINTS - 1, 1))  # one short of a stack
    signed = np.tile([-0.0, 7.0, 0.0], (lidar.STACK_MIN_POINTS // 2, 1))  # -0.0 and 0.0: one position
    unsigned = np.tile([0.0, 7.0, 0.0], (lidar.STACK_MIN_POINTS // 2, 1))
    pts = np.concatenate([xyz, stack, few, signed, unsigned])
    scan = as_lidar_scan(np.concatenate([pts, np.ones((len(pts), 1))], axis=1))  # origin (0, 0, 0)
    expected = np.ones(len(pts), bool)
    expected[1000:1000 + len(stack)] = False
    expected[-len(signed) - len(unsigned):] = False
    np.testing.assert_array_equal(lidar.stacked(pts), ~expected)
    near = np.linalg.norm(pts, axis=1) <= lidar.MIN_RANGE_M
    np.testing.assert_array_equal(scan.returns(), expected & ~near)
    assert not lidar.stacked(np.zeros((lidar.STACK_MIN_POINTS - 1, 3))).any()
    assert lidar.stacked(np.zeros((0, 3))).shape == (0,)
