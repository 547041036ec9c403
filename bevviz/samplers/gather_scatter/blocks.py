"""The blocked machinery under stage 2: cache-sized blocks of points on the worker threads.

:func:`gather_blocks` computes ``sum_k weights[k] * table[indices[k]]`` block by block
(one weighted ``embedding_bag`` sum of every point's taps, :func:`bag_rows`, and for a
channels-first output the transposing store of :mod:`~bevviz.samplers.gather_scatter.transpose`);
:class:`Layout` says which points of an ``(N, C, P)`` result are gathered (all, or only those that reach the image);
:func:`scatter_blocks` is the backward of :func:`layout_gather`, a blocked scatter-add.
Everything here runs without autograd; :mod:`~bevviz.samplers.gather_scatter.engine`
wraps it in the public gather, the drop-in ``grid_sample`` and its autograd node. Why
worker streams rather than torch's OpenMP parallelism: see that module's docstring.

Convention:
    A feature table ``(N * H * W + 1, C)`` is channels-last with a zero sentinel row (see
    :func:`bevviz.samplers.gather_scatter.feature_table`); taps are tap-major ``(K, M)``
    over the layout's gathered points in flat order (image after image).
    See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bevviz import threads
from bevviz.samplers.gather_scatter.taps import tap_arrays
from bevviz.samplers.gather_scatter.transpose import (
    TILE,
    WEIGHT_BOUND,
    copy_transposed,
    rows_of,
    table_bounded,
    within_bound,
)

__all__ = ["Layout", "gather_blocks", "layout_gather", "precomputed", "scatter_blocks", "tap_maker",
           "weighted_rows"]


#: Elements (taps x points x channels) read per block of the backward's scatter-add: small
#: enough that a block stays in cache, large enough that the number of op launches stays
#: small (4096 points of 64 channels and 4 taps; 1024 or 2048 measured slower, 8192 alike;
#: 16384 took 0.40x ``F.grid_sample``'s backward on the BEV grid against 0.28x).
_CHUNK_ELEMENTS = 1 << 20

#: The forward's blocks are this many times larger (8192 points of 64 channels and 4
#: taps): its transposing store (:func:`transpose_by_identity`) costs a fixed overhead per
#: call, and larger blocks leave cache. In-image grid against ``F.grid_sample`` in the same
#: run, ratio of minima [range of the rounds]: on a quiet-ish machine (load 3), one thread,
#: 16384 points 0.68x and 0.75x, 8192 0.73x and 0.82x, 4096 0.86x, 32768 0.89x; under load
#: 7.7 (other processes sharing the caches), 4096 / 8192 / 16384 points: one thread 0.84x
#: [0.82-0.88] / 0.75x [0.70-0.84] / 0.75x [0.70-1.04], two threads 1.04x [0.92-1.08] /
#: 0.89x [0.84-0.90] / 0.99x [0.87-1.06].
_GATHER_SCALE = 2

#: Blocks per segment: a segment's taps are computed in one go by the worker that
#: gathers it, so segments are a few blocks long (few op launches, taps stay in cache).
_BLOCKS_PER_SEGMENT = 16

#: Below this many gathered values (N * P * K * C) everything runs on the caller's thread.
_PARALLEL_MIN_ELEMENTS = 1 << 22

def weighted_rows(
    table: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    skip_weights: bool,
    out: torch.Tensor | None = None,
    scratch: torch.Tensor | None = None,
    finite: bool = False,
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
        scratch: With ``out``: a contiguous ``(>= 2 * M, C)`` buffer, staging for a
            transposed ``out``.
        finite: With ``out``: the sums are known to be finite (see :func:`copy_transposed`).

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
    if skip_weights and num_taps == 1 and out.is_contiguous():  # nearest: a pure row gather
        return torch.index_select(table, 0, indices[0], out=out)
    rows = block_values(table, indices, weights, skip_weights, scratch)
    if out.is_contiguous():
        return out.copy_(rows)
    return copy_transposed(out, rows, scratch[m : 2 * m], finite)


def block_values(table: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, skip_weights: bool,
                 scratch: torch.Tensor) -> torch.Tensor:
    """The weighted sums of one block as contiguous rows, without autograd.

    Args:
        table: ``(R, C)`` feature table.
        indices: ``(K, M)`` row indices.
        weights: ``(K, M)`` weights (ignored when ``skip_weights``).
        skip_weights: Whether all weights are exactly 1 (nearest).
        scratch: Contiguous ``(>= M, C)``; its first ``M`` rows may receive the result.

    Returns:
        ``(M, C)`` contiguous: the first ``M`` rows of ``scratch`` (one tap, unweighted: a
        plain row gather, bit for bit) or a new tensor from :func:`bag_rows`.
    """
    if skip_weights and indices.shape[0] == 1:
        return torch.index_select(table, 0, indices[0], out=scratch[: indices.shape[1]])
    return bag_rows(table, indices, None if skip_weights else weights)


def bag_rows(table: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``sum_k weights[k, :, None] * table[indices[k]]`` in one pass, without autograd.

    One weighted ``embedding_bag`` sum, each point a bag of its ``K`` taps (on CPU, float32:
    FBGEMM's kernel), which writes only the result: no gathered ``(K, M, C)`` rows, no
    per-tap passes over ``(M, C)`` (an ``index_select`` of all taps and four multiply-adds
    on them took ~3x as long, measured per block). Sums differ from PyTorch's only by
    rounding (the bench's bilinear outputs came out equal to ``F.grid_sample``'s bit for bit).

    Args:
        table: ``(R, C)`` feature table, contiguous.
        indices: ``(K, M)`` row indices (int32 or int64); a transposed view of point-major
            ``(M, K)`` storage is used in place, anything else is copied point-major.
        weights: ``(K, M)`` weights of the table's dtype, laid out as ``indices``, or None
            for all ones.

    Returns:
        ``(M, C)`` weighted sums, a new contiguous tensor.
    """
    bags = indices.t().contiguous()
    if weights is not None:
        weights = weights.t().contiguous()
    return torch.nn.functional.embedding_bag(bags, table, mode="sum", per_sample_weights=weights)


@dataclass(frozen=True)
class Layout:
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
    def dense(n: int, p: int) -> Layout:
        """Every point of every image."""
        return Layout(n, p, (p,) * n, tuple(i * p for i in range(n)))

    @staticmethod
    def sparse(keep: torch.Tensor) -> Layout:
        """The points where ``keep`` ``(N, P)`` (bool) holds."""
        positions = tuple(row.nonzero().view(-1) for row in keep)
        counts = tuple(int(pos.numel()) for pos in positions)
        starts = tuple(sum(counts[:i]) for i in range(len(counts)))
        return Layout(int(keep.shape[0]), int(keep.shape[1]), counts, starts, positions)

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
            return rows_of(t[i, :, start:stop], dest, scratch)
        c, m = t.shape[1], stop - start
        cols = scratch[m : 2 * m].view(c, m)
        torch.gather(t[i], 1, self.positions[i][start:stop].expand(c, m), out=cols)
        return rows_of(cols, dest, scratch)

    def rows_into(self, t: torch.Tensor, i: int, start: int, stop: int, src: torch.Tensor,
                  scratch: torch.Tensor, finite: bool = False) -> None:
        """The inverse of :meth:`rows_from` for a sparse layout: scatter rows ``src``
        ``(m, C)`` into ``t[i]`` at the points' positions (``scratch`` as there; ``finite``:
        ``src`` known to be finite)."""
        c, m = t.shape[1], stop - start
        cols = scratch[m : 2 * m].view(c, m)
        copy_transposed(cols.t(), src, scratch, finite)
        t[i].scatter_(1, self.positions[i][start:stop].expand(c, m), cols)


def _block_points(c: int, num_taps: int, chunk: int | None = None) -> int:
    """Points per block: gathered rows (K x block x C) and the block's result (block x C)
    within ``chunk`` elements (default ``_CHUNK_ELEMENTS``), a whole number of
    transposition tiles."""
    chunk = _CHUNK_ELEMENTS if chunk is None else chunk
    block = min(chunk // max(c * num_taps, 1), chunk // 4 // max(c, 1))
    return max(TILE, block // TILE * TILE)


def _run_blocks(counts, c: int, num_taps: int, taps_of, make_state, block_work, shared: bool = False,
                chunk: int | None = None) -> list:
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
        chunk: Elements per block (see :func:`_block_points`).

    Returns:
        The workers' states.
    """
    block = _block_points(c, num_taps, chunk)
    # Segments as long as _BLOCKS_PER_SEGMENT default blocks whatever this run's block (at
    # least one block): larger blocks do not make the shared queue coarser.
    segment = max(block, _block_points(c, num_taps) * _BLOCKS_PER_SEGMENT)
    items = [(i, s, min(m, s + segment)) for i, m in enumerate(counts) for s in range(0, m, segment)]
    big = sum(counts) * num_taps * c >= _PARALLEL_MIN_ELEMENTS
    workers = threads.worker_count() if big else 1
    states: list = []

    def work(subset) -> None:
        # Grad mode is per thread: a worker records nothing even for inputs that require grad.
        with torch.no_grad():
            state = make_state(min(block, max(counts, default=0)))
            states.append(state)
            for i, seg_start, seg_stop in subset:
                indices, weights = taps_of(i, seg_start, seg_stop)
                for start in range(seg_start, seg_stop, block):
                    stop = min(seg_stop, start + block)
                    cols = slice(start - seg_start, stop - seg_start)
                    block_work(state, i, start, stop, indices[:, cols], weights[:, cols])

    threads.run_split(items, work, workers, shared=shared)
    return states


def gather_blocks(table, taps_of, num_taps: int, skip_weights: bool, counts, dest_of=None,
                   store=None) -> None:
    """Weighted gather of every image's points, in cache-sized blocks, on worker threads.

    Each block's weighted sums come from one :func:`bag_rows` pass (nearest: one row
    gather) and are copied into a channels-last destination, or transposed into a
    channels-first one. No autograd.

    Args:
        table: ``(R, C)`` feature table (see :func:`feature_table`).
        taps_of: ``taps_of(i, start, stop) -> (indices, weights)``, each ``(K, stop -
            start)``, for points ``start .. stop - 1`` of image ``i`` (precomputed views, or
            computed right there, which keeps them in cache).
        num_taps: ``K``.
        skip_weights: Whether the weights are all 1 (nearest).
        counts: Points per image.
        dest_of: ``dest_of(i, start, stop)``: the ``(stop - start, C)`` destination view;
        store: or ``store(i, start, stop, rows, scratch, finite)``, called with the block's
            result ``rows`` ``(m, C)`` (contiguous), free contiguous scratch of ``(2 m, C)``
            and whether ``rows`` are known to be finite (:func:`table_bounded`).
    """
    c = table.shape[1]
    table_ok = table_bounded(table, num_taps)

    def block_work(scratch, i, start, stop, indices, weights):
        finite = table_ok and (skip_weights or within_bound(weights, WEIGHT_BOUND))
        if store is None:
            weighted_rows(table, indices, weights, skip_weights, dest_of(i, start, stop), scratch, finite)
            return
        m = stop - start
        rows = block_values(table, indices, weights, skip_weights, scratch)
        store(i, start, stop, rows, scratch[m : 3 * m], finite)

    _run_blocks(counts, c, num_taps, taps_of, lambda block: table.new_empty(3 * block, c), block_work,
                shared=True, chunk=_CHUNK_ELEMENTS * _GATHER_SCALE)


def layout_gather(table, taps_of, num_taps: int, skip_weights: bool, layout: Layout) -> torch.Tensor:
    """The ``(N, C, P)`` weighted gather of a layout's points (no autograd).

    Args:
        table: ``(N * H * W + 1, C)`` feature table.
        taps_of: As in :func:`gather_blocks`, for the layout's points.
        num_taps, skip_weights: As in :func:`gather_blocks`.
        layout: Dense, or sparse (then :func:`_sparse_gather_blocks`).

    Returns:
        ``(N, C, P)``, contiguous.
    """
    if layout.positions is not None:
        return _sparse_gather_blocks(table, taps_of, num_taps, skip_weights, layout)
    out = table.new_empty(layout.n, table.shape[1], layout.p)
    gather_blocks(table, taps_of, num_taps, skip_weights, layout.counts,
                   lambda i, start, stop: out[i, :, start:stop].t())
    return out


def _sparse_gather_blocks(table, taps_of, num_taps: int, skip_weights: bool, layout: Layout) -> torch.Tensor:
    """:func:`grid_sample`'s ``zeros`` path when most points miss the image.

    Only the points that may reach the image (see ``engine._plan``) are gathered -- all
    images' as one list of blocks, so the worker threads share them however few each
    image has -- and each block is scattered (``scatter_`` along the points) into a zero
    NCHW output; the rest stays zero, what PyTorch returns there. A BEV grid projected
    into one camera is the typical case: each camera sees about a sixth of it.

    Args:
        table: ``(N * H * W + 1, C)`` feature table.
        taps_of: As in :func:`gather_blocks`, for the layout's points.
        num_taps, skip_weights: As in :func:`gather_blocks`.
        layout: A sparse :class:`Layout`.

    Returns:
        ``(N, C, P)``, contiguous.
    """
    out = table.new_zeros(layout.n, table.shape[1], layout.p)
    gather_blocks(table, taps_of, num_taps, skip_weights, layout.counts,
                   store=lambda i, start, stop, rows, scratch, finite: layout.rows_into(out, i, start, stop, rows,
                                                                                         scratch, finite))
    return out


def scatter_blocks(grad, layout: Layout, taps_of, num_taps: int, skip_weights: bool, num_rows: int,
                    want_table: bool, table: torch.Tensor | None) -> tuple:
    """Backward of :func:`layout_gather`: the table's and the weights' gradients in one pass.

    Per block, on the worker threads: the output gradient's columns become contiguous rows
    ``g`` ``(M, C)``; each tap's ``weights[k] * g`` is scatter-added into the worker's own
    table gradient (``scatter_add_`` of all taps at once); and, when ``table`` is given, the
    weights' gradient ``dot_k = sum_c g * table[indices[k]]`` is written for the block's
    points. The workers' table gradients are summed at the end.

    Args:
        grad: ``(N, C, P)`` output gradient, any strides.
        layout: The forward's layout.
        taps_of: As in :func:`gather_blocks`.
        num_taps, skip_weights: As in :func:`gather_blocks`.
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


def precomputed(indices: torch.Tensor, weights: torch.Tensor, layout: Layout):
    """``taps_of`` over flat ``(K, M)`` taps of ``layout``'s points."""
    def taps_of(i: int, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        cols = slice(layout.starts[i] + start, layout.starts[i] + stop)
        return indices[:, cols], weights[:, cols]

    return taps_of


def tap_maker(points: torch.Tensor, layout: Layout, size: tuple[int, int], mode: str, padding_mode: str,
               align_corners: bool):
    """``taps_of`` computing the taps of flat points ``(M, 2)`` of ``layout`` when asked.

    Tap-major, as computed: laying them out point by point (the bags of :func:`bag_rows`)
    in the tap arithmetic itself measured 3-4x slower (elementwise ops on permuted
    operands) than :func:`bag_rows`' copy of each block's small ``(K, m)`` arrays.
    """
    h_in, w_in = size

    def taps_of(i: int, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        at = layout.starts[i]
        ind, wts = tap_arrays(points[at + start : at + stop].unsqueeze(0), h_in, w_in, mode, padding_mode,
                              align_corners, False, first_image=i, num_images=layout.n)
        return ind.view(ind.shape[0], -1), wts.view(wts.shape[0], -1)

    return taps_of
