"""grid_sample_free(): torch.onnx.export of unmodified models emits no GridSample and matches eager."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

from bevviz.export import grid_sample_free, inspect_onnx
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS

from .bev_models import Bicubic, MixedSampling, MSDeformAttn, SpatialCrossAttention, msda_inputs, sca_inputs

TOL = 1e-5
LEVELS = [(12, 20), (6, 10), (3, 5)]


def _check(path_or_bytes, names, args, module) -> onnx.ModelProto:
    model = onnx.load(path_or_bytes) if not isinstance(path_or_bytes, bytes) else onnx.load_from_string(path_or_bytes)
    onnx.checker.check_model(model, full_check=True)
    inv = inspect_onnx(model)
    assert inv.op_counts.get("GridSample", 0) == 0, inv.op_counts
    assert inv.index_dtypes(GATHER_OPS + SCATTER_OPS, role=None) == ["int32"], inv.index_rows()
    (out,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {n: a.numpy() for n, a in zip(names, args)})
    with torch.no_grad():
        ref = module(*args).numpy()
    assert np.abs(out - ref).max() <= TOL
    return model


@pytest.mark.parametrize("case", ["sca", "msda", "mixed", "bicubic"])
def test_torchscript_export_is_grid_sample_free(case, tmp_path):
    if case == "sca":
        module, args, names = SpatialCrossAttention(16), sca_inputs(), ["feats", "ref"]
    elif case == "msda":
        module, args, names = MSDeformAttn(LEVELS), msda_inputs(LEVELS), ["value", "loc", "attn"]
    elif case == "mixed":
        module, args, names = MixedSampling(), (torch.randn(2, 3, 7, 9), torch.rand(2, 5, 6, 2) * 2.6 - 1.3), ["x", "g"]
    else:  # bicubic: the gather-scatter sampler's 16 taps (the ONNX rewrite refuses bicubic)
        module, args, names = Bicubic(), (torch.randn(1, 2, 6, 7), torch.rand(1, 4, 5, 2) * 2.6 - 1.3), ["x", "g"]
    path = tmp_path / f"{case}.onnx"
    with grid_sample_free(), torch.no_grad():
        torch.onnx.export(module.eval(), args, path, dynamo=False, opset_version=17, input_names=names)
    _check(path, names, args, module)


def test_eager_calls_and_the_exit_are_untouched():
    x, g = torch.randn(1, 2, 4, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    original, exporter = torch.grid_sampler, torch.onnx.export
    with pytest.raises(RuntimeError, match="boom"), grid_sample_free():
        assert torch.grid_sampler is not original
        assert torch.equal(F.grid_sample(x, g, align_corners=False), original(x, g, 0, 0, False))
        raise RuntimeError("boom")
    assert torch.grid_sampler is original and torch.onnx.export is exporter
    buf = io.BytesIO()
    torch.onnx.export(SpatialCrossAttention(4).eval(), sca_inputs(cams=2, channels=4, queries=3), buf, dynamo=False,
                      opset_version=17)
    assert inspect_onnx(onnx.load_from_string(buf.getvalue())).op_counts["GridSample"] == 1  # outside: as before


@pytest.mark.slow
def test_dynamo_export_with_a_dynamic_batch(tmp_path):
    module = SpatialCrossAttention(8)
    args = sca_inputs(cams=3, channels=8, queries=20)
    path = tmp_path / "sca_dynamo.onnx"
    auto = torch.export.Dim.AUTO
    with grid_sample_free(), torch.no_grad():
        torch.onnx.export(module.eval(), args, path, dynamo=True, opset_version=18, input_names=["feats", "ref"],
                          dynamic_shapes={"feats": {0: auto}, "ref": {0: auto}}, external_data=False)
    model = _check(path, ["feats", "ref"], args, module)
    assert isinstance(model.graph.input[0].type.tensor_type.shape.dim[0].dim_param, str)
    other = sca_inputs(cams=5, channels=8, queries=20, seed=3)
    _check(path, ["feats", "ref"], other, module)  # the batch axis really is dynamic
