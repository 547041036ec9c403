"""bevviz npu check / rewrite: exit 0 / 1 / 2, the table and the JSON."""

from __future__ import annotations

import json

import onnx
import torch
from onnx import TensorProto, helper

from bevviz.cli import main
from bevviz.export import inspect_onnx

from .bev_models import MixedSampling, export_torchscript


def _write(tmp_path, name, module, args, dynamic=None):
    path = tmp_path / name
    path.write_bytes(export_torchscript(module, args, ["x", "g"], dynamic=dynamic))
    return path


def test_rewrite_writes_a_grid_sample_free_model_and_reports_parity(tmp_path, capsys):
    src = _write(tmp_path, "mixed.onnx", MixedSampling(), (torch.randn(2, 3, 7, 9), torch.rand(2, 5, 6, 2) * 2.6 - 1.3),
                 dynamic={"x": {0: "batch"}, "g": {0: "batch"}})
    dst = tmp_path / "out.onnx"
    assert main(["npu", "rewrite", str(src), str(dst), "--dim", "batch=3", "--runs", "2",
                 "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "GridSample 4 -> 0" in out and "max |diff|" in out and "rewritten" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["grid_sample"] == {"before": 4, "after": 0} and report["indices_int32"]
    assert report["parity"]["ok"] and report["parity"]["max_abs_diff"] <= 1e-5
    assert report["parity"]["inputs"]["x"][0] == 3
    assert set(report["parity"]["latency_ms"]) == {"original", "rewritten", "ratio"}
    assert inspect_onnx(dst).op_counts.get("GridSample", 0) == 0
    onnx.checker.check_model(str(dst), full_check=True)


def test_rewrite_exits_1_for_a_refused_node(tmp_path, capsys):
    # integer features with linear weights: ONNX allows them, the rewrite (float weights) does not
    x = helper.make_tensor_value_info("x", TensorProto.INT32, [1, 2, 6, 7])
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 4, 5, 2])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [1, 2, 4, 5])
    model = helper.make_model(helper.make_graph([helper.make_node("GridSample", ["x", "g"], ["y"])], "g", [x, g], [y]),
                              opset_imports=[helper.make_opsetid("", 16)])
    src = tmp_path / "int.onnx"
    onnx.save(model, src)
    assert main(["npu", "rewrite", str(src), str(tmp_path / "out.onnx"), "--no-check"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED (kept)" in out and "int32 in bilinear mode" in out


def test_check_exits_1_when_a_rule_fails_and_0_after_the_rewrite(tmp_path, capsys):
    src = _write(tmp_path, "mixed.onnx", MixedSampling(), (torch.randn(1, 3, 7, 9), torch.rand(1, 5, 6, 2)))
    # int64 gathers fail the Ascend gather rule (warn), reflection the DrivingSDK padding rule (error)
    assert main(["npu", "check", str(src), "--json", str(tmp_path / "c.json")]) == 1
    data = json.loads((tmp_path / "c.json").read_text())
    failed = {r["id"] for r in data["rules"] if r["status"] == "fail"}
    assert {"ascend-gather-int32", "drivingsdk-grid-sampler2d-v2-padding"} <= failed
    row = next(r for r in data["rules"] if r["id"] == "drivingsdk-grid-sampler2d-v2-padding" and r["status"] == "fail")
    assert set(row["nodes"].split(", ")) == {"/GridSample_2", "/GridSample_3"}  # the reflection ones
    assert len(data["grid_sample_nodes"]) == 4
    assert main(["npu", "rewrite", str(src), str(tmp_path / "out.onnx"), "--no-check"]) == 0
    capsys.readouterr()
    assert main(["npu", "check", str(tmp_path / "out.onnx"), "--backend", "Ascend", "--backend", "ONNX"]) == 0
    assert "FAILED" not in capsys.readouterr().out


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    cases = [["npu", "check", str(tmp_path / "missing.onnx")],
             ["npu", "check", str(tmp_path / "junk.onnx")],
             ["npu", "rewrite", str(tmp_path / "junk.onnx"), str(tmp_path / "o.onnx")],
             ["npu", "check", str(tmp_path / "junk.onnx"), "--backend", "nosuch"],
             ["npu", "rewrite", str(tmp_path / "junk.onnx"), str(tmp_path / "o.onnx"), "--dim", "batch"],
             ["npu", "rewrite", str(tmp_path / "junk.onnx"), str(tmp_path / "junk.onnx")]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bevviz: error: ") and "field '" in err[0], err


def test_a_missing_model_or_a_folder_is_named_by_its_argument(tmp_path, capsys):
    assert main(["npu", "check", str(tmp_path / "none.onnx")]) == 2
    assert "field 'MODEL.onnx': no such file" in capsys.readouterr().err
    assert main(["npu", "rewrite", str(tmp_path), str(tmp_path / "out.onnx")]) == 2
    assert "field 'IN.onnx'" in (err := capsys.readouterr().err) and "is a folder" in err
    assert not (tmp_path / "out.onnx").exists()
