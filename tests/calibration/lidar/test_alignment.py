"""Edge alignment: the hypothesis convention, many hypotheses and searches side by side."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.alignment import EdgeAlignment, as_lidar_frames, hypothesis_matrices, hypothesis_matrix
from bevviz.calibration.perturbations import perturb_camera
from bevviz.camera import Camera
from bevviz.rotations import rpy_to_matrix


def _camera() -> Camera:
    K = np.array([[1000.0, 0, 799.5], [0, 1000.0, 449.5], [0, 0, 1]])
    ego_from_cam = np.eye(4)
    ego_from_cam[:3, :3] = rpy_to_matrix(0.0, 0.0, 0.3) @ np.array([[0.0, 0, 1], [-1, 0, 0], [0, -1, 0]])
    ego_from_cam[:3, 3] = [1.5, 0.2, 1.6]
    return Camera("CAM_X", K, np.linalg.inv(ego_from_cam), 1600, 900)


@pytest.mark.parametrize("d", [(1.0, 0.0, 0.0), (0.0, -2.0, 0.0), (0.0, 0.0, 1.5), (0.7, -0.4, 1.1)])
def test_a_hypothesis_is_the_perturbation_of_the_same_name(d):
    """Points seen by perturb_camera(cam, *d) == stored-camera points turned by hypothesis_matrix(d)."""
    cam = _camera()
    p = np.random.default_rng(0).uniform(-20, 20, (50, 3))
    turned = perturb_camera(cam, *d)
    via_rig = p @ turned.cam_from_ego[:3, :3].T + turned.cam_from_ego[:3, 3]
    stored = p @ cam.cam_from_ego[:3, :3].T + cam.cam_from_ego[:3, 3]
    np.testing.assert_allclose(stored @ hypothesis_matrix(np.array(d)).T, via_rig, atol=1e-9)


def test_many_hypotheses_at_once_are_each_one_alone():
    ds = np.random.default_rng(1).uniform(-3, 3, (7, 3))
    many = hypothesis_matrices(ds)
    assert many.shape == (7, 3, 3)
    for d, m in zip(ds, many):
        np.testing.assert_array_equal(m, hypothesis_matrix(d))


def test_searches_side_by_side_end_where_each_ends_alone(real_sample):
    """refine_many is R runs of refine (the same steps; scores to the last bits of a sum):
    shared weights, a row of weights per search (the bootstrap's replicates) and a
    displacement of the points (the timing fit)."""
    rig, images, scan = real_sample
    al = EdgeAlignment(rig["CAM_BACK"], as_lidar_frames(images, scan))
    rng = np.random.default_rng(0)
    starts = rng.uniform(-1.5, 1.5, (4, 3))
    rows = rng.integers(0, 3, (4, len(al))).astype(np.float64)  # bootstrap-like counts
    last = al.levels - 1
    for weights in (None, rows[0], rows):
        for shift in (None, np.array([0.0, 0.1, -0.3])):
            ds, ss = al.refine_many(starts, last, weights, step=0.1, shift_m=shift)
            for k in range(len(starts)):
                w = weights[k] if weights is not None and weights.ndim == 2 else weights
                d, s = al.refine(starts[k], last, w, step=0.1, shift_m=shift)
                np.testing.assert_array_equal(ds[k], d)
                assert ss[k] == pytest.approx(s, rel=1e-12)
    # per-row weights score each hypothesis with its own row
    one = al.scores(starts, last, rows)
    np.testing.assert_allclose(one, [al.score(d, last, w) for d, w in zip(starts, rows)], rtol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        al.scores(starts, last, rows[:2])
