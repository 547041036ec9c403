"""inspect_onnx on hand-built graphs, the rules table and its evaluator, and the exporter's
index translations on tiny stand-in modules (defined here, never shipped)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from bevviz.bev_grid import BEVGrid
from bevviz.export import (
    DEFAULT_RULES_PATH,
    FIELDS,
    ExportSpec,
    check_parity,
    coarsen_factors,
    coarsen_grid,
    evaluate_rules,
    export_module,
    inspect_onnx,
    load_rules,
    parse_rules,
    rule_facts,
)
from bevviz.export.exporter import ExportResult
from bevviz.export.models import ExportSettings


def _save(tmp_path, nodes, inputs, outputs, inits=(), opset=18, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


# ----------------------------------------------------------------------------- inspection

def test_index_dtypes_roles_and_casts(tmp_path):
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),            # shape bookkeeping
        helper.make_node("Gather", ["x", "zero"], ["row0"], axis=1),           # constant scalar select
        helper.make_node("Cast", ["idx32"], ["idx64"], to=TensorProto.INT64),  # exporter-style widening
        helper.make_node("Reshape", ["idx64", "flat"], ["idx64f"]),
        helper.make_node("Gather", ["table", "idx64f"], ["rows"], axis=0),     # data gather, int64 via Cast
        helper.make_node("Gather", ["table", "lut"], ["rows2"], axis=0),       # stored table, int32
        helper.make_node("ScatterElements", ["acc", "sidx", "upd"], ["out"], axis=0, reduction="add"),
        helper.make_node("Cast", ["rows2"], ["rows2d"], to=TensorProto.DOUBLE),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "flat"),
             numpy_helper.from_array(np.array([0, 2, 1], np.int32), "lut")]
    path = _save(tmp_path, nodes,
                 [_vi("x", TensorProto.FLOAT, ["N", 4]), _vi("idx32", TensorProto.INT32, [3]),
                  _vi("table", TensorProto.FLOAT, [5, 4]), _vi("acc", TensorProto.FLOAT, [5, 4]),
                  _vi("sidx", TensorProto.INT64, [3, 4]), _vi("upd", TensorProto.FLOAT, [3, 4])],
                 [_vi("n", TensorProto.INT64, []), _vi("row0", TensorProto.FLOAT, ["N"]),
                  _vi("rows", TensorProto.FLOAT, [3, 4]), _vi("rows2d", TensorProto.DOUBLE, [3, 4]),
                  _vi("out", TensorProto.FLOAT, [5, 4])], inits)
    rep = inspect_onnx(path)
    assert rep.opset == 18 and rep.checker_error is None
    assert rep.op_counts["Gather"] == 4 and rep.op_counts["Cast"] == 2
    roles = {u.tensor: u.role for u in rep.index_uses}
    assert roles == {"zero": "select", "idx64f": "data", "lut": "data", "sidx": "data"}
    assert [u.role for u in rep.index_uses if u.op_type == "Gather" and u.node == "Gather#1"] == ["shape"]
    widened = next(u for u in rep.index_uses if u.tensor == "idx64f")
    assert (widened.dtype, widened.cast_from) == ("int64", "int32")
    table = next(u for u in rep.index_uses if u.tensor == "lut")
    assert table.constant and table.dtype == "int32" and table.shape == (3,)
    assert rep.casts_into_index == 1 and rep.casts_after_gather == 1
    assert rep.index_dtypes(("Gather",)) == ["int32", "int64"]
    assert rep.index_dtypes(("ScatterElements",), reduction="add") == ["int64"] and rep.scatter_add_count == 1
    assert rep.dynamic_dims == {"x": {0: "N"}, "row0": {0: "N"}}
    assert [t.name for t in rep.inputs][:2] == ["x", "idx32"]
    assert len(rep.index_rows()) == 5 and rep.op_rows()[0] == {"op": "Gather", "count": 4}


def test_int64_scatter_add_index_is_flagged_by_the_drivingsdk_rule(tmp_path):
    nodes = [helper.make_node("ScatterElements", ["acc", "sidx", "upd"], ["out"], axis=0, reduction="add")]
    path = _save(tmp_path, nodes, [_vi("acc", TensorProto.FLOAT, [5, 4]), _vi("sidx", TensorProto.INT64, [3, 4]),
                                   _vi("upd", TensorProto.FLOAT, [3, 4])], [_vi("out", TensorProto.FLOAT, [5, 4])])
    settings = {"sampler": "gather_scatter", "dtype": "float32"}
    rules = {r.rule.id: r for r in evaluate_rules(settings, inspect_onnx(path))}
    assert rules["drivingsdk-scatter-add-int32"].status == "fail"
    assert "int64" in rules["drivingsdk-scatter-add-int32"].reason
    assert rules["drivingsdk-scatter-add-float32"].status == "pass"


def test_int32_scatternd_is_invalid_onnx_and_flagged(tmp_path):
    nodes = [helper.make_node("ScatterND", ["acc", "sidx", "upd"], ["out"], reduction="add")]
    path = _save(tmp_path, nodes, [_vi("acc", TensorProto.FLOAT, [5, 4]), _vi("sidx", TensorProto.INT32, [3, 1]),
                                   _vi("upd", TensorProto.FLOAT, [3, 4])], [_vi("out", TensorProto.FLOAT, [5, 4])])
    rep = inspect_onnx(path)
    assert rep.checker_error and "int32" in rep.checker_error
    rules = {r.rule.id: r for r in evaluate_rules({"sampler": "gather_scatter", "dtype": "float32"}, rep)}
    assert rules["onnx-nd-index-int64"].status == "fail"
    assert rules["onnx-model-valid"].status == "fail"
    assert rules["drivingsdk-scatter-add-int32"].status == "pass"  # int32, as DrivingSDK wants...


def test_dynamic_shape_ops_are_found_in_subgraphs(tmp_path):
    then = helper.make_graph([helper.make_node("NonZero", ["c"], ["nz"])], "then", [],
                             [_vi("nz", TensorProto.INT64, [1, None])])
    other = helper.make_graph([helper.make_node("Identity", ["e"], ["id"])], "else", [],
                              [_vi("id", TensorProto.INT64, [1, None])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    path = _save(tmp_path, nodes, [_vi("cond", TensorProto.BOOL, []), _vi("c", TensorProto.FLOAT, [4]),
                                   _vi("e", TensorProto.INT64, [1, 2])], [_vi("y", TensorProto.INT64, [1, None])])
    rep = inspect_onnx(path)
    assert rep.dynamic_ops == {"NonZero": 1, "If": 1} and rep.has_nonzero
    rules = {r.rule.id: r for r in evaluate_rules({"sampler": "gather_scatter"}, rep)}
    assert rules["npu-no-data-dependent-shapes"].status == "fail"
    assert "NonZero" in rules["npu-no-data-dependent-shapes"].reason


def test_inspect_bad_paths(tmp_path):
    with pytest.raises(ValueError, match="field 'path'.*no such ONNX file"):
        inspect_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a model at all")
    with pytest.raises(ValueError, match="field 'model'.*not an ONNX model"):
        inspect_onnx(tmp_path / "junk.onnx")


# ----------------------------------------------------------------------------- rules

REFERENCE = dict(sampler="grid_sample", mode="bilinear", padding_mode="zeros", align_corners=False,
                 channels=64, dtype="float32", opset=18)


def _status(settings, report=None):
    return {r.rule.id: r for r in evaluate_rules(settings, report)}


def test_shipped_rules_parse_and_each_names_its_source():
    rules = load_rules()
    assert len(rules) >= 15
    for r in rules:
        assert r.source and r.message and r.severity in ("error", "warn", "info")
    ids = {r.id for r in rules}
    assert {"onnx-gridsample-opset16", "cann-gridsample-mode", "drivingsdk-grid-sampler2d-v2-dtype",
            "drivingsdk-grid-sampler2d-v2-mode", "drivingsdk-grid-sampler2d-v2-padding",
            "drivingsdk-grid-sampler2d-v2-channels-max", "drivingsdk-grid-sampler2d-v2-channels-multiple-of-4",
            "drivingsdk-scatter-add-int32", "npu-no-data-dependent-shapes"} <= ids


def test_reference_settings_pass_the_gridsample_rules():
    res = _status(REFERENCE)
    for rid in ("onnx-gridsample-opset16", "cann-gridsample-mode", "drivingsdk-grid-sampler2d-v2-dtype",
                "drivingsdk-grid-sampler2d-v2-padding", "drivingsdk-grid-sampler2d-v2-channels-max",
                "drivingsdk-grid-sampler2d-v2-channels-multiple-of-4"):
        assert res[rid].status == "pass", (rid, res[rid].reason)
    # model facts are missing before an export
    assert res["onnx-model-valid"].status == "unknown" and "export the model" in res["onnx-model-valid"].reason


def test_c130_fails_c_le_128_and_c_multiple_of_4():
    res = _status({**REFERENCE, "channels": 130})
    assert res["drivingsdk-grid-sampler2d-v2-channels-max"].status == "fail"
    assert res["drivingsdk-grid-sampler2d-v2-channels-max"].reason == "channels = 130, needs channels <= 128"
    assert res["drivingsdk-grid-sampler2d-v2-channels-multiple-of-4"].status == "fail"
    assert _status({**REFERENCE, "channels": 128})["drivingsdk-grid-sampler2d-v2-channels-max"].status == "pass"
    assert _status({**REFERENCE, "channels": 6})["drivingsdk-grid-sampler2d-v2-channels-multiple-of-4"].status == "fail"


def test_reflection_padding_fails_the_drivingsdk_padding_rule_only():
    res = _status({**REFERENCE, "padding_mode": "reflection"})
    assert res["drivingsdk-grid-sampler2d-v2-padding"].status == "fail"
    assert "'reflection'" in res["drivingsdk-grid-sampler2d-v2-padding"].reason
    assert res["cann-gridsample-mode"].status == "pass"
    assert _status({**REFERENCE, "padding_mode": "border"})["drivingsdk-grid-sampler2d-v2-padding"].status == "pass"


def test_bicubic_float16_and_opset15_fail_their_rules():
    res = _status({**REFERENCE, "mode": "bicubic", "dtype": "float16", "opset": 15})
    assert res["cann-gridsample-mode"].status == "fail"
    assert res["drivingsdk-grid-sampler2d-v2-mode"].status == "fail"
    assert res["drivingsdk-grid-sampler2d-v2-dtype"].status == "fail"
    assert res["cann-gridsample-dtype"].status == "pass"
    assert res["onnx-gridsample-opset16"].status == "fail"


def test_gridsample_rules_do_not_apply_to_replacement_samplers():
    res = _status({**REFERENCE, "sampler": "lut", "channels": 130, "padding_mode": "reflection"})
    assert res["drivingsdk-grid-sampler2d-v2-channels-max"].status == "n/a"
    assert "grid_sample_used = False" in res["drivingsdk-grid-sampler2d-v2-channels-max"].reason


def test_a_user_rule_is_one_row():
    data = json.loads(DEFAULT_RULES_PATH.read_text())
    data["rules"].append({"id": "my-npu-c-le-96", "severity": "warn", "when": [],
                          "check": [{"field": "channels", "op": "<=", "value": 96},
                                    {"field": "op_counts.Cast", "op": "<", "value": 3}],
                          "source": "my NPU's datasheet", "message": "C <= 96 and few casts"})
    rules = parse_rules(data)
    facts = rule_facts({**REFERENCE, "channels": 130})
    facts.update(op_counts={"Cast": 5})
    res = {r.rule.id: r for r in evaluate_rules(facts, None, rules)}["my-npu-c-le-96"]
    assert res.status == "fail"
    assert res.reason == "channels = 130, needs channels <= 96; op_counts.Cast = 5, needs op_counts.Cast < 3"
    assert res.as_row()["source"] == "my NPU's datasheet"


@pytest.mark.parametrize("row, match", [
    ({"id": "x", "check": {"field": "chanels", "op": "<=", "value": 1}, "source": "s", "message": "m"},
     r"rules\[x\]\.check\.field.*unknown field"),
    ({"id": "x", "check": {"field": "channels", "op": "=<", "value": 1}, "source": "s", "message": "m"},
     r"rules\[x\]\.check\.op.*unknown operator"),
    ({"id": "x", "check": {"field": "channels", "op": "<="}, "source": "s", "message": "m"},
     r"rules\[x\]\.check\.value"),
    ({"id": "x", "check": {"field": "channels", "op": "<=", "value": 1}, "message": "m"},
     r"rules\[x\]\.source.*required"),
    ({"id": "x", "severity": "fatal", "check": {"field": "channels", "op": "<=", "value": 1}, "source": "s",
      "message": "m"}, r"rules\[x\]\.severity"),
    ({"check": {"field": "channels", "op": "<=", "value": 1}, "source": "s", "message": "m"}, r"rules\[0\]\.id"),
])
def test_bad_rule_rows_name_rule_and_field(row, match):
    with pytest.raises(ValueError, match=match):
        parse_rules([row])


def test_bad_rules_files(tmp_path):
    with pytest.raises(ValueError, match="no such rules file"):
        load_rules(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{ not json")
    with pytest.raises(ValueError, match="malformed JSON"):
        load_rules(tmp_path / "bad.json")
    dup = {"id": "a", "check": {"field": "channels", "op": "<=", "value": 1}, "source": "s", "message": "m"}
    with pytest.raises(ValueError, match="duplicate rule id"):
        parse_rules([dup, dup])


def test_every_field_a_model_report_provides_is_documented(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    rep = inspect_onnx(_save(tmp_path, nodes, [_vi("x", TensorProto.FLOAT, [2])], [_vi("y", TensorProto.FLOAT, [2])]))
    facts = rule_facts(ExportSettings(sampler="lut").facts(), rep)
    assert set(facts) <= set(FIELDS)


# ----------------------------------------------------------------------------- exporter translations

class _IndexStandIn(torch.nn.Module):
    """Tiny test stand-in: int32 row gather, then an int32 scatter-add with repeated cells."""

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        rows = x.index_select(0, idx)                       # (M, C)
        cells = torch.remainder(idx, 3)                     # repeated targets
        return x.new_zeros(3, x.shape[1]).index_add(0, cells, rows)


def _stand_in_result(tmp_path, keep_int32: bool, name: str) -> tuple[ExportResult, object]:
    x = torch.randn(6, 4)
    idx = torch.tensor([0, 5, 3, 3, 1, 4, 2], dtype=torch.int32)
    spec = ExportSpec(_IndexStandIn().eval(), (x, idx), ("x", "idx"), ("y",), {"x": {0: "R"}, "idx": {0: "M"}})
    path = tmp_path / name
    secs, notes = export_module(spec, path, 18, "dynamo", keep_int32)
    res = ExportResult("stand-in", str(path), 18, 18, "dynamo", [], [], secs, ExportSettings(), notes, spec)
    return res, inspect_onnx(path)


def test_int32_translations_keep_int32_and_sum_duplicates(tmp_path):
    res, rep = _stand_in_result(tmp_path, True, "keep.onnx")
    assert rep.index_dtypes(("Gather",)) == ["int32"] and rep.casts_into_index == 0
    assert rep.index_dtypes(("ScatterElements",), reduction="add") == ["int32"]
    assert "ScatterND" not in rep.op_counts and rep.checker_error is None
    p = check_parity(res, runs=1)
    assert p.ok, p.max_abs_diff
    other = {"x": torch.randn(9, 4), "idx": torch.tensor([8, 8, 0, 1], dtype=torch.int32)}
    assert check_parity(res, runs=1, inputs=other).ok


def test_default_dynamo_translations_widen_and_break_int32(tmp_path):
    _, rep = _stand_in_result(tmp_path, False, "default.onnx")
    gather = next(u for u in rep.index_uses if u.op_type == "Gather" and u.role == "data")
    assert (gather.dtype, gather.cast_from) == ("int64", "int32")
    assert rep.casts_into_index >= 1
    # torch 2.13's index_add translation: ScatterND with int32 indices, invalid ONNX
    assert rep.op_counts.get("ScatterND") == 1 and rep.checker_error is not None
    rules = {r.rule.id: r for r in evaluate_rules({"sampler": "gather_scatter", "dtype": "float32"}, rep)}
    assert rules["exporter-index-casts"].status == "fail"
    assert rules["onnx-nd-index-int64"].status == "fail"


# ----------------------------------------------------------------------------- export grid

def test_coarsen_factors_tile_the_grid_exactly():
    grid = BEVGrid()  # BEVFormer: 200 x 200 cells of 0.512 m
    factors, default = coarsen_factors(grid)
    assert factors == [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 200] and default == 10
    small = coarsen_grid(grid, default, (0.0,))
    assert small.shape == (20, 20) and small.z_values == (0.0,) and small.x_range == grid.x_range
    assert coarsen_factors(BEVGrid(resolution=2.048))[1] == 5  # 50 x 50 -> 10 x 10
    with pytest.raises(ValueError, match="field 'factor'.*\\(got 3\\)"):
        coarsen_grid(grid, 3)
