"""bevviz.overlays.camera_geometry: horizon, frustums and the projected ground grid."""

import numpy as np
import pytest

from bevviz import overlays
from bevviz.camera import Rig
from bevviz.projection import project_points
from bevviz.synthetic import mounted_camera, nuscenes_like_rig

RIG = nuscenes_like_rig().resized(0.2)  # 320 x 180, full field of view


def test_horizon_of_a_level_camera_is_the_principal_row():
    cam = mounted_camera("LEVEL", (0.0, 0.0, 1.5), (30.0, 0.0, 0.0), 200.0, (320, 180))
    seg = overlays.horizon_line(cam)
    assert seg is not None
    np.testing.assert_allclose(seg[:, 1], [cam.K[1, 2]] * 2, atol=1e-9)
    np.testing.assert_allclose(sorted(seg[:, 0]), [-0.5, 319.5])


def test_horizon_is_where_far_ground_points_converge():
    cam = RIG["CAM_FRONT_LEFT"]
    seg = overlays.horizon_line(cam)
    # A ground point very far along the optical axis' ground direction projects onto the line.
    fwd = cam.ego_from_cam[:3, 2].copy()
    fwd[2] = 0
    far = cam.position + 1e6 * fwd / np.linalg.norm(fwd)
    far[2] = 0.0
    uv = project_points(far[None], Rig([cam])).uv[0, 0].numpy()
    d = np.cross(np.append(seg[1] - seg[0], 0), np.append(uv - seg[0], 0))[2] / np.linalg.norm(seg[1] - seg[0])
    assert abs(d) < 0.05


def test_horizon_missing_when_camera_looks_down():
    cam = mounted_camera("DOWN", (0.0, 0.0, 10.0), (0.0, 80.0, 0.0), 200.0, (320, 180))
    assert overlays.horizon_line(cam) is None


def test_frustum_corners_project_to_image_corners():
    cam = RIG["CAM_BACK"]
    fr = overlays.frustum(cam, 3.0)
    np.testing.assert_allclose(fr[0], cam.position)
    proj = project_points(fr[1:], Rig([cam]))
    np.testing.assert_allclose(proj.uv[0].numpy(), overlays.image_corners(cam), atol=1e-9)
    np.testing.assert_allclose(proj.depth[0].numpy(), 3.0, atol=1e-9)
    o, tips = overlays.camera_axes(cam, 2.0)
    np.testing.assert_allclose(np.linalg.norm(tips - o, axis=1), 2.0)
    # RDF z (forward) of the back camera points backwards in the ego frame.
    assert (tips[2] - o)[0] < -1.9
    with pytest.raises(ValueError, match="frustum depth"):
        overlays.frustum(cam, 0.0)


def test_ground_grid_lines_match_projection_and_cut_behind():
    gl = overlays.ground_grid_lines(RIG, (-20.0, 20.0), (-10.0, 10.0), step=10.0, samples=50)
    assert gl.labels == ["x = -20 m", "x = -10 m", "x = 0 m", "x = 10 m", "x = 20 m",
                         "y = -10 m", "y = 0 m", "y = 10 m"]
    assert gl.uv.shape == (6, 8, 50, 2) and gl.is_x_line.sum() == 5
    f = RIG.index("CAM_FRONT")
    # Line x = 10 m is in front of CAM_FRONT: finite; line x = -20 m is behind: all NaN.
    assert np.isfinite(gl.uv[f, 3]).all()
    assert np.isnan(gl.uv[f, 0]).all()
    assert np.isfinite(gl.label_uv[f, 3]).all() and np.isnan(gl.label_uv[f, 0]).all()
    p = np.array([[10.0, -10.0 + 20.0 * 7 / 49, 0.0]])
    np.testing.assert_allclose(gl.uv[f, 3, 7], project_points(p, RIG).uv[f, 0].numpy(), atol=1e-9)
