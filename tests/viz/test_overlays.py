"""Geometry behind the overlays: horizon, ground grid, frustums, statuses, footprints, lab helpers."""

import numpy as np
import pytest
import torch.nn.functional as F

from bevviz import overlays
from bevviz.bev_grid import BEVGrid
from bevviz.calibration import GroundTruth
from bevviz.camera import Rig
from bevviz.projection import project_points
from bevviz.synthetic import mounted_camera, nuscenes_like_rig

RIG = nuscenes_like_rig().resized(0.2)  # 320 x 180, full field of view
GRID = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (-1.0, 0.0, 2.0), 1.0)


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


def test_status_table_and_footprints():
    proj = overlays.grid_projection(RIG, GRID)
    status = overlays.point_status(proj)
    assert status.shape == (6, 3, 40, 40)
    assert np.array_equal(status == 0, proj.valid.numpy())
    assert np.array_equal(status == 1, ~proj.in_front.numpy())
    rows = overlays.status_table(proj, RIG.names)
    for r in rows:
        assert r["valid"] + r["behind"] + r["outside"] == r["points"] == 3 * 40 * 40
        assert r["valid %"] + r["behind %"] + r["outside %"] == pytest.approx(100, abs=0.05)
    fp = overlays.footprints(proj)
    count = overlays.overlap_count(fp)
    assert fp.shape == (6, 40, 40) and count.max() >= 2
    s = overlays.overlap_summary(count)
    assert s["blind %"] + s["single %"] + s["seam %"] == pytest.approx(100)
    # The cell under the car is a blind spot; a cell 15 m ahead is seen.
    assert count[GRID.cell_of(0.2, 0.2)] == 0 and count[GRID.cell_of(15.0, 0.0)] >= 1


def test_behind_camera_uv_mirrors_through_the_centre():
    proj = overlays.grid_projection(RIG, GRID, eps=1e-5)
    naive = overlays.behind_camera_uv(proj, 1e-5)
    behind = ~proj.in_front.numpy()
    pts = GRID.points().numpy()
    c = 0
    k = np.argwhere(behind[c])[0]
    cam = RIG[c]
    p_cam = cam.cam_from_ego[:3, :3] @ pts[tuple(k)] + cam.cam_from_ego[:3, 3]
    expect = (cam.K @ p_cam)[:2] / p_cam[2]
    np.testing.assert_allclose(naive[(c, *k)], expect, rtol=1e-4)
    front = proj.in_front.numpy()
    np.testing.assert_allclose(naive[front], proj.uv.numpy()[front], rtol=1e-5)


def test_cell_report_and_compare_validity():
    rows = overlays.cell_report(RIG, GRID, *GRID.cell_of(15.0, 0.0))
    assert len(rows) == 6 * 3 and {r["status"] for r in rows} <= {"valid", "behind", "outside"}
    assert any(r["camera"] == "CAM_FRONT" and r["status"] == "valid" for r in rows)
    assert all(r["status"] == "behind" for r in rows if r["camera"] == "CAM_BACK")
    with pytest.raises(ValueError, match="BEV cell"):
        overlays.cell_center(GRID, 40, 0)
    same = overlays.compare_validity(RIG, GRID, (1e-5, "pixel"), (1e-5, "pixel"))
    assert not same.differs.any() and same.points_differ.sum() == 0
    cmp = overlays.compare_validity(RIG, GRID, (1e-5, "pixel"), (30.0, "pixel"))
    assert cmp.differs.any() and (cmp.b <= cmp.a).all()  # a larger eps only removes points
    assert cmp.seen.shape == GRID.shape and cmp.cells_differ.shape == (6,)


def test_disagreement_error_table_and_channel_view():
    a = np.zeros((3, 2, 2))
    b = a.copy()
    b[1, 0, 0] = 0.5
    c = a.copy()
    c[2, 1, 1] = -2.0
    d = overlays.disagreement({"a": a, "b": b, "c": c})
    np.testing.assert_allclose(d, [[0.5, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(overlays.disagreement({"a": a, "b": b, "c": c}, reference="b"),
                               [[0.5, 0.0], [0.0, 2.0]])
    rows = overlays.error_table({"a": a, "b": b}, "a")
    assert rows[0]["max |diff|"] == 0 and rows[1]["max |diff|"] == 0.5
    assert rows[1]["mean |diff|"] == pytest.approx(0.5 / 12)
    assert overlays.channel_view(c, "rgb").shape == (2, 2, 3)
    np.testing.assert_allclose(overlays.channel_view(c, "norm"), [[0, 0], [0, 2]])
    np.testing.assert_allclose(overlays.channel_view(c, 2), c[2])
    with pytest.raises(ValueError, match="channel"):
        overlays.channel_view(c, 3)


def test_texture_to_bev_identity_and_shift():
    tex_grid = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (0.0,), 1.0)
    tex = (np.arange(40 * 40 * 3) % 251).reshape(40, 40, 3).astype(np.uint8)
    out = GroundTruth(tex, tex_grid.x_range, tex_grid.y_range).to_bev(GRID)
    np.testing.assert_array_equal(out, tex)
    pose = np.eye(4)
    pose[0, 3] = 5.0  # ego 5 m ahead in the world: ego x = 0 reads world x = 5
    out = GroundTruth(tex, tex_grid.x_range, tex_grid.y_range, pose).to_bev(GRID)
    np.testing.assert_array_equal(out[5:], tex[:-5])
    assert (out[:5] == 0).all()  # past the texture's front edge


def test_padding_helpers():
    x = overlays.test_pattern(8, 10)
    assert x.shape == (1, 3, 8, 10) and x.min() >= 0 and x.max() <= 1
    assert (np.diff(x[0, 0].numpy(), axis=1) > 0).all()  # a ramp along each row
    g = overlays.margin_grid(4, 6, 0.5)
    assert g.shape == (1, 4, 6, 2) and g[0, 0, 0, 0] == -1.5 and g[0, -1, -1, 1] == 1.5
    u, v = overlays.margin_grid_pixels(4, 6, 0.5, 8, 10, align_corners=False)
    np.testing.assert_allclose([u[0], u[-1]], [((-0.5) * 10 - 1) / 2, (2.5 * 10 - 1) / 2])
    cases = overlays.padding_cases(x, g, F.grid_sample, F.grid_sample)
    assert len(cases) == 12 and all(c.max_error == 0 for c in cases)
    same = overlays.half_pixel_mismatch(x, F.grid_sample, False, False)
    np.testing.assert_allclose(same, x[0].numpy(), atol=1e-6)
    off = overlays.half_pixel_mismatch(x, F.grid_sample, False, True)
    assert np.abs(off - x[0].numpy()).max() > 0.05


def test_subsample_indices_is_deterministic_bounded_and_prefix_stable():
    m = np.zeros(1000, bool)
    m[::3] = True
    idx = overlays.subsample_indices(m, 50)
    assert len(idx) == 50 and m[idx].all() and len(set(idx)) == 50
    assert np.array_equal(idx, overlays.subsample_indices(m, 50))
    assert np.array_equal(overlays.subsample_indices(m, 200)[:50], idx)  # a prefix is a sample too
    assert len(overlays.subsample_indices(m, 10_000)) == m.sum()
    assert np.ptp(idx) > 800  # spread over the whole mask
