"""Evaluate the Calibration Doctor on real frames with injected faults (``python -m bevviz.lab.evaluate``).

For every frame (a frame folder, :mod:`~bevviz.io.frame_folder`, or a
nuScenes-format dataroot: its first sample; default the real keyframe embedded in
``sample_data/real_nuscenes``):

* the *unperturbed* rig is diagnosed with the LiDAR: every camera it calls
  "miscalibrated" is a **false alarm** (the dataset's calibration is taken as the truth);
* every camera is turned, one at a time, by 1-2 degrees (or a band's) about a random axis
  (seeded, ``--faults`` per camera) with :func:`~bevviz.calibration.perturbations.perturb_rig` and
  the rig diagnosed again: is the faulty camera **named**, is any other camera named
  (**wrong**)? Then :func:`~bevviz.calibration.refine_extrinsics` refines the faulty
  camera with the LiDAR: accepted or not, and how far (degrees) from the dataset's
  calibration it ends compared with where it started (**worse** if further), and how far
  from where the LiDAR puts the *unperturbed* camera (the stored camera turned by minus
  its own residual on the clean frame, where the LiDAR pins that camera down): the
  refinement's own precision, apart from the LiDAR's disagreement with the dataset's
  calibration;
* the unperturbed rig is diagnosed again with the LiDAR points displaced by
  ``TIMING_SHIFTS_M`` along the car's axis (a LiDAR-camera timing error of a moving car:
  0.3 m is 30 ms at 10 m/s): every camera called "miscalibrated" is a **timing false
  alarm** (:mod:`~bevviz.calibration.lidar.sync`).

The fault sizes come from a band (``--band 2-5``, or ``--bands 0.5-1 1-2 2-5`` for several;
default 1-2 degrees, the faults drawn as they always were) and ``--frame-counts 1 3`` judges
each rig's frames in consecutive windows of 1 and of 3 frames, every window with the same
faults (:mod:`~bevviz.lab.bands`).

It prints one row per case, a table per frame (window) and in total, a table per fault band
and number of frames judged together (:func:`~bevviz.lab.tables.band_table`), and the
summary against the targets (PASS / FAIL). ``--loro`` adds the leave-one-rig-out table:
frames are grouped into rigs by their camera names; for each rig the verdict's constants
(:class:`~bevviz.calibration.verdicts.VerdictRule`) are chosen on the *other* rigs (the rule
with no false alarm and no wrong camera there that names the most faults) and tested on
the held-out one. The LiDAR evidence of a camera depends on that camera and the frame
alone, so the unperturbed cameras' evidence is computed once per frame and reused across
cases; the rules are re-judged on stored evidence.

Convention:
    Faults and errors are body-frame (FLU) rotations in degrees; the error of a camera is
    the rotation angle between it and the dataset's camera. See docs/conventions.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from bevviz.calibration.diagnose import DiagnoseSettings, diagnose
from bevviz.calibration.lidar.alignment import AXES, EdgeAlignment
from bevviz.calibration.lidar.evidence import camera_evidence
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.calibration.perturbations import camera_delta, perturb_rig
from bevviz.calibration.refine import (
    FLOOR_MEDIAN_DEG,
    TARGET_DEG,
    RefineSettings,
    lidar_placement,
    refine_extrinsics,
    refine_with_lidar,
)
from bevviz.calibration.seams.analysis import analyze_seams, seam_grid
from bevviz.calibration.verdicts import MIN_EDGE_POINTS, MISCALIBRATED, RULE, VerdictRule
from bevviz.camera import Camera, Rig
from bevviz.errors import InputError
from bevviz.io.frame_folder import RealFrame, load_frame_folder
from bevviz.io.nuscenes import load_lidar_from, load_sample_from, open_dataset
from bevviz.lab.bands import (
    BANDS,
    FAULT_RANGE_DEG,
    FAULTS_PER_CAMERA,
    band_faults,
    band_label,
    group_name,
    parse_band,
    parse_frame_counts,
    random_faults,
    sequences,
    windows,
)
from bevviz.lab.rule_search import RULE_GRID, Stored, leave_one_rig_out, rig_key, stored
from bevviz.lab.tables import band_table, counts, frame_table, unperturbed
from bevviz.lidar import LidarScan
from bevviz.sample_location import locate
from bevviz.threads import single_threaded

__all__ = ["BANDS", "Case", "DEFAULT_DATAROOT", "FAULTS_PER_CAMERA", "FAULT_RANGE_DEG", "RULE_GRID", "TIMING_SHIFTS_M",
           "Targets", "band_table", "evaluate", "evaluate_frames", "frame_table", "leave_one_rig_out", "load_frames",
           "main", "random_faults", "sequences", "summary"]

#: The embedded real keyframe (a checkout of the repository).
DEFAULT_DATAROOT = locate() / "real_nuscenes"
#: Injected faults (degrees) per axis, for axis-aligned cases.
DEGREES = (-2.0, -1.0, 1.0, 2.0)
#: Axis-aligned cases on the embedded nuScenes keyframe (camera, axis, degrees): one per
#: camera kind, every axis once.
QUICK_CASES = (("CAM_FRONT", "yaw", 2.0), ("CAM_BACK_LEFT", "pitch", -2.0), ("CAM_BACK", "roll", 2.0),
               ("CAM_FRONT_RIGHT", "pitch", 1.0))
#: Displacements (metres, ego +x) of the LiDAR points of the unperturbed rig: timing errors
#: (0.3 m: 10 m/s and 30 ms; 0.8 m: 16 m/s and half a sweep; 1.5 m: 30 m/s and half a sweep,
#: short of the timing fit's ``MAX_SHIFT_M``).
TIMING_SHIFTS_M = (-1.5, -0.8, -0.3, 0.3, 0.8, 1.5)


@dataclass
class Targets:
    """Issue targets the summary checks."""

    lidar_named_share: float = 0.70
    refine_within_share: float = 0.90


@dataclass
class Case:
    """One injected fault (or the unperturbed rig) and what the doctor made of it.

    Attributes:
        camera, axis, degrees: The fault (camera None for the unperturbed rig; axis
            ``"random"`` for a random axis, then ``degrees`` is the angle; axis ``"timing"``
            for the unperturbed rig with its LiDAR displaced, then ``degrees`` holds the
            displacement in metres along the car's axis).
        frame: The frame's name.
        fault_deg: The injected body rotation (roll, pitch, yaw), degrees.
        lidar_named / seams_named: Cameras named "miscalibrated" with LiDAR / seams only.
        lidar_verdict / seams_verdict: The faulty camera's verdict in each mode.
        lidar_reason: The faulty camera's reason (with LiDAR); for the unperturbed rig, the
            reasons of the cameras it named.
        start_deg: The faulty camera's error before refinement.
        lidar_accepted / lidar_end_deg: LiDAR refinement: accepted, and the error after.
        seams_accepted / seams_end_deg: The same for the seam refinement (when run).
        lidar_check / seams_check: Why each refinement was (not) accepted.
        lidar_end_vs_lidar_deg: The refined camera's distance from where the LiDAR puts the
            unperturbed camera (nan where the LiDAR does not pin that camera down): what a
            refinement can at best reach, whatever the dataset's calibration says.
        lidar_proposal_end_deg: The error of the correction the LiDAR refinement proposed but
            did not apply (its rig's floor was above the target), nan without one.
        cameras: Cameras in the rig.
        frames: How many frames were judged together.
        band: The fault band's label (``"1-2"``: degrees), "" for the unperturbed rig.
    """

    camera: str | None
    axis: str | None
    degrees: float
    frame: str = ""
    fault_deg: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    lidar_named: list[str] = field(default_factory=list)
    seams_named: list[str] = field(default_factory=list)
    lidar_verdict: str = ""
    lidar_reason: str = ""
    seams_verdict: str = ""
    start_deg: float = 0.0
    lidar_accepted: bool = False
    lidar_end_deg: float = float("nan")
    seams_accepted: bool = False
    seams_end_deg: float = float("nan")
    lidar_check: str = ""
    seams_check: str = ""
    lidar_end_vs_lidar_deg: float = float("nan")
    lidar_proposal_end_deg: float = float("nan")
    cameras: int = 0
    frames: int = 1
    band: str = ""


def _angle(a: Rig, b: Rig, name: str) -> float:
    return float(camera_delta(a[name], b[name]).angle_deg)


def _displaced(scan: LidarScan, shift_m: float) -> LidarScan:
    """``scan`` with every point moved ``shift_m`` metres along ego +x (a timing error)."""
    pts = np.array(scan.points, dtype=np.float32)
    pts[:, 0] += np.float32(shift_m)
    return replace(scan, points=pts)


def _nuscenes_frame(dataroot: Path, version: str = "v1.0-mini", sample: str | None = None) -> RealFrame:
    nusc = open_dataset(str(dataroot), version)
    token = sample or nusc.sample[0]["token"]
    rig, images = load_sample_from(nusc, token)
    return RealFrame(dataroot.name, rig, dict(images), load_lidar_from(nusc, token))


def load_frames(paths: Sequence[str | Path], version: str = "v1.0-mini") -> list[RealFrame]:
    """Read frames: a folder holding ``rig.json`` is a frame folder, any other a nuScenes dataroot.

    Raises:
        ValueError: naming ``frames`` for a path that is neither.
    """
    out = []
    for p in map(Path, paths):
        if (p / "rig.json").is_file():
            out.append(load_frame_folder(p))
        elif (p / version).is_dir():
            out.append(_nuscenes_frame(p, version))
        else:
            raise InputError(f"frames: {p} is neither a frame folder (rig.json) nor a nuScenes dataroot ({version}/)",
                             "frames", str(p))
    return out


def evaluate_frames(frames: Sequence[RealFrame], faults: Callable[[RealFrame], list] | None = None,
                    rule: VerdictRule = RULE, refine: bool = True, seams_refine: bool = False,
                    log: Callable[[str], None] | None = print,
                    sequence: bool = False, timing: Sequence[float] = TIMING_SHIFTS_M,
                    frame_counts: Sequence[int] | None = None) -> tuple[list[Case], list[Stored], dict]:
    """Run the unperturbed rig, the faults and the timing errors of every frame (or every window of frames).

    Args:
        frames: The frames.
        faults: ``faults(frame) -> [(camera, (roll, pitch, yaw) degrees), ...]``, each item
            optionally with a third element, the fault band's label
            (:func:`~bevviz.lab.bands.band_faults`); default :func:`random_faults` (band ``1-2``).
        rule: The verdict's constants.
        refine: Also refine each faulty camera with the LiDAR.
        seams_refine: Also refine it with seams only (slow).
        log: Where each case's row goes (None: nowhere).
        sequence: Judge the frames of one rig (:func:`sequences`) together: their evidence
            adds up (the faults are those of the sequence's first frame).
        timing: Displacements (metres along ego +x) of the unperturbed rig's LiDAR points,
            one case each; empty for none.
        frame_counts: Judge each rig's frames in consecutive windows of each of these
            counts (:func:`~bevviz.lab.bands.windows`: every window with the faults of the
            rig's first frame); None: as ``sequence`` says.

    Returns:
        (cases, what each case can be re-judged from, timings in seconds).
    """
    faults = band_faults if faults is None else faults
    cases: list[Case] = []
    stores: list[Stored] = []
    timings: dict[str, float] = {}
    grid = seam_grid()
    for source, group in windows(frames, frame_counts, sequence):
        frame = group[0]
        name = group_name(group)
        images = [f.images for f in group]
        lidar_frames = [lf for f in group for lf in as_lidar_frames(f.images, f.scan, ignore_masks(f.rig, f.ignore))]
        t0 = time.perf_counter()
        base_ev = {n: camera_evidence(frame.rig[n], lidar_frames) for n in frame.rig.names}
        placements: dict[str, Camera | None] = {}  # where the LiDAR puts each unperturbed camera
        timings.setdefault("evidence_s", 0.0)
        timings["evidence_s"] += time.perf_counter() - t0
        for cam, fault, band in [(None, np.zeros(3), ""), *((*item, "")[:3] for item in faults(source))]:
            bad = frame.rig if cam is None else perturb_rig(frame.rig, cam, roll_deg=fault[0], pitch_deg=fault[1],
                                                                yaw_deg=fault[2])
            ev = dict(base_ev)
            alignment = None
            if cam is not None:
                alignment = EdgeAlignment(bad[cam], lidar_frames)
                ev[cam] = camera_evidence(bad[cam], lidar_frames, alignment=alignment)
            analyses = [analyze_seams(bad, im, grid) for im in images] if len(bad) > 1 else None
            if cam is None:
                clean_analyses = analyses  # the timing cases below judge the same rig and images
            found = diagnose(bad, images, grid, settings=DiagnoseSettings(rule=rule), evidence=ev, analyses=analyses)
            case = Case(cam, None if cam is None else "random", float(np.linalg.norm(fault)), name,
                        [float(v) for v in fault], [f.camera for f in found if f.verdict == MISCALIBRATED],
                        cameras=len(bad), frames=len(group), band=band)
            stores.append(stored(bad, ev, found))
            if cam is None:
                case.lidar_reason = " | ".join(f.reason for f in found if f.verdict == MISCALIBRATED)
            else:
                mine = next(f for f in found if f.camera == cam)
                case.lidar_verdict, case.lidar_reason = mine.verdict, mine.reason
                case.start_deg = _angle(frame.rig, bad, cam)
                if refine:
                    new, hist = refine_with_lidar(bad, None, cam, lidar_frames, evidence=ev, rule=rule,
                                                  alignment=alignment) if ev[cam].n_points >= MIN_EDGE_POINTS else \
                        refine_extrinsics(bad, images, grid, cam, [f.scan for f in group],
                                          settings=RefineSettings(rule=rule), evidence=ev)
                    case.lidar_accepted, case.lidar_check = hist.accepted, hist.check
                    case.lidar_end_deg = _angle(frame.rig, new, cam)
                    if hist.proposal is not None:
                        case.lidar_proposal_end_deg = _angle(frame.rig, bad.replace(hist.proposal), cam)
                    if cam not in placements:
                        placements[cam] = lidar_placement(frame.rig, base_ev, cam)
                    placed = placements[cam]
                    if placed is not None:
                        case.lidar_end_vs_lidar_deg = float(camera_delta(placed, new[cam]).angle_deg)
                if seams_refine and len(bad) > 1:
                    new, hist = refine_extrinsics(bad, images, grid, cam)
                    case.seams_accepted, case.seams_check = hist.accepted, hist.check
                    case.seams_end_deg = _angle(frame.rig, new, cam)
            cases.append(case)
            if log is not None:
                log(_row(case))
        for shift in timing:  # the calibration untouched, the LiDAR displaced along the car's axis
            moved = [lf for f in group
                     for lf in as_lidar_frames(f.images, _displaced(f.scan, shift), ignore_masks(f.rig, f.ignore))]
            ev = {n: camera_evidence(frame.rig[n], moved) for n in frame.rig.names}
            found = diagnose(frame.rig, images, grid, settings=DiagnoseSettings(rule=rule), evidence=ev,
                             analyses=clean_analyses)
            case = Case(None, "timing", float(shift), name, cameras=len(frame.rig), frames=len(group),
                        lidar_named=[f.camera for f in found if f.verdict == MISCALIBRATED])
            case.lidar_reason = " | ".join(f.reason for f in found if f.verdict == MISCALIBRATED)
            stores.append(stored(frame.rig, ev, found))
            cases.append(case)
            if log is not None:
                log(_row(case))
    return cases, stores, timings


def evaluate(dataroot: str | Path = DEFAULT_DATAROOT, version: str = "v1.0-mini", sample: str | None = None,
             cases: list[tuple[str, str, float]] | None = None, seams_refine: bool = True,
             log=print, timing: Sequence[float] = TIMING_SHIFTS_M) -> tuple[list[Case], dict]:
    """Axis-aligned faults on one nuScenes sample (default: every camera x axis x ``DEGREES``)
    and the timing cases; returns (cases: the unperturbed rig, the faults in order, then the
    timing cases; timings in seconds, with one 6-camera diagnosis from scratch)."""
    frame = _nuscenes_frame(Path(dataroot), version, sample)
    if cases is None:
        cases = [(c, a, d) for c in frame.rig.names for a in AXES for d in DEGREES]

    def axis_faults(_: RealFrame) -> list[tuple[str, np.ndarray]]:
        return [(c, np.eye(3)[AXES.index(a)] * d) for c, a, d in cases]

    out, _, timings = evaluate_frames([frame], axis_faults, seams_refine=seams_refine, log=None, timing=timing)
    for c, (_, axis, deg) in zip(out[1:], cases):
        c.axis, c.degrees = axis, deg
    if log is not None:
        for c in out:
            log(_row(c))
    t0 = time.perf_counter()
    diagnose(frame.rig, frame.images, lidar=frame.scan)
    timings["diagnose_lidar_s"] = time.perf_counter() - t0
    return out, timings


def _row(c: Case) -> str:
    if c.camera is None and c.axis == "timing":
        label = f"LiDAR displaced {c.degrees:+.1f} m"
        return f"{c.frame:<14} {label:<30} named with LiDAR: {c.lidar_named or 'none'}"
    if c.camera is None:
        return f"{c.frame:<14} {'unperturbed rig':<30} named with LiDAR: {c.lidar_named or 'none'}"
    lid = f"{'ACC' if c.lidar_accepted else 'rej'} {c.start_deg:4.2f}->{c.lidar_end_deg:4.2f}"
    if np.isfinite(c.lidar_proposal_end_deg):
        lid += f" (proposed ->{c.lidar_proposal_end_deg:4.2f})"
    wrong = [n for n in c.lidar_named if n != c.camera]
    fault = ", ".join(f"{a} {v:+.2f}" for a, v in zip(AXES, c.fault_deg))
    return (f"{c.frame:<14} {c.camera:<16} ({fault}) | {c.lidar_verdict:<13}"
            f"{' WRONG ' + ','.join(wrong) if wrong else ''} | refine {lid}")


def _end_errors(ends: Sequence[float], limit: float = TARGET_DEG) -> str:
    """How many, the median and largest end error, and how many end within ``limit`` (degrees)."""
    v = np.asarray(ends, dtype=np.float64)
    return (f"{len(v)}, end error median {np.median(v):.3f} deg, max {v.max():.3f} deg, "
            f"{int(np.sum(v <= limit))} within {limit:g} deg")


def summary(cases: list[Case], timings: dict, targets: Targets | None = None) -> tuple[list[str], bool]:
    """Lines of the summary and whether every target passed."""
    targets = Targets() if targets is None else targets
    k = counts(cases)
    faults = [c for c in cases if c.camera is not None]
    acc = [c for c in faults if c.lidar_accepted]
    rows = []
    ok = True

    def check(name: str, passed: bool | None, text: str) -> None:
        """One target's line; ``passed`` None: not checked (never counts as met)."""
        nonlocal ok
        ok &= bool(passed)
        rows.append(f"{'NOT RUN' if passed is None else 'PASS' if passed else 'FAIL'}  {name}: {text}")

    share = k["named"] / max(k["faults"], 1)
    check("LiDAR names the faulty camera", share >= targets.lidar_named_share,
          f"{k['named']}/{k['faults']} = {share:.1%} (target >= {targets.lidar_named_share:.0%})")
    check("LiDAR names a wrong camera", k["wrong"] == 0, f"{k['wrong']} times (target 0)")
    base = unperturbed(cases)
    check("LiDAR on the unperturbed rigs", k["false_alarms"] == 0,
          f"{k['false_alarms']} false alarms (target 0): " + "; ".join(f"{c.frame}: {c.lidar_named or 'none'}"
                                                                        for c in base))
    timed = unperturbed(cases, timing=True)
    shifts = ", ".join(dict.fromkeys(f"{c.degrees:+.1f}" for c in timed))
    check("LiDAR on the unperturbed rigs with the LiDAR displaced along the car's axis (timing errors)",
          k["timing_false_alarms"] == 0 if timed else None,
          f"{k['timing_false_alarms']} false alarms in {len(timed)} cases ({shifts} m; target 0)" if timed else
          "no timing case was run")
    refined = [c for c in faults if np.isfinite(c.lidar_end_deg)]
    wshare = k["within"] / max(len(acc), 1)
    within = f"accepted LiDAR refinements end within {TARGET_DEG:g} deg"
    if not refined:
        check(within, None, "no refinement was run (--no-refine)")
        check("LiDAR refinement never worse", None, "no refinement was run (--no-refine)")
    else:
        check(within, wshare >= targets.refine_within_share if acc else True,
              f"{k['within']}/{len(acc)} = {wshare:.1%} ({len(acc)}/{len(faults)} cases accepted; "
              f"target >= {targets.refine_within_share:.0%})" if acc else
              f"none of the {len(refined)} refinements was accepted: nothing to judge")
        check("LiDAR refinement never worse", k["worse"] == 0,
              f"{k['worse']} of {len(refined)} ended further than they started")
    seams = [c for c in faults if np.isfinite(c.seams_end_deg)]
    if seams:
        worse_s = sum(c.seams_end_deg > c.start_deg + 1e-6 for c in seams)
        wrong_s = sum(len([x for x in c.seams_named if x != c.camera]) for c in faults)
        check("seams only names a wrong camera", wrong_s == 0, f"{wrong_s} times (target 0)")
        check("seam refinement never worse", worse_s == 0, f"{worse_s} ended further than they started")
    if acc:
        rows.append(f"      accepted LiDAR refinements: {_end_errors([c.lidar_end_deg for c in acc])}")
        placed = np.array([c.lidar_end_vs_lidar_deg for c in acc if np.isfinite(c.lidar_end_vs_lidar_deg)])
        if len(placed):
            rows.append(f"      precision: {int(np.sum(placed <= TARGET_DEG))}/{len(placed)} end within "
                        f"{TARGET_DEG:g} deg of where the "
                        f"LiDAR puts the unperturbed camera (median {np.median(placed):.3f}, max {placed.max():.3f} "
                        f"deg; {len(acc) - len(placed)} whose unperturbed camera the LiDAR does not pin down left "
                        "out); the rest of the end error is the LiDAR's disagreement with the dataset's calibration "
                        "(not a target)")
    proposals = [c.lidar_proposal_end_deg for c in faults if np.isfinite(c.lidar_proposal_end_deg)]
    if proposals:
        rows.append(f"      proposed, not applied (the LiDAR places the rig's calibrated cameras a median of more than "
                    f"{FLOOR_MEDIAN_DEG:.2f} deg from their stored poses): {_end_errors(proposals)} (not a target)")
    for key, label, limit in (("diagnose_lidar_s", "one 6-camera diagnose with LiDAR", 10.0),):
        if key in timings:
            rows.append(f"time  {label}: {timings[key]:.2f} s (budget {limit:g} s on 2 cores; a benchmark, "
                        "not a test)")
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    """CLI: evaluate and print the tables and the summary; exit 0 only if every target was checked
    and met (a target skipped by ``--no-refine`` reads NOT RUN and exits 1), 2 on bad input."""
    parser = argparse.ArgumentParser(prog="python -m bevviz.lab.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--frames", nargs="+", default=None, metavar="DIR",
                        help="frame folders (rig.json, images/, lidar_ego.npy, ...) or nuScenes dataroots; "
                             "default: the embedded real nuScenes keyframe")
    parser.add_argument("--version", default="v1.0-mini", help="nuScenes version of any dataroot")
    parser.add_argument("--faults", type=int, default=FAULTS_PER_CAMERA, help="random faults per camera")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loro", action="store_true", help="also the leave-one-rig-out table")
    parser.add_argument("--sequence", action="store_true",
                        help="judge the frames of one rig (same cameras and calibration) together")
    parser.add_argument("--frame-counts", nargs="+", type=int, default=None, metavar="K",
                        help="judge each rig's frames in consecutive windows of K frames, for each K given "
                             "(e.g. 1 3), every window with the faults of the rig's first frame; overrides --sequence")
    bands = parser.add_mutually_exclusive_group()
    bands.add_argument("--band", default=None, metavar="LO-HI",
                       help=f"draw the faults' sizes from this band of degrees (default {band_label(FAULT_RANGE_DEG)})")
    bands.add_argument("--bands", nargs="+", default=None, metavar="LO-HI",
                       help="several bands, each with --faults faults per camera (e.g. "
                            + " ".join(band_label(b) for b in BANDS) + ")")
    parser.add_argument("--no-refine", action="store_true", help="skip the refinements (faster)")
    parser.add_argument("--json", default=None, help="also write the cases, tables and summary as JSON here")
    args = parser.parse_args(argv)
    try:
        chosen = [parse_band(b) for b in (args.bands or [args.band])] if args.band or args.bands else \
            [FAULT_RANGE_DEG]
        counts_k = None if args.frame_counts is None else parse_frame_counts(args.frame_counts)
        frames = load_frames(args.frames or [DEFAULT_DATAROOT], args.version)
        with single_threaded():
            cases, stores, timings = evaluate_frames(
                frames, lambda f: band_faults(f, chosen, args.faults, args.seed), refine=not args.no_refine,
                sequence=args.sequence, frame_counts=counts_k)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rigs = {c.frame: rig_key(next(f.rig for f in frames if c.frame.startswith(f.name))) for c in cases}
    table, per_band = frame_table(cases), band_table(cases, rigs)
    rows, ok = summary(cases, timings)
    print("\n".join(["", *table, "", "per fault band and number of frames judged together:", *per_band, "", *rows]))
    out = {"cases": [asdict(c) for c in cases], "table": table, "bands": per_band, "summary": rows,
           "timings": timings, "passed": ok}
    if args.loro:
        loro, totals = leave_one_rig_out(cases, stores, rigs)
        print("\nleave-one-rig-out (constants chosen on the other rigs):")
        print("\n".join(loro))
        out["loro"] = loro
        out["loro_totals"] = totals
        share = totals["named"] / max(totals["faults"], 1)
        met = share >= Targets().lidar_named_share and not totals["false_alarms"] and not totals["wrong"]
        line = (f"{'PASS' if met else 'FAIL'}  leave-one-rig-out: {totals['named']}/{totals['faults']} = {share:.1%} "
                f"named (target >= {Targets().lidar_named_share:.0%}), {totals['false_alarms']} false alarms, "
                f"{totals['wrong']} wrong (target 0)")
        print(line)
        out["summary"].append(line)
        ok &= met
        out["passed"] = ok
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
