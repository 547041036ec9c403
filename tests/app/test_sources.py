"""Rig sources in the app: JSON upload (good, broken, oversized), nuScenes, and the loaders."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from .conftest import shown

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "rig.json").exists(), reason="sample_data/ not generated yet")


def sample_upload(mutate=None) -> dict:
    """The embedded sample rig as an upload: JSON bytes + image bytes keyed by file name."""
    rig = json.loads((SAMPLE / "rig.json").read_text())
    images = {Path(c["image"]).name: (SAMPLE / c["image"]).read_bytes() for c in rig["cameras"]}
    if mutate is not None:
        mutate(rig)
    return {"json_name": "my_rig.json", "json_bytes": json.dumps(rig).encode(), "images": images}


def loaded_label(at) -> str:
    return " ".join(shown(c.value) for c in at.sidebar.caption if c.value.startswith("Loaded"))


@needs_sample
def test_json_upload_end_to_end(app):
    at = app()
    assert "Embedded sample rig" in loaded_label(at)
    at.session_state["upload_bytes"] = sample_upload()
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Uploaded rig my_rig.json" in loaded_label(at)
    assert len(at.get("plotly_chart")) == 3
    at.switch_page("pages/bev_features.py")
    at.run()
    assert not at.exception and not at.error


@needs_sample
def test_broken_upload_shows_error_and_keeps_previous_rig(app):
    at = app()
    before = loaded_label(at)

    def break_fx(rig):
        rig["cameras"][1]["K"][0][0] = -5.0

    bad = sample_upload(break_fx)
    name = json.loads(bad["json_bytes"])["cameras"][1]["name"]
    at.session_state["upload_bytes"] = bad
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert errors and f"camera {name}" in errors[0] and "'K'" in errors[0] and "-5" in errors[0], errors
    assert "Keeping the previous rig" in errors[0]
    assert loaded_label(at) == before
    assert len(at.get("plotly_chart")) == 3  # the page still works on the previous rig
    # The error stays while the same upload is there; other pages keep working.
    at.switch_page("pages/coverage.py")
    at.run()
    assert not at.exception and at.error


DRIVE = SAMPLE / "real_tri_drive"


def drive_upload(*more: str, drop: str | None = None) -> dict:
    """The TRI drive's t0 as an upload, with the images of ``more`` frames as one .zip each
    (without the image ``drop``)."""
    def images(t: str) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted((DRIVE / t / "images").glob("*.jpg")) if p.name != drop}

    sets = []
    for t in more:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for name, data in images(t).items():
                z.writestr(f"{t}/{name}", data)
        sets.append((f"{t}.zip", buf.getvalue()))
    return {"json_name": "tri.json", "json_bytes": (DRIVE / "t0" / "rig.json").read_bytes(),
            "images": {p.name: p.read_bytes() for p in sorted((DRIVE / "t0" / "images").glob("*.jpg"))},
            "more_images": sets}


@pytest.mark.skipif(not (DRIVE / "t2" / "rig.json").is_file(), reason="sample_data/real_tri_drive missing")
def test_more_image_sets_upload_and_a_set_lacking_a_camera_keeps_the_rig(app):
    at = app()
    at.session_state["upload_bytes"] = drive_upload("t1", "t2")
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Uploaded rig tri.json + 2 more image sets for the seams" in loaded_label(at)
    at.switch_page("pages/calibration_doctor.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Which camera is off?" in [s.value for s in at.subheader]
    # A further set without CAMERA_07's image: a named error, the rig loaded before stays.
    before = loaded_label(at)
    at.session_state["upload_bytes"] = drive_upload("t1", drop="CAMERA_07.jpg")
    at.run()
    errors = [shown(e.value) for e in at.error]
    assert errors and "more image sets" in errors[0] and "t1.zip" in errors[0] and "CAMERA_07" in errors[0], errors
    assert loaded_label(at) == before


@needs_sample
def test_a_bug_while_loading_is_shown_as_a_bug_not_as_bad_input(app, monkeypatch):
    # A numpy broadcasting error is a ValueError, but not the user's: the app says it is a
    # bug in bevviz and where to report it, and keeps the previous rig.
    from appkit import sources

    def broken(*args, **kwargs):
        raise ValueError("operands could not be broadcast together with shapes (3,) (4,)")

    at = app()
    before = loaded_label(at)
    monkeypatch.setattr(sources.uploads, "uploaded_scene", broken)
    at.session_state["upload_bytes"] = sample_upload()
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert errors and "internal error (a bug in bevviz, not in your input): ValueError: operands" in errors[0]
    assert "report it" in errors[0] and loaded_label(at) == before


@needs_sample
def test_upload_with_a_wrong_image_size_names_camera_and_field(app):
    import cv2
    import numpy as np

    up = sample_upload()
    first = sorted(up["images"])[0]
    up["images"][first] = cv2.imencode(".png", np.zeros((10, 20, 3), np.uint8))[1].tobytes()
    at = app()
    at.session_state["upload_bytes"] = up
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception
    msg = shown(at.error[0].value)
    assert "field 'image'" in msg and "20 x 10" in msg


def test_oversized_upload_is_refused_with_a_message():
    from appkit import sources
    from bevviz.checks import MAX_RIG_JSON_BYTES

    with pytest.raises(ValueError, match=r"image CAM_FRONT.jpg is .* more than the 25.0 MB limit"):
        sources.check_upload_sizes("rig.json", b"{}", {"CAM_FRONT.jpg": b"0" * (sources.MAX_IMAGE_BYTES + 1)})
    with pytest.raises(ValueError, match=r"rig file big.json .* JSON rig"):
        sources.uploaded_scene("big.json", b" " * (MAX_RIG_JSON_BYTES + 1), {})


def test_malformed_json_upload_raises_named_error():
    from appkit import sources

    with pytest.raises(ValueError, match="bad.json"):
        sources.uploaded_scene("bad.json", b"{not json", {})


@needs_sample
def test_uploaded_scene_matches_images_by_camera_name():
    from appkit import sources

    up = sample_upload()
    rig = json.loads(up["json_bytes"])
    by_camera = {c["name"] + ".jpg": up["images"][Path(c["image"]).name] for c in rig["cameras"]}
    scene = sources.uploaded_scene("r.json", up["json_bytes"], by_camera)
    assert set(scene.images) == set(scene.rig.names)
    assert scene.key.startswith("upload:")


@needs_sample
def test_embedded_nuscenes_scenes_and_miscalibration_note(app):
    at = app()
    options = at.selectbox(key="sample_choice").options
    assert len(options) >= 3  # rig.json + two nuScenes scenes
    miscal = [o for o in options if "error" in o.lower() or "miscal" in o.lower()]
    assert miscal, options
    at.selectbox(key="sample_choice").set_value(miscal[0])
    at.run()
    assert not at.exception and not at.error
    assert "nuScenes scene-" in loaded_label(at)
    assert any("miscalibration" in shown(i.value).lower() for i in at.info)
    assert len(at.get("plotly_chart")) == 3


@needs_sample
def test_the_doctor_can_add_up_the_next_samples_of_a_scene(app):
    """A scene of several samples offers "Frames for the doctor", by default up to 5 (the
    embedded scene-0001 holds 2): the next sample is loaded with its scan for the LiDAR
    witness and the label says so, the Doctor page tells how many it adds up; 1 is the
    sample alone."""
    at = app()
    at.radio(key="rig_source").set_value("nuScenes dataroot")
    at.run()
    assert at.number_input(key="ns_sample_frames").value == 2
    assert not at.exception and not at.error
    assert "+ 1 neighbouring sample for the LiDAR witness" in loaded_label(at)
    at.switch_page("pages/calibration_doctor.py")
    at.run()
    assert not at.exception and not at.error
    assert any(shown(i.value).startswith("2 frames judged together") for i in at.info)
    at.number_input(key="ns_sample_frames").set_value(1)
    at.run()
    assert not at.exception and not at.error
    assert "neighbouring sample" not in loaded_label(at)


@needs_sample
def test_nuscenes_dataroot_then_a_bad_one_keeps_the_rig(app, tmp_path):
    at = app()
    at.radio(key="rig_source").set_value("nuScenes dataroot")  # defaults to the embedded dataset
    at.run()
    assert not at.exception and not at.error
    before = loaded_label(at)
    assert "nuScenes scene-0001" in before
    assert at.selectbox(key="ns_scene").options and at.selectbox(key="ns_sample").options
    at.text_input(key="ns_dataroot").set_value(str(tmp_path / "nowhere"))
    at.run()
    assert not at.exception
    assert any("dataroot" in shown(e.value) for e in at.error), [e.value for e in at.error]
    assert loaded_label(at) == before
    assert len(at.get("plotly_chart")) == 3


@needs_sample
def test_upload_without_images_draws_geometry_and_asks_for_images(app):
    up = sample_upload()
    up["images"] = {}
    at = app()
    at.session_state["upload_bytes"] = up
    at.radio(key="rig_source").set_value("JSON rig upload")
    at.run()
    assert not at.exception and not at.error
    assert "Uploaded rig my_rig.json" in loaded_label(at)
    assert len(at.get("plotly_chart")) == 3  # cameras drawn as blank frames with the projected points
    at.switch_page("pages/bev_features.py")
    at.run()
    assert not at.exception and not at.error
    assert any("needs an image for every camera" in shown(w.value) for w in at.warning)


def test_too_large_grid_is_refused_and_previous_grid_kept(app):
    at = app()
    at.number_input(key="grid_res").set_value(0.05)  # 2048 x 2048 cells x 4 heights
    at.run()
    assert not at.exception
    assert any("more than the app's" in shown(e.value) and "keeping the previous grid" in shown(e.value)
               for e in at.error)


def test_app_falls_back_to_a_rendered_rig_without_sample_data(app, monkeypatch, tmp_path):
    # A checkout without sample_data/ (e.g. a trimmed copy) still opens: the nuScenes-like
    # rig rendered on the fly, with a caption that says why.
    from appkit import sources
    from bevviz.session import embedded

    monkeypatch.setattr(embedded, "SAMPLE_DATA", tmp_path)  # the one place the samples' folder is known
    sources.synthetic_scene.clear()
    sources.sample_texture.clear()  # cached by earlier tests from the real sample_data
    at = app()
    sources.sample_texture.clear()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    captions = " ".join(shown(c.value) for c in at.sidebar.caption)
    assert "sample_data/ is missing" in captions
    scene = at.session_state["scene"]
    assert scene.key == "synthetic"
    # Its ground truth is the texture it was rendered from, even without the PNG on disk.
    from bevviz.synthetic import ground_texture

    texture, grid = ground_texture()
    assert scene.ground_truth is not None and scene.ground_truth.texture is texture
    assert tuple(scene.ground_truth.x_range) == tuple(grid.x_range)
    assert len(scene.rig) == 6 and set(scene.images) == set(scene.rig.names)
    w, h = scene.rig[0].size
    assert all(img.shape == (h, w, 3) and img.std() > 10 for img in scene.images.values())
    assert at.get("plotly_chart")  # the Rig page draws on the rendered images


@needs_sample
def test_a_damaged_embedded_sample_is_a_bug_not_a_silent_fallback(tmp_path, monkeypatch):
    from appkit import sources

    assert sources.embedded_scene_table(str(tmp_path / "not_shipped")) == []  # a dataset not shipped: no scenes
    (tmp_path / "v1.0-mini").mkdir()
    (tmp_path / "v1.0-mini" / "scene.json").write_text("[{")
    with pytest.raises(json.JSONDecodeError):
        sources.embedded_scene_table(str(tmp_path))

    def broken(path):
        raise ValueError("a bug in the loader")

    monkeypatch.setattr(sources, "rig_json_scene", broken)
    with pytest.raises(ValueError, match="a bug in the loader"):  # not the synthetic rig in its place
        sources.default_scene()


def test_upload_limits_come_from_the_library():
    from appkit import sources
    from bevviz import checks

    assert sources.MAX_RIG_JSON_BYTES is checks.MAX_RIG_JSON_BYTES  # one JSON limit, no local copy
    assert sources.MAX_IMAGE_BYTES <= checks.MAX_IMAGE_FILE_BYTES
    assert sources.MAX_POINTCLOUD_BYTES >= 20 * checks.MAX_LIDAR_POINTS  # a full nuScenes .bin fits
    text = sources.upload_limits_text()
    for part in ("JSON 2.0 MB", "32 cameras", "25.0 MB and 8,192 px a side (32 Mpx) per image",
                 "point cloud 100.0 MB, 5,000,000 points"):
        assert part in text, text


@pytest.mark.skipif(not (SAMPLE / "real_nuscenes" / "v1.0-mini").is_dir(), reason="sample_data/real_nuscenes missing")
def test_the_app_and_the_cli_give_the_same_numbers_on_the_real_keyframe(app, tmp_path):
    # One road: the scene the app's sidebar loads and the doctor the app keeps for it give
    # what `bevviz check real-nuscenes` prints and writes, to the printed digit.
    from appkit.session import doctor
    from appkit.sidebar import REAL_SAMPLE_OPTION
    from bevviz.cli import main
    from bevviz.session import CheckSettings

    at = app()
    at.selectbox(key="sample_choice").set_value(REAL_SAMPLE_OPTION)
    at.run()
    assert not at.exception and not at.error
    scene = at.session_state["scene"]
    assert scene.lidar is not None
    app_report = doctor(scene, CheckSettings()).check().to_dict()

    j = tmp_path / "cli.json"
    assert main(["check", "real-nuscenes", "--json", str(j)]) in (0, 1)
    cli_report = json.loads(j.read_text())

    def printed(doc: dict) -> dict:
        return {
            "sample": doc["source"]["sample"], "lidar_points": doc["lidar_points"], "flagged": doc["flagged"],
            "seam_median": f"{doc['seam_median']:.3f}",
            "conventions": [(c["convention"], f"{c['score']:.3f}") for c in doc["conventions"]["ranking"]],
            "cameras": [(c["camera"], c["verdict"], f"{c['score']:.3f}",
                         {a: f"{v:+.2f}" for a, v in c["offset_deg"].items()},
                         {a: f"{v:.2f}" for a, v in c["uncertainty_deg"].items()},
                         {n: f"{v:.3f}" for n, v in c["seam_costs"].items()}) for c in doc["cameras"]],
        }

    assert printed(app_report) == printed(cli_report)


@needs_sample
def test_a_bug_in_a_page_is_shown_as_a_bug_and_the_sidebar_stays(app, monkeypatch):
    import appkit

    def broken():
        raise KeyError("cam_from_ego")

    monkeypatch.setattr(appkit, "current", broken)  # what every page reads first
    at = app()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert errors and errors[0].startswith("Rig & Projection: internal error (a bug in bevviz, not in your input)")
    assert "KeyError" in errors[0] and "report it" in errors[0]
    assert "Embedded sample rig" in loaded_label(at)  # the sidebar still drew


def test_a_scene_whose_samples_loop_is_a_named_error_in_the_sidebar(app, tmp_path):
    import shutil

    src = Path(__file__).resolve().parents[2] / "sample_data" / "nuscenes"
    root = tmp_path / "nuscenes"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("samples"))
    path = root / "v1.0-mini" / "sample.json"
    samples = json.loads(path.read_text())
    samples[1]["next"] = samples[0]["token"]  # scene-0001: 0 -> 1 -> 0 -> ...
    path.write_text(json.dumps(samples))
    at = app(rig_source="nuScenes dataroot", ns_dataroot=str(root))
    assert not at.exception, [e.value for e in at.exception]
    shown_errors = [e.value.replace("\\", "") for e in at.error]  # markdown-escaped
    assert any("field 'sample.next'" in e and "the chain loops" in e for e in shown_errors), shown_errors
