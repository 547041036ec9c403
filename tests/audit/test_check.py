"""bevviz.audit.check over bevviz.session: one rig checked (conventions, sanity, the doctor), one sample as rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bevviz.audit import (
    ROW_COLUMNS,
    CheckSettings,
    check_rig,
    check_sample,
    projection_sanity,
)
from bevviz.calibration import perturb_rig
from bevviz.camera import Rig
from bevviz.conventions import NUSCENES, Convention
from bevviz.session import load_scene


@pytest.fixture(scope="module")
def embedded_rig():
    return load_scene("rig")


def test_settings_are_validated_by_name(seams):
    with pytest.raises(ValueError, match="settings.sweeps"):
        CheckSettings(sweeps=0)
    with pytest.raises(ValueError, match="settings.lidar"):
        CheckSettings(lidar="yes")
    with pytest.raises(ValueError, match="unknown keys"):
        CheckSettings.from_dict({"lidar": True, "speed": 3})
    assert CheckSettings.from_dict(seams.to_dict()) == seams


def test_the_embedded_rig_passes_every_check(embedded_rig, fast):
    src = embedded_rig
    report = check_rig(src.rig, src.images, raw_cameras=src.raw_cameras, convention=src.convention, settings=fast,
                       source=src.source)
    assert report.flagged() == [] and report.exit_code() == 0
    assert report.conventions.ok and report.conventions.best == NUSCENES.label
    assert all(c.verdict == "ok" and not c.sanity.problems for c in report.cameras)
    doc = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert doc["format"] == "bevviz-check" and doc["exit_code"] == 0 and len(doc["cameras"]) == 6
    keys = {"camera", "verdict", "score", "offset_deg", "uncertainty_deg", "sanity", "witnesses"}
    assert keys <= set(doc["cameras"][0])


def test_a_turned_camera_is_flagged_with_its_offset_estimated(embedded_rig, seams):
    bad = perturb_rig(embedded_rig.rig, "CAM_FRONT", yaw_deg=2.0)
    report = check_rig(bad, embedded_rig.images, settings=seams)
    assert report.flagged() == ["CAM_FRONT"] and report.exit_code() == 1
    front = report.cameras[0]
    assert front.camera == "CAM_FRONT" and front.offset_source == "seams"
    # The stored camera is turned +2 deg (yaw, body frame) away from where its seams put it.
    assert front.offset_deg["yaw"] == pytest.approx(2.0, abs=0.3)
    assert abs(front.offset_deg["roll"]) < 0.3 and abs(front.offset_deg["pitch"]) < 0.3
    assert all(c.offset_deg is None for c in report.cameras[1:])


def test_projection_sanity_names_a_camera_that_looks_at_the_sky(embedded_rig):
    rig = perturb_rig(embedded_rig.rig, "CAM_BACK", pitch_deg=-80.0)
    cam = rig["CAM_BACK_LEFT"]
    K = cam.K.copy()
    K[0, 2] = -300.0
    rig = rig.replace(cam.replace(K=K))
    sanity = projection_sanity(rig)
    assert any("sees no ground" in p for p in sanity["CAM_BACK"].problems)
    assert any("principal point" in p for p in sanity["CAM_BACK_LEFT"].problems)
    assert not sanity["CAM_FRONT"].problems and sanity["CAM_FRONT"].neighbours == 2


def test_a_convention_mix_up_flags_the_whole_rig(embedded_rig, fast):
    other = Convention("ego_to_sensor", "wxyz", "RDF")
    raws = embedded_rig.rig.to_raw(other)  # stored the other way, but declared nuScenes
    misread = Rig.from_raw(raws, NUSCENES)
    report = check_rig(misread, {}, raw_cameras=raws, convention=NUSCENES, settings=fast)
    assert not report.conventions.ok and report.conventions.best == other.label
    assert report.flagged() == misread.names
    assert any("needs every camera's image" in n for n in report.notes)


def test_a_drifted_sample_gives_one_row_per_camera(nuscenes_root, drift, fast):
    k = next(s for s in drift["samples"] if s["degrees"] > 0)
    rows = check_sample(str(nuscenes_root), "v1.0-mini", k["sample_token"], fast)
    assert len(rows) == 6 and all(tuple(r) == ROW_COLUMNS for r in rows)
    by_cam = {r["camera"]: r for r in rows}
    assert by_cam[drift["camera"]]["verdict"] == "miscalibrated"
    assert {r["verdict"] for c, r in by_cam.items() if c != drift["camera"]} == {"ok"}
    r = by_cam[drift["camera"]]
    assert r["scene"] == drift["scene"] and r["sample_index"] == k["index"] and r["lidar_points"] == 0
    assert r["error"] is None and r["convention_ok"] and r["runtime_s"] > 0


def test_the_real_keyframe_with_lidar_has_offsets_with_uncertainty(real_root):
    nusc_rows = check_sample(str(real_root), "v1.0-mini", "ca9a282c9e77460f8360f564131a8af5",
                             CheckSettings(replicates=8))
    assert len(nusc_rows) == 6
    for r in nusc_rows:
        assert r["offset_source"] == "lidar" and r["lidar_points"] > 10_000 and r["edge_points"] > 0
        assert all(np.isfinite(r[f"{a}_deg"]) and r[f"{a}_unc_deg"] >= 0 for a in ("roll", "pitch", "yaw"))
        assert r["lidar_verdict"] in ("ok", "inconclusive", "miscalibrated")


def test_a_sample_that_cannot_be_checked_is_one_error_row(nuscenes_root, fast):
    rows = check_sample(str(nuscenes_root), "v1.0-mini", "no-such-token", fast)
    assert len(rows) == 1 and rows[0]["verdict"] == "error" and rows[0]["camera"] is None
    assert "sample" in rows[0]["error"] and "no-such-token" in rows[0]["error"]


@pytest.mark.parametrize(("source", "kwargs", "field"), [
    ("nowhere", {}, "SOURCE"),
    ("nuscenes", {"images": "."}, "--images"),
    ("rig", {"sample": "abc"}, "--sample"),
    ("rig", {"images": "/no/such/folder"}, "--images"),
    ("nuscenes", {"sample": "abc"}, "--sample"),
    ("nuscenes", {"version": "v9"}, "version"),
])
def test_bad_sources_name_the_field(nuscenes_root, source, kwargs, field):
    with pytest.raises(ValueError, match=f"field '{field}'"):
        load_scene(source, **kwargs)
