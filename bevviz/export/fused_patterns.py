"""Find the weighted sums that read GridSample outputs: the patterns rewritten as one fused gather.

Every BEV model follows its GridSample by a weighted sum over the sampled points (spatial
cross-attention sums a pillar's points; multi-scale deformable attention concatenates the
levels, multiplies by the attention weights and sums). Matched here, in one graph, with every
intermediate read by the next node only (no other consumer, not a graph output) and every
shape static:

- ``ReduceSum(GS, axes)``;
- ``ReduceSum(Mul(GS, W), axes)`` (``W`` on either side);
- ``ReduceSum([Mul(] Concat(GS_1, ..., GS_L, axis=-1) [, W)], axes)`` (levels side by side);
- ``ReduceSum([Mul(] [Reshape(] Concat(Unsqueeze(GS_l, -2), axis=-2) [)] [, W)], axes)``
  (``torch.stack(dim=-2)``, optionally ``.flatten(-2)``);
- ``MatMul([Unsqueeze(] S [, -2)], W)`` with ``W`` ``(..., P, 1)`` or ``(P,)`` (``S`` any of the
  level forms above, ``P`` its last axis): ``torch.matmul(s.unsqueeze(-2), w.unsqueeze(-1))``;
- ``Einsum(S, W)`` or ``Einsum(W, S)`` whose equation sums ``S`` over trailing letters and keeps
  the leading ones in order, ``W``'s letters distinct letters of ``S`` without ``C``
  (``nchp,nhp->nch``, ``bhp,bchp->bch``, ``nchp,nph->nch``, ``nchlp,nhlp->nch``);

where ``axes`` is a trailing block of the output's spatial axes (for several levels: one that
ends in the concatenated axis) and ``W`` broadcasts to the sum's input with size 1 along
``C`` (weights that differ per channel are not a weighted sum of samples). A ``MatMul`` or
``Einsum`` match is the ``Mul`` form's: its weight transposed / reshaped to broadcast like
``Mul``'s (:attr:`FusedMatch.weight_perm`, :attr:`FusedMatch.weight_shape`), so one emitter
writes every form. Anything else (an equation that contracts or moves ``C``, keeps the
points, uses ``...``; a ``MatMul`` with several output columns) is rewritten node by node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["FusedMatch", "find_patterns", "node_key"]


def node_key(node: onnx.NodeProto) -> tuple[str, ...]:
    """A node's identity within its graph: its outputs (each produced once; protobuf wrappers are not stable)."""
    return tuple(node.output) or (node.name,)


@dataclass
class FusedMatch:
    """One weighted sum of GridSample outputs.

    Attributes:
        grid_samples: The GridSample nodes, in level order.
        weight: The weights ``W`` (a tensor name), or None for a plain sum.
        weight_target: The shape ``W`` broadcasts to: the sum's input with ``C = 1``.
        merge_last: ``W``'s target has the stacked ``(L, P)`` axes unmerged: merge them.
        kept: Spatial output axes kept by the sum.
        reduce: The ReduceSum node (its output is the pattern's output).
        out_shape: The sum's static output shape.
        nodes: Every node of the pattern (GridSample nodes included), removed by the rewrite.
        form: The pattern in words (``"Concat+Mul+ReduceSum"``).
        shape_reads: ``Shape`` nodes reading a tensor of the pattern (static): each becomes a
            constant holding the shape it read.
        weight_perm: A ``Transpose`` of ``W`` first (an ``Einsum`` weight whose letters are in
            another order than the samples'), or None.
        weight_shape: ``W`` reshaped to this shape (after ``weight_perm``) before it is expanded to
            ``weight_target``: the ``MatMul`` / ``Einsum`` weight as the ``Mul`` form's, or None.
    """

    grid_samples: list[onnx.NodeProto]
    weight: str | None
    weight_target: tuple[int, ...] | None
    merge_last: bool
    kept: int
    reduce: onnx.NodeProto
    out_shape: tuple[int, ...]
    nodes: list[onnx.NodeProto]
    form: str
    shape_reads: list[tuple[onnx.NodeProto, tuple[int, ...]]] = field(default_factory=list)
    weight_perm: tuple[int, ...] | None = None
    weight_shape: tuple[int, ...] | None = None


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


def _const_ints(name: str, consts: Mapping[str, np.ndarray]) -> list[int] | None:
    v = consts.get(name)
    return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]


def constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Values of the graph's constants: initializers that are not inputs, and Constant nodes."""
    inputs = {i.name for i in graph.input}
    out = {t.name: numpy_helper.to_array(t) for t in graph.initializer if t.name not in inputs and t.dims != [0]}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name in ("value", "value_ints"):
            a = node.attribute[0]
            out[node.output[0]] = numpy_helper.to_array(a.t) if a.name == "value" else np.asarray(list(a.ints))
    return out


def _attr(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


class _Graph:
    """Consumers, shapes and constants of one graph."""

    def __init__(self, graph: onnx.GraphProto, types: Mapping, consts: Mapping[str, np.ndarray]):
        self.types, self.consts = types, consts
        self.outputs = {o.name for o in graph.output}
        self.users: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.users.setdefault(name, []).append(node)

    def shape(self, name: str):
        return self.types.get(name, (0, None))[1]

    def dtype(self, name: str) -> int:
        return self.types.get(name, (0, None))[0]

    def only_user(self, name: str) -> onnx.NodeProto | None:
        """The one node reading ``name``'s values, when nothing else (no graph output) does.

        ``Shape`` nodes reading a statically shaped ``name`` do not count: they become constants.
        """
        users = self.users.get(name, [])
        if _static(self.shape(name)):
            users = [u for u in users if u.op_type != "Shape"]
        if name in self.outputs or len(users) != 1 or list(users[0].input).count(name) != 1:
            return None
        return users[0]


def _levels(g: _Graph, first: onnx.NodeProto, eligible: Callable[[onnx.NodeProto], bool]):
    """From a GridSample: (GridSample nodes, nodes, tensor holding them side by side, merge_last, form) or None."""
    shape = g.shape(first.output[0])
    r = len(shape)
    user = g.only_user(first.output[0])
    if user is None:
        return None
    if user.op_type == "Concat" and int(_attr(user, "axis", 0)) % r == r - 1:
        gs = [_producer_gs(g, name, eligible) for name in user.input]
        if any(x is None for x in gs) or node_key(gs[0]) != node_key(first):
            return None
        return gs, [*gs, user], user.output[0], False, "Concat"
    concat = g.only_user(user.output[0]) if _unsqueeze_axes(g, user) in ([r - 1], [-2]) else None
    if concat is not None and concat.op_type == "Concat":  # else: an Unsqueeze for a MatMul (one level)
        if int(_attr(concat, "axis", 0)) % (r + 1) != r - 1:
            return None
        ups = [g_prod for g_prod in (_producer(g, name) for name in concat.input)]
        if any(u is None or _unsqueeze_axes(g, u) not in ([r - 1], [-2])
               or node_key(g.only_user(u.output[0]) or u) != node_key(concat) for u in ups):
            return None
        gs = [_producer_gs(g, u.input[0], eligible) for u in ups]
        if any(x is None for x in gs) or node_key(gs[0]) != node_key(first):
            return None
        nodes, out, merge = [*gs, *ups, concat], concat.output[0], True
        nxt = g.only_user(out)
        s = g.shape(out)
        if nxt is not None and nxt.op_type == "Reshape" and _static(s) and \
                tuple(g.shape(nxt.output[0]) or ()) == (*s[:-2], s[-2] * s[-1]):
            return gs, [*nodes, nxt], nxt.output[0], False, "Stack+Reshape"
        return gs, nodes, out, merge, "Stack"
    return [first], [first], first.output[0], False, ""


def _unsqueeze_axes(g: _Graph, node: onnx.NodeProto) -> list[int] | None:
    """An ``Unsqueeze`` node's constant axes (an input: GridSample needs opset >= 16), or None."""
    if node.op_type != "Unsqueeze" or len(node.input) < 2:
        return None
    return _const_ints(node.input[1], g.consts)


def _producer(g: _Graph, name: str) -> onnx.NodeProto | None:
    return g.producers.get(name)


def _producer_gs(g: _Graph, name: str, eligible) -> onnx.NodeProto | None:
    node = g.producers.get(name)
    if node is None or not eligible(node) or g.only_user(name) is None:
        return None
    return node


def _reduced_block(g: _Graph, node: onnx.NodeProto, rank: int) -> list[int] | None:
    """The sorted axes a ReduceSum reduces, or None when not readable (or all of them)."""
    if len(node.input) > 1 and node.input[1]:
        axes = _const_ints(node.input[1], g.consts)
    else:
        axes = _attr(node, "axes", None)
        axes = None if axes is None else list(axes)
    if not axes:
        return None
    return sorted({int(a) % rank for a in axes})


def find_patterns(graph: onnx.GraphProto, types: Mapping, eligible: Callable[[onnx.NodeProto], bool],
                  unfused: dict[tuple[str, ...], str] | None = None) -> list[FusedMatch]:
    """Every fused pattern of ``graph`` whose GridSample nodes are all ``eligible``.

    Args:
        graph: One graph (main graph or a subgraph).
        types: Inferred ``name -> (elem type, shape)`` (:func:`bevviz.export.inspection.tensor_types`).
        eligible: Whether a GridSample node may be rewritten (settings, backend).
        unfused: When given, filled with ``node_key(GridSample) -> why`` for the GridSample nodes
            read by a ``MatMul`` / ``Einsum`` that is not a fusable weighted sum.

    Returns:
        The matches; no node belongs to two.
    """
    g = _Graph(graph, types, constants(graph))
    g.producers = {out: node for node in graph.node for out in node.output}
    matches, used = [], set()
    for node in graph.node:
        if not eligible(node) or node_key(node) in used:
            continue
        m = _match(g, node, eligible)
        if isinstance(m, str):
            if unfused is not None:
                unfused[node_key(node)] = m
            continue
        if m is not None and not any(node_key(n) in used for n in m.nodes):
            used.update(node_key(n) for n in m.nodes)
            matches.append(m)
    return matches


def _match(g: _Graph, first: onnx.NodeProto, eligible) -> FusedMatch | str | None:
    shape = g.shape(first.output[0])
    if not _static(shape) or len(shape) < 3:
        return None
    found = _levels(g, first, eligible)
    if found is None:
        return None
    gs, nodes, cur, merge, form = found
    shapes = [g.shape(n.output[0]) for n in gs]
    xs = [g.shape(n.input[0]) for n in gs]
    if not all(_static(s) for s in shapes + xs) or len({s[:-1] for s in shapes}) != 1 or \
            len({(x[0], x[1]) for x in xs}) != 1 or len({g.dtype(n.input[0]) for n in gs}) != 1:
        return None
    like = g.dtype(first.input[0])
    cur_shape = g.shape(cur)
    if not _static(cur_shape):
        return None
    target = (cur_shape[0], 1, *cur_shape[2:])
    nxt = g.only_user(cur)
    if nxt is None:
        return None
    read = {"MatMul": _matmul, "Unsqueeze": _matmul, "Einsum": _einsum}.get(nxt.op_type, _reduce_sum)
    found_sum = read(g, nxt, cur, tuple(cur_shape), like)
    if found_sum is None or isinstance(found_sum, str):
        return found_sum
    rank, axes = len(cur_shape), found_sum.axes
    kept = axes[0] - 2
    # several levels: the sum must include their side-by-side axis; stacked (L, P) unmerged: both
    if (len(gs) > 1 and kept > len(shape) - 3) or (merge and axes[0] > rank - 2):
        return None if found_sum.form.endswith("ReduceSum") else f"{found_sum.form} sums the points, not the levels"
    out_shape = g.shape(found_sum.last.output[0])
    if not _static(out_shape):
        return None
    nodes = [*nodes, *found_sum.nodes]
    reads = [(u, tuple(g.shape(o))) for n in nodes[:-1] for o in n.output for u in g.users.get(o, [])
             if u.op_type == "Shape"]
    weight = found_sum.weight
    return FusedMatch(gs, weight, None if weight is None else target, merge, kept, found_sum.last, tuple(out_shape),
                      nodes, "+".join(f for f in (form, found_sum.form) if f), reads, found_sum.perm,
                      found_sum.shape)


@dataclass
class _Sum:
    """The weighted sum read after the sampled values: ``sum_axes(samples * W)``.

    Attributes:
        weight: ``W`` (a tensor name), or None for a plain sum.
        perm: A ``Transpose`` of ``W`` first, or None.
        shape: ``W`` reshaped to this (after ``perm``) to broadcast like the ``Mul`` form's, or
            None (its own shape does).
        nodes: The sum's nodes, its last (whose output is the sum) last.
        axes: The summed axes of the samples (a trailing block from axis 2 on).
        form: The nodes in words (``"Mul+ReduceSum"``).
    """

    weight: str | None
    perm: tuple[int, ...] | None
    shape: tuple[int, ...] | None
    nodes: list[onnx.NodeProto]
    axes: list[int]
    form: str

    @property
    def last(self) -> onnx.NodeProto:
        return self.nodes[-1]


def _fits(g: _Graph, w: str, ws, cur_shape: tuple[int, ...], like: int) -> bool:
    """Whether weights ``w`` of shape ``ws`` broadcast to the samples ``cur_shape`` with size 1 along ``C``."""
    target = (cur_shape[0], 1, *cur_shape[2:])
    if not _static(ws) or len(ws) > len(target) or g.dtype(w) != like:
        return False
    aligned = [1] * (len(target) - len(ws)) + list(ws)
    return aligned[1] == 1 and all(a in (1, t) for a, t in zip(aligned, target))


def _reduce_sum(g: _Graph, nxt: onnx.NodeProto, cur: str, cur_shape: tuple[int, ...], like: int) -> _Sum | None:
    """``ReduceSum(samples)`` or ``ReduceSum(Mul(samples, W))`` over a trailing block of axes."""
    weight, nodes = None, []
    if nxt.op_type == "Mul":
        other = nxt.input[1] if nxt.input[0] == cur else nxt.input[0]
        if other == cur or tuple(g.shape(nxt.output[0]) or ()) != cur_shape or \
                not _fits(g, other, g.shape(other), cur_shape, like):
            return None
        weight, nodes = other, [nxt]
        nxt = g.only_user(nxt.output[0])
    if nxt is None or nxt.op_type != "ReduceSum" or int(_attr(nxt, "noop_with_empty_axes", 0)):
        return None
    rank = len(cur_shape)
    axes = _reduced_block(g, nxt, rank)
    if axes is None or axes != list(range(axes[0], rank)) or axes[0] < 2:
        return None
    return _Sum(weight, None, None, [*nodes, nxt], axes, "Mul+ReduceSum" if nodes else "ReduceSum")


def _matmul(g: _Graph, nxt: onnx.NodeProto, cur: str, cur_shape: tuple[int, ...], like: int) -> _Sum | str | None:
    """``MatMul([Unsqueeze(] samples [, -2)], W)`` with ``W`` ``(..., P, 1)`` or ``(P,)``: a sum over ``P``.

    ``torch.matmul(sampled, w)`` and ``torch.matmul(sampled.unsqueeze(-2), w.unsqueeze(-1))``:
    ``out[..., m, 0] = sum_p A[..., m, p] * W[..., p, 0]``, the ``Mul`` form's weight being ``W``
    with its last two axes swapped (for the Unsqueeze: with the inserted axis dropped too).

    Returns:
        The sum; why not, for a MatMul that reads the samples; None for any other consumer.
    """
    nodes, a = [], cur
    if nxt.op_type == "Unsqueeze":
        if _unsqueeze_axes(g, nxt) not in ([len(cur_shape) - 1], [-2]):
            return None
        nodes, a = [nxt], nxt.output[0]
        nxt = g.only_user(a)
    if nxt is None or nxt.op_type != "MatMul":
        return None
    if nxt.input[0] != a or nxt.input[1] == a:
        return "MatMul: the samples are not its first operand alone"
    w, p = nxt.input[1], cur_shape[-1]
    ws = g.shape(w)
    if not _static(ws) or not (tuple(ws) == (p,) or (len(ws) >= 2 and tuple(ws[-2:]) == (p, 1))):
        return f"MatMul weight of shape {ws}: not one column over the {p} points ((..., {p}, 1) or ({p},))"
    vector = len(ws) == 1
    batch = [] if vector else list(ws[:-2])
    shape = (*batch, p) if nodes or vector else (*batch, 1, p)
    out = (*cur_shape[:-1], *([1] if nodes else []), *([] if vector else [1]))
    if tuple(g.shape(nxt.output[0]) or ()) != out or not _fits(g, w, shape, cur_shape, like):
        return f"MatMul weight of shape {tuple(ws)}: varies with C or broadcasts the samples"
    return _Sum(w, None, shape, [*nodes, nxt], [len(cur_shape) - 1], "Unsqueeze+MatMul" if nodes else "MatMul")


def _einsum(g: _Graph, nxt: onnx.NodeProto, cur: str, cur_shape: tuple[int, ...], like: int) -> _Sum | str:
    """``Einsum`` of the samples and ``W`` that is a weighted sum over their trailing axes.

    Fused only when the samples' letters are distinct (no diagonal) and in order, the output is
    their leading letters (``N``, ``C`` and kept axes, in order), and ``W``'s letters are distinct
    letters of the samples without ``C`` (a weight constant across channels), each of the
    samples' size: ``nchp,nhp->nch``, ``bhp,bchp->bch``, ``nchlp,nhlp->nch``. Not fused: an
    equation that contracts or moves ``C``, weights per channel, broadcasting (``...``).

    Returns:
        The sum, or why not.
    """
    eq = _attr(nxt, "equation", b"")
    eq = (eq.decode() if isinstance(eq, bytes) else str(eq)).replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(nxt.input) != 2 or list(nxt.input).count(cur) != 1 or len(terms) != 2 or "." in eq or "->" not in eq:
        return f"Einsum {eq!r}: not two operands with the samples once, explicit output, no '...'"
    mine = 0 if nxt.input[0] == cur else 1
    ts, tw = terms[mine], terms[1 - mine]
    w = nxt.input[1 - mine]
    rank = len(cur_shape)
    if len(ts) != rank or len(set(ts)) != rank or len(set(tw)) != len(tw) or not set(tw) <= set(ts):
        return f"Einsum {eq!r}: a diagonal, or weight letters the samples lack"
    if not 2 <= len(out) < rank or out != ts[:len(out)]:
        return f"Einsum {eq!r}: the output is not the samples' leading axes in order (C summed or moved, points kept)"
    if ts[1] in tw:
        return f"Einsum {eq!r}: the weights vary with C"
    ws = g.shape(w)
    if not _static(ws) or len(ws) != len(tw) or any(d != cur_shape[ts.index(ch)] for d, ch in zip(ws, tw)):
        return f"Einsum {eq!r}: weights of shape {ws}, not the samples' sizes"
    perm = tuple(sorted(range(len(tw)), key=lambda i: ts.index(tw[i])))
    shape = tuple(cur_shape[j] if ts[j] in tw else 1 for j in range(rank))
    if tuple(g.shape(nxt.output[0]) or ()) != tuple(cur_shape[:len(out)]) or not _fits(g, w, shape, cur_shape, like):
        return f"Einsum {eq!r}: output or weight shape not static, or weights of another dtype"
    return _Sum(w, None if perm == tuple(range(len(tw))) else perm, shape, [nxt], list(range(len(out), rank)),
                "Einsum")
