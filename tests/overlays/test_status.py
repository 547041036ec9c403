"""bevviz.overlays.status: valid / behind / outside, and behind-camera ghosts."""

import numpy as np
import pytest

from bevviz import overlays
from bevviz.bev_grid import BEVGrid
from bevviz.synthetic import nuscenes_like_rig

RIG = nuscenes_like_rig().resized(0.2)  # 320 x 180, full field of view
GRID = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (-1.0, 0.0, 2.0), 1.0)


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
