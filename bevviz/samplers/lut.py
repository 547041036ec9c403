"""Lookup table: all BEV geometry precomputed once, one sparse product per frame.

Fast-BEV's observation is that for a fixed rig, grid and feature size the projection never
changes, so it can be tabulated. This module tabulates ALL of it -- flattened tap indices,
bilinear weights, validity, the pillar mean, the multi-camera hit normalisation and the
overlap policy -- into one sparse matrix

    A  (H_bev * W_bev, N_cam * H_f * W_f),
    A[c, n * H_f * W_f + y * W_f + x] = sum over pillar points z and bilinear taps t of
                                        w[n, z, c] * b_t(n, z, c)   (taps at pixel (x, y))

with ``w`` the aggregation weights of :mod:`bevviz.aggregation` and ``b_t`` the bilinear
weights (zero padding). A frame's BEV features are then ``A @ X`` with ``X`` the features
flattened channels-last, shape (N_cam * H_f * W_f, C): exactly the reference pipeline's
formula (equal to 1e-5 in float32; the taps come from
:mod:`bevviz.samplers.gather_scatter` on the same float32 normalised points that
``F.grid_sample`` reads, so the arithmetic is the same).

Three ways to apply it (``method``): ``"bag"`` (the CSR rows as the bags of one weighted
``embedding_bag`` sum: on CPU FBGEMM's vectorised kernel, about twice as fast as MKL's
sparse product on AMD CPUs, where MKL takes its generic code path), ``"sparse"``
(``torch.sparse.mm`` with the CSR matrix; int32 indices where they fit) and ``"gather"``
(ELL layout: a padded (H_bev * W_bev, S) table of indices and weights, one weighted row
gather through gather_scatter). The bench (``python -m bevviz.bench``) times all three;
``"bag"`` is the default because it measured fastest on CPU (see the bench output).
``"gather"`` is the NPU form (no sparse kernels). All three read the features as a
channels-last table: channels-last features are read in place, NCHW ones are transposed
first (about half of the ``"bag"`` time at the bench size).

Caching: :func:`lut_key` is a hashable tuple of everything the table depends on (rig
fingerprint, grid, feature size, image size, overlap, bounds, eps, dtype);
:func:`cached_lut` keeps the last few tables in-process, and an app can key
``st.cache_resource`` on the same tuple.

Convention:
    As :mod:`bevviz.aggregation`: points normalised with the image size, the feature map
    sampled with align_corners=False; columns index the channels-last feature table row
    ``n * H_f * W_f + y * W_f + x``; rows are BEV cells ``i * W_bev + j`` (row 0 = front).
    See docs/conventions.md.
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from bevviz.aggregation import bev_geometry, point_weights, resolve_image_size, valid_pairs
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import check_choice, check_shape, field_error, positive_int
from bevviz.samplers import gather_scatter as gs

#: Bump when the table's layout or formula changes (it is part of every cache key).
LUT_VERSION = 1
METHODS = ("bag", "sparse", "gather")
#: Tables kept by :func:`cached_lut`.
CACHE_SIZE = 8


def _feature_size(feature_size: Any) -> tuple[int, int]:
    try:
        h, w = feature_size
    except (TypeError, ValueError):
        raise field_error("feature_size", feature_size, "must be (H_f, W_f)") from None
    return positive_int(h, "feature_size H_f"), positive_int(w, "feature_size W_f")


def lut_key(rig: Rig, grid: BEVGrid, feature_size: tuple[int, int], image_size: Any = None,
            overlap: str = "mean", bounds: str = "pixel", eps: float = 1e-5,
            dtype: torch.dtype = torch.float32) -> tuple:
    """Hashable cache key of a lookup table.

    Args:
        rig: The rig (its ``fingerprint`` covers every camera's K, extrinsics and size).
        grid: BEV grid.
        feature_size: (H_f, W_f).
        image_size: As :func:`bevviz.aggregation.resolve_image_size`.
        overlap: Overlap policy.
        bounds: Validity bounds.
        eps: Minimum depth.
        dtype: Table dtype.

    Returns:
        A tuple of strings, numbers and tuples.
    """
    sizes = tuple(tuple(int(v) for v in row) for row in resolve_image_size(rig, image_size).tolist())
    g = grid.to_dict()
    return (LUT_VERSION, rig.fingerprint,
            (tuple(g["x_range"]), tuple(g["y_range"]), tuple(g["z_values"]), g["resolution"]),
            _feature_size(feature_size), sizes, str(overlap), str(bounds), float(eps), str(dtype))


@dataclass(eq=False)
class BEVLookupTable:
    """A prebuilt lookup table (see the module docstring).

    Attributes:
        key: :func:`lut_key` of the settings it was built for.
        feature_shape: (N_cam, H_f, W_f).
        bev_shape: (H_bev, W_bev).
        rows: BEV cell of every nonzero, shape (nnz,), int64 (coalesced, row-major).
        cols: Feature-table row of every nonzero, shape (nnz,), int32 or int64.
        values: Coefficients, shape (nnz,), the table dtype.
        hits: Cameras seeing each cell, shape (H_bev, W_bev), int64.
        seen: Camera sees cell, shape (N_cam, H_bev, W_bev), bool.
        point_valid: Point validity, shape (N_cam, Z, H_bev, W_bev), bool.
        build_seconds: Wall time of :func:`build_lut` (seconds).
        method: Default apply method, one of :data:`METHODS`.
        dtype: Table dtype; features must match it.
    """

    key: tuple
    feature_shape: tuple[int, int, int]
    bev_shape: tuple[int, int]
    rows: torch.Tensor
    cols: torch.Tensor
    values: torch.Tensor
    hits: torch.Tensor
    seen: torch.Tensor
    point_valid: torch.Tensor
    build_seconds: float
    method: str = "bag"
    dtype: torch.dtype = torch.float32
    _per_camera: tuple | None = field(default=None, repr=False)
    _csr: torch.Tensor | None = field(default=None, repr=False)
    _ell: tuple | None = field(default=None, repr=False)
    _per_camera_csr: torch.Tensor | None = field(default=None, repr=False)

    @property
    def nnz(self) -> int:
        """Number of stored coefficients."""
        return int(self.values.numel())

    @property
    def matrix(self) -> torch.Tensor:
        """A as a sparse CSR tensor, shape (H_bev * W_bev, N_cam * H_f * W_f)."""
        if self._csr is None:
            self._csr = _csr(self.rows, self.cols, self.values, self.bev_shape[0] * self.bev_shape[1],
                             _num_rows(self.feature_shape))
        return self._csr

    @property
    def ell(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A in ELL layout: (indices, weights), each shape (H_bev * W_bev, S), S the most
        nonzeros of any row; padding points at the zero sentinel row N_cam * H_f * W_f
        with weight 0."""
        if self._ell is None:
            self._ell = _ell(self.rows, self.cols, self.values, self.bev_shape[0] * self.bev_shape[1],
                             _num_rows(self.feature_shape))
        return self._ell

    def check_compatible(self, rig: Rig, grid: BEVGrid, feature_size: tuple[int, int], image_size: Any = None,
                         overlap: str = "mean", bounds: str = "pixel", eps: float = 1e-5) -> None:
        """Raise a named ValueError unless the table was built for exactly these settings."""
        want = lut_key(rig, grid, feature_size, image_size, overlap, bounds, eps, self.dtype)
        if want != self.key:
            names = ("version", "rig", "grid", "feature_size", "image_size", "overlap", "bounds", "eps", "dtype")
            diff = [n for n, a, b in zip(names, want, self.key) if a != b]
            raise field_error("lut", diff, "lookup table was built for other settings (fields differ)")

    def _check(self, features: torch.Tensor) -> None:
        check_shape(features, (self.feature_shape[0], None, *self.feature_shape[1:]), "features")
        if features.dtype != self.dtype:
            raise field_error("features dtype", str(features.dtype), f"the table is {self.dtype}")

    def _table(self, features: torch.Tensor) -> torch.Tensor:
        """The channels-last feature table (N_cam * H_f * W_f, C): a view of channels-last
        features, a transposed copy of NCHW ones."""
        self._check(features)
        return features.permute(0, 2, 3, 1).reshape(_num_rows(self.feature_shape), features.shape[1])

    def apply(self, features: torch.Tensor, method: str | None = None) -> torch.Tensor:
        """BEV features of one frame.

        Args:
            features: Shape (N_cam, C, H_f, W_f), the table's dtype.
            method: One of :data:`METHODS`; default :attr:`method`.

        Returns:
            BEV features, shape (C, H_bev, W_bev) (a transposed view of an
            (H_bev * W_bev, C) result).
        """
        method = method or self.method
        check_choice(method, METHODS, "method")
        hb, wb = self.bev_shape
        if method == "bag":
            csr = self.matrix
            out = F.embedding_bag(csr.col_indices(), self._table(features), csr.crow_indices(), mode="sum",
                                  per_sample_weights=csr.values(), include_last_offset=True)
        elif method == "sparse":
            out = torch.sparse.mm(self.matrix, self._table(features))
        else:
            idx, wts = self.ell
            n, h, w = self.feature_shape
            self._check(features)
            taps = gs.Taps(indices=idx.unsqueeze(0), weights=wts.unsqueeze(0), valid=wts.unsqueeze(0) != 0,
                           feature_shape=(n, h, w))
            out = gs.gather(features, taps)[0]
        return out.t().reshape(features.shape[1], hb, wb)

    def apply_per_camera(self, features: torch.Tensor) -> torch.Tensor:
        """Per-camera pillar means P[n, c] (no camera normalisation).

        Args:
            features: Shape (N_cam, C, H_f, W_f).

        Returns:
            Shape (N_cam, C, H_bev, W_bev), zero where the camera does not see the cell.
        """
        n = self.feature_shape[0]
        hb, wb = self.bev_shape
        if self._per_camera_csr is None:
            rows, cols, vals = _entries(*self._per_camera, _num_rows(self.feature_shape))
            self._per_camera_csr = _csr(rows, cols, vals, n * hb * wb, _num_rows(self.feature_shape))
        out = torch.sparse.mm(self._per_camera_csr, self._table(features))
        return out.view(n, hb, wb, -1).permute(0, 3, 1, 2)


def _num_rows(feature_shape: tuple[int, int, int]) -> int:
    n, h, w = feature_shape
    return n * h * w


def _coalesce(rows: torch.Tensor, cols: torch.Tensor, vals: torch.Tensor, num_cols: int):
    """Sum duplicate (row, col) entries; sort row-major. Returns rows (int64), cols, vals."""
    if rows.numel() == 0:
        return rows.to(torch.int64), cols.to(torch.int64), vals
    key = rows.to(torch.int64) * num_cols + cols.to(torch.int64)
    uniq, inverse = torch.unique(key, sorted=True, return_inverse=True)
    summed = vals.new_zeros(uniq.numel()).index_add_(0, inverse, vals)
    return torch.div(uniq, num_cols, rounding_mode="floor"), uniq % num_cols, summed


def _entries(row: torch.Tensor, tap_idx: torch.Tensor, coef: torch.Tensor, sentinel: int):
    """Coalesced (rows, cols, vals) of pairs in BEV row ``row`` (M,) with taps (M, 4)."""
    rows = row.unsqueeze(1).expand(-1, tap_idx.shape[1]).reshape(-1)
    cols = tap_idx.reshape(-1)
    vals = coef.reshape(-1)
    keep = (cols != sentinel) & (vals != 0)
    return _coalesce(rows[keep], cols[keep], vals[keep], sentinel)


def _csr(rows, cols, vals, num_rows, num_cols) -> torch.Tensor:
    idtype = torch.int32 if max(num_rows, num_cols, rows.numel()) < 2**31 - 1 else torch.int64
    counts = torch.bincount(rows, minlength=num_rows)
    crow = torch.zeros(num_rows + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(counts, 0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow.to(idtype), cols.to(idtype), vals, (num_rows, num_cols),
                                       check_invariants=False)


def _ell(rows, cols, vals, num_rows, sentinel):
    counts = torch.bincount(rows, minlength=num_rows)
    slots = int(counts.max()) if counts.numel() and rows.numel() else 1
    start = torch.zeros(num_rows, dtype=torch.int64)
    start[1:] = torch.cumsum(counts, 0)[:-1]
    slot = torch.arange(rows.numel()) - start[rows]
    idtype = gs.index_dtype(sentinel)
    idx = torch.full((num_rows, slots), sentinel, dtype=idtype)
    wts = vals.new_zeros(num_rows, slots)
    idx[rows, slot] = cols.to(idtype)
    wts[rows, slot] = vals
    return idx, wts


def build_lut(rig: Rig, grid: BEVGrid, feature_size: tuple[int, int], image_size: Any = None,
              overlap: str = "mean", bounds: str = "pixel", eps: float = 1e-5,
              dtype: torch.dtype = torch.float32, method: str = "bag") -> BEVLookupTable:
    """Precompute the BEV lookup table of a static rig, grid and feature size.

    Args:
        rig: The rig (N_cam cameras).
        grid: BEV grid (Z points per pillar, H_bev x W_bev cells).
        feature_size: (H_f, W_f) of the feature maps it will be applied to.
        image_size: Image size the rig's pixels refer to (see :mod:`bevviz.aggregation`).
        overlap: ``"mean"``, ``"first_hit"`` or ``"last_write"``.
        bounds: ``"pixel"`` or ``"bevformer"``.
        eps: Minimum depth (metres).
        dtype: Table dtype (the features' dtype at apply time).
        method: Default apply method, one of :data:`METHODS`.

    Returns:
        :class:`BEVLookupTable` with ``build_seconds`` set.

    Convention:
        See the module docstring.
    """
    t0 = time.perf_counter()
    check_choice(method, METHODS, "method")
    if dtype not in (torch.float32, torch.float64):
        raise field_error("dtype", str(dtype), "must be torch.float32 or torch.float64")
    key = lut_key(rig, grid, feature_size, image_size, overlap, bounds, eps, dtype)
    hf, wf = _feature_size(feature_size)
    n = len(rig)
    shape = (n, hf, wf)
    sentinel = n * hf * wf
    geom = bev_geometry(rig, grid, image_size=image_size, eps=eps, bounds=bounds)
    weights, hits, seen = point_weights(geom.valid, overlap)
    hb, wb = grid.shape
    hw = hb * wb

    # Taps of every valid (camera, point) pair, once; the overlap weights zero some of them.
    pair, cam, cell = valid_pairs(geom.valid)
    pts = geom.grid.reshape(-1, 2).index_select(0, pair).to(dtype)
    taps = gs.pair_taps(cam, pts, shape, coords="normalized")
    tap_idx, tap_w = taps.indices[0], taps.weights[0]  # (M, 4)
    coef = tap_w * weights.reshape(-1).index_select(0, pair).to(dtype).unsqueeze(1)
    rows, cols, vals = _entries(cell, tap_idx, coef, sentinel)
    pillar = (geom.valid.to(torch.float64) / geom.valid.sum(dim=1, keepdim=True).clamp(min=1)).reshape(-1)
    per_cam_inputs = (cam * hw + cell, tap_idx, tap_w * pillar.index_select(0, pair).to(dtype).unsqueeze(1))
    idtype = gs.index_dtype(sentinel)
    table = BEVLookupTable(
        key=key, feature_shape=shape, bev_shape=(hb, wb), rows=rows, cols=cols.to(idtype), values=vals,
        hits=hits, seen=seen, point_valid=geom.valid, build_seconds=0.0, method=method, dtype=dtype,
        _per_camera=per_cam_inputs,
    )
    _ = table.matrix  # build the CSR now so its cost is part of the build time
    table.build_seconds = time.perf_counter() - t0
    return table


_CACHE: OrderedDict[tuple, BEVLookupTable] = OrderedDict()


def cached_lut(rig: Rig, grid: BEVGrid, feature_size: tuple[int, int], image_size: Any = None,
               overlap: str = "mean", bounds: str = "pixel", eps: float = 1e-5,
               dtype: torch.dtype = torch.float32) -> BEVLookupTable:
    """:func:`build_lut` through an in-process LRU cache of :data:`CACHE_SIZE` tables keyed
    by :func:`lut_key`."""
    key = lut_key(rig, grid, feature_size, image_size, overlap, bounds, eps, dtype)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    table = build_lut(rig, grid, feature_size, image_size, overlap, bounds, eps, dtype)
    _CACHE[key] = table
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return table


def clear_cache() -> None:
    """Forget every cached table."""
    _CACHE.clear()
