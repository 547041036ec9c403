"""bevviz.calibration.seams.ground_truth: the known texture resampled onto a BEV grid."""

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration import GroundTruth

GRID = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (-1.0, 0.0, 2.0), 1.0)


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
