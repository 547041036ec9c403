"""bevviz audit: the drift is found, failures are rows, and Ray gives the local engine's rows.

One local audit of the embedded synthetic dataset (seams only) is shared by the module, and
one of the drift scene with the flagged cameras' offsets estimated; the Ray tests share one
local Ray session of 2 CPUs and one Ray audit in which workers die.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from bevviz.audit import AuditOptions, check_sample, read_manifest, read_rows, run_audit
from bevviz.cli import main


@pytest.fixture(scope="module")
def local_run(nuscenes_root, fast, tmp_path_factory):
    return run_audit(nuscenes_root, tmp_path_factory.mktemp("audit") / "local", settings=fast, progress=False)


@pytest.fixture(scope="module")
def drift_run(nuscenes_root, seams, drift, tmp_path_factory):
    return run_audit(nuscenes_root, tmp_path_factory.mktemp("audit") / "drift", scenes=[drift["scene"]],
                     settings=seams, progress=False)


def test_the_drift_is_flagged_from_its_start_and_nothing_else(local_run, drift, miscal):
    rows = local_run.rows.to_pylist()
    assert len(rows) == 8 * 6 and not [r for r in rows if r["error"]]
    flagged = {(r["scene"], r["sample_index"], r["camera"]) for r in rows if r["verdict"] != "ok"}
    expected = {(miscal["scene"], k, miscal["camera"]) for k in (0, 1)}  # stored 2 deg off throughout
    expected |= {(drift["scene"], s["index"], drift["camera"]) for s in drift["samples"] if s["degrees"] > 0}
    assert flagged == expected
    assert {r["verdict"] for r in rows if r["verdict"] != "ok"} == {"miscalibrated"}


def test_the_estimated_offset_follows_the_drift(drift_run, drift):
    rows = drift_run.rows.to_pylist()
    assert {r["scene"] for r in rows} == {drift["scene"]}
    # The stored camera is turned by the drift (body pitch) away from where its seams put it.
    for s in drift["samples"]:
        r = next(r for r in rows if r["sample"] == s["sample_token"] and r["camera"] == drift["camera"])
        if s["degrees"] == 0:
            assert r["pitch_deg"] is None  # ok: not estimated
            continue
        assert r["offset_source"] == "seams"
        assert r["pitch_deg"] == pytest.approx(s["degrees"], abs=0.35), (s, r["reason"])
        assert abs(r["roll_deg"]) < 0.35 and abs(r["yaw_deg"]) < 0.35


def test_the_summary_and_the_report(local_run, drift):
    out = local_run.out
    cell = next(s for s in local_run.summary if s["scene"] == drift["scene"] and s["camera"] == drift["camera"])
    assert cell["samples"] == 4 and cell["miscalibrated"] == 2 and cell["ok"] == 2 and cell["first_flagged"] == 2
    assert json.loads((out / "summary.json").read_text()) == local_run.summary
    page = (out / "report.html").read_text()
    assert "Estimated offset along each scene" in page and "Samples flagged miscalibrated" in page
    assert page.count("<script") >= 2 and "<script src=" not in page  # plotly.js inline: one file
    assert read_manifest(out)["samples"] == 8 and local_run.planned == 8 and local_run.checked == 8


def test_a_sample_that_fails_is_a_row_and_the_run_goes_on(nuscenes_root, fast, tmp_path):
    root = tmp_path / "nuscenes"
    shutil.copytree(nuscenes_root, root)
    broken = sorted((root / "samples" / "CAM_FRONT").glob("scene-0001__*.jpg"))[1]
    broken.unlink()
    run = run_audit(root, tmp_path / "out", scenes=["scene-0001"], settings=fast, progress=False)
    rows = run.rows.to_pylist()
    errors = [r for r in rows if r["verdict"] == "error"]
    assert len(rows) == 7 and len(errors) == 1
    assert errors[0]["sample_index"] == 1 and "CAM_FRONT: field 'image'" in errors[0]["error"]
    # A resumed audit does not try it again: the failure is recorded, not retried forever.
    again = run_audit(root, tmp_path / "out", scenes=["scene-0001"], settings=fast, progress=False, resume=True)
    assert again.checked == 0 and again.rows.num_rows == 7


# --------------------------------------------------------------------------------------
# Ray: 2 CPUs, one session for the module
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    # The fault-injecting functions below travel to the workers by value (this test module
    # is not importable there).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    ray.shutdown()


def _dies(dataroot, version, token, settings, *, nusc=None, victims: dict):
    """check_sample, except that the worker process dies at each victim: once when it has a
    marker file (then the file says it did), at every attempt when its marker is None."""
    if token in victims:
        marker = victims[token]
        if marker is None or not Path(marker).exists():
            if marker is not None:
                Path(marker).touch()
            os._exit(3)
    return check_sample(dataroot, version, token, settings, nusc=nusc)


@pytest.fixture(scope="module")
def ray_run(ray_session, local_run, nuscenes_root, fast, tmp_path_factory):
    """The whole embedded dataset on Ray, where the worker dies once at scene-0001's first
    sample and at every attempt at its second (one Ray run serves the three tests below)."""
    tmp = tmp_path_factory.mktemp("ray")
    first = [r["sample"] for r in local_run.rows.to_pylist() if r["scene"] == "scene-0001"]
    once, always = dict.fromkeys(first)
    marker = tmp / "died-once"
    fn = functools.partial(_dies, victims={once: str(marker), always: None})
    run = run_audit(nuscenes_root, tmp / "ray", settings=fast, progress=False, fn=fn,
                    options=AuditOptions(engine="ray", workers=2, retries=1))
    return run, once, always, marker


@pytest.mark.ray
def test_ray_gives_the_rows_of_the_local_engine(ray_run, local_run, comparable):
    run, _, always, _ = ray_run
    assert [r for r in comparable(run.rows) if r["sample"] != always] == \
        [r for r in comparable(local_run.rows) if r["sample"] != always]
    assert run.stats.engine == "ray" and run.stats.workers == 2
    assert len(run.stats.peak_rss_mib) == 2 and all(m > 50 for m in run.stats.peak_rss_mib)


@pytest.mark.ray
def test_ray_on_the_real_keyframe_through_the_command_line(ray_session, real_root, comparable, tmp_path):
    args = ["audit", str(real_root), "--no-lidar", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--out", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2"]) == 0
    assert comparable(read_rows(tmp_path / "ray")) == comparable(read_rows(tmp_path / "local"))


@pytest.mark.ray
def test_a_worker_that_dies_has_its_sample_retried(ray_run, local_run, comparable):
    run, once, _, marker = ray_run
    assert marker.exists()  # the worker did die at that sample ...
    retried = [r for r in comparable(run.rows) if r["sample"] == once]
    expected = [r for r in comparable(local_run.rows) if r["sample"] == once]
    assert len(expected) == 6 and retried == expected  # ... and its retry gave the rows of the local engine


@pytest.mark.ray
def test_a_sample_that_always_kills_its_worker_becomes_a_failure_row(ray_run):
    run, _, always, _ = ray_run
    rows = run.rows.to_pylist()
    failed = [r for r in rows if r["verdict"] == "error"]
    assert len(failed) == 1 and failed[0]["sample"] == always
    assert "died on each of 2 attempts" in failed[0]["error"]  # retries=1: tried twice, then given up
    assert len(rows) == 7 * 6 + 1 and run.stats.given_up == 1


# --------------------------------------------------------------------------------------
# Hostile tables (issue 22): bad records are rows, loops end, nothing is lost or doubled
# --------------------------------------------------------------------------------------


def _edit(root: Path, table: str, fn) -> list:
    path = root / "v1.0-mini" / f"{table}.json"
    records = json.loads(path.read_text())
    fn(records)
    path.write_text(json.dumps(records))
    return records


@pytest.fixture
def hostile(nuscenes_root, tmp_path):
    """The embedded dataset with a loop in scene-0001's next links, a dangling calibrated_sensor
    token at scene-0002's first sample and a timestamp of 2**70 at its second."""
    root = tmp_path / "nuscenes"
    shutil.copytree(nuscenes_root, root)
    scenes = {s["name"]: s["token"] for s in json.loads((root / "v1.0-mini" / "scene.json").read_text())}
    samples = json.loads((root / "v1.0-mini" / "sample.json").read_text())
    one = [s for s in samples if s["scene_token"] == scenes["scene-0001"]]
    two = [s for s in samples if s["scene_token"] == scenes["scene-0002"]]
    _edit(root, "sample", lambda recs: [r.update(next=one[0]["token"]) if r["token"] == one[1]["token"] else
                                        r.update(timestamp=2**70) if r["token"] == two[1]["token"] else None
                                        for r in recs])
    _edit(root, "sample_data", lambda recs: next(r for r in recs if r["sample_token"] == two[0]["token"]).update(
        calibrated_sensor_token="deadbeef"))
    return root, one, two


def test_bad_records_are_error_rows_and_a_resume_adds_nothing(hostile, fast, tmp_path):
    root, one, two = hostile
    t0 = time.monotonic()
    run = run_audit(root, tmp_path / "out", scenes=["scene-0001", "scene-0002"], settings=fast, progress=False)
    assert time.monotonic() - t0 < 60
    rows = run.rows.to_pylist()
    assert run.checked == 2 and run.problems == 3
    errors = sorted((r for r in rows if r["verdict"] == "error"), key=lambda r: (r["error_table"], r["error_field"]))
    assert [(r["error_table"], r["error_field"], r["sample"]) for r in errors] == [
        ("sample", "next", None),  # the loop: the scene's two samples are checked, the link is reported
        ("sample", "timestamp", two[1]["token"]),
        ("sample_data", "calibrated_sensor_token", two[0]["token"])]
    assert errors[0]["error_record"] == one[1]["token"] and errors[0]["error_value"] == repr(one[0]["token"])
    assert "chain loops" in errors[0]["error"] and errors[0]["scene"] == "scene-0001"
    assert errors[1]["error_value"] == str(2**70) and errors[2]["error_value"] == "'deadbeef'"
    assert all(r["scene"] == "scene-0002" and r["error"].startswith("not checked: ") for r in errors[1:])
    checked = {r["sample"] for r in rows if r["verdict"] != "error"}
    assert checked == {one[0]["token"], one[1]["token"]} and len(rows) == 2 * 6 + 3
    again = run_audit(root, tmp_path / "out", scenes=["scene-0001", "scene-0002"], settings=fast, progress=False,
                      resume=True)
    assert again.checked == 0 and again.rows.num_rows == len(rows)  # nothing doubled
    page = (tmp_path / "out" / "report.html").read_text()
    assert "3 table problems" in page and "deadbeef" in page


def test_an_audit_of_no_sample_exits_2_with_one_line(nuscenes_root, tmp_path, capsys):
    def copy(name: str) -> Path:  # a root per case: the devkit handle is cached per dataroot
        shutil.copytree(nuscenes_root, tmp_path / name, ignore=shutil.ignore_patterns("samples"))
        return tmp_path / name

    args = ["--no-lidar", "--no-progress"]
    assert main(["audit", str(copy("r1")), *args, "--out", str(tmp_path / "a"), "--scenes", ","]) == 2
    assert "field '--scenes'" in capsys.readouterr().err
    _edit(root := copy("r2"), "scene", lambda recs: recs[0].update(first_sample_token=""))  # an empty scene
    assert main(["audit", str(root), *args, "--out", str(tmp_path / "b"), "--scenes", "scene-0001"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to audit" in err
    _edit(root := copy("r3"), "scene", lambda recs: recs.clear())  # no scene at all
    assert main(["audit", str(root), *args, "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'dataroot': nothing to audit" in err
    assert not [p for p in "abc" if (tmp_path / p).exists()]  # no half-made audit folder


def test_a_folder_another_run_writes_to_is_refused_before_the_dataset_is_opened(tmp_path):
    from bevviz.audit.store import hold_lock

    out = tmp_path / "out"
    out.mkdir()
    held = hold_lock(out)  # another run (a second descriptor conflicts like another process)
    try:
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=r"'--out': another bevviz audit is writing to this folder"):
            run_audit(tmp_path / "no-such-dataroot", out, resume=True, progress=False)
        assert time.monotonic() - t0 < 1
    finally:
        os.close(held)
    with pytest.raises(ValueError, match="dataroot"):  # the lock was let go of on the way out
        run_audit(tmp_path / "no-such-dataroot", out, resume=True, progress=False)
    held = hold_lock(out)
    os.close(held)
