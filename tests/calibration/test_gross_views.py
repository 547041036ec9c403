"""The gross-error screen's evidence (bevviz.calibration.gross.views): many poses scored at
once score as each alone, and a side-by-side walk only ever climbs."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.gross import views as views_module
from bevviz.calibration.gross.views import frame_views, rotated_best, walked_many
from bevviz.calibration.lidar.alignment import hypothesis_matrix
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.perturbations import perturb_camera


@pytest.fixture(scope="module")
def tri_view(dev_frames):
    """The embedded TRI frame's CAMERA_05 evidence."""
    rig, images, scan = dev_frames["real_tri"]
    return frame_views(rig, as_lidar_frames(images, scan)[0])["CAMERA_05"]


def _turn(deg) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = hypothesis_matrix(np.asarray(deg, dtype=float))
    return T


def test_many_poses_at_once_score_as_each_alone(tri_view, monkeypatch):
    """Bit for bit, with one K or one per pose, and past the row length cv2.remap is fed in."""
    cam = tri_view.camera
    rng = np.random.default_rng(5)
    poses = np.stack([_turn(rng.uniform(-3, 3, 3)) for _ in range(7)])
    poses[:, :3, 3] = rng.normal(0, 0.5, (7, 3))
    Ks = np.stack([perturb_camera(cam, fx_scale=s, fy_scale=s).K for s in np.linspace(0.8, 1.2, 7)])
    one = np.stack([tri_view.values(T, K, cam.size, tri_view.channels, tri_view.sideways) for T, K in zip(poses, Ks)])
    assert np.array_equal(tri_view.values_many(poses, Ks, cam.size, tri_view.channels, tri_view.sideways), one,
                          equal_nan=True)
    monkeypatch.setattr(views_module, "_REMAP_ROW", 100)  # several rows, the last one padded
    assert np.array_equal(tri_view.values_many(poses, Ks, cam.size, tri_view.channels, tri_view.sideways), one,
                          equal_nan=True)
    assert np.array_equal(tri_view.values_many(poses, cam.K, cam.size, tri_view.channels, tri_view.sideways)[2],
                          tri_view.values(poses[2], cam.K, cam.size, tri_view.channels, tri_view.sideways),
                          equal_nan=True)


def test_a_side_by_side_walk_climbs_and_stops_where_told(tri_view):
    """Each pose ends at a mean lift at least its start's; turned 1 deg off the stored pose on
    any axis, each walks to where the stored pose walks (the walk of rotated_best, without its
    grid); a pose told to stop where it starts stays."""
    cam = tri_view.camera
    pres = np.stack([_turn([0.0, -1.0, 0.0]), _turn([1.0, 0.0, 0.0]), _turn([0.0, 0.0, -1.0]), np.eye(4)])
    Ks = np.stack([cam.K] * 4)
    start = tri_view.values_many(pres, Ks, cam.size, tri_view.channels, tri_view.sideways)
    walked = walked_many(tri_view, pres, Ks, cam.size, start)
    means = np.nanmean(walked, axis=1)
    assert np.all(means >= np.nanmean(start, axis=1))
    assert np.nanmean(start[:3], axis=1).max() < np.nanmean(start[3]) < means.min()
    assert means[:3] == pytest.approx(np.full(3, np.nanmean(rotated_best(tri_view, np.eye(4), grid=False))), abs=0.005)
    assert np.array_equal(walked_many(tri_view, pres, Ks, cam.size, start, stop=lambda v: True), start,
                          equal_nan=True)
