"""The taps of one GridSample as ONNX nodes: flat int32 table rows and their weights.

What replaces a ``GridSample`` node is a gather from a channels-last table
(:mod:`bevviz.export.gather_graph`); this module computes, for every sampling point, the rows
of that table its taps read and the weight of each, exactly as ONNX GridSample reads them
(the semantics of onnxruntime's kernel and of ``onnx.reference``, opset 16 / 20 / 22):

1. ``x = unnormalize(grid)`` per spatial axis (grid component ``d - 1 - a`` is spatial axis
   ``a`` of ``X``: ``(x, y)`` for 4-D, ``(x, y, z)`` for 5-D);
2. nearest: ``x = Round(x)`` (half to even, like ``std::nearbyint``) before any padding;
3. a coordinate outside ``[x_min, x_max]`` (``[-0.5, size - 0.5]``, align_corners: ``[0,
   size - 1]``) is clamped to ``[0, size - 1]`` (border; not in cubic mode, where
   onnxruntime and PyTorch clamp only the taps, while ``onnx.reference`` clamps the
   coordinate too) or reflected into the range (reflection); zeros leaves it;
4. taps: nearest ``x``; linear ``floor(x) + {0, 1}``, weights ``1 - |x - tap|``; cubic
   ``floor(x) + {-1, 0, 1, 2}``, Keys' kernel with ``A = -0.75`` of ``|x - tap|``;
5. each tap is padded on its own (border: clamped; reflection: reflected, then clamped);
   a tap still outside ``[0, size - 1]`` (zeros padding, NaN, inf) reads the table's zero row
   (``sentinel``) with weight 0, and its position is never cast from a non-finite float;
   linear and nearest sampling with zeros padding instead read a frame of zero pixels around
   each image (:data:`ZERO_FRAME`), the coordinate clamped into the frame (NaN to its low edge).

The taps of all axes combine into ``K = prod(k_a)`` taps per point (first spatial axis
outermost); row = ``offset + n * prod(sizes) + sum_a tap_a * stride_a`` (with a zero frame:
sizes and strides of the framed image, ``tap_a + frame`` for ``tap_a``, computed as one row per
point plus constant tap offsets).

Convention:
    ``grid[..., 0]`` is ``x`` (column, the last axis of ``X``), ``grid[..., 1]`` is ``y``,
    ``grid[..., 2]`` is ``z`` (5-D), normalised to ``[-1, 1]``; align_corners=False:
    ``u = ((g + 1) * size - 1) / 2``; True: ``u = (g + 1) / 2 * (size - 1)`` (docs/conventions.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["CUBIC_A", "TAPS", "ZERO_FRAME", "GraphBuilder", "SamplerSpec", "Taps", "framed_sizes", "sample_taps",
           "taps_last", "zero_frame"]

#: Taps per axis of each mode (opset-16 names; "bilinear" is N-linear for any rank).
TAPS = {"nearest": 1, "bilinear": 2, "bicubic": 4}
#: The cubic convolution constant of ONNX GridSample and PyTorch (Keys 1981).
CUBIC_A = -0.75
_OFFSETS = {"nearest": [0.0], "bilinear": [0.0, 1.0], "bicubic": [-1.0, 0.0, 1.0, 2.0]}
#: Zero pixels on each side of every spatial axis of an image in the table, for linear and
#: nearest sampling with zeros padding: a coordinate clamped into ``[-2, size]`` reads only zero
#: rows outside the image (``floor + {0, 1}`` and the rounded position stay in ``[-2, size + 1]``),
#: so no inside mask, no And across the taps and no Where over the rows is needed (the zeros
#: padding of ONNX, exactly: a point whose taps all lie outside lands on frame pixels; no real
#: pixel is read with weight 0 that the original would not read).
ZERO_FRAME = 2


@dataclass(frozen=True)
class SamplerSpec:
    """What one GridSample node asks for.

    Attributes:
        mode: ``"bilinear"`` (N-linear), ``"nearest"`` or ``"bicubic"`` (opset-16 names).
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: The node's ``align_corners``.
        index_dtype: ``TensorProto.INT32`` or ``TensorProto.INT64`` for the gather rows.
        cast_weights: The features' dtype differs from the grid's (or is unknown): weights,
            computed in the grid's dtype, are cast like the features.
    """

    mode: str
    padding_mode: str
    align_corners: bool
    index_dtype: int = TensorProto.INT32
    cast_weights: bool = False

    @property
    def taps_per_axis(self) -> int:
        """1 (nearest), 2 (linear) or 4 (cubic)."""
        return TAPS[self.mode]


@dataclass
class GraphBuilder:
    """Emits nodes with fresh, collision-free names under one prefix.

    Attributes:
        prefix: Name prefix of every node and tensor made (e.g. ``"GridSample_3/gs"``).
        taken: Names already used in the graph (updated as names are made).
        nodes: The nodes made, in topological order.
    """

    prefix: str
    taken: set[str]
    nodes: list[onnx.NodeProto] = field(default_factory=list)

    def name(self, hint: str) -> str:
        """A fresh tensor / node name ``prefix/hint`` (``_k`` appended on a clash)."""
        base = f"{self.prefix}/{hint}"
        out, k = base, 0
        while out in self.taken:
            k += 1
            out = f"{base}_{k}"
        self.taken.add(out)
        return out

    def op(self, op_type: str, *inputs: str, hint: str | None = None, outputs: int = 1, **attrs) -> str | list[str]:
        """Add one node; returns its output name (or names when ``outputs > 1``)."""
        outs = [self.name(f"{hint or op_type}") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name(f"{hint or op_type}_node"),
                                           **attrs))
        return outs[0] if outputs == 1 else outs

    def op_to(self, out: str, op_type: str, *inputs: str, **attrs) -> None:
        """Add one node writing the existing name ``out`` (the replaced node's output)."""
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self.name(f"{op_type}_out"), **attrs))

    def const(self, value, dtype, hint: str = "c") -> str:
        """A Constant node holding ``np.asarray(value, dtype)``."""
        arr = np.asarray(value, dtype=dtype)
        return self.op("Constant", hint=hint, value=numpy_helper.from_array(arr, self.name(hint + "_value")))

    def float_like(self, value, like: str, hint: str = "f") -> str:
        """A float constant cast like tensor ``like`` (its dtype may be unknown here)."""
        return self.op("CastLike", self.const(value, np.float32, hint + "_f32"), like, hint=hint)

    def dim(self, tensor: str, shape: Sequence | None, k: int, hint: str = "dim") -> str:
        """Axis ``k`` of ``tensor`` as int64 ``(1,)``: a constant when ``shape[k]`` is static."""
        d = shape[k] if shape is not None and -len(shape) <= k < len(shape) else None
        if isinstance(d, int):
            return self.const([d], np.int64, hint)
        end = k + 1 if k != -1 else None
        attrs = {"start": k} if end is None else {"start": k, "end": end}
        return self.op("Shape", tensor, hint=hint, **attrs)


@dataclass(frozen=True)
class Taps:
    """Where a GridSample's taps read, per sampling point.

    Taps lie on the leading axis (onnxruntime broadcasts and splits a trailing axis of a few
    taps in tiny spans); :func:`taps_last` moves them last.

    Attributes:
        index: Table rows, index dtype ``(K, N, *S_out)``; the sentinel where a tap is outside
            (with a zero frame, :func:`zero_frame`: a frame pixel).
        weight: Tap weights, grid dtype ``(K, N, *S_out)``, 0 outside; ``None`` for nearest
            (weight 1; outside reads the zero row).
        k: Taps per point ``K``.
    """

    index: str
    weight: str | None
    k: int


def zero_frame(spec: SamplerSpec, x_shape: Sequence | None) -> int:
    """Frame width of ``X``'s images in the table: :data:`ZERO_FRAME` for linear or nearest
    sampling with zeros padding and a static shape (the strides are then constants); 0 otherwise
    (masks and the sentinel row). Nearest: the rounded coordinate, clamped into ``[-2, size]``,
    reads a frame pixel wherever it lies outside ``[0, size - 1]``."""
    static = x_shape is not None and all(isinstance(s, int) for s in x_shape)
    return ZERO_FRAME if static and spec.mode in ("bilinear", "nearest") and spec.padding_mode == "zeros" else 0


def framed_sizes(x_shape: Sequence, frame: int) -> list[int]:
    """Spatial sizes ``S_in`` of static ``X (N, C, *S_in)`` with ``frame`` zero pixels on each side."""
    return [int(s) + 2 * frame for s in x_shape[2:]]


def _fold(b: GraphBuilder, x: str, low: str, span: str, axis: str) -> str:
    """Reflect ``x`` into ``[low, low + span]`` (period ``2 * span``); identity inside, 0 for span 0."""
    zero = b.float_like([0.0], x, "zero")
    two = b.float_like([2.0], x, "two")
    period = b.op("Mul", span, two, hint=f"{axis}_period")
    extra = b.op("Mod", b.op("Abs", b.op("Sub", x, low)), period, fmod=1, hint=f"{axis}_extra")
    folded = b.op("Add", b.op("Min", extra, b.op("Sub", period, extra)), low, hint=f"{axis}_folded")
    high = b.op("Add", low, span, hint=f"{axis}_high")
    inside = b.op("And", b.op("GreaterOrEqual", x, low), b.op("LessOrEqual", x, high), hint=f"{axis}_in_range")
    return b.op("Where", inside, x, b.op("Where", b.op("Greater", span, zero), folded, zero), hint=f"{axis}_reflected")


def _axis_taps(b: GraphBuilder, g: str, size_f: str, spec: SamplerSpec, axis: str,
               lead: int, frame: int = 0) -> tuple[str, str | None, str | None]:
    """Taps along one spatial axis.

    Args:
        b: The builder.
        g: Normalised coordinates, float ``(N, *S_out)``.
        size_f: The axis size, float ``(1,)`` like ``g``.
        spec: The sampler settings.
        axis: A name for the axis (names only).
        lead: Rank of ``g``.
        frame: Zero pixels on each side of the axis in the table (:func:`zero_frame`); when
            nonzero the coordinate is clamped into the frame instead of masked.

    Returns:
        ``(position, inside, weight)``: position index-dtype ``(k, N, *S_out)`` (0 where
        outside; with a frame: ``floor(x)`` ``(1, N, *S_out)``, the taps' offsets and the frame
        left to the caller), inside bool ``(k, N,
        *S_out)`` (None with a frame), weight float ``(k, N, *S_out)`` zeroed outside (``None``
        for nearest).
    """
    one, zero, half = (b.float_like([v], g, n) for v, n in ((1.0, "one"), (0.0, "zero"), (0.5, "half")))
    size_m1 = b.op("Sub", size_f, one, hint=f"{axis}_size_m1")
    if spec.align_corners:  # u = (g + 1) / 2 * (size - 1)
        x = b.op("Mul", b.op("Mul", b.op("Add", g, one), half), size_m1, hint=f"{axis}_pix")
        low, high = zero, size_m1
    else:  # u = ((g + 1) * size - 1) / 2
        x = b.op("Mul", b.op("Sub", b.op("Mul", b.op("Add", g, one), size_f), one), half, hint=f"{axis}_pix")
        low, high = b.op("Neg", half), b.op("Sub", size_f, half)
    span = b.op("Sub", high, low, hint=f"{axis}_span")
    if spec.mode == "nearest":
        x = b.op("Round", x, hint=f"{axis}_round")
    if spec.padding_mode == "border" and spec.mode != "bicubic":  # cubic: only the taps (onnxruntime, PyTorch)
        outside = b.op("Or", b.op("Less", x, low), b.op("Greater", x, high))
        x = b.op("Where", outside, b.op("Max", b.op("Min", x, size_m1), zero), x, hint=f"{axis}_border")
    elif spec.padding_mode == "reflection":
        x = _fold(b, x, low, span, axis)
    if frame:  # NaN -> -frame, then clamp into [-frame, size]: outside taps read frame pixels
        lowest = b.float_like([-float(frame)], g, f"{axis}_lowest")
        x = b.op("Where", b.op("Equal", x, x), x, lowest, hint=f"{axis}_num")
        x = b.op("Max", b.op("Min", x, size_f), lowest, hint=f"{axis}_clamped")
    # taps on a leading axis (k, N, *S_out): onnxruntime broadcasts a (k, 1, ...) constant over
    # whole rows, while a trailing axis of k elements is broadcast in k-element spans (slow)
    taps_first = [-1] + [1] * lead
    x_k = b.op("Unsqueeze", x, b.const([0], np.int64, "first"), hint=f"{axis}_x")  # (1, N, *S_out)
    start = x_k if spec.mode == "nearest" else b.op("Floor", x_k, hint=f"{axis}_floor")
    if not frame:  # with a frame the caller adds the taps' constant offsets to one row per point
        offsets = b.float_like(np.reshape(_OFFSETS[spec.mode], taps_first), g, f"{axis}_offsets")
        pos = b.op("Add", start, offsets, hint=f"{axis}_taps")  # (k, N, *S_out)
    weight = None
    if spec.mode == "bilinear":  # 1 - |x - (floor + o)| = |(1 - o) - frac|: frac once per point, one k-wide op
        frac = b.op("Sub", x_k, start, hint=f"{axis}_frac")  # (1, N, *S_out), exact in float
        weight = b.op("Abs", b.op("Sub", b.float_like(np.reshape([1.0, 0.0], taps_first), g,
                                                      f"{axis}_one_minus_offsets"), frac), hint=f"{axis}_w")
    elif spec.mode == "bicubic":
        weight = _cubic(b, b.op("Abs", b.op("Sub", x_k, pos), hint=f"{axis}_dist"), axis)
    if frame:  # linear or nearest (zero_frame): the floor or the rounded position, one per point, in [-frame, size]
        return b.op("Cast", start, to=spec.index_dtype, hint=f"{axis}_floor_i"), None, weight
    if spec.padding_mode == "border":
        pos = b.op("Max", b.op("Min", pos, size_m1), zero, hint=f"{axis}_taps_border")
    elif spec.padding_mode == "reflection":
        pos = b.op("Max", b.op("Min", _fold(b, pos, low, span, f"{axis}_tap"), size_m1), zero,
                   hint=f"{axis}_taps_reflected")
    inside = b.op("And", b.op("GreaterOrEqual", pos, zero), b.op("LessOrEqual", pos, size_m1), hint=f"{axis}_inside")
    # outside (NaN, inf, huge) -> 0 before the cast, so the float -> int cast is always defined
    pos_i = b.op("Cast", b.op("Where", inside, pos, zero), to=spec.index_dtype, hint=f"{axis}_i")
    if weight is not None:  # 0 outside, also where the weight is NaN (an inf coordinate)
        weight = b.op("Where", inside, weight, zero, hint=f"{axis}_w_in")
    return pos_i, inside, weight


def _cubic(b: GraphBuilder, u: str, axis: str) -> str:
    """Keys' cubic kernel of ``u = |x - tap|`` in ``[0, 2]``, ``A = -0.75``."""
    a = CUBIC_A
    c = {k: b.float_like([v], u, f"cubic_{k}") for k, v in
         (("a2", a + 2), ("a3", a + 3), ("one", 1.0), ("a", a), ("a5", 5 * a), ("a8", 8 * a), ("a4", 4 * a))}
    u2 = b.op("Mul", u, u)
    near = b.op("Add", b.op("Mul", b.op("Sub", b.op("Mul", c["a2"], u), c["a3"]), u2), c["one"], hint=f"{axis}_c_near")
    far = b.op("Sub", b.op("Mul", b.op("Add", b.op("Mul", b.op("Sub", b.op("Mul", c["a"], u), c["a5"]), u), c["a8"]),
                           u), c["a4"], hint=f"{axis}_c_far")
    return b.op("Where", b.op("LessOrEqual", u, c["one"]), near, far, hint=f"{axis}_w")


def _combine(b: GraphBuilder, outer: list[str], inner: list[str] | None, op_type: str) -> list[str]:
    """``outer[i] op inner[j]`` over all pairs, outer-major; each a ``(1, N, *S_out)`` tap tensor."""
    if inner is None:
        return outer
    return [b.op(op_type, o, i) for o in outer for i in inner]


def _taps_list(b: GraphBuilder, stacked: str, k: int, hint: str) -> list[str]:
    """Split ``(k, N, *S_out)`` into ``k`` tensors ``(1, N, *S_out)``."""
    if k == 1:
        return [stacked]
    return b.op("Split", stacked, b.const([1] * k, np.int64, "ones_k"), axis=0, outputs=k, hint=hint)


def sample_taps(b: GraphBuilder, x: str, x_shape: Sequence | None, grid: str, grid_rank: int, spec: SamplerSpec,
                offset: str, sentinel: str | None) -> Taps:
    """The table rows and weights of one GridSample's taps (see the module docstring).

    Args:
        b: The builder.
        x: Features ``(N, C, *S_in)`` (only its shape is read, for symbolic sizes).
        x_shape: Its inferred shape (ints static, anything else symbolic), or None.
        grid: Normalised coordinates ``(N, *S_out, d)``, ``d = len(S_in)``.
        grid_rank: ``2 + d``, the rank of ``grid``.
        spec: Mode, padding, align_corners, index dtype.
        offset: Index-dtype ``(1,)``: the row of this input's first pixel in the table.
        sentinel: Index-dtype ``(1,)``: the table's zero row; None when the table has none
            (only for a spec read through a zero frame, :func:`zero_frame`).

    Returns:
        :class:`Taps` of ``K = k ** d`` taps per point.
    """
    d = grid_rank - 2
    idt = spec.index_dtype
    lead = grid_rank - 1  # (N, *S_out)
    parts = b.op("Split", grid, b.const([1] * d, np.int64, "split"), axis=-1, outputs=d, hint="g") if d > 1 else [grid]
    comps = [b.op("Squeeze", p, b.const([-1], np.int64, "last"), hint=f"g{i}") for i, p in enumerate(parts)]
    static = x_shape is not None and all(isinstance(s, int) for s in x_shape)
    sizes = [b.dim(x, x_shape, 2 + a, f"size{a}") for a in range(d)]
    k = spec.taps_per_axis
    frame = zero_frame(spec, x_shape)
    table_shape = [*x_shape[:2], *framed_sizes(x_shape, frame)] if static else x_shape
    rows = inside = weight = stride = None
    width = 1
    for a in reversed(range(d)):  # innermost axis first (stride 1); outer taps vary slowest
        pos, ins, w = _axis_taps(b, comps[d - 1 - a], b.op("CastLike", sizes[a], grid, hint=f"size{a}_f"), spec,
                                 f"a{a}", lead, frame)
        width *= k
        term = pos if stride is None else b.op("Mul", pos, stride, hint=f"a{a}_offset")
        if frame:  # one row per point (its floor on every axis); the taps are constant offsets from it
            rows = [term if rows is None else b.op("Add", rows[0], term, hint=f"a{a}_row")]
        else:
            rows = _combine(b, _taps_list(b, term, k, f"a{a}_rows"), rows, "Add")
        if ins is not None:
            inside = _combine(b, _taps_list(b, ins, k, f"a{a}_inside"), inside, "And")
        if w is not None:
            weight = _combine(b, _taps_list(b, w, k, f"a{a}_weights"), weight, "Mul")
        if not static:
            size_i = b.op("Cast", sizes[a], to=idt, hint=f"size{a}_i")
            stride = size_i if stride is None else b.op("Mul", stride, size_i, hint=f"stride{a}")
        elif a > 0:
            stride = b.const([int(np.prod(table_shape[2 + a:]))], cast_index(idt), f"stride{a}")
    if frame:  # tap (t_0, .., t_{d-1}) of axis offsets o: row + sum_a (o_a + frame) * stride_a, first axis slowest
        strides = [int(np.prod(table_shape[3 + a:])) for a in range(d)]
        taps = np.zeros(1, np.int64)
        for a in range(d):
            taps = (taps[:, None] + (np.asarray(_OFFSETS[spec.mode], np.int64) + frame) * strides[a]).reshape(-1)
        rows = [b.op("Add", rows[0], b.const(taps.reshape([-1] + [1] * lead), cast_index(idt), "tap_rows"),
                     hint="tap_rows")]
    rows = b.op("Concat", *rows, axis=0) if len(rows) > 1 else rows[0]  # (K, N, *S_out)
    if inside is not None:
        inside = b.op("Concat", *inside, axis=0) if len(inside) > 1 else inside[0]
    # stride is now prod(S_in), the rows of one image; image n starts at offset + n * prod(S_in)
    shape_n = [1, -1] + [1] * (grid_rank - 2)
    if static:
        images = b.const(np.arange(x_shape[0]).reshape(shape_n) * int(np.prod(table_shape[2:])), cast_index(idt),
                         "images")
    else:
        n = b.op("Cast", b.dim(x, x_shape, 0, "N"), to=idt)
        images = b.op("Range", b.const(0, cast_index(idt), "zero_i"), b.op("Squeeze", n, b.const([0], np.int64, "ax0")),
                      b.const(1, cast_index(idt), "one_i"), hint="images")
        images = b.op("Reshape", b.op("Mul", images, stride), b.const(shape_n, np.int64, "n_ones"))
    base = b.op("Add", images, offset, hint="image_base")
    index = b.op("Add", base, rows, hint="rows")
    if inside is not None:  # no frame: an outside tap reads the sentinel (zero) row
        if sentinel is None:
            raise RuntimeError("a masked GridSample rewrite needs the table's zero row (a bug in bevviz)")
        index = b.op("Where", inside, index, sentinel, hint="rows_in")
    if weight is not None:
        weight = b.op("Concat", *weight, axis=0, hint="tap_weights") if len(weight) > 1 else weight[0]
    if weight is not None and spec.cast_weights:
        weight = b.op("CastLike", weight, x, hint="weights")
    return Taps(index=index, weight=weight, k=width)


def taps_last(b: GraphBuilder, tensor: str, rank: int, hint: str) -> str:
    """``(K, N, *S_out)`` -> ``(N, *S_out, K)`` (``rank``: the input's rank), one Transpose."""
    return b.op("Transpose", tensor, perm=[*range(1, rank), 0], hint=hint)


def cast_index(dtype: int) -> type:
    """numpy type of an ONNX index dtype."""
    return np.int32 if dtype == TensorProto.INT32 else np.int64
