"""A user's model against the rules of its own opset, beyond what ``onnx.checker`` reads.

``onnx.checker`` (full check) passes attribute values it does not know and ops of domains it
cannot see. These are the user's mistakes, each an :class:`~bevviz.errors.InputError` naming
the field and the value (so ``bevviz npu`` exits 2 and writes nothing):

- two nodes of one graph with the same name (names address nodes in reports and rules);
- a GridSample attribute its opset does not define: mode names of another opset
  (``linear`` / ``cubic`` from opset 20, ``bilinear`` / ``bicubic`` before it), an unknown
  padding mode, ``align_corners`` other than 0 / 1;
- a GridSample input of a type its schema does not allow, or of a rank its opset does not
  define (4-D before opset 20; ``X`` and ``grid`` of the same rank >= 3 from opset 20);
- with ``runnable=True``: an op of a domain that neither the model (a local function) nor
  onnxruntime defines (the model could not be run to check it).

:func:`onnxruntime_refusal` says what onnxruntime says when it will not load a model.
"""

from __future__ import annotations

import onnx
import onnx.defs
import onnxruntime as ort

from bevviz.checks import field_error
from bevviz.export.inspection import tensor_types
from bevviz.export.onnx_file import walk_graphs

__all__ = ["ORT_DOMAINS", "grid_sample_modes", "onnxruntime_refusal", "validate_model"]

#: Domains onnxruntime's CPU provider defines ops of.
ORT_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc",
                         "ai.onnx.preview.training", "com.ms.internal.nhwc"})
_PADDINGS = ("zeros", "border", "reflection")


def grid_sample_modes(opset: int) -> tuple[str, ...]:
    """GridSample's mode names in ``opset`` (16-19: bilinear, nearest, bicubic; 20+: linear, nearest, cubic)."""
    return ("linear", "nearest", "cubic") if opset >= 20 else ("bilinear", "nearest", "bicubic")


def _opset(model: onnx.ModelProto) -> int:
    return next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 0)


def _allowed(opset: int) -> dict[str, list[str]]:
    schema = onnx.defs.get_schema("GridSample", opset)
    return {t.type_param_str: list(t.allowed_type_strs) for t in schema.type_constraints}


def _elem_str(elem: int) -> str:
    name = onnx.TensorProto.DataType.Name(elem).lower()
    return "tensor(float)" if name == "float" else f"tensor({name})"


def _check_grid_sample(node: onnx.NodeProto, label: str, opset: int, types: dict) -> None:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    text = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    modes = grid_sample_modes(opset)
    mode = text.get("mode", modes[0])
    if mode not in modes:
        raise field_error(f"{label}.mode", mode, f"is not a GridSample mode of opset {opset} (one of {list(modes)})")
    padding = text.get("padding_mode", "zeros")
    if padding not in _PADDINGS:
        raise field_error(f"{label}.padding_mode", padding, f"must be one of {list(_PADDINGS)}")
    align = text.get("align_corners", 0)
    if align not in (0, 1):
        raise field_error(f"{label}.align_corners", align, "must be 0 or 1")
    allowed = _allowed(opset)
    ranks = []
    for k, (role, param) in enumerate((("X", "T1"), ("grid", "T2"))):
        elem, shape = types.get(node.input[k], (0, None)) if k < len(node.input) else (0, None)
        if elem and _elem_str(elem) not in allowed[param]:
            raise field_error(f"{label}.{role}", _elem_str(elem), f"GridSample-{opset} allows {allowed[param]}")
        ranks.append(None if shape is None else len(shape))
        if role == "grid" and shape is not None and isinstance(shape[-1], int) and shape[-1] != len(shape) - 2:
            raise field_error(f"{label}.grid", list(shape), f"its last axis must be {len(shape) - 2} (the rank - 2)")
    for role, rank in zip(("X", "grid"), ranks):
        if rank is not None and (rank != 4 if opset < 20 else rank < 3):
            raise field_error(f"{label}.{role}", f"rank {rank}",
                              "GridSample before opset 20 is 4-D only" if opset < 20 else "must have rank >= 3")
    if None not in ranks and ranks[0] != ranks[1]:
        raise field_error(f"{label}.grid", f"rank {ranks[1]}", f"must have the rank of X ({ranks[0]})")


def validate_model(model: onnx.ModelProto, name: str, *, runnable: bool = False, types: dict | None = None) -> None:
    """Refuse the user's mistakes listed in the module docstring.

    Args:
        model: The model (already through ``onnx.checker``).
        name: The model's name, for messages.
        runnable: Also refuse ops of domains onnxruntime does not define (the model is to be run).
        types: ``tensor_types(model)`` if already computed.

    Raises:
        InputError: naming the node and field.
    """
    types = tensor_types(model) if types is None else types
    opset = _opset(model)
    local = {(f.domain, f.name) for f in model.functions}
    counter = 0
    for g in walk_graphs(model.graph):
        seen: set[str] = set()
        for node in g.node:
            if node.name and node.name in seen:
                raise field_error("node name", node.name, f"{name}: two nodes of graph {g.name!r} have this name")
            seen.add(node.name)
            if runnable and node.domain not in ORT_DOMAINS and (node.domain, node.op_type) not in local:
                raise field_error("op", f"{node.domain}::{node.op_type}",
                                  f"{name}: neither the model (no local function) nor onnxruntime defines this op, "
                                  "so the model cannot be run to check the rewrite (rewrite without the check)")
            if node.op_type == "GridSample" and node.domain in ("", "ai.onnx"):
                counter += 1
                _check_grid_sample(node, f"GridSample {node.name or '#' + str(counter)!r}", opset, types)


def onnxruntime_refusal(model: onnx.ModelProto) -> str | None:
    """What onnxruntime (CPU) says when it refuses to load ``model``; None when it loads it."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for a refused model
        return " ".join(str(exc).split())[:400]
    return None
