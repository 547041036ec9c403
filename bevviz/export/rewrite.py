"""Make any ONNX model GridSample-free with int32 gather indices: fused where it can, node by node elsewhere.

:func:`rewrite_grid_sample` takes a user's model (a path, bytes or a ``ModelProto``, read
within the bounds of :mod:`bevviz.export.onnx_file` and held to its opset's rules,
:mod:`bevviz.export.model_validate`) and

1. rewrites every GridSample that feeds a weighted sum (:mod:`bevviz.export.fused_patterns`:
   ``ReduceSum``, ``Mul`` + ``ReduceSum``, levels concatenated or stacked) together with the
   sum, as one chunked gather from a channels-last table (:func:`bevviz.export.gather_graph.build_fused`):
   no GridSample output, no full-size tensor per tap;
2. replaces every other GridSample node by the same gather, chunked, writing its output
   ``(N, C, *S_out)`` (:func:`bevviz.export.gather_graph.build_per_node`): the node's output
   name is kept, so every consumer is untouched;
3. does so for every form ONNX defines: linear / nearest / cubic, zeros / border /
   reflection, both align_corners, 4-D and 5-D (and 3-D from opset 20), any symbolic axis,
   in the main graph, in If / Loop / Scan bodies and, after inlining them, in local
   functions; what it cannot rewrite (integer features with linear / cubic weights, more
   than 2**31 rows with int32) it keeps and lists in :attr:`RewriteReport.refused`;
4. with ``RewriteOptions(backend=...)``, rewrites only the nodes that backend's rules
   (:mod:`bevviz.export.rules`) reject, and lists the others in :attr:`RewriteReport.kept`;
5. makes the index input of every Gather / GatherElements / ScatterElements / Scatter of the
   whole model int32 (:mod:`bevviz.export.index_dtypes`);
6. checks the result with ``onnx.checker`` (full check) and, with ``check=True``, runs the
   original and the rewritten model in onnxruntime on the same random inputs, every graph
   input fed (:mod:`bevviz.export.model_parity`), before anything is written.

Everything else in the graph is left as it was: no other node is reordered or renamed; nodes
are removed only when they belonged to a replaced pattern or computed nothing but its input
(e.g. the shape a ``Reshape`` of the pattern read).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx.inliner
import onnx.numpy_helper
from onnx import TensorProto

from bevviz.checks import MiB, check_choice, field_error
from bevviz.export.fused_patterns import FusedMatch, find_patterns, node_key
from bevviz.export.gather_graph import Level, build_fused, build_per_node
from bevviz.export.index_dtypes import IndexChange, make_indices_int32
from bevviz.export.inspection import inspect_onnx, tensor_types
from bevviz.export.model_check import backend_verdicts
from bevviz.export.model_parity import ModelParity, compare_models
from bevviz.export.model_validate import validate_model
from bevviz.export.onnx_file import LoadedModel, as_loaded, check_valid, walk_graphs
from bevviz.export.sampler_graph import GraphBuilder, SamplerSpec
from bevviz.samplers.gather_scatter import INT32_MAX

__all__ = ["DEFAULT_CHUNK_MIB", "INDEX_DTYPES", "PER_NODE_MIN_CHUNK_MIB", "Kept", "NodeChange", "Refusal",
           "RewriteOptions", "RewriteReport", "as_loaded", "rewrite_grid_sample"]

#: ``index_dtype`` argument -> ONNX element type.
INDEX_DTYPES = {"int32": TensorProto.INT32, "int64": TensorProto.INT64}
#: GridSample modes by their opset-16 and opset-20 names.
_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic", "cubic": "bicubic"}
_FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)
_INTS = (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
         TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL)
#: Bounds of the default chunk budget: a tenth of the replaced GridSample output(s), within these.
DEFAULT_CHUNK_MIB = (1.0, 64.0)
#: The per-node form's own lower bound (MiB). Each of its chunks is 10-15 nodes, and on a small
#: model their count, not the bytes, sets the time: the small ``sca`` of the rewrite bench
#: (a 15 MB GridSample output) ran 1.61-1.70x its original with 40 chunks (1.5 MiB), 1.41-1.44x
#: with 8 (8 MiB) at 1.45x -> 1.57x peak memory (2 threads, 2026-12-07; docs/npu.md). Models
#: whose output is over 80 MiB (BEVFormer's) keep their tenth.
PER_NODE_MIN_CHUNK_MIB = 8.0


@dataclass(frozen=True)
class RewriteOptions:
    """How :func:`rewrite_grid_sample` rewrites.

    Attributes:
        fuse: Rewrite GridSample + weighted sum patterns as one fused gather (False: every
            node on its own, the per-node form).
        max_intermediate_mib: Largest gather chunk ``(q, K, C)`` in MiB; None: a tenth of the
            replaced GridSample output(s), within :data:`DEFAULT_CHUNK_MIB` (at least
            :data:`PER_NODE_MIN_CHUNK_MIB` in the per-node form).
        backend: Rewrite only the GridSample nodes this backend's rules reject (a name of
            the rules table, matched case-insensitively as in ``npu check --backend``);
            None: all.
    """

    fuse: bool = True
    max_intermediate_mib: float | None = None
    backend: str | None = None

    def __post_init__(self):
        m = self.max_intermediate_mib
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0):
            raise field_error("max_intermediate_mib", m, "must be a positive number of MiB")


@dataclass(frozen=True)
class NodeChange:
    """One GridSample node replaced.

    Attributes:
        node: The node's name (``GridSample#k`` when unnamed).
        mode, padding_mode, align_corners: Its settings (mode by its opset-16 name).
        features: Shape of its ``X`` input as inferred (symbols as ``str``, ``None`` unknown).
        grid: Shape of its grid.
        index_dtype: ``"int32"`` or ``"int64"``.
        nodes_added: Nodes in its replacement (a fused pattern's, shared by its nodes).
        note: Range note for the indices (e.g. ``N*H*W symbolic``), or ``""``.
        form: ``"per-node"``, or ``"fused: <pattern>"`` (e.g. ``fused: Concat+Mul+ReduceSum``).
        chunks: Static chunks of its gather (1: one gather).
    """

    node: str
    mode: str
    padding_mode: str
    align_corners: bool
    features: tuple | None
    grid: tuple | None
    index_dtype: str
    nodes_added: int
    note: str = ""
    form: str = "per-node"
    chunks: int = 1


@dataclass(frozen=True)
class Refusal:
    """A GridSample node left in the model because it cannot be rewritten, and why."""

    node: str
    reason: str


@dataclass(frozen=True)
class Kept:
    """A GridSample node left in the model because the chosen backend runs it, and why."""

    node: str
    reason: str


@dataclass
class RewriteReport:
    """What :func:`rewrite_grid_sample` did.

    Attributes:
        model: The rewritten ``onnx.ModelProto`` (valid under ``onnx.checker`` full check).
        replaced: The GridSample nodes replaced.
        refused: The GridSample nodes kept because they cannot be rewritten, each with its reason.
        index_changes: Every gather / scatter index input changed to int32 (or that could not
            be), with how and the range check.
        kept: The GridSample nodes kept because the chosen backend's rules accept them.
        name: The source's name.
        path: Where the model was written (``dst``), or None.
        nodes_before, nodes_after: Node counts over all graphs.
        grid_sample_before, grid_sample_after: GridSample node counts.
        parity: Original vs rewritten in onnxruntime (``check=True``), or None.
        notes: Other things done (local functions inlined), in words.
    """

    model: onnx.ModelProto
    replaced: list[NodeChange]
    refused: list[Refusal]
    index_changes: list[IndexChange]
    kept: list[Kept] = field(default_factory=list)
    name: str = ""
    path: str | None = None
    nodes_before: int = 0
    nodes_after: int = 0
    grid_sample_before: int = 0
    grid_sample_after: int = 0
    parity: ModelParity | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def int32_ok(self) -> bool:
        """Every gather / scatter index of the rewritten model is int32 (the ONNX spec keeps
        GatherND / ScatterND at int64; those count as not ok)."""
        return all(c.now == "int32" for c in self.index_changes)

    @property
    def max_abs_diff(self) -> float | None:
        """Largest max |diff| over the outputs, or None without a check."""
        return None if self.parity is None else self.parity.max_abs_diff

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``bevviz npu rewrite --json``)."""
        return {
            "model": self.name, "written_to": self.path,
            "nodes": {"before": self.nodes_before, "after": self.nodes_after},
            "grid_sample": {"before": self.grid_sample_before, "after": self.grid_sample_after},
            "replaced": [vars(c) for c in self.replaced],
            "refused": [vars(r) for r in self.refused],
            "kept": [vars(k) for k in self.kept],
            "index_changes": [vars(c) for c in self.index_changes],
            "indices_int32": self.int32_ok,
            "parity": None if self.parity is None else self.parity.to_dict(),
            "notes": list(self.notes),
        }


def _count(model: onnx.ModelProto, op_type: str | None = None) -> int:
    graphs = list(walk_graphs(model.graph))
    nodes = [n for g in graphs for n in g.node] + [n for f in model.functions for n in f.node]
    return sum(1 for n in nodes if op_type is None or n.op_type == op_type)


def _default_opset(model: onnx.ModelProto) -> int:
    return next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 0)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _is_grid_sample(node: onnx.NodeProto) -> bool:
    return node.op_type == "GridSample" and node.domain in ("", "ai.onnx")


def _inline_grid_sample_functions(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """Inline the local functions that hold a GridSample (so their nodes can be replaced)."""
    keys = [(f.domain, f.name) for f in model.functions if any(_is_grid_sample(n) for n in f.node)]
    if not keys:
        return model, []
    inlined = onnx.inliner.inline_selected_functions(model, keys, exclude=False)
    return inlined, [f"inlined local function(s) {', '.join(f'{d}::{n}' for d, n in keys)} to reach their GridSample"]


def _plan(node: onnx.NodeProto, opset: int, types: dict, index_dtype: str) -> tuple[SamplerSpec | None, str]:
    """The rewrite of one GridSample node, or None and the reason it is refused."""
    a = _attrs(node)
    mode = _MODES[str(a.get("mode", "bilinear"))]  # validate_model refused other names
    padding = str(a.get("padding_mode", "zeros"))
    align = bool(int(a.get("align_corners", 0)))
    x_type, x_shape = types.get(node.input[0], (0, None))
    g_type, g_shape = types.get(node.input[1], (0, None))
    rank = len(g_shape) if g_shape is not None else (len(x_shape) if x_shape is not None else None)
    if rank is None:
        return None, "the rank of X and grid is unknown (shape inference found neither)"
    if x_type and x_type not in _FLOATS and not (x_type in _INTS and mode == "nearest"):
        return None, f"features of dtype {onnx.helper.tensor_dtype_to_np_dtype(x_type)} in {mode} mode are not " \
                     "rewritten (weighted taps need a float type; nearest is)"
    dims = None if x_shape is None else (x_shape[0], *x_shape[2:])
    if dims is not None and all(isinstance(d, int) for d in dims):
        rows = int(np.prod(dims))
        if index_dtype == "int32" and rows + 1 > INT32_MAX:
            return None, f"N*prod(spatial) = {rows} rows do not fit int32 (pass index_dtype='int64')"
        note = f"N*H*W = {rows} (checked)" if rank == 4 else f"N*prod(spatial) = {rows} (checked)"
    else:
        note = "N*H*W symbolic: int32 holds while N*H*W < 2**31"
    same = bool(x_type) and x_type == g_type
    return SamplerSpec(mode, padding, align, INDEX_DTYPES[index_dtype], cast_weights=not same), note


def _itemsize(elem: int) -> int:
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize)
    except (KeyError, TypeError, ValueError):  # unknown dtype: assume float32 for the budget
        return 4


def _budget(options: RewriteOptions, types: dict, outputs: list[str], floor_mib: float = DEFAULT_CHUNK_MIB[0]) -> int:
    """Bytes of one gather chunk: the option, or a tenth of the replaced outputs within
    ``floor_mib`` and ``DEFAULT_CHUNK_MIB[1]``."""
    if options.max_intermediate_mib is not None:
        return max(1, int(options.max_intermediate_mib * MiB))
    total = 0
    for name in outputs:
        elem, shape = types.get(name, (0, None))
        if shape is None or not all(isinstance(d, int) for d in shape):
            return int(DEFAULT_CHUNK_MIB[1] * MiB)
        total += int(np.prod(shape)) * _itemsize(elem)
    return int(min(max(total / 10, floor_mib * MiB), DEFAULT_CHUNK_MIB[1] * MiB))


@dataclass
class _Work:
    """Shared state of one rewrite."""

    types: dict
    specs: dict[tuple, tuple[SamplerSpec, str, str]]  # node_key(node) -> (spec, note, label)
    options: RewriteOptions
    taken: set[str]
    replaced: list[NodeChange] = field(default_factory=list)
    made: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)  # why a MatMul / Einsum after a GridSample was not fused

    def level(self, node: onnx.NodeProto) -> Level:
        t = self.types
        return Level(node.input[0], node.input[1], self.specs[node_key(node)][0], t.get(node.input[0], (0, None))[1],
                     t.get(node.input[1], (0, None))[1])

    def record(self, node: onnx.NodeProto, b: GraphBuilder, form: str, chunks: int) -> None:
        spec, note, label = self.specs[node_key(node)]
        self.made.update(n.name for n in b.nodes)
        self.replaced.append(NodeChange(
            label, spec.mode, spec.padding_mode, spec.align_corners, self.types.get(node.input[0], (0, None))[1],
            self.types.get(node.input[1], (0, None))[1], "int32" if spec.index_dtype == TensorProto.INT32 else "int64",
            len(b.nodes), note, form, chunks))


def _fused_nodes(w: _Work, m: FusedMatch) -> GraphBuilder:
    label = w.specs[node_key(m.grid_samples[0])][2]
    b = GraphBuilder(prefix=f"{label}/fused", taken=w.taken)
    weight = m.weight
    if weight is not None:
        ws = w.types.get(weight, (0, None))[1]
        if m.weight_perm is not None:  # an Einsum's weight letters in the samples' order
            weight = b.op("Transpose", weight, perm=list(m.weight_perm), hint="weight_ordered")
        if m.weight_shape is not None:  # a MatMul / Einsum weight as the Mul form's
            ws = m.weight_shape
            weight = b.op("Reshape", weight, b.const(list(ws), np.int64, "w_like_mul"), hint="weight_like_mul")
        if tuple(ws) != tuple(m.weight_target):
            weight = b.op("Expand", weight, b.const(list(m.weight_target), np.int64, "w_shape"), hint="weight_full")
        if m.merge_last:
            t = m.weight_target
            weight = b.op("Reshape", weight, b.const([*t[:-2], t[-2] * t[-1]], np.int64, "w_merged"))
    elem = w.types.get(m.grid_samples[0].input[0], (0, None))[0]
    budget = _budget(w.options, w.types, [n.output[0] for n in m.grid_samples])
    chunks = build_fused(b, [w.level(n) for n in m.grid_samples], weight, m.kept, m.reduce.output[0],
                         m.out_shape, budget, _itemsize(elem))
    for n in m.grid_samples:
        w.record(n, b, f"fused: {m.form}" + (f" ({len(m.grid_samples)} levels)" if len(m.grid_samples) > 1 else ""),
                 chunks)
    return b


def _rewrite_graph(g: onnx.GraphProto, w: _Work) -> None:
    """Replace the planned GridSample nodes of one graph (fused patterns first)."""
    def eligible(node: onnx.NodeProto) -> bool:
        return node_key(node) in w.specs and w.specs[node_key(node)][0].mode is not None

    unfused: dict[tuple[str, ...], str] = {}
    matches = find_patterns(g, w.types, eligible, unfused) if w.options.fuse else []
    in_match = {node_key(n): m for m in matches for n in m.nodes}
    shape_reads = {node_key(n): shape for m in matches for n, shape in m.shape_reads}
    before = _users(g)
    new_nodes = []
    for node in g.node:
        if node_key(node) in shape_reads:  # Shape of a tensor the pattern removed: a constant
            new_nodes.append(_shape_constant(node, shape_reads[node_key(node)]))
            continue
        m = in_match.get(node_key(node))
        if m is not None:
            if node_key(node) == node_key(m.reduce):
                new_nodes.extend(_fused_nodes(w, m).nodes)
            continue
        if not eligible(node):
            new_nodes.append(node)
            continue
        label = w.specs[node_key(node)][2]
        b = GraphBuilder(prefix=f"{label}/gs", taken=w.taken)
        elem = w.types.get(node.input[0], (0, None))[0]
        budget = _budget(w.options, w.types, [node.output[0]], PER_NODE_MIN_CHUNK_MIB)
        chunks = build_per_node(b, w.level(node), node.output[0], budget, _itemsize(elem))
        new_nodes.extend(b.nodes)
        w.record(node, b, "per-node", chunks)
        if node_key(node) in unfused:
            w.notes.append(f"{label}: rewritten per node, not fused: {unfused[node_key(node)]}")
    del g.node[:]
    g.node.extend(new_nodes)
    if matches:
        _drop_dead(g, before)


def _shape_constant(node: onnx.NodeProto, shape: tuple[int, ...]) -> onnx.NodeProto:
    """A Constant with what ``Shape`` node ``node`` read of a static ``shape`` (its start / end honoured)."""
    a = _attrs(node)
    values = np.asarray(shape, dtype=np.int64)[slice(a.get("start", 0), a.get("end"))]
    return onnx.helper.make_node("Constant", [], list(node.output), name=node.name,
                                 value=onnx.numpy_helper.from_array(values, node.output[0] + "_value"))


def _users(g: onnx.GraphProto) -> set[str]:
    """Names read in ``g``: node inputs (in its subgraphs too: outer-scope reads) and outputs."""
    used = {name for sub in walk_graphs(g) for node in sub.node for name in node.input}
    return used | {o.name for o in g.output}


def _drop_dead(g: onnx.GraphProto, used_before: set[str]) -> None:
    """Remove the nodes that fed only a replaced pattern (their outputs were read before, not now)."""
    while True:
        used = _users(g)
        dead = [n for n in g.node if n.output and all(o in used_before and o not in used for o in n.output if o)
                and not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute)]
        if not dead:
            return
        ids = {node_key(n) for n in dead}
        keep = [n for n in g.node if node_key(n) not in ids]
        del g.node[:]
        g.node.extend(keep)


def _backend_filter(model: onnx.ModelProto, name: str, backend: str, labels: dict[str, int]) -> dict[str, str]:
    """GridSample label -> why the backend keeps it (only the nodes its rules accept)."""
    verdicts = backend_verdicts(model, backend, inspect_onnx(model))
    return {label: why for label, (rejected, why) in verdicts.items() if not rejected and label in labels}


def _save(model: onnx.ModelProto, dst: str | os.PathLike) -> str:
    dst = os.fspath(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    if not os.path.isdir(folder):
        raise field_error("dst", dst, "its folder does not exist")
    big = model.ByteSize() >= 2**31 - 1 - 2**20  # protobuf's 2 GB limit: weights beside the file
    onnx.save_model(model, dst, save_as_external_data=big, location=os.path.basename(dst) + ".data" if big else None)
    return dst


def rewrite_grid_sample(src: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel,
                        dst: str | os.PathLike | None = None, *, index_dtype: str = "int32", check: bool = False,
                        dims: dict[str, int] | None = None, runs: int = 5, threads: int | None = None,
                        seed: int = 0, on_step: Callable[[str, float], None] | None = None,
                        options: RewriteOptions | None = None) -> RewriteReport:
    """Replace GridSample nodes (fused with their weighted sum where one follows); make indices int32.

    Args:
        src: The model: a path (external data inside its folder allowed), the file's bytes,
            an ``onnx.ModelProto`` or a :class:`~bevviz.export.onnx_file.LoadedModel`.
        dst: Where to write the rewritten model (``None``: not written). Written last, after
            the check: a model refused as bad input writes nothing.
        index_dtype: ``"int32"`` (the NPU form) or ``"int64"``, for the sampler's gathers and
            the model's own gather / scatter indices (``"int64"`` leaves the latter alone).
        check: Run original and rewritten in onnxruntime on the same random inputs, every
            graph input fed (:func:`bevviz.export.model_parity.compare_models`): max |diff|
            per output and both latencies in :attr:`RewriteReport.parity`.
        dims: Check only: size of each symbolic axis by name (others: 2).
        runs: Check only: timed runs per model.
        threads: Check only: intra-op threads for both sessions (default: torch's).
        seed: Check only: seed of the random inputs.
        on_step: Called with (step, fraction done) as the work proceeds (for progress bars).
        options: Fused or per-node, chunk budget, backend (:class:`RewriteOptions`).

    Returns:
        A :class:`RewriteReport`; ``.model`` passes ``onnx.checker`` (full check).

    Raises:
        InputError: a hostile or invalid source (see :mod:`bevviz.export.onnx_file` and
            :mod:`bevviz.export.model_validate`), a bad ``index_dtype`` or option, ``dst`` in
            a missing folder, or inputs the check cannot build.
    """
    check_choice(index_dtype, INDEX_DTYPES, "index_dtype")
    options = RewriteOptions() if options is None else options
    if not isinstance(options, RewriteOptions):
        raise field_error("options", type(options).__name__, "must be a RewriteOptions")
    step = on_step or (lambda _s, _f: None)
    step("read", 0.0)
    loaded = as_loaded(src, validate=False)
    check_valid(loaded.model, "model", loaded.name)
    validate_model(loaded.model, loaded.name, runnable=check)
    model = onnx.ModelProto()
    model.CopyFrom(loaded.model)
    nodes_before, gs_before = _count(model), _count(model, "GridSample")
    model, notes = _inline_grid_sample_functions(model)
    step("infer shapes", 0.1)
    types = tensor_types(model)
    opset = _default_opset(model)

    step("plan", 0.2)
    refused, kept, specs, counter = [], [], {}, 0
    labels = {}
    for g in walk_graphs(model.graph):
        for node in g.node:
            if _is_grid_sample(node):
                counter += 1
                labels[node.name or f"GridSample#{counter}"] = node_key(node)
    keep_why = _backend_filter(model, loaded.name, options.backend, labels) if options.backend else {}
    by_id = {v: k for k, v in labels.items()}
    for g in walk_graphs(model.graph):
        for node in g.node:
            if not _is_grid_sample(node):
                continue
            label = by_id[node_key(node)]
            if label in keep_why:
                kept.append(Kept(label, keep_why[label]))
                continue
            spec, note = _plan(node, opset, types, index_dtype)
            if spec is None:
                refused.append(Refusal(label, note))
            else:
                specs[node_key(node)] = (spec, note, label)

    step("replace GridSample", 0.3)
    taken = {n for g in walk_graphs(model.graph) for node in g.node for n in (*node.input, *node.output, node.name)}
    taken |= {i.name for g in walk_graphs(model.graph) for i in (*g.input, *g.initializer)}
    work = _Work(types, specs, options, taken)
    for g in reversed(list(walk_graphs(model.graph))):  # subgraphs before the graphs holding them (copied)
        _rewrite_graph(g, work)
    notes.extend(work.notes)
    if options.backend:
        notes.append(f"backend {options.backend!r}: {len(kept)} GridSample node(s) kept (its rules accept them), "
                     f"{len(work.replaced)} rewritten")

    step("int32 indices", 0.5)
    changes = make_indices_int32(model, types, taken, skip=work.made) if index_dtype == "int32" else []
    step("onnx.checker", 0.6)
    try:
        check_valid(model, "rewritten model", loaded.name)
    except ValueError as exc:  # the source was valid, so this is a bug of the rewrite, not bad input
        raise RuntimeError(f"the rewrite of {loaded.name} made an invalid model: {exc}") from None
    report = RewriteReport(model=model, replaced=work.replaced, refused=refused, index_changes=changes, kept=kept,
                           name=loaded.name, nodes_before=nodes_before, nodes_after=_count(model),
                           grid_sample_before=gs_before, grid_sample_after=_count(model, "GridSample"), notes=notes)
    if check:
        step("parity and latency in onnxruntime", 0.65)
        report.parity = compare_models(loaded, LoadedModel(model, f"rewritten {loaded.name}", None, 0), dims=dims,
                                       runs=runs, threads=threads, seed=seed)
    if dst is not None:
        step("write", 0.95)
        report.path = _save(model, dst)
    step("done", 1.0)
    return report
