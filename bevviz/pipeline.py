"""Multi-camera BEV features with any sampler and one hit-count normalisation.

:func:`bev_features` projects the grid (:func:`bevviz.aggregation.bev_geometry`), weighs
every (camera, point) pair once (:func:`bevviz.aggregation.point_weights`) and hands both
to the chosen sampler, a :class:`BEVSampler` of :data:`PIPELINE_SAMPLERS` (one per name of
:data:`bevviz.samplers.SAMPLERS`): the dense ``F.grid_sample`` reference, the
gather-scatter sampler, the deformable sampler or the lookup table. Every
sampler implements the SAME aggregation (the formula is in :mod:`bevviz.aggregation`), so
they compare to 1e-5.

Also the ground-truth check of the synthetic world: the true BEV ground colour, which
cameras see each cell unoccluded, and the error of a reconstruction.

Convention:
    As :mod:`bevviz.aggregation`: points normalised with the image size, the feature map
    sampled with ``align_corners=False`` and zero padding. See docs/conventions.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bevviz import synthetic
from bevviz.aggregation import (
    OVERLAPS,
    BEVGeometry,
    aggregate,
    bev_geometry,
    point_weights,
    resolve_image_size,
    valid_pairs,
)
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import check_choice, check_shape, field_error
from bevviz.projection import PointValidity
from bevviz.samplers import SAMPLERS
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers import lut as lut_mod
from bevviz.samplers.deformable import DeformableConfig, deformable_bev

__all__ = [
    # defined here
    "PIPELINE_SAMPLERS", "BEVResult", "BEVSampler", "bev_features", "ground_truth_bev", "ground_visibility",
    "reconstruction_error",
    # the aggregation every sampler shares (bevviz.aggregation), and the sampler registry
    "OVERLAPS", "SAMPLERS", "BEVGeometry", "aggregate", "bev_geometry", "point_weights", "resolve_image_size",
    "valid_pairs",
]


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
                 image_size: Any = None, *, overlap: str = "mean", validity: PointValidity | None = None,
                 deformable: Any = None, lut: Any = None,
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
        validity: Which points are valid: bounds ``"pixel"`` or ``"bevformer"`` and the
            minimum depth ``eps`` (metres) (:class:`bevviz.projection.PointValidity`; default
            ``PointValidity()``: pixel bounds, eps 1e-5).
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
        InputError: unknown sampler/overlap/bounds, features of the wrong shape or dtype,
            camera count mismatch, bad image_size.

    Convention:
        See the module docstring (normalise with the image size, sample the feature map
        with ``align_corners=False``; the aggregation formula).
    """
    t_start = time.perf_counter()
    check_choice(sampler, SAMPLERS, "sampler")
    check_choice(overlap, OVERLAPS, "overlap")
    validity = PointValidity() if validity is None else validity
    if not isinstance(validity, PointValidity):
        raise field_error("validity", type(validity).__name__, "must be a PointValidity")
    _check_features(features, rig)
    if not isinstance(grid, BEVGrid):
        raise field_error("grid", type(grid).__name__, "must be a BEVGrid")
    chosen = PIPELINE_SAMPLERS[sampler]
    option = {"deformable": deformable, "lut": lut}.get(chosen.option)
    settings = _Settings(image_size, overlap, validity.bounds, validity.eps, return_per_camera, t_start)
    return chosen.run(features, rig, grid, settings, option)


# --------------------------------------------------------------------------- the samplers


@dataclass(frozen=True)
class _Settings:
    """What :func:`bev_features` asks of every sampler (validated there)."""

    image_size: Any
    overlap: str
    bounds: str
    eps: float
    per_camera: bool
    t_start: float


class BEVSampler:
    """One sampler of :func:`bev_features`: its name, the option it reads and how it runs.

    The default :meth:`run` computes the shared geometry and weights
    (:func:`~bevviz.aggregation.bev_geometry`, :func:`~bevviz.aggregation.point_weights`) and
    hands them to :meth:`sampling`; a sampler with its own precomputation (the lookup table)
    overrides :meth:`run`.

    Attributes:
        name: The name in :data:`bevviz.samplers.SAMPLERS`.
        option: The keyword of :func:`bev_features` it reads (``"deformable"``, ``"lut"``), or None.
    """

    name: str = ""
    option: str | None = None

    def sampling(self, option: Any):
        """The sampling function ``f(features, geometry, weights, per_camera=False)`` -> (C, H_bev,
        W_bev) or (N_cam, C, H_bev, W_bev), configured by ``option``."""
        raise NotImplementedError

    def run(self, features: torch.Tensor, rig: Rig, grid: BEVGrid, s: _Settings, option: Any) -> BEVResult:
        """BEV features of (N_cam, C, H_f, W_f) ``features``; see :func:`bev_features`."""
        sample = self.sampling(option)
        timings: dict[str, float] = {}
        t = time.perf_counter()
        geom = bev_geometry(rig, grid, image_size=s.image_size, eps=s.eps, bounds=s.bounds)
        timings["geometry"] = time.perf_counter() - t
        t = time.perf_counter()
        weights, hits, seen = point_weights(geom.valid, s.overlap)
        timings["weights"] = time.perf_counter() - t
        t = time.perf_counter()
        out = sample(features, geom, weights)
        timings["sample"] = time.perf_counter() - t
        per_cam = None
        if s.per_camera:
            t = time.perf_counter()
            pillar_w = geom.valid.to(torch.float64) / geom.valid.sum(dim=1, keepdim=True).clamp(min=1)
            per_cam = sample(features, geom, pillar_w, per_camera=True)
            timings["per_camera"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - s.t_start
        return BEVResult(features=out, hits=hits, valid=seen, point_valid=geom.valid, timings=timings,
                         sampler=self.name, overlap=s.overlap, per_camera=per_cam)


class _GridSampleSampler(BEVSampler):
    """The dense ``F.grid_sample`` reference over all cameras and points."""

    name = "grid_sample"

    def sampling(self, option: Any):
        return _sample_grid_sample


class _GatherScatterSampler(BEVSampler):
    """Only the valid (camera, point) pairs are gathered, then scatter-added."""

    name = "gather_scatter"

    def sampling(self, option: Any):
        return _sample_gather_scatter


class _DeformableSampler(BEVSampler):
    """K-tap deformable sampling; ``deformable`` is a :class:`DeformableConfig` or a dict of its fields."""

    name = "deformable"
    option = "deformable"

    def sampling(self, option: Any):
        if isinstance(option, DeformableConfig):
            cfg = option
        else:
            opts = option or {}
            if not isinstance(opts, Mapping):
                raise field_error("deformable", option, "must be a DeformableConfig or a dict of its fields")
            unknown = [repr(k) for k in opts if k not in {f.name for f in fields(DeformableConfig)}]
            if unknown:
                raise field_error("deformable", option, f"not DeformableConfig fields ({', '.join(unknown)})")
            cfg = DeformableConfig(**opts)

        def sample(f, g, w, per_camera=False):
            return deformable_bev(f, g.grid, w, cfg, per_camera=per_camera)

        return sample


class _LookupTableSampler(BEVSampler):
    """A precomputed lookup table (``lut``: a prebuilt :class:`~bevviz.samplers.lut.BEVLookupTable`,
    or None to build and cache one): no geometry at sampling time."""

    name = "lut"
    option = "lut"

    def run(self, features: torch.Tensor, rig: Rig, grid: BEVGrid, s: _Settings, option: Any) -> BEVResult:
        hf, wf = features.shape[-2:]
        timings: dict[str, float] = {}
        t = time.perf_counter()
        table = option if option is not None else lut_mod.cached_lut(
            rig, grid, (hf, wf), image_size=s.image_size, overlap=s.overlap, bounds=s.bounds, eps=s.eps,
            dtype=features.dtype)
        if not isinstance(table, lut_mod.BEVLookupTable):
            raise field_error("lut", type(table).__name__, "must be a BEVLookupTable")
        table.check_compatible(rig, grid, (hf, wf), image_size=s.image_size, overlap=s.overlap, bounds=s.bounds,
                               eps=s.eps)
        timings["lut"] = time.perf_counter() - t
        t = time.perf_counter()
        out = table.apply(features)
        timings["sample"] = time.perf_counter() - t
        per_cam = None
        if s.per_camera:
            t = time.perf_counter()
            per_cam = table.apply_per_camera(features)
            timings["per_camera"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - s.t_start
        # hits / valid / point_valid are the table's own tensors (no copy): treat as read-only.
        return BEVResult(features=out, hits=table.hits, valid=table.seen, point_valid=table.point_valid,
                         timings=timings, sampler=self.name, overlap=s.overlap, per_camera=per_cam)


#: The samplers of :func:`bev_features`, by name, in the order of :data:`bevviz.samplers.SAMPLERS`.
PIPELINE_SAMPLERS: dict[str, BEVSampler] = {
    s.name: s for s in (_GridSampleSampler(), _GatherScatterSampler(), _DeformableSampler(), _LookupTableSampler())
}


def _sample_gather_scatter(features: torch.Tensor, geom: BEVGeometry, weights: torch.Tensor,
                           per_camera: bool = False) -> torch.Tensor:
    """Gather-scatter: bilinear taps of the valid pairs only, one gather, one scatter-add.

    Uses :mod:`bevviz.samplers.gather_scatter` (taps of the pairs' normalised points in the
    features' dtype, so the arithmetic is grid_sample's; gather from the channels-last table;
    ``scatter_add_points`` into an (H_bev * W_bev, C) buffer with the pair weights).

    Returns (C, H_bev, W_bev), or (N_cam, C, H_bev, W_bev) with ``per_camera``.
    """
    N, C, H, W = features.shape
    _, _, hb, wb, _ = geom.grid.shape
    hw = hb * wb
    pair, cam, cell = valid_pairs(weights)
    pts = geom.grid.reshape(-1, 2).index_select(0, pair).to(features.dtype)
    vals = gs.gather(features, gs.pair_taps(cam, pts, (N, H, W), coords="normalized"))[0]  # (M, C)
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
