"""AppTest of the Calibration audit page: empty, an audit folder opened, a run, a sample opened in the doctor."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bevviz.audit import AuditOptions, CheckSettings, run_audit

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "sample_data" / "nuscenes"
needs_sample = pytest.mark.skipif(not (SYNTHETIC / "v1.0-mini").is_dir(), reason="sample_data is missing")
PAGE = "pages/audit.py"
DATASET = "Synthetic nuScenes (3 scenes, a drifting camera)"


def _clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _opened(app, folder):
    """The audit page with ``folder`` typed in and opened."""
    at = app(PAGE)
    at.text_input(key="audit_path").set_value(str(folder)).run()
    at.button(key="audit_open").click().run()
    return at


def test_the_page_opens_without_an_audit(app):
    at = app(PAGE)
    _clean(at)
    assert at.title[0].value == "Calibration audit"
    assert any("Open an audit folder" in i.value for i in at.info)
    assert at.button(key="audit_open").disabled


@needs_sample
def test_an_audit_folder_opens_with_its_figures_and_tables(app, tmp_path):
    out = tmp_path / "audit"
    run_audit(SYNTHETIC, out, scenes=["scene-0002"], settings=CheckSettings(lidar=False, estimate=False),
              progress=False, options=AuditOptions(report=False))
    at = _opened(app, out)
    _clean(at)
    assert len(at.get("plotly_chart")) == 2
    assert {m.label: m.value for m in at.metric}["Miscalibrated"] == "2"
    assert len(at.dataframe) == 2  # flagged samples, per scene x camera
    assert len(at.selectbox(key="audit_pick").options) == 2


@needs_sample
def test_a_bad_folder_is_a_message(app, tmp_path):
    at = _opened(app, tmp_path)
    assert not at.exception
    assert any("no manifest" in e.value for e in at.error)


@needs_sample
def test_run_on_the_drift_scene_then_open_a_flagged_sample_in_the_doctor(app, monkeypatch):
    # Streamlit logs a widget's default fighting a value set through session state as a warning
    # with its whole stack (25 lines in the terminal): opening a sample must not cause one.
    from streamlit.elements.lib import policies

    warned = []
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *a, **k: warned.append(msg % a if a else msg))
    at = app(PAGE)
    at.multiselect(key=f"audit_scenes_{DATASET}").set_value(["scene-0003"])
    at.checkbox(key="audit_estimate").uncheck()
    at.button(key="audit_run").click().run()
    _clean(at)
    options = at.selectbox(key="audit_pick").options
    assert len(options) == 2 and all("scene-0003" in o and "CAM_BACK_LEFT" in o for o in options)
    at.selectbox(key="audit_pick").set_value(options[1]).run()  # the third-sample index is 2, the last 3
    at.button(key="audit_to_doctor").click().run()
    _clean(at)
    assert at.title[0].value == "Calibration Doctor"
    ss = at.session_state
    assert ss["rig_source"] == "nuScenes dataroot" and ss["ns_scene"] == "scene-0003" and ss["ns_sample"] == 3
    assert "scene-0003 sample 3" in ss["scene"].label
    assert not warned, warned


def test_a_second_run_removes_the_folder_of_the_first(app):
    # each run writes a new temporary folder with a report of a few MiB: a session keeps one
    at = app(PAGE)
    at.multiselect(key=f"audit_scenes_{DATASET}").set_value(["scene-0003"])
    at.checkbox(key="audit_estimate").uncheck()
    at.button(key="audit_run").click().run()
    _clean(at)
    first = Path(at.session_state["audit_dir"])
    assert (first / "manifest.json").is_file()
    at.button(key="audit_run").click().run()
    _clean(at)
    second = Path(at.session_state["audit_dir"])
    assert second != first and (second / "manifest.json").is_file()
    assert not first.exists()
    shutil.rmtree(second)


@needs_sample
def test_table_problems_are_listed(app, tmp_path):
    import json
    import shutil

    root = tmp_path / "nuscenes"
    shutil.copytree(SYNTHETIC, root, ignore=shutil.ignore_patterns("samples"))
    path = root / "v1.0-mini" / "sample.json"
    samples = json.loads(path.read_text())
    samples[0]["timestamp"] = 2**70
    path.write_text(json.dumps(samples))
    out = tmp_path / "audit"
    (root / "samples").symlink_to(SYNTHETIC / "samples")
    run_audit(root, out, scenes=["scene-0001"], settings=CheckSettings(lidar=False, estimate=False),
              progress=False, options=AuditOptions(report=False))
    at = _opened(app, out)
    _clean(at)
    assert {m.label: m.value for m in at.metric}["Samples"] == "2 / 2"
    table = next(d.value for d in at.dataframe if "error_field" in d.value.columns)
    assert list(table["error_field"]) == ["timestamp"] and str(2**70) in table["error_value"][0]


@needs_sample
def test_an_audit_without_the_lidar_it_asked_for_is_a_warning(app, tmp_path):
    data = tmp_path / "nuscenes"
    shutil.copytree(SYNTHETIC, data, ignore=shutil.ignore_patterns("LIDAR_TOP"))  # the LiDAR files are gone
    out = tmp_path / "audit"
    run_audit(data, out, scenes=["scene-0002"], settings=CheckSettings(lidar=True, estimate=False),
              progress=False, options=AuditOptions(report=False))
    at = _opened(app, out)
    _clean(at)
    (warning,) = [w.value for w in at.warning if "less evidence" in w.value]
    assert "column degraded" in warning and "no LiDAR" in warning
