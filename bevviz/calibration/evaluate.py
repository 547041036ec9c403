"""Evaluate the Calibration Doctor on a real frame with injected faults (``python -m bevviz.calibration.evaluate``).

For one nuScenes-format sample (default: the real keyframe embedded in
``sample_data/real_nuscenes``), every camera x {roll, pitch, yaw} x {-2, -1, +1, +2} degrees
is injected with :func:`~bevviz.calibration.perturbations.perturb_rig`, one at a time, and

* :func:`~bevviz.calibration.diagnose` runs with the LiDAR and with seams only: which
  cameras does it name "miscalibrated"?
* :func:`~bevviz.calibration.refine_extrinsics` runs on the faulty camera with the LiDAR
  and with seams only: is the result accepted, and how far (degrees) does it end from the
  dataset's calibration compared with where it started?

It prints one row per case, a summary against the targets (PASS / FAIL), and the wall time
of one 6-camera diagnosis with LiDAR and one refinement measured from scratch (no cache).
The LiDAR evidence of a camera depends on that camera and the frame alone, so the
unperturbed cameras' evidence is computed once and reused across cases (the perturbed
camera's is computed afresh for every case); seams are analysed afresh for every case.

Convention:
    Faults and errors are body-frame (FLU) rotations in degrees; the error of a camera is
    the rotation angle between it and the dataset's camera. See docs/conventions.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bevviz.calibration.diagnose import diagnose, refine_extrinsics
from bevviz.calibration.lidar import AXES, as_lidar_frames, camera_evidence
from bevviz.calibration.perturbations import camera_delta, perturb_rig
from bevviz.calibration.seams import analyze_seams, seam_grid
from bevviz.calibration.verdicts import MISCALIBRATED
from bevviz.camera import Rig
from bevviz.io.nuscenes import load_lidar_from, load_sample_from, open_dataset
from bevviz.threads import single_threaded

__all__ = ["Case", "DEFAULT_DATAROOT", "Targets", "evaluate", "main"]

#: The embedded real keyframe (a checkout of the repository).
DEFAULT_DATAROOT = Path(__file__).resolve().parents[2] / "sample_data" / "real_nuscenes"
#: Injected faults (degrees) per axis.
DEGREES = (-2.0, -1.0, 1.0, 2.0)
#: The cases the CI test runs (camera, axis, degrees): one per camera, every axis once.
QUICK_CASES = (("CAM_FRONT", "yaw", 2.0), ("CAM_BACK_LEFT", "pitch", -2.0), ("CAM_BACK", "roll", 2.0),
               ("CAM_FRONT_RIGHT", "pitch", 1.0))


@dataclass
class Targets:
    """Issue targets the summary checks."""

    lidar_named_share: float = 0.90
    refine_within_deg: float = 0.3
    refine_within_share: float = 0.90


@dataclass
class Case:
    """One injected fault and what the doctor made of it.

    Attributes:
        camera, axis, degrees: The fault (None for the unperturbed rig).
        lidar_named / seams_named: Cameras named "miscalibrated" with LiDAR / seams only.
        lidar_verdict / seams_verdict: The faulty camera's verdict in each mode.
        start_deg: The faulty camera's error before refinement.
        lidar_accepted / lidar_end_deg: LiDAR refinement: accepted, and the error after.
        seams_accepted / seams_end_deg: The same for the seam refinement.
        lidar_check / seams_check: Why each refinement was (not) accepted.
    """

    camera: str | None
    axis: str | None
    degrees: float
    lidar_named: list[str] = field(default_factory=list)
    seams_named: list[str] = field(default_factory=list)
    lidar_verdict: str = ""
    seams_verdict: str = ""
    start_deg: float = 0.0
    lidar_accepted: bool = False
    lidar_end_deg: float = float("nan")
    seams_accepted: bool = False
    seams_end_deg: float = float("nan")
    lidar_check: str = ""
    seams_check: str = ""


def _angle(a: Rig, b: Rig, name: str) -> float:
    return float(camera_delta(a[name], b[name]).angle_deg)


def evaluate(dataroot: str | Path = DEFAULT_DATAROOT, version: str = "v1.0-mini", sample: str | None = None,
             cases: list[tuple[str, str, float]] | None = None, seams_refine: bool = True,
             log=print) -> tuple[list[Case], dict]:
    """Run the cases; returns (cases, timings in seconds)."""
    nusc = open_dataset(str(dataroot), version)
    token = sample or nusc.sample[0]["token"]
    rig, images = load_sample_from(nusc, token)
    scan = load_lidar_from(nusc, token)
    frames = as_lidar_frames(images, scan)
    timings = {}
    t0 = time.perf_counter()
    base = diagnose(rig, images, lidar=scan)
    timings["diagnose_lidar_s"] = time.perf_counter() - t0
    base_ev = {f.camera: f.lidar for f in base}  # the dataset calibration's evidence, aligned once
    if cases is None:
        cases = [(c, a, d) for c in rig.names for a in AXES for d in DEGREES]
    out = []
    grid = seam_grid()
    for k, (cam, axis, deg) in enumerate([(None, None, 0.0), *cases]):
        bad = rig if cam is None else perturb_rig(rig, cam, **{f"{axis}_deg": deg})
        ev = dict(base_ev)
        if cam is not None:
            ev[cam] = camera_evidence(bad[cam], frames)
        analyses = [analyze_seams(bad, images, grid)]
        with_l = diagnose(bad, images, grid, evidence=ev, analyses=analyses)
        without = diagnose(bad, images, grid, analyses=analyses, thorough=False)
        case = Case(cam, axis, deg, [f.camera for f in with_l if f.verdict == MISCALIBRATED],
                    [f.camera for f in without if f.verdict == MISCALIBRATED])
        if cam is not None:
            case.lidar_verdict = next(f.verdict for f in with_l if f.camera == cam)
            case.seams_verdict = next(f.verdict for f in without if f.camera == cam)
            case.start_deg = _angle(rig, bad, cam)
            if k == 1:  # one refinement from scratch (every camera aligned again), for the timing
                t0 = time.perf_counter()
                refine_extrinsics(bad, images, grid, cam, scan)
                timings["refine_lidar_s"] = time.perf_counter() - t0
            new, hist = refine_extrinsics(bad, images, grid, cam, scan, evidence=ev)
            case.lidar_accepted, case.lidar_check = hist.accepted, hist.check
            case.lidar_end_deg = _angle(rig, new, cam)
            if seams_refine:
                t0 = time.perf_counter()
                new, hist = refine_extrinsics(bad, images, grid, cam)
                if k == 1:
                    timings["refine_seams_s"] = time.perf_counter() - t0
                case.seams_accepted, case.seams_check = hist.accepted, hist.check
                case.seams_end_deg = _angle(rig, new, cam)
        out.append(case)
        if log is not None:
            log(_row(case))
    return out, timings


def _row(c: Case) -> str:
    if c.camera is None:
        return (f"{'unperturbed rig':<26} named with LiDAR: {c.lidar_named or 'none'}; "
                f"seams only: {c.seams_named or 'none'}")
    lid = f"{'ACC' if c.lidar_accepted else 'rej'} {c.start_deg:4.2f}->{c.lidar_end_deg:4.2f}"
    sea = f"{'ACC' if c.seams_accepted else 'rej'} {c.start_deg:4.2f}->{c.seams_end_deg:4.2f}"
    wrong_l = [n for n in c.lidar_named if n != c.camera]
    wrong_s = [n for n in c.seams_named if n != c.camera]
    return (f"{c.camera:<16} {c.axis:<5} {c.degrees:+4.0f} | LiDAR {c.lidar_verdict:<13}"
            f"{' WRONG ' + ','.join(wrong_l) if wrong_l else ''} | seams {c.seams_verdict:<13}"
            f"{' WRONG ' + ','.join(wrong_s) if wrong_s else ''} | refine LiDAR {lid} | refine seams {sea}")


def summary(cases: list[Case], timings: dict, targets: Targets | None = None) -> tuple[list[str], bool]:
    """Lines of the summary and whether every target passed."""
    targets = Targets() if targets is None else targets
    base = cases[0]
    faults = cases[1:]
    n = len(faults)
    named = sum(c.camera in c.lidar_named for c in faults)
    wrong_l = sum(len([x for x in c.lidar_named if x != c.camera]) for c in faults)
    wrong_s = sum(len([x for x in c.seams_named if x != c.camera]) for c in faults)
    acc = [c for c in faults if c.lidar_accepted]
    within = sum(c.lidar_end_deg <= targets.refine_within_deg for c in acc)
    worse_l = sum(c.lidar_end_deg > c.start_deg + 1e-6 for c in faults)
    worse_s = sum(c.seams_end_deg > c.start_deg + 1e-6 for c in faults if np.isfinite(c.seams_end_deg))
    acc_s = sum(c.seams_accepted for c in faults)
    rows = []
    ok = True

    def check(name: str, passed: bool, text: str) -> None:
        nonlocal ok
        ok &= passed
        rows.append(f"{'PASS' if passed else 'FAIL'}  {name}: {text}")

    share = named / max(n, 1)
    check("LiDAR names the faulty camera", share >= targets.lidar_named_share,
          f"{named}/{n} = {share:.1%} (target >= {targets.lidar_named_share:.0%})")
    check("LiDAR names a wrong camera", wrong_l == 0, f"{wrong_l} times (target 0)")
    check("LiDAR on the unperturbed rig", not base.lidar_named, f"named {base.lidar_named or 'none'} (target none)")
    wshare = within / max(len(acc), 1)
    check("accepted LiDAR refinements end within 0.3 deg", wshare >= targets.refine_within_share,
          f"{within}/{len(acc)} = {wshare:.1%} of {len(acc)} accepted ({len(acc)}/{n} cases accepted; "
          f"target >= {targets.refine_within_share:.0%})")
    check("LiDAR refinement never worse", worse_l == 0, f"{worse_l} ended further than they started")
    check("seams only names a wrong camera", wrong_s == 0, f"{wrong_s} times (target 0); "
          f"unperturbed: {base.seams_named or 'none'}")
    check("seam refinement never worse", worse_s == 0,
          f"{worse_s} ended further than they started ({acc_s}/{n} accepted)")
    if acc:
        ends = np.array([c.lidar_end_deg for c in acc])
        rows.append(f"      accepted LiDAR refinements: end error median {np.median(ends):.3f} deg, "
                    f"max {ends.max():.3f} deg")
    for key, label, limit in (("diagnose_lidar_s", "one 6-camera diagnose with LiDAR", 10.0),
                              ("refine_lidar_s", "one refine with LiDAR", 30.0),
                              ("refine_seams_s", "one refine with seams only", 30.0)):
        if key in timings:
            rows.append(f"time  {label}: {timings[key]:.2f} s (budget {limit:g} s on 2 cores; a benchmark, "
                        "not a test)")
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    """CLI: evaluate and print the table and the summary; exit 0 if every target passed, 1 if not."""
    parser = argparse.ArgumentParser(prog="python -m bevviz.calibration.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--dataroot", default=str(DEFAULT_DATAROOT), help="nuScenes-format dataset root")
    parser.add_argument("--version", default="v1.0-mini")
    parser.add_argument("--sample", default=None, help="sample token (default: the first)")
    parser.add_argument("--quick", action="store_true", help=f"only the {len(QUICK_CASES)} CI cases")
    parser.add_argument("--no-seams-refine", action="store_true", help="skip the seam refinements (faster)")
    parser.add_argument("--json", default=None, help="also write the cases and the summary as JSON here")
    args = parser.parse_args(argv)
    try:
        with single_threaded():
            cases, timings = evaluate(args.dataroot, args.version, args.sample,
                                      list(QUICK_CASES) if args.quick else None, not args.no_seams_refine)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows, ok = summary(cases, timings)
    print("\n".join(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": [asdict(c) for c in cases], "summary": rows,
                                               "timings": timings, "passed": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
