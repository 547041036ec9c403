"""The seam objective: one camera's seam loss against fixed neighbours, differentiable in its pose.

:class:`SeamObjective` is what :func:`bevviz.calibration.seams.refine.refine_camera` minimises: the
seam costs (NCC or NGF, :mod:`bevviz.calibration.seams.analysis`) of one camera with each neighbour
in every frame, as a function of a small body-frame rotation and an ego-frame translation
of that camera; the gradient reaches the pose through the gather-scatter sampler's bilinear
tap weights.

Convention:
    Body-frame (FLU) rotation vector in degrees, ego-frame translation in cm, applied as
    ``ego_from_body' = ego_from_body @ exp(rot)``; pixels at centres,
    ``align_corners=False``. See docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.seams.analysis import (
    COSTS,
    MIN_SEAM_AREA_M2,
    NGF_EPS,
    border_weight,
    ground_points,
    ncc_cost,
    near_image,
    ngf_cost,
    project_ground,
    ring_mask,
)
from bevviz.calibration.seams.pyramid import Sampler, sample_at_pixels
from bevviz.camera import Rig
from bevviz.checks import check_choice, field_error
from bevviz.projection import project_with
from bevviz.rotations import FLU_FROM_RDF, axis_angle_to_matrix
from bevviz.samplers.gather_scatter import GatherResult, bilinear_taps, feature_table

__all__ = ["SeamObjective", "level_grid"]


class SeamObjective:
    """Seam loss of one camera against fixed neighbours over one or more frames, at one level.

    The seam geometry (cells, their 3-point stencils, the neighbours' border weights) is the
    same in every frame of a rig, so it is built once; per step the refined camera's
    projection is computed once and its images of all frames are sampled in ONE two-stage
    gather (taps once, frame offsets added to the indices). The neighbours' colours are
    sampled once (no gradient). Cells are weighted by a soft border ramp in both images
    (:func:`border_weight`), so the loss stays continuous while cells enter and leave the
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
            self.table = feature_table(torch.stack(self.imgs))  # (F h w + 1, 3)
        cam = self.camera
        pts = ground_points(grid).reshape(-1, 3)
        pts = pts[torch.from_numpy(ring_mask(grid, rig, ring).reshape(-1))]
        uv, _ = project_ground(rig.subset([camera]), pts)
        pts = pts[near_image(cam, pts, uv[0], margin)]
        self.min_weight = max(8.0, 0.5 * MIN_SEAM_AREA_M2 / grid.resolution ** 2)
        step = grid.resolution
        offs = torch.tensor([[0.0, 0.0, 0.0], [step, 0.0, 0.0], [0.0, step, 0.0]], dtype=torch.float64)
        self.names: list[str] = []
        p3s, cols, ws = [], [], []
        for name in neighbours:
            other = rig[name]
            uv_o, ok_o = project_ground(rig.subset([name]), pts)
            w_o = border_weight(uv_o[0], other.width, other.height, self.ramp) * ok_o[0]
            keep = w_o > 0
            pc, w_o = pts[keep], w_o[keep]
            if float(w_o.sum()) < self.min_weight:
                continue
            p3 = pc.unsqueeze(0) + offs.unsqueeze(1)  # (3, M, 3)
            uv3, ok3 = project_ground(rig.subset([name]), p3.reshape(-1, 3))
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
        F_, (_, h, w) = len(self.imgs), self.imgs[0].shape
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
        w_t = border_weight(uv[0], W, H, self.ramp) * front
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
                    costs.append(ncc_cost(a, b, wk))
                else:
                    ga = torch.stack([a[:, 1] - a[:, 0], a[:, 2] - a[:, 0]], -1)
                    gb = torch.stack([b[:, 1] - b[:, 0], b[:, 2] - b[:, 0]], -1)
                    costs.append(ngf_cost(ga, gb, wk, self.ngf_eps))
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



def level_grid(grid: BEVGrid, cell: float) -> BEVGrid:
    """The grid's extent (rounded out to whole cells) at ``cell`` metres per cell, on z = 0."""
    if abs(cell - grid.resolution) < 1e-9:
        return grid.with_z((0.0,))
    cx, cy = (grid.x_range[0] + grid.x_range[1]) / 2, (grid.y_range[0] + grid.y_range[1]) / 2
    nx = int(math.ceil((grid.x_range[1] - grid.x_range[0]) / cell / 2))
    ny = int(math.ceil((grid.y_range[1] - grid.y_range[0]) / cell / 2))
    return BEVGrid((cx - nx * cell, cx + nx * cell), (cy - ny * cell, cy + ny * cell), (0.0,), cell)
