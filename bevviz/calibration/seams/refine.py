"""Refinement of one camera's extrinsics against its seams (self-consistency).

:func:`refine_camera` runs Adam on a small rotation (axis-angle, Rodrigues via
:func:`bevviz.rotations.axis_angle_to_matrix`) and optionally a translation of one camera,
minimising the seam cost with its neighbours; the gradient reaches the rotation through the
gather-scatter sampler's bilinear tap weights. A coarse-to-fine schedule (:class:`Level`)
gives a basin of several degrees and a sharp end, and a multi-start search escapes the
false minima of periodic ground. :func:`bevviz.calibration.refine_extrinsics` is the public
entry (it can pick the camera by diagnosis first).

Convention:
    The correction is a body-frame (FLU) rotation vector in degrees and an ego-frame
    translation in cm, applied as ``ego_from_body' = ego_from_body @ exp(rot)``. Pixels at
    centres, ``align_corners=False``. See docs/conventions.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.perturbations import CameraDelta, apply_correction, camera_delta
from bevviz.calibration.seams.analysis import (
    SEAM_RING,
    seam_check,
    seam_grid,
    seam_neighbours,
)
from bevviz.calibration.seams.objective import SeamObjective, level_grid
from bevviz.calibration.seams.pyramid import Sampler, as_pyramids
from bevviz.camera import Camera, Rig
from bevviz.checks import field_error
from bevviz.threads import on_one_thread

__all__ = [
    "DEFAULT_LEVELS",
    "FAST_LEVELS",
    "ROBUST_K",
    "SEARCH_DEG",
    "SEARCH_LEVELS",
    "SEARCH_STEP_DEG",
    "Level",
    "refine_camera",
    "RefineHistory",
    "RefineStep",
    "SeamRefineSettings",
]


#: Scale k of the robust combination of seams, ``k log(1 + cost / k)``.
ROBUST_K = 0.2



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


#: Scan half-width and step of the multi-start search (see :func:`refine_camera`).
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
            see :meth:`SeamObjective.loss`) before the update.
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
    """What :func:`refine_camera` did.

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
        accepted: Whether the result passed its own held-out check (seams: every seam
            improves on its own and ends consistent; LiDAR: both halves of the evidence agree
            and each improves the other). :func:`bevviz.calibration.refine_extrinsics`
            returns the input rig when False.
        check: The check's outcome in words.
        proposal: LiDAR: the corrected camera when every check passed but the accuracy the
            LiDAR shows on the rig's calibrated cameras is short of what an applied
            correction promises (not applied; the user may apply it), else None.
        term_losses: Seams: each (frame, neighbour) seam's cost before and after, on the
            finest level: list of (neighbour, before, after).
    """

    camera: str
    steps: list[RefineStep] = field(default_factory=list)
    neighbours: list[str] = field(default_factory=list)
    initial_loss: float = float("nan")
    final_loss: float = float("nan")
    delta: CameraDelta | None = None
    seconds: float = 0.0
    search_start_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    accepted: bool = False
    check: str = ""
    proposal: Camera | None = None
    term_losses: list[tuple[str, float, float]] = field(default_factory=list)

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



@dataclass(frozen=True)
class SeamRefineSettings:
    """What a seam refinement runs, in one frozen place (defaults: the accurate schedule).

    Attributes:
        translation: Also refine the optical centre (weakly constrained by seams: a shift of
            a few cm changes the ground by the same few cm, a rotation by far more).
        levels: Coarse-to-fine schedule (a non-empty sequence of :class:`Level`).
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
            levels and keep the run that ends lowest on the last of them; 0 disables it.
            Periodic ground (a metric checker, tiles, parking bays) gives false minima one
            period away (about 3 deg for a 1 m pattern 20 m out) that gradient descent from
            the given pose alone falls into.

    Raises:
        InputError: ``levels`` not a non-empty sequence of :class:`Level` (when made).
    """

    translation: bool = False
    levels: Sequence[Level] = DEFAULT_LEVELS
    ring: tuple[float, float] = SEAM_RING
    neighbours: Sequence[str] | None = None
    robust: float | None = ROBUST_K
    sampler: Sampler | None = None
    search_deg: float = SEARCH_DEG

    def __post_init__(self):
        levels = self.levels
        if isinstance(levels, str) or not isinstance(levels, Sequence) or not levels or not all(
                isinstance(lv, Level) for lv in levels):
            raise field_error("levels", levels, "must be a non-empty sequence of Level, coarse to fine")


@on_one_thread
def refine_camera(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                  grid: BEVGrid | None, camera: str, settings: SeamRefineSettings | None = None,
                  progress: Callable[[int, int, float], None] | None = None) -> tuple[Rig, RefineHistory]:
    """Refine one named camera's extrinsics by minimising its seam inconsistency (self-consistency).

    :func:`bevviz.calibration.refine_extrinsics` is the same with the camera optional.

    Args:
        rig: The rig; every camera but ``camera`` is held fixed.
        images: Camera name -> uint8 RGB image, shape (H, W, 3); or a list of such frames
            of the same rig (all seams of all frames are combined); or
            :class:`ImagePyramid` objects (their downsampled levels are cached).
        grid: Ground grid; only its extent is used (it bounds the ground compared), the
            cell sizes come from ``levels``. Default :func:`seam_grid` (out to 30 m).
        camera: Camera to refine.
        settings: :class:`SeamRefineSettings` (default: the accurate schedule).
        progress: Optional ``callback(step, total_steps, loss)`` after every optimisation
            step run, those of the search's alternative starts included (``total_steps``
            counts them, so it can exceed the schedule's own step count).

    Returns:
        (the rig with the refined camera, :class:`RefineHistory`).

    Raises:
        InputError: unknown camera, or a camera with no seam to refine against.

    Convention:
        The correction is a body-frame (FLU) rotation vector in degrees and an ego-frame
        translation in cm, applied as ``ego_from_body' = ego_from_body @ exp(rot)``.
    """
    s = SeamRefineSettings() if settings is None else settings
    translation, levels, ring, robust, sampler = s.translation, s.levels, s.ring, s.robust, s.sampler
    neighbours, search_deg = s.neighbours, s.search_deg
    t0 = time.perf_counter()
    grid = seam_grid() if grid is None else grid
    rig[camera]  # named error for an unknown camera
    nbrs = list(neighbours) if neighbours is not None else seam_neighbours(rig, camera, ring=ring)
    if not nbrs:
        raise field_error("camera", camera, "has no seam with another camera; nothing to refine against")
    pyrs = as_pyramids(images)
    hist = RefineHistory(camera, neighbours=nbrs)
    total = sum(lv.steps for lv in levels)
    objectives: dict[int, SeamObjective] = {}

    def objective(li: int) -> SeamObjective:
        if li not in objectives:
            lv = levels[li]
            obj = SeamObjective(rig, [pyr.levels(rig, [camera, *nbrs], lv.stride, lv.blur) for pyr in pyrs],
                                 level_grid(grid, lv.cell), camera, nbrs, lv.ring or ring, sampler,
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
        # The plain mean of the terms is obj.loss(..., robust=None): one evaluation per pose.
        before_t, after_t = obj.pair_losses(torch.zeros(3), torch.zeros(3)), obj.pair_losses(rot, trans)
        hist.initial_loss = float(torch.stack(before_t).mean())
        hist.final_loss = float(torch.stack(after_t).mean())
        before = [float(v) for v in before_t]
        after = [float(v) for v in after_t]
    hist.term_losses = [(name, b, a) for (_, name), b, a in zip(obj.terms, before, after)]
    hist.accepted, hist.check = seam_check(hist.term_losses)
    cam0 = rig[camera]
    new_cam = apply_correction(cam0, rot.detach().double().numpy(), trans.detach().double().numpy())
    new_rig = rig.replace(new_cam)
    hist.delta = camera_delta(cam0, new_cam)
    hist.seconds = time.perf_counter() - t0
    return new_rig, hist



def _run_level(obj: SeamObjective, lv: Level, rot0: torch.Tensor, trans0: torch.Tensor,
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
