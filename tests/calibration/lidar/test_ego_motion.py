"""Ego motion registered from two sweeps (bevviz.calibration.lidar.ego_motion)."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.ego_motion import MIN_PAIRS, estimate_motion, exposure_motions, motion_at
from bevviz.errors import InputError
from bevviz.lidar import LidarScan, as_lidar_scan, ground_height
from bevviz.rotations import make_transform, rpy_to_matrix


@pytest.fixture(scope="module")
def drive(tri_drive):
    """The committed TRI drive's three sweeps, one second apart."""
    return [f.scan for f in tri_drive]


def _moved(scan: LidarScan, b_from_a: np.ndarray, keep: np.ndarray | None = None) -> LidarScan:
    """The scan as seen after the car moved by ``inv(b_from_a)``: its points mapped by ``b_from_a``."""
    xyz = scan.xyz @ b_from_a[:3, :3].T + b_from_a[:3, 3]
    if keep is not None:
        xyz = xyz[keep]
    return _scan(xyz)


def _scan(xyz: np.ndarray) -> LidarScan:
    return as_lidar_scan(np.asarray(xyz, dtype=np.float32))


def _angle_deg(R: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1))))


@pytest.mark.parametrize("rpy_deg, t_m", [((0.0, 0.0, 0.0), (-1.3, 0.0, 0.0)),
                                           ((0.2, -0.3, 2.5), (-0.9, 0.25, 0.05)),
                                           ((0.0, 0.0, -6.0), (1.5, -0.4, 0.0))])
def test_recovers_a_known_motion_of_a_real_sweep(drive, rpy_deg, t_m):
    """A real sweep moved by a known motion, with a third of its points dropped from the copy
    (another sweep never sees the same points): the motion comes back within a centimetre
    and a twentieth of a degree."""
    truth = make_transform(rpy_to_matrix(*np.radians(rpy_deg)), np.asarray(t_m))
    keep = np.random.default_rng(0).random(len(drive[0])) > 1 / 3
    est = estimate_motion(drive[0], _moved(drive[0], truth, keep))
    err = np.linalg.inv(truth) @ est.b_from_a
    assert est.ok, est.reason
    assert np.linalg.norm(err[:3, 3]) < 0.01
    assert _angle_deg(err[:3, :3]) < 0.05


def test_consecutive_sweeps_compose(drive):
    """t0 -> t1 -> t2 registered step by step agrees with t0 -> t2 registered at once within a
    centimetre and a twentieth of a degree, and the car drove forward (1.25-1.3 m a second,
    the dataset's own LiDAR poses: 1.257 and 1.277 m)."""
    e01, e12, e02 = (estimate_motion(drive[i], drive[j]) for i, j in ((0, 1), (1, 2), (0, 2)))
    assert all(e.ok for e in (e01, e12, e02))
    for e in (e01, e12):
        assert -1.32 < e.b_from_a[0, 3] < -1.2
    err = np.linalg.inv(e02.b_from_a) @ e12.b_from_a @ e01.b_from_a
    assert np.linalg.norm(err[:3, 3]) < 0.01
    assert _angle_deg(err[:3, :3]) < 0.05


def test_a_flat_world_pins_no_forward_motion(drive):
    """The road alone (returns within 0.2 m of the ground) cannot say how far the car drove
    between two real sweeps (registered, it says 0.16-0.25 m of the 1.26-1.28 m): the
    estimate is marked degenerate instead of reporting a motion."""
    def road(scan: LidarScan) -> LidarScan:
        return _scan(scan.xyz[np.abs(scan.xyz[:, 2] - ground_height(scan)) < 0.2])

    for a, b in ((0, 1), (1, 2)):
        est = estimate_motion(road(drive[a]), road(drive[b]))
        assert not est.ok
        assert "not pinned" in est.reason


def test_too_few_points_is_a_named_input_error(drive):
    few = _scan(drive[0].xyz[:100])
    with pytest.raises(InputError) as exc:
        estimate_motion(few, drive[1])
    assert exc.value.field == "scan_a"
    assert str(MIN_PAIRS) in str(exc.value)
    with pytest.raises(InputError) as exc:
        estimate_motion(drive[0], np.zeros((5000, 3)))
    assert exc.value.field == "scan_b"


def test_motion_at_scales_under_constant_velocity():
    b_from_a = make_transform(rpy_to_matrix(0.0, 0.0, np.radians(4.0)), np.array([-2.0, 0.1, 0.0]))
    half = motion_at(b_from_a, 1.0, 0.5)
    np.testing.assert_allclose(half[:3, 3], [-1.0, 0.05, 0.0])
    assert _angle_deg(half[:3, :3]) == pytest.approx(2.0)
    np.testing.assert_allclose(motion_at(b_from_a, 1.0, 1.0), b_from_a, atol=1e-12)
    np.testing.assert_allclose(motion_at(b_from_a, 1.0, 0.0), np.eye(4), atol=1e-12)
    back = motion_at(b_from_a, 1.0, -0.1)  # an exposure before the sweep: the opposite way
    assert back[0, 3] == pytest.approx(0.2)
    with pytest.raises(InputError) as exc:
        motion_at(b_from_a, 0.0, 0.1)
    assert exc.value.field == "dt_s"
    with pytest.raises(InputError):
        motion_at(np.eye(3), 1.0, 0.1)


def test_a_scan_that_is_not_a_lidarscan_is_named(drive):
    with pytest.raises(InputError) as exc:
        estimate_motion("points.npy", drive[0])
    assert exc.value.field == "scan_a"


def test_exposure_motions_give_every_frame_the_velocity_of_its_pair(tri_drive):
    scans = [f.scan for f in tri_drive]
    times = [f.lidar_time_s for f in tri_drive]
    cams = [f.camera_times_s for f in tri_drive]
    out = exposure_motions(scans, times, cams)
    assert out.reason == "" and len(out.estimates) == 2 and all(e.ok for e in out.estimates)
    for k, motions in enumerate(out.motions):
        pair = out.estimates[min(k, 1)]
        dt = times[min(k, 1) + 1] - times[min(k, 1)]
        for cam, m in motions.items():
            np.testing.assert_allclose(m, motion_at(pair.b_from_a, dt, cams[k][cam] - times[k]))
    # a sweep earlier than the one before it, or a single sweep: no motion, and why
    assert exposure_motions(scans, times[::-1], cams).reason == "the sweeps' times do not increase"
    assert exposure_motions(scans[:1], times[:1], cams[:1]).motions == [{}]


def test_sweeps_far_apart_register_from_a_forward_start(drive):
    # A car at 24 m/s between keyframes half a second apart: 12 m a pair, beyond the 2 m the
    # registration reaches from rest; the forward starts find it, and the second pair starts
    # from the first's velocity.
    step = make_transform(np.eye(3), np.array([-12.0, 0.0, 0.0]))
    scans = [drive[0], _moved(drive[0], step), _moved(drive[0], step @ step)]
    out = exposure_motions(scans, [0.0, 0.5, 1.0], [{"CAM": -0.05}, {"CAM": 0.45}, {"CAM": 0.95}])
    assert out.reason == "", out.reason
    for e in out.estimates:
        np.testing.assert_allclose(e.b_from_a[:3, 3], [-12.0, 0.0, 0.0], atol=0.01)
    # the camera 50 ms before the sweep sees the world 1.2 m ahead of where the sweep does
    np.testing.assert_allclose(out.motions[0]["CAM"][:3, 3], [1.2, 0.0, 0.0], atol=0.01)
