"""Make any ONNX model GridSample-free with int32 gather / scatter indices, node by node.

:func:`rewrite_grid_sample` takes a user's model (a path, bytes or a ``ModelProto``, read
within the bounds of :mod:`bevviz.export.onnx_file`) and

1. replaces every 4-D ``GridSample`` node (default domain, opset 16 and later, in the main
   graph, in If / Loop / Scan bodies and, after inlining them, in local functions) by the
   gather-scatter sampler of :mod:`bevviz.export.sampler_graph`: bilinear and nearest,
   zeros / border / reflection, both align_corners, any symbolic axis; the node's output
   name is kept, so every consumer is untouched;
2. refuses, node by node with the reason, what it cannot rewrite (bicubic / cubic, 5-D
   volumetric sampling, integer features, an opset before 16, ``N * H * W`` past int32);
   a refused node stays in the model and is listed in :attr:`RewriteReport.refused`;
3. makes the index input of every Gather / GatherElements / ScatterElements / Scatter of the
   whole model int32 (:mod:`bevviz.export.index_dtypes`);
4. checks the result with ``onnx.checker`` (full check) and, with ``check=True``, runs the
   original and the rewritten model in onnxruntime on the same random inputs
   (:mod:`bevviz.export.model_parity`).

Everything else in the graph is left as it was: no node is reordered, renamed or removed
except the replaced GridSample nodes and the int64 index casts made useless.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx.inliner
from onnx import TensorProto

from bevviz.export.index_dtypes import IndexChange, make_indices_int32
from bevviz.export.inspection import tensor_types
from bevviz.export.model_parity import ModelParity, compare_models
from bevviz.export.onnx_file import LoadedModel, check_valid, load_model, model_from_bytes, walk_graphs
from bevviz.export.sampler_graph import GraphBuilder, SamplerSpec, build_sampler
from bevviz.samplers.gather_scatter import INT32_MAX
from bevviz.shapes import check_choice, field_error

__all__ = ["INDEX_DTYPES", "NodeChange", "Refusal", "RewriteReport", "as_loaded", "rewrite_grid_sample"]

#: ``index_dtype`` argument -> ONNX element type.
INDEX_DTYPES = {"int32": TensorProto.INT32, "int64": TensorProto.INT64}
#: GridSample modes by their opset-16 and opset-20 names.
_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic", "cubic": "bicubic"}
_FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)


@dataclass(frozen=True)
class NodeChange:
    """One GridSample node replaced.

    Attributes:
        node: The node's name (``GridSample#k`` when unnamed).
        mode, padding_mode, align_corners: Its settings (mode by its opset-16 name).
        features: Shape of its ``X`` input as inferred (symbols as ``str``, ``None`` unknown).
        grid: Shape of its grid.
        index_dtype: ``"int32"`` or ``"int64"``.
        nodes_added: Nodes in its replacement.
        note: Range note for the indices (e.g. ``N*H*W symbolic``), or ``""``.
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


@dataclass(frozen=True)
class Refusal:
    """A GridSample node left in the model, and why."""

    node: str
    reason: str


@dataclass
class RewriteReport:
    """What :func:`rewrite_grid_sample` did.

    Attributes:
        model: The rewritten ``onnx.ModelProto`` (valid under ``onnx.checker`` full check).
        replaced: The GridSample nodes replaced.
        refused: The GridSample nodes kept, each with its reason.
        index_changes: Every gather / scatter index input changed to int32 (or that could not
            be), with how and the range check.
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
    raw_mode = str(a.get("mode", "bilinear"))
    mode = _MODES.get(raw_mode)
    padding = str(a.get("padding_mode", "zeros"))
    align = bool(int(a.get("align_corners", 0)))
    x_type, x_shape = types.get(node.input[0], (0, None))
    g_type, g_shape = types.get(node.input[1], (0, None)) if len(node.input) > 1 else (0, None)
    rank = len(g_shape) if g_shape is not None else (len(x_shape) if x_shape is not None else None)
    if opset < 16:
        return None, f"opset {opset}: the replacement needs opset >= 16"
    if mode is None:
        return None, f"mode {raw_mode!r} is unknown"
    if mode == "bicubic":
        return None, f"mode {raw_mode!r} (bicubic, 16 taps) is not rewritten: its gather-scatter form exists " \
                     "in PyTorch (grid_sample_free()) but not as an ONNX rewrite"
    if padding not in ("zeros", "border", "reflection"):
        return None, f"padding_mode {padding!r} is unknown"
    if rank is None:
        return None, "the rank of X and grid is unknown (shape inference found neither)"
    if rank != 4:
        return None, f"{rank}-D GridSample (volumetric sampling) is not rewritten: only 4-D (N, C, H, W)"
    if x_type and x_type not in _FLOATS:
        return None, f"features of dtype {onnx.helper.tensor_dtype_to_np_dtype(x_type)} are not rewritten " \
                     "(weights need a float type)"
    note = ""
    dims = x_shape[:1] + x_shape[2:] if x_shape is not None else None
    if dims is not None and all(isinstance(d, int) for d in dims):
        rows = dims[0] * dims[1] * dims[2]
        if index_dtype == "int32" and rows > INT32_MAX:
            return None, f"N*H*W = {rows} rows do not fit int32 (pass index_dtype='int64')"
        note = f"N*H*W = {rows} (checked)"
    else:
        note = "N*H*W symbolic: int32 holds while N*H*W < 2**31"
    same = bool(x_type) and x_type == g_type
    return SamplerSpec(mode, padding, align, INDEX_DTYPES[index_dtype], cast_weights=not same), note


def as_loaded(src: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel, validate: bool = True) -> LoadedModel:
    """Any model source as a checked :class:`LoadedModel` (see :mod:`bevviz.export.onnx_file`).

    Args:
        src: A path, the file's bytes, an ``onnx.ModelProto`` or a ``LoadedModel`` (as is).
        validate: Also refuse a model that ``onnx.checker`` (full check) rejects.
    """
    if isinstance(src, LoadedModel):
        return src
    if isinstance(src, onnx.ModelProto):
        return model_from_bytes(src.SerializeToString(), src.graph.name or "model", validate=validate)
    if isinstance(src, (bytes, bytearray, memoryview)):
        return model_from_bytes(bytes(src), validate=validate)
    if isinstance(src, (str, os.PathLike)):
        return load_model(src, validate=validate)
    raise field_error("src", type(src).__name__, "must be a path, bytes or an onnx.ModelProto")


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
                        seed: int = 0, on_step: Callable[[str, float], None] | None = None) -> RewriteReport:
    """Replace every 4-D GridSample node by the gather-scatter sampler; make indices int32.

    Args:
        src: The model: a path (external data inside its folder allowed), the file's bytes,
            an ``onnx.ModelProto`` or a :class:`~bevviz.export.onnx_file.LoadedModel`.
        dst: Where to write the rewritten model (``None``: not written).
        index_dtype: ``"int32"`` (the NPU form) or ``"int64"``, for the sampler's gathers and
            the model's own gather / scatter indices (``"int64"`` leaves the latter alone).
        check: Run original and rewritten in onnxruntime on the same random inputs
            (:func:`bevviz.export.model_parity.compare_models`): max |diff| per output and
            both latencies in :attr:`RewriteReport.parity`.
        dims: Check only: size of each symbolic axis by name (others: 2).
        runs: Check only: timed runs per model.
        threads: Check only: intra-op threads for both sessions (default: torch's).
        seed: Check only: seed of the random inputs.
        on_step: Called with (step, fraction done) as the work proceeds (for progress bars).

    Returns:
        A :class:`RewriteReport`; ``.model`` passes ``onnx.checker`` (full check).

    Raises:
        InputError: a hostile or invalid source (see :mod:`bevviz.export.onnx_file`), a bad
            ``index_dtype``, ``dst`` in a missing folder, or inputs the check cannot build.
    """
    check_choice(index_dtype, INDEX_DTYPES, "index_dtype")
    step = on_step or (lambda _s, _f: None)
    step("read", 0.0)
    loaded = as_loaded(src, validate=False)
    check_valid(loaded.model, "model", loaded.name)
    model = onnx.ModelProto()
    model.CopyFrom(loaded.model)
    nodes_before, gs_before = _count(model), _count(model, "GridSample")
    model, notes = _inline_grid_sample_functions(model)
    step("infer shapes", 0.1)
    types = tensor_types(model)
    opset = _default_opset(model)

    step("replace GridSample", 0.2)
    replaced, refused, counter, made = [], [], 0, set()
    taken = {n for g in walk_graphs(model.graph) for node in g.node for n in (*node.input, *node.output, node.name)}
    taken |= {i.name for g in walk_graphs(model.graph) for i in (*g.input, *g.initializer)}
    for g in walk_graphs(model.graph):
        new_nodes = []
        for node in g.node:
            if not _is_grid_sample(node):
                new_nodes.append(node)
                continue
            counter += 1
            label = node.name or f"GridSample#{counter}"
            spec, note = _plan(node, opset, types, index_dtype)
            if spec is None:
                refused.append(Refusal(label, note))
                new_nodes.append(node)
                continue
            b = GraphBuilder(prefix=f"{label}/gs", taken=taken)
            build_sampler(b, node.input[0], node.input[1], node.output[0], spec)
            new_nodes.extend(b.nodes)
            made.update(n.name for n in b.nodes)
            replaced.append(NodeChange(
                label, spec.mode, spec.padding_mode, spec.align_corners,
                types.get(node.input[0], (0, None))[1], types.get(node.input[1], (0, None))[1],
                index_dtype, len(b.nodes), note))
        del g.node[:]
        g.node.extend(new_nodes)

    step("int32 indices", 0.5)
    changes = make_indices_int32(model, types, taken, skip=made) if index_dtype == "int32" else []
    step("onnx.checker", 0.6)
    try:
        check_valid(model, "rewritten model", loaded.name)
    except ValueError as exc:  # the source was valid, so this is a bug of the rewrite, not bad input
        raise RuntimeError(f"the rewrite of {loaded.name} made an invalid model: {exc}") from None
    report = RewriteReport(model=model, replaced=replaced, refused=refused, index_changes=changes,
                           name=loaded.name, nodes_before=nodes_before, nodes_after=_count(model),
                           grid_sample_before=gs_before, grid_sample_after=_count(model, "GridSample"), notes=notes)
    if dst is not None:
        step("write", 0.65)
        report.path = _save(model, dst)
    if check:
        step("parity and latency in onnxruntime", 0.7)
        report.parity = compare_models(loaded.model, model, dims=dims, runs=runs, threads=threads, seed=seed)
    step("done", 1.0)
    return report
