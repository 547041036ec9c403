"""Inspect an exported ONNX model: op inventory, index dtypes, casts, dynamic shapes.

What an NPU compiler (Huawei CANN's ATC and others) cares about, read straight from the
``.onnx`` file:

- which op types appear and how often (GridSample present or not);
- the dtype of every index tensor fed to Gather / GatherElements / GatherND /
  ScatterElements / ScatterND (Ascend's gather and scatter kernels want int32; ONNX itself
  only allows int64 for GatherND / ScatterND), and the Cast nodes around those ops;
- ops whose output shape depends on the data (NonZero, Unique, Compress) and control
  flow (Loop, Scan, If), which static-shape NPU compilers reject;
- the graph's dynamic dimensions (symbolic ``dim_param`` on inputs and outputs).

Dtypes are resolved with ``onnx.shape_inference`` plus initializers, ``Constant`` nodes and
``Cast`` attributes, so an index produced inside the graph is typed too.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import onnx
from onnx import TensorProto

from bevviz.export.onnx_file import LoadedModel, load_model, walk_graphs

#: Op type -> position of its index input.
INDEX_OPS = {
    "Gather": 1,
    "GatherElements": 1,
    "GatherND": 1,
    "ScatterElements": 1,
    "ScatterND": 1,
    "Scatter": 1,  # deprecated since opset 11, still seen in old exports
}
GATHER_OPS = ("Gather", "GatherElements", "GatherND")
SCATTER_OPS = ("ScatterElements", "ScatterND", "Scatter")

#: Ops whose output shape depends on the input *values* (not only on input shapes).
DATA_DEPENDENT_SHAPE_OPS = ("NonZero", "Unique", "Compress")
#: Control flow: the executed subgraph, and so the shapes, depend on the data.
CONTROL_FLOW_OPS = ("Loop", "Scan", "If")
DYNAMIC_SHAPE_OPS = DATA_DEPENDENT_SHAPE_OPS + CONTROL_FLOW_OPS

#: Ops that only move or reshape a tensor: walked through when looking for a Cast that
#: produced an index.
_PASS_THROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Expand", "Flatten", "Identity", "Transpose"}
_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def dtype_name(elem_type: int) -> str:
    """ONNX element type number -> short numpy-style name (``1`` -> ``"float32"``)."""
    if not elem_type:
        return "unknown"
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, ValueError, TypeError):
        return TensorProto.DataType.Name(elem_type).lower()


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output.

    Attributes:
        name: Tensor name.
        shape: One entry per axis: an ``int`` for a fixed size, a ``str`` (the symbol) for a
            dynamic one, ``None`` when unknown.
        dtype: Element type name (``"float32"``, ``"int64"``, ...).
    """

    name: str
    shape: tuple[int | str | None, ...]
    dtype: str

    @property
    def dynamic_axes(self) -> dict[int, str]:
        """Axis -> symbol for every axis that is not a fixed size."""
        return {i: (d if isinstance(d, str) else "?") for i, d in enumerate(self.shape)
                if not isinstance(d, int)}


@dataclass(frozen=True)
class IndexUse:
    """One index tensor fed to a gather or scatter op.

    Attributes:
        node: Name of the consuming node (or ``op_type#k`` when unnamed).
        op_type: Gather, GatherElements, GatherND, ScatterElements, ScatterND or Scatter.
        tensor: Name of the index tensor.
        dtype: ``"int32"``, ``"int64"`` or ``"unknown"``.
        role: ``"data"`` (indices into feature data, computed or a stored table: what NPU
            kernels care about), ``"shape"`` (picks an entry of a ``Shape`` result) or
            ``"select"`` (a constant scalar index, e.g. ``x[..., 0]``).
        constant: The index is an initializer or ``Constant`` (e.g. a lookup table).
        shape: Static shape of the index when known (symbols as ``str``).
        cast_from: When a Cast (possibly through Reshape/Unsqueeze/Expand...) produced the
            index, the dtype it cast from (e.g. ``"int32"`` for an exporter-inserted
            int32 -> int64 cast, ``"float32"`` for an index computed by flooring a
            coordinate); else ``None``.
        cast_node: Name of that Cast node, else ``None``.
        reduction: For scatter ops, the ``reduction`` attribute (``"none"`` (overwrite),
            ``"add"``, ...); ``None`` for gathers.
    """

    node: str
    op_type: str
    tensor: str
    dtype: str
    role: str
    constant: bool
    shape: tuple[int | str | None, ...] | None
    cast_from: str | None = None
    cast_node: str | None = None
    reduction: str | None = None


@dataclass
class OpReport:
    """What :func:`inspect_onnx` found in one model.

    Attributes:
        path: The file inspected.
        opset: Version of the default (``ai.onnx``) operator set.
        opset_imports: Domain -> version for every imported operator set.
        ir_version: ONNX IR version.
        op_counts: Op type -> number of nodes, most frequent first (nested subgraphs and
            local functions included).
        index_uses: Every index input of a gather / scatter op.
        casts_into_index: Number of Cast nodes that widen an integer index to int64 (e.g.
            the exporter's int32 -> int64) whose output, directly or through reshape-like
            ops, is an index input. A Cast from float (how indices are computed from
            coordinates) is recorded in :attr:`IndexUse.cast_from` but not counted, nor is a
            narrowing to int32 (what :mod:`bevviz.export.index_dtypes` inserts).
        casts_after_gather: Number of Cast nodes that consume a gather / scatter output.
        dynamic_ops: Data-dependent-shape and control-flow op type -> count.
        inputs: Graph inputs (initializers excluded).
        outputs: Graph outputs.
        checker_error: ``onnx.checker`` (full check) message, ``None`` when the model is
            valid.
        num_initializers: Number of stored tensors.
        initializer_bytes: Their total size in bytes.
    """

    path: str
    opset: int
    opset_imports: dict[str, int]
    ir_version: int
    op_counts: dict[str, int]
    index_uses: list[IndexUse]
    casts_into_index: int
    casts_after_gather: int
    dynamic_ops: dict[str, int]
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    checker_error: str | None
    num_initializers: int = 0
    initializer_bytes: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        """Total node count."""
        return sum(self.op_counts.values())

    @property
    def has_grid_sample(self) -> bool:
        """True when a GridSample node is present."""
        return self.op_counts.get("GridSample", 0) > 0

    @property
    def has_nonzero(self) -> bool:
        """True when a NonZero node is present."""
        return self.op_counts.get("NonZero", 0) > 0

    @property
    def data_index_uses(self) -> list[IndexUse]:
        """Index uses with role ``"data"`` (the ones NPU kernels see at run time)."""
        return [u for u in self.index_uses if u.role == "data"]

    def index_dtypes(self, ops: Iterable[str] = tuple(INDEX_OPS), role: str | None = "data",
                     reduction: str | None = None) -> list[str]:
        """Sorted distinct dtypes of the index inputs of ``ops``.

        Args:
            ops: Op types to look at.
            role: Only uses of this role (``None``: any).
            reduction: Only scatters with this ``reduction`` (``None``: any).
        """
        ops = set(ops)
        return sorted({u.dtype for u in self.index_uses
                       if u.op_type in ops and (role is None or u.role == role)
                       and (reduction is None or u.reduction == reduction)})

    @property
    def scatter_add_count(self) -> int:
        """Number of scatter ops with ``reduction="add"`` (a scatter-add)."""
        return sum(1 for u in self.index_uses if u.reduction == "add")

    @property
    def dynamic_dims(self) -> dict[str, dict[int, str]]:
        """Tensor name -> {axis: symbol} for every graph input / output with dynamic axes."""
        out = {}
        for t in (*self.inputs, *self.outputs):
            if t.dynamic_axes:
                out[t.name] = t.dynamic_axes
        return out

    def op_rows(self) -> list[dict]:
        """One row per op type: ``op``, ``count`` (most frequent first)."""
        return [{"op": op, "count": n} for op, n in self.op_counts.items()]

    def index_rows(self) -> list[dict]:
        """One row per index use, for a table."""
        return [{"node": u.node, "op": u.op_type, "index dtype": u.dtype, "role": u.role,
                 "constant": u.constant, "shape": "x".join(str(d) for d in u.shape) if u.shape else "?",
                 "cast from": u.cast_from or "", "reduction": u.reduction or ""}
                for u in self.index_uses]

    def summary(self) -> dict:
        """A flat, JSON-ready digest (for tables and closing notes)."""
        return {
            "opset": self.opset,
            "nodes": self.num_nodes,
            "op_counts": dict(self.op_counts),
            "gather_index_dtypes": self.index_dtypes(GATHER_OPS),
            "scatter_index_dtypes": self.index_dtypes(SCATTER_OPS),
            "scatter_add_index_dtypes": self.index_dtypes(SCATTER_OPS, reduction="add"),
            "casts_into_index": self.casts_into_index,
            "grid_sample": self.has_grid_sample,
            "dynamic_ops": dict(self.dynamic_ops),
            "dynamic_dims": {k: {str(a): s for a, s in v.items()} for k, v in self.dynamic_dims.items()},
            "valid": self.checker_error is None,
        }


def _shape_of(type_proto: onnx.TypeProto) -> tuple[int | str | None, ...] | None:
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def _nbytes(elem_type: int, dims) -> int:
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except (KeyError, ValueError, TypeError):
        itemsize = 0
    n = 1
    for d in dims:
        n *= int(d)
    return n * itemsize


def _tensor_info(vi: onnx.ValueInfoProto) -> TensorInfo:
    return TensorInfo(vi.name, _shape_of(vi.type) or (), dtype_name(vi.type.tensor_type.elem_type))


def _count_ops(model: onnx.ModelProto) -> Counter:
    """Op counts over the main graph, its subgraphs and the local functions it calls."""
    functions = {(f.domain, f.name): f for f in model.functions}
    counts: Counter = Counter()

    def visit(nodes, depth: int = 0) -> None:
        for node in nodes:
            key = (node.domain, node.op_type)
            if key in functions and depth < 16:
                visit(functions[key].node, depth + 1)
            else:
                counts[node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g.node, depth)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for g in attr.graphs:
                        visit(g.node, depth)

    visit(model.graph.node)
    return counts


def _check(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # onnx raises several types (ValidationError, InferenceError)
        return " ".join(str(exc).split())[:600]
    return None


def tensor_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple | None]]:
    """Element type and shape of every named tensor, over all graphs.

    From ``onnx.shape_inference`` (with data propagation; the file's own declarations when
    inference fails), then initializers, ``Constant`` nodes and ``Cast`` targets.

    Args:
        model: The model (not changed).

    Returns:
        Tensor name -> (ONNX element type, 0 when unknown; shape with ints for fixed axes,
        ``str`` symbols, ``None`` unknown axes; or ``None`` when the rank is unknown).
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # keep going with what the file itself declares
        inferred = model
    types: dict[str, tuple[int, tuple | None]] = {}
    for g in walk_graphs(inferred.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            types[vi.name] = (vi.type.tensor_type.elem_type, _shape_of(vi.type))
        for init in g.initializer:
            types[init.name] = (init.data_type, tuple(int(d) for d in init.dims))
        for node in g.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value":
                        types[node.output[0]] = (attr.t.data_type, tuple(int(d) for d in attr.t.dims))
                    elif attr.name in ("value_int", "value_ints"):
                        types[node.output[0]] = (TensorProto.INT64, () if attr.name == "value_int"
                                                 else (len(attr.ints),))
                    elif attr.name in ("value_float", "value_floats"):
                        types[node.output[0]] = (TensorProto.FLOAT, () if attr.name == "value_float"
                                                 else (len(attr.floats),))
            elif node.op_type == "Cast" and not types.get(node.output[0], (0,))[0]:
                to = next((a.i for a in node.attribute if a.name == "to"), 0)
                types[node.output[0]] = (to, types.get(node.output[0], (0, None))[1])
    return types


def inspect_onnx(src: str | os.PathLike | onnx.ModelProto | LoadedModel) -> OpReport:
    """Inventory an ONNX model's ops, index dtypes, casts and dynamic shapes.

    Args:
        src: Path of the ``.onnx`` file (weights stored inside it or beside it, in its
            folder), or a model already read (``onnx.ModelProto`` or
            :class:`~bevviz.export.onnx_file.LoadedModel`). A file is read within the bounds
            of :func:`bevviz.export.onnx_file.load_model`; a model that fails
            ``onnx.checker`` is reported (:attr:`OpReport.checker_error`), not refused.

    Returns:
        An :class:`OpReport`; ``report.op_counts`` maps op type -> count.

    Raises:
        InputError: naming ``path`` when the file is missing, ``model`` when it is not an
            ONNX model or breaks a bound (see :mod:`bevviz.export.onnx_file`).
    """
    if isinstance(src, onnx.ModelProto):
        path, model = src.graph.name or "model", src
    elif isinstance(src, LoadedModel):
        path, model = src.name, src.model
    else:
        path = os.fspath(src)
        model = load_model(path, validate=False).model
    checker_error = _check(model)
    types_shapes = tensor_types(model)
    graph = model.graph

    imports = {(imp.domain or "ai.onnx"): int(imp.version) for imp in model.opset_import}
    opset = imports.get("ai.onnx", 0)

    types = {k: t for k, (t, _) in types_shapes.items() if t}
    shapes = {k: sh for k, (_, sh) in types_shapes.items()}
    constants: set[str] = set()
    producers: dict[str, onnx.NodeProto] = {}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    n_init = 0
    init_bytes = 0
    for g in walk_graphs(graph):
        for init in g.initializer:
            constants.add(init.name)
            n_init += 1
            init_bytes += _nbytes(init.data_type, init.dims)
        for node in g.node:
            for out in node.output:
                producers[out] = node
            for inp in node.input:
                consumers.setdefault(inp, []).append(node)
            if node.op_type == "Constant":
                constants.add(node.output[0])

    def find_cast(name: str, depth: int = 0) -> onnx.NodeProto | None:
        node = producers.get(name)
        if node is None or depth > 6:
            return None
        if node.op_type == "Cast":
            return node
        if node.op_type in _PASS_THROUGH and node.input:
            return find_cast(node.input[0], depth + 1)
        return None

    uses: list[IndexUse] = []
    casts_into: set[str] = set()
    casts_after: set[str] = set()
    counter: Counter = Counter()
    for g in walk_graphs(graph):
        for node in g.node:
            if node.op_type not in INDEX_OPS or len(node.input) <= INDEX_OPS[node.op_type]:
                continue
            counter[node.op_type] += 1
            name = node.name or f"{node.op_type}#{counter[node.op_type]}"
            idx = node.input[INDEX_OPS[node.op_type]]
            data_producer = producers.get(node.input[0])
            idx_shape = shapes.get(idx)
            if data_producer is not None and data_producer.op_type == "Shape":
                role = "shape"
            elif idx in constants and idx_shape == ():
                role = "select"
            else:
                role = "data"
            cast = find_cast(idx)
            cast_from = None
            if cast is not None:
                cast_from = dtype_name(types.get(cast.input[0], 0))
                # an int -> int64 widening (float -> int is how indices are computed, and a
                # narrowing to int32 is what makes them NPU-friendly: neither is counted)
                if cast_from in _INT_DTYPES and cast_from != "int64" and types.get(cast.output[0]) == TensorProto.INT64:
                    casts_into.add(cast.name or id(cast))
            for out in node.output:
                for consumer in consumers.get(out, []):
                    if consumer.op_type == "Cast":
                        casts_after.add(consumer.name or id(consumer))
            reduction = None
            if node.op_type in SCATTER_OPS:
                reduction = "none"
                for attr in node.attribute:
                    if attr.name == "reduction":
                        reduction = attr.s.decode() if isinstance(attr.s, bytes) else str(attr.s)
            uses.append(IndexUse(
                node=name, op_type=node.op_type, tensor=idx, dtype=dtype_name(types.get(idx, 0)),
                role=role, constant=idx in constants, shape=idx_shape,
                cast_from=cast_from, cast_node=(cast.name if cast is not None else None),
                reduction=reduction))

    counts = _count_ops(model)
    dynamic = {op: counts[op] for op in DYNAMIC_SHAPE_OPS if counts.get(op)}
    graph_inits = {i.name for i in model.graph.initializer}
    inputs = [_tensor_info(vi) for vi in model.graph.input if vi.name not in graph_inits]
    outputs = [_tensor_info(vi) for vi in model.graph.output]
    return OpReport(
        path=path, opset=opset, opset_imports=imports, ir_version=int(model.ir_version),
        op_counts=dict(counts.most_common()), index_uses=uses,
        casts_into_index=len(casts_into), casts_after_gather=len(casts_after),
        dynamic_ops=dynamic, inputs=inputs, outputs=outputs, checker_error=checker_error,
        num_initializers=n_init, initializer_bytes=init_bytes,
    )
