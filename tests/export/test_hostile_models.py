"""Hostile models end in a named InputError, in bounded memory and without hanging (a 60 s
timeout, not a speed target), before onnxruntime."""

from __future__ import annotations

import os
import resource

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bevviz.errors import InputError
from bevviz.export import compare_models, inspect_onnx, load_model, model_from_bytes, rewrite_grid_sample
from bevviz.export.onnx_file import MAX_ONNX_BYTES

EXTRA_MIB = 200
pytestmark = pytest.mark.timeout(60)


def _small_model(**init) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    for k, v in init.items():
        setattr(w, k, v)
    return helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                             opset_imports=[helper.make_opsetid("", 17)])


def _refused(fn, *args, match: str, **kwargs) -> InputError:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=match) as info:
        fn(*args, **kwargs)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < EXTRA_MIB * 1024  # KiB on Linux
    return info.value


def test_not_onnx_and_truncated(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"PK\x03\x04 this is a zip, not a model" * 10)
    _refused(rewrite_grid_sample, tmp_path / "junk.onnx", match="field 'model'.*not an ONNX model")
    raw = _small_model().SerializeToString()
    err = _refused(rewrite_grid_sample, raw[: len(raw) // 2], match="not an ONNX model, or truncated")
    assert err.field == "model"
    _refused(model_from_bytes, b"", match="not an ONNX model")


def test_claims_of_two_gigabytes(tmp_path):
    # a length prefix claiming a 2 GiB graph field, in a 20-byte file
    claim = bytes([0x3A]) + bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 14
    _refused(rewrite_grid_sample, claim, match="not an ONNX model, or truncated")
    # a sparse 2 GiB file: refused from its size, never read
    big = tmp_path / "big.onnx"
    with open(big, "wb") as fh:
        fh.truncate(2 * 1024**3)
    _refused(load_model, big, match=f"MAX_ONNX_BYTES = {MAX_ONNX_BYTES}")
    # external data claiming 2 GiB from a 16-byte file
    (tmp_path / "w.bin").write_bytes(b"\x00" * 16)
    model = _small_model(data_location=TensorProto.EXTERNAL, raw_data=b"")
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], "w.bin", offset=0, length=2**31)
    (tmp_path / "claims.onnx").write_bytes(model.SerializeToString())
    _refused(rewrite_grid_sample, tmp_path / "claims.onnx", match="runs past the end of 'w.bin'")
    # an input declared 2**31 floats: the check refuses before allocating
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**31])
    huge = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**31])]),
                             opset_imports=[helper.make_opsetid("", 17)])
    _refused(compare_models, huge, huge, match="field 'inputs'.*MAX_CHECK_BYTES")


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin", "link.bin"])
def test_external_data_outside_the_folder(tmp_path, location):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 8)
    os.symlink(tmp_path / "secret.bin", inner / "link.bin")
    model = _small_model(data_location=TensorProto.EXTERNAL, raw_data=b"")
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], location, offset=0, length=8)
    (inner / "m.onnx").write_bytes(model.SerializeToString())
    err = _refused(rewrite_grid_sample, inner / "m.onnx", match="inside the model's folder")
    assert err.value == location
    _refused(inspect_onnx, inner / "m.onnx", match="inside the model's folder")
    _refused(model_from_bytes, (inner / "m.onnx").read_bytes(), match="an upload cannot carry")


def test_external_data_inside_the_folder_is_read(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.full(2, 3.0, np.float32).tobytes())
    model = _small_model(data_location=TensorProto.EXTERNAL, raw_data=b"")
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], "w.bin", offset=0, length=8)
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    loaded = load_model(tmp_path / "m.onnx")
    assert numpy_helper.to_array(loaded.model.graph.initializer[0]).tolist() == [3.0, 3.0]


def test_cycles_and_names_produced_twice():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["a"], ["y"])]
    cyclic = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    err = _refused(rewrite_grid_sample, cyclic, match="field 'graph'.*has a cycle")
    assert err.field == "graph"
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Abs", ["x"], ["y"])]
    twice = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    _refused(rewrite_grid_sample, twice, match="produced by two nodes")
