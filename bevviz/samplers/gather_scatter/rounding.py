"""Index rounding: continuous sampling coordinates exactly as PyTorch's CPU kernel rounds them.

Unnormalisation, the padding modes' clipping and reflection, and the fused multiply-add
that decides which side of a tie a ``nearest`` tap lands on. The tap functions
(:mod:`bevviz.samplers.gather_scatter.taps`) build on these.

Matching PyTorch:
    The arithmetic follows PyTorch's vectorised CPU kernel
    (``aten/src/ATen/native/cpu/GridSamplerKernel.cpp``) operation by operation, so the
    discrete decisions (which taps, ``nearest`` rounding ties, validity) are identical:

    * unnormalise ``x = (g + 1) * s - 0.5`` with ``s = W / 2`` (``align_corners=False``)
      or ``x = (g + 1) * (W - 1) / 2`` (``True``);
    * ``border`` clips to ``[0, W - 1]`` and maps NaN to 0 (the kernel's operand order of
      ``max`` does that); ``reflection`` reflects about ``[-0.5, W - 0.5]``
      (``align_corners=False``) or ``[0, W - 1]`` (``True``, everything maps to 0 when
      ``W == 1``) with ``trunc``-based folding, then clips the same way;
    * ``bilinear`` and ``nearest`` pad the continuous coordinate; ``bicubic`` pads each of
      its 4 integer tap coordinates per axis (``get_value_bounded``), cubic ``A = -0.75``;
    * ``nearest`` rounds half to even (``torch.round``, like ``nearbyint``);
    * a tap is valid when ``-1 < tap < W`` (NaN taps are invalid); invalid taps read 0, and
      a NaN weight times that 0 is NaN, which is how NaN/inf grid values give NaN under
      ``zeros`` padding exactly as in PyTorch.

    PyTorch's AVX2/AVX512 kernels are compiled with fused multiply-add, which rounds
    ``(g + 1) * s - 0.5`` and the reflection remainder once instead of twice. This module
    reproduces that (:data:`FUSED_MULTIPLY_ADD`, detected from
    ``torch.backends.cpu.get_cpu_capability()``) so that ``nearest`` ties land on the same
    side; the fused result is computed exactly (float32 via float64; float64 with
    error-free Dekker products).

Where it differs from PyTorch (rounding only, all within 1e-5 float32 / 1e-10 float64):
    * weights are products ``w_y * w_x`` summed over taps in one chain; PyTorch's bicubic
      sums rows first, and its compiled code may fuse other products (cubic coefficients,
      the final weighted sum), which is not reproduced;
    * the grid gradient at NaN/inf grid values is not matched (PyTorch's backward keeps the
      NaN coordinate and gathers from outside the image there); finite grids match;
    * the semantics reproduced are those of the CPU kernel (CUDA's clips and reflects with
      slightly different formulas); the code runs on any device.


Convention:
    Normalised ``(x, y)`` as ``F.grid_sample`` reads them; pixel centres at integers. See
    docs/conventions.md.
"""

from __future__ import annotations

import platform

import torch

__all__ = [
    "FUSED_MULTIPLY_ADD", "apply_padding", "constant_like", "tracing", "unnormalize"
]


def _detect_fused_multiply_add() -> bool:
    """Whether PyTorch's CPU grid-sample kernel in use rounds ``a * b + c`` once (FMA).

    Verified on x86-64: the ``AVX2`` and ``AVX512`` kernels fuse, ``DEFAULT`` does not.
    Other architectures are assumed to fuse unless they report ``DEFAULT`` on x86.
    """
    try:
        capability = str(torch.backends.cpu.get_cpu_capability()).upper()
    except AttributeError:  # pragma: no cover - very old torch
        return False
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686", "x86"):
        return capability != "DEFAULT"
    return True


#: True when this process's PyTorch CPU kernel uses fused multiply-add (see module doc).
FUSED_MULTIPLY_ADD: bool = _detect_fused_multiply_add()

_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp splitting constant for float64


def _split(a):
    """Veltkamp split: ``a == hi + lo`` exactly with each half of 26 bits (float64)."""
    t = a * _SPLIT
    hi = t - (t - a)
    return hi, a - hi


def _fused_value(a: torch.Tensor, b: float, c: torch.Tensor | float) -> torch.Tensor:
    """``a * b + c`` rounded once (no autograd), as an FMA instruction computes it.

    float32 (and narrower): the product of a float32 and ``b`` (a half-integer below
    ``2**28``) is exact in float64, so one float64 add and one rounding back suffice (a
    double rounding can in principle differ in the last bit; it needs the float64 sum to
    land exactly on a float32 tie, which the inputs here do not produce).
    float64: Dekker's error-free product and Knuth's two-sum, then one final rounding.
    """
    if a.dtype != torch.float64:
        c64 = c.double() if isinstance(c, torch.Tensor) else c
        return (a.double() * b + c64).to(a.dtype)
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi = b * _SPLIT - (b * _SPLIT - b)
    b_lo = b - b_hi
    err_p = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    s = p + c
    bb = s - p
    err_s = (p - (s - bb)) + (c - bb)
    out = s + (err_s + err_p)
    # Overflow in the split (|a| > ~1e300) or non-finite inputs: the plain value is right.
    return torch.where(torch.isfinite(out), out, s)


def _mul_add(a: torch.Tensor, b: float, c: torch.Tensor | float) -> torch.Tensor:
    """``a * b + c`` rounded like PyTorch's CPU kernel (fused when it fuses).

    The value is the fused one; the gradient is that of the plain expression. While an
    exporter traces, the plain expression is used: the exported graph is meant for other
    backends, whose rounding this cannot know, and stays free of float64 casts.
    """
    if not FUSED_MULTIPLY_ADD or tracing():
        return a * b + c
    c_is_tensor = isinstance(c, torch.Tensor)
    with torch.no_grad():
        fused = _fused_value(a.detach(), b, c.detach() if c_is_tensor else c)
    if not (torch.is_grad_enabled() and (a.requires_grad or (c_is_tensor and c.requires_grad))):
        return fused
    plain = a * b + c
    # fused + (plain - plain) keeps fused's value exactly and plain's gradient.
    return fused + torch.where(torch.isfinite(plain), plain - plain.detach(), 0.0)


def tracing() -> bool:
    """Whether an exporter / compiler is tracing this call.

    Then every op is out-of-place and the gather is one block: in-place writes into
    slices would be exported as ScatterND nodes, and the block loop would unroll.
    """
    return (
        torch.jit.is_tracing()
        or torch.onnx.is_in_onnx_export()
        or torch.compiler.is_compiling()
    )


def constant_like(x: torch.Tensor, value: float) -> torch.Tensor:
    """A tensor of ``value`` shaped like ``x``; with zero gradient w.r.t. ``x`` if it has one.

    PyTorch returns a zero (not missing) gradient for the grid in these cases, e.g. in
    ``nearest`` mode, so the graph keeps a zero-gradient link to ``x`` (NaN-safe).
    """
    if x.requires_grad:
        return torch.where(torch.zeros_like(x, dtype=torch.bool), x, value)
    return torch.full_like(x, value)


def unnormalize(g: torch.Tensor, size: int, align_corners: bool) -> torch.Tensor:
    """Normalised coordinate -> pixel coordinate, rounded as PyTorch's CPU kernel does."""
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return _mul_add(g + 1, size / 2, -0.5)


def _clip(x: torch.Tensor, size: int) -> torch.Tensor:
    """Clip to ``[0, size - 1]``; NaN -> 0. Zero gradient at and beyond both borders.

    PyTorch's kernel computes ``min(size - 1, max(x, 0))`` with an operand order that
    turns NaN into 0, and its backward treats the borders themselves as outside (zero
    gradient there). ``clamp``'s gradient includes the borders, so the autograd path uses
    ``where`` (same values, exclusive borders); the no-grad path uses the much faster
    ``nan_to_num`` + ``clamp`` (inf -> largest float -> clamped like PyTorch).
    """
    if x.requires_grad:
        x = torch.where(x > 0, x, 0.0)
        return torch.where(x < size - 1, x, float(size - 1))
    return torch.nan_to_num(x, nan=0.0).clamp_(0, size - 1)


def _reflect(x: torch.Tensor, size: int, align_corners: bool) -> torch.Tensor:
    """Reflect about the image borders until inside (before clipping), like PyTorch."""
    if align_corners:
        if size <= 1:
            return constant_like(x, 0.0)
        twice_span, low = 2.0 * (size - 1), 0.0
        dist = x.abs()
    else:
        twice_span, low = 2.0 * size, -0.5
        dist = (x - low).abs()
    flips = torch.trunc(dist / twice_span).detach()
    extra = _mul_add(flips, -twice_span, dist)
    # min() propagates NaN like PyTorch's; at a tie (the far border) both sides are equal
    # and clipping zeroes the gradient there anyway.
    folded = torch.minimum(extra, twice_span - extra)
    return folded + low if low else folded


def apply_padding(x: torch.Tensor, size: int, padding_mode: str, align_corners: bool) -> torch.Tensor:
    """Apply ``padding_mode`` to pixel coordinates (``compute_coordinates`` in PyTorch)."""
    if padding_mode == "border":
        return _clip(x, size)
    if padding_mode == "reflection":
        return _clip(_reflect(x, size, align_corners), size)
    return x
