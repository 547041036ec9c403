"""User text in the app (issue 14): conversion warnings reach the sidebar, and file names,
scene labels, dataroots and descriptions render literally, never as markdown or HTML."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from .conftest import shown

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "rig.json").exists(), reason="sample_data/ not generated yet")

#: Markdown and HTML that would render if it reached st.markdown unescaped.
HOSTILE = "**x** <b>y</b> [link](http://x) _z_ `c`"


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


@needs_sample
def test_file_names_and_the_scene_label_render_literally(app):
    name = f"{HOSTILE}.json"
    image = f"{HOSTILE}.png"
    up = sample_upload(name, {"CAM_FRONT": image})
    up["images"][image] = _png(cv2.cvtColor(cv2.imread(str(SAMPLE / "images" / "CAM_FRONT.jpg")), cv2.COLOR_BGR2GRAY))
    at = upload(app(), up)
    assert not at.error, [e.value for e in at.error]
    scene = at.session_state["scene"]
    assert scene.label == f"Uploaded rig {name}"
    assert loaded(at) == f"Loaded: Uploaded rig {name} — 6 cameras"
    assert [shown(w.value) for w in at.sidebar.warning] == [f"camera CAM_FRONT: {image}: greyscale replicated to RGB"]
    assert shown(at.caption[0].value).startswith(f"Uploaded rig {name} · ")  # the Rig page's caption
    # Every page that captions the scene shows the label as it reads.
    for page in ("pages/coverage.py", "pages/bev_features.py", "pages/conventions.py"):
        at.switch_page(page)
        at.run()
        assert not at.exception and not at.error, (page, [e.value for e in at.error])
        assert shown(at.caption[0].value).startswith(f"Uploaded rig {name} · "), page


@needs_sample
def test_a_bad_upload_with_a_hostile_name_is_an_error_that_reads_literally(app):
    at = app()
    before, label = loaded(at), at.session_state["scene"].label
    up = sample_upload(f"{HOSTILE}.json")
    rig = json.loads(up["json_bytes"])
    rig["cameras"][0]["width"] = 2 ** 63
    up["json_bytes"] = json.dumps(rig).encode()
    upload(at, up)
    (error,) = [shown(e.value) for e in at.error]
    assert error.startswith(f"Could not load the rig: {HOSTILE}.json: camera CAM_FRONT: field 'width': more than "
                            f"MAX_IMAGE_SIDE = 8192 (got 9223372036854775808)")
    assert error.endswith(f"Keeping the previous rig: {label}.")
    assert "Traceback" not in error and loaded(at) == before
    assert len(at.get("plotly_chart")) == 3  # the previous rig still draws


@needs_sample
def test_a_dataroot_and_scene_description_render_literally(app, tmp_path):
    root = tmp_path / "data [x](http://x) <b>"
    shutil.copytree(SAMPLE / "nuscenes", root)
    scenes = json.loads((root / "v1.0-mini" / "scene.json").read_text())
    scenes[0]["description"] = HOSTILE
    (root / "v1.0-mini" / "scene.json").write_text(json.dumps(scenes))
    at = app()
    at.radio(key="rig_source").set_value("nuScenes dataroot")
    at.run()
    at.text_input(key="ns_dataroot").set_value(str(root))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert HOSTILE in [shown(c.value) for c in at.sidebar.caption]
    # the sample and its neighbouring keyframes (DEFAULT_FRAMES), the path as typed
    assert loaded(at).startswith(f"Loaded: nuScenes {scenes[0]['name']} sample 0 ({root}) "), loaded(at)
    assert "— 6 cameras" in loaded(at)
    # A dataroot that is not there: the error quotes it as typed.
    at.text_input(key="ns_dataroot").set_value(str(root / "**missing**"))
    at.run()
    assert any(f"'{root / '**missing**'}'" in shown(e.value) for e in at.error), [e.value for e in at.error]
