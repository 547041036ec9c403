"""Seam consistency: each camera's image on the ground, and how neighbouring cameras agree.

Where the ground footprints of two cameras overlap, both cameras see the same ground.
:func:`analyze_seams` projects every image onto the ground plane z = 0 of a BEV grid and
measures every seam with two exposure-robust costs: NCC of the colours (``1 - NCC``) and
normalised gradient fields (NGF, which objects standing in a seam barely pull); the seam
tables report NGF. See :mod:`bevviz.calibration` for the whole method.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.seams.ground_truth import GroundTruth
from bevviz.calibration.seams.pyramid import ImagePyramid, Sampler, gaussian_blur, sample_at_pixels
from bevviz.camera import Camera, Rig
from bevviz.checks import check_shape
from bevviz.features import resize_area
from bevviz.projection import project_with
from bevviz.threads import on_one_thread

__all__ = [
    "COSTS",
    "MIN_SEAM_AREA_M2",
    "MIN_SEAM_CELLS",
    "NGF_EPS",
    "SEAM_RING",
    "analyze_seams",
    "border_weight",
    "combine_seams",
    "ground_points",
    "ncc_cost",
    "near_image",
    "ngf_cost",
    "project_ground",
    "rig_centre",
    "rig_seam_cost",
    "ring_mask",
    "seam_cost",
    "seam_grid",
    "seam_neighbours",
    "SeamAnalysis",
    "SeamPair",
]

#: Largest seam cost (NGF; the rig median for a verdict, each seam after a refinement) at
#: which seams can judge a camera (above it: narrow low-texture overlaps, cars standing in
#: the seams; docs/calibration.md, tuning table).
SEAM_TRUST_COST = 0.5


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



def seam_grid(radius: float = 30.0, resolution: float = 0.2, centre_x: float = 1.0) -> BEVGrid:
    """A ground-plane BEV grid suited to seams: fine cells out to ``radius`` metres.

    A six-camera surround rig's side overlaps are narrow wedges (about 10 degrees), so cells
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



def rig_centre(rig: Rig) -> np.ndarray:
    """Mean optical-centre position of the rig in the ego frame, shape (3,)."""
    return np.stack([c.position for c in rig]).mean(axis=0)



def ring_mask(grid: BEVGrid, rig: Rig, ring: tuple[float, float] = SEAM_RING) -> np.ndarray:
    """Cells whose centre lies ``ring[0]..ring[1]`` metres from the rig centre, shape (H_bev, W_bev)."""
    xs, ys = grid.cell_centers(torch.float64)
    c = rig_centre(rig)
    r = np.hypot(xs.numpy()[:, None] - c[0], ys.numpy()[None, :] - c[1])
    return (r >= ring[0]) & (r <= ring[1])



def ground_points(grid: BEVGrid) -> torch.Tensor:
    """Cell centres on z = 0, shape (H_bev, W_bev, 3), float64."""
    return grid.with_z((0.0,)).points(torch.float64)[0]



def ncc_cost(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor | None = None,
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



def ngf_cost(ga: torch.Tensor, gb: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
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



def border_weight(uv: torch.Tensor, width: int, height: int, ramp: float) -> torch.Tensor:
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
    return float(ncc_cost(ta, tb))



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

    def without_ground_truth(self) -> SeamAnalysis:
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



def project_ground(rig: Rig, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """uv (N_cam, P, 2) float64 and valid (N_cam, P) of ground points (P, 3)."""
    proj = project_with(points, rig.intrinsics(torch.float64), rig.cam_from_ego(torch.float64),
                        rig.image_sizes())
    return proj.uv, proj.valid



@on_one_thread
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
    pts = ground_points(grid)  # (H, W, 3)
    H, W = grid.shape
    uv, valid = project_ground(rig, pts.reshape(-1, 3))
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
                cost = float(ngf_cost(ga, gb, w, eps)) if gm.any() else 1.0
                ncc = float(ncc_cost(bev[i][:, m].double(), bev[j][:, m].double()))
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
                gt_cost[cam.name] = float(ngf_cost(ga, gb, torch.ones(ga.shape[1], dtype=torch.float64), eps))
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
    pts = ground_points(grid).reshape(-1, 3)
    uv, valid = project_ground(rig, pts)
    valid = valid & torch.from_numpy(ring_mask(grid, rig, ring).reshape(-1)).unsqueeze(0)
    near = near_image(rig[camera], pts, uv[k], margin)
    min_cells = min_area_m2 / grid.resolution ** 2
    return [rig.names[j] for j in range(len(rig))
            if j != k and float((near & valid[j]).sum()) >= min_cells]



def near_image(cam: Camera, pts: torch.Tensor, uv: torch.Tensor, margin: float) -> torch.Tensor:
    """Points (P, 3) in front of ``cam`` whose pixels uv (P, 2) fall inside its widened image, (P,) bool."""
    u, v = uv[:, 0], uv[:, 1]
    mw, mh = margin * cam.width, margin * cam.height
    near = (u > -0.5 - mw) & (u < cam.width - 0.5 + mw) & (v > -0.5 - mh) & (v < cam.height - 0.5 + mh)
    depth = pts.to(torch.float64) @ torch.tensor(cam.cam_from_ego[2, :3]) + float(cam.cam_from_ego[2, 3])
    return near & (depth > 0.1)



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


def seam_check(terms: Sequence[tuple[str, float, float]]) -> tuple[bool, str]:
    """Held-out check of a seam refinement: (accepted, why).

    Args:
        terms: Each seam of the refined camera: (neighbour, cost before, cost after).

    The seams are each other's held-out evidence: a right correction improves *every* seam
    on its own (a wrong one trades one against another), and the corrected seams agree
    (cost at most :data:`SEAM_TRUST_COST`; above it the
    seams cannot judge, as on real frames with narrow, low-texture overlaps).
    """
    if not terms:
        return False, "no seam to check the correction against"
    worse = [f"{n} ({b:.3f} -> {a:.3f})" for n, b, a in terms if not a < b]
    if worse:
        return False, "not every seam improves on its own: " + ", ".join(worse)
    weak = [f"{n} ({a:.3f})" for n, _, a in terms if a > SEAM_TRUST_COST]
    if weak:
        return False, (f"the corrected seams still disagree (cost above {SEAM_TRUST_COST:g}): " + ", ".join(weak)
                       + "; seams cannot confirm a correction here")
    return True, "every seam improves on its own: " + ", ".join(f"{n} {b:.3f} -> {a:.3f}" for n, b, a in terms)
