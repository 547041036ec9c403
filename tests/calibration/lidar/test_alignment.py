"""Edge alignment: the hypothesis convention, many hypotheses and searches side by side."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration import diagnose
from bevviz.calibration.lidar import alignment
from bevviz.calibration.lidar.alignment import EdgeAlignment, hypothesis_matrices, hypothesis_matrix
from bevviz.calibration.lidar.evidence import lidar_evidence
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.perturbations import perturb_camera, perturb_rig
from bevviz.calibration.verdicts import INCONCLUSIVE, MISCALIBRATED, Doubt
from bevviz.camera import Camera, Rig
from bevviz.io.frame_folder import load_frame_folder
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


def test_the_widened_search_finds_a_4_deg_turn_that_the_3_deg_search_leaves_at_its_edge(sample_data, monkeypatch):
    """A real TRI camera turned 4 deg in yaw: the +-3 deg search alone stops at its edge and the
    verdict doubts it; widened uphill from there, the optimum lies inside the searched region
    and the camera (judged as a camera-LiDAR pair) is named, turned back by about 4 deg."""
    if not (sample_data / "real_tri" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri is missing")
    frame = load_frame_folder(sample_data / "real_tri")
    bad = perturb_rig(frame.rig, "CAMERA_08", yaw_deg=4.0)
    pair = Rig([bad["CAMERA_08"]])
    images = {"CAMERA_08": frame.images["CAMERA_08"]}
    with monkeypatch.context() as m:
        m.setattr(alignment, "MAX_RADIUS_DEG", alignment.SEARCH_RADIUS_DEG)  # no widening: the old search
        first_look_only = lidar_evidence(pair, images, frame.scan, second_look=False)  # and no second look
        (narrow,) = diagnose(pair, images, evidence=first_look_only)
    assert narrow.verdict == INCONCLUSIVE and narrow.doubt is Doubt.AT_SEARCH_EDGE
    (wide,) = diagnose(pair, images, lidar=frame.scan)
    assert wide.verdict == MISCALIBRATED, wide.reason
    ev = wide.lidar
    assert ev.radius_deg > alignment.SEARCH_RADIUS_DEG
    assert np.max(np.abs(ev.offset_deg)) <= ev.radius_deg - alignment.EDGE_MARGIN_DEG
    assert abs(ev.offset_deg[2] - 4.0) < 0.5 and np.max(np.abs(ev.offset_deg[:2])) < 1.0


def test_edge_points_without_maps_are_the_same_points(real_sample):
    """``maps=False`` (the gross-error screen's turned scans) gathers the very edge points,
    frames and clusters, and makes no attraction map."""
    rig, images, scan = real_sample
    frames = as_lidar_frames(images, scan)
    for name in rig.names[:2]:
        full, bare = EdgeAlignment(rig[name], frames), EdgeAlignment(rig[name], frames, maps=False)
        assert len(full) > 0
        for attr in ("points", "kind", "orient", "frame", "cluster", "parity", "side"):
            np.testing.assert_array_equal(getattr(bare, attr), getattr(full, attr))
        assert bare.maps == [] and bare.scales == [] and bare.levels == 0
