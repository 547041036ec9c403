"""A correction drawn before and after, frame by frame (bevviz.calibration.lidar.overlays)."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration import as_lidar_frames, edge_overlays, perturb_camera
from bevviz.errors import InputError


def test_the_same_pose_before_and_after_draws_the_same_points(real_sample):
    rig, images, scan = real_sample
    cam = rig["CAM_FRONT"]
    (o,) = edge_overlays(cam, cam, as_lidar_frames(images, scan))
    assert o.frame == 0 and len(o.uv_before) > 300
    np.testing.assert_allclose(o.uv_after, o.uv_before)
    assert o.uv_before.shape[1] == 2
    assert (o.uv_before >= -0.5).all() and (o.uv_before[:, 0] <= cam.width - 0.5).all()


def test_a_yaw_to_the_left_moves_every_point_right_by_the_focal_length_times_the_angle(real_sample):
    # Convention: yaw positive turns the camera left (FLU), so the world moves right in its image.
    rig, images, scan = real_sample
    cam = rig["CAM_FRONT"]
    turned = perturb_camera(cam, yaw_deg=0.5)
    (o,) = edge_overlays(cam, turned, as_lidar_frames(images, scan))
    central = np.abs(o.uv_before[:, 0] - cam.K[0, 2]) < 300  # within 13 deg of the axis: du within 6 % of f*angle
    assert central.sum() > 50
    shift = o.uv_after[central] - o.uv_before[central]  # row i: one point at both poses
    expected = cam.K[0, 0] * np.tan(np.radians(0.5))  # 11 px at nuScenes' 1266 px focal length
    assert np.median(shift[:, 0]) == pytest.approx(expected, rel=0.08)
    assert abs(np.median(shift[:, 1])) < 0.1 * expected


def test_every_frame_gets_its_own_overlay(tri_drive):
    rig = tri_drive[0].rig
    frames = as_lidar_frames([f.images for f in tri_drive], [f.scan for f in tri_drive])
    cam = rig["CAMERA_01"]
    out = edge_overlays(cam, perturb_camera(cam, pitch_deg=1.0), frames)
    assert [o.frame for o in out] == [0, 1, 2]
    assert all(len(o.uv_before) > 50 and len(o.uv_after) > 50 for o in out)
    # the three frames see different scenes: different points
    assert not np.array_equal(out[0].uv_before[:50], out[1].uv_before[:50])


def test_another_camera_after_is_a_named_error(real_sample):
    rig, images, scan = real_sample
    with pytest.raises(InputError, match="'after'.*CAM_BACK"):
        edge_overlays(rig["CAM_FRONT"], rig["CAM_BACK"], as_lidar_frames(images, scan))
