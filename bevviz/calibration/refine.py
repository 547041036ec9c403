"""Refinement with the LiDAR as witness, accepted only when its own held-out check passes.

The correction turns the camera by minus its *residual* (its offset against the LiDAR less
what the rig consensus of the *other* cameras predicts for it,
:mod:`~bevviz.calibration.lidar.consensus`): the camera is brought in line with the others, not
with a LiDAR that may itself be off. A camera is corrected only when the LiDAR verdict
rejects its stored pose (:func:`~bevviz.calibration.verdicts.lidar_verdict` says
"miscalibrated"): what the evidence does not establish is not changed. The correction then
moves all three axes to the optimum (leaving a small axis at its stored value would leave
that part of the error in place).

Held-out check (both halves of the evidence must agree):
    The camera's edge points are split into two halves by their image cells (a
    checkerboard, so both halves cover the whole image). Each half is aligned on its own
    (from the full-data optimum and from the stored calibration). The correction is
    accepted when

    * the camera is turned beyond the tolerance (:func:`~bevviz.rotations.offset_angle_deg`) in
      ``CONFIDENCE`` of the replicates (a camera within it needs no change),
    * the verdict rejects the stored pose,
    * the correction is known well enough: on every axis the bootstrap spread of the
      residual is at most ``MAX_SPREAD_DEG``,
    * the two halves' optima agree within ``HALF_AGREEMENT_DEG`` on every corrected axis,
    * each half's correction raises the *other* half's score above the stored calibration's
      (cross-validation: the correction explains evidence it was not fitted to),
    * where both kinds of edge hold at least ``MIN_EDGE_POINTS`` points, the depth edges
      alone and the reflectivity edges alone put the camera within ``KIND_AGREEMENT_DEG`` of
      each other on every axis (two witnesses of different physics: halves can agree on a
      roll the reflectivity edges do not share), and
    * judged again at the corrected pose (its evidence measured afresh, the rig consensus of
      the other cameras), the LiDAR calls the camera calibrated ("ok": its offset pinned
      down and within the tolerance): a correction can pass every check above and still
      leave the camera's roll spread over degrees there.

    A correction that passes every check is still only *proposed* (``history.proposal``,
    not applied) when the LiDAR places the rig's other, calibrated cameras further than
    ``FLOOR_MEDIAN_DEG`` from their stored poses (median over at least
    ``MIN_FLOOR_CAMERAS`` of them, :func:`placement_floor`): the corrected camera would end
    about as far from its true pose, and fewer than 9 in 10 corrections within
    ``TARGET_DEG`` (docs/calibration.md, tuning table: the real keyframe whose corrections
    are only proposed).

    Otherwise the input rig comes back unchanged (``history.accepted`` False), so a
    refinement never makes a calibration worse on evidence it cannot confirm.

Convention:
    Body-frame (FLU) rotations in degrees as :mod:`bevviz.calibration.lidar.evidence`; see
    docs/conventions.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.diagnose import DiagnoseSettings, diagnose
from bevviz.calibration.lidar.alignment import AXES, EdgeAlignment
from bevviz.calibration.lidar.consensus import RigConsensus, rig_consensus
from bevviz.calibration.lidar.edge_maps import LOCAL_MEAN_RAD
from bevviz.calibration.lidar.edges import DEPTH, REFLECTIVITY
from bevviz.calibration.lidar.evidence import CameraEvidence, camera_evidence, lidar_evidence, with_second_looks
from bevviz.calibration.lidar.frames import LidarFrame, as_lidar_frames
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.calibration.perturbations import camera_delta, perturb_camera
from bevviz.calibration.seams.analysis import seam_grid
from bevviz.calibration.seams.pyramid import as_pyramids
from bevviz.calibration.seams.refine import (
    RefineHistory,
    RefineStep,
    SeamRefineSettings,
    refine_camera,
)
from bevviz.calibration.verdicts import (
    CONFIDENCE,
    MIN_EDGE_POINTS,
    MISCALIBRATED,
    OK,
    RULE,
    TOLERANCE_DEG,
    VerdictRule,
    format_axes,
    lidar_verdict,
)
from bevviz.camera import Camera, Rig
from bevviz.rotations import offset_angle_deg

__all__ = ["HALF_AGREEMENT_DEG", "KIND_AGREEMENT_DEG", "MAX_SPREAD_DEG", "MIN_FLOOR_CAMERAS", "TARGET_DEG",
           "FLOOR_MEDIAN_DEG", "RefineSettings", "lidar_placement", "placement_floor", "refine_extrinsics",
           "refine_with_lidar"]

#: Largest disagreement (degrees, any corrected axis) between the two halves' optima: the
#: tolerance itself (halves further apart than what counts as calibrated cannot confirm).
HALF_AGREEMENT_DEG = TOLERANCE_DEG
#: Largest bootstrap spread (degrees) of a corrected axis (docs/calibration.md, tuning table).
MAX_SPREAD_DEG = 0.35
#: Largest disagreement (degrees, any axis) between the depth-edge and the reflectivity-edge
#: optima of a corrected camera (docs/calibration.md, tuning table).
KIND_AGREEMENT_DEG = 0.75
#: The accuracy (degrees, rotation angle from the true pose) an applied correction promises.
TARGET_DEG = 0.3
#: Median over 90th percentile of a Maxwell distribution (1.538 / 2.500): the rotation angle
#: of an error whose three axes are independent zero-mean Gaussians of one spread.
MAXWELL_MEDIAN_TO_P90 = 0.615
#: Largest median (degrees) of the rig's floor (:func:`placement_floor`) under which a
#: correction is applied: with errors like the calibrated cameras', 90% of corrections then
#: end within ``TARGET_DEG`` (0.18 deg).
FLOOR_MEDIAN_DEG = TARGET_DEG * MAXWELL_MEDIAN_TO_P90
#: Fewest other cameras the LiDAR must pin down before their placements (the rig's floor,
#: :func:`placement_floor`) can hold a correction back: one camera's placement is its own
#: error as much as the LiDAR's.
MIN_FLOOR_CAMERAS = 2


def _align_half(al: EdgeAlignment, weights: np.ndarray, starts: Sequence[np.ndarray]) -> np.ndarray:
    """The best optimum of the searches from ``starts`` (each (3,)) on the weighted points, (3,)."""
    ds = np.asarray(starts, dtype=np.float64).reshape(-1, 3)
    ss = np.zeros(len(ds))
    for level in range(al.levels):
        ds, ss = al.refine_many(ds, level, weights, step=0.25 if level == 0 else 0.1)
    return ds[int(np.argmax(ss))]


def lidar_placement(rig: Rig, evidence: Mapping[str, CameraEvidence], name: str,
                    consensus: RigConsensus | None = None) -> Camera | None:
    """Where the LiDAR puts camera ``name``: the stored camera turned by minus its residual
    against the consensus of the *other* cameras in ``evidence`` (what a refinement aims at).

    Args:
        rig: The rig the evidence was measured on.
        evidence: Camera name -> :class:`CameraEvidence`; only these cameras form the consensus.
        name: The camera to place.
        consensus: ``rig_consensus(rig, evidence, leave_out=name)`` when already fitted.

    Returns:
        The placed camera, or None where the LiDAR does not pin it down: too few edge points,
        fewer than two bootstrap replicates, or a bootstrap spread above ``MAX_SPREAD_DEG``
        on some axis (a refinement's own limit).

    Convention:
        Body-frame (FLU) rotations as :mod:`bevviz.calibration.lidar.evidence`.
    """
    ev = evidence[name]
    if ev.n_points < MIN_EDGE_POINTS or len(ev.replicates_deg) < 2:
        return None
    if consensus is None:
        consensus = rig_consensus(rig, evidence, min_points=MIN_EDGE_POINTS, leave_out=name)
    res = consensus.residual(ev)  # (B, 3)
    if np.max(res.std(axis=0)) > MAX_SPREAD_DEG:
        return None
    return perturb_camera(rig[name], *(-np.median(res, axis=0)))


def placement_floor(rig: Rig, evidence: Mapping[str, CameraEvidence], camera: str,
                    rule: VerdictRule = RULE) -> dict[str, float]:
    """How far the LiDAR puts the rig's *other*, calibrated cameras from their stored poses.

    Each other camera the LiDAR pins down (:func:`lidar_placement`, with ``camera`` left out
    of every consensus: its own error must not move the others) gives the rotation angle
    between its stored pose and its placement; a camera the LiDAR verdict calls
    "miscalibrated" is left out (its placement is its own error, not the LiDAR's accuracy).
    That is the accuracy to expect of ``camera`` corrected by the LiDAR: the LiDAR cannot
    place a camera better than it places the calibrated ones.

    Returns:
        Other camera -> degrees (rotation angle), for the calibrated cameras the LiDAR pins down.
    """
    others = {n: ev for n, ev in evidence.items() if n != camera and n in rig.names}
    out: dict[str, float] = {}
    for n in others:
        consensus = rig_consensus(rig, others, min_points=MIN_EDGE_POINTS, leave_out=n)
        if lidar_verdict(others[n], consensus, rule=rule).verdict == MISCALIBRATED:
            continue
        placed = lidar_placement(rig, others, n, consensus=consensus)
        if placed is not None:
            out[n] = float(camera_delta(rig[n], placed).angle_deg)
    return out


def _floor_words(floor: Mapping[str, float]) -> str:
    """The floor in words: range, median and how many cameras."""
    v = np.array(list(floor.values()))
    if len(v) == 1:
        return f"the rig's one other calibrated camera the LiDAR pins down sits {v[0]:.2f} deg from where it puts it"
    return (f"{len(v)} calibrated cameras of the rig sit {v.min():.2f} to {v.max():.2f} deg (median "
            f"{np.median(v):.2f}) from where the LiDAR puts them")


def refine_with_lidar(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                      camera: str, lidar: object, evidence: Mapping[str, CameraEvidence] | None = None,
                      progress: Callable[[int, int, float], None] | None = None, rule: VerdictRule = RULE,
                      alignment: EdgeAlignment | None = None) -> tuple[Rig, RefineHistory]:
    """Refine one camera's rotation against the LiDAR edges, checked on held-out evidence.

    Args:
        rig: The rig; every camera but ``camera`` is held fixed.
        images: One frame (camera name -> uint8 RGB (H, W, 3)) or a list of frames.
        camera: Camera to refine.
        lidar: One scan per frame (see :func:`bevviz.calibration.lidar.frames.as_lidar_frames`).
        evidence: Precomputed evidence for every camera of ``rig`` (computed when None;
            the consensus needs all cameras).
        progress: Optional ``callback(step, total_steps, loss)``.
        rule: The verdict's constants (the stored pose must be rejected under them).
        alignment: The camera's :class:`~bevviz.calibration.lidar.alignment.EdgeAlignment` on these
            frames, when already built.

    Returns:
        (the corrected rig, or ``rig`` itself when the check fails; :class:`RefineHistory`
        with ``accepted``, ``check``, the correction as ``delta``, and ``initial_loss`` /
        ``final_loss`` = minus the alignment score before / after).

    Raises:
        ValueError: unknown camera, or malformed ``lidar``.
    """
    t0 = time.perf_counter()
    cam = rig[camera]  # named error for an unknown camera
    frames: list[LidarFrame] = (list(lidar) if isinstance(lidar, (list, tuple)) and lidar
                                and all(isinstance(f, LidarFrame) for f in lidar) else as_lidar_frames(images, lidar))
    if evidence is None or any(n not in evidence for n in rig.names):
        evidence = lidar_evidence(rig, None, frames)
    evidence = with_second_looks(rig, evidence, frames, rig.names)  # a diagnosis makes them only where it reads them
    if progress is not None:
        progress(1, 3, float("nan"))
    consensus = rig_consensus(rig, evidence, min_points=MIN_EDGE_POINTS, leave_out=camera)
    ev = evidence[camera]
    verdict = lidar_verdict(ev, consensus, rule=rule)
    if verdict.second_look:  # the verdict is the second look's: so are the offset, its halves and kinds
        ev, alignment = ev.second_look, EdgeAlignment(cam, ev.pooled(frames), local_mean_rad=LOCAL_MEAN_RAD)
    expected = consensus.expected_deg.get(camera, np.zeros(3))
    res = consensus.residual(ev)  # (B, 3) the camera's own offset per replicate
    own = np.median(res, axis=0)
    beyond = float(np.mean(offset_angle_deg(res) > TOLERANCE_DEG)) >= CONFIDENCE  # turned beyond the tolerance
    correction = -own if beyond else np.zeros(3)  # hypothesis applied to the stored camera: every axis, or none
    new_cam = perturb_camera(cam, *correction)
    hist = RefineHistory(camera)
    al = EdgeAlignment(cam, ev.pooled(frames)) if alignment is None else alignment
    last = max(al.levels - 1, 0)
    hist.initial_loss = -al.score(np.zeros(3), last)
    hist.final_loss = -al.score(correction, last)
    hist.steps = [RefineStep(0, last, hist.initial_loss, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
                  RefineStep(1, last, hist.final_loss, tuple(float(v) for v in correction), (0.0, 0.0, 0.0))]
    which = ", ".join(AXES)  # a correction turns every axis
    if len(al) < MIN_EDGE_POINTS:
        hist.check = f"too few LiDAR edge points ({len(al)}, at least {MIN_EDGE_POINTS}) to refine against"
    elif not beyond:
        hist.check = (f"no correction: the camera's own offset ({format_axes(own)} deg) is not beyond "
                      f"{TOLERANCE_DEG:g} deg in {CONFIDENCE:.0%} of the bootstrap replicates")
    elif verdict.verdict != MISCALIBRATED:
        hist.check = f"not corrected: the LiDAR verdict does not reject the stored pose ({verdict.reason})"
    elif np.max(spread := res.std(axis=0)) > MAX_SPREAD_DEG:
        loose = ", ".join(a for a, v in zip(AXES, spread) if v > MAX_SPREAD_DEG)  # the axes it does not know
        hist.check = (f"the correction of {loose} is not pinned down: bootstrap spread "
                      + ", ".join(f"{a} {v:.2f}" for a, v in zip(AXES, spread))
                      + f" deg (at most {MAX_SPREAD_DEG:g})")
    else:
        halves = []  # each half's own offset (residual), (3,)
        for h in (0, 1):
            w = (al.parity == h).astype(np.float64)
            halves.append(-_align_half(al, w, [-ev.offset_deg, np.zeros(3)]) - expected)
        if progress is not None:
            progress(2, 3, float("nan"))
        gap = np.abs(halves[0] - halves[1])
        gains = []
        for h in (0, 1):
            other = (al.parity != h).astype(np.float64)
            fix = -halves[h]
            gains.append(al.score(fix, last, other) - al.score(np.zeros(3), last, other))
        # each kind alone, refined from the full optimum (a local question: does it stay there?);
        # only asked when the halves have confirmed the correction
        halves_ok = np.max(gap) <= HALF_AGREEMENT_DEG and min(gains) > 0
        kinds = [-_align_half(al, (al.kind == k).astype(np.float64), [-ev.offset_deg])
                 for k in (DEPTH, REFLECTIVITY) if halves_ok and int(np.count_nonzero(al.kind == k)) >= MIN_EDGE_POINTS]
        kind_gap = float(np.max(np.abs(kinds[0] - kinds[1]))) if len(kinds) == 2 else 0.0
        if np.max(gap) > HALF_AGREEMENT_DEG:
            apart = ", ".join(a for a, v in zip(AXES, gap) if v > HALF_AGREEMENT_DEG)
            hist.check = (f"the two halves of the evidence disagree on {apart} by up to {np.max(gap):.2f} deg "
                          f"(half A: {format_axes(halves[0])}, half B: {format_axes(halves[1])}; "
                          f"at most {HALF_AGREEMENT_DEG:g})")
        elif min(gains) <= 0:
            hist.check = (f"a half's correction does not improve the other half (score gains {gains[0]:+.4f}, "
                          f"{gains[1]:+.4f})")
        elif kind_gap > KIND_AGREEMENT_DEG:
            hist.check = (f"the depth edges and the reflectivity edges disagree on where the camera points by "
                          f"{kind_gap:.2f} deg (depth: {format_axes(kinds[0])}, reflectivity: {format_axes(kinds[1])}; "
                          f"at most {KIND_AGREEMENT_DEG:g})")
        else:
            # judged again at the corrected pose, the LiDAR must call the camera calibrated
            after = dict(evidence, **{camera: camera_evidence(new_cam, frames)})
            again = lidar_verdict(after[camera], rig_consensus(rig.replace(new_cam), after, min_points=MIN_EDGE_POINTS,
                                                               leave_out=camera), rule=rule)
            floor = placement_floor(rig, evidence, camera, rule=rule) if again.verdict == OK else {}
            typical = float(np.median(list(floor.values()))) if len(floor) >= MIN_FLOOR_CAMERAS else 0.0
            agree = f"; depth and reflectivity edges agree within {kind_gap:.2f} deg" if len(kinds) == 2 else ""
            passed = (f"both halves agree within {np.max(gap):.2f} deg and each improves the other (score gains "
                      f"{gains[0]:+.4f}, {gains[1]:+.4f}){agree}; judged again at the corrected pose the LiDAR "
                      "calls it calibrated")
            if again.verdict != OK:
                hist.check = f"the corrected pose is not confirmed: judged again there, {again.reason}"
            elif typical > FLOOR_MEDIAN_DEG:
                hist.proposal = new_cam
                hist.check = (f"proposed, not applied: the LiDAR would correct {which} by {format_axes(correction)} "
                              f"deg ({passed}), but {_floor_words(floor)}: the corrected camera would end about "
                              f"that far from its true pose, and with a median above {FLOOR_MEDIAN_DEG:.2f} deg fewer "
                              f"than 9 in 10 corrections end within the {TARGET_DEG:g} deg an applied correction "
                              "promises (apply the proposal yourself if that is close enough); "
                              f"{verdict.reason}")
            else:
                hist.accepted = True
                where = (f"; {_floor_words(floor)}: expect the corrected camera within about that" if floor
                         else "; the rig has no other camera to measure the LiDAR's accuracy on" if len(rig) == 1
                         else "; no other camera of the rig is pinned down by the LiDAR, so its accuracy on "
                              "calibrated cameras is not measured here")
                hist.check = f"corrected {which} by {format_axes(correction)} deg: {passed}{where}; {verdict.reason}"
    hist.delta = camera_delta(cam, new_cam)
    hist.seconds = time.perf_counter() - t0
    if progress is not None:
        progress(3, 3, hist.final_loss)
    return (rig.replace(new_cam) if hist.accepted else rig), hist


@dataclass(frozen=True)
class RefineSettings(SeamRefineSettings):
    """What a refinement runs: the seam refinement's settings
    (:class:`~bevviz.calibration.seams.refine.SeamRefineSettings`: ``translation``, ``levels``,
    ``ring``, ``neighbours``, ``robust``, ``sampler``, ``search_deg``) and the LiDAR verdict's.

    Attributes:
        rule: The LiDAR verdict's constants (the stored pose must be rejected under them).

    Raises:
        InputError: ``levels`` not a non-empty sequence of :class:`Level` (when made).
    """

    rule: VerdictRule = RULE


def refine_extrinsics(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                      grid: BEVGrid | None = None, camera: str | None = None, lidar: object = None, *,
                      settings: RefineSettings | None = None, evidence: Mapping[str, CameraEvidence] | None = None,
                      progress: Callable[[int, int, float], None] | None = None,
                      ignore: Mapping[str, object] | None = None) -> tuple[Rig, RefineHistory]:
    """Refine one camera's extrinsics; keep the result only if it passes its own held-out check.

    With ``lidar``: the camera's rotation is aligned with the LiDAR edges relative to the
    rig consensus and checked on two halves of the evidence (:func:`refine_with_lidar`); a
    camera with too few LiDAR edge points (``MIN_EDGE_POINTS``) falls back to its seams.
    Without: its seam inconsistency is minimised
    (:func:`bevviz.calibration.seams.refine.refine_camera`) and the result is kept only when
    every seam improves on its own and ends consistent.

    Args:
        rig: The rig; every camera but ``camera`` is held fixed.
        images: Camera name -> uint8 RGB image, shape (H, W, 3); or a list of such frames
            of the same rig; or :class:`~bevviz.calibration.seams.pyramid.ImagePyramid` objects.
        grid: Ground grid for the seams; only its extent is used. Default :func:`seam_grid`.
        camera: Camera to refine; default the first finding of :func:`diagnose`.
        lidar: Optional LiDAR witness, as for :func:`diagnose` (one scan per frame).
        settings: :class:`RefineSettings` (default: the shipped doctor's).
        evidence: Precomputed LiDAR evidence of every camera (with ``lidar``; saves aligning
            them again).
        progress: Optional ``callback(step, total_steps, loss)``.
        ignore: Optional per-camera polygons that do not show the world, as for :func:`diagnose`.

    Returns:
        (the rig with the refined camera, or the input rig unchanged when
        ``history.accepted`` is False; :class:`~bevviz.calibration.seams.refine.RefineHistory`,
        whose ``check`` says why).

    Raises:
        InputError: unknown camera, or (seams) a camera with no seam to refine against.

    Convention:
        The correction is a body-frame (FLU) rotation, applied as
        ``ego_from_body' = ego_from_body @ exp(rot)``. See docs/conventions.md.
    """
    s = RefineSettings() if settings is None else settings
    grid = seam_grid() if grid is None else grid
    frames = None
    if lidar is not None:  # aligned once: the diagnosis below (no camera given) reuses it
        frames = as_lidar_frames([p.images for p in as_pyramids(images)], lidar, ignore_masks(rig, ignore))
        if evidence is None or any(n not in evidence for n in rig.names):
            evidence = lidar_evidence(rig, None, frames)
    if camera is None:
        asked = DiagnoseSettings(sampler=s.sampler, rule=s.rule)
        camera = diagnose(rig, images, grid, lidar, settings=asked, evidence=evidence)[0].camera
    if frames is not None:
        if evidence[camera].n_points >= MIN_EDGE_POINTS:
            return refine_with_lidar(rig, None, camera, frames, evidence=evidence, progress=progress, rule=s.rule)
        # Too few LiDAR edges in this camera: the seams are the witness left.
    new_rig, hist = refine_camera(rig, images, grid, camera, s, progress)
    return (new_rig if hist.accepted else rig), hist
