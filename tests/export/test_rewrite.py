"""rewrite_grid_sample on realistic BEV models: 0 GridSample, int32 indices, parity <= 1e-5 (bicubic 1e-4)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from bevviz.export import inspect_onnx, rewrite_grid_sample
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS

from .bev_models import (
    Bicubic,
    MixedSampling,
    MSDeformAttn,
    SpatialCrossAttention,
    export_torchscript,
    msda_inputs,
    sca_inputs,
)

TOL = 1e-5
LEVELS = [(12, 20), (6, 10), (3, 5)]


def _run(model: onnx.ModelProto, feed: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def _assert_npu_form(report) -> None:
    """0 GridSample, every gather / scatter index int32, valid model."""
    onnx.checker.check_model(report.model, full_check=True)
    inv = inspect_onnx(report.model)
    assert inv.op_counts.get("GridSample", 0) == 0
    assert inv.index_dtypes(GATHER_OPS + SCATTER_OPS, role=None) == ["int32"], inv.index_rows()
    assert report.int32_ok and report.grid_sample_after == 0 and not report.refused


def test_bevformer_spatial_cross_attention():
    feats, ref = sca_inputs()
    module = SpatialCrossAttention(16)
    report = rewrite_grid_sample(export_torchscript(module, (feats, ref), ["feats", "ref"]), check=True)
    _assert_npu_form(report)
    assert report.grid_sample_before == 1 and len(report.replaced) == 1
    assert report.replaced[0].note.startswith("N*H*W = 576")
    assert report.replaced[0].form == "fused: Mul+ReduceSum"  # (sampled * valid).sum(-1) as one gather
    assert report.parity.max_abs_diff <= TOL and report.parity.ok
    (out,) = _run(report.model, {"feats": feats.numpy(), "ref": ref.numpy()})
    with torch.no_grad():
        assert np.abs(out - module(feats, ref).numpy()).max() <= TOL  # and against eager PyTorch


def test_multi_scale_deformable_attention_three_levels():
    module = MSDeformAttn(LEVELS)
    args = msda_inputs(LEVELS)
    report = rewrite_grid_sample(export_torchscript(module, args, ["value", "loc", "attn"]), check=True)
    _assert_npu_form(report)
    assert report.grid_sample_before == 3 and len(report.replaced) == 3
    # torch.stack(dim=-2).flatten(-2) * attn, summed: the three levels as one fused gather
    assert {c.form for c in report.replaced} == {"fused: Stack+Reshape+Mul+ReduceSum (3 levels)"}
    assert report.parity.max_abs_diff <= TOL
    (out,) = _run(report.model, dict(zip(["value", "loc", "attn"], (a.numpy() for a in args))))
    with torch.no_grad():
        assert np.abs(out - module(*args).numpy()).max() <= TOL


def test_mixed_modes_paddings_and_the_models_own_int64_gathers():
    x, grid = torch.randn(2, 3, 7, 9), torch.rand(2, 5, 6, 2) * 2.6 - 1.3
    raw = export_torchscript(MixedSampling(), (x, grid), ["x", "grid"])
    before = inspect_onnx(onnx.load_from_string(raw))
    assert "int64" in before.index_dtypes(GATHER_OPS)  # index_select / gather with int64 indices
    report = rewrite_grid_sample(raw, check=True)
    _assert_npu_form(report)
    got = {(c.mode, c.padding_mode, c.align_corners) for c in report.replaced}
    assert got == set(MixedSampling.SETTINGS)
    hows = {c.how for c in report.index_changes if c.was == "int64"}
    assert hows and hows <= {"int32 copy of a constant", "cast added", "widening cast removed"}
    assert all("checked" in c.range for c in report.index_changes if c.how == "int32 copy of a constant")
    assert report.parity.max_abs_diff <= TOL
    (out,) = _run(report.model, {"x": x.numpy(), "grid": grid.numpy()})
    with torch.no_grad():
        assert np.abs(out - MixedSampling()(x, grid).numpy()).max() <= TOL


def test_dynamic_batch_axis_runs_at_other_sizes():
    feats, ref = sca_inputs(cams=3, channels=8, queries=20)
    module = SpatialCrossAttention(8)
    dyn = {"feats": {0: "cams"}, "ref": {0: "cams", 1: "queries"}}
    report = rewrite_grid_sample(export_torchscript(module, (feats, ref), ["feats", "ref"], dynamic=dyn),
                                 check=True, dims={"cams": 5, "queries": 33})
    _assert_npu_form(report)
    assert "symbolic" in report.replaced[0].note
    assert report.parity.inputs["feats"][0] == 5 and report.parity.max_abs_diff <= TOL
    for cams in (1, 6):
        f, r = sca_inputs(cams=cams, channels=8, queries=7, seed=cams)
        (out,) = _run(report.model, {"feats": f.numpy(), "ref": r.numpy()})
        with torch.no_grad():
            assert np.abs(out - module(f, r).numpy()).max() <= TOL


def test_bicubic_is_rewritten_within_1e_4():
    x, grid = torch.randn(1, 2, 5, 6), torch.rand(1, 3, 4, 2) * 2.6 - 1.3
    report = rewrite_grid_sample(export_torchscript(Bicubic(), (x, grid), ["x", "grid"]), check=True)
    assert {c.mode for c in report.replaced} == {"bilinear", "bicubic"} and not report.refused
    assert report.grid_sample_after == 0 and report.parity.max_abs_diff <= 1e-4
    (out,) = _run(report.model, {"x": x.numpy(), "grid": grid.numpy()})
    with torch.no_grad():
        assert np.abs(out - Bicubic()(x, grid).numpy()).max() <= 1e-4


def _grid_sample_model(rank: int, opset: int, mode: str = "linear") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2] + [4] * (rank - 2))
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, [1] + [3] * (rank - 2) + [rank - 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2] + [3] * (rank - 2))
    node = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", mode=mode)
    return helper.make_model(helper.make_graph([node], "g", [x, g], [y]),
                             opset_imports=[helper.make_opsetid("", opset)])


def test_five_d_is_rewritten_and_opset_20_names_are_read():
    report = rewrite_grid_sample(_grid_sample_model(5, 20), check=True)
    assert report.grid_sample_after == 0 and report.replaced[0].mode == "bilinear"
    assert report.parity.max_abs_diff <= TOL
    report = rewrite_grid_sample(_grid_sample_model(4, 20), check=True)  # mode "linear" = bilinear
    assert report.replaced[0].mode == "bilinear" and report.parity.max_abs_diff <= TOL
    report = rewrite_grid_sample(_grid_sample_model(4, 20, "cubic"), check=True)
    assert report.replaced[0].mode == "bicubic" and report.parity.max_abs_diff <= 1e-4


def test_rest_of_the_graph_is_untouched_and_dst_is_written(tmp_path):
    x, grid = torch.randn(2, 3, 7, 9), torch.rand(2, 5, 6, 2) * 2.6 - 1.3
    raw = export_torchscript(MixedSampling(), (x, grid), ["x", "grid"])
    original = onnx.load_from_string(raw)
    report = rewrite_grid_sample(raw, tmp_path / "out.onnx", index_dtype="int64")
    kept = {n.name for n in original.graph.node if n.op_type != "GridSample"}
    now = {n.name: n for n in report.model.graph.node}
    assert kept <= set(now)  # int64 mode: nothing but the GridSample nodes changed
    for node in original.graph.node:
        if node.op_type != "GridSample":
            assert now[node.name] == node
    assert [o.name for o in report.model.graph.output] == [o.name for o in original.graph.output]
    assert onnx.load(tmp_path / "out.onnx") == report.model
    assert report.index_changes == []


def test_nearest_ties_round_half_to_even_like_pytorch():
    # pixel x = 0.5, 1.5, 2.5 exactly (align_corners=True on W = 5: g = x / 2 - 1)
    x = torch.arange(10, dtype=torch.float32).view(1, 2, 1, 5)
    grid = torch.tensor([[[[-0.75, 0.0], [-0.25, 0.0], [0.25, 0.0], [0.75, 0.0]]]])
    model = _grid_sample_model(4, 16, "nearest")
    model.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 5
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 1
    model.graph.input[1].type.tensor_type.shape.dim[2].dim_value = 4
    model.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 1
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 1
    model.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 4
    model.graph.node[0].attribute.append(helper.make_attribute("align_corners", 1))
    report = rewrite_grid_sample(model)
    (out,) = _run(report.model, {"x": x.numpy(), "g": grid.numpy()})
    ref = F.grid_sample(x, grid, mode="nearest", align_corners=True).numpy()
    assert np.array_equal(out, ref) and ref[0, 0, 0].tolist() == [0.0, 2.0, 2.0, 4.0]


def test_grid_sample_in_if_branches_and_local_functions():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 6])
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 3, 4, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])

    def branch(name, pad):
        return helper.make_graph([helper.make_node("GridSample", ["x", "g"], [f"{name}_y"], padding_mode=pad)], name,
                                 [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [1, 2, 3, 4])])

    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t", "border"), else_branch=branch("e", "zeros"))
    model = helper.make_model(helper.make_graph([node], "if", [x, g, cond], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    report = rewrite_grid_sample(model)
    assert report.grid_sample_before == 2 and report.grid_sample_after == 0
    rng = np.random.default_rng(0)
    for c in (True, False):
        feed = {"x": rng.standard_normal((1, 2, 5, 6)).astype(np.float32),
                "g": rng.uniform(-1.3, 1.3, (1, 3, 4, 2)).astype(np.float32), "c": np.array(c)}
        assert np.abs(_run(report.model, feed)[0] - _run(model, feed)[0]).max() <= TOL

    fn = helper.make_function("user.ops", "Sampler", ["a", "b"], ["o"],
                              [helper.make_node("GridSample", ["a", "b"], ["o"], align_corners=1)],
                              opset_imports=[helper.make_opsetid("", 17)])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Sampler", ["x", "g"], ["y"], domain="user.ops")], "fn", [x, g], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("user.ops", 1)], functions=[fn])
    report = rewrite_grid_sample(model, check=True)
    assert report.grid_sample_after == 0 and "user.ops::Sampler" in report.notes[0]
    assert report.parity.max_abs_diff <= TOL
