"""Multi-camera BEV features with any sampler and one hit-count normalisation.

Every sampler implements the SAME aggregation, so they compare to 1e-5:

    v[n, z, c]  in {0, 1}   point z of BEV cell c is valid in camera n (in front, in image)
    s[n, z, c]  in R^C      the feature the sampler reads for that point (bilinear at its
                            projection; the deformable sampler's K-tap modulated sum)
    cnt[n, c]   = sum_z v[n, z, c]                      valid pillar points in camera n
    seen[n, c]  = cnt[n, c] > 0                         camera n sees cell c
    P[n, c]     = sum_z v[n, z, c] s[n, z, c] / max(cnt[n, c], 1)      (pillar mean)
    hits[c]     = sum_n seen[n, c]
    overlap="mean" (default, BEVFormer's spatial cross-attention normalisation):
        out[c]  = sum_n seen[n, c] P[n, c] / max(hits[c], 1)
    overlap="first_hit":  out[c] = P[n*, c], n* the FIRST camera in rig order with seen
    overlap="last_write": out[c] = P[n*, c], n* the LAST camera in rig order with seen
    (out[c] = 0 where no camera sees c.)

Equivalently ``out[c] = sum_{n, z} w[n, z, c] s[n, z, c]`` with the per-point weight
``w = v / max(cnt, 1) * a[n, c]`` where ``a = seen / max(hits, 1)`` ("mean") or the one-hot
of n* (``first_hit`` / ``last_write``). :func:`point_weights` computes ``w`` once and every
sampler uses it; the lookup table bakes it in.

Why these choices: BEVFormer's SCA keeps, per camera, the queries with at least one valid
pillar point (``bev_mask.sum(-1) > 0``), sums the camera slots and divides by the number of
cameras that see the query, clamped to 1 -- that is ``hits`` and the "mean" policy here.
Inside a camera BEVFormer lets learned attention weights combine the Z points (invalid ones
read zeros through grid_sample's padding); with no learned weights the natural stand-in is
the mean over the pillar's VALID points, so a cell seen by only its ground point is not
darkened by its out-of-image points. Fast-BEV's two implementations resolve camera overlap
differently (its LUT keeps one camera per voxel, its scatter loop overwrites with the last
camera), hence ``first_hit`` and ``last_write``; they differ from "mean" only where
``hits >= 2``.

Convention:
    BEV points are ``BEVGrid.points()`` (row 0 = front, column 0 = left). A point's pixel
    (u, v) in camera n is normalised with the camera's IMAGE size (W, H) --
    ``image_size``, the rig's calibrated size by default -- as ``g = (2u + 1) / W - 1``,
    ``(2v + 1) / H - 1`` and the feature map (the image resized to H_f x W_f, see
    :mod:`bevviz.features`) is sampled at g with ``align_corners=False`` and zero padding.
    Validity uses the same ``image_size`` (``bounds`` as in :mod:`bevviz.projection`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.projection import BOUNDS, project_with
from bevviz.shapes import check_choice, check_shape, field_error

SAMPLERS = ("grid_sample", "gather_scatter", "deformable", "lut")
OVERLAPS = ("mean", "first_hit", "last_write")


@dataclass
class BEVResult:
    """BEV features and how they were made.

    With ``sampler="lut"`` the masks are the (cached) table's own tensors: read-only.

    Attributes:
        features: BEV features, shape (C, H_bev, W_bev), the features' dtype.
        hits: Number of cameras that see each cell, shape (H_bev, W_bev), int64.
        valid: Camera n sees cell c (>= 1 valid pillar point), shape (N_cam, H_bev, W_bev), bool.
        point_valid: Point validity, shape (N_cam, Z, H_bev, W_bev), bool.
        timings: Stage name -> seconds (``"geometry"``, ``"weights"``, ``"sample"``, ...,
            ``"total"``).
        sampler: Sampler name.
        overlap: Overlap policy.
        per_camera: Pillar means P[n, c], shape (N_cam, C, H_bev, W_bev), or None unless
            requested (zero where the camera does not see the cell).
    """

    features: torch.Tensor
    hits: torch.Tensor
    valid: torch.Tensor
    point_valid: torch.Tensor
    timings: dict[str, float]
    sampler: str
    overlap: str
    per_camera: torch.Tensor | None = None


@dataclass(frozen=True)
class BEVGeometry:
    """Where the BEV points land in every camera (pure geometry, no features).

    Attributes:
        grid: Normalised sampling coordinates (x, y), shape (N_cam, Z, H_bev, W_bev, 2),
            float64 (see the module Convention).
        uv: Pixel coordinates, shape (N_cam, Z, H_bev, W_bev, 2), float64.
        valid: Point validity, shape (N_cam, Z, H_bev, W_bev), bool.
        image_size: Image sizes (W, H) used for normalisation and validity, shape (N_cam, 2),
            int64.
    """

    grid: torch.Tensor
    uv: torch.Tensor
    valid: torch.Tensor
    image_size: torch.Tensor


def resolve_image_size(rig: Rig, image_size: Any = None) -> torch.Tensor:
    """Image sizes (W, H) per camera.

    Args:
        rig: The rig (N_cam cameras).
        image_size: None (the rig's calibrated sizes), one (W, H) for every camera, or a
            per-camera array of shape (N_cam, 2).

    Returns:
        Sizes, shape (N_cam, 2), int64.

    Raises:
        ValueError: wrong shape, non-integer or non-positive sizes.
    """
    if image_size is None:
        return rig.image_sizes()
    try:
        t = torch.as_tensor(image_size, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise field_error("image_size", image_size, "must be (W, H) or (N_cam, 2) numbers") from None
    if t.dim() == 1:
        check_shape(t, (2,), "image_size")
        t = t.view(1, 2).expand(len(rig), 2)
    check_shape(t, (len(rig), 2), "image_size")
    if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()) or bool((t != t.round()).any()):
        raise field_error("image_size", image_size, "sizes must be positive integers")
    return t.to(torch.int64).contiguous()


def bev_geometry(rig: Rig, grid: BEVGrid, image_size: Any = None, eps: float = 1e-5,
                 bounds: str = "pixel") -> BEVGeometry:
    """Project the grid's points into every camera and normalise them (float64).

    Args:
        rig: The rig (N_cam cameras).
        grid: The BEV grid (Z points per pillar, H_bev x W_bev cells).
        image_size: See :func:`resolve_image_size`.
        eps: Minimum depth of a valid point (metres).
        bounds: ``"pixel"`` or ``"bevformer"`` (see :mod:`bevviz.projection`).

    Returns:
        :class:`BEVGeometry` with shapes (N_cam, Z, H_bev, W_bev, ...).

    Convention:
        ``g = (2u + 1) / W - 1`` with W the image width of ``image_size`` (likewise v, H).
    """
    if not isinstance(grid, BEVGrid):
        raise field_error("grid", type(grid).__name__, "must be a BEVGrid")
    sizes = resolve_image_size(rig, image_size)
    proj = project_with(grid.points(torch.float64), rig.intrinsics(), rig.cam_from_ego(), sizes,
                        eps=eps, bounds=bounds)
    wh = sizes.to(torch.float64).view(len(rig), 1, 1, 1, 2)
    g = (2.0 * proj.uv + 1.0) / wh - 1.0
    return BEVGeometry(grid=g, uv=proj.uv, valid=proj.valid, image_size=sizes)


def point_weights(valid: torch.Tensor, overlap: str = "mean") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The aggregation weights ``w[n, z, c]`` of the module docstring.

    Args:
        valid: Point validity v, shape (N_cam, Z, H_bev, W_bev), bool.
        overlap: ``"mean"``, ``"first_hit"`` or ``"last_write"``.

    Returns:
        (weights, hits, seen): weights w, shape (N_cam, Z, H_bev, W_bev), float64, zero
        where a point is invalid or its camera is not the chosen one; hits, shape
        (H_bev, W_bev), int64; seen, shape (N_cam, H_bev, W_bev), bool.
    """
    check_choice(overlap, OVERLAPS, "overlap")
    check_shape(valid, (None, None, None, None), "valid")
    v = valid.to(torch.float64)
    cnt = v.sum(dim=1)  # (N, H, W)
    seen = cnt > 0
    hits = seen.sum(dim=0)  # (H, W)
    if overlap == "mean":
        cam_w = seen.to(torch.float64) / hits.clamp(min=1).to(torch.float64)
    else:
        n = valid.shape[0]
        order = torch.arange(n, dtype=torch.int64).view(n, 1, 1)
        if overlap == "first_hit":
            chosen = torch.where(seen, order, n).amin(dim=0)
        else:
            chosen = torch.where(seen, order, -1).amax(dim=0)
        cam_w = (order == chosen.unsqueeze(0)).to(torch.float64)
    w = v / cnt.clamp(min=1).unsqueeze(1) * cam_w.unsqueeze(1)
    return w, hits, seen


def aggregate(samples: torch.Tensor, weights: torch.Tensor, per_camera: bool = False) -> torch.Tensor:
    """Apply the aggregation to dense per-point samples.

    Args:
        samples: s[n, z, c], shape (N_cam, C, Z, H_bev, W_bev).
        weights: w[n, z, c] from :func:`point_weights`, shape (N_cam, Z, H_bev, W_bev).
        per_camera: Sum over z only (keep cameras apart).

    Returns:
        BEV features ``sum_{n, z} w s``, shape (C, H_bev, W_bev), or with ``per_camera``
        ``sum_z w s``, shape (N_cam, C, H_bev, W_bev); the samples' dtype.
    """
    n, c, z, h, w = samples.shape
    check_shape(weights, (n, z, h, w), "weights")
    wt = weights.to(samples.dtype).reshape(n, z, 1, h * w)
    s = samples.reshape(n, c, z, h * w)
    # out[c, p] = sum_{n, z} samples[n, c, z, p] w[n, z, p]; accumulated one (n, z) slice at a
    # time (4x faster on CPU than materialising the (N, C, Z, P) product, same result).
    out = samples.new_zeros((n, c, h * w) if per_camera else (c, h * w))
    for i in range(n):
        for j in range(z):
            if per_camera:
                out[i].addcmul_(s[i, :, j], wt[i, j])
            else:
                out.addcmul_(s[i, :, j], wt[i, j])
    return out.reshape((n, c, h, w) if per_camera else (c, h, w))


def _check_features(features: torch.Tensor, rig: Rig) -> tuple[int, int, int, int]:
    if not isinstance(features, torch.Tensor):
        raise field_error("features", type(features).__name__, "must be a torch.Tensor (N_cam, C, H, W)")
    dims = check_shape(features, ("N_cam", "C", "H", "W"), "features")
    if dims["N_cam"] != len(rig):
        raise field_error("features", tuple(features.shape), f"first dim must be the rig's {len(rig)} cameras")
    if not features.is_floating_point():
        raise field_error("features dtype", str(features.dtype), "must be floating point")
    if min(features.shape) == 0:
        raise field_error("features", tuple(features.shape), "every dimension must be non-empty")
    return dims["N_cam"], dims["C"], dims["H"], dims["W"]


def _sample_grid_sample(features: torch.Tensor, geom: BEVGeometry, weights: torch.Tensor,
                        per_camera: bool = False) -> torch.Tensor:
    """Dense reference: F.grid_sample of every camera at every point, then the weighted sum.

    Returns (C, H_bev, W_bev), or (N_cam, C, H_bev, W_bev) with ``per_camera``.
    """
    n, z, h, w, _ = geom.grid.shape
    grid = geom.grid.to(features.dtype).reshape(n, z * h, w, 2)
    samples = F.grid_sample(features, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return aggregate(samples.reshape(n, -1, z, h, w), weights, per_camera)


def bev_features(features: torch.Tensor, rig: Rig, grid: BEVGrid, sampler: str = "grid_sample",
                 image_size: Any = None, *, overlap: str = "mean", bounds: str = "pixel",
                 eps: float = 1e-5, deformable: Any = None, lut: Any = None,
                 return_per_camera: bool = False) -> BEVResult:
    """BEV features from per-camera feature maps with the chosen sampler.

    Args:
        features: Per-camera feature maps, shape (N_cam, C, H_f, W_f), floating point, in
            rig order (any stride: see the module Convention).
        rig: The rig (N_cam cameras).
        grid: The BEV grid (Z points per pillar, H_bev x W_bev cells).
        sampler: ``"grid_sample"`` (dense ``F.grid_sample`` reference over all cameras and
            points), ``"gather_scatter"`` (only valid (camera, point) pairs are gathered,
            then scatter-added), ``"deformable"`` (K-tap deformable sampling, see
            ``deformable``) or ``"lut"`` (precomputed lookup table, see ``lut``).
        image_size: Image size (W, H) the rig's pixels refer to: None (calibrated sizes),
            one (W, H) or shape (N_cam, 2).
        overlap: ``"mean"``, ``"first_hit"`` or ``"last_write"`` (module docstring).
        bounds: Validity bounds, ``"pixel"`` or ``"bevformer"``.
        eps: Minimum depth of a valid point (metres).
        deformable: For ``sampler="deformable"``: a
            :class:`bevviz.samplers.deformable.DeformableConfig` or a dict of its fields
            (kernel size, dilation, rounding ``"bilinear"``/``"floor"``, offsets).
        lut: For ``sampler="lut"``: a prebuilt :class:`bevviz.samplers.lut.BEVLookupTable`
            (must match rig, grid, feature size and settings), or None to build (and cache)
            one.
        return_per_camera: Also return the pillar means P, shape (N_cam, C, H_bev, W_bev).

    Returns:
        :class:`BEVResult`: features (C, H_bev, W_bev), hits (H_bev, W_bev), valid
        (N_cam, H_bev, W_bev), point_valid (N_cam, Z, H_bev, W_bev), timings.

    Raises:
        ValueError: unknown sampler/overlap/bounds, features of the wrong shape or dtype,
            camera count mismatch, bad image_size.

    Convention:
        See the module docstring (normalise with the image size, sample the feature map
        with ``align_corners=False``; the aggregation formula).
    """
    t_start = time.perf_counter()
    check_choice(sampler, SAMPLERS, "sampler")
    check_choice(overlap, OVERLAPS, "overlap")
    check_choice(bounds, BOUNDS, "bounds")
    n_cam, C, Hf, Wf = _check_features(features, rig)
    if not isinstance(grid, BEVGrid):
        raise field_error("grid", type(grid).__name__, "must be a BEVGrid")
    timings: dict[str, float] = {}
    H, W = grid.shape

    if sampler == "lut":
        from bevviz.samplers import lut as lut_mod

        t = time.perf_counter()
        table = lut if lut is not None else lut_mod.cached_lut(rig, grid, (Hf, Wf), image_size=image_size,
                                                              overlap=overlap, bounds=bounds, eps=eps,
                                                              dtype=features.dtype)
        if not isinstance(table, lut_mod.BEVLookupTable):
            raise field_error("lut", type(table).__name__, "must be a BEVLookupTable")
        table.check_compatible(rig, grid, (Hf, Wf), image_size=image_size, overlap=overlap,
                               bounds=bounds, eps=eps)
        timings["lut"] = time.perf_counter() - t
        t = time.perf_counter()
        out = table.apply(features)
        timings["sample"] = time.perf_counter() - t
        per_cam = None
        if return_per_camera:
            t = time.perf_counter()
            per_cam = table.apply_per_camera(features)
            timings["per_camera"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - t_start
        # hits / valid / point_valid are the table's own tensors (no copy): treat as read-only.
        return BEVResult(features=out, hits=table.hits, valid=table.seen, point_valid=table.point_valid,
                         timings=timings, sampler=sampler, overlap=overlap, per_camera=per_cam)

    t = time.perf_counter()
    geom = bev_geometry(rig, grid, image_size=image_size, eps=eps, bounds=bounds)
    timings["geometry"] = time.perf_counter() - t
    t = time.perf_counter()
    weights, hits, seen = point_weights(geom.valid, overlap)
    timings["weights"] = time.perf_counter() - t

    if sampler == "grid_sample":
        run = _sample_grid_sample
    elif sampler == "gather_scatter":
        run = _sample_gather_scatter
    else:
        from bevviz.samplers.deformable import DeformableConfig, deformable_bev

        if isinstance(deformable, DeformableConfig):
            cfg = deformable
        else:
            try:
                cfg = DeformableConfig(**dict(deformable or {}))
            except TypeError as err:
                raise field_error("deformable", deformable, f"not DeformableConfig fields ({err})") from None

        def run(f, g, w, per_camera=False):
            return deformable_bev(f, g.grid, w, cfg, per_camera=per_camera)

    t = time.perf_counter()
    out = run(features, geom, weights)
    timings["sample"] = time.perf_counter() - t
    per_cam = None
    if return_per_camera:
        t = time.perf_counter()
        pillar_w = geom.valid.to(torch.float64) / geom.valid.sum(dim=1, keepdim=True).clamp(min=1)
        per_cam = run(features, geom, pillar_w, per_camera=True)
        timings["per_camera"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    return BEVResult(features=out, hits=hits, valid=seen, point_valid=geom.valid, timings=timings,
                     sampler=sampler, overlap=overlap, per_camera=per_cam)


def valid_pairs(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (camera, point) pairs that contribute: nonzero aggregation weight.

    Args:
        weights: w[n, z, c], shape (N_cam, Z, H_bev, W_bev).

    Returns:
        (pair, camera, cell): flat indices into ``weights``, the pair's camera and its BEV
        cell (row-major over H_bev x W_bev), each shape (M,), int64.
    """
    n, z, h, w = weights.shape
    pair = torch.nonzero(weights.reshape(-1)).squeeze(1)
    return pair, torch.div(pair, z * h * w, rounding_mode="floor"), pair % (h * w)


def _sample_gather_scatter(features: torch.Tensor, geom: BEVGeometry, weights: torch.Tensor,
                           per_camera: bool = False) -> torch.Tensor:
    """Gather-scatter: bilinear taps of the valid pairs only, one gather, one scatter-add.

    Uses :mod:`bevviz.samplers.gather_scatter` (taps of the pairs' normalised points in the
    features' dtype, so the arithmetic is grid_sample's; gather from the channels-last table;
    ``scatter_add_points`` into an (H_bev * W_bev, C) buffer with the pair weights).

    Returns (C, H_bev, W_bev), or (N_cam, C, H_bev, W_bev) with ``per_camera``.
    """
    from bevviz.samplers import gather_scatter as gs
    from bevviz.samplers.deformable import pair_taps

    N, C, H, W = features.shape
    _, _, hb, wb, _ = geom.grid.shape
    hw = hb * wb
    pair, cam, cell = valid_pairs(weights)
    pts = geom.grid.reshape(-1, 2).index_select(0, pair).to(features.dtype)
    vals = gs.gather(features, pair_taps(cam, pts, (N, H, W), coords="normalized"))[0]  # (M, C)
    target = cam * hw + cell if per_camera else cell
    sums, _ = gs.scatter_add_points(vals, target, N * hw if per_camera else hw,
                                    weights.reshape(-1).index_select(0, pair).to(features.dtype))
    if per_camera:
        return sums.view(N, hb, wb, C).permute(0, 3, 1, 2)
    return sums.t().reshape(C, hb, wb)


# --------------------------------------------------------------------------- ground truth check

def ground_truth_bev(grid: BEVGrid, world: Any = None, subsamples: int = 4) -> torch.Tensor:
    """The synthetic world's ground colour averaged over every BEV cell (the answer a z = 0
    reconstruction should give).

    Args:
        grid: BEV grid (only its cells are used, not its heights).
        world: :class:`bevviz.synthetic.World` (default: the sample world).
        subsamples: s; the cell colour is the mean of s x s bilinear texture samples at
            cell offsets ``((k + 0.5) / s - 0.5) * resolution``.

    Returns:
        RGB in [0, 1], shape (3, H_bev, W_bev), float32 (no exposure, vignetting or haze).
    """
    import numpy as np

    from bevviz import synthetic

    s = int(subsamples)
    xs, ys = grid.cell_centers()
    off = ((torch.arange(s, dtype=torch.float64) + 0.5) / s - 0.5) * grid.resolution
    H, W = grid.shape
    X = (xs.view(H, 1, 1, 1) + off.view(1, 1, s, 1)).expand(H, W, s, s)
    Y = (ys.view(1, W, 1, 1) + off.view(1, 1, 1, s)).expand(H, W, s, s)
    col = synthetic.sample_ground(np.stack([X.reshape(-1).numpy(), Y.reshape(-1).numpy()], 1),
                                  world or synthetic.default_world())
    return torch.from_numpy(col).view(H, W, s * s, 3).mean(2).permute(2, 0, 1).div(255.0).contiguous()


def ground_visibility(rig: Rig, grid: BEVGrid, world: Any = None, image_size: Any = None) -> torch.Tensor:
    """Which cameras see each BEV cell's ground point (z = 0) unoccluded in the synthetic world.

    Args:
        rig: The rig (true calibration).
        grid: BEV grid; its cell centres at z = 0 are tested.
        world: :class:`bevviz.synthetic.World` (default: the sample world).
        image_size: As :func:`bev_features`.

    Returns:
        Shape (N_cam, H_bev, W_bev), bool: inside the image and the first ray hit is the
        ground point itself (no box in between).
    """
    import numpy as np

    from bevviz import synthetic

    world = world or synthetic.default_world()
    g0 = grid.with_z((0.0,))
    geom = bev_geometry(rig, g0, image_size=image_size)
    pts = g0.points()[0].reshape(-1, 3).numpy()
    out = geom.valid[:, 0].reshape(len(rig), -1).clone()
    for n, cam in enumerate(rig):
        idx = torch.nonzero(out[n]).squeeze(1).numpy()
        if idx.size == 0:
            continue
        hit = synthetic.cast_rays(world, cam.position, pts[idx] - cam.position)
        clear = (hit.kind == synthetic.GROUND) & (hit.t >= 1.0 - 1e-6)
        out[n, torch.from_numpy(idx[~clear])] = False
    return out.view(len(rig), *grid.shape)


def reconstruction_error(bev: torch.Tensor, truth: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Mean absolute error and PSNR of a BEV RGB reconstruction over the masked cells.

    Args:
        bev: Reconstruction, RGB in [0, 1], shape (3, H_bev, W_bev).
        truth: Ground truth, same shape.
        mask: Cells to score, shape (H_bev, W_bev), bool.

    Returns:
        ``mae`` (mean over cells and channels of |bev - truth|, in 8-bit levels 0..255),
        ``median_ae`` (median over cells of the channel-mean error, levels), ``psnr`` (dB,
        peak 1) and ``cells`` (number scored). NaN metrics when no cell is scored.
    """
    check_shape(bev, (3, "H", "W"), "bev")
    check_shape(truth, tuple(bev.shape), "truth")
    check_shape(mask, tuple(bev.shape[1:]), "mask")
    n = int(mask.sum())
    if n == 0:
        return {"mae": float("nan"), "median_ae": float("nan"), "psnr": float("nan"), "cells": 0}
    diff = (bev.detach().to(torch.float64) - truth.to(torch.float64))[:, mask]
    mse = float((diff ** 2).mean())
    return {
        "mae": float(diff.abs().mean()) * 255.0,
        "median_ae": float(diff.abs().mean(0).median()) * 255.0,
        "psnr": float("inf") if mse == 0 else -10.0 * float(torch.log10(torch.tensor(mse))),
        "cells": n,
    }
