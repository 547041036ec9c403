"""bevviz.synthetic.texture: the painted markings sit where the layout says, in BEV orientation."""

from __future__ import annotations

import numpy as np

from bevviz import synthetic as syn


def test_marking_points_are_painted_in_the_texture():
    pts, colors, kinds = syn.lane_marking_points()
    assert len(pts) == len(colors) == len(kinds) > 100
    assert {"solid", "dash", "centre", "stop", "crosswalk"} <= set(kinds)
    got = syn.sample_ground(pts[:, :2])
    np.testing.assert_allclose(got, colors.astype(np.float32), atol=1e-3)


def test_texture_orientation_matches_bev_grid():
    tex, grid = syn.ground_texture()
    assert tex.shape == (grid.height, grid.width, 3) == (1200, 1200, 3) and tex.dtype == np.uint8
    assert grid.x_range == (-60.0, 60.0) and grid.y_range == (-60.0, 60.0) and grid.resolution == 0.1
    # Yellow centre line (y = 1.85, left of the ego) and the front stop line (x = 11.1, right).
    i, j = grid.cell_of(5.0, 1.85)
    assert tuple(tex[i, j]) == syn.YELLOW
    i, j = grid.cell_of(11.1, -3.0)
    assert tuple(tex[i, j]) == syn.WHITE
    # Front is up (row 0 = max x), left is left (column 0 = max y).
    assert grid.cell_of(14.0, 0.0)[0] < grid.cell_of(-18.0, 0.0)[0]
    assert grid.cell_of(0.0, 30.0)[1] < grid.cell_of(0.0, -30.0)[1]
    assert tuple(tex[grid.cell_of(0.5, 30.5)]) in (syn.CHECKER[0], syn.CHECKER[1])  # checker on the left
