"""Reference sampler (``torch.nn.functional.grid_sample``) and pixel <-> normalised helpers.

This module is the oracle the other samplers are compared with, and the one place that
spells out how pixel coordinates relate to the normalised coordinates of a sampling grid.

Convention:
    Pixels are ``(u, v) = (column, row)`` with integer coordinates at pixel *centres*, so
    an image of width ``W`` spans ``u`` in ``[-0.5, W - 0.5]`` (and likewise ``v`` over the
    height ``H``). A grid holds ``(x, y)`` normalised coordinates exactly as
    ``torch.nn.functional.grid_sample`` reads them: ``x`` runs along the width (columns)
    and ``y`` along the height (rows).

    * ``align_corners=False``: ``-1`` and ``+1`` are the outer *edges* of the border
      pixels: ``g = (2u + 1) / W - 1``, ``u = ((g + 1) W - 1) / 2``.
    * ``align_corners=True``: ``-1`` and ``+1`` are the *centres* of the border pixels:
      ``g = 2u / (W - 1) - 1``, ``u = (g + 1) (W - 1) / 2``.

    Sizes are always given as ``(W, H)`` (width first), the same ``(x, y)`` order as the
    last axis of ``uv`` and ``grid``; tensors of images stay ``(N, C, H, W)``.

    A feature map at stride ``s`` of an image covers the same area with ``s x s`` image
    pixels per feature pixel, so ``u_feat = (u + 0.5) / s - 0.5``.
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bevviz.checks import check_choice, check_shape, field_error

__all__ = [
    "MODES",
    "PADDING_MODES",
    "check_grid_sample_args",
    "grid_sample",
    "pixel_to_normalized",
    "normalized_to_pixel",
    "image_to_feature_pixel",
    "feature_to_image_pixel",
]

#: Interpolation modes every sampler in :mod:`bevviz.samplers` accepts.
MODES = ("bilinear", "nearest", "bicubic")
#: Padding modes every sampler in :mod:`bevviz.samplers` accepts.
PADDING_MODES = ("zeros", "border", "reflection")

def check_grid_sample_args(
    input: torch.Tensor,
    grid: torch.Tensor,
    mode: str,
    padding_mode: str,
    align_corners: bool,
) -> None:
    """Validate the arguments shared by every ``grid_sample``-style sampler.

    Args:
        input: Features, shape ``(N, C, H_in, W_in)``, floating point, ``H_in, W_in > 0``.
        grid: Sampling locations, shape ``(N, H_out, W_out, 2)`` holding normalised
            ``(x, y)``; same dtype and device as ``input``.
        mode: One of :data:`MODES`.
        padding_mode: One of :data:`PADDING_MODES`.
        align_corners: A ``bool`` (``None`` is rejected: being explicit is the point).

    Raises:
        InputError: naming the offending field and its value.
    """
    for name, value in (("input", input), ("grid", grid)):
        if not isinstance(value, torch.Tensor):
            raise field_error(name, type(value).__name__, "must be a torch.Tensor")
        if not value.is_floating_point():
            raise field_error(name, value.dtype, "must have a floating-point dtype")
    check_shape(input, ("N", "C", "H_in", "W_in"), "input")
    check_shape(grid, (None, None, None, 2), "grid")
    if input.shape[2] == 0 or input.shape[3] == 0:
        raise field_error("input", tuple(input.shape), "spatial size H_in, W_in must be > 0")
    if grid.shape[0] != input.shape[0]:
        raise field_error(
            "grid", tuple(grid.shape), f"batch size must equal input's N={input.shape[0]}"
        )
    if grid.dtype != input.dtype:
        raise field_error("grid", grid.dtype, f"dtype must equal input's dtype {input.dtype}")
    if grid.device != input.device:
        raise field_error("grid", grid.device, f"must be on input's device {input.device}")
    check_choice(mode, MODES, "mode")
    check_choice(padding_mode, PADDING_MODES, "padding_mode")
    if not isinstance(align_corners, (bool, np.bool_)):
        raise field_error("align_corners", align_corners, "must be a bool")


def grid_sample(
    input: torch.Tensor,
    grid: torch.Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
) -> torch.Tensor:
    """Sample ``input`` at ``grid`` with ``torch.nn.functional.grid_sample`` (the oracle).

    Same signature as every sampler in :mod:`bevviz.samplers`; arguments are validated
    first so a bad call fails with a named ``ValueError`` instead of a deep torch error.

    Args:
        input: Features, shape ``(N, C, H_in, W_in)``.
        grid: Normalised ``(x, y)`` sampling locations, shape ``(N, H_out, W_out, 2)``.
        mode: ``"bilinear"``, ``"nearest"`` or ``"bicubic"``.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: See the module ``Convention``.

    Returns:
        Sampled features, shape ``(N, C, H_out, W_out)``.

    Convention:
        ``grid[..., 0]`` is ``x`` (width / column), ``grid[..., 1]`` is ``y`` (height /
        row); ``align_corners`` as in the module docstring.

    Raises:
        InputError: naming the offending field and its value.
    """
    check_grid_sample_args(input, grid, mode, padding_mode, align_corners)
    return F.grid_sample(
        input, grid, mode=mode, padding_mode=padding_mode, align_corners=bool(align_corners)
    )


# --------------------------------------------------------------------------- helpers


def _as_float(value: object, field: str) -> torch.Tensor | np.ndarray:
    """Return ``value`` as a floating tensor (if it is a tensor) or a float64 ndarray."""
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else value.to(torch.get_default_dtype())
    try:
        arr = np.asarray(value)
        return arr if np.issubdtype(arr.dtype, np.floating) else arr.astype(np.float64)
    except (TypeError, ValueError):
        raise field_error(field, value, "must be numeric") from None


def _pair_like(
    like: torch.Tensor | np.ndarray, values: Sequence[float]
) -> torch.Tensor | np.ndarray:
    """A length-2 array/tensor of ``values`` matching ``like``'s kind, dtype and device."""
    if isinstance(like, torch.Tensor):
        return torch.tensor(list(values), dtype=like.dtype, device=like.device)
    return np.asarray(values, dtype=like.dtype)


def _size_pair(size: Sequence[int], field: str = "size") -> tuple[int, int]:
    """Validate a ``(W, H)`` size and return it as two positive ints."""
    try:
        items = [v.item() if hasattr(v, "item") else v for v in size]
    except TypeError:
        raise field_error(field, size, "must be a (W, H) pair of positive integers") from None
    if len(items) != 2 or any(
        isinstance(v, bool) or not isinstance(v, (int, np.integer, float, np.floating))
        or float(v) != int(v) or int(v) <= 0
        for v in items
    ):
        raise field_error(field, size, "must be a (W, H) pair of positive integers")
    return int(items[0]), int(items[1])


def _stride_pair(stride: float | Sequence[float]) -> tuple[float, float]:
    """Validate a stride (one number, or ``(s_u, s_v)``) and return it as two floats."""
    if isinstance(stride, (int, float, np.integer, np.floating)) and not isinstance(stride, bool):
        items = [stride, stride]
    else:
        try:
            items = [v.item() if hasattr(v, "item") else v for v in stride]  # type: ignore
        except TypeError:
            raise field_error("stride", stride, "must be a number or a (s_u, s_v) pair") from None
    if len(items) != 2 or any(
        isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
        or not np.isfinite(float(v)) or float(v) <= 0
        for v in items
    ):
        raise field_error("stride", stride, "must be positive and finite")
    return float(items[0]), float(items[1])


def pixel_to_normalized(
    uv: torch.Tensor | np.ndarray, size: Sequence[int], align_corners: bool = False
) -> torch.Tensor | np.ndarray:
    """Convert pixel coordinates to normalised grid coordinates.

    Args:
        uv: Pixel coordinates ``(u, v) = (column, row)``, shape ``(..., 2)``; a tensor
            (kept on its device, integer dtypes become the default float dtype) or an
            array-like (returned as a numpy array).
        size: ``(W, H)``: width first, matching the ``(u, v)`` order of ``uv``.
        align_corners: Which normalisation ``grid_sample`` will use.

    Returns:
        Normalised ``(x, y)``, shape ``(..., 2)``, same kind as ``uv``.

    Convention:
        ``align_corners=False``: ``g = (2u + 1) / W - 1``, so pixel edges ``u = -0.5`` and
        ``u = W - 0.5`` map to ``-1`` and ``+1``.
        ``align_corners=True``: ``g = 2u / (W - 1) - 1``, so pixel centres ``u = 0`` and
        ``u = W - 1`` map to ``-1`` and ``+1``; undefined for a size of 1.

    Raises:
        InputError: if ``uv`` is not ``(..., 2)``, ``size`` is not two positive integers,
            or ``align_corners=True`` with a size of 1 (every ``g`` maps to pixel 0 there,
            so there is no inverse).
    """
    uv = _as_float(uv, "uv")
    check_shape(uv, ("...", 2), "uv")
    width, height = _size_pair(size)
    if align_corners:
        if width == 1 or height == 1:
            raise field_error(
                "size", (width, height), "align_corners=True needs W and H > 1 to normalise"
            )
        return 2 * uv / _pair_like(uv, (width - 1, height - 1)) - 1
    return (2 * uv + 1) / _pair_like(uv, (width, height)) - 1


def normalized_to_pixel(
    grid: torch.Tensor | np.ndarray, size: Sequence[int], align_corners: bool = False
) -> torch.Tensor | np.ndarray:
    """Convert normalised grid coordinates to pixel coordinates (inverse of the above).

    Args:
        grid: Normalised ``(x, y)``, shape ``(..., 2)``; tensor or array-like.
        size: ``(W, H)``: width first, matching the ``(x, y)`` order of ``grid``.
        align_corners: Which normalisation ``grid`` uses.

    Returns:
        Pixel coordinates ``(u, v) = (column, row)``, shape ``(..., 2)``, same kind as
        ``grid``.

    Convention:
        ``align_corners=False``: ``u = ((g + 1) W - 1) / 2``;
        ``align_corners=True``: ``u = (g + 1) (W - 1) / 2`` (every ``g`` maps to 0 when
        ``W == 1``, exactly as ``grid_sample`` does). These are the "unnormalise" formulas
        of ``grid_sample``; its CPU kernel may round the last bit differently (it fuses a
        multiply-add), which matters to no caller of this helper.

    Raises:
        InputError: if ``grid`` is not ``(..., 2)`` or ``size`` is not two positive ints.
    """
    grid = _as_float(grid, "grid")
    check_shape(grid, ("...", 2), "grid")
    width, height = _size_pair(size)
    if align_corners:
        return (grid + 1) * _pair_like(grid, ((width - 1) / 2, (height - 1) / 2))
    return ((grid + 1) * _pair_like(grid, (width, height)) - 1) / 2


def image_to_feature_pixel(
    uv: torch.Tensor | np.ndarray, stride: float | Sequence[float]
) -> torch.Tensor | np.ndarray:
    """Convert image pixel coordinates to those of a feature map at ``stride``.

    Args:
        uv: Image pixel coordinates ``(u, v)``, shape ``(..., 2)``.
        stride: Image pixels per feature pixel: one number, or ``(s_u, s_v)``.

    Returns:
        Feature-map pixel coordinates, shape ``(..., 2)``, same kind as ``uv``.

    Convention:
        ``u_feat = (u + 0.5) / s - 0.5`` (pixel centres at integers in both maps, the
        feature map covering exactly the image area), so image edge ``-0.5`` stays
        ``-0.5`` and image centre pixel ``s/2 - 0.5`` of block 0 lands on feature pixel 0.

    Raises:
        InputError: if ``uv`` is not ``(..., 2)`` or the stride is not positive.
    """
    uv = _as_float(uv, "uv")
    check_shape(uv, ("...", 2), "uv")
    s = _pair_like(uv, _stride_pair(stride))
    return (uv + 0.5) / s - 0.5


def feature_to_image_pixel(
    uv_feat: torch.Tensor | np.ndarray, stride: float | Sequence[float]
) -> torch.Tensor | np.ndarray:
    """Convert feature-map pixel coordinates back to image pixel coordinates.

    Args:
        uv_feat: Feature-map pixel coordinates ``(u, v)``, shape ``(..., 2)``.
        stride: Image pixels per feature pixel: one number, or ``(s_u, s_v)``.

    Returns:
        Image pixel coordinates, shape ``(..., 2)``, same kind as ``uv_feat``.

    Convention:
        ``u = (u_feat + 0.5) * s - 0.5``, the inverse of :func:`image_to_feature_pixel`.

    Raises:
        InputError: if ``uv_feat`` is not ``(..., 2)`` or the stride is not positive.
    """
    uv_feat = _as_float(uv_feat, "uv_feat")
    check_shape(uv_feat, ("...", 2), "uv_feat")
    s = _pair_like(uv_feat, _stride_pair(stride))
    return (uv_feat + 0.5) * s - 0.5
