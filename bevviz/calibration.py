"""Seam consistency: find the miscalibrated camera of a rig and refine its extrinsics.

Where the ground footprints of two cameras overlap, both cameras see the same ground. Each
camera's image is projected onto the ground plane z = 0 of a BEV grid (the inverse
perspective map, sampled with the two-stage gather-scatter sampler of
:mod:`bevviz.samplers.gather_scatter`); in the shared cells the two projections must agree.
A camera whose extrinsics are off paints the ground in the wrong place and disagrees with
*both* of its neighbours.

Seam costs (both robust to exposure, gain and white balance):
    *NCC*: each camera's colours are normalised per channel to zero mean and unit variance
    over the shared cells; the cost is half the mean squared difference, ``1 - NCC``, in
    [0, 2] (0 = identical up to exposure, 1 = unrelated). Smooth, wide basin; but an object
    standing in a seam (seen from two sides, smeared differently by the ground-plane
    projection) raises it and pulls on it.
    *NGF* (normalised gradient fields): each cell's BEV gradient (all channels) is scaled to
    ``g / sqrt(|g|^2 + eps^2)``; the cost is ``1 -`` their correlation. Every edge counts at
    most once and flat areas (asphalt, an object's faces) not at all, so objects pull far
    less, and the minimum is sharp. The seam tables report NGF.

Modes:
    *self-consistency* (real data): seams only. *ground truth* (a BEV texture is known, as
    for the synthetic sample): each camera's projection is compared with the texture over
    its whole footprint.

Refinement:
    :func:`refine_extrinsics` runs Adam on a small rotation (axis-angle, Rodrigues via
    :func:`bevviz.rotations.axis_angle_to_matrix`) and optionally a translation of one
    camera, minimising the seam cost with its neighbours; the gradient reaches the rotation
    through the gather-scatter sampler's bilinear tap weights (gradient with respect to the
    sampling positions). A coarse-to-fine schedule (NCC on 1/8 blurred images, then NGF on
    1/4 and 1/2 images) gives a basin of several degrees and a sharp end. Several frames of
    the same rig can be combined: an object hiding a seam in one frame rarely hides it in
    all.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``: ``g = (2u + 1) / W - 1`` with the
    calibrated image width W (the same for every pyramid level, see :mod:`bevviz.features`).
    Small rotations of a camera are given in its *body* frame (FLU: roll about the optical
    axis, pitch about the camera's left axis, positive looking down, yaw about its up axis,
    positive to the left), composed ``R = Rz(yaw) Ry(pitch) Rx(roll)``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Camera, Rig
from bevviz.features import resize_area
from bevviz.projection import project_with
from bevviz.rotations import (FLU_FROM_RDF, axis_angle_to_matrix, invert_transform, make_transform, matrix_to_rpy,
                              rpy_to_matrix)
from bevviz.shapes import check_choice, check_shape, field_error
from bevviz.threads import single_threaded

#: Ground ring (metres from the rig centre) whose cells are compared: nearer, the ground is
#: under the car or outside every image; farther, the texture is too foreshortened to help.
SEAM_RING = (3.0, 30.0)
#: Fewest shared cells for a pair to count as a seam.
MIN_SEAM_CELLS = 60
#: Smallest shared ground area (m^2) for two cameras to count as neighbours when refining.
MIN_SEAM_AREA_M2 = 2.0
#: Seam costs: colours (normalised cross-correlation) or normalised gradient fields.
COSTS = ("ncc", "ngf")
#: Gradient magnitude (per metre of BEV, images in [0, 1]) below which a cell counts as flat.
NGF_EPS = 0.1
#: Scale k of the robust combination of seams, ``k log(1 + cost / k)``.
ROBUST_K = 0.2
#: Quick score (a camera's better seam / rig median) from which a camera stands out. On
#: the embedded sample's default frame: 1.02 at most on the true rig; 2.6-11.5 for the
#: faulty camera under any 1-2 deg roll/pitch/yaw error, every other camera <= 1.03.
STANDOUT_RATIO = 2.0

#: A ``grid_sample``-compatible function ``(input, grid, mode, padding_mode, align_corners)``.
Sampler = Callable[..., torch.Tensor]


def _on_one_thread(fn):
    """Decorator: run ``fn`` inside :func:`single_threaded`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded():
            return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------------------
# Perturbations and deltas (body-frame roll / pitch / yaw)
# --------------------------------------------------------------------------------------

def perturb_camera(camera: Camera, roll_deg: float = 0.0, pitch_deg: float = 0.0, yaw_deg: float = 0.0,
                   translation: Sequence[float] = (0.0, 0.0, 0.0), fx_scale: float = 1.0,
                   fy_scale: float = 1.0) -> Camera:
    """The camera with its mounting rotated and moved, and its focal lengths scaled.

    Args:
        camera: The camera.
        roll_deg: Rotation about the optical axis (degrees, body x).
        pitch_deg: Rotation about the camera's left axis (degrees; positive looks down).
        yaw_deg: Rotation about the camera's up axis (degrees; positive turns left).
        translation: Shift of the optical centre in the ego frame, shape (3,), metres.
        fx_scale: Factor on fx (the principal point stays).
        fy_scale: Factor on fy.

    Returns:
        The perturbed camera (same name and image size).

    Convention:
        ``ego_from_body' = ego_from_body @ Rz(yaw) Ry(pitch) Rx(roll)`` with the body frame
        FLU (x = optical axis, y = left, z = up in the image), so the angles mean the same
        for every camera whatever its heading.
    """
    for name, val in (("fx_scale", fx_scale), ("fy_scale", fy_scale)):
        if not (np.isfinite(val) and val > 0):
            raise field_error(name, val, "must be finite and > 0", camera.name)
    t = np.asarray(translation, dtype=np.float64)
    check_shape(t, (3,), "translation", camera.name)
    rb = rpy_to_matrix(*np.radians([roll_deg, pitch_deg, yaw_deg]))
    ego_from_cam = camera.ego_from_cam
    # ego_from_cam' = ego_from_body Rb body_from_cam = ego_from_cam (rdf_from_flu Rb flu_from_rdf)
    R = ego_from_cam[:3, :3] @ FLU_FROM_RDF.T @ rb @ FLU_FROM_RDF
    new_ego_from_cam = make_transform(R, ego_from_cam[:3, 3] + t)
    K = camera.K.copy()
    K[0, 0] *= fx_scale
    K[1, 1] *= fy_scale
    return camera.replace(K=K, cam_from_ego=invert_transform(new_ego_from_cam))


def perturb_rig(rig: Rig, camera: str, **kwargs) -> Rig:
    """The rig with one camera perturbed; keyword arguments as :func:`perturb_camera`."""
    return rig.replace(perturb_camera(rig[camera], **kwargs))


#: Keys of a perturbation dict and their neutral values (translation in cm, as sliders show it).
PERTURBATION_KEYS = {"roll_deg": 0.0, "pitch_deg": 0.0, "yaw_deg": 0.0, "x_cm": 0.0, "y_cm": 0.0, "z_cm": 0.0,
                     "fx_scale": 1.0, "fy_scale": 1.0}


def apply_perturbations(rig: Rig, perturbations: Mapping[str, Mapping[str, float]]) -> Rig:
    """The rig with several cameras perturbed.

    Args:
        rig: The rig.
        perturbations: Camera name -> dict with any of :data:`PERTURBATION_KEYS`
            (degrees, cm, scale factors); missing keys are neutral.

    Returns:
        The perturbed rig (the same object when nothing changes).
    """
    out = rig
    for name, p in perturbations.items():
        v = {**PERTURBATION_KEYS, **{k: float(x) for k, x in p.items()}}
        unknown = set(p) - set(PERTURBATION_KEYS)
        if unknown:
            raise field_error("perturbation", sorted(unknown), f"unknown keys; allowed: {list(PERTURBATION_KEYS)}",
                              name)
        if all(v[k] == PERTURBATION_KEYS[k] for k in PERTURBATION_KEYS):
            continue
        out = out.replace(perturb_camera(out[name], v["roll_deg"], v["pitch_deg"], v["yaw_deg"],
                                         (v["x_cm"] / 100.0, v["y_cm"] / 100.0, v["z_cm"] / 100.0),
                                         v["fx_scale"], v["fy_scale"]))
    return out


@dataclass(frozen=True)
class CameraDelta:
    """How a camera changed between two calibrations.

    Attributes:
        camera: Camera name.
        roll_deg, pitch_deg, yaw_deg: Body-frame rotation from *before* to *after*.
        translation_m: Shift of the optical centre in the ego frame, shape (3,), metres.
        fx_scale, fy_scale: after / before focal lengths.
        angle_deg: Total rotation angle between the two orientations.
    """

    camera: str
    roll_deg: float
    pitch_deg: float
    yaw_deg: float
    translation_m: tuple[float, float, float]
    fx_scale: float
    fy_scale: float
    angle_deg: float

    def to_dict(self) -> dict:
        """JSON-ready form (translation in cm as well, as the sliders show it)."""
        return {
            "camera": self.camera, "roll_deg": self.roll_deg, "pitch_deg": self.pitch_deg,
            "yaw_deg": self.yaw_deg, "translation_m": list(self.translation_m),
            "translation_cm": [100.0 * v for v in self.translation_m],
            "fx_scale": self.fx_scale, "fy_scale": self.fy_scale, "angle_deg": self.angle_deg,
        }


def camera_delta(before: Camera, after: Camera) -> CameraDelta:
    """The body-frame correction taking ``before`` to ``after`` (inverse of :func:`perturb_camera`).

    Args:
        before: The camera as it was.
        after: The camera as it is now (same name).

    Returns:
        :class:`CameraDelta` such that ``perturb_camera(before, **delta)`` gives ``after``.
    """
    Ra = before.ego_from_cam[:3, :3] @ FLU_FROM_RDF.T  # ego_from_body
    Rb = after.ego_from_cam[:3, :3] @ FLU_FROM_RDF.T
    rel = Ra.T @ Rb
    roll, pitch, yaw = np.degrees(matrix_to_rpy(rel))
    cos = np.clip((np.trace(rel) - 1.0) / 2.0, -1.0, 1.0)
    dt = after.position - before.position
    return CameraDelta(before.name, float(roll), float(pitch), float(yaw),
                       tuple(float(v) for v in dt), float(after.K[0, 0] / before.K[0, 0]),
                       float(after.K[1, 1] / before.K[1, 1]), float(np.degrees(np.arccos(cos))))


def rig_deltas(before: Rig, after: Rig) -> list[CameraDelta]:
    """Per-camera :class:`CameraDelta` between two rigs with the same camera names."""
    return [camera_delta(before[n], after[n]) for n in before.names]


def deltas_json(before: Rig, after: Rig) -> str:
    """The per-camera correction ``before -> after`` as a JSON document (for download)."""
    return json.dumps({"convention": "body-frame FLU roll/pitch/yaw (deg), R = Rz Ry Rx; "
                                     "translation in the ego frame",
                       "cameras": [d.to_dict() for d in rig_deltas(before, after)]}, indent=2)


# --------------------------------------------------------------------------------------
# Images, grids and per-camera ground projections
# --------------------------------------------------------------------------------------

def seam_grid(radius: float = 30.0, resolution: float = 0.2, centre_x: float = 1.0) -> BEVGrid:
    """A ground-plane BEV grid suited to seams: fine cells out to ``radius`` metres.

    The nuScenes-like rig's side overlaps are narrow wedges (about 10 degrees), so cells
    must be small for a seam to hold enough of them; the default is 0.2 m over a square of
    side ``2 * radius`` around ``x = centre_x`` (the middle of a car whose ego origin is the
    rear axle).

    Args:
        radius: Half side of the square (metres).
        resolution: Cell size (metres); ``radius`` is rounded to whole cells.
        centre_x: Ego x of the square's centre (metres).

    Returns:
        A :class:`BEVGrid` with the single height z = 0.
    """
    n = int(round(radius / resolution))
    half = n * resolution
    cx = round(centre_x / resolution) * resolution
    return BEVGrid((cx - half, cx + half), (-half, half), (0.0,), resolution)


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with reflect padding.

    Args:
        x: Images, shape (N, C, H, W).
        sigma: Standard deviation in pixels; <= 0.3 returns ``x`` unchanged.

    Returns:
        Blurred images, shape (N, C, H, W).
    """
    if sigma <= 0.3:
        return x
    r = max(1, int(math.ceil(3 * sigma)))
    r = min(r, (min(x.shape[-2:]) - 1))
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=x.dtype) / sigma) ** 2)
    k = k / k.sum()
    # Shifted weighted sums: much faster on CPU than a 1-channel conv2d.
    y = F.pad(x, (r, r, 0, 0), mode="reflect")
    w = x.shape[-1]
    acc = k[0] * y[..., 0:w]
    for i in range(1, 2 * r + 1):
        acc = acc + k[i] * y[..., i:i + w]
    y = F.pad(acc, (0, 0, r, r), mode="reflect")
    h = x.shape[-2]
    acc = k[0] * y[..., 0:h, :]
    for i in range(1, 2 * r + 1):
        acc = acc + k[i] * y[..., i:i + h, :]
    return acc


def _normalise_uv(uv: torch.Tensor, width: float, height: float) -> torch.Tensor:
    """Pixel (u, v) (..., 2) -> grid (x, y) (..., 2), ``align_corners=False``: g = (2u + 1) / W - 1."""
    return torch.stack([(2.0 * uv[..., 0] + 1.0) / width - 1.0, (2.0 * uv[..., 1] + 1.0) / height - 1.0], -1)


def pixel_table(image: torch.Tensor) -> torch.Tensor:
    """The gather-scatter feature table of one image: (h * w + 1, C), see
    :func:`bevviz.samplers.gather_scatter.feature_table` (build once, sample many times).

    Args:
        image: Image or feature map, shape (C, h, w).
    """
    from bevviz.samplers.gather_scatter import feature_table

    return feature_table(image.unsqueeze(0))


def sample_at_pixels(image: torch.Tensor, uv: torch.Tensor, width: int, height: int,
                     sampler: Sampler | None = None, table: torch.Tensor | None = None) -> torch.Tensor:
    """Bilinear samples of one image at pixel positions of the calibrated image.

    By default this is the two-stage gather-scatter sampler of
    :mod:`bevviz.samplers.gather_scatter` (bilinear taps, then a weighted gather from the
    channels-last table), differentiable with respect to ``uv`` through the tap weights.

    Args:
        image: One image or feature map at any stride, shape (C, h, w).
        uv: Pixel coordinates of the calibrated (full-size) image, shape (P, 2).
        width: Calibrated image width W.
        height: Calibrated image height H.
        sampler: Optional ``grid_sample``-compatible function used instead (e.g. the
            ``F.grid_sample`` reference, for comparisons).
        table: :func:`pixel_table` of ``image``, to skip rebuilding it.

    Returns:
        Samples, shape (C, P); border padding.

    Convention:
        The image at stride covers the calibrated image's extent, so
        ``u_level = (u + 0.5) w / W - 0.5`` (equivalently the normalised ``(2u + 1) / W - 1``,
        ``align_corners=False``).
    """
    if sampler is not None:
        g = _normalise_uv(uv, float(width), float(height)).to(image.dtype).view(1, 1, -1, 2)
        out = sampler(image.unsqueeze(0), g, mode="bilinear", padding_mode="border", align_corners=False)
        return out[0, :, 0, :]
    from bevviz.samplers.gather_scatter import GatherResult, bilinear_taps

    c, h, w = image.shape
    uvl = torch.stack([(uv[:, 0] + 0.5) * (w / width) - 0.5, (uv[:, 1] + 0.5) * (h / height) - 0.5], -1)
    taps = bilinear_taps(uvl.to(image.dtype).unsqueeze(0), h, w, "border", False, "pixel")
    table = pixel_table(image) if table is None else table
    return GatherResult(taps.indices, taps.weights, taps.valid, table).values()[0].T


def rig_centre(rig: Rig) -> np.ndarray:
    """Mean optical-centre position of the rig in the ego frame, shape (3,)."""
    return np.stack([c.position for c in rig]).mean(axis=0)


def ring_mask(grid: BEVGrid, rig: Rig, ring: tuple[float, float] = SEAM_RING) -> np.ndarray:
    """Cells whose centre lies ``ring[0]..ring[1]`` metres from the rig centre, shape (H_bev, W_bev)."""
    xs, ys = grid.cell_centers(torch.float64)
    c = rig_centre(rig)
    r = np.hypot(xs.numpy()[:, None] - c[0], ys.numpy()[None, :] - c[1])
    return (r >= ring[0]) & (r <= ring[1])


def _ground_points(grid: BEVGrid) -> torch.Tensor:
    """Cell centres on z = 0, shape (H_bev, W_bev, 3), float64."""
    return grid.with_z((0.0,)).points(torch.float64)[0]


def _pair_cost_t(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor | None = None,
                 eps: float = 1e-3) -> torch.Tensor:
    """1 - NCC of two sets of samples (per channel, weighted, averaged over channels).

    Args:
        a: Samples, shape (C, M).
        b: Samples, shape (C, M).
        w: Optional cell weights >= 0, shape (M,).

    Returns:
        Scalar cost in [0, 2].
    """
    if w is None:
        w = torch.ones(a.shape[1], dtype=a.dtype)
    w = w / (w.sum() + 1e-12)
    za = a - (a * w).sum(dim=1, keepdim=True)
    zb = b - (b * w).sum(dim=1, keepdim=True)
    za = za / ((za.pow(2) * w).sum(dim=1, keepdim=True).sqrt() + eps)
    zb = zb / ((zb.pow(2) * w).sum(dim=1, keepdim=True).sqrt() + eps)
    return 0.5 * ((za - zb).pow(2) * w).sum(dim=1).mean()


def _ngf_cost_t(ga: torch.Tensor, gb: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """1 - correlation of normalised gradient fields: every cell's edge counts at most once.

    Each cell's gradient (d/dx and d/dy of every channel, a 2C-vector) is normalised to
    ``g / sqrt(|g|^2 + eps^2)``, so strong edges (an occluding box's silhouette) weigh no
    more than a lane marking's, and flat cells (asphalt, box faces) weigh nothing.

    Args:
        ga: Gradients, shape (C, M, 2).
        gb: Gradients, shape (C, M, 2).
        w: Cell weights >= 0, shape (M,).
        eps: Gradient magnitude below which a cell counts as flat.

    Returns:
        Scalar cost in [0, 2]: 0 = same edges, 1 = unrelated.
    """
    va = ga.permute(1, 0, 2).reshape(ga.shape[1], -1)  # (M, 2 C)
    vb = gb.permute(1, 0, 2).reshape(gb.shape[1], -1)
    na = va / (va.pow(2).sum(1, keepdim=True) + eps * eps).sqrt()
    nb = vb / (vb.pow(2).sum(1, keepdim=True) + eps * eps).sqrt()
    num = ((na * nb).sum(1) * w).sum()
    den = ((na.pow(2).sum(1) * w).sum() * (nb.pow(2).sum(1) * w).sum()).sqrt() + 1e-9
    return 1.0 - num / den


def _border_weight(uv: torch.Tensor, width: int, height: int, ramp: float) -> torch.Tensor:
    """Soft validity: 0 outside the image, rising linearly to 1 at ``ramp`` pixels inside.

    Args:
        uv: Pixel coordinates, shape (..., 2).
        width: Image width W.
        height: Image height H.
        ramp: Ramp length in pixels.

    Returns:
        Weights in [0, 1], shape (...). Differentiable in ``uv``, so cells entering or
        leaving the image change the seam cost smoothly rather than in jumps.

    Convention:
        The image spans [-0.5, W - 0.5] x [-0.5, H - 0.5] (pixel centres at integers).
    """
    u, v = uv[..., 0], uv[..., 1]
    d = torch.minimum(torch.minimum(u + 0.5, width - 0.5 - u), torch.minimum(v + 0.5, height - 0.5 - v))
    return torch.clamp(d / ramp, 0.0, 1.0)


def seam_cost(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> float:
    """Exposure-robust disagreement of two cameras' colours on shared cells.

    Args:
        a: One camera's colours, shape (C, M) (M shared cells).
        b: The other camera's colours, shape (C, M).

    Returns:
        ``1 - NCC`` averaged over channels: 0 = identical up to gain and offset, 1 = unrelated.
    """
    ta, tb = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    check_shape(ta, ("C", "M"), "a")
    check_shape(tb, (ta.shape[0], ta.shape[1]), "b")
    return float(_pair_cost_t(ta, tb))


# --------------------------------------------------------------------------------------
# Ground truth texture
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroundTruth:
    """A known BEV ground texture.

    Args:
        texture: Colours, shape (H_t, W_t, 3), uint8 or float in [0, 1]; row 0 is the far
            front, column 0 the far left (BEV display orientation).
        x_range: (x_min, x_max) metres covered by the rows (texture frame).
        y_range: (y_min, y_max) metres covered by the columns (texture frame).
        world_from_ego: Pose of the ego frame in the texture's frame, shape (4, 4) (a
            nuScenes ``ego_pose``); None = identity.

    Convention:
        Texel (i, j) has its centre at ``x = x_max - (i + 0.5) dx``, ``y = y_max - (j + 0.5)
        dy`` (as :class:`~bevviz.bev_grid.BEVGrid`).
    """

    texture: np.ndarray
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    world_from_ego: np.ndarray | None = None

    def sample(self, points_xy: torch.Tensor) -> torch.Tensor:
        """Texture colours at ego (x, y) on the ground, shape (P, 2) -> (3, P), float32 in [0, 1]."""
        tex = np.asarray(self.texture)
        check_shape(tex, (None, None, 3), "ground_truth texture")
        t = torch.from_numpy(np.ascontiguousarray(tex, dtype=np.float32) / (255.0 if tex.dtype == np.uint8 else 1.0))
        t = t.permute(2, 0, 1).contiguous()
        pts = torch.as_tensor(points_xy, dtype=torch.float64)[:, :2]
        if self.world_from_ego is not None:
            T = torch.as_tensor(np.asarray(self.world_from_ego, dtype=np.float64))
            check_shape(T, (4, 4), "world_from_ego")
            pts = pts @ T[:2, :2].T + T[:2, 3]  # ground points: z = 0
        H_t, W_t = tex.shape[:2]
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        u = (y1 - pts[:, 1]) / ((y1 - y0) / W_t) - 0.5  # columns: y decreasing
        v = (x1 - pts[:, 0]) / ((x1 - x0) / H_t) - 0.5  # rows: x decreasing
        return sample_at_pixels(t, torch.stack([u, v], -1).float(), W_t, H_t)

    @classmethod
    def on_grid(cls, texture: np.ndarray, grid: BEVGrid) -> "GroundTruth":
        """A texture given cell by cell on ``grid``, shape (H_bev, W_bev, 3)."""
        check_shape(np.asarray(texture), (grid.height, grid.width, 3), "ground_truth")
        return cls(np.asarray(texture), grid.x_range, grid.y_range)


# --------------------------------------------------------------------------------------
# Seam analysis
# --------------------------------------------------------------------------------------

@dataclass
class SeamPair:
    """One seam: two cameras whose ground footprints overlap.

    Attributes:
        a, b: Camera names (rig order).
        cells: Number of shared cells.
        cost: ``1 -`` correlation of the normalised gradient fields over the shared cells
            (0 = the same edges, 1 = unrelated); robust to exposure and to objects.
        ratio: cost / median cost of all seams of the rig.
        ncc: ``1 - NCC`` of the colours over the shared cells (exposure-robust, but objects
            standing in the seam raise it).
    """

    a: str
    b: str
    cells: int
    cost: float
    ratio: float = 1.0
    ncc: float = float("nan")


@dataclass
class SeamAnalysis:
    """Per-camera ground projections and the seams between them.

    Attributes:
        rig: The rig analysed.
        grid: The ground grid (z = 0).
        ring: Cells used, shape (H_bev, W_bev), bool.
        bev: Each camera's projection, shape (N_cam, 3, H_bev, W_bev), float32 in [0, 1]
            (zeros where the camera does not see the cell).
        valid: Which cells each camera sees, shape (N_cam, H_bev, W_bev), bool.
        pairs: The seams, in rig order of (a, b).
        median_cost: Median seam cost (the rig's baseline).
        gt_cost: Per camera cost against the ground truth texture (ground-truth mode), or None.
    """

    rig: Rig
    grid: BEVGrid
    ring: np.ndarray
    bev: np.ndarray
    valid: np.ndarray
    pairs: list[SeamPair]
    median_cost: float
    gt_cost: dict[str, float] | None = None

    def without_ground_truth(self) -> "SeamAnalysis":
        """The same analysis with the ground-truth costs dropped (self-consistency only)."""
        return dataclasses.replace(self, gt_cost=None)

    def neighbours(self, camera: str) -> list[SeamPair]:
        """The seams that involve ``camera``."""
        return [p for p in self.pairs if camera in (p.a, p.b)]

    def overlap_count(self) -> np.ndarray:
        """Number of cameras seeing each cell (inside the ring), shape (H_bev, W_bev), int."""
        return (self.valid & self.ring[None]).sum(axis=0)

    def mosaic(self) -> np.ndarray:
        """Mean of the cameras' projections per cell, shape (H_bev, W_bev, 3), float32 in [0, 1]."""
        v = self.valid.astype(np.float32)[:, None]
        num = (self.bev * v).sum(axis=0)
        den = np.maximum(v.sum(axis=0), 1.0)
        return (num / den).transpose(1, 2, 0)

    def seam_error_map(self) -> np.ndarray:
        """Per-cell disagreement on seams, shape (H_bev, W_bev), float32 (NaN off the seams).

        For each seam the two projections are normalised as in the seam cost and the cell's
        value is half the squared difference, averaged over channels and seams.
        """
        H, W = self.grid.shape
        acc = np.zeros((H, W), np.float64)
        cnt = np.zeros((H, W), np.float64)
        idx = {n: i for i, n in enumerate(self.rig.names)}
        for p in self.pairs:
            i, j = idx[p.a], idx[p.b]
            m = self.valid[i] & self.valid[j] & self.ring
            a, b = self.bev[i][:, m].astype(np.float64), self.bev[j][:, m].astype(np.float64)
            za = (a - a.mean(1, keepdims=True)) / (a.std(1, keepdims=True) + 1e-3)
            zb = (b - b.mean(1, keepdims=True)) / (b.std(1, keepdims=True) + 1e-3)
            acc[m] += 0.5 * ((za - zb) ** 2).mean(0)
            cnt[m] += 1
        out = np.full((H, W), np.nan, np.float32)
        out[cnt > 0] = (acc[cnt > 0] / cnt[cnt > 0]).astype(np.float32)
        return out

    def table(self) -> list[dict]:
        """Rows for a seam table: pair, shared cells, NGF cost, ratio to the median, NCC cost."""
        return [{"camera A": p.a, "camera B": p.b, "shared cells": p.cells,
                 "seam cost (NGF)": round(p.cost, 4), "x rig median": round(p.ratio, 2),
                 "NCC cost": round(p.ncc, 4)}
                for p in self.pairs]


def _bev_gradients(bev: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward differences of BEV images along rows and columns.

    Args:
        bev: BEV images, shape (N, C, H, W).
        valid: Cells each image covers, shape (N, H, W), bool.

    Returns:
        (gradients, shape (N, C, H, W, 2): (next row - cell, next column - cell);
        where the cell and both neighbours are covered, shape (N, H, W), bool).
    """
    gx = torch.zeros_like(bev)
    gy = torch.zeros_like(bev)
    gx[..., :-1, :] = bev[..., 1:, :] - bev[..., :-1, :]
    gy[..., :, :-1] = bev[..., :, 1:] - bev[..., :, :-1]
    ok = valid.clone()
    ok[:, -1, :] = False
    ok[:, :, -1] = False
    ok[:, :-1, :] &= valid[:, 1:, :]
    ok[:, :, :-1] &= valid[:, :, 1:]
    return torch.stack([gx, gy], -1), ok


def _project_ground(rig: Rig, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """uv (N_cam, P, 2) float64 and valid (N_cam, P) of ground points (P, 3)."""
    proj = project_with(points, rig.intrinsics(torch.float64), rig.cam_from_ego(torch.float64),
                        rig.image_sizes())
    return proj.uv, proj.valid


@_on_one_thread
def analyze_seams(rig: Rig, images: Mapping[str, np.ndarray] | torch.Tensor, grid: BEVGrid | None = None,
                  *, stride: int = 2, blur: float = 1.0, ring: tuple[float, float] = SEAM_RING,
                  min_cells: int = MIN_SEAM_CELLS, ground_truth: GroundTruth | np.ndarray | None = None,
                  sampler: Sampler | None = None) -> SeamAnalysis:
    """Project every camera onto the ground and measure every seam.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> uint8 RGB image (H, W, 3), an :class:`ImagePyramid` of them,
            or a stacked float tensor (N_cam, 3, H, W) in [0, 1].
        grid: BEV grid; only its x/y extent and resolution are used (heights are replaced by
            the ground z = 0). Default :func:`seam_grid`.
        stride: Image downsampling before sampling (2 keeps detail and is fast).
        blur: Gaussian sigma (pixels at ``stride``) against aliasing of far cells.
        ring: (r_min, r_max) metres from the rig centre; cells outside are ignored.
        min_cells: Fewest shared cells for a seam.
        ground_truth: Optional known texture (:class:`GroundTruth`, or an array
            (H_bev, W_bev, 3) on ``grid``) for ground-truth mode.
        sampler: ``grid_sample``-compatible sampler; default the two-stage gather-scatter sampler.

    Returns:
        :class:`SeamAnalysis`.
    """
    grid = seam_grid() if grid is None else grid
    if isinstance(images, torch.Tensor):
        imgs = gaussian_blur(resize_area(images, images.shape[-2] // stride, images.shape[-1] // stride), blur)
    else:
        pyr = images if isinstance(images, ImagePyramid) else ImagePyramid(images)
        lv = pyr.levels(rig, rig.names, stride, blur)
        imgs = [lv[n] for n in rig.names]
    pts = _ground_points(grid)  # (H, W, 3)
    H, W = grid.shape
    uv, valid = _project_ground(rig, pts.reshape(-1, 3))
    ring_m = ring_mask(grid, rig, ring)
    ring_t = torch.from_numpy(ring_m.reshape(-1))
    n = len(rig)
    bev = torch.zeros(n, 3, H * W)
    vis = valid & ring_t.unsqueeze(0)
    with torch.no_grad():
        for i, cam in enumerate(rig):
            sel = vis[i].nonzero().squeeze(1)
            if sel.numel():
                bev[i][:, sel] = sample_at_pixels(imgs[i], uv[i, sel].float(), cam.width, cam.height, sampler)
    bev_hw = bev.view(n, 3, H, W)
    grads, gvalid = _bev_gradients(bev_hw, vis.view(n, H, W))
    eps = NGF_EPS * grid.resolution
    pairs: list[SeamPair] = []
    for i in range(n):
        for j in range(i + 1, n):
            m = vis[i] & vis[j]
            cells = int(m.sum())
            if cells >= min_cells:
                gm = (gvalid[i] & gvalid[j]).view(-1)
                ga = grads[i].reshape(3, -1, 2)[:, gm].double()
                gb = grads[j].reshape(3, -1, 2)[:, gm].double()
                w = torch.ones(ga.shape[1], dtype=torch.float64)
                cost = float(_ngf_cost_t(ga, gb, w, eps)) if gm.any() else 1.0
                ncc = float(_pair_cost_t(bev[i][:, m].double(), bev[j][:, m].double()))
                pairs.append(SeamPair(rig.names[i], rig.names[j], cells, cost, ncc=ncc))
    med = float(np.median([p.cost for p in pairs])) if pairs else float("nan")
    for p in pairs:
        p.ratio = p.cost / max(med, 1e-3)
    gt_cost = None
    if ground_truth is not None:
        gt = ground_truth if isinstance(ground_truth, GroundTruth) else GroundTruth.on_grid(ground_truth, grid)
        ref = gt.sample(pts.reshape(-1, 3)[:, :2]).view(1, 3, H, W)
        ref_g, _ = _bev_gradients(ref, torch.ones(1, H, W, dtype=torch.bool))
        gt_cost = {}
        for i, cam in enumerate(rig):
            gm = gvalid[i].view(-1)
            if gm.any():
                ga = grads[i].reshape(3, -1, 2)[:, gm].double()
                gb = ref_g[0].reshape(3, -1, 2)[:, gm].double()
                gt_cost[cam.name] = float(_ngf_cost_t(ga, gb, torch.ones(ga.shape[1], dtype=torch.float64), eps))
            else:
                gt_cost[cam.name] = float("nan")
    return SeamAnalysis(rig, grid.with_z((0.0,)), ring_m, bev.view(n, 3, H, W).numpy(),
                        vis.view(n, H, W).numpy(), pairs, med, gt_cost)


def rig_seam_cost(rig: Rig, images: Mapping[str, np.ndarray], grid: BEVGrid | None = None,
                  **kwargs) -> tuple[float, int]:
    """Mean seam cost of a rig and the number of seams (0 when no footprints overlap).

    Args:
        rig: The rig.
        images: Camera name -> uint8 RGB image (H, W, 3).
        grid: Ground grid; default a coarse (0.4 m) :func:`seam_grid`.
        **kwargs: Passed to :func:`analyze_seams`.

    Returns:
        (mean NGF seam cost over the seams, or NaN without seams; number of seams).
    """
    grid = seam_grid(resolution=0.4) if grid is None else grid
    kwargs.setdefault("stride", 4)
    a = analyze_seams(rig, images, grid, **kwargs)
    if not a.pairs:
        return float("nan"), 0
    return float(np.mean([p.cost for p in a.pairs])), len(a.pairs)


# --------------------------------------------------------------------------------------
# Refinement
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Level:
    """One stage of the coarse-to-fine schedule.

    Attributes:
        stride: Image downsampling factor.
        blur: Gaussian sigma in pixels at that stride.
        cell: BEV cell size in metres (seams are narrow: 0.2 - 0.4 m cells keep enough
            of them; the grid passed in only bounds the ground used).
        steps: Adam steps.
        lr_deg: Adam learning rate for the rotation (degrees per step, roughly).
        lr_cm: Adam learning rate for the translation (cm per step, roughly).
        cost: ``"ncc"`` (colours) or ``"ngf"`` (normalised gradient fields).
        ring: (r_min, r_max) metres for this level, or None for the refinement's ring.
    """

    stride: int
    blur: float
    cell: float
    steps: int
    lr_deg: float
    lr_cm: float = 1.0
    cost: str = "ncc"
    ring: tuple[float, float] | None = None

    @property
    def ramp(self) -> float:
        """Soft border ramp in full-resolution pixels (wider for blurrier levels)."""
        return 4.0 * self.stride * self.blur + 16.0


#: A quicker schedule (coarser cells, fewer steps, 1/4 images at most) for interactive use:
#: about 4x cheaper than :data:`DEFAULT_LEVELS`, ends within a few tenths of a degree.
FAST_LEVELS = (
    Level(stride=8, blur=3.0, cell=0.5, steps=25, lr_deg=0.3),
    Level(stride=4, blur=2.0, cell=0.4, steps=25, lr_deg=0.08, cost="ngf"),
)

#: Scan half-width and step of the multi-start search (see :func:`refine_extrinsics`).
SEARCH_DEG = 4.0
SEARCH_STEP_DEG = 0.5
#: Levels each start runs through before the runs are compared (on the last of them): the
#: blurred first level alone can score a false minimum as low as the true one.
SEARCH_LEVELS = 2

#: Default schedule: a wide basin first (colours of 1/8 images, heavy blur, coarse cells),
#: then normalised gradient fields (sharp and robust to objects standing in a seam) on
#: 1/4 and 1/2 images.
DEFAULT_LEVELS = (
    Level(stride=8, blur=3.0, cell=0.4, steps=40, lr_deg=0.3),
    Level(stride=4, blur=2.0, cell=0.3, steps=40, lr_deg=0.1, cost="ngf"),
    Level(stride=2, blur=1.5, cell=0.2, steps=40, lr_deg=0.03, cost="ngf"),
)


@dataclass(frozen=True)
class RefineStep:
    """One optimisation step.

    Attributes:
        step: Global step index.
        level: Index of the schedule level.
        loss: Seam loss of the level's cost over the camera's seams (robustly combined,
            see :meth:`_SeamObjective.loss`) before the update.
        rotation_deg: Current correction as a rotation vector in the camera's body frame
            (FLU: roll, pitch, yaw axes), degrees, shape (3,).
        translation_cm: Current translation correction in the ego frame, cm, shape (3,).
    """

    step: int
    level: int
    loss: float
    rotation_deg: tuple[float, float, float]
    translation_cm: tuple[float, float, float]


@dataclass
class RefineHistory:
    """What :func:`refine_extrinsics` did.

    Attributes:
        camera: The refined camera.
        steps: Every step, in order.
        neighbours: Cameras whose seams drove the refinement.
        initial_loss: Seam loss at the start, on the finest level.
        final_loss: Seam loss at the end, on the finest level.
        delta: The correction as a :class:`CameraDelta` (before -> after).
        seconds: Wall time.
        search_start_deg: Start (body FLU roll, pitch, yaw, degrees) of the kept run of the
            coarse stage: zeros unless a scan's start ended lower than the given pose.
    """

    camera: str
    steps: list[RefineStep] = field(default_factory=list)
    neighbours: list[str] = field(default_factory=list)
    initial_loss: float = float("nan")
    final_loss: float = float("nan")
    delta: CameraDelta | None = None
    seconds: float = 0.0
    search_start_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def losses(self) -> list[float]:
        """Loss per step."""
        return [s.loss for s in self.steps]

    def rows(self) -> list[dict]:
        """One dict per step (for a table or a chart)."""
        return [{"step": s.step, "level": s.level, "loss": s.loss,
                 "roll_deg": s.rotation_deg[0], "pitch_deg": s.rotation_deg[1], "yaw_deg": s.rotation_deg[2],
                 "dx_cm": s.translation_cm[0], "dy_cm": s.translation_cm[1], "dz_cm": s.translation_cm[2]}
                for s in self.steps]


def seam_neighbours(rig: Rig, camera: str, grid: BEVGrid | None = None, ring: tuple[float, float] = SEAM_RING,
                    min_area_m2: float = MIN_SEAM_AREA_M2, margin: float = 0.1) -> list[str]:
    """Cameras whose ground footprint overlaps ``camera``'s (image bounds widened by ``margin``).

    Args:
        rig: The rig.
        camera: Camera name.
        grid: Ground grid; default :func:`seam_grid` at 0.5 m (footprints only, no images).
        ring: (r_min, r_max) metres from the rig centre.
        min_area_m2: Smallest shared ground area for a neighbour.
        margin: Widening of ``camera``'s image bounds, as a fraction of its size (so that
            a camera whose error shrank its seam still finds its neighbour).

    Returns:
        Neighbour names in rig order.
    """
    grid = seam_grid(resolution=0.5) if grid is None else grid
    k = rig.index(camera)
    pts = _ground_points(grid).reshape(-1, 3)
    uv, valid = _project_ground(rig, pts)
    valid = valid & torch.from_numpy(ring_mask(grid, rig, ring).reshape(-1)).unsqueeze(0)
    near = _near_image(rig[camera], pts, uv[k], margin)
    min_cells = min_area_m2 / grid.resolution ** 2
    return [rig.names[j] for j in range(len(rig))
            if j != k and float((near & valid[j]).sum()) >= min_cells]


def _near_image(cam: Camera, pts: torch.Tensor, uv: torch.Tensor, margin: float) -> torch.Tensor:
    """Points (P, 3) in front of ``cam`` whose pixels uv (P, 2) fall inside its widened image, (P,) bool."""
    u, v = uv[:, 0], uv[:, 1]
    mw, mh = margin * cam.width, margin * cam.height
    near = (u > -0.5 - mw) & (u < cam.width - 0.5 + mw) & (v > -0.5 - mh) & (v < cam.height - 0.5 + mh)
    depth = pts.to(torch.float64) @ torch.tensor(cam.cam_from_ego[2, :3]) + float(cam.cam_from_ego[2, 3])
    return near & (depth > 0.1)


class _SeamObjective:
    """Seam loss of one camera against fixed neighbours over one or more frames, at one level.

    The seam geometry (cells, their 3-point stencils, the neighbours' border weights) is the
    same in every frame of a rig, so it is built once; per step the refined camera's
    projection is computed once and its images of all frames are sampled in ONE two-stage
    gather (taps once, frame offsets added to the indices). The neighbours' colours are
    sampled once (no gradient). Cells are weighted by a soft border ramp in both images
    (:func:`_border_weight`), so the loss stays continuous while cells enter and leave the
    refined camera's image. Every (frame, neighbour) seam is one term.

    Args:
        rig: The rig.
        frames: Per frame, camera name -> image at this level, shape (3, h, w), for the
            camera and its neighbours (same level size in every frame).
        grid: Ground grid of this level.
        camera: The refined camera.
        neighbours: Cameras to compare with.
        ring: (r_min, r_max) metres.
        sampler: ``grid_sample``-compatible sampler, or None for the two-stage gather-scatter
            sampler.
        kind: ``"ncc"`` (colours, wide basin) or ``"ngf"`` (normalised gradient fields:
            sharp, and robust to objects standing on the ground).
        ramp: Border ramp in full-resolution pixels.
        margin: Widening of the camera's image bounds when choosing candidate cells.
    """

    def __init__(self, rig: Rig, frames: Sequence[Mapping[str, torch.Tensor]], grid: BEVGrid, camera: str,
                 neighbours: Sequence[str], ring: tuple[float, float], sampler: Sampler | None,
                 kind: str = "ncc", ramp: float = 32.0, margin: float = 0.1) -> None:
        check_choice(kind, COSTS, "cost")
        self.camera, self.sampler, self.kind, self.ramp = rig[camera], sampler, kind, float(ramp)
        self.ngf_eps = NGF_EPS * grid.resolution
        self.imgs = [f[camera] for f in frames]  # F x (3, h, w)
        self.table = None
        if sampler is None:
            from bevviz.samplers.gather_scatter import feature_table

            self.table = feature_table(torch.stack(self.imgs))  # (F h w + 1, 3)
        cam = self.camera
        pts = _ground_points(grid).reshape(-1, 3)
        pts = pts[torch.from_numpy(ring_mask(grid, rig, ring).reshape(-1))]
        uv, _ = _project_ground(rig.subset([camera]), pts)
        pts = pts[_near_image(cam, pts, uv[0], margin)]
        self.min_weight = max(8.0, 0.5 * MIN_SEAM_AREA_M2 / grid.resolution ** 2)
        step = grid.resolution
        offs = torch.tensor([[0.0, 0.0, 0.0], [step, 0.0, 0.0], [0.0, step, 0.0]], dtype=torch.float64)
        self.names: list[str] = []
        p3s, cols, ws = [], [], []
        for name in neighbours:
            other = rig[name]
            uv_o, ok_o = _project_ground(rig.subset([name]), pts)
            w_o = _border_weight(uv_o[0], other.width, other.height, self.ramp) * ok_o[0]
            keep = w_o > 0
            pc, w_o = pts[keep], w_o[keep]
            if float(w_o.sum()) < self.min_weight:
                continue
            p3 = pc.unsqueeze(0) + offs.unsqueeze(1)  # (3, M, 3)
            uv3, ok3 = _project_ground(rig.subset([name]), p3.reshape(-1, 3))
            ok = ok3[0].view(3, -1).all(dim=0)
            p3, w_o = p3[:, ok], w_o[ok]
            uv_n = uv3[0].view(3, -1, 2)[:, ok].reshape(-1, 2).float()
            with torch.no_grad():
                col = torch.stack([sample_at_pixels(f[name], uv_n, other.width, other.height, sampler)
                                   for f in frames])  # (F, C, 3 M)
            self.names.append(name)
            p3s.append(p3.float())
            cols.append(col.view(col.shape[0], col.shape[1], 3, -1))
            ws.append(w_o.float())
        if self.names:
            self.sizes = [w.shape[0] for w in ws]
            self.p3_all = torch.cat(p3s, dim=1).reshape(-1, 3)  # (3 M_all, 3), stencil-major
            self.col_all = torch.cat(cols, dim=3)  # (F, C, 3, M_all)
            self.w_all = torch.cat(ws)  # (M_all,)
            self.seg = torch.repeat_interleave(torch.arange(len(ws)), torch.tensor(self.sizes))
        self.K = torch.tensor(cam.K, dtype=torch.float32).unsqueeze(0)
        self.R0 = torch.tensor(cam.cam_from_ego[:3, :3], dtype=torch.float32)
        self.c0 = torch.tensor(cam.position, dtype=torch.float32)
        self.size = torch.tensor([[cam.width, cam.height]])
        self.rdf_from_flu = torch.tensor(FLU_FROM_RDF.T, dtype=torch.float32)

    @property
    def terms(self) -> list[tuple[int, str]]:
        """(frame index, neighbour name) of every seam term."""
        return [(f, n) for f in range(len(self.imgs)) for n in self.names]

    @property
    def neighbours(self) -> list[str]:
        return list(self.names)

    def transform(self, rot_deg: torch.Tensor, trans_cm: torch.Tensor) -> torch.Tensor:
        """cam_from_ego of the corrected camera, shape (4, 4).

        ``rot_deg`` (3,) is a body-frame (FLU) rotation vector in degrees; the corrected
        ``ego_from_body = ego_from_body0 @ exp(rot)``; ``trans_cm`` (3,) moves the centre.
        """
        omega_rdf = self.rdf_from_flu @ (rot_deg * (math.pi / 180.0))  # rotation vectors rotate like vectors
        A = axis_angle_to_matrix(omega_rdf)
        R = A.T @ self.R0  # ego_from_cam' = ego_from_cam0 @ A
        t = -(R @ (self.c0 + trans_cm / 100.0))
        top = torch.cat([R, t.unsqueeze(1)], dim=1)
        return torch.cat([top, torch.tensor([[0.0, 0.0, 0.0, 1.0]])], dim=0)

    def _sample(self, uv: torch.Tensor) -> torch.Tensor:
        """The refined camera's images of every frame at full-resolution pixels uv (S, 2): (F, C, S)."""
        W, H = self.camera.width, self.camera.height
        if self.table is None:
            return torch.stack([sample_at_pixels(img, uv, W, H, self.sampler) for img in self.imgs])
        from bevviz.samplers.gather_scatter import GatherResult, bilinear_taps

        F_, (c, h, w) = len(self.imgs), self.imgs[0].shape
        uvl = torch.stack([(uv[:, 0] + 0.5) * (w / W) - 0.5, (uv[:, 1] + 0.5) * (h / H) - 0.5], -1)
        taps = bilinear_taps(uvl.unsqueeze(0), h, w, "border", False, "pixel")  # (1, S, 4)
        base = taps.indices.to(torch.int64)
        base = torch.where(base == h * w, torch.full_like(base, F_ * h * w), base)  # sentinel of the stack
        offs = (torch.arange(F_) * (h * w)).view(F_, 1, 1)
        idx = torch.where(base == F_ * h * w, base, base + offs)  # (F, S, 4)
        res = GatherResult(idx, taps.weights.expand(F_, -1, -1), taps.valid.expand(F_, -1, -1), self.table)
        return res.values().transpose(1, 2)  # (F, C, S)

    def pair_losses(self, rot_deg: torch.Tensor, trans_cm: torch.Tensor) -> list[torch.Tensor]:
        """Seam cost of every (frame, neighbour) term, frame-major (scalars, differentiable); 1
        for a seam that has left the image."""
        if not self.names:
            return []
        T = self.transform(rot_deg, trans_cm).unsqueeze(0)
        W, H = self.camera.width, self.camera.height
        proj = project_with(self.p3_all, self.K, T, self.size)
        front = proj.in_front[0].view(3, -1).all(dim=0)  # (M,)
        uv = proj.uv[0].view(3, -1, 2)
        w_t = _border_weight(uv[0], W, H, self.ramp) * front
        m = w_t.detach() > 0
        w = (w_t * self.w_all)[m]
        counts = torch.bincount(self.seg[m], minlength=len(self.names)).tolist()
        if self.kind == "ncc":  # colours: the cell centre only
            mine = self._sample(uv[0, m])  # (F, C, S)
            theirs = self.col_all[:, :, 0, m]
        else:
            mine = self._sample(uv[:, m].reshape(-1, 2))
            mine = mine.view(mine.shape[0], mine.shape[1], 3, -1)  # (F, C, 3, S)
            theirs = self.col_all[:, :, :, m]
        costs = []
        for f in range(mine.shape[0]):
            for a, b, wk in zip(mine[f].split(counts, dim=-1), theirs[f].split(counts, dim=-1), w.split(counts)):
                if float(wk.detach().sum()) < self.min_weight:
                    costs.append(1.0 + 0.0 * rot_deg.sum())
                elif self.kind == "ncc":
                    costs.append(_pair_cost_t(a, b, wk))
                else:
                    ga = torch.stack([a[:, 1] - a[:, 0], a[:, 2] - a[:, 0]], -1)
                    gb = torch.stack([b[:, 1] - b[:, 0], b[:, 2] - b[:, 0]], -1)
                    costs.append(_ngf_cost_t(ga, gb, wk, self.ngf_eps))
        return costs

    def loss(self, rot_deg: torch.Tensor, trans_cm: torch.Tensor, robust: float | None = None) -> torch.Tensor:
        """Seam loss over every (frame, neighbour) term (scalar, differentiable).

        With ``robust = k`` the terms are combined as ``k * mean(log(1 + cost / k))``: a seam
        that stays bad whatever the pose (an object standing in it) pulls far less than a
        seam that is nearly aligned. ``None``: the plain mean cost.
        """
        costs = self.pair_losses(rot_deg, trans_cm)
        if not costs:
            raise field_error("camera", self.camera.name,
                              "has no seam with another camera on this grid; nothing to refine against")
        c = torch.stack(costs)
        if robust is None:
            return c.mean()
        return robust * torch.log1p(c.clamp(min=0.0) / robust).mean()


def as_frames(images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]]) -> list[Mapping[str, np.ndarray]]:
    """One frame (camera name -> image) or several, as a list of frames.

    Several frames of the same rig (e.g. the samples of a nuScenes scene: the extrinsics are
    fixed to the ego frame, whatever the ego pose) give seams that objects hide in one frame
    but not in another.
    """
    if isinstance(images, Mapping):
        return [images]
    frames = list(images)
    if not frames or not all(isinstance(f, (Mapping, ImagePyramid)) for f in frames):
        raise field_error("images", type(images).__name__,
                          "must be a dict camera name -> image, or a non-empty list of such dicts")
    return frames


def _level_grid(grid: BEVGrid, cell: float) -> BEVGrid:
    """The grid's extent (rounded out to whole cells) at ``cell`` metres per cell, on z = 0."""
    if abs(cell - grid.resolution) < 1e-9:
        return grid.with_z((0.0,))
    cx, cy = (grid.x_range[0] + grid.x_range[1]) / 2, (grid.y_range[0] + grid.y_range[1]) / 2
    nx = int(math.ceil((grid.x_range[1] - grid.x_range[0]) / cell / 2))
    ny = int(math.ceil((grid.y_range[1] - grid.y_range[0]) / cell / 2))
    return BEVGrid((cx - nx * cell, cx + nx * cell), (cy - ny * cell, cy + ny * cell), (0.0,), cell)


class _Adam:
    """Adam with one second moment per parameter *tensor* (not per coordinate).

    Plain Adam normalises every coordinate separately, so its first steps move roll, pitch
    and yaw by the same amount whatever the gradient says; sharing the second moment over a
    rotation vector keeps the gradient's direction (weakly observed axes move slowly).

    Args:
        params: Parameter tensors (each gets its own learning rate).
        lrs: Learning rate per tensor.
        betas: Moment decay rates.
        eps: Denominator guard.
    """

    def __init__(self, params: Sequence[torch.Tensor], lrs: Sequence[float], betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lrs, self.betas, self.eps = list(params), list(lrs), betas, eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros(()) for _ in self.params]
        self.t = 0

    def step(self, scale: float = 1.0) -> None:
        """One update with every learning rate multiplied by ``scale``."""
        self.t += 1
        b1, b2 = self.betas
        with torch.no_grad():
            for k, (p, lr) in enumerate(zip(self.params, self.lrs)):
                if p.grad is None:
                    continue
                g = p.grad
                self.m[k].mul_(b1).add_(g, alpha=1 - b1)
                self.v[k] = self.v[k] * b2 + (1 - b2) * g.pow(2).mean()
                mhat = self.m[k] / (1 - b1 ** self.t)
                vhat = self.v[k] / (1 - b2 ** self.t)
                p.sub_(lr * scale * mhat / (vhat.sqrt() + self.eps))
                p.grad = None


class ImagePyramid:
    """One frame's images, downsampled and blurred on demand and cached.

    Args:
        images: Camera name -> uint8 RGB image, shape (H, W, 3).

    Convention:
        A level at stride s is the whole image area-resized to (W // s, H // s) (pixel
        centres kept; OpenCV ``INTER_AREA`` on float32), then Gaussian-blurred with sigma in
        level pixels (reflect border). Sample it with coordinates normalised by the
        calibrated image size, as :mod:`bevviz.features` does.
    """

    def __init__(self, images: Mapping[str, np.ndarray]) -> None:
        if not isinstance(images, Mapping):
            raise field_error("images", type(images).__name__, "must be a dict camera name -> image")
        self.images = images
        self._cache: dict[tuple[str, int, float], torch.Tensor] = {}

    def _image(self, rig: Rig, name: str) -> np.ndarray:
        cam = rig[name]
        if name not in self.images:
            raise field_error("images", sorted(self.images), f"no image for camera {name}")
        img = np.asarray(self.images[name])
        check_shape(img, (cam.height, cam.width, 3), "image", name)
        if img.dtype != np.uint8:
            raise field_error("image dtype", str(img.dtype), "must be uint8 RGB", name)
        return img

    def level(self, rig: Rig, name: str, stride: int, blur: float) -> torch.Tensor:
        """Camera ``name``'s image at ``stride``, blurred by ``blur`` level pixels: (3, H // s, W // s)."""
        key = (name, int(stride), round(float(blur), 4))
        if key not in self._cache:
            import cv2

            img = self._image(rig, name).astype(np.float32) * np.float32(1.0 / 255.0)
            H, W = img.shape[:2]
            h, w = max(1, H // stride), max(1, W // stride)
            if (h, w) != (H, W):
                img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
            if blur > 0.3:
                img = cv2.GaussianBlur(img, (0, 0), float(blur), borderType=cv2.BORDER_REFLECT)
            self._cache[key] = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
        return self._cache[key]

    def levels(self, rig: Rig, names: Sequence[str], stride: int, blur: float) -> dict[str, torch.Tensor]:
        """:meth:`level` for several cameras, as a dict."""
        return {n: self.level(rig, n, stride, blur) for n in names}


def as_pyramids(images) -> list[ImagePyramid]:
    """Frames (see :func:`as_frames`) as :class:`ImagePyramid` objects (kept if they already are)."""
    if isinstance(images, ImagePyramid):
        return [images]
    if isinstance(images, Sequence) and images and all(isinstance(f, ImagePyramid) for f in images):
        return list(images)
    return [f if isinstance(f, ImagePyramid) else ImagePyramid(f) for f in as_frames(images)]


@_on_one_thread
def refine_extrinsics(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                      grid: BEVGrid | None = None, camera: str | None = None, *, translation: bool = False,
                      levels: Sequence[Level] = DEFAULT_LEVELS, ring: tuple[float, float] = SEAM_RING,
                      neighbours: Sequence[str] | None = None, robust: float | None = ROBUST_K,
                      sampler: Sampler | None = None, search_deg: float = SEARCH_DEG,
                      progress: Callable[[int, int, float], None] | None = None) -> tuple[Rig, RefineHistory]:
    """Refine one camera's extrinsics by minimising its seam inconsistency (self-consistency).

    Args:
        rig: The rig; every camera but ``camera`` is held fixed.
        images: Camera name -> uint8 RGB image, shape (H, W, 3); or a list of such frames
            of the same rig (all seams of all frames are combined); or
            :class:`ImagePyramid` objects (their downsampled levels are cached).
        grid: Ground grid; only its extent is used (it bounds the ground compared), the
            cell sizes come from ``levels``. Default :func:`seam_grid` (out to 30 m).
        camera: Camera to refine; default the first finding of :func:`diagnose`.
        translation: Also refine the optical centre (weakly constrained by seams: a shift of
            a few cm changes the ground by the same few cm, a rotation by far more).
        levels: Coarse-to-fine schedule (:class:`Level`).
        ring: (r_min, r_max) metres of ground used.
        neighbours: Cameras to compare with; default :func:`seam_neighbours`.
        robust: Scale k of the robust combination of seam terms ``k log(1 + cost / k)``
            (a seam an object hides stays bad whatever the pose and should pull less);
            ``None`` for the plain mean.
        sampler: Optional ``grid_sample``-compatible sampler instead of the default
            two-stage gather-scatter sampler (whose tap weights carry the gradient with
            respect to the sampling positions).
        search_deg: Also start from the lowest local minima (two per axis) of 1-D scans of
            each rotation axis over ``+-search_deg`` on the first level's loss (see
            :func:`_search_starts`), run every start through the first ``SEARCH_LEVELS``
            levels and keep the run that ends lowest on the last of them; 0 disables it. Periodic ground (a metric checker,
            tiles, parking bays) gives false minima one period away (about 3 deg for a 1 m
            pattern 20 m out) that gradient descent from the given pose alone falls into.
        progress: Optional ``callback(step, total_steps, loss)`` after every optimisation
            step run, those of the search's alternative starts included (``total_steps``
            counts them, so it can exceed the schedule's own step count).

    Returns:
        (the rig with the refined camera, :class:`RefineHistory`).

    Raises:
        ValueError: unknown camera, or a camera with no seam to refine against.

    Convention:
        The correction is a body-frame (FLU) rotation vector in degrees and an ego-frame
        translation in cm, applied as ``ego_from_body' = ego_from_body @ exp(rot)``.
    """
    t0 = time.perf_counter()
    grid = seam_grid() if grid is None else grid
    if camera is None:
        camera = diagnose(rig, images, grid, sampler=sampler)[0].camera
    rig[camera]  # named error for an unknown camera
    nbrs = list(neighbours) if neighbours is not None else seam_neighbours(rig, camera, ring=ring)
    if not nbrs:
        raise field_error("camera", camera, "has no seam with another camera; nothing to refine against")
    pyrs = as_pyramids(images)
    hist = RefineHistory(camera, neighbours=nbrs)
    total = sum(lv.steps for lv in levels)
    objectives: dict[int, _SeamObjective] = {}

    def objective(li: int) -> _SeamObjective:
        if li not in objectives:
            lv = levels[li]
            obj = _SeamObjective(rig, [pyr.levels(rig, [camera, *nbrs], lv.stride, lv.blur) for pyr in pyrs],
                                 _level_grid(grid, lv.cell), camera, nbrs, lv.ring or ring, sampler,
                                 kind=lv.cost, ramp=lv.ramp)
            if not obj.terms:
                raise field_error("camera", camera, "has no seam with another camera on this grid; "
                                  "nothing to refine against")
            objectives[li] = obj
        return objectives[li]

    done = [0, total]  # optimisation steps run so far, and in all

    def tick(loss: float) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], done[1], loss)

    def run(start: torch.Tensor, trans: torch.Tensor, first: int, stop: int):
        """Levels first .. stop - 1 from one start: (rot, trans, end loss, steps per level)."""
        rot, end, per_level = start, float("nan"), []
        for li in range(first, stop):
            rot, trans, end, steps = _run_level(objective(li), levels[li], rot, trans, translation, robust,
                                                on_step=tick)
            per_level.append(steps)
        return rot, trans, end, per_level

    # The coarse stage (first SEARCH_LEVELS levels) runs from the given pose and from every
    # scan start; the run ending lowest on the stage's last (sharpest) level is kept.
    stage = min(SEARCH_LEVELS, len(levels)) if search_deg > 0 else 1
    starts = [torch.zeros(3)]
    if search_deg > 0:
        with torch.no_grad():
            starts += _search_starts(lambda r: float(objective(0).loss(r, torch.zeros(3), robust)), search_deg)
    done[1] = total + (len(starts) - 1) * sum(lv.steps for lv in levels[:stage])
    runs = [run(start, torch.zeros(3), 0, stage) for start in starts]
    best = min(range(len(runs)), key=lambda k: (runs[k][2], k))  # the given pose wins ties
    hist.search_start_deg = tuple(float(v) for v in starts[best])
    rot, trans, _, per_level = runs[best]
    if stage < len(levels):
        rot, trans, _, rest = run(rot, trans, stage, len(levels))
        per_level += rest
    for li, steps in enumerate(per_level):
        for loss, r, t in steps:
            hist.steps.append(RefineStep(len(hist.steps), li, loss, r, t))
    obj = objective(len(levels) - 1)
    with torch.no_grad():
        hist.initial_loss = float(obj.loss(torch.zeros(3), torch.zeros(3)))
        hist.final_loss = float(obj.loss(rot, trans))
    cam0 = rig[camera]
    new_cam = _apply_correction(cam0, rot.detach().double().numpy(), trans.detach().double().numpy())
    new_rig = rig.replace(new_cam)
    hist.delta = camera_delta(cam0, new_cam)
    hist.seconds = time.perf_counter() - t0
    return new_rig, hist


def _run_level(obj: "_SeamObjective", lv: Level, rot0: torch.Tensor, trans0: torch.Tensor,
               translation: bool, robust: float | None, on_step: Callable[[float], None] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, float, list[tuple[float, tuple, tuple]]]:
    """Adam on one level from ``(rot0 (3,), trans0 (3,))`` (degrees, cm); ``on_step(loss)``
    after each step.

    Returns:
        (rotation (3,), translation (3,), the level's loss there, per step (loss before the
        update, rotation, translation)).
    """
    rot = rot0.detach().clone().requires_grad_(True)
    trans = trans0.detach().clone().requires_grad_(bool(translation))
    params = [rot, trans] if translation else [rot]
    opt = _Adam(params, [lv.lr_deg, lv.lr_cm][:len(params)])
    steps = []
    for i in range(lv.steps):
        loss = obj.loss(rot, trans, robust)
        loss.backward()
        steps.append((float(loss.detach()), tuple(float(v) for v in rot.detach()),
                      tuple(float(v) for v in trans.detach())))
        # Cosine decay to 5 % of the level's learning rate.
        opt.step(0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * i / max(lv.steps, 1))))
        if on_step is not None:
            on_step(steps[-1][0])
    rot, trans = rot.detach(), trans.detach()
    with torch.no_grad():
        end = float(obj.loss(rot, trans, robust))
    return rot, trans, end, steps


def _search_starts(loss: Callable[[torch.Tensor], float], radius_deg: float,
                   step_deg: float | None = None, per_axis: int = 2) -> list[torch.Tensor]:
    """Extra starting rotations: per axis, the lowest minima of a 1-D scan below the start.

    Each axis (roll, pitch, yaw of the body FLU frame) is scanned alone over
    ``+-radius_deg`` in steps of ``step_deg`` (default ``SEARCH_STEP_DEG``), the other two
    held at zero. The scan's local minima that are lower than the loss at zero (zero itself
    excluded) become starts, the ``per_axis`` lowest of each axis: a blurred loss can
    score a false minimum one pattern period away as low as the true one, so the best
    point alone is not enough. The caller refines from zero and from each start and keeps
    the lowest end: a wrong start costs time, never accuracy.

    Args:
        loss: ``loss(rotation_deg (3,)) -> float``.
        radius_deg: Scan half-width, degrees.
        step_deg: Scan step, degrees.
        per_axis: Most starts taken from one axis.

    Returns:
        Up to ``3 * per_axis`` rotations, each shape (3,).
    """
    step = SEARCH_STEP_DEG if step_deg is None else step_deg
    count = int(round(radius_deg / step))
    offsets = [k * step for k in range(-count, count + 1)]
    at_zero = loss(torch.zeros(3))
    starts = []
    for axis in range(3):
        points = []
        for value in offsets:
            cand = torch.zeros(3)
            cand[axis] = value
            points.append((at_zero if value == 0 else loss(cand), cand))
        vals = [v for v, _ in points]
        minima = [points[k] for k in range(len(points))
                  if offsets[k] != 0 and vals[k] < at_zero
                  and (k == 0 or vals[k] <= vals[k - 1]) and (k == len(vals) - 1 or vals[k] <= vals[k + 1])]
        starts += [cand for _, cand in sorted(minima, key=lambda m: m[0])[:per_axis]]
    return starts


def _apply_correction(camera: Camera, rot_deg: np.ndarray, trans_cm: np.ndarray) -> Camera:
    """Camera with a body-frame rotation vector (deg, (3,)) and ego translation (cm, (3,)) applied."""
    omega_rdf = FLU_FROM_RDF.T @ np.radians(rot_deg)
    A = axis_angle_to_matrix(torch.as_tensor(omega_rdf, dtype=torch.float64)).numpy()
    E = camera.ego_from_cam
    new_E = make_transform(E[:3, :3] @ A, E[:3, 3] + trans_cm / 100.0)
    return camera.replace(cam_from_ego=invert_transform(new_E))


# --------------------------------------------------------------------------------------
# Diagnosis
# --------------------------------------------------------------------------------------

@dataclass
class CameraFinding:
    """How suspicious one camera's calibration is.

    Attributes:
        camera: Camera name.
        score: Higher is worse. Thorough diagnosis (default): by how much the seam loss of
            the camera's seams drops when the camera alone is allowed to rotate (a quick
            coarse-to-fine refinement); a misaligned camera fixes *both* of its seams, a good
            neighbour can only trade one seam against the other. Quick diagnosis: its
            better seam as a multiple of the rig's median seam cost. Ground-truth mode: its
            cost against the known texture (whole footprint) as a multiple of the rig's
            median.
        reason: A readable sentence.
        seams: The camera's seams (costs averaged over the frames).
        quick_score: The quick score (second-worst seam / rig median), always filled.
        correction_deg: Rotation (degrees) the quick refinement applied, or None.
        gt_cost: Cost against the ground truth (ground-truth mode only).
    """

    camera: str
    score: float
    reason: str
    seams: list[SeamPair] = field(default_factory=list)
    quick_score: float = 0.0
    correction_deg: float | None = None
    gt_cost: float | None = None

    @property
    def seam_ratios(self) -> dict[str, float]:
        """Neighbour name -> that seam's cost as a multiple of the rig median."""
        return {(p.b if p.a == self.camera else p.a): p.ratio for p in self.seams}


#: Quick refinement used by :func:`diagnose` to test each suspect.
DIAGNOSE_LEVELS = (
    Level(stride=8, blur=3.0, cell=0.4, steps=25, lr_deg=0.3),
    Level(stride=4, blur=2.0, cell=0.3, steps=15, lr_deg=0.1, cost="ngf"),
)


def combine_seams(analyses: Sequence[SeamAnalysis]) -> tuple[list[SeamPair], float]:
    """Seams of several frames averaged pair by pair.

    Args:
        analyses: One :class:`SeamAnalysis` per frame (same rig).

    Returns:
        (one :class:`SeamPair` per camera pair seen in any frame, with the mean cost and
        total cells; the median of those costs).
    """
    acc: dict[tuple[str, str], list[SeamPair]] = {}
    for a in analyses:
        for p in a.pairs:
            acc.setdefault((p.a, p.b), []).append(p)
    pairs = [SeamPair(a, b, sum(p.cells for p in ps), float(np.mean([p.cost for p in ps])),
                      ncc=float(np.mean([p.ncc for p in ps]))) for (a, b), ps in acc.items()]
    med = float(np.median([p.cost for p in pairs])) if pairs else float("nan")
    for p in pairs:
        p.ratio = p.cost / max(med, 1e-3)
    return pairs, med


def _quick(camera: str, pairs: Sequence[SeamPair], median: float) -> tuple[float, str, list[SeamPair]]:
    seams = [p for p in pairs if camera in (p.a, p.b)]
    seams.sort(key=lambda p: -p.ratio)
    others = [p.b if p.a == camera else p.a for p in seams]
    ratios = [p.ratio for p in seams]
    if len(ratios) >= 2:
        score = ratios[1]
        reason = (f"seams with {others[0]} and {others[1]} {ratios[0]:.1f}x and {ratios[1]:.1f}x "
                  f"the rig median seam cost ({median:.3f})")
    elif len(ratios) == 1:
        score = 0.5 * ratios[0]
        reason = (f"only one seam (with {others[0]}), {ratios[0]:.1f}x the rig median; one seam cannot tell "
                  "which side is off")
    else:
        score, reason = 0.0, "no seam with any other camera on this grid; cannot be judged from seams"
    return float(score), reason, seams


def standout(quick: Sequence[CameraFinding], ratio: float = STANDOUT_RATIO) -> CameraFinding | None:
    """The camera whose seams stand out in a quick diagnosis, or None if none does.

    Args:
        quick: Findings of ``diagnose(..., thorough=False)`` (worst first).
        ratio: Quick score from which a camera stands out (see :data:`STANDOUT_RATIO`).

    Returns:
        The worst finding if its score is at least ``ratio`` times the rig median, else None
        (the seams disagree about equally: nothing points at one camera).
    """
    if not quick:
        return None
    worst = max(quick, key=lambda f: f.score)
    return worst if worst.score >= ratio else None


@_on_one_thread
def diagnose(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
             grid: BEVGrid | None = None, ground_truth: GroundTruth | np.ndarray | None = None, *,
             thorough: bool = True, suspects: int | None = 3, levels: Sequence[Level] = DIAGNOSE_LEVELS,
             analyses: Sequence[SeamAnalysis] | None = None, sampler: Sampler | None = None,
             progress: Callable[[int, int, str], None] | None = None, **kwargs) -> list[CameraFinding]:
    """Rank the rig's cameras by how likely their extrinsics are wrong; worst first.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> uint8 RGB image (H, W, 3), or a list of such frames of the
            same rig (seams hidden by objects in one frame may be clear in another).
        grid: Ground grid (extent and resolution); default :func:`seam_grid`.
        ground_truth: Optional known BEV texture (:class:`GroundTruth` or an array
            (H_bev, W_bev, 3) on ``grid``) in the first frame's ego frame: ground-truth mode
            (each camera's projection against the texture; ``thorough`` is not needed).
            Without it: self-consistency (seams only).
        thorough: Self-consistency mode: test the suspects by letting each rotate alone (a
            quick refinement) and rank by how much that repairs their seams. ``False``: rank
            by the seam costs only (fast, for live views; fooled by seams that objects hide).
        suspects: How many cameras (highest quick score first) the thorough test tries;
            ``None`` = all.
        levels: Schedule of the quick refinement.
        analyses: Precomputed :func:`analyze_seams` results, one per frame.
        sampler: ``grid_sample``-compatible sampler; default the two-stage gather-scatter sampler.
        progress: Optional ``callback(done, total, camera)`` for the thorough test.
        **kwargs: Passed to :func:`analyze_seams` (``stride``, ``blur``, ``ring``, ...).

    Returns:
        One :class:`CameraFinding` per camera, worst (highest score) first.

    Convention:
        Seam costs are ``1 -`` normalised-gradient-field correlation (see
        :class:`SeamPair`); the thorough score is the drop of the camera's mean seam cost
        (over its seams in every frame) under the quick refinement, in the same units.
    """
    frames = as_pyramids(images)
    grid = seam_grid() if grid is None else grid
    if analyses is None:
        analyses = [analyze_seams(rig, f, grid, ground_truth=ground_truth if k == 0 else None,
                                  sampler=sampler, **kwargs) for k, f in enumerate(frames)]
    pairs, med = combine_seams(analyses)
    gt_cost = analyses[0].gt_cost
    gt_med = None
    if gt_cost is not None:
        vals = [v for v in gt_cost.values() if np.isfinite(v)]
        gt_med = float(np.median(vals)) if vals else float("nan")
    findings: dict[str, CameraFinding] = {}
    quick_text: dict[str, str] = {}
    for cam in rig.names:
        q, quick_text[cam], seams = _quick(cam, pairs, med)
        findings[cam] = CameraFinding(cam, q, f"{cam}: {quick_text[cam]}", seams, q)
    if gt_cost is not None:
        # Ground-truth mode: each camera against the known texture over its whole footprint.
        for cam, f in findings.items():
            g = gt_cost.get(cam, float("nan"))
            ratio = g / max(gt_med, 1e-3) if np.isfinite(g) else 0.0
            f.gt_cost = g
            f.score = float(ratio)
            f.reason = (f"{cam}: against the ground-truth texture {ratio:.1f}x the rig median "
                        f"(cost {g:.3f} vs {gt_med:.3f}); {quick_text[cam]}.")
        return sorted(findings.values(), key=lambda f: -f.score)
    if thorough:
        order = sorted(rig.names, key=lambda n: -findings[n].quick_score)
        tested = order if suspects is None else order[:max(1, suspects)]
        for k, cam in enumerate(tested):
            f = findings[cam]
            if progress is not None:
                progress(k, len(tested), cam)
            try:
                _, hist = refine_extrinsics(rig, frames, grid, cam, levels=levels, sampler=sampler,
                                            ring=kwargs.get("ring", SEAM_RING))
            except ValueError:
                f.score = 0.0
                f.reason += "; it has no seam to test a correction against"
                continue
            gain = hist.initial_loss - hist.final_loss
            f.score = float(max(gain, 0.0))
            f.correction_deg = hist.delta.angle_deg
            d = hist.delta
            f.reason = (f"{cam}: turning it alone by {d.angle_deg:.1f} deg (roll {d.roll_deg:+.1f}, pitch "
                        f"{d.pitch_deg:+.1f}, yaw {d.yaw_deg:+.1f}) lowers its seam cost from "
                        f"{hist.initial_loss:.2f} to {hist.final_loss:.2f}; {quick_text[cam]}")
        if progress is not None:
            progress(len(tested), len(tested), "")
        for cam in rig.names:
            if cam not in tested:
                findings[cam].score = 0.0
                findings[cam].reason += "; not a suspect (its seams are among the rig's better ones)"
    for f in findings.values():
        f.reason += "."
    return sorted(findings.values(), key=lambda f: -f.score)
