"""
``torch.nn.functional.grid_sample`` is missing or partial on several NPUs. This module
rebuilds it from operations every backend has: elementwise arithmetic, ``index_select``
(a row gather) and ``index_add`` (a row scatter-add). Nothing here calls ``grid_sample``
or ``interpolate``.

The work is split into two stages so a lookup table can precompute the geometry:

1. :func:`compute_taps` (or :func:`bilinear_taps`): pure geometry. For every sampling
   point it returns ``K`` taps (1 nearest, 4 bilinear, 16 bicubic): flat row indices into
   a channels-last feature table, interpolation weights and validity. No features needed.
2. :func:`gather`: ``values[n, p] = sum_k weights[n, p, k] * table[indices[n, p, k]]``.

:func:`grid_sample` is the drop-in for ``F.grid_sample`` built from exactly these two
stages; :func:`gather_points` is the same for a list of points per image, and
:func:`scatter_add_points` accumulates per-point results into BEV cells with hit counts.

Convention:
    Grids hold normalised ``(x, y)`` exactly as ``F.grid_sample`` reads them (``x`` along
    the width); ``coords="pixel"`` instead takes pixel ``(u, v) = (column, row)`` with
    integer coordinates at pixel centres (see :mod:`bevviz.samplers.reference`).
    The feature table of features ``(N, C, H, W)`` is ``(N * H * W + 1, C)``: row
    ``n * H * W + y * W + x`` holds pixel ``(x, y)`` of image ``n`` and the last row
    (index ``N * H * W``, the *sentinel*) is all zeros. Taps that fall outside the image
    under ``padding_mode="zeros"`` point at the sentinel, so a gather never needs a mask.


The package in three steps: :mod:`~bevviz.samplers.gather_scatter.rounding` (index
rounding, as PyTorch rounds), :mod:`~bevviz.samplers.gather_scatter.taps` (stage 1) and
:mod:`~bevviz.samplers.gather_scatter.engine` (stage 2, the drop-in, the scatter) over
:mod:`~bevviz.samplers.gather_scatter.blocks` (its cache-sized blocks) over
:mod:`~bevviz.samplers.gather_scatter.transpose` (their exact transposing store); the
worker threads are :mod:`bevviz.threads`'. Every public name is re-exported here.
See docs/conventions.md.
"""

from bevviz.samplers.gather_scatter.engine import (
                                                   GatherResult,
                                                   feature_table,
                                                   gather,
                                                   gather_points,
                                                   grid_sample,
                                                   scatter_add_points,
)
from bevviz.samplers.gather_scatter.rounding import FUSED_MULTIPLY_ADD
from bevviz.samplers.gather_scatter.taps import INT32_MAX, Taps, bilinear_taps, compute_taps, index_dtype, pair_taps

__all__ = [
    "FUSED_MULTIPLY_ADD", "INT32_MAX", "GatherResult", "Taps", "bilinear_taps", "compute_taps", "feature_table",
    "gather", "gather_points", "grid_sample", "index_dtype", "pair_taps", "scatter_add_points"
]
