"""Hostile input, one test per class found: a named error (exit 2) or the right result, never a
traceback, a bug's exit 3 or an input overwritten, each within 5 s and 500 MB.

This file grows with every class of bad input found (issue 42's round: outputs over inputs,
JSON without bounds, coordinates out of range, a run that silently went without its LiDAR).
The model files' own classes are in tests/export/test_hostile_models.py, the rig JSON's in
tests/io/test_rig_json.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import onnx
import pyarrow.parquet as pq
import pytest
from onnx import TensorProto, helper, numpy_helper

from bevviz.cli import main
from bevviz.io.nuscenes import _screened_devkit as nuscenes_devkit

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "real_kitti" / "rig.json").is_file()
                                  or not (SAMPLE / "nuscenes" / "v1.0-mini").is_dir(), reason="sample_data is missing")
#: Each refusal's budget (the issue's target).
SECONDS, PEAK_BYTES = 5.0, 500_000_000


def refused(argv: list[str], named: str, capsys) -> str:
    """Run the command line; assert exit 2, one line on stderr naming ``named``, no traceback,
    no warning leaking, within :data:`SECONDS` and :data:`PEAK_BYTES` (traced). Returns stderr."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rc = main(argv)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert err.count("\n") == 1 and err.startswith("bevviz: error: ") and named in err, err
    assert "Traceback" not in out + err and "a bug in bevviz" not in err
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert elapsed < SECONDS and peak < PEAK_BYTES, (elapsed, peak)
    return err


@pytest.fixture
def frame(tmp_path) -> Path:
    """A copy of the embedded KITTI frame folder (rig.json, images/image_2.jpg, lidar_ego.npy)."""
    if not (SAMPLE / "real_kitti" / "rig.json").is_file():
        pytest.skip("sample_data is missing")
    return Path(shutil.copytree(SAMPLE / "real_kitti", tmp_path / "frame"))


@pytest.fixture
def dataroot(tmp_path) -> Path:
    """A copy of the embedded synthetic nuScenes-format dataset."""
    if not (SAMPLE / "nuscenes" / "v1.0-mini").is_dir():
        pytest.skip("sample_data is missing")
    return Path(shutil.copytree(SAMPLE / "nuscenes", tmp_path / "nuscenes"))


# --------------------------------------------------------------------------------------
# An output that is an input, by any name
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "how"), [
    ("--json", "the image"), ("--json", "through .."), ("--json", "a symbolic link"), ("--json", "a hard link"),
    ("--html", "the rig"), ("--json", "the LiDAR"), ("--html", "a new file in images/"),
])
def test_check_never_writes_over_what_it_reads(frame, tmp_path, capsys, monkeypatch, option, how):
    monkeypatch.chdir(tmp_path)
    image = frame / "images" / "image_2.jpg"
    before = {p: p.read_bytes() for p in frame.rglob("*") if p.is_file()}
    target = {"the image": image, "through ..": frame / ".." / "frame" / "images" / "image_2.jpg",
              "a symbolic link": tmp_path / "link.json", "a hard link": tmp_path / "hard.json",
              "the rig": frame / "rig.json", "the LiDAR": frame / "lidar_ego.npy",
              "a new file in images/": frame / "images" / "report.html"}[how]
    if how == "a symbolic link":
        os.symlink(image, target)
    if how == "a hard link":
        os.link(image, target)
    err = refused(["check", str(frame), "--no-estimate", option, str(target)], f"field '{option}'", capsys)
    assert "this command reads" in err or "an input of this command" in err
    assert {p: p.read_bytes() for p in frame.rglob("*") if p.is_file()} == before  # nothing written over
    assert not (frame / "images" / "report.html").exists()


@pytest.mark.parametrize("inside", ["v1.0-mini/audit", "samples", "."])
def test_audit_never_writes_into_the_dataset(dataroot, capsys, inside):
    out = dataroot / inside
    refused(["audit", str(dataroot), "--out", str(out), "--no-progress"], "field '--out'", capsys)
    assert not (out / "manifest.json").exists() and not (out / "parts").exists()


def _model_with_external_data(folder: Path) -> Path:
    """A one-node model whose weight lives in ``w.bin`` beside it."""
    (folder / "w.bin").write_bytes(np.full(2, 3.0, np.float32).tobytes())
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    w.data_location, w.raw_data = TensorProto.EXTERNAL, b""
    onnx.external_data_helper.set_external_data(w, "w.bin", offset=0, length=8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], initializer=[w])
    path = folder / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


@pytest.mark.parametrize("argv", [
    ["npu", "rewrite", "{m}", "{dir}/w.bin"],  # its external data
    ["npu", "rewrite", "{m}", "{dir}/link.onnx"],  # itself through a symbolic link
    ["npu", "rewrite", "{m}", "{dir}/../models/m.onnx"],  # itself through ..
    ["npu", "rewrite", "{m}", "{dir}/out.onnx", "--json", "{dir}/w.bin"],
    ["npu", "rewrite", "{m}", "{dir}/out.onnx", "--json", "{dir}/out.onnx"],  # the report over the new model
    ["npu", "check", "{m}", "--json", "{m}"],
])
def test_npu_never_writes_over_the_model_or_its_external_data(tmp_path, capsys, argv):
    folder = tmp_path / "models"
    folder.mkdir()
    model = _model_with_external_data(folder)
    os.symlink(model, folder / "link.onnx")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    args = [a.format(m=model, dir=folder) for a in argv]
    refused(args, "field 'OUT.onnx'" if "--json" not in argv else "field '--json'", capsys)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not (folder / "out.onnx").exists()


# --------------------------------------------------------------------------------------
# JSON: depth, duplicate keys, numbers, size; coordinates
# --------------------------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(("name", "text", "named"), [
    ("ignore.json", DEEP, "MAX_JSON_DEPTH"),
    ("exposure.json", '{"cameras": ' + DEEP + "}", "MAX_JSON_DEPTH"),
    ("ignore.json", '{"image_2": [[[0, 0], [9, 0], [0, 9]]], "image_2": []}', "appears twice"),
    ("exposure.json", '{"cameras": {"image_2": {"exposure_from_keyframe": 1e999}}}', "finite"),
    ("ignore.json", '{"image_2": [[[0, 0], [NaN, 0], [0, 9]]]}', "NaN and Infinity"),
    ("ignore.json", '{"image_2": [[[0, 0], [' + "9" * 400 + ', 0], [0, 9]]]}', "309 digits"),
    ("ignore.json", '{"image_2": [[[0, 0], [1e300, 0], [0, 1e300]]]}', "MAX_POLYGON_COORD"),
    ("ignore.json", "{\"image_2\": ", "malformed JSON at line 1"),
], ids=["ignore-deep", "exposure-deep", "duplicate-key", "1e999", "NaN", "400-digits", "1e300-vertex", "malformed"])
def test_a_frame_folders_json_is_read_within_bounds(frame, capsys, name, text, named):
    (frame / name).write_text(text)
    err = refused(["check", str(frame), "--no-estimate"], named, capsys)
    assert name in err


def test_a_json_file_too_large_is_refused_before_it_is_read(frame, capsys):
    with open(frame / "ignore.json", "wb") as fh:  # sparse: 17 MiB of nothing, never read
        fh.truncate(17 * 2**20)
    refused(["check", str(frame), "--no-estimate"], "MAX_JSON_BYTES", capsys)


@pytest.mark.parametrize(("table", "text", "named"), [
    ("scene", DEEP, "MAX_JSON_DEPTH"),
    ("sample", '[{"token": "a", "token": "b"}]', "appears twice"),
    ("ego_pose", '[{"token": "a", "translation": [1e999, 0, 0]}]', "finite"),
], ids=["deep", "duplicate-key", "1e999"])
def test_a_nuscenes_table_is_read_within_bounds(dataroot, capsys, table, text, named):
    nuscenes_devkit()  # imported once per process (seconds): not part of the refusal's budget
    (dataroot / "v1.0-mini" / f"{table}.json").write_text(text)
    err = refused(["check", str(dataroot), "--no-lidar", "--no-estimate"], named, capsys)
    assert f"{table}.json" in err


def test_an_audit_manifest_is_read_within_bounds(tmp_path, capsys):
    out = tmp_path / "audit"
    out.mkdir()
    (out / "manifest.json").write_text(DEEP)
    refused(["audit", str(SAMPLE / "nuscenes"), "--out", str(out), "--resume", "--no-progress"],
            "manifest.json cannot be read", capsys)


# --------------------------------------------------------------------------------------
# A run that goes without what it was asked to use says so
# --------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_sample
def test_an_audit_without_its_lidar_files_says_so_in_the_summary_and_the_rows(dataroot, tmp_path, capsys):
    shutil.rmtree(dataroot / "samples" / "LIDAR_TOP")
    out = tmp_path / "audit"
    rc = main(["audit", str(dataroot), "--out", str(out), "--scenes", "scene-0001", "--no-estimate", "--no-progress"])
    stdout = capsys.readouterr().out
    assert rc in (0, 1)
    assert "samples were checked on less evidence than the settings ask for (Parquet column 'degraded')" in stdout
    rows = pq.read_table(out / "parts").to_pylist()
    assert rows and all(r["degraded"] and r["degraded"].startswith("no LiDAR: ") for r in rows)
    assert "does not exist" in rows[0]["degraded"]  # why: the file listed in sample_data is missing
    summary = json.loads((out / "summary.json").read_text())
    assert sum(s["degraded"] for s in summary) == len(rows)
    # Without LiDAR asked for, nothing is degraded.
    out2 = tmp_path / "audit2"
    assert main(["audit", str(dataroot), "--out", str(out2), "--scenes", "scene-0001", "--no-lidar",
                 "--no-estimate", "--no-progress"]) in (0, 1)
    assert "less evidence" not in capsys.readouterr().out
    assert not any(r["degraded"] for r in pq.read_table(out2 / "parts").to_pylist())


@needs_sample
def test_a_dataroots_miscalibration_record_nested_deep_is_no_note_and_no_crash(dataroot, tmp_path, capsys):
    (dataroot / "miscalibration.json").write_text(DEEP)
    out = tmp_path / "check.json"
    assert main(["check", str(dataroot), "--no-lidar", "--no-estimate", "--json", str(out)]) in (0, 1)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "a bug in bevviz" not in err
    assert not any("Known miscalibration" in n for n in json.loads(out.read_text())["notes"])
