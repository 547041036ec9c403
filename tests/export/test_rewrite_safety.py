"""A hostile try of the rewrite: the user's mistakes are named input errors with nothing written,
``npu check`` applies the opset's rules and reports onnxruntime's refusal, and the rewritten model
keeps its meaning for every input a user can feed."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bevviz.cli import main
from bevviz.errors import InputError
from bevviz.export import check_model, compare_models, rewrite_grid_sample

F = TensorProto.FLOAT


def _grid_sample(opset: int = 16, mode: str = "bilinear", x_elem: int = F, g_elem: int = F, extra=(),
                 **attrs) -> onnx.ModelProto:
    nodes = [helper.make_node("GridSample", ["x", "g"], ["s"], name="gs", mode=mode, **attrs), *extra]
    out = "y" if extra else "s"
    return helper.make_model(helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", x_elem, [1, 2, 4, 5]),
                     helper.make_tensor_value_info("g", g_elem, [1, 3, 3, 2])],
        [helper.make_tensor_value_info(out, x_elem, [1, 2, 3, 3])]), opset_imports=[helper.make_opsetid("", opset)])


def _custom_domain() -> onnx.ModelProto:
    model = _grid_sample(extra=[helper.make_node("Mystery", ["s"], ["y"], name="mystery", domain="acme.ops")])
    model.opset_import.append(helper.make_opsetid("acme.ops", 1))
    return model


def _duplicate_names() -> onnx.ModelProto:
    return _grid_sample(extra=[helper.make_node("Relu", ["s"], ["y"], name="gs")])


MISTAKES = {
    "opset-20 name in opset 16": (lambda: _grid_sample(16, "linear"), "mode"),
    "opset-16 name in opset 20": (lambda: _grid_sample(20, "bilinear"), "mode"),
    "unknown padding": (lambda: _grid_sample(16, padding_mode="wrap"), "padding_mode"),
    "align_corners 2": (lambda: _grid_sample(16, align_corners=2), "align_corners"),
    "duplicate node names": (_duplicate_names, "node name"),
    "integer grid": (lambda: _grid_sample(16, g_elem=TensorProto.INT32), "model"),  # onnx.checker's own finding
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_the_users_mistakes_are_named_input_errors_and_nothing_is_written(name, tmp_path, capsys):
    make, field = MISTAKES[name]
    model = make()
    with pytest.raises(InputError) as info:
        rewrite_grid_sample(model)
    assert field in info.value.field
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    src.write_bytes(model.SerializeToString())
    assert main(["npu", "rewrite", str(src), str(dst)]) == 2
    assert not dst.exists() and "internal error" not in capsys.readouterr().err
    assert main(["npu", "check", str(src)]) == 2


def test_unknown_custom_domain_cannot_be_checked_but_can_be_rewritten(tmp_path, capsys):
    model = _custom_domain()
    with pytest.raises(InputError, match="acme.ops::Mystery") as info:
        rewrite_grid_sample(model, check=True)
    assert info.value.field == "op"
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    src.write_bytes(model.SerializeToString())
    assert main(["npu", "rewrite", str(src), str(dst)]) == 2 and not dst.exists()
    report = rewrite_grid_sample(model)  # unchecked: the op may be the user's NPU's own
    assert report.grid_sample_after == 0 and any(n.domain == "acme.ops" for n in report.model.graph.node)
    capsys.readouterr()
    assert main(["npu", "check", str(src)]) == 1  # onnxruntime's refusal is a failing rule, in its words
    out = capsys.readouterr().out
    assert "onnxruntime refuses to load the model" in out and "Mystery" in out
    check = check_model(model)
    assert check.onnxruntime_refusal and any(r.result.rule.id == "onnxruntime-loads" for r in check.failed())
    assert check_model(_grid_sample()).onnxruntime_refusal is None


def test_every_graph_input_is_fed_including_those_with_defaults():
    # an index the user may override (an initializer that is also an input): the int32 rewrite of
    # the model's own gathers must not freeze its default
    x = helper.make_tensor_value_info("x", F, [1, 2, 4, 5])
    g = helper.make_tensor_value_info("g", F, [1, 3, 3, 2])
    order = helper.make_tensor_value_info("order", TensorProto.INT64, [2])
    nodes = [helper.make_node("GridSample", ["x", "g"], ["s"], name="gs"),
             helper.make_node("Gather", ["s", "order"], ["y"], axis=1)]
    default = numpy_helper.from_array(np.asarray([1, 0], np.int64), "order")
    model = helper.make_model(helper.make_graph(nodes, "m", [x, g, order], [helper.make_tensor_value_info(
        "y", F, [1, 2, 3, 3])], [default]), opset_imports=[helper.make_opsetid("", 16)])
    report = rewrite_grid_sample(model, check=True)
    assert "order" in report.parity.inputs and report.parity.ok
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32),
            "g": rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32), "order": np.asarray([0, 0], np.int64)}
    runs = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
            for m in (model, report.model)]
    assert np.abs(runs[0] - runs[1]).max() <= 1e-5 and np.array_equal(runs[0][0, 0], runs[0][0, 1])


def test_compare_models_takes_paths_bytes_and_models(tmp_path):
    model = _grid_sample()
    rewritten = rewrite_grid_sample(model).model
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(model, a)
    onnx.save(rewritten, b)
    for pair in ((a, b), (str(a), rewritten), (model.SerializeToString(), b), (model, rewritten)):
        assert compare_models(*pair, runs=1).ok
    with pytest.raises(InputError, match="no such ONNX file"):
        compare_models(tmp_path / "missing.onnx", b, runs=1)
    with pytest.raises(InputError, match="onnxruntime refuses"):
        compare_models(_custom_domain(), rewritten, runs=1)


def test_an_output_in_a_missing_folder_is_refused_before_the_rewrite_naming_it(tmp_path, capsys):
    src = tmp_path / "in.onnx"
    src.write_bytes(_grid_sample().SerializeToString())
    dst = tmp_path / "missing" / "out.onnx"
    assert main(["npu", "rewrite", str(src), str(dst)]) == 2
    err = capsys.readouterr().err
    assert "field 'OUT.onnx'" in err and f"{str(dst.parent)!r}" in err and ".tmp" not in err
    assert not dst.parent.exists()
    assert main(["npu", "rewrite", str(src), str(tmp_path / "o.onnx"), "--json", str(tmp_path / "no" / "r.json")]) == 2
    assert "field '--json'" in capsys.readouterr().err and not (tmp_path / "o.onnx").exists()
