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
from bevviz.calibration.alignment import AXES, BOOTSTRAP, as_lidar_frames
from bevviz.calibration.consensus import RigConsensus, rig_consensus
from bevviz.calibration.ground_truth import GroundTruth
from bevviz.calibration.image_support import MIN_IMAGE_LIFT, image_lift
from bevviz.calibration.lidar import CameraEvidence, lidar_evidence
from bevviz.calibration.lidar_refine import refine_with_lidar
from bevviz.calibration.masks import ignore_masks
from bevviz.calibration.pyramid import Sampler, as_pyramids
from bevviz.calibration.refine import DEFAULT_LEVELS, ROBUST_K, SEARCH_DEG, Level, RefineHistory, refine_camera
from bevviz.calibration.seams import SEAM_RING, SeamAnalysis, SeamPair, analyze_seams, combine_seams, seam_grid
from bevviz.calibration.sync import rig_timing
from bevviz.calibration.verdicts import (
    INCONCLUSIVE,
    MIN_EDGE_POINTS,
    MISCALIBRATED,
    OK,
    PAIR_NOTE,
    RULE,
    STANDOUT_RATIO,
    VERDICTS,
    VerdictRule,
    combine,
    lidar_doubt,
    lidar_verdict,
    seam_verdict,
)
from bevviz.camera import Rig
from bevviz.lidar import LidarScan
from bevviz.shapes import field_error
from bevviz.threads import on_one_thread

__all__ = [
    "DIAGNOSE_LEVELS",
    "STANDOUT_RATIO",
    "CameraFinding",
    "diagnose",
    "refine_extrinsics",
    "standout",
]




@dataclass
class CameraFinding:
    """How suspicious one camera's calibration is, and the verdict.

    Attributes:
        camera: Camera name.
        score: Higher is worse. With LiDAR: the largest per-axis offset (degrees) of the
            camera's own rotation error (its residual after the rig consensus). Without:
            thorough diagnosis (default): by how much the seam loss of the camera's seams
            drops when the camera alone is allowed to rotate (a quick coarse-to-fine
            refinement); a misaligned camera fixes *both* of its seams, a good neighbour can
            only trade one seam against the other. Quick diagnosis: its better seam as a
            multiple of the rig's median seam cost. Ground-truth mode: its cost against the
            known texture (whole footprint) as a multiple of the rig's median.
        reason: A readable sentence: the verdict and the evidence for it.
        verdict: ``"miscalibrated"``, ``"ok"`` or ``"inconclusive"``
            (:mod:`bevviz.calibration.verdicts`).
        seams: The camera's seams (costs averaged over the frames).
        quick_score: The quick score (second-worst seam / rig median), always filled.
        correction_deg: Rotation (degrees) the quick refinement applied, or None.
        gt_cost: Cost against the ground truth (ground-truth mode only).
        offset_deg: LiDAR mode: the camera's own rotation error, axis (``"roll"``,
            ``"pitch"``, ``"yaw"``) -> degrees (body frame; the stored camera is turned by
            this much away from where the evidence puts it); None without LiDAR.
        uncertainty_deg: Its bootstrap standard deviation per axis (degrees), or None.
        edge_points: LiDAR edge points supporting the offset (0 without LiDAR).
        witnesses: Witness name (``"lidar"``, ``"seams"``) -> its own verdict.
        lidar: The full LiDAR evidence (profiles, projected edge points), or None.
    """

    camera: str
    score: float
    reason: str
    seams: list[SeamPair] = field(default_factory=list)
    quick_score: float = 0.0
    correction_deg: float | None = None
    gt_cost: float | None = None
    verdict: str = INCONCLUSIVE
    offset_deg: dict[str, float] | None = None
    uncertainty_deg: dict[str, float] | None = None
    edge_points: int = 0
    witnesses: dict[str, str] = field(default_factory=dict)
    lidar: CameraEvidence | None = None

    @property
    def seam_ratios(self) -> dict[str, float]:
        """Neighbour name -> that seam's cost as a multiple of the rig median."""
        return {(p.b if p.a == self.camera else p.a): p.ratio for p in self.seams}


class Diagnosis(list):
    """The findings of :func:`diagnose` (a list, worst first) and the rig-level context.

    Attributes:
        consensus: The rig consensus of the LiDAR offsets (None without LiDAR).
        seam_median: The rig's median seam cost.
        timing: With LiDAR, a sentence when the cameras agree that the LiDAR is displaced
            along the car's axis (:func:`~bevviz.calibration.sync.rig_timing`: a timing
            error); "" otherwise.
        lidar_doubt: With LiDAR, a sentence when (almost) no camera lines up with the LiDAR
            where it is stored, so the LiDAR itself looks off
            (:func:`~bevviz.calibration.verdicts.lidar_doubt`); "" otherwise.
    """

    def __init__(self, findings=(), consensus: RigConsensus | None = None, seam_median: float = float("nan"),
                 timing: str = "", lidar_doubt: str = ""):
        super().__init__(findings)
        self.consensus = consensus
        self.seam_median = seam_median
        self.timing = timing
        self.lidar_doubt = lidar_doubt

    def by_camera(self, name: str) -> CameraFinding:
        """The finding of camera ``name``.

        Raises:
            InputError: naming ``camera`` when no finding is about it.
        """
        for f in self:
            if f.camera == name:
                return f
        raise field_error("camera", name, f"no finding about it; cameras: {[f.camera for f in self]}")


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



def _order(findings: Sequence[CameraFinding]) -> list[CameraFinding]:
    """Worst first: miscalibrated, then inconclusive, then ok; by score within each."""
    return sorted(findings, key=lambda f: (VERDICTS.index(f.verdict), -f.score))


#: Said of a camera the LiDAR alone would name from a plain array (no ego motion to the exposures).
NO_MOTION_NOTE = ("the LiDAR came as a plain array, without the ego motion to this camera's exposure: on a "
                  "moving car that alone can turn a camera's offset by about a degree, so the LiDAR convicts no "
                  "camera; pass what bevviz.io.nuscenes.load_lidar returns, or a LidarScan (with "
                  "exposure_from_keyframe, or with none for cameras that fire with the LiDAR)")


#: Said of a camera the LiDAR alone would name from a scan with neither intensity nor motion.
NO_EVIDENCE_NOTE = ("the scan carries neither intensity nor the ego motion to the exposures (a plain (N, 3) array): "
                    "its depth edges alone cannot tell a turned camera from a moving car's timing (about a degree), "
                    "so the LiDAR convicts no camera; pass the intensity or what bevviz.io.nuscenes.load_lidar "
                    "returns")


def _lidar_findings(rig: Rig, findings: dict[str, CameraFinding], evidence: Mapping[str, CameraEvidence],
                    seam_why: Mapping[str, str], quick_text: Mapping[str, str],
                    motion_known: bool = True, rule: VerdictRule = RULE,
                    intensity_known: bool = True) -> RigConsensus:
    """Fill the LiDAR fields and verdicts of ``findings`` in place (their seam verdicts, with
    ``seam_why``, as :func:`diagnose` found them); returns the consensus.

    A plain array (no ego motion to the exposures) convicts no camera: on a moving car the
    timing alone turns an offset by about a degree (:data:`NO_MOTION_NOTE`; without intensity
    either, :data:`NO_EVIDENCE_NOTE`), and the same points given as a LidarScan must not give
    another verdict."""
    consensus = rig_consensus(rig, evidence, min_points=MIN_EDGE_POINTS)
    for cam, f in findings.items():
        ev = evidence[cam]
        lv = lidar_verdict(ev, consensus, rule=rule)
        sv = (f.witnesses["seams"], seam_why[cam])
        f.verdict, text = combine(lv, sv, f.quick_score)
        if f.verdict == MISCALIBRATED and not motion_known:  # a plain array: the same points as a scan convict no one
            f.verdict, text = INCONCLUSIVE, f"{text}; but {NO_MOTION_NOTE if intensity_known else NO_EVIDENCE_NOTE}"
        f.witnesses = {"lidar": lv.verdict, "seams": sv[0]}
        f.offset_deg = {a: float(v) for a, v in zip(AXES, lv.residual_deg)}
        f.uncertainty_deg = {a: float(v) for a, v in zip(AXES, lv.uncertainty_deg)}
        f.edge_points = ev.n_points
        f.lidar = ev
        f.score = float(np.max(np.abs(lv.residual_deg)))
        note = ""
        if len(rig) == 1:
            note += f"; {PAIR_NOTE}"
        f.reason = f"{text} ({quick_text[cam]}){note}."
    return consensus


@on_one_thread
def diagnose(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
             grid: BEVGrid | None = None, lidar: object = None, *,
             ground_truth: GroundTruth | np.ndarray | None = None, thorough: bool | None = None,
             suspects: int | None = 3, levels: Sequence[Level] = DIAGNOSE_LEVELS,
             analyses: Sequence[SeamAnalysis] | None = None, sampler: Sampler | None = None,
             evidence: Mapping[str, CameraEvidence] | None = None, replicates: int = BOOTSTRAP,
             progress: Callable[[int, int, str], None] | None = None, ignore: Mapping[str, object] | None = None,
             rule: VerdictRule = RULE, **kwargs) -> Diagnosis:
    """Rank the rig's cameras by how likely their extrinsics are wrong, with a verdict each; worst first.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> uint8 RGB image (H, W, 3), or a list of such frames of the
            same rig (seams hidden by objects in one frame may be clear in another).
        grid: Ground grid for the seams (extent and resolution); default :func:`seam_grid`.
        lidar: Optional LiDAR witness: points in the ego frame at the images' time, an
            array (N, 3) or (N, 4) (x, y, z, intensity; numpy or torch), or what
            :func:`bevviz.io.nuscenes.load_lidar` returns (a :class:`bevviz.lidar.LidarScan`,
            which also carries the rings and the ego motion to each camera's exposure); a
            list with one per frame for several frames. A plain array is taken as seen at
            every camera's exposure (no ego motion) with rings inferred, and its evidence
            convicts no camera (a LidarScan states its motion: pass one to be convicted).
        ground_truth: Optional known BEV texture (:class:`GroundTruth` or an array
            (H_bev, W_bev, 3) on ``grid``) in the first frame's ego frame: ground-truth mode
            (each camera's projection against the texture; ``thorough`` is not needed).
        thorough: Seams: test the suspects by letting each rotate alone (a quick
            refinement) and rank by how much that repairs their seams. ``False``: rank by the
            seam costs only (fast, for live views; fooled by seams that objects hide).
            Default: True without LiDAR, False with it (the LiDAR is the stronger witness).
        suspects: How many cameras (highest quick score first) the thorough test tries;
            ``None`` = all.
        levels: Schedule of the quick refinement.
        analyses: Precomputed :func:`analyze_seams` results, one per frame.
        sampler: ``grid_sample``-compatible sampler; default the two-stage gather-scatter sampler.
        evidence: Precomputed LiDAR evidence (:func:`bevviz.calibration.lidar.lidar_evidence`);
            ``lidar`` is then not needed.
        replicates: Bootstrap replicates of the LiDAR evidence per camera.
        progress: Optional ``callback(done, total, camera)`` for the thorough test and the
            LiDAR alignment.
        ignore: Optional camera name -> polygons (lists of (u, v) pixels of the calibrated
            image) that do not show the world, e.g. the car's own body
            (:func:`bevviz.calibration.masks.ignore_masks`): LiDAR points there are not used.
        rule: The LiDAR verdict's constants (:class:`~bevviz.calibration.verdicts.VerdictRule`).
        **kwargs: Passed to :func:`analyze_seams` (``stride``, ``blur``, ``ring``, ...).

    Returns:
        :class:`Diagnosis`: one :class:`CameraFinding` per camera, worst first (verdict
        ``"miscalibrated"``, then ``"inconclusive"``, then ``"ok"``; by score within each;
        without LiDAR, by score alone, as before verdicts existed), with the rig consensus.

    Convention:
        Seam costs are ``1 -`` normalised-gradient-field correlation (see
        :class:`SeamPair`); the thorough score is the drop of the camera's mean seam cost
        (over its seams in every frame) under the quick refinement, in the same units.
        LiDAR offsets are body-frame (FLU) degrees, see :mod:`bevviz.calibration.lidar`
        and docs/conventions.md.
    """
    frames = as_pyramids(images)
    grid = seam_grid() if grid is None else grid
    with_lidar = lidar is not None or evidence is not None
    thorough = (not with_lidar) if thorough is None else thorough
    if analyses is None:
        analyses = [analyze_seams(rig, f, grid, ground_truth=ground_truth if k == 0 else None,
                                  sampler=sampler, **kwargs) for k, f in enumerate(frames)]
    pairs, med = combine_seams(analyses)
    gt_cost = analyses[0].gt_cost
    findings: dict[str, CameraFinding] = {}
    quick_text: dict[str, str] = {}
    seam_why: dict[str, str] = {}
    for cam in rig.names:
        q, quick_text[cam], seams = _quick(cam, pairs, med)
        v, seam_why[cam] = seam_verdict(q, len(seams), med)
        findings[cam] = CameraFinding(cam, q, f"{cam}: {quick_text[cam]}", seams, q, verdict=v, witnesses={"seams": v})
    if gt_cost is not None and not with_lidar:
        # Ground-truth mode: each camera against the known texture over its whole footprint.
        vals = [v for v in gt_cost.values() if np.isfinite(v)]
        gt_med = float(np.median(vals)) if vals else float("nan")
        for cam, f in findings.items():
            g = gt_cost.get(cam, float("nan"))
            ratio = g / max(gt_med, 1e-3) if np.isfinite(g) else 0.0
            f.gt_cost = g
            f.score = float(ratio)
            f.verdict = MISCALIBRATED if ratio >= STANDOUT_RATIO else (OK if np.isfinite(g) else INCONCLUSIVE)
            f.witnesses = {"ground truth": f.verdict}
            f.reason = (f"{cam}: against the ground-truth texture {ratio:.1f}x the rig median "
                        f"(cost {g:.3f} vs {gt_med:.3f}); {quick_text[cam]}.")
        return Diagnosis(sorted(findings.values(), key=lambda f: -f.score), seam_median=med)
    if with_lidar:
        motion_known = intensity_known = True
        if evidence is None:
            pairs = as_lidar_frames([p.images for p in frames], lidar, ignore_masks(rig, ignore))
            scans = lidar if isinstance(lidar, (list, tuple)) else [lidar]  # a LidarScan states its motion
            motion_known = all(isinstance(x, LidarScan) for x in scans) or any(
                len(fr.scan.exposure_from_keyframe) for fr in pairs)
            intensity_known = any(fr.ranks is not None for fr in pairs)
            evidence = lidar_evidence(rig, None, pairs, replicates=replicates, progress=progress)
        consensus = _lidar_findings(rig, findings, evidence, seam_why, quick_text, motion_known, rule,
                                    intensity_known)
        for f in findings.values():  # the null test: an image without the LiDAR's edges supports no verdict
            if f.verdict != INCONCLUSIVE and f.lidar is not None and f.camera in frames[0].images and (
                    lift := image_lift(frames[0].images[f.camera], rig[f.camera], f.lidar.uv_best)) < MIN_IMAGE_LIFT:
                f.verdict = INCONCLUSIVE
                f.reason += (f" But the image shows too little of the LiDAR's edges to support a verdict (lift "
                             f"{lift:.3f} < {MIN_IMAGE_LIFT}, what structureless images give).")
        timing = rig_timing({n: ev.timing for n, ev in evidence.items()
                             if n in rig.names and ev.n_points >= MIN_EDGE_POINTS})
        return Diagnosis(_order(findings.values()), consensus=consensus, seam_median=med, timing=timing,
                         lidar_doubt=lidar_doubt(consensus))
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
        f.reason = f"{f.reason}; seams: {f.verdict}, {seam_why[f.camera]}."
    return Diagnosis(sorted(findings.values(), key=lambda f: -f.score), seam_median=med)


def refine_extrinsics(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                      grid: BEVGrid | None = None, camera: str | None = None, lidar: object = None, *,
                      translation: bool = False, levels: Sequence[Level] = DEFAULT_LEVELS,
                      ring: tuple[float, float] = SEAM_RING, neighbours: Sequence[str] | None = None,
                      robust: float | None = ROBUST_K, sampler: Sampler | None = None, search_deg: float = SEARCH_DEG,
                      evidence: Mapping[str, CameraEvidence] | None = None,
                      progress: Callable[[int, int, float], None] | None = None,
                      ignore: Mapping[str, object] | None = None,
                      rule: VerdictRule = RULE) -> tuple[Rig, RefineHistory]:
    """Refine one camera's extrinsics; keep the result only if it passes its own held-out check.

    With ``lidar``: the camera's rotation is aligned with the LiDAR edges relative to the
    rig consensus and checked on two halves of the evidence
    (:func:`bevviz.calibration.lidar_refine.refine_with_lidar`); a camera with too few LiDAR
    edge points (``MIN_EDGE_POINTS``) falls back to its seams. Without: its seam
    inconsistency is minimised (:func:`bevviz.calibration.refine.refine_camera`) and the
    result is kept only when every seam improves on its own and ends consistent.

    Args:
        rig: The rig; every camera but ``camera`` is held fixed.
        images: Camera name -> uint8 RGB image, shape (H, W, 3); or a list of such frames
            of the same rig; or :class:`~bevviz.calibration.pyramid.ImagePyramid` objects.
        grid: Ground grid for the seams; only its extent is used. Default :func:`seam_grid`.
        camera: Camera to refine; default the first finding of :func:`diagnose`.
        lidar: Optional LiDAR witness, as for :func:`diagnose` (one scan per frame).
        translation, levels, ring, neighbours, robust, sampler, search_deg: Seam refinement
            settings, as :func:`bevviz.calibration.refine.refine_camera`.
        evidence: Precomputed LiDAR evidence of every camera (with ``lidar``; saves aligning
            them again).
        progress: Optional ``callback(step, total_steps, loss)``.
        ignore: Optional per-camera polygons that do not show the world, as for :func:`diagnose`.
        rule: The LiDAR verdict's constants, as for :func:`diagnose`.

    Returns:
        (the rig with the refined camera, or the input rig unchanged when
        ``history.accepted`` is False; :class:`~bevviz.calibration.refine.RefineHistory`,
        whose ``check`` says why).

    Raises:
        ValueError: ``levels`` not a non-empty sequence of :class:`Level`, unknown camera,
            or (seams) a camera with no seam to refine against.

    Convention:
        The correction is a body-frame (FLU) rotation, applied as
        ``ego_from_body' = ego_from_body @ exp(rot)``. See docs/conventions.md.
    """
    if isinstance(levels, str) or not isinstance(levels, Sequence) or not levels or not all(
            isinstance(lv, Level) for lv in levels):
        raise field_error("levels", levels, "must be a non-empty sequence of Level, coarse to fine")
    grid = seam_grid() if grid is None else grid
    frames = None
    if lidar is not None:  # aligned once: the diagnosis below (no camera given) reuses it
        frames = as_lidar_frames([p.images for p in as_pyramids(images)], lidar, ignore_masks(rig, ignore))
        if evidence is None or any(n not in evidence for n in rig.names):
            evidence = lidar_evidence(rig, None, frames)
    if camera is None:
        camera = diagnose(rig, images, grid, lidar, sampler=sampler, evidence=evidence, rule=rule)[0].camera
    if frames is not None:
        if evidence[camera].n_points >= MIN_EDGE_POINTS:
            return refine_with_lidar(rig, None, camera, frames, evidence=evidence, progress=progress, rule=rule)
        # Too few LiDAR edges in this camera: the seams are the witness left.
    new_rig, hist = refine_camera(rig, images, grid, camera, translation=translation, levels=levels, ring=ring,
                                  neighbours=neighbours, robust=robust, sampler=sampler, search_deg=search_deg,
                                  progress=progress)
    return (new_rig if hist.accepted else rig), hist
