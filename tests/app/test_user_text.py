"""User text in the app (issue 14): conversion warnings reach the sidebar."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from .conftest import shown

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "rig.json").exists(), reason="sample_data/ not generated yet")


def sample_upload(json_name: str = "my_rig.json", image_names: dict[str, str] | None = None) -> dict:
    """The embedded sample rig as an upload; ``image_names``: camera -> the image file name the
    JSON gives it (the upload is then keyed by that name)."""
    rig = json.loads((SAMPLE / "rig.json").read_text())
    images = {}
    for cam in rig["cameras"]:
        name = (image_names or {}).get(cam["name"], Path(cam["image"]).name)
        cam["image"] = name
        images[name] = (SAMPLE / "images" / f"{cam['name']}.jpg").read_bytes()
    return {"json_name": json_name, "json_bytes": json.dumps(rig).encode(), "images": images}


def upload(at, up: dict):
    at.session_state["upload_bytes"] = up
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def loaded(at) -> str:
    (caption,) = [shown(c.value) for c in at.sidebar.caption if c.value.startswith("Loaded")]
    return caption


def _png(image: np.ndarray) -> bytes:
    return cv2.imencode(".png", image)[1].tobytes()


@needs_sample
def test_converted_uploads_load_with_a_warning_naming_the_file_and_what_was_done(app):
    rgb = cv2.imread(str(SAMPLE / "images" / "CAM_FRONT.jpg"))
    up = sample_upload()
    up["images"].pop("CAM_FRONT.jpg")
    up["images"].pop("CAM_BACK.jpg")
    up["images"].pop("CAM_BACK_LEFT.jpg")
    up["images"]["CAM_FRONT.png"] = _png(cv2.cvtColor(rgb, cv2.COLOR_BGR2GRAY))
    up["images"]["CAM_BACK.png"] = _png(cv2.cvtColor(rgb, cv2.COLOR_BGR2BGRA))
    up["images"]["CAM_BACK_LEFT.png"] = _png(rgb.astype(np.uint16) * 257)
    at = upload(app(), up)
    assert not at.error, [e.value for e in at.error]
    assert loaded(at) == "Loaded: Uploaded rig my_rig.json — 6 cameras"
    assert [shown(w.value) for w in at.sidebar.warning] == [
        "camera CAM_FRONT: CAM_FRONT.png: greyscale replicated to RGB",
        "camera CAM_BACK: CAM_BACK.png: alpha channel dropped",
        "camera CAM_BACK_LEFT: CAM_BACK_LEFT.png: 16-bit samples cut to 8 bits",
    ]
    scene = at.session_state["scene"]
    assert len(scene.warnings) == 3 and scene.images["CAM_FRONT"].shape == (900, 1600, 3)
    assert len(at.get("plotly_chart")) == 3  # the Rig page draws the converted images
    # The warnings stay with the scene on other pages; an unconverted upload has none.
    at.switch_page("pages/coverage.py")
    at.run()
    assert len(at.sidebar.warning) == 3
    upload(at, sample_upload("plain.json"))
    assert loaded(at).startswith("Loaded: Uploaded rig plain.json") and not at.sidebar.warning

