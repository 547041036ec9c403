"""Annotation boxes of the real keyframe (sample_data/real_nuscenes) against nuscenes-devkit."""

from __future__ import annotations

import numpy as np
import pytest
from pyquaternion import Quaternion

from bevviz.io import nuscenes as nu
from bevviz.io import nuscenes_boxes as nb
from bevviz.overlays import box_corners


@pytest.fixture(scope="module")
def real(sample_data):
    root = sample_data / "real_nuscenes"
    if not (root / "v1.0-mini").is_dir():
        pytest.skip("sample_data/real_nuscenes is missing")
    nusc = nu.open_dataset(root, "v1.0-mini")
    return nusc, nusc.sample[0]["token"]


def _devkit_ego_boxes(nusc, token):
    """The devkit's boxes of the LIDAR_TOP keyframe moved to its ego frame, as
    ``NuScenes.get_sample_data`` does before it moves them to the sensor."""
    sd = nusc.get("sample_data", nusc.get("sample", token)["data"]["LIDAR_TOP"])
    pose = nusc.get("ego_pose", sd["ego_pose_token"])
    boxes = nusc.get_boxes(sd["token"])
    for b in boxes:
        b.translate(-np.array(pose["translation"]))
        b.rotate(Quaternion(pose["rotation"]).inverse)
    return boxes


def test_boxes_equal_the_devkit_boxes_in_the_keyframe_ego_frame(real):
    nusc, token = real
    ours = nb.load_boxes_from(nusc, token)
    theirs = _devkit_ego_boxes(nusc, token)
    assert len(ours) == len(theirs) == 69
    for b, d in zip(ours, theirs):
        assert b.category == d.name
        np.testing.assert_allclose(b.center, d.center, atol=1e-9)
        np.testing.assert_allclose(b.size, d.wlh, atol=1e-12)
        # the same rotation: q or -q
        assert abs(float(np.dot(b.rotation, d.orientation.elements))) == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(box_corners(b.center, b.size, b.rotation), d.corners().T, atol=1e-9)


def test_boxes_sit_where_the_lidar_sees_them(real):
    nusc, token = real
    scan = nu.load_lidar_from(nusc, token)
    ann = {a["token"]: a for a in nusc.sample_annotation}
    counted = 0
    for b, tok in zip(nb.load_boxes_from(nusc, token), nusc.get("sample", token)["anns"]):
        n_pts = ann[tok]["num_lidar_pts"]
        if n_pts < 20:
            continue
        R = Quaternion(b.rotation).rotation_matrix
        local = (scan.xyz - b.center) @ R  # points in the box frame
        inside = np.all(np.abs(local) <= np.array([b.size[1], b.size[0], b.size[2]]) / 2 + 1e-6, axis=1)
        assert inside.sum() == pytest.approx(n_pts, rel=0.2, abs=3)
        counted += 1
    assert counted >= 5


def test_box_loading_errors_name_the_sample(real):
    nusc, _ = real
    assert nu.has_lidar(nusc, nusc.sample[0]["token"])
    with pytest.raises(ValueError, match="sample_token"):
        nb.load_boxes_from(nusc, "no-such-sample")
    with pytest.raises(ValueError, match="sample_token"):
        nu.has_lidar(nusc, "no-such-sample")
