"""The app's upload path under issue 14's bad inputs: each ends in a named error, fast, and the
sidebar keeps the previous rig (no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appkit import sources

from ..io.test_images import png_bomb
from .conftest import shown

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "rig.json").exists(), reason="sample_data/ not generated yet")


def sample_rig() -> dict:
    return json.loads((SAMPLE / "rig.json").read_text())


def _many(rig: dict, n: int = 1000) -> dict:
    cam = rig["cameras"][0]
    rig["cameras"] = [{**cam, "name": f"CAM_{i:04d}"} for i in range(n)]
    return rig


def _edit(field: str, value):
    def edit(rig: dict) -> dict:
        rig["cameras"][0][field] = value
        return rig
    return edit


def _scale_rotation(rig: dict) -> dict:
    rig["cameras"][0]["rotation"] = [2 * x for x in rig["cameras"][0]["rotation"]]
    return rig


CASES = {
    "1000 cameras": (_many, r"field 'cameras': more than MAX_CAMERAS = 32 \(got '1000 cameras'\)"),
    "width 2**63": (_edit("width", 2 ** 63), r"field 'width': more than MAX_IMAGE_SIDE = 8192"),
    "width 1e9": (_edit("width", 1e9), r"field 'width': more than MAX_IMAGE_SIDE = 8192"),
    "width 10**20": (_edit("width", 10 ** 20), r"field 'width': more than MAX_IMAGE_SIDE = 8192"),
    "quaternion of norm 2": (_scale_rotation, r"field 'rotation': quaternion norm is 2, not 1"),
    "10,000-character name": (_edit("name", "x" * 10_000), r"field 'name': has 10000 characters"),
    "markdown name": (_edit("name", "**CAM** [x](y)"), r"field 'name': character '\*' is not allowed"),
    "control characters": (_edit("name", "CAM\x1b[2J"), r"field 'name': character '\\x1b' is not allowed"),
}


@needs_sample
@pytest.mark.parametrize("case", list(CASES))
def test_bad_rig_uploads_end_in_a_named_error_before_allocating(case, allocates_at_most):
    edit, pattern = CASES[case]
    text = json.dumps(edit(sample_rig())).encode()
    with allocates_at_most(16), pytest.raises(ValueError, match=rf"^my_rig\.json: (camera #?\w+: )?{pattern}"):
        sources.uploaded_scene("my_rig.json", text, {})


def test_deeply_nested_json_upload_is_a_named_error():
    with pytest.raises(ValueError, match=r"^deep\.json: field 'json': more than MAX_JSON_DEPTH = 16"):
        sources.uploaded_scene("deep.json", b"[" * 200_000, {})


@needs_sample
def test_an_uploaded_decompression_bomb_is_refused_from_its_header(allocates_at_most):
    rig = sample_rig()
    name = rig["cameras"][0]["name"]
    bomb = png_bomb()
    with allocates_at_most(16), pytest.raises(ValueError, match=rf"camera {name}: field 'image': more than "
                                                                rf"MAX_IMAGE_SIDE = 8192 \(got '{name}\.png: "
                                                                r"30000 x 30000 px'\)"):
        sources.uploaded_scene("my_rig.json", json.dumps(rig).encode(), {f"{name}.png": bomb})


@needs_sample
def test_the_sidebar_shows_the_error_and_keeps_the_previous_rig(app):
    at = app()
    before = [c.value for c in at.sidebar.caption if c.value.startswith("Loaded")]
    rig = sample_rig()
    name = rig["cameras"][0]["name"]
    for upload in ({"json_name": "bomb_rig.json", "json_bytes": json.dumps(rig).encode(),
                    "images": {f"{name}.png": png_bomb()}},
                   {"json_name": "big_rig.json", "json_bytes": json.dumps(_many(sample_rig())).encode(), "images": {}}):
        at.session_state["upload_bytes"] = upload
        at.radio(key="rig_source").set_value("JSON rig upload")
        at.run()  # the harness's own timeout fails a run that does not end
        assert not at.exception
        errors = [shown(e.value) for e in at.error]
        assert errors and ("MAX_IMAGE_SIDE" in errors[0] or "MAX_CAMERAS" in errors[0]), errors
        assert [c.value for c in at.sidebar.caption if c.value.startswith("Loaded")] == before
