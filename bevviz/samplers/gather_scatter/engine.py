"""Stage 2: the weighted gather, the scatter-add, and the drop-in ``grid_sample`` built on them.

``values[n, p] = sum_k weights[n, p, k] * table[indices[n, p, k]]`` from a channels-last
table (:func:`feature_table`), in cache-sized blocks on the worker threads of
:mod:`bevviz.threads`; :func:`scatter_add_points` accumulates per-point values into BEV
cells with hit counts; :func:`grid_sample` is ``F.grid_sample`` from exactly these stages.

Performance (CPU):
    Points are cut into segments (part of one image each, ``_BLOCKS_PER_SEGMENT`` blocks);
    worker threads, one per intra-op thread of the caller, each with a single-threaded
    torch, compute a segment's taps and then, block by cache-sized block, gather all taps
    with one ``index_select``, combine them with four multiply-adds and, for the NCHW
    output of :func:`grid_sample`, copy the block transposed in two cache-friendly steps.
    Independent streams instead of torch's OpenMP parallelism because a long run of small
    parallel ops waits at a barrier per op, which on an oversubscribed machine costs a
    scheduler slice each (10-50x slowdowns measured; the streams stay ~2x under load); for
    the same reason :func:`grid_sample`'s set-up ops run on one thread, and the forward's
    workers take segments from a shared queue (a stalled worker leaves its share to the
    others).
    With ``zeros`` padding, :func:`grid_sample` first finds (cheaply, conservatively) the
    points that may read a pixel; when at most half do, as for a BEV grid projected into
    one camera, only those are gathered -- all images' as one list, shared by the workers
    -- and scattered into a zero output (what PyTorch returns elsewhere), bit for bit the
    same values.
    With autograd, the gather is one node (:class:`_GridSampleGather`) whose backward is
    one blocked pass on the workers: the output gradient's columns as rows, a
    ``scatter_add_`` of every tap's weighted rows into a per-worker channels-last table
    gradient, and (only when the grid needs a gradient) the weights' gradient from the
    gathered tap values; autograd takes that through the tap arithmetic to the grid. The
    sparse path's backward reads only the gathered points.
    Figures: see the benchmark (``python -m bevviz.bench``), which times the drop-in's
    forward and backward against ``F.grid_sample`` on the BEV grid in the same run. Small
    problems run inline.


Convention:
    Grids hold normalised ``(x, y)`` exactly as ``F.grid_sample`` reads them; the feature
    table of features ``(N, C, H, W)`` is ``(N * H * W + 1, C)`` with a zero sentinel row.
    See docs/conventions.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from bevviz import threads
from bevviz.samplers.gather_scatter.rounding import tracing
from bevviz.samplers.gather_scatter.taps import TAPS_PER_AXIS, Taps, bilinear_taps, tap_arrays
from bevviz.samplers.reference import check_grid_sample_args
from bevviz.shapes import check_shape, field_error

__all__ = [
    "feature_table", "gather", "gather_points", "GatherResult", "grid_sample", "scatter_add_points"
]


#: Elements (taps x points x channels) gathered per block: small enough that a block's
#: gathered rows stay in cache while they are combined, large enough that the number of
#: op launches (and thread-pool synchronisations) stays small.
_CHUNK_ELEMENTS = 1 << 20

#: Points per tile of the two-step transposing copy (64 x C floats stay in L1).
_TILE = 64

#: Blocks per segment: a segment's taps are computed in one go by the worker that
#: gathers it, so segments are a few blocks long (few op launches, taps stay in cache).
_BLOCKS_PER_SEGMENT = 16

#: Below this many gathered values (N * P * K * C) everything runs on the caller's thread.
_PARALLEL_MIN_ELEMENTS = 1 << 22

#: ``grid_sample`` with ``zeros`` padding gathers only the points that reach the image
#: (see :func:`_reaches_image`) when at most this fraction of them does.
_SPARSE_MAX_FRACTION = 0.5

#: Pixels beyond the image edge within which a point is always gathered (bicubic needs 2).
_REACH_MARGIN = 3


@dataclass(frozen=True)
class GatherResult:
    """Bilinear taps of a list of points per image, plus the table they index.

    Attributes:
        indices: ``(N, P, 4)`` flat indices into ``table`` (int32 where allowed), order NW,
            NE, SW, SE; invalid taps hold the sentinel ``N * H * W``.
        weights: ``(N, P, 4)`` bilinear weights (zero for invalid taps, NaN for non-finite
            points).
        valid: ``(N, P, 4)`` bool, whether each tap reads a real pixel.
        table: ``(N * H * W + 1, C)`` channels-last features with the zero sentinel row.
    """

    indices: torch.Tensor
    weights: torch.Tensor
    valid: torch.Tensor
    table: torch.Tensor

    def values(self) -> torch.Tensor:
        """Sampled values ``sum_k weights[..., k, None] * table[indices[..., k]]``.

        Returns:
            Values, shape ``(N, P, C)``.
        """
        n, p, k = self.indices.shape
        return _gather_table(
            self.table,
            self.indices.permute(2, 0, 1).reshape(k, n * p),
            self.weights.permute(2, 0, 1).reshape(k, n * p),
            skip_weights=False,
            n=n,
            p=p,
            channels_first=False,
        )


def feature_table(features: torch.Tensor) -> torch.Tensor:
    """Channels-last feature table with a zero sentinel row.

    Args:
        features: ``(N, C, H, W)``.

    Returns:
        ``(N * H * W + 1, C)``: row ``n * H * W + y * W + x`` is ``features[n, :, y, x]``,
        the last row is zeros. Differentiable w.r.t. ``features``.
    """
    check_shape(features, ("N", "C", "H", "W"), "features")
    n, c, h, w = features.shape
    rows = features.permute(0, 2, 3, 1).reshape(n * h * w, c)
    return torch.cat([rows, features.new_zeros(1, c)])


def _weighted_rows(
    table: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    skip_weights: bool,
    out: torch.Tensor | None = None,
    scratch: torch.Tensor | None = None,
) -> torch.Tensor:
    """``sum_k weights[k, :, None] * table[indices[k]]`` for one block of points.

    Summed in tap order, ``((v0 w0 + v1 w1) + v2 w2) + ...``, as PyTorch's bilinear kernel
    does (its bicubic kernel groups the 16 products by row first; the difference is
    rounding only).

    Args:
        table: ``(R, C)`` feature table.
        indices: ``(K, M)`` row indices (int32 or int64).
        weights: ``(K, M)`` weights (ignored when ``skip_weights``).
        skip_weights: Whether all weights are exactly 1 and carry no gradient (nearest).
        out: Optional ``(M, C)`` destination, contiguous or strided (e.g. a transposed slice
            of a channels-first output), written in place without autograd; otherwise a new
            tensor is returned through autograd-friendly ops.
        scratch: With ``out``: a contiguous ``(>= (K + 1) * M, C)`` buffer; the first
            ``K * M`` rows receive all gathered rows in one ``index_select``, the rest is
            staging for a transposed ``out``.

    Returns:
        ``(M, C)`` weighted sums (``out`` itself when given).
    """
    num_taps, m = indices.shape
    w = weights.unsqueeze(-1)  # (K, M, 1), broadcast over channels
    if out is None:
        acc = table.index_select(0, indices[0])
        if not skip_weights:
            acc = acc * w[0]
        for k in range(1, num_taps):
            acc = torch.addcmul(acc, table.index_select(0, indices[k]), w[k])
        return acc
    rows = scratch[: num_taps * m]
    if out.is_contiguous():
        if num_taps == 1:
            if skip_weights:
                return torch.index_select(table, 0, indices[0], out=out)
            return torch.mul(torch.index_select(table, 0, indices[0], out=rows), w[0], out=out)
        torch.index_select(table, 0, indices.reshape(-1), out=rows)
        vals = rows.view(num_taps, m, -1)
        acc = vals[0].mul_(w[0])
        for k in range(1, num_taps - 1):
            acc.addcmul_(vals[k], w[k])
        return torch.addcmul(acc, vals[-1], w[-1], out=out)
    # A strided (transposed) destination: finish in the contiguous scratch, then copy.
    # (Elementwise ops writing or reading transposed operands directly are far slower.)
    torch.index_select(table, 0, indices.reshape(-1), out=rows)
    vals = rows.view(num_taps, m, -1)
    acc = vals[0]
    if not skip_weights:
        acc.mul_(w[0])
    for k in range(1, num_taps):
        acc.addcmul_(vals[k], w[k])
    return _copy_transposed(out, acc, scratch[num_taps * m : (num_taps + 1) * m])


def _copy_transposed(dest: torch.Tensor, src: torch.Tensor, staging: torch.Tensor) -> torch.Tensor:
    """``dest.copy_(src)`` where ``dest.t()`` has contiguous rows (a channels-first slice).

    A direct copy reads ``src`` with a stride of C elements for every output element
    (~2 ns each on CPU). In two steps instead: transpose tiles of ``_TILE`` points, which
    fit in L1, into ``staging``; then copy runs of ``_TILE`` contiguous values. About
    40% faster single-threaded.

    Args:
        dest: ``(M, C)`` view whose transpose ``(C, M)`` has unit stride along M.
        src: ``(M, C)`` contiguous.
        staging: ``(>= M, C)`` contiguous scratch.

    Returns:
        ``dest``.
    """
    m, c = src.shape
    rows = dest.t()
    if m % _TILE or rows.stride(1) != 1:
        return dest.copy_(src)
    tiles = staging[:m].view(m // _TILE, c, _TILE)
    tiles.copy_(src.view(m // _TILE, _TILE, c).permute(0, 2, 1))
    rows.view(c, m // _TILE, _TILE).copy_(tiles.permute(1, 0, 2))
    return dest


def _rows_of(src: torch.Tensor, dest: torch.Tensor, staging: torch.Tensor) -> torch.Tensor:
    """``dest.copy_(src.t())``: a channels-first block ``(C, M)`` as contiguous rows ``(M, C)``.

    The mirror of :func:`_copy_transposed` (same two tiled steps) for the backward pass,
    which reads blocks of a channels-first output gradient. Any strides (an expanded
    gradient of ``out.sum()`` has stride 0) take the direct copy.

    Args:
        src: ``(C, M)`` view.
        dest: ``(M, C)`` contiguous.
        staging: ``(>= M, C)`` contiguous scratch.

    Returns:
        ``dest``.
    """
    c, m = src.shape
    if m % _TILE or src.stride(1) != 1:
        return dest.copy_(src.t())
    tiles = staging[:m].view(m // _TILE, c, _TILE)
    tiles.copy_(src.reshape(c, m // _TILE, _TILE).permute(1, 0, 2))
    dest.view(m // _TILE, _TILE, c).copy_(tiles.permute(0, 2, 1))
    return dest


@dataclass(frozen=True)
class _Layout:
    """Which points of an ``(N, C, P)`` result are gathered, and where their taps sit.

    The gathered points of all images are numbered ``0 .. M - 1`` image after image
    ("flat" order): the taps of a layout are ``(K, M)`` and its points ``(M, 2)``.

    Attributes:
        n: Images ``N``.
        p: Output points per image ``P``.
        counts: Points gathered per image (``P`` each when dense).
        starts: Flat number of each image's first gathered point.
        positions: ``None`` (dense: every point, in order) or, per image, the output
            positions of its gathered points (int64, increasing).
    """

    n: int
    p: int
    counts: tuple[int, ...]
    starts: tuple[int, ...]
    positions: tuple[torch.Tensor, ...] | None = None

    @staticmethod
    def dense(n: int, p: int) -> _Layout:
        """Every point of every image."""
        return _Layout(n, p, (p,) * n, tuple(i * p for i in range(n)))

    @staticmethod
    def sparse(keep: torch.Tensor) -> _Layout:
        """The points where ``keep`` ``(N, P)`` (bool) holds."""
        positions = tuple(row.nonzero().view(-1) for row in keep)
        counts = tuple(int(pos.numel()) for pos in positions)
        starts = tuple(sum(counts[:i]) for i in range(len(counts)))
        return _Layout(int(keep.shape[0]), int(keep.shape[1]), counts, starts, positions)

    @property
    def size(self) -> int:
        """Gathered points ``M``."""
        return sum(self.counts)

    def points(self, points: torch.Tensor) -> torch.Tensor:
        """The gathered points ``(M, 2)`` of ``points`` ``(N, P, 2)`` (autograd-friendly)."""
        if self.positions is None:
            return points.reshape(self.n * self.p, 2)
        return torch.cat([points[i].index_select(0, pos) for i, pos in enumerate(self.positions)])

    def rows_from(self, t: torch.Tensor, i: int, start: int, stop: int, dest: torch.Tensor,
                  scratch: torch.Tensor) -> torch.Tensor:
        """Copy gathered points ``start .. stop - 1`` of image ``i`` of ``t`` ``(N, C, P)``
        (any strides) into contiguous rows ``dest`` ``(m, C)``, ``m = stop - start``.

        Args:
            t: ``(N, C, P)``.
            i, start, stop: Image and range of its gathered points.
            dest: ``(m, C)`` contiguous.
            scratch: ``(>= 2 m, C)`` contiguous.

        Returns:
            ``dest``.
        """
        if self.positions is None:
            return _rows_of(t[i, :, start:stop], dest, scratch)
        c, m = t.shape[1], stop - start
        cols = scratch[m : 2 * m].view(c, m)
        torch.gather(t[i], 1, self.positions[i][start:stop].expand(c, m), out=cols)
        return _rows_of(cols, dest, scratch)

    def rows_into(self, t: torch.Tensor, i: int, start: int, stop: int, src: torch.Tensor,
                  scratch: torch.Tensor) -> None:
        """The inverse of :meth:`rows_from` for a sparse layout: scatter rows ``src``
        ``(m, C)`` into ``t[i]`` at the points' positions (``scratch`` as there)."""
        c, m = t.shape[1], stop - start
        cols = scratch[m : 2 * m].view(c, m)
        _copy_transposed(cols.t(), src, scratch)
        t[i].scatter_(1, self.positions[i][start:stop].expand(c, m), cols)


def _block_points(c: int, num_taps: int) -> int:
    """Points per block: gathered rows (K x block x C) and the block's result (block x C)
    both cache-sized, a whole number of transposition tiles."""
    block = min(_CHUNK_ELEMENTS // max(c * num_taps, 1), _CHUNK_ELEMENTS // 4 // max(c, 1))
    return max(_TILE, block // _TILE * _TILE)


def _run_blocks(counts, c: int, num_taps: int, taps_of, make_state, block_work, shared: bool = False) -> list:
    """Cut each image's points into segments and blocks and run them on the worker threads.

    A worker computes a segment's taps (``taps_of(i, start, stop) -> (indices, weights)``,
    each ``(K, stop - start)``), then calls ``block_work(state, i, start, stop, indices,
    weights)`` for each block of it, with its own ``state = make_state(block)``. Problems
    under ``_PARALLEL_MIN_ELEMENTS`` gathered values run inline.

    Args:
        counts: Points per image.
        c: Channels.
        num_taps: ``K``.
        taps_of, make_state, block_work: As above.
        shared: Workers take segments from one shared queue as they finish (a worker the
            scheduler stalls on a loaded machine leaves its share to the others), instead
            of a fixed ``segments[w::workers]`` each. Only where the result does not depend
            on which worker did what (each output written once); a sum over a worker's
            segments does.

    Returns:
        The workers' states.
    """
    block = _block_points(c, num_taps)
    segment = block * _BLOCKS_PER_SEGMENT
    items = [(i, s, min(m, s + segment)) for i, m in enumerate(counts) for s in range(0, m, segment)]
    big = sum(counts) * num_taps * c >= _PARALLEL_MIN_ELEMENTS
    workers = min(threads.worker_count() if big else 1, len(items))
    states: list = []
    queue, lock = iter(items), threading.Lock()

    def segments(subset: list):
        if not shared or workers <= 1:
            yield from subset
            return
        while True:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            yield item

    def work(subset: list) -> None:
        # Grad mode is per thread: a worker records nothing even for inputs that require grad.
        with torch.no_grad():
            state = make_state(min(block, max(counts, default=0)))
            states.append(state)
            for i, seg_start, seg_stop in segments(subset):
                indices, weights = taps_of(i, seg_start, seg_stop)
                for start in range(seg_start, seg_stop, block):
                    stop = min(seg_stop, start + block)
                    cols = slice(start - seg_start, stop - seg_start)
                    block_work(state, i, start, stop, indices[:, cols], weights[:, cols])

    threads.run_split(items, work, workers)
    return states


def _gather_blocks(table, taps_of, num_taps: int, skip_weights: bool, counts, dest_of=None,
                   store=None) -> None:
    """Weighted gather of every image's points, in cache-sized blocks, on worker threads.

    Each block gathers all taps with one ``index_select`` into a per-worker scratch buffer
    and combines them in place; the last multiply-add writes straight into a channels-last
    destination, or the block is copied (transposed) into a channels-first one. No
    autograd.

    Args:
        table: ``(R, C)`` feature table (see :func:`feature_table`).
        taps_of: ``taps_of(i, start, stop) -> (indices, weights)``, each ``(K, stop -
            start)``, for points ``start .. stop - 1`` of image ``i`` (precomputed views, or
            computed right there, which keeps them in cache).
        num_taps: ``K``.
        skip_weights: Whether the weights are all 1 (nearest).
        counts: Points per image.
        dest_of: ``dest_of(i, start, stop)``: the ``(stop - start, C)`` destination view;
        store: or ``store(i, start, stop, rows, scratch)``, called with the block's result
            ``rows`` ``(m, C)`` (contiguous) and free contiguous scratch of ``(2 m, C)``.
    """
    c = table.shape[1]

    def block_work(scratch, i, start, stop, indices, weights):
        if store is None:
            _weighted_rows(table, indices, weights, skip_weights, dest_of(i, start, stop), scratch)
            return
        m = stop - start
        rows = _weighted_rows(table, indices, weights, skip_weights, scratch[-m:], scratch)
        store(i, start, stop, rows, scratch[: 2 * m])

    _run_blocks(counts, c, num_taps, taps_of,
                lambda block: table.new_empty((max(num_taps, 2) + 1) * block, c), block_work, shared=True)


def _layout_gather(table, taps_of, num_taps: int, skip_weights: bool, layout: _Layout) -> torch.Tensor:
    """The ``(N, C, P)`` weighted gather of a layout's points (no autograd).

    Args:
        table: ``(N * H * W + 1, C)`` feature table.
        taps_of: As in :func:`_gather_blocks`, for the layout's points.
        num_taps, skip_weights: As in :func:`_gather_blocks`.
        layout: Dense, or sparse (then :func:`_sparse_gather_blocks`).

    Returns:
        ``(N, C, P)``, contiguous.
    """
    if layout.positions is not None:
        return _sparse_gather_blocks(table, taps_of, num_taps, skip_weights, layout)
    out = table.new_empty(layout.n, table.shape[1], layout.p)
    _gather_blocks(table, taps_of, num_taps, skip_weights, layout.counts,
                   lambda i, start, stop: out[i, :, start:stop].t())
    return out


def _sparse_gather_blocks(table, taps_of, num_taps: int, skip_weights: bool, layout: _Layout) -> torch.Tensor:
    """:func:`grid_sample`'s ``zeros`` path when most points miss the image.

    Only the points that may reach the image (see :func:`_plan`) are gathered -- all
    images' as one list of blocks, so the worker threads share them however few each
    image has -- and each block is scattered (``scatter_`` along the points) into a zero
    NCHW output; the rest stays zero, what PyTorch returns there. A BEV grid projected
    into one camera is the typical case: each camera sees about a sixth of it.

    Args:
        table: ``(N * H * W + 1, C)`` feature table.
        taps_of: As in :func:`_gather_blocks`, for the layout's points.
        num_taps, skip_weights: As in :func:`_gather_blocks`.
        layout: A sparse :class:`_Layout`.

    Returns:
        ``(N, C, P)``, contiguous.
    """
    out = table.new_zeros(layout.n, table.shape[1], layout.p)
    _gather_blocks(table, taps_of, num_taps, skip_weights, layout.counts,
                   store=lambda i, start, stop, rows, scratch: layout.rows_into(out, i, start, stop, rows, scratch))
    return out


def _scatter_blocks(grad, layout: _Layout, taps_of, num_taps: int, skip_weights: bool, num_rows: int,
                    want_table: bool, table: torch.Tensor | None) -> tuple:
    """Backward of :func:`_layout_gather`: the table's and the weights' gradients in one pass.

    Per block, on the worker threads: the output gradient's columns become contiguous rows
    ``g`` ``(M, C)``; each tap's ``weights[k] * g`` is scatter-added into the worker's own
    table gradient (``scatter_add_`` of all taps at once); and, when ``table`` is given, the
    weights' gradient ``dot_k = sum_c g * table[indices[k]]`` is written for the block's
    points. The workers' table gradients are summed at the end.

    Args:
        grad: ``(N, C, P)`` output gradient, any strides.
        layout: The forward's layout.
        taps_of: As in :func:`_gather_blocks`.
        num_taps, skip_weights: As in :func:`_gather_blocks`.
        num_rows: Rows ``R`` of the feature table.
        want_table: Whether to compute the table's gradient.
        table: The ``(R, C)`` feature table, or None for no weights' gradient.

    Returns:
        ``(grad_table, grad_weights)``: ``(R, C)`` (or None) and ``(K, M)`` (or None).
    """
    c = grad.shape[1]
    dots = grad.new_empty(num_taps, layout.size) if table is not None else None

    def make_state(block):
        new = grad.new_empty
        return {"acc": grad.new_zeros(num_rows, c) if want_table else None, "rows": new(block, c),
                "scratch": new(2 * block, c), "taps": new(num_taps * block, c)}

    def block_work(state, i, start, stop, indices, weights):
        m = stop - start
        rows = layout.rows_from(grad, i, start, stop, state["rows"][:m], state["scratch"])
        taps = state["taps"][: num_taps * m].view(num_taps, m, c)
        if want_table:
            src = rows.expand(num_taps, m, c) if skip_weights else torch.mul(
                rows, weights.unsqueeze(-1), out=taps)
            index = indices.reshape(-1, 1).to(torch.int64).expand(-1, c)
            state["acc"].scatter_add_(0, index, src.reshape(-1, c))
        if dots is not None:
            at = layout.starts[i]
            vals = torch.index_select(table, 0, indices.reshape(-1), out=taps.view(-1, c)).view(num_taps, m, c)
            torch.sum(vals.mul_(rows), -1, out=dots[:, at + start : at + stop])

    states = _run_blocks(layout.counts, c, num_taps, taps_of, make_state, block_work)
    grad_table = None
    if want_table:
        accs = [state["acc"] for state in states] or [grad.new_zeros(num_rows, c)]
        grad_table = accs[0]
        for acc in accs[1:]:
            grad_table.add_(acc)
    return grad_table, dots


def _precomputed(indices: torch.Tensor, weights: torch.Tensor, layout: _Layout):
    """``taps_of`` over flat ``(K, M)`` taps of ``layout``'s points."""
    def taps_of(i: int, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        cols = slice(layout.starts[i] + start, layout.starts[i] + stop)
        return indices[:, cols], weights[:, cols]

    return taps_of


def _tap_maker(points: torch.Tensor, layout: _Layout, size: tuple[int, int], mode: str, padding_mode: str,
               align_corners: bool):
    """``taps_of`` computing the taps of flat points ``(M, 2)`` of ``layout`` when asked."""
    h_in, w_in = size

    def taps_of(i: int, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        at = layout.starts[i]
        ind, wts = tap_arrays(points[at + start : at + stop].unsqueeze(0), h_in, w_in, mode, padding_mode,
                              align_corners, False, first_image=i, num_images=layout.n)
        return ind.view(ind.shape[0], -1), wts.view(wts.shape[0], -1)

    return taps_of


class _GridSampleGather(torch.autograd.Function):
    """The weighted gather of :func:`grid_sample` as one autograd node.

    Forward: :func:`_layout_gather` with precomputed taps. Backward: :func:`_scatter_blocks`
    -- the input's gradient by a scatter-add of the weighted output gradient into a
    channels-last table, the weights' gradient (when they need one) from the gathered tap
    values, in the same pass. Autograd then takes the weights' gradient through the tap
    arithmetic to the grid (elementwise ops on ``(K, M)``, cheap next to the ``C``
    channels). Recording the gather itself as ops instead (an ``index_select`` and a
    multiply-add per tap on ``(M, C)`` rows) cost ~2.7x ``F.grid_sample``'s backward and
    kept every gathered row alive for it.
    """

    @staticmethod
    def forward(ctx, input, weights, indices, layout, skip_weights):
        table = feature_table(input)
        out = _layout_gather(table, _precomputed(indices, weights, layout), indices.shape[0], skip_weights, layout)
        ctx.layout, ctx.skip_weights = layout, skip_weights
        ctx.save_for_backward(input, weights, indices)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        input, weights, indices = ctx.saved_tensors
        layout = ctx.layout
        n, c, h, w = input.shape
        want_weights = ctx.needs_input_grad[1] and not ctx.skip_weights
        table = feature_table(input) if want_weights else None
        grad_table, dots = _scatter_blocks(grad_out, layout, _precomputed(indices, weights, layout),
                                           indices.shape[0], ctx.skip_weights, n * h * w + 1,
                                           ctx.needs_input_grad[0], table)
        grad_input = None
        if grad_table is not None:
            grad_input = grad_table[: n * h * w].view(n, h, w, c).permute(0, 3, 1, 2)
        if ctx.needs_input_grad[1] and dots is None:  # nearest: weights are constants
            dots = torch.zeros_like(weights)
        return grad_input, dots, None, None, None


def _gather_table(
    table: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    skip_weights: bool,
    n: int,
    p: int,
    channels_first: bool,
) -> torch.Tensor:
    """Weighted gather of ``n * p`` points with precomputed taps.

    With autograd, or while an exporter traces, one block through out-of-place ops;
    otherwise :func:`_gather_blocks`.

    Args:
        table: ``(R, C)`` feature table (see :func:`feature_table`).
        indices: ``(K, n * p)`` tap-major row indices.
        weights: ``(K, n * p)`` tap-major weights.
        skip_weights: Whether the weights are all 1 without gradient (nearest).
        n: Number of images ``N``.
        p: Points per image ``P``.
        channels_first: Return ``(N, C, P)`` if true, else ``(N, P, C)``.

    Returns:
        ``(N, C, P)`` or ``(N, P, C)``, contiguous.
    """
    c = table.shape[1]
    needs_graph = torch.is_grad_enabled() and (table.requires_grad or weights.requires_grad)
    if needs_graph or tracing():
        rows = _weighted_rows(table, indices, weights, skip_weights).view(n, p, c)
        return rows.permute(0, 2, 1).contiguous() if channels_first else rows
    layout = _Layout.dense(n, p)
    taps_of = _precomputed(indices, weights, layout)
    if channels_first:
        return _layout_gather(table, taps_of, indices.shape[0], skip_weights, layout)
    out = table.new_empty(n, p, c)
    _gather_blocks(table, taps_of, indices.shape[0], skip_weights, layout.counts,
                   lambda i, start, stop: out[i, start:stop])
    return out


def gather(features: torch.Tensor, taps: Taps) -> torch.Tensor:
    """Sample ``features`` at precomputed ``taps``.

    Args:
        features: ``(N, C, H, W)``, matching ``taps.feature_shape == (N, H, W)`` and the
            dtype of ``taps.weights``.
        taps: From :func:`compute_taps` / :func:`bilinear_taps`.

    Returns:
        ``(N, P, C)``: ``sum_k taps.weights[n, p, k] * table[taps.indices[n, p, k]]`` with
        ``table = feature_table(features)``. Differentiable w.r.t. features and weights.

    Raises:
        ValueError: if the shapes or dtypes do not match.
    """
    dims = check_shape(features, ("N", "C", "H", "W"), "features")
    shape = (dims["N"], dims["H"], dims["W"])
    if tuple(taps.feature_shape) != shape:
        raise field_error("features", tuple(features.shape),
                          f"taps were computed for (N, H, W)={tuple(taps.feature_shape)}")
    if features.dtype != taps.weights.dtype:
        raise field_error("features", features.dtype,
                          f"dtype must equal the taps' weight dtype {taps.weights.dtype}")
    n, p, k = taps.indices.shape
    return _gather_table(
        feature_table(features),
        taps.indices.permute(2, 0, 1).reshape(k, n * p),
        taps.weights.permute(2, 0, 1).reshape(k, n * p),
        skip_weights=taps.mode == "nearest" and not taps.weights.requires_grad,
        n=n,
        p=p,
        channels_first=False,
    )


def gather_points(
    features: torch.Tensor,
    points: torch.Tensor,
    padding_mode: str = "zeros",
    align_corners: bool = False,
    coords: str = "normalized",
) -> GatherResult:
    """Bilinear taps of a list of points per image, ready to gather.

    Args:
        features: ``(N, C, H, W)``.
        points: ``(N, P, 2)``, normalised ``(x, y)`` with the same meaning as a
            ``grid_sample`` grid (or pixel ``(u, v)`` with ``coords="pixel"``); same dtype
            as ``features``.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: Normalisation convention.
        coords: ``"normalized"`` or ``"pixel"``.

    Returns:
        :class:`GatherResult`; ``.values()`` gives ``(N, P, C)``, equal to
        ``F.grid_sample(features, points[:, :, None], ...)[..., 0].transpose(1, 2)``.

    Raises:
        ValueError: naming the offending argument.
    """
    dims = check_shape(features, ("N", "C", "H", "W"), "features")
    check_shape(points, (dims["N"], None, 2), "points")
    if points.dtype != features.dtype:
        raise field_error("points", points.dtype, f"dtype must equal features' {features.dtype}")
    taps = bilinear_taps(points, dims["H"], dims["W"], padding_mode, align_corners, coords)
    return GatherResult(taps.indices, taps.weights, taps.valid, feature_table(features))


def scatter_add_points(
    values: torch.Tensor,
    cell_index: torch.Tensor,
    num_cells: int,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted scatter-add of per-point values into cells, with hit counts.

    Args:
        values: ``(M, C)`` per-point values (e.g. sampled features).
        cell_index: ``(M,)`` int32/int64 cell of each point, in ``[0, num_cells)``.
        num_cells: Number of cells (e.g. ``H_bev * W_bev``).
        weights: Optional ``(M,)`` per-point weights (e.g. a 0/1 validity mask as
            ``values.dtype``); ``None`` means all ones.

    Returns:
        ``(sums, hits)``: ``sums`` ``(num_cells, C)`` with
        ``sums[c] = sum_{i: cell_index[i] == c} weights[i] * values[i]``, and ``hits``
        ``(num_cells,)`` int64, the number of points per cell whose weight is non-zero
        (every point when ``weights`` is None). Both from ``index_add``; ``sums`` is
        differentiable w.r.t. ``values`` and ``weights``.

    Raises:
        ValueError: on wrong shapes, dtypes, or an index outside ``[0, num_cells)``.
    """
    dims = check_shape(values, ("M", None), "values")
    check_shape(cell_index, (dims["M"],), "cell_index")
    if isinstance(num_cells, bool) or not isinstance(num_cells, int) or num_cells < 0:
        raise field_error("num_cells", num_cells, "must be a non-negative int")
    if cell_index.dtype not in (torch.int32, torch.int64):
        raise field_error("cell_index", cell_index.dtype, "must be int32 or int64")
    if cell_index.numel():
        lo, hi = int(cell_index.min()), int(cell_index.max())
        if lo < 0 or hi >= num_cells:
            raise field_error("cell_index", (lo, hi),
                              f"(min, max) must lie in [0, num_cells={num_cells})")
    counted = torch.ones(dims["M"], dtype=torch.int64, device=values.device)
    if weights is not None:
        check_shape(weights, (dims["M"],), "weights")
        if weights.dtype != values.dtype:
            raise field_error("weights", weights.dtype, f"dtype must equal values' {values.dtype}")
        values = values * weights.unsqueeze(1)
        counted = (weights != 0).to(torch.int64)
    sums = values.new_zeros(num_cells, values.shape[1]).index_add(0, cell_index, values)
    hits = torch.zeros(num_cells, dtype=torch.int64, device=values.device)
    hits.index_add_(0, cell_index, counted)
    return sums, hits


def grid_sample(
    input: torch.Tensor,
    grid: torch.Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
) -> torch.Tensor:
    """Drop-in for ``F.grid_sample`` (4-D) from index gathers and elementwise ops only.

    Args:
        input: Features, shape ``(N, C, H_in, W_in)``.
        grid: Normalised ``(x, y)`` sampling locations, shape ``(N, H_out, W_out, 2)``,
            same dtype as ``input``.
        mode: ``"bilinear"``, ``"nearest"`` or ``"bicubic"``.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: See :mod:`bevviz.samplers.reference`.

    Returns:
        ``(N, C, H_out, W_out)``, contiguous. Differentiable w.r.t. ``input`` and ``grid``
        through autograd of the gather and elementwise ops (zero grid gradient at clipped
        borders and in ``nearest`` mode, as in PyTorch).

    Convention:
        ``grid[..., 0]`` is ``x`` (column), ``grid[..., 1]`` is ``y`` (row); see the
        module docstring for the exact PyTorch semantics reproduced.

    Raises:
        ValueError: naming the offending argument (see
            :func:`bevviz.samplers.reference.check_grid_sample_args`).
    """
    check_grid_sample_args(input, grid, mode, padding_mode, align_corners)
    n, c, h_in, w_in = input.shape
    h_out, w_out = grid.shape[1], grid.shape[2]
    p = h_out * w_out
    points = grid.reshape(n, p, 2)
    align_corners = bool(align_corners)
    needs_graph = torch.is_grad_enabled() and (input.requires_grad or grid.requires_grad)
    if tracing() or not n * p:
        # One out-of-place block (see rounding.tracing); also the trivial empty case.
        indices, weights = tap_arrays(points, h_in, w_in, mode, padding_mode, align_corners, False)
        k = indices.shape[0]
        out = _gather_table(feature_table(input), indices.view(k, n * p), weights.view(k, n * p),
                            skip_weights=False, n=n, p=p, channels_first=True)
        return out.view(n, c, h_out, w_out)
    # The set-up is a few dozen mid-sized ops: on one thread (see threads.single_threaded),
    # the gather itself then on the workers.
    with threads.single_threaded():
        layout = _plan(points, (h_in, w_in), padding_mode, align_corners)
        taps_of = _tap_maker(layout.points(points), layout, (h_in, w_in), mode, padding_mode, align_corners)
        if needs_graph:
            # All taps first (autograd records their arithmetic when the grid needs a
            # gradient), then the gather as one node with its own backward.
            parts = [taps_of(i, 0, m) for i, m in enumerate(layout.counts)]
            indices = torch.cat([part[0] for part in parts], 1)
            weights = torch.cat([part[1] for part in parts], 1)
        else:
            table = feature_table(input)
    if needs_graph:
        out = _GridSampleGather.apply(input, weights, indices, layout, mode == "nearest")
    else:  # each segment's taps computed by the worker that gathers it (cache-warm)
        out = _layout_gather(table, taps_of, TAPS_PER_AXIS[mode] ** 2, mode == "nearest", layout)
    return out.view(n, c, h_out, w_out)


def _plan(points: torch.Tensor, size: tuple[int, int], padding_mode: str, align_corners: bool) -> _Layout:
    """Which points :func:`grid_sample` gathers: all, or (``zeros`` padding) only those that
    may reach the image (:func:`_reaches_image`) when at most ``_SPARSE_MAX_FRACTION`` do.

    Args:
        points: ``(N, P, 2)`` normalised grid points (``N * P > 0``).
        size: ``(H, W)`` of the features.
        padding_mode, align_corners: As in :func:`grid_sample`.

    Returns:
        A dense or sparse :class:`_Layout`.
    """
    if padding_mode == "zeros":
        with torch.no_grad():
            keep = _reaches_image(points, size[0], size[1], align_corners)
            if int(keep.sum()) <= _SPARSE_MAX_FRACTION * keep.numel():
                return _Layout.sparse(keep)
    return _Layout.dense(points.shape[0], points.shape[1])


def _reaches_image(points: torch.Tensor, height: int, width: int,
                   align_corners: bool) -> torch.Tensor:
    """Which points may read a pixel under ``zeros`` padding (conservatively).

    A point is dropped only when both coordinates are finite and one lies more than
    ``_REACH_MARGIN`` pixels outside the image: then every tap of every mode (bicubic
    reaches 2 pixels out) is outside, every weight is finite, and PyTorch returns exactly 0
    there. NaN/inf points are kept (they give NaN, computed by the exact path).

    Args:
        points: ``(N, P, 2)`` normalised ``(x, y)``.
        height, width: Feature map size.
        align_corners: Normalisation convention.

    Returns:
        ``(N, P)`` bool.
    """
    def inverse_limit(size: int) -> float:
        # 1 / |g| at _REACH_MARGIN pixels (plus one for rounding) outside either edge.
        span = size - 1 if align_corners else size
        return 1.0 / (1.0 + 2.0 * (_REACH_MARGIN + 1) / span) if span > 0 else 0.0

    scale = points.new_tensor([inverse_limit(width), inverse_limit(height)])
    # > 1 in either axis: far outside; NaN propagates through amax (kept), inf is kept.
    reach = torch.mul(points, scale).abs_().amax(-1)
    return ~((reach > 1) & (reach < float("inf")))
