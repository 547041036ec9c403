"""bevviz.synthetic.dataset: the committed sample_data is what this code generates."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from bevviz import synthetic as syn
from bevviz.camera import NUSCENES_CAMERAS, Rig
from bevviz.conventions import Convention, RawCamera

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


def _read_rgb(path: Path) -> np.ndarray:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert bgr is not None, f"cannot read {path}"
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def test_committed_ground_texture_matches():
    tex, grid = syn.ground_texture()
    np.testing.assert_array_equal(_read_rgb(SAMPLE_DATA / "ground_texture.png"), tex)
    meta = json.loads((SAMPLE_DATA / "ground_texture.json").read_text())
    assert meta["x_range"] == list(grid.x_range) and meta["y_range"] == list(grid.y_range)
    assert meta["resolution"] == grid.resolution and meta["shape"] == [1200, 1200, 3]


def test_committed_image_matches_a_fresh_render():
    """A window of the committed CAM_BACK image equals a fresh render of that window.

    The window is rendered through the cropped camera (same rays, pixel-centre
    convention), without exposure; the full camera's exposure map is applied after.
    """
    cam = syn.nuscenes_like_rig()["CAM_BACK"]
    committed = _read_rgb(SAMPLE_DATA / "images" / "CAM_BACK.jpg")
    assert committed.shape == (900, 1600, 3)
    x0, y0, w, h = 500, 300, 480, 320  # horizon, road, a car and the rear crosswalk
    window = syn.render_camera(cam.cropped(x0, y0, w, h), exposure=False).astype(float)
    fresh = np.clip(np.rint(window * syn.exposure_map(cam)[y0:y0 + h, x0:x0 + w, None]), 0, 255)
    diff = np.abs(committed[y0:y0 + h, x0:x0 + w].astype(float) - fresh)
    print(f"CAM_BACK committed vs fresh window: mean abs diff {diff.mean():.3f}")
    assert diff.mean() < 3.0


def test_committed_rig_json_is_the_true_rig():
    data = json.loads((SAMPLE_DATA / "rig.json").read_text())
    assert data["format"] == "bevviz-rig" and data["version"] == 1
    conv = Convention(**data["convention"])
    raws = [RawCamera(c["name"], np.array(c["K"]), np.array(c["rotation"]), np.array(c["translation"]),
                      c["width"], c["height"]) for c in data["cameras"]]
    rig = Rig.from_raw(raws, conv)
    truth = syn.nuscenes_like_rig()
    assert rig.names == truth.names == list(NUSCENES_CAMERAS)
    for a, b in zip(rig, truth):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
        np.testing.assert_allclose(a.K, b.K, atol=1e-9)
    for c in data["cameras"]:
        assert (SAMPLE_DATA / c["image"]).is_file()
    # The rig's images are scene-0001's first sample (ego pose = identity).
    first = sorted((SAMPLE_DATA / "nuscenes" / "samples" / "CAM_FRONT").glob("scene-0001__*.jpg"))[0]
    assert first.read_bytes() == (SAMPLE_DATA / "images" / "CAM_FRONT.jpg").read_bytes()


def test_committed_rig_json_loads_with_rig_json():
    rig_json = pytest.importorskip("bevviz.io.rig_json")
    rig = rig_json.load_rig(SAMPLE_DATA / "rig.json")
    truth = syn.nuscenes_like_rig()
    assert rig.names == truth.names
    for a, b in zip(rig, truth):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
