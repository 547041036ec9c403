"""The padding lab's experiments: test patterns, grids past the border, every padding mode compared.

Convention:
    Grids hold normalised (x, y) as ``F.grid_sample`` reads them; both ``align_corners``
    formulas are in docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.checks import check_shape, field_error, to_numpy
from bevviz.samplers.reference import normalized_to_pixel, pixel_to_normalized

__all__ = [
    "half_pixel_mismatch", "margin_grid", "margin_grid_pixels", "padding_cases", "PaddingCase", "pixel_grid",
    "test_pattern"
]


def test_pattern(height: int = 24, width: int = 32) -> torch.Tensor:
    """A feature map whose borders are easy to read: a horizontal ramp (channel 0), a
    vertical ramp (channel 1) and a checkerboard of 4-pixel squares (channel 2).

    Along a row, zero padding drops to 0 past the border, border padding stays at the edge
    value, and reflection runs the ramp back down.

    Returns:
        Shape (1, 3, height, width), float32, values in [0, 1].
    """
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    chans = np.stack([(u + 0.5) / width, (v + 0.5) / height,
                      0.15 + 0.7 * ((u // 4 + v // 4) % 2)])
    return torch.as_tensor(chans[None], dtype=torch.float32)


def margin_grid(out_height: int, out_width: int, margin: float,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A regular sampling grid that covers the input and reaches ``margin`` past every border.

    Args:
        out_height: Rows of the output.
        out_width: Columns of the output.
        margin: How far past the borders, as a fraction of the normalised half-extent
            (0.25 reaches to +-1.25).

    Returns:
        Grid, shape (1, out_height, out_width, 2), (x, y) in normalised coordinates as
        ``grid_sample`` reads them.
    """
    if not (np.isfinite(margin) and margin >= 0):
        raise field_error("margin", margin, "must be finite and >= 0")
    lim = 1.0 + float(margin)
    gx = torch.linspace(-lim, lim, out_width, dtype=dtype)
    gy = torch.linspace(-lim, lim, out_height, dtype=dtype)
    yy, xx = torch.meshgrid(gy, gx, indexing="ij")
    return torch.stack([xx, yy], dim=-1)[None]


def margin_grid_pixels(out_height: int, out_width: int, margin: float, height: int, width: int,
                       align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """Where the columns and rows of :func:`margin_grid` sample, in input pixels.

    Returns:
        ``(u, v)``: input pixel coordinates of the output columns, shape (out_width,), and
        rows, shape (out_height,), under ``align_corners``.
    """

    g = margin_grid(out_height, out_width, margin, dtype=torch.float64)[0]  # (H_out, W_out, 2)
    uv = normalized_to_pixel(g, (width, height), align_corners=align_corners)
    return to_numpy(uv[0, :, 0]), to_numpy(uv[:, 0, 1])


def pixel_grid(height: int, width: int, align_corners: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The identity grid: every pixel centre (u, v) of a (height, width) map, normalised with
    the ``align_corners`` formula of :func:`bevviz.samplers.reference.pixel_to_normalized`.

    Returns:
        Shape (1, height, width, 2).
    """

    v, u = torch.meshgrid(torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64),
                          indexing="ij")
    return pixel_to_normalized(torch.stack([u, v], dim=-1), (width, height), align_corners)[None].to(dtype)


@dataclass(frozen=True)


class PaddingCase:
    """One (mode, padding, align_corners) combination run through two samplers.

    Attributes:
        mode, padding, align_corners: The setting.
        reference: Output of the reference sampler, shape (C, H_out, W_out).
        candidate: Output of the sampler under test, same shape.
        max_error: max |candidate - reference|.
    """

    mode: str
    padding: str
    align_corners: bool
    reference: np.ndarray
    candidate: np.ndarray
    max_error: float


def padding_cases(feature: torch.Tensor, grid: torch.Tensor, reference_fn, candidate_fn,
                  modes=("bilinear", "nearest"), paddings=("zeros", "border", "reflection"),
                  aligns=(False, True)) -> list[PaddingCase]:
    """Run both samplers over every mode x padding x align_corners combination.

    Args:
        feature: Input, shape (1, C, H, W).
        grid: Sampling grid, shape (1, H_out, W_out, 2).
        reference_fn: ``grid_sample``-like callable (the reference).
        candidate_fn: ``grid_sample``-like callable under test (e.g. gather-scatter).

    Returns:
        One :class:`PaddingCase` per combination.
    """
    check_shape(feature, (1, None, None, None), "feature")
    check_shape(grid, (1, None, None, 2), "grid")
    cases = []
    for mode in modes:
        for padding in paddings:
            for ac in aligns:
                kw = dict(mode=mode, padding_mode=padding, align_corners=ac)
                ref = to_numpy(reference_fn(feature, grid, **kw))[0]
                cand = to_numpy(candidate_fn(feature, grid, **kw))[0]
                cases.append(PaddingCase(mode, padding, ac, ref, cand,
                                         float(np.abs(cand.astype(np.float64) - ref).max())))
    return cases


def half_pixel_mismatch(feature: torch.Tensor, sample_fn, normalise_align: bool,
                        sample_align: bool) -> np.ndarray:
    """Sample a map at its own pixel centres, normalised with one formula and sampled with another.

    With matching settings the output equals the input; with a mismatch every sample
    lands up to half a pixel off (shifted towards the centre or away from it), which
    blurs and shrinks or grows the image.

    Args:
        feature: Shape (1, C, H, W).
        sample_fn: ``grid_sample``-like callable.
        normalise_align: ``align_corners`` of the formula used to build the grid.
        sample_align: ``align_corners`` the sampler is called with.

    Returns:
        Shape (C, H, W).
    """
    check_shape(feature, (1, None, None, None), "feature")
    H, W = feature.shape[-2:]
    grid = pixel_grid(H, W, normalise_align, dtype=feature.dtype)
    return to_numpy(sample_fn(feature, grid, mode="bilinear", padding_mode="zeros", align_corners=sample_align))[0]
