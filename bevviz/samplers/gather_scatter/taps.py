"""Stage 1, pure geometry: the interpolation taps of every sampling point.

For every point, ``K`` taps (1 nearest, 4 bilinear, 16 bicubic): flat row indices into a
channels-last feature table, interpolation weights and validity. No features needed, so a
lookup table can precompute them.

Index dtype:
    Flat indices are int32 whenever every index, the sentinel ``N * H * W`` included,
    fits: ``N * H * W <= 2**31 - 1`` (:func:`index_dtype`); otherwise int64, explicitly.
    int32 is the "NPU form" (Ascend gathers take int32 offsets). PyTorch's CPU
    ``index_select`` and ``index_add_`` accept int32 indices directly, so no cast happens
    at the op. Tap positions become index contributions through per-axis lookup tables
    of ``W + 2`` and ``H + 2`` entries (also gathers), so no bool -> number casts are needed.

Convention:
    Tap ``(x, y)`` of image ``n`` is table row ``n * H * W + y * W + x``; the sentinel
    ``N * H * W`` is the zero row. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.checks import check_choice, check_shape, field_error
from bevviz.samplers.gather_scatter.rounding import apply_padding, constant_like, tracing, unnormalize
from bevviz.samplers.reference import MODES, PADDING_MODES

__all__ = [
    "INT32_MAX", "TAPS_PER_AXIS", "bilinear_taps", "compute_taps", "index_dtype", "pair_taps", "tap_arrays", "Taps"
]


#: Largest int32 value; indices (sentinel ``N * H * W`` included) up to it use int32.
INT32_MAX = 2**31 - 1

#: Cubic convolution constant, the same as PyTorch's bicubic ``grid_sample``.
_CUBIC_A = -0.75

#: Taps per axis for each mode.
TAPS_PER_AXIS = {"nearest": 1, "bilinear": 2, "bicubic": 4}


@dataclass(frozen=True)
class Taps:
    """Interpolation taps of ``P`` points per image: pure geometry, no features.

    Attributes:
        indices: Flat row indices into the feature table, shape ``(N, P, K)``, int32 when
            :func:`index_dtype` allows, else int64. Invalid taps hold the sentinel
            ``N * H * W`` (the table's zero row). Usually a view of tap-major storage
            ``(K, N, P)``; call ``.contiguous()`` for a packed copy.
        weights: Interpolation weights, shape ``(N, P, K)``, the grid's dtype. Zero for
            invalid taps, except NaN where the point's coordinate is NaN or infinite (that
            NaN is what PyTorch returns there).
        valid: Whether each tap reads a real pixel, shape ``(N, P, K)``, bool.
        feature_shape: ``(N, H, W)`` of the features the indices address.
        mode: ``"nearest"`` (K=1), ``"bilinear"`` (K=4, order NW, NE, SW, SE) or
            ``"bicubic"`` (K=16, row-major over the 4 x 4 neighbourhood).

    Convention:
        ``indices = n * H * W + y * W + x`` for tap pixel ``(x, y)`` (column, row) of
        image ``n``; the sentinel ``N * H * W`` is one past the last pixel.
    """

    indices: torch.Tensor
    weights: torch.Tensor
    valid: torch.Tensor
    feature_shape: tuple[int, int, int]
    mode: str = "bilinear"

    @property
    def sentinel(self) -> int:
        """Index of the zero row: ``N * H * W``."""
        n, h, w = self.feature_shape
        return n * h * w

    @property
    def num_taps(self) -> int:
        """Taps per point, ``K``."""
        return int(self.indices.shape[-1])


def index_dtype(num_rows: int) -> torch.dtype:
    """Index dtype for a feature table of ``num_rows`` pixel rows (plus the sentinel).

    Args:
        num_rows: ``N * H * W``; the largest index used is the sentinel ``num_rows``.

    Returns:
        ``torch.int32`` if ``num_rows <= 2**31 - 1`` (every index fits in int32), else
        ``torch.int64``.
    """
    return torch.int32 if num_rows <= INT32_MAX else torch.int64


def _cubic_coefficients(t: torch.Tensor) -> torch.Tensor:
    """Cubic convolution weights (A = -0.75) of taps at offsets -1, 0, 1, 2.

    Args:
        t: Fractional position in ``[0, 1)``, any shape ``S``.

    Returns:
        Weights, shape ``(4, *S)``.
    """
    a = _CUBIC_A
    x = t + 1
    c0 = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    c1 = ((a + 2) * t - (a + 3)) * t * t + 1
    x = 1 - t
    c2 = ((a + 2) * x - (a + 3)) * x * x + 1
    x = 2 - t
    c3 = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return torch.stack([c0, c1, c2, c3])


def _axis_taps(
    coord: torch.Tensor,
    size: int,
    mode: str,
    padding_mode: str,
    align_corners: bool,
    pixel: bool,
    idtype: torch.dtype,
    stride: int,
    offset: int,
    marker: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Taps along one axis: their contribution to the flat index, and their weights.

    Args:
        coord: Normalised (or pixel, if ``pixel``) coordinates, shape ``S``.
        size: Image size along this axis.
        mode, padding_mode, align_corners: As in :func:`grid_sample`.
        pixel: Whether ``coord`` is already in pixels.
        idtype: Index dtype.
        stride, offset: A valid tap ``t`` contributes ``offset + t * stride``.
        marker: What an invalid tap (outside ``[0, size - 1]``, NaN, inf) contributes.

    Returns:
        ``(contrib, weights)``, each ``(k, *S)`` with ``k`` = 1, 2 or 4 taps: index
        contributions (``idtype``) and 1-D weights multiplied by the tap's validity (so a
        NaN weight stays NaN, as PyTorch's ``0 * NaN``). Nearest weights are exactly 1
        (with zero gradient) and not masked.
    """
    x = coord if pixel else unnormalize(coord, size, align_corners)
    if mode == "bicubic":
        x0 = torch.floor(x).detach()
        weights = _cubic_coefficients(x - x0)
        offsets = torch.arange(-1, 3, dtype=x.dtype, device=x.device)
        taps = x0.unsqueeze(0) + offsets.view((4,) + (1,) * x0.dim())
        taps = apply_padding(taps, size, padding_mode, align_corners)
    else:
        x = apply_padding(x, size, padding_mode, align_corners)
        if mode == "nearest":
            taps = torch.round(x).detach().unsqueeze(0)
            weights = constant_like(x, 1.0).unsqueeze(0)
        else:
            x0 = torch.floor(x.detach())
            taps = torch.stack([x0, x0 + 1])
            if x.requires_grad or tracing():
                frac = x - x0
                weights = torch.stack([1 - frac, frac])
            else:  # same values, written in place (saves the stack copies)
                weights = x.new_empty((2,) + x.shape)
                frac = torch.sub(x, x0, out=weights[1])
                weights[0].fill_(1).sub_(frac)
    # Tap -> position in two small lookup tables, 0 .. size + 1, where 0 and size + 1
    # stand for "outside" (NaN -> 0; inf is clamped first, so the float -> int cast is
    # always defined). Gathering from the tables gives the index contribution and the
    # validity as a float without any bool -> number cast (slow on CPU).
    pos = torch.nan_to_num(taps, nan=-1.0).clamp_(-1, size).add_(1).to(idtype).view(-1)
    device = coord.device
    edge = torch.full((1,), marker, dtype=idtype, device=device)
    contrib_table = torch.cat(
        [edge, torch.arange(size, dtype=idtype, device=device) * stride + offset, edge]
    )
    contrib = contrib_table.index_select(0, pos).view(taps.shape)
    if mode == "nearest":
        return contrib, weights
    zero = torch.zeros(1, dtype=weights.dtype, device=device)
    inside_table = torch.cat([zero, torch.ones(size, dtype=weights.dtype, device=device), zero])
    return contrib, weights * inside_table.index_select(0, pos).view(taps.shape)


def _check_mode_args(mode: str, padding_mode: str, align_corners: bool, coords: str) -> None:
    """Validate the non-tensor arguments of the tap functions."""
    check_choice(mode, MODES, "mode")
    check_choice(padding_mode, PADDING_MODES, "padding_mode")
    if not isinstance(align_corners, (bool, np.bool_)):
        raise field_error("align_corners", align_corners, "must be a bool")
    if coords not in ("normalized", "pixel"):
        raise field_error("coords", coords, "must be 'normalized' or 'pixel'")


def _positive_size(value: object, field: str) -> int:
    """``value`` as a positive int, or a named ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise field_error(field, value, "must be a positive int")
    return value


def compute_taps(
    grid: torch.Tensor,
    height: int,
    width: int,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
    coords: str = "normalized",
) -> Taps:
    """Interpolation taps of ``P`` points per image on an ``H x W`` feature map.

    Args:
        grid: Sampling points, shape ``(N, P, 2)``, floating point: normalised ``(x, y)``
            as in ``F.grid_sample`` (``coords="normalized"``), or pixel ``(u, v)``
            (``coords="pixel"``).
        height: ``H`` of the features to be sampled.
        width: ``W`` of the features to be sampled.
        mode: ``"nearest"`` (K=1), ``"bilinear"`` (K=4) or ``"bicubic"`` (K=16).
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: Normalisation convention; also sets the reflection borders for
            pixel input.
        coords: ``"normalized"`` or ``"pixel"``.

    Returns:
        :class:`Taps` with ``indices``, ``weights``, ``valid`` of shape ``(N, P, K)``.
        Weights are differentiable w.r.t. ``grid``.

    Convention:
        See the module docstring: tap ``(x, y)`` of image ``n`` is table row
        ``n * H * W + y * W + x``; the sentinel ``N * H * W`` is the zero row.

    Raises:
        ValueError: naming the offending argument.
    """
    if not isinstance(grid, torch.Tensor) or not grid.is_floating_point():
        raise field_error("grid", getattr(grid, "dtype", type(grid).__name__),
                          "must be a floating-point torch.Tensor")
    check_shape(grid, (None, None, 2), "grid")
    height = _positive_size(height, "height")
    width = _positive_size(width, "width")
    _check_mode_args(mode, padding_mode, align_corners, coords)
    n = int(grid.shape[0])
    indices, weights = tap_arrays(
        grid, height, width, mode, padding_mode, bool(align_corners), coords == "pixel"
    )
    num_rows = n * height * width
    return Taps(
        indices=indices.permute(1, 2, 0),
        weights=weights.permute(1, 2, 0),
        valid=(indices != num_rows).permute(1, 2, 0),
        feature_shape=(n, height, width),
        mode=mode,
    )


def tap_arrays(
    grid: torch.Tensor,
    height: int,
    width: int,
    mode: str,
    padding_mode: str,
    align_corners: bool,
    pixel: bool,
    first_image: int = 0,
    num_images: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tap machinery shared by :func:`compute_taps` and :func:`grid_sample`.

    Args:
        grid: ``(n, P, 2)`` validated points of images ``first_image ..
            first_image + n - 1``.
        height, width: Feature map size.
        mode, padding_mode, align_corners: As in :func:`grid_sample`.
        pixel: Whether ``grid`` holds pixel coordinates.
        first_image: Image number of ``grid[0]`` in the feature table.
        num_images: Images in the feature table (``N``; default ``n``); sets the sentinel
            ``N * H * W`` and the index dtype.

    Returns:
        ``(indices, weights)``, tap-major ``(K, n, P)``.
    """
    n, p = grid.shape[0], grid.shape[1]
    num_rows = (n if num_images is None else num_images) * height * width
    hw = height * width
    idtype = index_dtype(num_rows)
    # Flat index = sentinel + min(0, row' + col') where, for valid taps,
    #   row' = n*H*W + y*W - sentinel  (in [-sentinel, -1])  and  col' = x  (in [0, W - 1]),
    # and an invalid tap makes the sum >= 0: col' = sentinel for an invalid column, row' >= 0
    # for an invalid row (H*W, plus the image offset below). Every intermediate lies in
    # [-sentinel, sentinel], so int32 is safe whenever index_dtype chose it.
    col, wx = _axis_taps(grid[..., 0], width, mode, padding_mode, align_corners, pixel,
                         idtype, stride=1, offset=0, marker=num_rows)
    row, wy = _axis_taps(grid[..., 1], height, mode, padding_mode, align_corners, pixel,
                         idtype, stride=width, offset=-num_rows, marker=hw)
    images = torch.arange(first_image, first_image + n, dtype=idtype, device=grid.device)
    row = row.add_(images.view(1, n, 1) * hw).clamp_(max=0)
    indices = (row.unsqueeze(1) + col.unsqueeze(0)).clamp_(max=0).add_(num_rows)
    weights = wy.unsqueeze(1) * wx.unsqueeze(0)  # per-axis validity already applied
    k = indices.shape[0] * indices.shape[1]
    return indices.view(k, n, p), weights.view(k, n, p)


def bilinear_taps(
    grid: torch.Tensor,
    height: int,
    width: int,
    padding_mode: str = "zeros",
    align_corners: bool = False,
    coords: str = "normalized",
) -> Taps:
    """The 4 bilinear taps (NW, NE, SW, SE) of each point; see :func:`compute_taps`.

    Args:
        grid: Points, shape ``(N, P, 2)`` (normalised ``(x, y)`` or pixel ``(u, v)``).
        height: ``H`` of the features.
        width: ``W`` of the features.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: Normalisation convention.
        coords: ``"normalized"`` or ``"pixel"``.

    Returns:
        :class:`Taps` with ``(N, P, 4)`` indices, weights and validity.
    """
    return compute_taps(grid, height, width, "bilinear", padding_mode, align_corners, coords)


def pair_taps(camera: torch.Tensor, points: torch.Tensor, feature_shape: tuple[int, int, int],
              coords: str = "pixel") -> Taps:
    """Bilinear taps of a ragged list of (camera, point) pairs, via gather_scatter.

    :func:`bilinear_taps` addresses P points per image; the
    pairs here have a camera each, so the taps of all points are computed as one image and
    then moved to their camera's rows of the (N * H * W + 1, C) feature table, invalid taps
    to its zero sentinel row ``N * H * W``.

    Args:
        camera: Camera of each pair, shape (M,), integer.
        points: Points, shape (M, 2): pixel (u, v) with ``coords="pixel"`` or normalised
            (x, y) with ``coords="normalized"`` (align_corners=False, zero padding).
        feature_shape: (N, H, W) of the features.
        coords: ``"pixel"`` or ``"normalized"``.

    Returns:
        :class:`Taps` with indices, weights and valid of
        shape (1, M, 4) (one "image" of M points addressing the whole table) and
        ``feature_shape`` (N, H, W); weights differentiable in ``points``.
    """
    N, H, W = feature_shape
    taps = bilinear_taps(points.reshape(1, -1, 2), H, W, coords=coords)
    idtype = index_dtype(N * H * W)
    base = (camera.to(idtype) * (H * W)).view(1, -1, 1)
    idx = torch.where(taps.valid, taps.indices.to(idtype) + base, N * H * W)
    return Taps(indices=idx, weights=taps.weights, valid=taps.valid, feature_shape=(N, H, W))
