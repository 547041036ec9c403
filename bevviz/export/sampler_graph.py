"""The gather-scatter sampler as ONNX nodes: what replaces one 4-D ``GridSample`` node.

The same algorithm as :mod:`bevviz.samplers.gather_scatter` (stage 1, the taps, then stage
2, the weighted gather from a channels-last table with a zero sentinel row), written as
plain ONNX ops so it can be spliced into any graph, whatever its exporter:

1. sizes from ``Shape`` + ``Slice`` (no Gather on shapes), so every axis may be symbolic;
2. ``x = unnormalize(grid_x)`` exactly as ``GridSample`` reads it, then ``border``
   (clip) or ``reflection`` (fold, then clip) padding;
3. taps: ``Round`` (nearest, half to even like PyTorch's ``nearbyint``) or ``Floor`` and
   ``Floor + 1`` with weights ``1 - f`` and ``f`` (bilinear);
4. each tap's flat row ``n * H * W + y * W + x`` in int32 (or int64), computed from
   coordinates clipped to ``[-1, size]`` before the float -> int cast (so the cast is
   always defined) and sent to the sentinel row ``N * H * W`` when outside the image;
5. ``Gather(table, rows)`` per tap, times its weight (zeroed outside), summed; the table is
   ``Transpose(X, 0 2 3 1)`` reshaped to ``(N * H * W, C)`` plus one zero row.

Ops used: Shape, Slice, Split, Squeeze, Unsqueeze, Cast, CastLike, Constant, ConstantOfShape,
Concat, Reshape, Transpose, Range, Add, Sub, Mul, Div, Neg, Mod, Abs, Min, Max, Floor, Round,
Greater, GreaterOrEqual, LessOrEqual, And, Where, Gather -- all in ONNX by opset 16 (CastLike
since 15) with the same meaning in every later opset.

Convention:
    ``grid[..., 0]`` is ``x`` (column) and ``grid[..., 1]`` is ``y`` (row), normalised to
    ``[-1, 1]``; align_corners=False: ``u = ((g + 1) * W - 1) / 2``; True:
    ``u = (g + 1) / 2 * (W - 1)`` (docs/conventions.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["GraphBuilder", "SamplerSpec", "build_sampler"]


@dataclass(frozen=True)
class SamplerSpec:
    """What one GridSample node asks for.

    Attributes:
        mode: ``"bilinear"`` or ``"nearest"``.
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

    def const(self, value, dtype, hint: str = "c") -> str:
        """A Constant node holding ``np.asarray(value, dtype)``."""
        arr = np.asarray(value, dtype=dtype)
        return self.op("Constant", hint=hint, value=numpy_helper.from_array(arr, self.name(hint + "_value")))


def _axis_taps(b: GraphBuilder, coord: str, size_f: str, spec: SamplerSpec, axis: str,
               one: str, zero: str) -> list[tuple[str, str | None, str]]:
    """Taps along one axis: (integer position, weight, inside) per tap.

    Args:
        b: The builder.
        coord: Normalised coordinates, float ``S``.
        size_f: The axis size as a float ``(1,)``, like ``coord``.
        spec: The sampler settings.
        axis: ``"x"`` or ``"y"`` (names only).
        one, zero: Float constants ``(1,)`` like ``coord``.

    Returns:
        One ``(position, weight, inside)`` per tap: position index-dtype ``S`` (``-1`` where
        outside), weight float ``S`` zeroed outside (``None`` for nearest: the weight is 1),
        inside bool ``S`` (the tap lies in ``[0, size - 1]``; NaN compares false).
    """
    size_m1 = b.op("Sub", size_f, one, hint=f"{axis}_size_m1")
    two = b.op("Add", one, one, hint="two")
    if spec.align_corners:  # u = (g + 1) / 2 * (size - 1)
        x = b.op("Mul", b.op("Div", b.op("Add", coord, one), two), size_m1, hint=f"{axis}_pix")
    else:  # u = ((g + 1) * size - 1) / 2
        x = b.op("Div", b.op("Sub", b.op("Mul", b.op("Add", coord, one), size_f), one), two, hint=f"{axis}_pix")
    if spec.padding_mode == "reflection":
        # fold |x - low| into [0, span] with period 2 * span; a span of 0 (one pixel with
        # align_corners) reflects to 0.
        if spec.align_corners:
            low, span = zero, size_m1
        else:
            low, span = b.op("Neg", b.op("Div", one, two), hint="half_neg"), size_f
        period = b.op("Mul", span, two, hint=f"{axis}_period")
        extra = b.op("Mod", b.op("Abs", b.op("Sub", x, low)), period, fmod=1, hint=f"{axis}_extra")
        folded = b.op("Add", b.op("Min", extra, b.op("Sub", period, extra)), low, hint=f"{axis}_folded")
        x = b.op("Where", b.op("Greater", span, zero), folded, zero, hint=f"{axis}_reflected")
    if spec.padding_mode in ("border", "reflection"):
        x = b.op("Max", b.op("Min", x, size_m1), zero, hint=f"{axis}_clipped")
    if spec.mode == "nearest":
        corners = [(b.op("Round", x, hint=f"{axis}_near"), None)]
    else:
        x0 = b.op("Floor", x, hint=f"{axis}0")
        frac = b.op("Sub", x, x0, hint=f"{axis}_frac")
        corners = [(x0, b.op("Sub", one, frac, hint=f"{axis}_w0")), (b.op("Add", x0, one, hint=f"{axis}1"), frac)]
    minus_one = b.op("Neg", one, hint="minus_one")
    taps = []
    for k, (pos, weight) in enumerate(corners):
        inside = b.op("And", b.op("GreaterOrEqual", pos, zero), b.op("LessOrEqual", pos, size_m1),
                      hint=f"{axis}{k}_inside")
        # outside (NaN, inf, huge) -> -1 before the cast, so the float -> int cast is always defined
        pos_i = b.op("Cast", b.op("Where", inside, pos, minus_one), to=spec.index_dtype, hint=f"{axis}{k}_i")
        if weight is not None:  # 0 outside, also where the weight is NaN (an inf coordinate), as PyTorch
            weight = b.op("Where", inside, weight, zero, hint=f"{axis}{k}_w")
        taps.append((pos_i, weight, inside))
    return taps


def build_sampler(b: GraphBuilder, x: str, grid: str, out: str, spec: SamplerSpec) -> None:
    """Append the nodes computing ``out = GridSample(x, grid)`` (4-D) to ``b.nodes``.

    Args:
        b: The builder (its prefix names the replaced node).
        x: Features, float ``(N, C, H, W)`` (any axis may be symbolic).
        grid: Normalised ``(x, y)``, ``(N, H_out, W_out, 2)``, same float type.
        out: Name of the result, ``(N, C, H_out, W_out)`` (the replaced node's output).
        spec: Mode, padding, align_corners, index dtype.
    """
    idt = spec.index_dtype
    i64 = np.int64
    inp = np.int32 if idt == TensorProto.INT32 else np.int64
    shape = b.op("Shape", x, hint="x_shape")

    def dim(k: int, hint: str) -> str:
        return b.op("Slice", shape, b.const([k], i64, "k"), b.const([k + 1], i64, "k1"), hint=hint)

    n64, c64, h64, w64 = dim(0, "N"), dim(1, "C"), dim(2, "H"), dim(3, "W")
    gx, gy = b.op("Split", grid, b.const([1, 1], i64, "split"), axis=3, outputs=2, hint="g")
    gx = b.op("Squeeze", gx, b.const([3], i64, "ax3"), hint="gx")  # (N, H_out, W_out)
    gy = b.op("Squeeze", gy, b.const([3], i64, "ax3"), hint="gy")
    one = b.op("CastLike", b.const([1.0], np.float32, "one_f"), grid, hint="one")
    zero = b.op("CastLike", b.const([0.0], np.float32, "zero_f"), grid, hint="zero")
    cols = _axis_taps(b, gx, b.op("CastLike", w64, grid, hint="W_f"), spec, "x", one, zero)
    rows = _axis_taps(b, gy, b.op("CastLike", h64, grid, hint="H_f"), spec, "y", one, zero)

    w_i, h_i, n_i = (b.op("Cast", d, to=idt, hint=f"{s}_i") for d, s in ((w64, "W"), (h64, "H"), (n64, "N")))
    hw = b.op("Mul", h_i, w_i, hint="HW")
    sentinel = b.op("Mul", n_i, hw, hint="sentinel")  # (1,): N * H * W, the zero row
    # image offsets n * H * W, shaped (N, 1, 1) to broadcast over (N, H_out, W_out)
    images = b.op("Range", b.const(0, inp, "zero_i"), b.op("Squeeze", n_i, b.const([0], i64, "ax0")),
                  b.const(1, inp, "one_i"), hint="images")
    base = b.op("Reshape", b.op("Mul", images, hw), b.const([-1, 1, 1], i64, "n11"), hint="image_base")

    # channels-last table (N * H * W + 1, C) with the zero sentinel row last
    flat = b.op("Reshape", b.op("Transpose", x, perm=[0, 2, 3, 1]),
                b.op("Concat", b.const([-1], i64, "m1"), c64, axis=0), hint="rows")
    zero_row = b.op("CastLike", b.op("ConstantOfShape", b.op("Concat", b.const([1], i64, "one64"), c64, axis=0),
                                     value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.0])), x, hint="zero_row")
    table = b.op("Concat", flat, zero_row, axis=0, hint="table")

    acc = None
    for ky, (yi, wy, in_y) in enumerate(rows):
        for kx, (xi, wx, in_x) in enumerate(cols):
            tag = f"tap{ky}{kx}"
            row = b.op("Add", b.op("Add", base, b.op("Mul", yi, w_i)), xi, hint=f"{tag}_row")
            index = b.op("Where", b.op("And", in_y, in_x), row, sentinel, hint=f"{tag}_index")
            term = b.op("Gather", table, index, axis=0, hint=f"{tag}_rows")  # (N, H_out, W_out, C)
            if wx is not None:  # bilinear; nearest reads its one tap as is (outside: the zero row)
                weight = b.op("Unsqueeze", b.op("Mul", wy, wx, hint=f"{tag}_w"), b.const([3], i64, "ax3"))
                if spec.cast_weights:
                    weight = b.op("CastLike", weight, x)
                term = b.op("Mul", term, weight, hint=f"{tag}_term")
            acc = term if acc is None else b.op("Add", acc, term, hint=f"{tag}_sum")
    b.nodes.append(helper.make_node("Transpose", [acc], [out], name=b.name("to_nchw"), perm=[0, 3, 1, 2]))
