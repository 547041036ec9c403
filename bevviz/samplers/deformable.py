"""Deformable-conv-style sampling: a k x k tap grid around each point, plus learned offsets.

For a query point with normalised coordinate g in a feature map of size (W_f, H_f), its
position in feature pixels is ``p = ((g + 1) W_f - 1) / 2`` (align_corners=False). The
sampler reads K = k * k taps at

    p_k = p + dilation * d_k + offset_k,     d_k in {-(k-1)/2, ..., (k-1)/2}^2

and returns their MODULATED SUM ``out = sum_k m_k x(p_k)`` -- DCNv2's form. The default
modulation is ``m_k = 1 / K``, i.e. the mean, because there is no learned channel-mixing
conv after it here: a plain sum would scale features by K (9x for 3x3) and make them
incomparable with the single-tap reference, while the mean keeps unit scale and, with
kernel_size=1 and zero offsets, reduces exactly to bilinear sampling at p. Pass an explicit
``mask`` (e.g. a sigmoid, as DCNv2 does) to get DCNv2's modulated sum exactly.

Two roundings:

* ``"bilinear"``: exact bilinear interpolation with zero padding, built on
  :mod:`bevviz.samplers.gather_scatter`'s taps and gather; equal to ``F.grid_sample`` at
  the same K points (:func:`deformable_reference`) to float rounding, and differentiable
  in features, grid, offsets and mask.
* ``"floor"``: the integer-index gather of the NPU write-up this reproduces: it converts
  the normalised coordinate to an index with the ALIGN_CORNERS=TRUE formula and floors,
  ``i = floor((g_k + 1) / 2 * (W_f - 1))`` (likewise rows), then gathers one pixel (zero
  outside). Against the correct align_corners=False position ``p_k`` this is
  ``i = floor(p_k + 0.5 - (p_k + 0.5) / W_f)``: nearest-neighbour at the left/top edge,
  plain floor at the right/bottom edge; the position error ``i - p_k`` lies in
  [-1.5, 0.5] pixels with mean -0.5 (a half-pixel pull towards the top-left), and a pixel
  centre in the right half of the map reads its LEFT neighbour. See
  :func:`floor_position_error` and the measured feature deviation in the tests and
  ``bevviz.bench``. Not differentiable in positions (gradients flow to features and mask).

Convention:
    Offsets are ``(..., K, 2)`` holding (dx, dy) = (columns, rows) in FEATURE pixels, taps
    ordered row-major (dy outer, dx inner) like DCN; note torchvision's ``deform_conv2d``
    stores (dy, dx) pairs instead. Grids are normalised (x, y) with align_corners=False, as
    the pipeline produces them from the calibrated image size.
    See docs/conventions.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bevviz.aggregation import aggregate
from bevviz.checks import check_choice, check_shape, field_error, positive_int
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.gather_scatter import pair_taps

ROUNDINGS = ("bilinear", "floor")
OFFSET_SOURCES = ("zero", "random", "net")


# --------------------------------------------------------------------------- geometry

def kernel_offsets(kernel_size: int = 3, dilation: float = 1.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The base tap grid d_k * dilation.

    Args:
        kernel_size: k (odd or even; centred on the point either way).
        dilation: Spacing between taps in feature pixels.
        dtype: Output dtype.

    Returns:
        Offsets (dx, dy) in feature pixels, shape (K, 2), K = k * k, row-major (dy outer).
    """
    k = positive_int(kernel_size, "kernel_size")
    if not (math.isfinite(float(dilation)) and float(dilation) > 0):
        raise field_error("dilation", dilation, "must be finite and > 0")
    r = (torch.arange(k, dtype=dtype) - (k - 1) / 2.0) * float(dilation)
    dy, dx = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([dx.reshape(-1), dy.reshape(-1)], dim=-1)


def to_feature_pixels(grid: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Normalised (x, y) -> feature pixels (u, v), align_corners=False.

    Args:
        grid: Shape (..., 2).
        size: Feature map size (W_f, H_f).

    Returns:
        ``u = ((g + 1) W - 1) / 2``, shape (..., 2).
    """
    wh = torch.tensor(size, dtype=grid.dtype, device=grid.device)
    return ((grid + 1.0) * wh - 1.0) / 2.0


def to_normalized(pix: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Feature pixels (u, v) -> normalised (x, y), align_corners=False: ``(2u + 1) / W - 1``."""
    wh = torch.tensor(size, dtype=pix.dtype, device=pix.device)
    return (2.0 * pix + 1.0) / wh - 1.0


def tap_positions(grid: torch.Tensor, size: tuple[int, int], offsets: torch.Tensor | None = None,
                  kernel_size: int = 3, dilation: float = 1.0) -> torch.Tensor:
    """Feature-pixel positions p_k of every tap.

    Args:
        grid: Normalised points, shape (*P, 2).
        size: Feature map size (W_f, H_f).
        offsets: Learned offsets (dx, dy) in feature pixels, shape (*P, K, 2), or None.
        kernel_size: k.
        dilation: Tap spacing in feature pixels.

    Returns:
        Positions, shape (*P, K, 2), feature pixels.
    """
    base = kernel_offsets(kernel_size, dilation, grid.dtype).to(grid.device)
    pos = to_feature_pixels(grid, size).unsqueeze(-2) + base
    if offsets is not None:
        pos = pos + offsets.to(grid.dtype)
    return pos


def floor_indices(pos: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The NPU write-up's integer index: align_corners=True normalisation, then floor.

    Args:
        pos: Correct (align_corners=False) feature-pixel positions, shape (..., 2).
        size: Feature map size (W_f, H_f).

    Returns:
        (index, inside): integer (column, row), shape (..., 2), int64; inside the map,
        shape (...), bool.

    Convention:
        ``g = (2p + 1) / W - 1`` then ``i = floor((g + 1) / 2 * (W - 1))``.
    """
    g = to_normalized(pos, size)
    wh1 = torch.tensor([size[0] - 1, size[1] - 1], dtype=pos.dtype, device=pos.device)
    idx = torch.floor((g + 1.0) / 2.0 * wh1).to(torch.int64)
    wh = torch.tensor(size, dtype=torch.int64, device=pos.device)
    inside = ((idx >= 0) & (idx < wh)).all(dim=-1)
    return idx, inside


def floor_position_error(size: int, samples: int = 100001) -> dict[str, float]:
    """Position error of the floor variant along one axis of ``size`` pixels.

    Args:
        size: Feature map width W_f (or height).
        samples: Number of uniformly spaced positions over the map's extent.

    Returns:
        ``mean``, ``min``, ``max`` and ``mean_abs`` of ``i - p`` in feature pixels for p
        uniform over [-0.5, W_f - 0.5], and ``centre_shift_fraction``: the fraction of pixel
        centres that read a neighbour instead of themselves.
    """
    W = positive_int(size, "size")
    p = torch.linspace(-0.5, W - 0.5 - 1e-9, samples, dtype=torch.float64)
    pos = torch.stack([p, torch.zeros_like(p)], dim=-1)
    idx, _ = floor_indices(pos, (W, 1 if W == 1 else 2))
    err = idx[:, 0].to(torch.float64) - p
    centres = torch.arange(W, dtype=torch.float64)
    cidx, _ = floor_indices(torch.stack([centres, torch.zeros_like(centres)], -1), (W, 2))
    return {
        "mean": float(err.mean()), "min": float(err.min()), "max": float(err.max()),
        "mean_abs": float(err.abs().mean()),
        "centre_shift_fraction": float((cidx[:, 0] != centres.to(torch.int64)).double().mean()),
    }


# --------------------------------------------------------------------------- offsets

@dataclass(frozen=True)
class DeformableConfig:
    """Settings of the deformable sampler in the pipeline.

    Attributes:
        kernel_size: k (K = k * k taps).
        dilation: Tap spacing in feature pixels.
        rounding: ``"bilinear"`` (exact) or ``"floor"`` (the NPU write-up's integer gather).
        offsets: Offset source: ``"zero"``, ``"random"`` (a seeded N(0, scale^2) field) or
            ``"net"`` (:class:`OffsetNet`: two 3x3 convs, tanh x scale).
        offset_scale: Offset scale in feature pixels (std for "random", tanh amplitude for
            "net").
        modulated: Also derive a modulation mask from the source (``m_k = 2 sigmoid(l_k) / K``,
            which is 1 / K at l_k = 0); otherwise ``m_k = 1 / K``.
        seed: Seed of the random field / the offset network's weights.
    """

    kernel_size: int = 3
    dilation: float = 1.0
    rounding: str = "bilinear"
    offsets: str = "zero"
    offset_scale: float = 1.0
    modulated: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        positive_int(self.kernel_size, "kernel_size")
        kernel_offsets(self.kernel_size, self.dilation)
        check_choice(self.rounding, ROUNDINGS, "rounding")
        check_choice(self.offsets, OFFSET_SOURCES, "offsets")
        if not (math.isfinite(float(self.offset_scale)) and float(self.offset_scale) >= 0):
            raise field_error("offset_scale", self.offset_scale, "must be finite and >= 0")

    @property
    def num_taps(self) -> int:
        """K = kernel_size ** 2."""
        return int(self.kernel_size) ** 2


class OffsetNet:
    """A small seeded offset network: 3x3 conv -> ReLU -> 3x3 conv -> tanh x scale.

    As in the deformable-attention write-ups, the network predicts a RESIDUAL to the
    geometric projection: the sample positions are ``p + d_k + offset_k`` where p comes from
    the calibrated projection, so zero output means pure geometry.

    Args:
        in_channels: Feature channels C.
        kernel_size: Sampler kernel size k (the net predicts 2 k^2 offset channels, plus
            k^2 mask logits when ``modulated``).
        hidden: Hidden channels.
        scale: tanh amplitude in feature pixels.
        modulated: Also predict mask logits (not squashed by tanh).
        seed: Weight seed (``torch.Generator``); weights are N(0, 1 / (9 C_in)).

    Attributes:
        weights: [(w1 (hidden, C, 3, 3), b1 (hidden,)), (w2 (out, hidden, 3, 3), b2 (out,))],
            float32; set ``requires_grad`` on them to train.
    """

    def __init__(self, in_channels: int, kernel_size: int = 3, hidden: int = 32, scale: float = 1.0,
                 modulated: bool = False, seed: int = 0) -> None:
        C = positive_int(in_channels, "in_channels")
        K = positive_int(kernel_size, "kernel_size") ** 2
        hidden = positive_int(hidden, "hidden")
        gen = torch.Generator().manual_seed(int(seed))
        out = 3 * K if modulated else 2 * K
        self.num_taps, self.scale, self.modulated = K, float(scale), bool(modulated)
        self.weights = [
            (torch.randn(hidden, C, 3, 3, generator=gen) / math.sqrt(9 * C), torch.zeros(hidden)),
            (torch.randn(out, hidden, 3, 3, generator=gen) / math.sqrt(9 * hidden), torch.zeros(out)),
        ]

    def __call__(self, features: torch.Tensor) -> torch.Tensor:
        """Offset field of a feature map.

        Args:
            features: Shape (N, C, H_f, W_f).

        Returns:
            Field, shape (N, 2K (+K), H_f, W_f): channels [2k, 2k + 1] are (dx, dy) of tap
            k in feature pixels (in (-scale, scale)); then K mask logits when modulated.
        """
        (w1, b1), (w2, b2) = self.weights
        h = F.relu(F.conv2d(features, w1.to(features.dtype), b1.to(features.dtype), padding=1))
        y = F.conv2d(h, w2.to(features.dtype), b2.to(features.dtype), padding=1)
        off = torch.tanh(y[:, : 2 * self.num_taps]) * self.scale
        return torch.cat([off, y[:, 2 * self.num_taps:]], dim=1) if self.modulated else off


def offset_field(features: torch.Tensor, cfg: DeformableConfig) -> torch.Tensor | None:
    """The offset (and mask-logit) field of ``cfg.offsets`` for a feature map.

    Args:
        features: Shape (N, C, H_f, W_f).
        cfg: Sampler settings.

    Returns:
        None for zero offsets without modulation, else a field of shape
        (N, 2K (+K when modulated), H_f, W_f) in the features' dtype.
    """
    N, C, H, W = features.shape
    K = cfg.num_taps
    chans = 3 * K if cfg.modulated else 2 * K
    if cfg.offsets == "zero":
        return None if not cfg.modulated else features.new_zeros(N, chans, H, W)
    if cfg.offsets == "random":
        gen = torch.Generator().manual_seed(int(cfg.seed))
        field = torch.randn(N, chans, H, W, generator=gen, dtype=torch.float64)
        field[:, : 2 * K] *= float(cfg.offset_scale)
        return field.to(features.dtype)
    net = OffsetNet(C, cfg.kernel_size, scale=cfg.offset_scale, modulated=cfg.modulated, seed=cfg.seed)
    return net(features)


def split_field(samples: torch.Tensor, K: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Split sampled field values into offsets and mask.

    Args:
        samples: Field values at points, shape (*P, 2K) or (*P, 3K).
        K: Number of taps.

    Returns:
        (offsets, mask): offsets (*P, K, 2); mask (*P, K) = 2 sigmoid(logits) / K, or None.
    """
    off = samples[..., : 2 * K].reshape(*samples.shape[:-1], K, 2)
    if samples.shape[-1] == 3 * K:
        return off, 2.0 * torch.sigmoid(samples[..., 2 * K:]) / K
    return off, None


# --------------------------------------------------------------------------- sampling

def sample_pairs(features: torch.Tensor, camera: torch.Tensor, pos: torch.Tensor,
                 mask: torch.Tensor | None = None, rounding: str = "bilinear") -> torch.Tensor:
    """Modulated K-tap sums for a list of (camera, point) pairs.

    Both roundings end in gather_scatter's :func:`~bevviz.samplers.gather_scatter.gather`
    (one weighted row gather over all taps); "bilinear" gets its indices and weights from
    its bilinear taps, "floor" from :func:`floor_indices` with weight ``m_k``.

    Args:
        features: Shape (N_cam, C, H_f, W_f).
        camera: Camera of each pair, shape (M,), integer.
        pos: Tap positions in feature pixels, shape (M, K, 2).
        mask: Modulation, shape (M, K), or None for 1 / K.
        rounding: ``"bilinear"`` or ``"floor"``.

    Returns:
        ``sum_k m_k x_camera(p_k)``, shape (M, C), the features' dtype.
    """
    check_choice(rounding, ROUNDINGS, "rounding")
    N, C, H, W = features.shape
    M, K, _ = pos.shape
    if M == 0:
        return features.new_zeros(0, C)
    dtype = features.dtype
    m = pos.new_full((M, K), 1.0 / K) if mask is None else mask
    m = m.to(dtype)
    if rounding == "floor":
        idtype = gs.index_dtype(N * H * W)
        idx, inside = floor_indices(pos, (W, H))
        flat = idx[..., 1] * W + idx[..., 0] + camera.to(torch.int64).view(M, 1) * (H * W)
        flat = torch.where(inside, flat, N * H * W).to(idtype)
        taps = gs.Taps(indices=flat.unsqueeze(0), weights=(m * inside.to(dtype)).unsqueeze(0),
                       valid=inside.unsqueeze(0), feature_shape=(N, H, W))
        # (mode stays "bilinear": gather ignores the weights of "nearest" taps, and these
        # carry the modulation m_k.)
        return gs.gather(features, taps)[0]
    cam_k = camera.view(M, 1).expand(M, K).reshape(-1)
    # Taps from the normalised coordinate in the features' dtype -- the exact value and
    # arithmetic F.grid_sample sees in the reference -- rather than from float32 pixels.
    g = to_normalized(pos, (W, H)).to(dtype).reshape(M * K, 2)
    taps = pair_taps(cam_k, g, (N, H, W), coords="normalized")
    w = (taps.weights.reshape(M, K, 4) * m.unsqueeze(-1)).reshape(1, M, K * 4)
    taps = gs.Taps(indices=taps.indices.reshape(1, M, K * 4), weights=w,
                   valid=taps.valid.reshape(1, M, K * 4), feature_shape=(N, H, W))
    return gs.gather(features, taps)[0]


def deformable_sample(features: torch.Tensor, grid: torch.Tensor, offsets: torch.Tensor | None = None,
                      mask: torch.Tensor | None = None, kernel_size: int = 3, dilation: float = 1.0,
                      rounding: str = "bilinear") -> torch.Tensor:
    """Deformable K-tap sampling at normalised points, without ``F.grid_sample``.

    Args:
        features: Shape (N, C, H_f, W_f), floating point.
        grid: Normalised (x, y) points, shape (N, *P, 2), align_corners=False.
        offsets: (dx, dy) per tap in feature pixels, shape (N, *P, K, 2), or None (zero).
        mask: Modulation m_k, shape (N, *P, K), or None (1 / K, the mean).
        kernel_size: k, K = k * k.
        dilation: Tap spacing in feature pixels.
        rounding: ``"bilinear"`` (exact, differentiable) or ``"floor"`` (NPU form).

    Returns:
        ``sum_k m_k x(p_k)``, shape (N, C, *P).

    Convention:
        See the module docstring.
    """
    N, C, H, W, P, K = _check_args(features, grid, offsets, mask, kernel_size, rounding)
    pos = tap_positions(grid.reshape(N, -1, 2), (W, H),
                        None if offsets is None else offsets.reshape(N, -1, K, 2), kernel_size, dilation)
    M = pos.shape[1]
    camera = torch.arange(N).repeat_interleave(M)
    m = None if mask is None else mask.reshape(N * M, K)
    out = sample_pairs(features, camera, pos.reshape(N * M, K, 2), m, rounding)
    return out.view(N, M, C).permute(0, 2, 1).reshape(N, C, *P)


def deformable_reference(features: torch.Tensor, grid: torch.Tensor, offsets: torch.Tensor | None = None,
                         mask: torch.Tensor | None = None, kernel_size: int = 3,
                         dilation: float = 1.0) -> torch.Tensor:
    """The same K taps sampled with ``F.grid_sample`` (bilinear, zeros, align_corners=False).

    Args and Returns: as :func:`deformable_sample` (no rounding choice: this is the exact
    reference both roundings are compared with).
    """
    N, C, H, W, P, K = _check_args(features, grid, offsets, mask, kernel_size, "bilinear")
    pos = tap_positions(grid.reshape(N, -1, 2), (W, H),
                        None if offsets is None else offsets.reshape(N, -1, K, 2), kernel_size, dilation)
    g = to_normalized(pos, (W, H)).to(features.dtype)  # (N, M, K, 2)
    samples = F.grid_sample(features, g, mode="bilinear", padding_mode="zeros", align_corners=False)
    m = features.new_full((N, 1, g.shape[1], K), 1.0 / K) if mask is None else mask.reshape(N, 1, -1, K)
    return (samples * m.to(features.dtype)).sum(-1).reshape(N, C, *P)


def _check_args(features, grid, offsets, mask, kernel_size, rounding):
    if not isinstance(features, torch.Tensor) or not features.is_floating_point():
        raise field_error("features", type(features).__name__, "must be a floating torch.Tensor (N, C, H, W)")
    dims = check_shape(features, ("N", "C", "H", "W"), "features")
    if not isinstance(grid, torch.Tensor) or not grid.is_floating_point():
        raise field_error("grid", type(grid).__name__, "must be a floating torch.Tensor (N, *P, 2)")
    check_shape(grid, ("...", 2), "grid")
    if grid.dim() < 2 or grid.shape[0] != dims["N"]:
        raise field_error("grid", tuple(grid.shape), f"must be (N={dims['N']}, *P, 2)")
    check_choice(rounding, ROUNDINGS, "rounding")
    K = positive_int(kernel_size, "kernel_size") ** 2
    P = tuple(grid.shape[1:-1])
    if offsets is not None:
        check_shape(offsets, (dims["N"], *P, K, 2), "offsets")
    if mask is not None:
        check_shape(mask, (dims["N"], *P, K), "mask")
    return dims["N"], dims["C"], dims["H"], dims["W"], P, K


# --------------------------------------------------------------------------- BEV pipeline

def _check_bev_args(features, grid, weights, cfg):
    if not isinstance(cfg, DeformableConfig):
        raise field_error("deformable", type(cfg).__name__, "must be a DeformableConfig")
    dims = check_shape(features, ("N", "C", "H", "W"), "features")
    n = dims["N"]
    g = check_shape(grid, (n, "Z", "Hb", "Wb", 2), "grid")
    check_shape(weights, (n, g["Z"], g["Hb"], g["Wb"]), "weights")
    return n, dims["C"], dims["H"], dims["W"], g["Z"], g["Hb"], g["Wb"]


def deformable_bev(features: torch.Tensor, grid: torch.Tensor, weights: torch.Tensor,
                   cfg: DeformableConfig = DeformableConfig(), per_camera: bool = False) -> torch.Tensor:
    """BEV features with the deformable sampler over the (camera, point) pairs of nonzero weight.

    Args:
        features: Shape (N_cam, C, H_f, W_f).
        grid: Normalised points per camera, shape (N_cam, Z, H_bev, W_bev, 2).
        weights: Aggregation weights w[n, z, c] (see :mod:`bevviz.aggregation`), shape
            (N_cam, Z, H_bev, W_bev); only pairs with w != 0 are sampled.
        cfg: Sampler settings (kernel, rounding, offset source).
        per_camera: Keep cameras apart.

    Returns:
        ``sum_{n, z} w[n, z, c] s[n, z, c]`` with s the modulated K-tap sum, shape
        (C, H_bev, W_bev), or (N_cam, C, H_bev, W_bev) with ``per_camera``.

    Convention:
        The offset field (:func:`offset_field`) is read at each point's geometric position
        with the same rounding as the features; the taps sit at ``p + d_k + offset_k``.
    """
    N, C, H, W, Z, Hb, Wb = _check_bev_args(features, grid, weights, cfg)
    HW = Hb * Wb
    flat_w = weights.reshape(-1)
    pair = torch.nonzero(flat_w).squeeze(1)
    cam = torch.div(pair, Z * HW, rounding_mode="floor")
    cell = pair % HW
    p = to_feature_pixels(grid.reshape(-1, 2).index_select(0, pair), (W, H))  # (M, 2)
    K = cfg.num_taps
    field = offset_field(features, cfg)
    offsets = mask = None
    if field is not None:
        fvals = sample_pairs(field, cam, p.unsqueeze(1), p.new_ones(len(pair), 1), cfg.rounding)
        offsets, mask = split_field(fvals, K)
    pos = p.unsqueeze(1) + kernel_offsets(cfg.kernel_size, cfg.dilation, p.dtype)
    if offsets is not None:
        pos = pos + offsets.to(pos.dtype)
    vals = sample_pairs(features, cam, pos, mask, cfg.rounding)  # (M, C)
    target = cam * HW + cell if per_camera else cell
    out, _ = gs.scatter_add_points(vals, target, N * HW if per_camera else HW,
                                   flat_w.index_select(0, pair).to(vals.dtype))
    if per_camera:
        return out.view(N, Hb, Wb, C).permute(0, 3, 1, 2)
    return out.t().reshape(C, Hb, Wb)


def deformable_bev_reference(features: torch.Tensor, grid: torch.Tensor, weights: torch.Tensor,
                             cfg: DeformableConfig = DeformableConfig(), per_camera: bool = False) -> torch.Tensor:
    """:func:`deformable_bev` with every camera and point sampled densely by ``F.grid_sample``.

    The offset field is read with ``F.grid_sample`` (bilinear) at every point, then each of
    the K taps is sampled with ``F.grid_sample`` and the modulated sum is aggregated with
    ``weights``. This is the exact reference for BOTH roundings (``cfg.rounding`` is
    ignored): the floor variant's deviation is measured against it.

    Args and Returns: as :func:`deformable_bev`.
    """
    N, C, H, W, Z, Hb, Wb = _check_bev_args(features, grid, weights, cfg)
    K = cfg.num_taps
    g = grid.reshape(N, Z * Hb, Wb, 2)
    p = to_feature_pixels(g, (W, H))  # (N, Z*Hb, Wb, 2) float64
    field = offset_field(features, cfg)
    offsets = mask = None
    if field is not None:
        fs = F.grid_sample(field, g.to(field.dtype), mode="bilinear", padding_mode="zeros", align_corners=False)
        offsets, mask = split_field(fs.permute(0, 2, 3, 1), K)  # (N, Z*Hb, Wb, K, 2), (.., K)
    base = kernel_offsets(cfg.kernel_size, cfg.dilation, p.dtype)
    acc = None
    for k in range(K):
        pos = p + base[k]
        if offsets is not None:
            pos = pos + offsets[..., k, :].to(pos.dtype)
        s = F.grid_sample(features, to_normalized(pos, (W, H)).to(features.dtype), mode="bilinear",
                          padding_mode="zeros", align_corners=False)
        m = (1.0 / K) if mask is None else mask[..., k].unsqueeze(1).to(features.dtype)
        acc = s * m if acc is None else acc + s * m
    return aggregate(acc.reshape(N, C, Z, Hb, Wb), weights, per_camera)
