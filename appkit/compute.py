"""Cached computations for the pages, keyed on scene/rig fingerprint + grid + settings.

``st.cache_data`` for arrays (each caller gets its own copy), ``st.cache_resource`` for
lookup tables. Every function here only calls into ``bevviz``; no geometry is written
here either.
"""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from appkit.state import HASH_FUNCS, Scene
from bevviz import overlays
from bevviz.bev_grid import BEVGrid
from bevviz.calibration import edge_strength
from bevviz.camera import Rig
from bevviz.features import conv_features, rgb_features
from bevviz.pipeline import bev_features
from bevviz.projection import PointValidity, Projection
from bevviz.samplers import gather_scatter, lut, reference
from bevviz.viz import calibration_lidar
from bevviz.viz.cameras import CameraOverlay
from bevviz.viz.common import data_uri, downsample

FEATURE_KINDS = ("RGB", "conv C=64")


def _cache_data(**kw):
    return st.cache_data(show_spinner=False, hash_funcs=HASH_FUNCS, **kw)


def _cache_resource(**kw):
    return st.cache_resource(show_spinner=False, hash_funcs=HASH_FUNCS, **kw)


# --------------------------------------------------------------------------------------
# Projection and overlays
# --------------------------------------------------------------------------------------


@_cache_data(max_entries=6)
def projection(rig: Rig, grid: BEVGrid, eps: float, bounds: str) -> Projection:
    """All grid points projected into all cameras (fields (N_cam, Z, H_bev, W_bev))."""
    return overlays.grid_projection(rig, grid, eps=eps, bounds=bounds)


@_cache_data(max_entries=6)
def status_rows(rig: Rig, grid: BEVGrid, eps: float, bounds: str) -> list[dict]:
    """Per-camera counts of valid / behind / outside points."""
    return overlays.status_table(projection(rig, grid, eps, bounds), rig.names)


@_cache_data(max_entries=6)
def footprints(rig: Rig, grid: BEVGrid, eps: float, bounds: str) -> np.ndarray:
    """Per-camera footprints, shape (N_cam, H_bev, W_bev), bool."""
    return overlays.footprints(projection(rig, grid, eps, bounds))


@_cache_data(max_entries=6)
def ground_lines(rig: Rig, grid: BEVGrid, step: float) -> overlays.GroundGridLines:
    """The z = 0 metric grid over the BEV extent, projected."""
    return overlays.ground_grid_lines(rig, grid.x_range, grid.y_range, step=step)


#: Colour choices of the projected points -> column of the per-point data (x, y, z, u, v, depth).
COLOR_COLUMNS = {"depth": 5, "pillar z": 2, "BEV x": 0, "BEV y": 1}
COLOR_BY = tuple(COLOR_COLUMNS)
#: Points per camera kept for overlays; pages draw a prefix (any prefix is an even sample).
MAX_OVERLAY_POINTS = 16000


@_cache_data(max_entries=24)
def camera_overlays(rig: Rig, grid: BEVGrid, eps: float, bounds: str, show_behind: bool,
                    max_points: int = MAX_OVERLAY_POINTS) -> dict[str, dict]:
    """Per camera up to ``max_points`` valid points in an order whose every prefix is an even
    sample, and, optionally, the behind-camera ghosts that land inside the image.

    Returns:
        Name -> dict with ``points_uv`` (P, 2), ``customdata`` (P, 6) = (x, y, z, u, v, depth)
        and ``ghost_uv`` (Q, 2) or None; plus, under ``"_range"``, the (min, max) over all
        cameras of every colour choice in :data:`COLOR_COLUMNS` (shared colour scales).
    """
    proj = projection(rig, grid, eps, bounds)
    flat_pts = grid.points(torch.float32).numpy().reshape(-1, 3)
    uv, depth, valid = proj.uv.numpy(), proj.depth.numpy(), proj.valid.numpy()
    ghosts = overlays.behind_camera_uv(proj, eps) if show_behind else None
    status = overlays.point_status(proj) if show_behind else None
    out: dict[str, dict] = {}
    for c, cam in enumerate(rig):
        idx = overlays.subsample_indices(valid[c], max_points)
        cuv = uv[c].reshape(-1, 2)[idx]
        data = np.column_stack([flat_pts[idx], cuv, depth[c].reshape(-1)[idx]]).astype(np.float32)
        entry = {"points_uv": cuv, "customdata": data, "ghost_uv": None}
        if ghosts is not None:
            g = ghosts[c].reshape(-1, 2)
            inside = ((status[c].reshape(-1) == overlays.STATUS_BEHIND) & (g[:, 0] >= -0.5)
                      & (g[:, 0] <= cam.width - 0.5) & (g[:, 1] >= -0.5) & (g[:, 1] <= cam.height - 0.5))
            entry["ghost_uv"] = g[overlays.subsample_indices(inside, max_points // 2)]
        out[cam.name] = entry
    stacked = np.concatenate([e["customdata"] for e in out.values()]) if out else np.zeros((0, 6))
    ranges = {}
    for name, col in COLOR_COLUMNS.items():
        v = stacked[:, col]
        ranges[name] = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    ranges["pillar z"] = (min(grid.z_values), max(grid.z_values))
    out["_range"] = ranges
    return out


def overlay_for(entry: dict | None, color_by: str, max_points: int, show_points: bool = True,
                show_behind: bool = False) -> CameraOverlay:
    """The first ``max_points`` points of one camera's :func:`camera_overlays` entry (any
    prefix is an even sample, so changing the count recomputes nothing), coloured by
    ``color_by``, as a :class:`bevviz.viz.cameras.CameraOverlay`."""
    ov = CameraOverlay()
    if not entry:
        return ov
    if show_points:
        data = entry["customdata"][:max_points]
        ov.points_uv, ov.customdata = entry["points_uv"][:max_points], data
        ov.color = data[:, COLOR_COLUMNS[color_by]]
    if show_behind and entry.get("ghost_uv") is not None:
        ov.ghost_uv = entry["ghost_uv"][:max_points // 2]
    return ov


@_cache_data(max_entries=6)
def display_images(scene: Scene, max_width: int = 400) -> dict[str, str]:
    """Each camera image downsampled for display and encoded once, as a data URI."""
    return {name: data_uri(downsample(img, max_width)[0], "jpeg") for name, img in scene.images.items()}


@_cache_data(max_entries=6)
def rig_geometry(rig: Rig, frustum_depth: float) -> tuple[dict, dict, dict]:
    """Frustums, RDF axes and horizon segments of every camera."""
    frustums = {c.name: overlays.frustum(c, frustum_depth) for c in rig}
    axes = {c.name: overlays.camera_axes(c, max(0.5, frustum_depth / 3)) for c in rig}
    horizons = {c.name: overlays.horizon_line(c) for c in rig}
    return frustums, axes, horizons


@_cache_data(max_entries=6)
def validity_comparison(rig: Rig, grid: BEVGrid, a: tuple[float, str], b: tuple[float, str]):
    """Footprints under two (eps, bounds) settings and the cells where they differ."""
    return overlays.compare_validity(rig, grid, a, b)


# --------------------------------------------------------------------------------------
# LiDAR points and annotation boxes over the cameras
# --------------------------------------------------------------------------------------

#: Colour choices of the LiDAR points -> (CameraLidar field, colour-bar title).
LIDAR_COLOR_BY = {"depth": ("depth", "LiDAR depth (m)"), "intensity": ("intensity", "LiDAR intensity")}
#: Intensities above this percentile (over every camera) share the top colour: a few
#: retro-reflectors (plates, signs) would otherwise leave everything else dark.
INTENSITY_PERCENTILE = 99.0


@_cache_data(max_entries=6)
def lidar_points(scene: Scene, max_points: int = overlays.MAX_LIDAR_POINTS) -> dict:
    """The LiDAR points every camera sees (depth-buffered, subsampled), or {} without a scan.

    Returns:
        Camera name -> :class:`bevviz.overlays.CameraLidar`; plus, under ``"_range"``, the
        shared (min, max) colour range of every choice in :data:`LIDAR_COLOR_BY`.
    """
    if scene.lidar is None:
        return {}
    out: dict = overlays.lidar_in_cameras(scene.rig, scene.lidar, max_points=max_points)
    depth = np.concatenate([c.depth for c in out.values()] + [np.zeros(0, np.float32)])
    inten = np.concatenate([c.intensity for c in out.values()] + [np.zeros(0, np.float32)])
    out["_range"] = {"depth": (0.0, float(depth.max()) if depth.size else 1.0),
                     "intensity": (0.0, max(float(np.percentile(inten, INTENSITY_PERCENTILE)), 1.0)
                                   if inten.size else 1.0)}
    return out


@_cache_data(max_entries=6)
def box_wireframes(scene: Scene) -> dict[str, overlays.BoxWireframes]:
    """The scene's annotation boxes as wireframes in every camera (at each camera's exposure
    when the scene has a scan), or {} without boxes."""
    if not scene.boxes:
        return {}
    return overlays.boxes_in_cameras(scene.rig, scene.boxes, scene.lidar)


def lidar_overlay(ov: CameraOverlay, points: overlays.CameraLidar | None, color_by: str,
                  boxes: overlays.BoxWireframes | None) -> CameraOverlay:
    """Add one camera's LiDAR points (coloured by ``color_by``) and box edges to ``ov``."""
    if points is not None and points.drawn:
        ov.lidar_uv = points.uv
        ov.lidar_color = getattr(points, LIDAR_COLOR_BY[color_by][0])
        ov.lidar_customdata = np.column_stack([points.depth, points.intensity])
    if boxes is not None and len(boxes):
        ov.box_segments, ov.box_labels = boxes.segments, boxes.categories
    return ov


# --------------------------------------------------------------------------------------
# The LiDAR witness of the Calibration Doctor
# --------------------------------------------------------------------------------------


@_cache_data(max_entries=12)
def edge_picture(scene: Scene, camera: str, max_width: int = 800) -> str:
    """A camera image's edges (:func:`bevviz.calibration.edge_strength`) as a grey picture
    for :func:`bevviz.viz.calibration_lidar.lidar_alignment_figure` (a data URI)."""
    return calibration_lidar.edge_picture(edge_strength(scene.images[camera]), max_width)


@_cache_data(max_entries=12)
def image_edge_picture(image: np.ndarray, max_width: int = 640) -> str:
    """:func:`edge_picture` of any image (RGB uint8 (H, W, 3)): another frame's, for a correction's overlays."""
    return calibration_lidar.edge_picture(edge_strength(image), max_width)


# --------------------------------------------------------------------------------------
# Features and BEV features
# --------------------------------------------------------------------------------------


@_cache_data(max_entries=6)
def features(scene: Scene, kind: str, stride: int) -> torch.Tensor:
    """Per-camera feature maps, shape (N_cam, C, H // s, W // s)."""
    if kind == "RGB":
        return rgb_features(scene.images, scene.rig, stride=stride)
    return conv_features(scene.images, scene.rig, channels=64, stride=stride)


@_cache_resource(max_entries=4)
def lookup_table(rig: Rig, grid: BEVGrid, feature_size: tuple[int, int], overlap: str, eps: float, bounds: str):
    """The sampler lookup table for this rig + grid + feature size + settings (built once)."""
    return lut.build_lut(rig, grid, feature_size, overlap=overlap, bounds=bounds, eps=eps)


@_cache_data(max_entries=24)
def bev(scene: Scene, grid: BEVGrid, kind: str, stride: int, sampler: str, overlap: str = "mean",
        eps: float = 1e-5, bounds: str = "pixel", kernel_size: int = 1, rounding: str = "bilinear") -> dict:
    """BEV features with one sampler.

    Returns:
        Dict with ``features`` (C, H_bev, W_bev) float32 numpy, ``hits`` (H_bev, W_bev) and
        ``timings`` (stage -> seconds, measured when first computed).
    """
    f = features(scene, kind, stride)
    kw: dict = dict(sampler=sampler, overlap=overlap, validity=PointValidity(bounds, eps))
    if sampler == "deformable":
        kw["deformable"] = dict(kernel_size=kernel_size, rounding=rounding)
    timings = {}
    if sampler == "lut":
        kw["lut"] = table = lookup_table(scene.rig, grid, tuple(f.shape[-2:]), overlap, eps, bounds)
        timings["build"] = table.build_seconds
    res = bev_features(f, scene.rig, grid, **kw)
    timings.update(res.timings)
    return {"features": res.features.detach().numpy().astype(np.float32), "hits": res.hits.numpy(),
            "timings": timings}


@_cache_data(max_entries=6)
def ground_truth_bev(scene: Scene, grid: BEVGrid) -> np.ndarray | None:
    """The true ground texture on this grid (RGB uint8 (H_bev, W_bev, 3)), or None."""
    gt = scene.ground_truth
    if gt is None:
        return None
    return gt.to_bev(grid)


# --------------------------------------------------------------------------------------
# Padding lab
# --------------------------------------------------------------------------------------


@_cache_data(max_entries=12)
def padding_input(scene: Scene, source: str, camera: str, stride: int) -> np.ndarray:
    """The padding lab's input, shape (1, C, H, W) float32: a test pattern or a camera's
    RGB features at ``stride``."""
    if source == "test pattern":
        return overlays.test_pattern().numpy()
    f = features(scene, "RGB", stride)
    return f[scene.rig.index(camera)][None].numpy()


@_cache_data(max_entries=12)
def padding_cases(feature: np.ndarray, margin: float, upsample: int) -> list[overlays.PaddingCase]:
    """Reference vs gather-scatter over every mode x padding x align_corners."""
    x = torch.from_numpy(feature)
    H, W = x.shape[-2:]
    grid = overlays.margin_grid(int(H * upsample), int(W * upsample), margin)
    return overlays.padding_cases(x, grid, reference.grid_sample, gather_scatter.grid_sample)


@_cache_data(max_entries=12)
def half_pixel(feature: np.ndarray) -> dict[str, np.ndarray]:
    """The half-pixel experiment: matched and mismatched normalisation."""
    x = torch.from_numpy(feature)
    return {
        "matched (False / False)": overlays.half_pixel_mismatch(x, reference.grid_sample, False, False),
        "grid False, sampler True": overlays.half_pixel_mismatch(x, reference.grid_sample, False, True),
        "grid True, sampler False": overlays.half_pixel_mismatch(x, reference.grid_sample, True, False),
    }
