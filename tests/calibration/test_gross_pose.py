"""Step 4 of the gross-error screen (bevviz.calibration.gross.pose): what the edges do not rule
out, and how a screen that names nothing says so."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.gross import screen_gross_errors
from bevviz.calibration.gross.pose import (
    POSE_CELLS,
    POSE_T,
    focal_alternative,
    not_ruled_out,
    not_ruled_out_words,
    pose_values,
)
from bevviz.calibration.gross.views import frame_views, relative_pose, rotated_best, walked_many
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.perturbations import perturb_camera
from bevviz.camera import Camera


def test_what_is_not_ruled_out_is_said_by_direction_with_its_sizes():
    cam = Camera("CAM", np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]]), np.eye(4), 640, 480)

    def moved(d):
        return "position", perturb_camera(cam, translation=np.asarray(d, dtype=float))

    open_ = [moved([1.0, 0, 0]), moved([2.0, 0, 0]), moved([1.5, 0, 0]), moved([0, 0, -1.0]), moved([0, -2.0, 0])]
    open_ += [focal_alternative(cam, s)[::2] for s in (0.9, 0.8, 1.1)]
    assert not_ruled_out_words(cam, open_) == ("1-2 m further forward, 2 m further right, 1 m lower, "
                                               "fx and fy x 0.8-0.9, fx and fy x 1.1")
    assert not_ruled_out_words(cam, []) == ""


@pytest.fixture(scope="module")
def tri_frame(dev_frames):
    rig, images, scan = dev_frames["real_tri"]
    return rig, images, scan, as_lidar_frames(images, scan)[0]


def test_every_alternative_within_pose_t_at_its_best_rotation_is_listed(tri_frame):
    """Checked against every alternative walked to its best rotation without stopping early: each
    that ends within ``POSE_T`` is listed; a listed one came within it somewhere on its walk
    (the walk climbs the mean lift, not t, so it may pass such a rotation by)."""
    rig, _, _, first = tri_frame
    view = frame_views(rig, first)["CAMERA_06"]
    alternatives = pose_values(view, np.eye(4))
    reference = rotated_best(view, np.eye(4))
    listed = {id(alt) for _, alt in not_ruled_out(view, alternatives, reference, np.eye(4))}
    full = walked_many(view, np.stack([relative_pose(view.camera, a[2]) for a in alternatives]),
                       np.stack([a[2].K for a in alternatives]), view.camera.size,
                       np.stack([a[3] for a in alternatives]))
    t = np.array([view.compare(reference, v, POSE_CELLS)[0] for v in full])
    assert 0 < len(listed) < len(alternatives)  # this camera's edges rule some out, not all
    assert {id(a[2]) for a, ti in zip(alternatives, t, strict=True) if ti > -POSE_T} <= listed


def test_a_screen_that_names_nothing_says_what_it_could_not_rule_out(tri_frame, dev_frames):
    """The clean TRI frame: nothing named, and each camera whose edges leave a position or focal
    error open has a note saying which; a camera named has none. The nuScenes keyframe's
    cameras rule out nearly everything."""
    rig, images, scan, _ = tri_frame
    clean = screen_gross_errors(rig, images, scan)
    assert clean.errors == [] and clean.not_ruled_out
    for n, words in clean.not_ruled_out.items():
        assert words and any(note.startswith(f"{n}: its LiDAR edges cannot rule out") and words in note
                             for note in clean.notes)
    upside_down = rig.replace(rig["CAMERA_06"].replace(cam_from_ego=np.diag([-1.0, -1.0, 1.0, 1.0])
                                                       @ rig["CAMERA_06"].cam_from_ego))
    turned = screen_gross_errors(upside_down, images, scan)
    assert "CAMERA_06" in turned.sensors and "CAMERA_06" not in turned.not_ruled_out
    nus_rig, nus_images, nus_scan = dev_frames["real-nuscenes"]
    assert len(screen_gross_errors(nus_rig, nus_images, nus_scan).not_ruled_out) <= 1
