"""Every gather / scatter index of a model as int32: the model's own ones, with a range check.

Ascend's gather and scatter kernels take int32 offsets (CANN fails int64 gathers at run time
with ``ACL_ERROR_INVALID_PARAM``). For each index input of a Gather, GatherElements,
ScatterElements or (deprecated) Scatter node that is int64 (or of unknown type):

- a stored constant (initializer or ``Constant``) whose values fit int32 gets an int32 copy
  (the int64 original is dropped when nothing else reads it);
- an index made by widening an int32 tensor (``Cast(int32 -> int64)``, what torch's dynamo
  exporter emits for ``index_select``) reads the int32 tensor directly (the Cast is dropped
  when nothing else reads it);
- any other computed index gets a ``Cast(to=int32)`` in front of its consumers; the range
  is checked when the indexed axis has a static size (``< 2**31`` means every valid index
  fits), and reported as unverified when that axis is symbolic.

GatherND and ScatterND keep int64: the ONNX spec allows no other index type there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bevviz.export.inspection import tensor_types
from bevviz.export.onnx_file import walk_graphs
from bevviz.samplers.gather_scatter import INT32_MAX

__all__ = ["INT32_OPS", "IndexChange", "make_indices_int32"]

#: Op type -> index input position, for the ops whose index may be int32 by the ONNX spec.
INT32_OPS = {"Gather": 1, "GatherElements": 1, "ScatterElements": 1, "Scatter": 1}
#: Ops whose index the spec keeps int64.
_INT64_ONLY = ("GatherND", "ScatterND")


@dataclass(frozen=True)
class IndexChange:
    """One gather / scatter index input of the model's own nodes.

    Attributes:
        node: The consuming node.
        op_type: Its op type.
        tensor: The index tensor it read before.
        was: The index dtype before (``"int64"``, ``"int32"``, ``"unknown"``).
        now: The index dtype after.
        how: ``"kept"``, ``"int32 copy of a constant"``, ``"widening cast removed"``,
            ``"cast added"`` or why it stays int64.
        range: The range check: what was checked, or why it could not be.
    """

    node: str
    op_type: str
    tensor: str
    was: str
    now: str
    how: str
    range: str


def _fresh(base: str, taken: set[str]) -> str:
    out, k = base, 0
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def _axis_size(node: onnx.NodeProto, types: dict) -> int | str | None:
    """Size of the axis ``node`` indexes along (its ``axis`` attribute of input 0)."""
    shape = types.get(node.input[0], (0, None))[1]
    if shape is None:
        return None
    axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 0)
    if not -len(shape) <= axis < len(shape):
        return None
    return shape[axis]


def make_indices_int32(model: onnx.ModelProto, types: dict | None = None, taken: set[str] | None = None,
                       skip: set[str] | frozenset = frozenset(), base_dir: str | None = None) -> list[IndexChange]:
    """Make every gather / scatter index of ``model`` int32, in place (see the module docstring).

    Args:
        model: The model (changed in place).
        types: ``tensor_types(model)`` if already computed (names -> (elem type, shape)).
        taken: Names already used in the model (new names avoid them; updated).
        skip: Names of nodes to leave alone (e.g. ones just built with int32 indices).
        base_dir: Folder of the model file, for constant indices still stored as external
            data (a model loaded without its external data).

    Returns:
        One :class:`IndexChange` per index input of the model's gather / scatter nodes.
    """
    types = tensor_types(model) if types is None else types
    graphs = list(walk_graphs(model.graph))
    if taken is None:
        taken = {n for g in graphs for node in g.node for n in (*node.input, *node.output, node.name)}
        taken |= {i.name for g in graphs for i in (*g.input, *g.initializer)}
    uses = Counter(name for g in graphs for node in g.node for name in node.input)
    uses.update(o.name for g in graphs for o in g.output)
    # an initializer that is also a graph input is only a default: a user may feed another index
    inits = {t.name: (g, t) for g in graphs for t in g.initializer if t.name not in {i.name for i in g.input}}
    producers = {out: (g, node) for g in graphs for node in g.node for out in node.output}
    changes: list[IndexChange] = []
    for g in graphs:
        made: dict[str, str] = {}  # int64 index -> its int32 replacement in this graph
        out_nodes: list[onnx.NodeProto] = []
        for node in list(g.node):
            label = node.name or node.op_type
            if node.name in skip or len(node.input) < 2:
                out_nodes.append(node)
                continue
            if node.op_type in _INT64_ONLY:
                idx = node.input[1]
                was = _dtype(types.get(idx, (0, None))[0])
                changes.append(IndexChange(label, node.op_type, idx, was, was,
                                           "kept: the ONNX spec allows only int64 here", "n/a"))
            if node.op_type not in INT32_OPS:
                out_nodes.append(node)
                continue
            idx = node.input[1]
            elem = types.get(idx, (0, None))[0]
            if elem == TensorProto.INT32:
                changes.append(IndexChange(label, node.op_type, idx, "int32", "int32", "kept", "n/a"))
                out_nodes.append(node)
                continue
            if idx in made:
                node.input[1] = made[idx][0]
                uses[idx] -= 1
                changes.append(IndexChange(label, node.op_type, idx, _dtype(elem), "int32", made[idx][1],
                                           made[idx][2]))
                out_nodes.append(node)
                continue
            new, how, rng = _convert(g, node, idx, elem, types, (inits, producers, base_dir), taken, out_nodes)
            if new is None:
                changes.append(IndexChange(label, node.op_type, idx, _dtype(elem), _dtype(elem), how, rng))
            else:
                made[idx] = (new, how, rng)
                uses[new] += 1
                node.input[1] = new
                uses[idx] -= 1
                changes.append(IndexChange(label, node.op_type, idx, _dtype(elem), "int32", how, rng))
            out_nodes.append(node)
        del g.node[:]
        g.node.extend(out_nodes)
    _drop_unused(graphs, uses, producers, inits, changes)
    return changes


def _dtype(elem: int) -> str:
    return {TensorProto.INT32: "int32", TensorProto.INT64: "int64"}.get(elem, "unknown" if not elem else
                                                                      TensorProto.DataType.Name(elem).lower())


def _constant_values(idx: str, inits: dict, producers: dict, base_dir: str | None) -> np.ndarray | None:
    if idx in inits:
        return numpy_helper.to_array(inits[idx][1], base_dir=base_dir or "")
    prod = producers.get(idx)
    if prod is not None and prod[1].op_type == "Constant":
        for a in prod[1].attribute:
            if a.name == "value":
                return numpy_helper.to_array(a.t)
            if a.name == "value_int":
                return np.asarray(a.i, dtype=np.int64)
            if a.name == "value_ints":
                return np.asarray(list(a.ints), dtype=np.int64)
    return None


def _convert(g, node, idx, elem, types, stores, taken, out_nodes):
    """The int32 replacement of ``idx`` for ``node``: (name or None, how, range)."""
    inits, producers, base_dir = stores
    values = _constant_values(idx, inits, producers, base_dir)
    if values is not None:
        if values.size and (int(values.min()) < -INT32_MAX - 1 or int(values.max()) > INT32_MAX):
            return None, "kept int64: constant values exceed int32", f"values in [{values.min()}, {values.max()}]"
        name = _fresh(f"{idx}_int32", taken)
        g.initializer.append(numpy_helper.from_array(values.astype(np.int32), name))
        rng = f"values in [{values.min()}, {values.max()}] (checked)" if values.size else "empty"
        return name, "int32 copy of a constant", rng
    prod = producers.get(idx)
    if prod is not None and prod[1].op_type == "Cast" and types.get(prod[1].input[0], (0,))[0] == TensorProto.INT32:
        return prod[1].input[0], "widening cast removed", "was int32 before the exporter's Cast (checked)"
    size = _axis_size(node, types)
    if isinstance(size, int):
        rng = f"axis size {size} < 2**31: every valid index fits (checked)" if size <= INT32_MAX else None
        if rng is None:
            return None, "kept int64: the indexed axis is longer than int32", f"axis size {size}"
    else:
        rng = f"unverified: axis size {size if isinstance(size, str) else 'unknown'}; int32 holds while < 2**31"
    name = _fresh(f"{idx}_int32", taken)
    out_nodes.append(helper.make_node("Cast", [idx], [name], name=_fresh(f"{name}_cast", taken), to=TensorProto.INT32))
    return name, "cast added" if elem else "cast added (dtype unknown)", rng


def _drop_unused(graphs, uses, producers, inits, changes) -> None:
    """Remove the int64 constants and widening casts that nothing reads any more."""
    for c in changes:
        if c.how not in ("int32 copy of a constant", "widening cast removed") or uses[c.tensor] > 0:
            continue
        if c.tensor in inits:
            g, t = inits.pop(c.tensor)
            if c.tensor not in {i.name for i in g.input}:
                g.initializer.remove(t)
        elif c.tensor in producers:
            g, node = producers.pop(c.tensor)
            if node in g.node:
                g.node.remove(node)
