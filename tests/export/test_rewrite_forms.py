"""Every form of GridSample, alone and fused with the weighted sum after it, against onnxruntime,
onnx.reference and ONNX's own conformance cases; the fused form's ops within the strictest rules."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.case.node import collect_testcases
from onnx.reference import ReferenceEvaluator

from bevviz.export import check_model, inspect_onnx, rewrite_grid_sample
from bevviz.export.gather_graph import chunk_rows
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS
from bevviz.export.rewrite import DEFAULT_CHUNK_MIB, PER_NODE_MIN_CHUNK_MIB, RewriteOptions
from bevviz.export.rewrite_bench import CONFIGS, sca_model

TOL, CUBIC_TOL = 1e-5, 1e-4
F = TensorProto.FLOAT


def _run(model: onnx.ModelProto, feed: dict) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]


def _model(nodes, inputs, outputs, inits=(), opset: int = 20) -> onnx.ModelProto:
    return helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _feed(model: onnx.ModelProto, seed: int = 0, reach: float = 1.4) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.uniform(-reach, reach, shape).astype(np.float32)
    return out


def _gs(x, g, y, mode="linear", padding="zeros", align=0, name=None):
    return helper.make_node("GridSample", [x, g], [y], name=name or y, mode=mode, padding_mode=padding,
                            align_corners=align)


def _parity(model: onnx.ModelProto, options: RewriteOptions | None = None, tol: float = TOL, seed: int = 0):
    report = rewrite_grid_sample(model, options=options)
    assert report.grid_sample_after == 0 and not report.refused and report.int32_ok
    feed = _feed(model, seed)
    diff = np.abs(_run(model, feed) - _run(report.model, feed)).max()
    assert diff <= tol, (diff, [c.form for c in report.replaced])
    return report


# --------------------------------------------------------------------------- every mode, rank, padding


@pytest.mark.parametrize("rank", [4, 5])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_every_mode_and_padding_matches_onnxruntime(rank, mode, padding, align):
    if rank == 5 and mode == "cubic":
        pytest.skip("onnxruntime has no 5-D cubic kernel: checked against onnx.reference below")
    x_shape, g_shape = [2, 3] + [5, 4, 6][3 - (rank - 2):], [2] + [3, 4, 2][3 - (rank - 2):] + [rank - 2]
    y_shape = [2, 3] + g_shape[1:-1]
    model = _model([_gs("x", "g", "y", mode, padding, align)], [_vi("x", x_shape), _vi("g", g_shape)],
                   [_vi("y", y_shape)])
    for seed in range(3):
        report = _parity(model, tol=CUBIC_TOL if mode == "cubic" else TOL, seed=seed)
    assert report.replaced[0].form == "per-node"


def _edge_grid(g_shape, sizes, align: int, seed: int) -> np.ndarray:
    """Coordinates far outside, and exactly on the edges of the zero frame and of the image."""
    rng = np.random.default_rng(seed)
    grid = rng.uniform(-4.0, 4.0, g_shape).astype(np.float32)
    for axis, size in enumerate(reversed(sizes)):  # grid component 0 is the last spatial axis
        pix = np.asarray([-3.0, -2.0, -1.5, -1.0, -0.5, 0.0, size - 1.0, size - 0.5, size, size + 0.5, size + 1.0])
        norm = pix * 2.0 / (size - 1) - 1.0 if align else (2.0 * pix + 1.0) / size - 1.0
        flat = grid[..., axis].reshape(-1)
        flat[:len(norm)] = rng.permutation(norm)
        grid[..., axis] = flat.reshape(grid.shape[:-1])
    return grid


@pytest.mark.parametrize("rank", [4, 5])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_zeros_padding_reads_a_zero_frame_instead_of_masks(rank, align, fuse, mode):
    x_shape, g_shape = [2, 3] + [5, 4, 6][3 - (rank - 2):], [2] + [3, 4, 2][3 - (rank - 2):] + [rank - 2]
    nodes = [_gs("x", "g", "s", mode, "zeros", align)]
    out = [2, 3] + g_shape[1:-1]
    if fuse:
        nodes.append(helper.make_node("ReduceSum", ["s", "axes"], ["y"], keepdims=0))
        inits, out = [numpy_helper.from_array(np.asarray([-1], np.int64), "axes")], out[:-1]
    else:
        nodes[0].output[0], inits = "y", []
    model = _model(nodes, [_vi("x", x_shape), _vi("g", g_shape)], [_vi("y", out)], inits)
    report = rewrite_grid_sample(model)
    ops = [n.op_type for n in report.model.graph.node]
    assert report.replaced[0].form == ("per-node" if not fuse else "fused: ReduceSum")
    # one Where per axis (a NaN coordinate to the frame's edge), none over the taps; no And
    assert "Pad" in ops and ops.count("Where") == rank - 2 and "And" not in ops
    # no tap reads a sentinel: the table is the framed features moved channels-last, no zero row joined
    assert not [n for n in report.model.graph.node if n.op_type in ("Concat", "ConstantOfShape")
                and any("table" in o or "zero_row" in o for o in n.output)]
    for seed in range(3):
        feed = {"x": np.random.default_rng(seed).normal(size=x_shape).astype(np.float32),
                "g": _edge_grid(g_shape, x_shape[2:], align, seed)}
        assert np.abs(_run(model, feed) - _run(report.model, feed)).max() <= TOL


@pytest.mark.parametrize("mode, rank, elem", [("cubic", 5, F), ("linear", 3, F), ("nearest", 3, F),
                                              ("nearest", 4, TensorProto.INT32)])
def test_forms_onnxruntime_cannot_run_match_onnx_reference(mode, rank, elem):
    x_shape = [1, 2] + [4, 5, 3][: rank - 2]
    g_shape = [1] + [3, 2, 2][: rank - 2] + [rank - 2]
    model = _model([_gs("x", "g", "y", mode, "reflection" if rank == 5 else "zeros", 0)],
                   [_vi("x", x_shape, elem), _vi("g", g_shape)], [_vi("y", [1, 2] + g_shape[1:-1], elem)])
    report = rewrite_grid_sample(model)
    assert report.grid_sample_after == 0 and report.int32_ok
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(np.float32)
    feed = {"x": (x * 10).astype(np.int32) if elem != F else x, "g": rng.uniform(-1.3, 1.3, g_shape).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(model).run(None, feed)[0]
    got = _run(report.model, feed)
    assert got.dtype == want.dtype and np.abs(got - want).max() <= (CUBIC_TOL if mode == "cubic" else TOL)


def _conformance_cases():
    with warnings.catch_warnings():  # collecting imports every op's case module, some warn
        warnings.simplefilter("ignore")
        return list(collect_testcases("GridSample"))


@pytest.mark.parametrize("case", _conformance_cases(), ids=lambda c: c.name)
def test_onnx_conformance_cases(case):
    report = rewrite_grid_sample(case.model)
    assert report.grid_sample_after == 0 and not report.refused
    inputs, outputs = case.data_sets[0]
    feed = {vi.name: a for vi, a in zip(case.model.graph.input, inputs)}
    got = _run(report.model, feed)
    assert np.abs(got - outputs[0]).max() <= (CUBIC_TOL if "bicubic" in case.name else TOL)


# --------------------------------------------------------------------------- fused patterns


def _sca(reduce_axes=(-1,), keepdims=0, weight_shape=None, weight_first=False, mode="linear"):
    """GridSample (2, 8, 6, 7) x (2, 5, 4, 2) [* W] -> ReduceSum(axes)."""
    nodes = [_gs("x", "g", "s", mode, "zeros", 0)]
    inputs = [_vi("x", [2, 8, 6, 7]), _vi("g", [2, 5, 4, 2])]
    cur = "s"
    if weight_shape is not None:
        inputs.append(_vi("w", list(weight_shape)))
        nodes.append(helper.make_node("Mul", ["w", "s"] if weight_first else ["s", "w"], ["m"]))
        cur = "m"
    nodes.append(helper.make_node("ReduceSum", [cur, "axes"], ["y"], keepdims=keepdims))
    kept = [2, 8, 5, 4]
    out = [d if i not in [a % 4 for a in reduce_axes] else 1 for i, d in enumerate(kept)]
    out = out if keepdims else [d for i, d in enumerate(kept) if i not in [a % 4 for a in reduce_axes]]
    axes = numpy_helper.from_array(np.asarray(reduce_axes, np.int64), "axes")
    return _model(nodes, inputs, [_vi("y", out)], [axes])


@pytest.mark.parametrize("kwargs, form", [
    ({}, "fused: ReduceSum"),
    ({"reduce_axes": (2, 3), "keepdims": 1}, "fused: ReduceSum"),
    ({"weight_shape": (2, 1, 5, 4)}, "fused: Mul+ReduceSum"),
    ({"weight_shape": (5, 1), "weight_first": True}, "fused: Mul+ReduceSum"),
    ({"weight_shape": (2, 1, 5, 4), "mode": "nearest"}, "fused: Mul+ReduceSum"),
    ({"mode": "nearest"}, "fused: ReduceSum"),
    ({"weight_shape": (2, 1, 5, 4), "mode": "cubic"}, "fused: Mul+ReduceSum"),
])
def test_weighted_sums_are_fused(kwargs, form):
    model = _sca(**kwargs)
    report = _parity(model, tol=CUBIC_TOL if kwargs.get("mode") == "cubic" else TOL)
    assert [c.form for c in report.replaced] == [form]
    per_node = _parity(model, RewriteOptions(fuse=False), tol=CUBIC_TOL if kwargs.get("mode") == "cubic" else TOL)
    assert [c.form for c in per_node.replaced] == ["per-node"]


@pytest.mark.parametrize("why", ["per-channel weights", "also an output", "sum over channels"])
def test_what_is_not_a_weighted_sum_of_samples_stays_per_node(why):
    if why == "per-channel weights":
        model = _sca(weight_shape=(2, 8, 5, 4))
    elif why == "sum over channels":
        model = _sca(reduce_axes=(1,))
    else:
        model = _sca()
        model.graph.output.append(_vi("s", [2, 8, 5, 4]))
    report = _parity(model)
    assert [c.form for c in report.replaced] == ["per-node"]


def _levels(stack: bool, merge: bool, modes=("linear", "nearest", "cubic")):
    """Three levels of different sizes and modes, concatenated or stacked, times attention, summed."""
    sizes = [(9, 11), (5, 6), (3, 3)]
    nodes, inputs, inits, parts = [], [], [], []
    for i, ((h, w), mode) in enumerate(zip(sizes, modes)):
        inputs += [_vi(f"v{i}", [4, 6, h, w]), _vi(f"l{i}", [4, 7, 3, 2])]
        nodes.append(_gs(f"v{i}", f"l{i}", f"s{i}", mode, "border" if i == 1 else "zeros", i % 2))
        if stack:
            nodes.append(helper.make_node("Unsqueeze", [f"s{i}", "ax"], [f"u{i}"]))
            parts.append(f"u{i}")
        else:
            parts.append(f"s{i}")
    inits.append(numpy_helper.from_array(np.asarray([-2], np.int64), "ax"))
    nodes.append(helper.make_node("Concat", parts, ["cat"], axis=-2 if stack else -1))
    cur, axes = "cat", [-1]
    if stack and merge:
        inits.append(numpy_helper.from_array(np.asarray([4, 6, 7, 9], np.int64), "flat"))
        nodes.append(helper.make_node("Reshape", ["cat", "flat"], ["merged"]))
        cur = "merged"
    elif stack:
        axes = [-2, -1]
    inputs.append(_vi("attn", [4, 1, 7, 3, 3] if stack and not merge else [4, 1, 7, 9]))
    nodes += [helper.make_node("Mul", [cur, "attn"], ["weighted"]),
              helper.make_node("ReduceSum", ["weighted", "axes"], ["y"], keepdims=0)]
    inits.append(numpy_helper.from_array(np.asarray(axes, np.int64), "axes"))
    return _model(nodes, inputs, [_vi("y", [4, 6, 7])], inits)


@pytest.mark.parametrize("stack, merge, form", [(False, False, "Concat+Mul+ReduceSum"),
                                                (True, True, "Stack+Reshape+Mul+ReduceSum"),
                                                (True, False, "Stack+Mul+ReduceSum")])
def test_levels_concatenated_or_stacked_are_one_gather(stack, merge, form):
    report = _parity(_levels(stack, merge), tol=CUBIC_TOL)
    assert {c.form for c in report.replaced} == {f"fused: {form} (3 levels)"}
    gathers = inspect_onnx(report.model).op_counts["Gather"]
    assert gathers == report.replaced[0].chunks  # one table, one Gather per chunk


def test_chunks_follow_the_memory_budget_and_stay_exact():
    model = _sca(weight_shape=(2, 1, 5, 4))
    one = rewrite_grid_sample(model, options=RewriteOptions(max_intermediate_mib=64))
    many = _parity(model, RewriteOptions(max_intermediate_mib=2 * 16 * 8 * 4 / 2**20))  # 2 points per chunk
    assert one.replaced[0].chunks == 1 and many.replaced[0].chunks == 5
    assert chunk_rows(10, 16, 8, 4, 2 * 16 * 8 * 4) == [2] * 5
    assert chunk_rows(10, 16, None, 4, 1) == []  # symbolic channels: one chunk
    assert chunk_rows(10**6, 4, 4, 4, 1) == [3907] * 255 + [10**6 - 3907 * 255]  # at most MAX_CHUNKS


def test_fused_form_stays_within_the_strictest_backend_rules():
    report = rewrite_grid_sample(_levels(True, True), options=RewriteOptions(max_intermediate_mib=0.01))
    inv = inspect_onnx(report.model)
    assert inv.index_dtypes(GATHER_OPS + SCATTER_OPS, role=None) == ["int32"]
    assert not {"GatherND", "ScatterND", "Loop", "Scan", "If", "NonZero", "Shape", "Range"} & set(inv.op_counts)
    assert not inv.dynamic_ops and not [t for t in inv.inputs if t.dynamic_axes]
    check = check_model(report.model, backend=["CANN", "Ascend", "ONNX"])
    assert not check.failed(("error", "warn")), [r.as_row() for r in check.failed()]


# --------------------------------------------------------------------------- only what the backend rejects


def test_backend_keeps_what_it_runs_and_rewrites_what_it_rejects():
    nodes = [_gs("x", "g", "a", "bilinear", "zeros", 0, name="native"),
             _gs("x", "g", "b", "nearest", "zeros", 0, name="nearest"),
             _gs("x", "g", "c", "bilinear", "reflection", 1, name="reflect"),
             helper.make_node("Sum", ["a", "b", "c"], ["y"])]
    model = _model(nodes, [_vi("x", [1, 8, 5, 6]), _vi("g", [1, 3, 4, 2])], [_vi("y", [1, 8, 3, 4])], opset=16)
    report = rewrite_grid_sample(model, options=RewriteOptions(backend="DrivingSDK"))
    assert [k.node for k in report.kept] == ["native"] and "DrivingSDK runs it" in report.kept[0].reason
    assert {c.node for c in report.replaced} == {"nearest", "reflect"} and report.grid_sample_after == 1
    feed = _feed(model)
    assert np.abs(_run(model, feed) - _run(report.model, feed)).max() <= TOL
    assert rewrite_grid_sample(model).grid_sample_after == 0  # default: all


def test_the_per_node_form_of_a_small_model_keeps_to_few_chunks():
    # the bench's small sca: a 15 MB GridSample output, 60,000 points x 4 taps x 64 channels
    model = sca_model(CONFIGS["small"])
    fused = rewrite_grid_sample(model, options=RewriteOptions(fuse=True)).replaced[0].chunks
    per_node = rewrite_grid_sample(model, options=RewriteOptions(fuse=False)).replaced[0].chunks
    out_bytes = 6 * 64 * 2500 * 4 * 4
    assert out_bytes / 10 < PER_NODE_MIN_CHUNK_MIB * 2**20  # the floor, not the tenth, sizes its chunks
    assert per_node == -(-60000 // int(PER_NODE_MIN_CHUNK_MIB * 2**20 // (4 * 64 * 4))) == 8
    # the fused form keeps the tenth of the output (16 taps a query: 15,000 queries)
    assert fused == -(-15000 // int(max(out_bytes / 10, DEFAULT_CHUNK_MIB[0] * 2**20) // (16 * 64 * 4))) == 40
