"""The transposing store of the blocked gather: channels-last rows into a channels-first output, exactly.

A block of weighted sums comes out of :func:`bevviz.samplers.gather_scatter.blocks.bag_rows`
as contiguous rows ``(M, C)``; a channels-first output wants it as ``(C, M)``. A direct copy
is a scalar loop (~0.9 ns a value). :func:`copy_transposed` writes it instead as the
transposed operand of a batched product with 8 x 8 identities (:func:`transpose_by_identity`),
which BLAS packs with vector instructions, wherever that product is exact
(:func:`exact_matmul`, finite values: :func:`table_bounded`, :func:`within_bound`), else in two
tiled copies; :func:`rows_of` is the backward's mirror. Measurements: docs/npu.md.

Convention:
    Rows ``(M, C)``: M points of a block, C channels, contiguous; the channels-first slice
    ``(C, M)`` has unit stride along M.
"""

from __future__ import annotations

import torch

__all__ = ["IDENTITY_SIZE", "TILE", "WEIGHT_BOUND", "copy_transposed", "exact_matmul", "rows_of", "table_bounded",
           "transpose_by_identity", "within_bound"]

#: Points per tile of the two-step transposing copy (64 x C floats stay in L1).
TILE = 64


def copy_transposed(dest: torch.Tensor, src: torch.Tensor, staging: torch.Tensor,
                     finite: bool = False) -> torch.Tensor:
    """``dest.copy_(src)`` where ``dest.t()`` has contiguous rows (a channels-first slice).

    A direct copy reads ``src`` with a stride of C elements for every output element: a
    scalar loop, ~0.9 ns an element, the largest part of the in-image forward. Fastest
    first (:func:`transpose_by_identity`): the transposed operand of a batched matrix
    product with identities, which BLAS packs with vector instructions -- the exact values
    wherever that product is exact. Otherwise in two copies: transpose tiles of ``TILE``
    points, which fit in L1, into ``staging``; then copy runs of ``TILE`` contiguous
    values.

    Args:
        dest: ``(M, C)`` view whose transpose ``(C, M)`` has unit stride along M.
        src: ``(M, C)`` contiguous.
        staging: ``(>= M, C)`` contiguous scratch.
        finite: ``src`` is known to be all finite (else the identity product checks).

    Returns:
        ``dest``.
    """
    m, c = src.shape
    rows = dest.t()
    if rows.stride(1) == 1 and transpose_by_identity(rows, src, finite):
        return dest
    if m % TILE or rows.stride(1) != 1:
        return dest.copy_(src)
    tiles = staging[:m].view(m // TILE, c, TILE)
    tiles.copy_(src.view(m // TILE, TILE, c).permute(0, 2, 1))
    rows.view(c, m // TILE, TILE).copy_(tiles.permute(1, 0, 2))
    return dest


def exact_matmul(t: torch.Tensor) -> bool:
    """Whether a matrix product of ``t``'s dtype and device runs in its own precision on CPU.

    float64 always; float32 unless a reduced-precision setting (``torch.set_float32_
    matmul_precision("medium")``, the ``fp32_precision`` switches: bf16 / tf32) may hand
    it to a lower-precision kernel; no other dtype (half types accumulate differently).
    """
    if t.device.type != "cpu" or t.dtype not in (torch.float32, torch.float64):
        return False
    if t.dtype == torch.float64:
        return True
    if torch.get_float32_matmul_precision() != "highest":
        return False
    backends = torch.backends
    mkldnn = getattr(backends, "mkldnn", None)
    settings = (getattr(backends, "fp32_precision", None), getattr(mkldnn, "fp32_precision", None),
                getattr(getattr(mkldnn, "matmul", None), "fp32_precision", None))
    return all(value in (None, "none", "ieee") for value in settings)


#: Channels per identity of :func:`transpose_by_identity` (8 x 8: 8 multiply-adds per
#: value). Storing the bench's in-image output (117 blocks of 8192 points x 64 channels,
#: one thread, two interleaved runs): 4 / 8 / 16 / 32 channels 52 and 49 / 44 and 41 / 62
#: and 44 / 77 and 87 ms, the direct copy 97 and 86 ms, a plain copy of contiguous rows 24
#: and 19 ms.
IDENTITY_SIZE = 8

_IDENTITIES: dict = {}  # (dtype, groups) -> (groups, size, size) expanded identity


def transpose_by_identity(rows: torch.Tensor, src: torch.Tensor, finite: bool = False) -> bool:
    """``rows.copy_(src.t())`` as ``bmm(identity, src.t())``, channels in groups of
    ``IDENTITY_SIZE`` (8).

    Exact where it runs: each output is ``1 * x`` plus products ``0 * y = +-0``, so ``x``
    itself (a zero may come out as ``+0.0`` for ``-0.0``). It runs only when that holds:
    ``src`` all finite (``0 * inf`` would be NaN; known to the caller, see
    :func:`table_bounded`, or checked by the sum, finite only if every value is), a
    full-precision product (:func:`exact_matmul`), C a multiple of the group size.
    The bench's in-image output (234 blocks of 4096 points x 64 channels) stored this way
    took 36-48 ms single-threaded against 54-58 ms by the direct copy.

    Args:
        rows: ``(C, M)`` destination with unit stride along M (a channels-first slice).
        src: ``(M, C)`` contiguous.
        finite: ``src`` is known to be all finite: no check (a sum over the block; for every
            block, 18 ms in a profile of one single-threaded in-image forward).

    Returns:
        Whether it wrote ``rows`` (False: nothing written, the caller copies).
    """
    m, c = src.shape
    size = IDENTITY_SIZE
    if c % size or m < size or not exact_matmul(src):
        return False
    if not finite and not bool(torch.isfinite(src.sum())):
        return False
    groups = c // size
    key = (src.dtype, groups)
    eye = _IDENTITIES.get(key)
    if eye is None:
        eye = _IDENTITIES.setdefault(key, torch.eye(size, dtype=src.dtype).expand(groups, size, size))
    torch.bmm(eye, src.view(m, groups, size).permute(1, 2, 0), out=rows.view(groups, size, m))
    return True


#: Largest |weight| of a block that :func:`table_bounded` vouches for.
WEIGHT_BOUND = 4.0


def within_bound(t: torch.Tensor, bound: float) -> bool:
    """Whether every value of ``t`` lies in ``[-bound, bound]`` (False if any is NaN)."""
    if not t.numel():
        return True
    low, high = torch.aminmax(t)
    return bool(low >= -bound) and bool(high <= bound)


def table_bounded(table: torch.Tensor, num_taps: int) -> bool:
    """Whether blocks of weighted sums of ``table`` rows are finite wherever their weights
    lie within ``+-WEIGHT_BOUND`` (all 1 for nearest), so that they need no check of their own.

    One pass over the table per call, and only where the identity product can run: every
    value within ``max / (2 K WEIGHT_BOUND)`` of the dtype; then a block's sums of ``K``
    such products are at most half the dtype's largest value (no inf, no NaN), rounding
    included.
    """
    if table.shape[1] % IDENTITY_SIZE or not exact_matmul(table):
        return False
    return within_bound(table, torch.finfo(table.dtype).max / (2 * max(num_taps, 1) * WEIGHT_BOUND))


def rows_of(src: torch.Tensor, dest: torch.Tensor, staging: torch.Tensor) -> torch.Tensor:
    """``dest.copy_(src.t())``: a channels-first block ``(C, M)`` as contiguous rows ``(M, C)``.

    The mirror of :func:`copy_transposed` (same two tiled steps) for the backward pass,
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
    if m % TILE or src.stride(1) != 1:
        return dest.copy_(src.t())
    tiles = staging[:m].view(m // TILE, c, TILE)
    tiles.copy_(src.reshape(c, m // TILE, TILE).permute(1, 0, 2))
    dest.view(m // TILE, TILE, c).copy_(tiles.permute(0, 2, 1))
    return dest
