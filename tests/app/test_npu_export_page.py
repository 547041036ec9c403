"""AppTest of the NPU export page on the embedded sample rig (small export grid, random features)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from .conftest import shown

pytestmark = pytest.mark.slow

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "npu_export.py")


def _small(at: AppTest, samplers: list[str]) -> AppTest:
    at.multiselect(key="npu_samplers").set_value(samplers)
    at.radio(key="npu_features").set_value("random").run()  # enables the C input
    at.number_input(key="npu_channels").set_value(4)
    at.select_slider(key="npu_stride").set_value(32)
    at.select_slider(key="npu_factor_(200, 200)").set_value(20)  # BEVFormer grid 200 x 200 -> 10 x 10
    at.toggle(key="npu_ground").set_value(True)
    return at


def _frames(at: AppTest, *columns: str) -> list:
    """Dataframes shown that have all ``columns`` (AppTest does not expose dataframe keys)."""
    return [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]


@pytest.fixture(scope="module")
def exported():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "press **Export**" in at.info[0].value
    _small(at, ["grid_sample", "lut"]).button(key="npu_run").click().run()
    return at


def test_export_shows_inventory_rules_parity_and_download(exported):
    at = exported
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (summary,) = _frames(at, "sampler", "GridSample", "parity")
    summary = summary.set_index("sampler")
    assert summary.loc["grid_sample (reference)", "GridSample"] == 1
    assert summary.loc["lookup table", "GridSample"] == 0
    assert summary.loc["lookup table", "gather index"] == "int32"
    assert (summary["parity"] == "ok").all()
    assert (summary["max |diff|"] <= 1e-5).all()
    assert len(at.get("plotly_chart")) == 3  # op inventory, parity, latency
    rules = _frames(at, "status", "rule", "reason", "source")
    assert len(rules) == 2  # one rules table per sampler tab
    assert "DrivingSDK grid_sampler2d_v2: C <= 128" in set(rules[0]["rule"])
    assert len(at.get("download_button")) == 2
    (table,) = _frames(at, "id", "when", "check", "source")
    assert table.shape[0] >= 15


def test_bad_settings_show_the_field_and_value(exported):
    at = exported
    at.multiselect(key="npu_samplers").set_value(["deformable"])
    at.toggle(key="npu_align").set_value(True)
    at.button(key="npu_run").click().run()
    assert not at.exception
    assert any("field 'align_corners'" in shown(e.value) and "True" in shown(e.value) for e in at.error)


def test_opset_15_reference_fails_with_a_clear_message(exported):
    at = exported
    at.toggle(key="npu_align").set_value(False)
    at.multiselect(key="npu_samplers").set_value(["grid_sample"])
    at.radio(key="npu_exporter").set_value("torchscript")
    at.number_input(key="npu_opset").set_value(15)
    at.button(key="npu_run").click().run()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert any("field 'opset'" in e and "16" in e and "(got 15)" in e for e in errors), errors
    (rules,) = _frames(at, "status", "rule", "reason", "source")
    row = rules[rules["rule"] == "GridSample needs opset >= 16"].iloc[0]
    assert "fail" in row["status"] and "opset = 15" in row["reason"]


def test_page_is_in_the_app_navigation(app):
    at = app(page="pages/npu_export.py")
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "NPU export"
    assert "press **Export**" in at.info[0].value
