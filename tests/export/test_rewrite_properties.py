"""Hypothesis: modes (bicubic too) x paddings x align_corners x shapes (symbolic or fixed axes),
rewritten GridSample against onnxruntime's GridSample and against PyTorch's grid_sample."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from bevviz.export import compare_models, rewrite_grid_sample

TOL = 1e-5


def _model(mode: str, padding: str, align: bool, x_shape, g_shape, opset: int):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, g_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", x_shape[1], "Ho", "Wo"])
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=int(align))
    return helper.make_model(helper.make_graph([node], "gs", [x, g], [y]),
                             opset_imports=[helper.make_opsetid("", opset)])


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(["bilinear", "nearest", "bicubic"]),
       padding=st.sampled_from(["zeros", "border", "reflection"]),
       align=st.booleans(), n=st.integers(1, 3), c=st.integers(1, 4), h=st.integers(1, 7), w=st.integers(1, 7),
       ho=st.integers(1, 5), wo=st.integers(1, 5), symbolic=st.booleans(), reach=st.sampled_from([1.0, 1.3, 4.0]),
       opset=st.sampled_from([16, 17, 20]), seed=st.integers(0, 2**16))
def test_rewrite_matches_onnxruntime_and_pytorch(mode, padding, align, n, c, h, w, ho, wo, symbolic, reach, opset,
                                                seed):
    x_shape = ["N", c, "H", "W"] if symbolic else [n, c, h, w]
    g_shape = ["N", "Ho", "Wo", 2] if symbolic else [n, ho, wo, 2]
    onnx_mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode) if opset >= 20 else mode
    tol = 1e-4 if mode == "bicubic" else TOL
    model = _model(onnx_mode, padding, align, x_shape, g_shape, opset)
    rng = np.random.default_rng(seed)
    feed = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32),
            "g": rng.uniform(-reach, reach, (n, ho, wo, 2)).astype(np.float32)}
    report = rewrite_grid_sample(model)
    assert report.grid_sample_after == 0 and report.int32_ok
    parity = compare_models(model, report.model, feed=feed, runs=1)
    assert parity.max_abs_diff <= tol, (parity.max_abs_diff, report.replaced)
    (out,) = ort.InferenceSession(report.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    ref = F.grid_sample(torch.from_numpy(feed["x"]), torch.from_numpy(feed["g"]), mode=mode, padding_mode=padding,
                        align_corners=align).numpy()
    assert np.abs(out - ref).max() <= tol
