"""The coarse depth buffer."""

from __future__ import annotations

import numpy as np

from bevviz.depth_buffer import visible


def test_a_near_point_hides_a_far_one_in_the_same_cell_but_not_one_cells_away():
    occ_uv = np.array([[100.0, 100.0]])
    occ_z = np.array([5.0])
    uv = np.array([[101.0, 101.0], [101.0, 101.0], [300.0, 300.0]])
    z = np.array([5.3, 20.0, 20.0])  # same surface (within 10 % + 0.2 m), behind it, elsewhere
    np.testing.assert_array_equal(visible(uv, z, occ_uv, occ_z, (1600, 900), 8.0), [True, False, True])


def test_nothing_is_hidden_without_occluders_and_occluders_off_image_or_behind_do_not_count():
    uv = np.array([[10.0, 10.0], [800.0, 450.0]])
    z = np.array([50.0, 50.0])
    assert visible(uv, z, np.zeros((0, 2)), np.zeros(0), (1600, 900), 8.0).all()
    occ = np.array([[800.0, 450.0], [10.0, 10.0]])
    assert visible(uv, z, occ, np.array([-3.0, 0.2]), (1600, 900), 8.0).all()  # behind the camera / too near
    assert visible(np.zeros((0, 2)), np.zeros(0), occ, np.array([5.0, 5.0]), (1600, 900), 8.0).shape == (0,)


def test_the_spread_closes_gaps_between_sparse_points():
    """8 px cells: an occluder 10 px away hides through the 3 x 3 cells around, not with spread 0."""
    occ_uv, occ_z = np.array([[100.0, 100.0]]), np.array([5.0])
    uv, z = np.array([[110.0, 100.0]]), np.array([30.0])
    assert not visible(uv, z, occ_uv, occ_z, (1600, 900), 8.0)[0]
    assert visible(uv, z, occ_uv, occ_z, (1600, 900), 8.0, spread=0)[0]
