"""Diagnosis: which camera of a rig is miscalibrated, one function per question.

* :func:`judge_with_lidar`: the LiDAR witness (each camera's own offset with its bootstrap
  spread) and the seams, one verdict each;
* :func:`rank_seams`: the seams' quick ranking (each camera's better seam against the rig
  median; live views);
* :func:`rotate_suspects`: the thorough seam test (each suspect rotated alone: how much
  that repairs its seams);
* :func:`against_texture`: each camera against a known ground texture;
* :func:`diagnose`: the public entry point, which asks the question its inputs allow.

:func:`standout` says whether one camera stands out of a quick ranking. Every function's
tunable constants sit in one frozen :class:`~bevviz.calibration.findings.DiagnoseSettings`; what
they return (:class:`~bevviz.calibration.findings.CameraFinding`,
:class:`~bevviz.calibration.findings.Diagnosis`) is defined in :mod:`bevviz.calibration.findings`.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``. LiDAR offsets are body-frame (FLU) degrees.
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.findings import (
    DEFAULTS,
    DIAGNOSE_LEVELS,
    CameraFinding,
    DiagnoseSettings,
    Diagnosis,
    Images,
    order_findings,
)
from bevviz.calibration.lidar.alignment import AXES
from bevviz.calibration.lidar.consensus import RigConsensus, rig_consensus
from bevviz.calibration.lidar.evidence import CameraEvidence, lidar_evidence, with_second_looks
from bevviz.calibration.lidar.frames import LidarFrame, as_lidar_frames
from bevviz.calibration.lidar.image_support import MIN_IMAGE_LIFT, MIN_IMAGE_SHARPNESS, image_support
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.calibration.lidar.sync import rig_timing
from bevviz.calibration.seams.analysis import (
    SeamAnalysis,
    SeamPair,
    combine_seams,
    seam_grid,
)
from bevviz.calibration.seams.ground_truth import GroundTruth
from bevviz.calibration.seams.pyramid import as_pyramids
from bevviz.calibration.seams.refine import SeamRefineSettings, refine_camera
from bevviz.calibration.verdicts import (
    INCONCLUSIVE,
    MIN_EDGE_POINTS,
    MISCALIBRATED,
    OK,
    PAIR_NOTE,
    SECOND_LOOK_DOUBTS,
    STANDOUT_RATIO,
    Doubt,
    SeamVerdict,
    VerdictRule,
    combine,
    lidar_doubt,
    lidar_verdict,
    seam_verdict,
)
from bevviz.camera import Rig
from bevviz.errors import InputError
from bevviz.rotations import offset_angle_deg
from bevviz.threads import on_one_thread

__all__ = [
    "DIAGNOSE_LEVELS",
    "STANDOUT_RATIO",
    "CameraFinding",
    "DiagnoseSettings",
    "Diagnosis",
    "against_texture",
    "diagnose",
    "judge_with_lidar",
    "rank_seams",
    "rotate_suspects",
    "standout",
]

#: Progress callback: ``(done, total, camera)``.
Progress = Callable[[int, int, str], None]


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



#: The doubts that say the LiDAR cannot judge a camera at all: they stay first whatever the
#: scan lacks.
BLIND_DOUBTS = (Doubt.TOO_FEW_EDGE_POINTS, Doubt.NOT_IN_METRES, Doubt.FLAT_SCORE)


#: Said of every camera a scan would judge surely when it states no ego motion to the exposures
#: of a rig of several cameras.
NO_MOTION_NOTE = ("the scan states no ego motion to this camera's exposure (a plain array, or a LidarScan without "
                  "exposure_from_keyframe): on a moving car that alone can turn a camera's offset by about a "
                  "degree, so the LiDAR neither convicts nor clears a camera of this rig; pass what "
                  "bevviz.io.nuscenes.load_lidar returns, or a LidarScan with exposure_from_keyframe (the identity "
                  "for cameras that fire with the LiDAR)")


#: Said of every camera a scan would judge surely when it has neither intensity nor stated motion.
NO_EVIDENCE_NOTE = ("the scan carries neither intensity nor the ego motion to the exposures (a plain (N, 3) array): "
                    "its depth edges alone cannot tell a turned camera from a moving car's timing (about a degree), "
                    "so the LiDAR neither convicts nor clears a camera; pass the intensity or what "
                    "bevviz.io.nuscenes.load_lidar returns")


def _seam_findings(rig: Rig, analyses: Sequence[SeamAnalysis]) -> tuple[dict[str, CameraFinding], float,
                                                                       dict[str, str], dict[str, SeamVerdict]]:
    """Every camera's finding from its seams alone: ``(findings, rig median seam cost,
    camera -> its seams in words, camera -> the seam verdict)``."""
    pairs, med = combine_seams(analyses)
    findings: dict[str, CameraFinding] = {}
    quick_text: dict[str, str] = {}
    seam_v: dict[str, SeamVerdict] = {}
    for cam in rig.names:
        q, quick_text[cam], seams = _quick(cam, pairs, med)
        seam_v[cam] = sv = seam_verdict(q, len(seams), med)
        findings[cam] = CameraFinding(cam, q, f"{cam}: {quick_text[cam]}", seams, q, verdict=sv.verdict,
                                      doubt=sv.doubt, witnesses={"seams": sv.verdict})
    return findings, med, quick_text, seam_v


def _seams_said(findings: Mapping[str, CameraFinding], seam_v: Mapping[str, SeamVerdict]) -> None:
    """End every reason with the seam witness's verdict and clause (in place)."""
    for f in findings.values():
        f.reason = f"{f.reason}; seams: {f.verdict}, {seam_v[f.camera].reason}."


@on_one_thread
def rank_seams(rig: Rig, analyses: Sequence[SeamAnalysis]) -> Diagnosis:
    """The seams' quick ranking: each camera by its better seam against the rig median, no
    refinement and no LiDAR (live views).

    Args:
        rig: The rig (N_cam cameras).
        analyses: Its :func:`analyze_seams` results, one per frame (without ground truth).

    Returns:
        :class:`Diagnosis`, highest quick score first.
    """
    findings, med, _, seam_v = _seam_findings(rig, analyses)
    _seams_said(findings, seam_v)
    return Diagnosis(sorted(findings.values(), key=lambda f: -f.score), seam_median=med)


@on_one_thread
def against_texture(rig: Rig, analysis: SeamAnalysis) -> Diagnosis:
    """Each camera against the known ground texture over its whole footprint.

    Args:
        rig: The rig (N_cam cameras).
        analysis: Its :func:`analyze_seams` result with ``ground_truth`` (``gt_cost`` filled).

    Returns:
        :class:`Diagnosis`, the camera furthest from the texture (as a multiple of the rig
        median) first; a camera with no footprint on it is inconclusive
        (:attr:`Doubt.NO_FOOTPRINT`).
    """
    findings, med, quick_text, _ = _seam_findings(rig, [analysis])
    gt_cost = analysis.gt_cost or {}
    vals = [v for v in gt_cost.values() if np.isfinite(v)]
    gt_med = float(np.median(vals)) if vals else float("nan")
    for cam, f in findings.items():
        g = gt_cost.get(cam, float("nan"))
        ratio = g / max(gt_med, 1e-3) if np.isfinite(g) else 0.0
        f.gt_cost = g
        f.score = float(ratio)
        f.verdict = MISCALIBRATED if ratio >= STANDOUT_RATIO else (OK if np.isfinite(g) else INCONCLUSIVE)
        f.doubt = Doubt.NO_FOOTPRINT if f.verdict == INCONCLUSIVE else None
        f.witnesses = {"ground truth": f.verdict}
        f.reason = (f"{cam}: against the ground-truth texture {ratio:.1f}x the rig median "
                    f"(cost {g:.3f} vs {gt_med:.3f}); {quick_text[cam]}.")
    return Diagnosis(sorted(findings.values(), key=lambda f: -f.score), seam_median=med)


@on_one_thread
def rotate_suspects(rig: Rig, images: Images, grid: BEVGrid | None = None, settings: DiagnoseSettings = DEFAULTS,
                    progress: Progress | None = None, analyses: Sequence[SeamAnalysis] | None = None) -> Diagnosis:
    """The thorough seam test: each suspect (highest quick score first) rotated alone by a
    quick refinement, ranked by how much that repairs its seams.

    A misaligned camera fixes *both* of its seams; a good neighbour can only trade one seam
    against the other.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> uint8 RGB image (H, W, 3), or a list of such frames.
        grid: Ground grid for the seams; default :func:`seam_grid`.
        settings: ``suspects``, ``levels``, ``sampler`` and the seam analysis.
        progress: Optional ``callback(done, total, camera)``.
        analyses: Precomputed :func:`analyze_seams` results, one per frame.

    Returns:
        :class:`Diagnosis`, the largest seam repair first.

    Convention:
        The score is the drop of the camera's mean seam cost (``1 -`` NGF correlation, over
        its seams in every frame) under the quick refinement.
    """
    frames = as_pyramids(images)
    grid = seam_grid() if grid is None else grid
    analyses = settings.analyses(rig, frames, grid) if analyses is None else analyses
    findings, med, quick_text, seam_v = _seam_findings(rig, analyses)
    order = sorted(rig.names, key=lambda n: -findings[n].quick_score)
    tested = order if settings.suspects is None else order[:max(1, settings.suspects)]
    for k, cam in enumerate(tested):
        f = findings[cam]
        if progress is not None:
            progress(k, len(tested), cam)
        try:
            _, hist = refine_camera(rig, frames, grid, cam, SeamRefineSettings(
                levels=settings.levels, ring=settings.ring, sampler=settings.sampler))
        except InputError:  # no seam with another camera on this grid
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
    _seams_said(findings, seam_v)
    return Diagnosis(sorted(findings.values(), key=lambda f: -f.score), seam_median=med)


def _lidar_findings(rig: Rig, findings: dict[str, CameraFinding], evidence: Mapping[str, CameraEvidence],
                    seam_v: Mapping[str, SeamVerdict], quick_text: Mapping[str, str], rule: VerdictRule,
                    motion_known: bool = True, intensity_known: bool = True) -> RigConsensus:
    """Fill the LiDAR fields and verdicts of ``findings`` in place (their seam verdicts
    ``seam_v`` as the seams found them); returns the consensus.

    The verdict rests on what the scan carries, not on its container. A scan that states no
    ego motion to the exposures (``motion_known`` False: a plain array, or a LidarScan without
    ``exposure_from_keyframe``) neither convicts nor clears a camera of a rig of several
    cameras, whose exposures the car moved between; nor, with neither intensity nor motion,
    of a one-camera rig (its depth edges alone cannot tell a turn from the timing). Every
    camera is then "inconclusive" for that first (:attr:`Doubt.SCAN_WITHOUT_MOTION`,
    :attr:`Doubt.SCAN_WITHOUT_INTENSITY_OR_MOTION`; its own evidence stays in the reason),
    unless the LiDAR cannot judge it at all (:data:`BLIND_DOUBTS` stay):
    the same points in any form give the same verdicts, and a fuller form is sure only where
    a poorer one says what it lacks."""
    consensus = rig_consensus(rig, evidence, min_points=MIN_EDGE_POINTS)
    can_judge = motion_known or (len(rig) == 1 and intensity_known)
    for cam, f in findings.items():
        ev = evidence[cam]
        lv = lidar_verdict(ev, consensus, rule=rule)
        judged = combine(lv, seam_v[cam], f.quick_score)
        f.verdict, f.doubt, text = judged.verdict, judged.doubt, judged.reason
        if not can_judge and f.doubt not in BLIND_DOUBTS:  # the scan's lack first, unless the LiDAR is blind here
            text = f"{text}; {'but ' if f.verdict != INCONCLUSIVE else 'and '}" + (
                NO_MOTION_NOTE if intensity_known else NO_EVIDENCE_NOTE)
            f.verdict = INCONCLUSIVE
            f.doubt = Doubt.SCAN_WITHOUT_MOTION if intensity_known else Doubt.SCAN_WITHOUT_INTENSITY_OR_MOTION
        said = [ev.set_aside_reason] if ev.set_aside and f.doubt is not Doubt.FRAME_SET_ASIDE else []
        text = "; ".join([text, *said, *(r for r in (ev.repeats_reason, ev.frozen_reason) if r)])  # what it rests on
        f.witnesses = judged.witnesses
        if ev.n_points > 0:  # no edge point in view: nothing measured, not an offset of 0 +- inf
            f.offset_deg = {a: float(v) for a, v in zip(AXES, lv.residual_deg)}
            f.uncertainty_deg = {a: float(v) for a, v in zip(AXES, lv.uncertainty_deg)}
        f.edge_points = ev.n_points
        f.lidar = ev.second_look if lv.second_look else ev  # the look the verdict is (its optimum, its profiles)
        f.evidence = ev  # as made: judged again, it reads its second look where the verdict does
        f.score = float(offset_angle_deg(lv.residual_deg))
        note = f"; {PAIR_NOTE}" if len(rig) == 1 else ""
        f.reason = f"{text} ({quick_text[cam]}){note}."
    return consensus


def _null_test(rig: Rig, images: Mapping[str, np.ndarray], findings: Mapping[str, CameraFinding],
               tolerance_deg: float) -> None:
    """An image that does not show the LiDAR's edges where the optimum puts them supports no
    verdict (what structureless images give, :data:`MIN_IMAGE_LIFT`), nor does one whose edges
    are too broad to tell a pose within ``tolerance_deg`` from one beyond it (a heavy blur,
    :data:`MIN_IMAGE_SHARPNESS`): such a camera's sure verdict becomes "inconclusive"
    (:attr:`Doubt.IMAGE_WITHOUT_EDGES`, :attr:`Doubt.IMAGE_TOO_BLURRED`), in place."""
    for f in findings.values():
        if f.verdict == INCONCLUSIVE or f.lidar is None or f.camera not in images:
            continue
        sup = image_support(images[f.camera], rig[f.camera], f.lidar.uv_best, tolerance_deg)
        if sup.lift < MIN_IMAGE_LIFT:
            f.verdict, f.doubt = INCONCLUSIVE, Doubt.IMAGE_WITHOUT_EDGES
            f.reason += (f" But the image shows too little of the LiDAR's edges to support a verdict (lift "
                         f"{sup.lift:.3f} < {MIN_IMAGE_LIFT}, what structureless images give).")
        elif sup.sharpness < MIN_IMAGE_SHARPNESS:
            f.verdict, f.doubt = INCONCLUSIVE, Doubt.IMAGE_TOO_BLURRED
            f.reason += (f" But the image's edges are too broad to place the camera within {tolerance_deg:g} deg "
                         f"(moving the LiDAR's edges by that loses {sup.sharpness:.0%} of their lift, less than "
                         f"{MIN_IMAGE_SHARPNESS:.0%}: a blurred image).")


@on_one_thread
def judge_with_lidar(rig: Rig, images: Images, grid: BEVGrid | None = None, lidar: object = None, *,
                     settings: DiagnoseSettings = DEFAULTS, evidence: Mapping[str, CameraEvidence] | None = None,
                     ignore: Mapping[str, object] | None = None, progress: Progress | None = None,
                     analyses: Sequence[SeamAnalysis] | None = None) -> Diagnosis:
    """Which camera is off, with the LiDAR as witness (and the seams beside it).

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> uint8 RGB image (H, W, 3), or a list of such frames.
        grid: Ground grid for the seams; default :func:`seam_grid`.
        lidar: Points in the ego frame at the images' time, as for :func:`diagnose`; not
            needed when ``evidence`` is given.
        settings: ``replicates``, ``rule`` and the seam analysis.
        evidence: Precomputed LiDAR evidence of every camera
            (:func:`bevviz.calibration.lidar.evidence.lidar_evidence`).
        ignore: Optional camera name -> polygons that do not show the world
            (:func:`bevviz.calibration.lidar.masks.ignore_masks`).
        progress: Optional ``callback(done, total, camera)`` for the LiDAR alignment.
        analyses: Precomputed :func:`analyze_seams` results, one per frame.

    Returns:
        :class:`Diagnosis`: worst first (miscalibrated, inconclusive, ok; by score within
        each), with the rig consensus, the timing sentence and the rig-level LiDAR doubt.
    """
    frames = as_pyramids(images)
    analyses = settings.analyses(rig, frames, grid) if analyses is None else analyses
    findings, med, quick_text, seam_v = _seam_findings(rig, analyses)
    motion_known = intensity_known = True
    pairs: list[LidarFrame] = []
    if evidence is None:
        pairs = as_lidar_frames([p.images for p in frames], lidar, ignore_masks(rig, ignore))
        motion_known = any(len(fr.scan.exposure_from_keyframe) for fr in pairs)  # stated, whatever the container
        intensity_known = any(fr.ranks is not None for fr in pairs)
        evidence = lidar_evidence(rig, None, pairs, replicates=settings.replicates, progress=progress,
                                  second_look=False)
    if lidar is not None:
        evidence = _second_looks_read(rig, evidence, lambda: pairs or as_lidar_frames(
            [p.images for p in frames], lidar, ignore_masks(rig, ignore)), settings)
    consensus = _lidar_findings(rig, findings, evidence, seam_v, quick_text, settings.rule, motion_known,
                                intensity_known)
    _null_test(rig, frames[0].images, findings, settings.rule.tolerance_deg)
    timing = rig_timing({n: ev.timing for n, ev in evidence.items()
                         if n in rig.names and ev.n_points >= MIN_EDGE_POINTS})
    return Diagnosis(order_findings(findings.values()), consensus=consensus, seam_median=med, timing=timing,
                     lidar_doubt=lidar_doubt(consensus))


def _second_looks_read(rig: Rig, evidence: Mapping[str, CameraEvidence], pairs: Callable[[], list[LidarFrame]],
                       settings: DiagnoseSettings) -> Mapping[str, CameraEvidence]:
    """``evidence`` with a second look (made from ``pairs()``) for each camera whose first look
    doubts its landscape (:data:`SECOND_LOOK_DOUBTS`): the only ones its verdict reads, so the
    verdicts are those of :func:`lidar_evidence` with every second look, at half the cost."""
    consensus = rig_consensus(rig, evidence, min_points=MIN_EDGE_POINTS)  # as _lidar_findings judges
    wanted = [n for n in rig.names if evidence[n].second_look is None and evidence[n].n_points > 0
              and lidar_verdict(evidence[n], consensus, rule=settings.rule).doubt in SECOND_LOOK_DOUBTS]
    return with_second_looks(rig, evidence, pairs(), wanted) if wanted else evidence


@on_one_thread
def diagnose(rig: Rig, images: Images, grid: BEVGrid | None = None, lidar: object = None, *,
             settings: DiagnoseSettings = DEFAULTS, ground_truth: GroundTruth | np.ndarray | None = None,
             evidence: Mapping[str, CameraEvidence] | None = None, ignore: Mapping[str, object] | None = None,
             progress: Progress | None = None, analyses: Sequence[SeamAnalysis] | None = None) -> Diagnosis:
    """Rank the rig's cameras by how likely their extrinsics are wrong, with a verdict each; worst first.

    Asks the question the inputs allow: with ``lidar`` (or ``evidence``)
    :func:`judge_with_lidar`; with a ``ground_truth`` texture :func:`against_texture`;
    else the seams, :func:`rotate_suspects` (``settings.thorough``, the default) or
    :func:`rank_seams`.

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
            every camera's exposure with rings inferred; a scan that states no ego motion
            (an array, or a LidarScan without ``exposure_from_keyframe``) neither convicts
            nor clears a camera of a rig of several cameras (every form of the same points
            gives the same verdicts; pass a LidarScan with its motion to be judged).
        settings: :class:`DiagnoseSettings` (default: the shipped doctor).
        ground_truth: Optional known BEV texture (:class:`GroundTruth` or an array
            (H_bev, W_bev, 3) on ``grid``) in the first frame's ego frame.
        evidence: Precomputed LiDAR evidence; ``lidar`` is then not needed.
        ignore: Optional camera name -> polygons (lists of (u, v) pixels of the calibrated
            image) that do not show the world, e.g. the car's own body: LiDAR points there
            are not used.
        progress: Optional ``callback(done, total, camera)`` for the thorough test and the
            LiDAR alignment.
        analyses: Precomputed :func:`analyze_seams` results, one per frame.

    Returns:
        :class:`Diagnosis`: one :class:`CameraFinding` per camera, worst first (with LiDAR:
        miscalibrated, then inconclusive, then ok, by score within each; without, by score).

    Convention:
        Seam costs are ``1 -`` normalised-gradient-field correlation (see :class:`SeamPair`);
        LiDAR offsets are body-frame (FLU) degrees, see :mod:`bevviz.calibration.lidar.evidence`
        and docs/conventions.md.
    """
    with_lidar = lidar is not None or evidence is not None
    if analyses is None:
        analyses = settings.analyses(rig, images, grid, ground_truth)
    if with_lidar:
        return judge_with_lidar(rig, images, grid, lidar, settings=settings, evidence=evidence, ignore=ignore,
                                progress=progress, analyses=analyses)
    if analyses[0].gt_cost is not None:
        return against_texture(rig, analyses[0])
    if settings.thorough is None or settings.thorough:
        return rotate_suspects(rig, images, grid, settings, progress, analyses)
    return rank_seams(rig, analyses)
