"""AppTest of the NPU export page on the embedded sample rig (small export grid, random features)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from appkit.npu import HANDED

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
    assert row["status"].lower() == "fail" and "opset = 15" in row["reason"]


def test_page_is_in_the_app_navigation(app):
    at = app(page="pages/npu_export.py")
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "NPU export"
    assert "press **Export**" in at.info[0].value


# ----------------------------------------------------------------------------- your own model

def _user_model(mode: str = "bilinear") -> bytes:
    """A small model as an exporter writes one: GridSample (reflection) plus an int64 Gather."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 6, 8])
    g = helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["batch", 5, 4, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 5, 4])
    order = numpy_helper.from_array(np.array([2, 0, 1], np.int64), "order")
    nodes = [helper.make_node("GridSample", ["x", "grid"], ["s"], name="sca_sampling", mode=mode,
                              padding_mode="reflection", align_corners=1),
             helper.make_node("Gather", ["s", "order"], ["y"], name="channel_order", axis=1)]
    model = helper.make_model(helper.make_graph(nodes, "user", [x, g], [y], [order]),
                              opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _your_model_page(data: bytes, name: str = "bev.onnx") -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[HANDED] = {"name": name, "data": data}
    at.run()
    at.radio(key="npu_source").set_value("Your ONNX model").run()
    return at


def test_uploaded_model_is_checked_rewritten_and_offered_for_download():
    at = _your_model_page(_user_model())
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (nodes,) = _frames(at, "node", "mode", "padding_mode")
    assert nodes.iloc[0]["node"] == "sca_sampling" and nodes.iloc[0]["padding_mode"] == "reflection"
    (rules,) = _frames(at, "status", "rule", "nodes", "reason")
    padding = rules[rules["rule"] == "DrivingSDK grid_sampler2d_v2: zeros or border padding"].iloc[0]
    assert padding["status"].lower() == "fail" and padding["nodes"] == "sca_sampling"
    assert "Press **Rewrite**" in at.info[0].value
    at.text_input(key="npu_up_dims").set_value("batch=3")
    at.button(key="npu_up_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GridSample"] == "0" and metrics["indices int32"] == "yes"
    assert float(metrics["max |diff|"]) <= 1e-5
    (replaced,) = _frames(at, "node", "mode", "padding_mode", "nodes_added")
    assert replaced.iloc[0]["padding_mode"] == "reflection"
    (indices,) = _frames(at, "node", "op_type", "was", "now", "how")
    assert indices.iloc[0]["now"] == "int32" and "constant" in indices.iloc[0]["how"]
    assert len(at.get("plotly_chart")) == 2  # parity and latency, side by side
    assert len(at.get("download_button")) == 1
    assert any("(3, 3, 6, 8)" in shown(c.value) for c in at.caption)  # the sizes given


def test_hostile_upload_and_bad_sizes_are_named_errors():
    at = _your_model_page(b"\x08\x07 not an onnx model \xff" * 4, name="evil*name.onnx")
    assert not at.exception, [e.value for e in at.exception]
    errors = [shown(e.value) for e in at.error]
    assert any("evil*name.onnx" in e and "field 'model'" in e and "not an ONNX model" in e for e in errors), errors
    at = _your_model_page(_user_model())
    at.text_input(key="npu_up_dims").set_value("batch=zero")
    at.button(key="npu_up_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("field 'dims'" in shown(e.value) and "batch=zero" in shown(e.value) for e in at.error)


def test_bicubic_node_is_rewritten_too():
    at = _your_model_page(_user_model("bicubic"))
    at.button(key="npu_up_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert {m.label: m.value for m in at.metric}["GridSample"] == "0"
    (replaced,) = _frames(at, "node", "mode", "form")
    assert replaced.iloc[0]["mode"] == "bicubic" and replaced.iloc[0]["form"] == "per-node"
