"""Frames of evidence moved rigidly: a LiDAR moved as a whole keeps its scan lines and its ring
edges, and its origin moves with its points."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration.lidar.edges import lidar_edges
from bevviz.calibration.lidar.frames import as_lidar_frames, moved_frame, moved_scan
from bevviz.rotations import rpy_to_matrix


def _motion(yaw_deg: float, t: tuple[float, float, float]) -> np.ndarray:
    M = np.eye(4)
    M[:3, :3] = rpy_to_matrix(0.0, 0.0, np.radians(yaw_deg))
    M[:3, 3] = t
    return M


def test_a_moved_scan_takes_its_origin_along(real_sample):
    scan = real_sample[2]
    M = _motion(180.0, (0.5, -1.0, 1.9))
    moved = moved_scan(scan, M)
    assert np.allclose(moved.origin, M[:3, :3] @ scan.origin + M[:3, 3])
    assert np.allclose(moved.xyz, scan.xyz.astype(np.float64) @ M[:3, :3].T + M[:3, 3], atol=1e-4)
    assert np.array_equal(moved.intensity, scan.intensity) and np.array_equal(moved.ring, scan.ring)
    assert np.allclose(np.linalg.norm(moved.xyz - moved.origin, axis=1),
                       np.linalg.norm(scan.xyz - scan.origin, axis=1), atol=1e-3)  # ranges kept


@pytest.mark.parametrize("yaw, t", [(0.0, (0.0, 0.0, -1.9)), (90.0, (0.94, 0.0, 1.84)), (180.0, (1.5, 0.3, 0.0))])
def test_a_moved_frame_carries_the_ring_edges_found_on_the_moved_scan(real_sample, yaw, t):
    """The nuScenes keyframe (a ring index): the ring edges moved with the frame are the ones
    found afresh on the moved scan, point for point, so the screen need not find them again."""
    rig, images, scan = real_sample
    frame = as_lidar_frames(images, scan)[0]
    assert frame.ring_edges is not None and len(frame.ring_edges) > 1000
    M = _motion(yaw, t)
    moved = moved_frame(frame, M)
    again = lidar_edges(moved.scan, moved.scan.ring)
    assert np.array_equal(moved.ring_edges.kind, again.kind)
    assert np.allclose(moved.ring_edges.points, again.points, atol=1e-3)
    assert moved.ranks is frame.ranks and moved.images is frame.images
    assert np.allclose(moved.scan.origin, M[:3, :3] @ scan.origin + M[:3, 3])


def test_a_frame_without_rings_moves_without_them(real_sample):
    rig, images, scan = real_sample
    frame = dataclasses.replace(as_lidar_frames(images, scan)[0], ring_edges=None)
    assert moved_frame(frame, _motion(90.0, (0.0, 0.0, 1.0))).ring_edges is None
