"""Diagnosis: which camera of a rig is miscalibrated, and the refinement entry point.

:func:`diagnose` ranks the cameras (quick: by their seams; thorough: by how much letting
each suspect rotate alone repairs its seams; ground-truth mode: against a known texture);
:func:`standout` says whether one camera stands out; :func:`refine_extrinsics` refines the
given camera, or the one the diagnosis names.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.ground_truth import GroundTruth
from bevviz.calibration.pyramid import Sampler, as_pyramids
from bevviz.calibration.refine import DEFAULT_LEVELS, ROBUST_K, SEARCH_DEG, Level, RefineHistory, refine_camera
from bevviz.calibration.seams import SEAM_RING, SeamAnalysis, SeamPair, analyze_seams, combine_seams, seam_grid
from bevviz.camera import Rig
from bevviz.threads import on_one_thread

__all__ = [
    "DIAGNOSE_LEVELS",
    "STANDOUT_RATIO",
    "CameraFinding",
    "diagnose",
    "refine_extrinsics",
    "standout",
]


#: Quick score (a camera's better seam / rig median) from which a camera stands out. On
#: the embedded sample's default frame: 1.02 at most on the true rig; 2.6-11.5 for the
#: faulty camera under any 1-2 deg roll/pitch/yaw error, every other camera <= 1.03.
STANDOUT_RATIO = 2.0



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



@on_one_thread
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
                _, hist = refine_camera(rig, frames, grid, cam, levels=levels, sampler=sampler,
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
            of the same rig; or :class:`~bevviz.calibration.pyramid.ImagePyramid` objects.
        grid: Ground grid; only its extent is used. Default :func:`seam_grid` (out to 30 m).
        camera: Camera to refine; default the first finding of :func:`diagnose`.
        translation, levels, ring, neighbours, robust, sampler, search_deg, progress: As
            :func:`bevviz.calibration.refine.refine_camera` (the schedule, the ground ring,
            the cameras compared with, the robust combination, the sampler, the multi-start
            search and the progress callback).

    Returns:
        (the rig with the refined camera, :class:`~bevviz.calibration.refine.RefineHistory`).

    Raises:
        ValueError: unknown camera, or a camera with no seam to refine against.

    Convention:
        The correction is a body-frame (FLU) rotation vector in degrees and an ego-frame
        translation in cm, applied as ``ego_from_body' = ego_from_body @ exp(rot)``. See
        docs/conventions.md.
    """
    grid = seam_grid() if grid is None else grid
    if camera is None:
        camera = diagnose(rig, images, grid, sampler=sampler)[0].camera
    return refine_camera(rig, images, grid, camera, translation=translation, levels=levels, ring=ring,
                         neighbours=neighbours, robust=robust, sampler=sampler, search_deg=search_deg,
                         progress=progress)
