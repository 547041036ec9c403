"""Gather-and-reduce from a channels-last table: what replaces GridSample, alone or fused.

The formulation of the fused kernels of NPU vendors (and of
:mod:`bevviz.samplers.gather_scatter`), written as plain ONNX:

- one channels-last table ``(rows, C)``: every input ``X (N, C, *S_in)`` transposed to
  ``(N * prod(S_in), C)`` (linear or nearest with zeros padding: each image framed by zero
  pixels, :data:`bevviz.export.sampler_graph.ZERO_FRAME`), the levels of a fused pattern
  stacked, one zero row last where a level's taps are masked;
- per output point ``q`` its ``K`` taps: int32 rows (:func:`bevviz.export.sampler_graph.sample_taps`)
  and weights (the interpolation weights, times the pattern's own weights when fused);
- the points split into static chunks sized by a memory budget; per chunk one ``Gather``
  ``(q, K, C)`` and one ``MatMul`` ``(q, 1, K) @ (q, K, C)`` (fused, many taps), or the taps
  on the leading axis, gathered and weighed tap by tap (few taps) or gathered at once, weighed
  and summed over the taps (per-node); the chunks concatenated.

No full-size tensor per tap exists: the largest intermediate is one chunk's gather, bounded
by ``budget_bytes``. Shapes must be static to chunk (a symbolic number of points is one chunk).

:func:`build_per_node` replaces one GridSample (any consumer reads its ``(N, C, *S_out)``
output); :func:`build_fused` replaces GridSample nodes and the weighted sum that reads them
(:mod:`bevviz.export.fused_patterns`), writing the sum's output ``(N, C, *S_kept)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from bevviz.export.sampler_graph import (
    GraphBuilder,
    SamplerSpec,
    cast_index,
    framed_sizes,
    sample_taps,
    taps_last,
    zero_frame,
)

__all__ = ["FEW_TAPS", "MAX_CHUNKS", "Level", "build_fused", "build_per_node", "chunk_rows"]

#: Most chunks one gather is split into (a larger budget per chunk beyond that).
MAX_CHUNKS = 256
#: Up to this many taps per point a chunk is gathered and weighed tap by tap (onnxruntime's
#: batched MatMul of (1, K) @ (K, C) products costs about 0.7 us per point; measured 6 s of
#: 10 s on the MSDA per-node rewrite with K = 4), beyond it with one Gather (fused: and one
#: MatMul; per-node: a Mul and a ReduceSum over the taps).
FEW_TAPS = 8


@dataclass(frozen=True)
class Level:
    """One GridSample's inputs as the builder sees them.

    Attributes:
        x: Features ``(N, C, *S_in)``.
        grid: Coordinates ``(N, *S_out, d)``.
        spec: Its settings.
        x_shape: Inferred shape of ``x`` (ints static), or None.
        grid_shape: Inferred shape of ``grid``, or None.
    """

    x: str
    grid: str
    spec: SamplerSpec
    x_shape: tuple | None
    grid_shape: tuple | None

    @property
    def rank(self) -> int:
        """Rank of X and of the grid (4 or 5; 3 for one spatial axis)."""
        return len(self.grid_shape) if self.grid_shape is not None else len(self.x_shape)

    @property
    def frame(self) -> int:
        """Zero pixels around each image in the table (:func:`bevviz.export.sampler_graph.zero_frame`)."""
        return zero_frame(self.spec, self.x_shape)

    @property
    def rows(self) -> int | None:
        """``N * prod(S_in)`` when static (``S_in`` framed, :attr:`frame`)."""
        s = self.x_shape
        if s is None or not all(isinstance(d, int) for d in (s[0], *s[2:])):
            return None
        return int(np.prod([s[0], *framed_sizes(s, self.frame)]))


def chunk_rows(points: int | None, k: int, channels: int | None, itemsize: int, budget_bytes: int) -> list[int]:
    """Static chunk sizes over ``points`` so one chunk's ``(q, K, C)`` gather fits ``budget_bytes``.

    Returns:
        The sizes (summing to ``points``); ``[]`` when ``points`` or ``channels`` is symbolic
        (one chunk of whatever size).
    """
    if points is None or channels is None:
        return []
    per = max(1, budget_bytes // max(1, k * channels * itemsize))
    if math.ceil(points / per) > MAX_CHUNKS:
        per = math.ceil(points / MAX_CHUNKS)
    sizes = [per] * (points // per)
    if points % per:
        sizes.append(points % per)
    return sizes


def _table(b: GraphBuilder, levels: Sequence[Level]) -> tuple[str, list[str], str | None]:
    """Channels-last table of every level, plus one zero row where a level's taps are masked.

    A level framed by zero pixels (:attr:`Level.frame`) never reads a sentinel row; when every
    level is framed the table has no zero row (and one level's table is its features, moved
    channels-last, with no ``Concat`` copy).

    Returns:
        ``(table (rows [+ 1], C), offset of each level (1,), sentinel (1,) or None)``, offsets
        and sentinel in the index dtype; the sentinel (the zero row) is None without a zero row.
    """
    idt = levels[0].spec.index_dtype
    npt = cast_index(idt)
    flats, offsets = [], []
    offset = b.const([0], npt, "offset0")
    for i, lv in enumerate(levels):
        r = lv.rank
        x = lv.x
        if lv.frame:  # zero pixels around every image: a tap outside reads zeros, unmasked
            sides = [0, 0] + [lv.frame] * (r - 2)
            x = b.op("Pad", x, b.const(sides + sides, np.int64, f"x{i}_frame"), mode="constant", hint=f"x{i}_framed")
        flat = b.op("Reshape", b.op("Transpose", x, perm=[0, *range(2, r), 1], hint=f"x{i}_last"),
                    b.op("Concat", b.const([-1], np.int64, "m1"), b.dim(lv.x, lv.x_shape, 1, "C"), axis=0),
                    hint=f"x{i}_rows")
        flats.append(flat)
        offsets.append(offset)
        if lv.rows is not None:
            size = b.const([lv.rows], npt, f"rows{i}")
        else:
            size = b.op("Cast", b.op("Shape", flat, start=0, end=1), to=idt, hint=f"rows{i}")
        offset = b.op("Add", offset, size, hint=f"offset{i + 1}")
    if all(lv.frame for lv in levels):  # no masked tap: no zero row
        return (flats[0] if len(flats) == 1 else b.op("Concat", *flats, axis=0, hint="table")), offsets, None
    c = levels[0].x_shape[1] if levels[0].x_shape is not None else None
    if isinstance(c, int):
        zero_row = b.op("CastLike", b.const(np.zeros((1, c)), np.float32, "zero_row_f32"), levels[0].x, hint="zero_row")
    else:
        zero_row = b.op("CastLike", b.op("ConstantOfShape", b.op("Concat", b.const([1], np.int64, "one64"),
                                                                 b.dim(levels[0].x, None, 1, "C"), axis=0)),
                        levels[0].x, hint="zero_row")
    table = b.op("Concat", *flats, zero_row, axis=0, hint="table")
    return table, offsets, offset


def _chunks(b: GraphBuilder, index: str, weight: str, sizes: list[int], axis: int) -> tuple[list[str], list[str]]:
    """``index`` and ``weight`` split into static chunks of ``sizes`` along ``axis`` (the points)."""
    if len(sizes) <= 1:
        return [index], [weight]
    split = b.const(sizes, np.int64, "chunks")
    return (b.op("Split", index, split, axis=axis, outputs=len(sizes), hint="index_chunk"),
            b.op("Split", weight, split, axis=axis, outputs=len(sizes), hint="weight_chunk"))


def _gather_matmul(b: GraphBuilder, table: str, index: str, weight: str, sizes: list[int]) -> tuple[str, int]:
    """``out[q] = sum_k weight[q, k] * table[index[q, k]]`` in static chunks, points first (many taps).

    Per chunk one gather ``(q, K, C)`` and one batched MatMul ``(q, 1, K) @ (q, K, C)``.

    Args:
        b: The builder.
        table: ``(rows, C)``.
        index: ``(Q, K)`` table rows.
        weight: ``(Q, K)`` like the table.
        sizes: Chunk sizes over ``Q`` (``[]``: one chunk).

    Returns:
        ``((Q, C), number of chunks)``.
    """
    idx_parts, w_parts = _chunks(b, index, weight, sizes, 0)
    one = b.const([1], np.int64, "ax1")
    outs = [b.op("MatMul", b.op("Unsqueeze", w, one), b.op("Gather", table, idx, axis=0, hint=f"gathered{i}"),
                 hint=f"reduced{i}") for i, (idx, w) in enumerate(zip(idx_parts, w_parts))]  # (q, 1, C) each
    joined = outs[0] if len(outs) == 1 else b.op("Concat", *outs, axis=0, hint="joined")
    return b.op("Reshape", joined, b.const([0, -1], np.int64, "q_c"), hint="sampled"), len(outs)


def _gather_reduce_taps_first(b: GraphBuilder, table: str, index: str, weight: str | None, sizes: list[int],
                              k: int) -> tuple[str, int]:
    """``out[q] = sum_k weight[k, q] * table[index[k, q]]`` in static chunks, taps on the leading axis.

    Args:
        b: The builder.
        table: ``(rows, C)``.
        index: ``(K, Q)`` table rows.
        weight: ``(K, Q)`` like the table, or None (``K == 1``: the row as is).
        sizes: Chunk sizes over ``Q`` (``[]``: one chunk).
        k: ``K``.

    Returns:
        ``((Q, C), number of chunks)``.
    """
    if weight is None:  # nearest: one tap, weight 1 (outside: the zero row); the gather is the output
        return b.op("Gather", table, b.op("Reshape", index, b.const([-1], np.int64, "flat")), axis=0,
                    hint="picked"), 1
    idx_parts, w_parts = _chunks(b, index, weight, sizes, 1)
    outs = []
    for i, (idx, w) in enumerate(zip(idx_parts, w_parts)):
        w = b.op("Unsqueeze", w, b.const([-1], np.int64, "last"), hint=f"weight{i}_col")  # (K, q, 1)
        if k > FEW_TAPS:  # one gather (K, q, C), weighed, summed over the taps
            rows = b.op("Gather", table, idx, axis=0, hint=f"gathered{i}")
            outs.append(b.op("ReduceSum", b.op("Mul", rows, w), b.const([0], np.int64, "ax0"), keepdims=0,
                             hint=f"reduced{i}"))
            continue
        cols = b.op("Split", idx, b.const([1] * k, np.int64, "ones_k"), axis=0, outputs=k, hint=f"index{i}_tap")
        ws = b.op("Split", w, b.const([1] * k, np.int64, "ones_k"), axis=0, outputs=k, hint=f"weight{i}_tap")
        cols, ws = ([cols], [ws]) if k == 1 else (cols, ws)
        acc = None
        for t, (col, wt) in enumerate(zip(cols, ws)):
            term = b.op("Mul", b.op("Gather", table, col, axis=0, hint=f"tap{i}_{t}"), wt)  # (1, q, C)
            acc = term if acc is None else b.op("Add", acc, term, hint=f"sum{i}_{t}")
        outs.append(b.op("Squeeze", acc, b.const([0], np.int64, "ax0"), hint=f"reduced{i}"))  # (q, C)
    return (outs[0] if len(outs) == 1 else b.op("Concat", *outs, axis=0, hint="sampled")), len(outs)


def build_per_node(b: GraphBuilder, level: Level, out: str, budget_bytes: int, itemsize: int = 4) -> int:
    """Append the nodes computing ``out = GridSample(X, grid)`` ``(N, C, *S_out)`` to ``b.nodes``.

    Args:
        b: The builder (its prefix names the replaced node).
        level: X, grid, settings and shapes.
        out: The replaced node's output name.
        budget_bytes: Largest gather chunk ``(q, K, C)`` in bytes.
        itemsize: Bytes per feature element.

    Returns:
        The number of gather chunks.
    """
    r = level.rank
    table, offsets, sentinel = _table(b, [level])
    taps = sample_taps(b, level.x, level.x_shape, level.grid, r, level.spec, offsets[0], sentinel)
    flat = b.const([taps.k, -1], np.int64, "k_q")
    index = b.op("Reshape", taps.index, flat, hint="index")
    weight = None if taps.weight is None else b.op("Reshape", taps.weight, flat, hint="weight")
    gs = level.grid_shape
    points = int(np.prod(gs[:-1])) if gs is not None and all(isinstance(d, int) for d in gs[:-1]) else None
    c = level.x_shape[1] if level.x_shape is not None and isinstance(level.x_shape[1], int) else None
    sampled, chunks = _gather_reduce_taps_first(b, table, index, weight,
                                                chunk_rows(points, taps.k, c, itemsize, budget_bytes), taps.k)
    if points is not None:
        shape = b.const([*gs[:-1], -1], np.int64, "out_last")
    else:
        shape = b.op("Concat", b.op("Shape", level.grid, start=0, end=-1), b.const([-1], np.int64, "m1"), axis=0)
    last = b.op("Reshape", sampled, shape, hint="channels_last")
    b.op_to(out, "Transpose", last, perm=[0, r - 1, *range(1, r - 1)])
    return chunks


def build_fused(b: GraphBuilder, levels: Sequence[Level], weight: str | None, kept: int, out: str,
                out_shape: Sequence[int], budget_bytes: int, itemsize: int = 4) -> int:
    """Append the nodes computing a weighted sum of GridSample outputs, never materialising them.

    ``out[n, c, *s] = sum_{l, p} W[n, 0, *s, l, p] * GridSample_l(X_l, grid_l)[n, c, *s, p]``:
    the GridSample outputs concatenated over their reduced (trailing) axes, times ``W``,
    summed over those axes.

    Args:
        b: The builder.
        levels: The GridSample nodes' inputs; static shapes, the same ``N``, ``C`` and kept
            output axes ``S_kept``.
        weight: ``W`` already expanded to ``(N, 1, *S_kept, *S_mid, sum_l P_l)`` (the levels side
            by side along the last axis), like the features; or None (a plain sum).
        kept: Number of kept spatial output axes (``S_kept``).
        out: The sum's output name.
        out_shape: Its static shape (``(N, C, *S_kept)``, with 1s where keepdims).
        budget_bytes: Largest gather chunk ``(q, K, C)`` in bytes.
        itemsize: Bytes per feature element.

    Returns:
        The number of gather chunks.
    """
    table, offsets, sentinel = _table(b, levels)
    n, c = levels[0].x_shape[0], levels[0].x_shape[1]
    s_kept = list(levels[0].grid_shape[1:1 + kept])
    q = n * int(np.prod(s_kept))
    indices, weights, start, k_total = [], [], 0, 0
    for i, lv in enumerate(levels):
        p = int(np.prod(lv.grid_shape[1 + kept:-1]))
        width = lv.grid_shape[-2]  # this level's share of the side-by-side (last) axis
        taps = sample_taps(b, lv.x, lv.x_shape, lv.grid, lv.rank, lv.spec, offsets[i], sentinel)
        indices.append(b.op("Reshape", taps_last(b, taps.index, lv.rank, f"index{i}_last"),
                            b.const([q, p * taps.k], np.int64, "q_pk"), hint=f"index{i}"))
        tap_w = None if taps.weight is None else taps_last(b, taps.weight, lv.rank, f"weight{i}_last")
        if weight is not None:
            own = weight if len(levels) == 1 else b.op(
                "Slice", weight, b.const([start], np.int64, "s"), b.const([start + width], np.int64, "e"),
                b.const([-1], np.int64, "last"), hint=f"own_weight{i}")
            own = b.op("Reshape", own, b.const([q, p, 1], np.int64, "q_p_1"))
            if tap_w is None:
                w = own
            else:
                w = b.op("Mul", b.op("Reshape", tap_w, b.const([q, p, taps.k], np.int64, "q_p_k")), own)
        elif tap_w is None:  # a plain sum of nearest samples: weight 1 (outside reads the zero row)
            w = b.op("CastLike", b.op("ConstantOfShape", b.const([q, p], np.int64, "q_p"),
                                      value=_float_one()), lv.x, hint=f"ones{i}")
        else:
            w = tap_w
        weights.append(b.op("Reshape", w, b.const([q, p * taps.k], np.int64, "q_pk"), hint=f"weight{i}"))
        start += width
        k_total += p * taps.k
    index = indices[0] if len(indices) == 1 else b.op("Concat", *indices, axis=1, hint="index")
    wts = weights[0] if len(weights) == 1 else b.op("Concat", *weights, axis=1, hint="weight")
    sizes = chunk_rows(q, k_total, c, itemsize, budget_bytes)
    if k_total > FEW_TAPS:
        sampled, chunks = _gather_matmul(b, table, index, wts, sizes)
    else:  # a (q, 1, K) @ (q, K, C) MatMul of few taps is q tiny products: tap by tap, taps first
        first = [1, 0]
        sampled, chunks = _gather_reduce_taps_first(b, table, b.op("Transpose", index, perm=first, hint="index_first"),
                                                    b.op("Transpose", wts, perm=first, hint="weight_first"), sizes,
                                                    k_total)
    last = b.op("Reshape", sampled, b.const([n, *s_kept, c], np.int64, "out_last"), hint="channels_last")
    r = 2 + kept
    first = b.op("Transpose", last, perm=[0, r - 1, *range(1, r - 1)], hint="channels_first") if kept else last
    b.op_to(out, "Reshape", first, b.const(list(out_shape), np.int64, "out_shape"))
    return chunks


def _float_one() -> onnx.TensorProto:
    return helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
