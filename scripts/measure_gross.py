"""Measure the gross-error screen on the embedded development frames (a measurement, not a test).

Usage: ``python scripts/measure_gross.py [--noise N] [--swaps] [--pose | --turns [FRAME_FOLDER ...]] [--drive D ...]``

For the embedded real nuScenes keyframe, TRI frame and KITTI frame it prints: each clean
camera's best alternative (in standard errors; the screen names one from
``bevviz.calibration.gross.GROSS_T``); every camera turned 180 and 90 deg about its optical
axis and what the screen names; one image given under a second name; a LiDAR moved 1.9 m down,
1.2 m up and 1.5 m forward, and in its sensor's frame (turned 90, 180 and 270 deg,
mounted at (0.94, 0, 1.84) m); N seeds of uniform noise and black / grey / white images; with
``--swaps`` every pair of images swapped. Last, the screen's time per frame and its ratio to
``diagnose(rig, images, lidar=scan)`` of the same frame measured in the same run (the issue's
budget: at most 2 s for 6 cameras on this machine).

``--turns [FRAME_FOLDER ...]`` turns every camera of the embedded frames and the folders given
(or, with ``--drive``, of the drives) 90, -90 and 180 deg about its optical axis and counts
those named, and those whose message says a move or refocus fits about as well
(``TURN_RIVAL_T``).

``--pose`` measures the position and focal alternatives instead, on the embedded frames and
any frame folders given (with ``--drive D ...``: on each drive D, a folder of frame folders of
one rig, screened with its frames pooled, instead of the embedded frames): per camera its
clean best alternative (against its stored position at its best small rotation), and every
camera in turn with its optical centre moved 1, 1.5
or 2 m along an ego axis, its focal lengths scaled by 0.85, 0.9, 1.1 or 1.15, or turned 2 deg
(a fault for the fine search, which must not be named a position or focal error): what the
screen names, counted as right (the camera and the kind; "fixed" where its fix also puts the
camera back within 0.25 m and 3 % of the truth, "fix further off" where it leaves the camera
further from the truth than the fault did, "in the road, no fix" a camera moved down into the
road and named so), the right camera named with two readings (a
turn, or a move or refocus) and no fix, wrong (another camera or kind) and, on the clean rigs,
false alarms and the cameras with a not-ruled-out note; each fault the screen does not name,
by what it says of the camera: a not-ruled-out note that holds the fix's direction (the axis
and sign of the move back, or the side of 1 of the focal scale back;
``GrossScreen.not_ruled_out``), one without it (the screen's silence would mislead), another
note naming the camera, or nothing; and the step's margins: the best alternative of the clean cameras (of the clean
rig) and of the cameras turned 2 deg, and how many faulty cameras' best alternative reaches
1.5, 1.75, 2, 2.5 and 3 standard errors (``GrossScreen.pose_best``, whatever its gain).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import diagnose, perturb_camera  # noqa: E402
from bevviz.calibration.gross import screen_gross_errors  # noqa: E402
from bevviz.calibration.gross.pose import AXIS_WORDS  # noqa: E402
from bevviz.io.frame_folder import load_frame_folder  # noqa: E402
from bevviz.io.nuscenes import load_lidar, load_sample  # noqa: E402
from bevviz.session.embedded import sample_path  # noqa: E402

#: What a named turn says when a move fits about as well and no fix is offered.
NO_FIX = "no fix is offered"
#: What the screen says of a camera in the road whose edges prefer no move up.
ROAD = "the road the LiDAR sees"
TURNS = {"180": np.diag([-1.0, -1.0, 1.0]), "90": np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])}


def frames():
    """(name, rig, images, scan) of each embedded development frame."""
    root = sample_path("real-nuscenes")
    rig, images = load_sample(root)
    yield "real-nuscenes", rig, dict(images), load_lidar(root)
    for name in ("real-tri", "real-kitti"):
        f = load_frame_folder(sample_path(name))
        yield name, f.rig, f.images, f.scan


def pose_faults(camera):
    """(label, expected kind or None, the faulty camera) for every position, focal and small-turn fault."""
    for ax, h, sign in itertools.product(range(3), (1.0, 1.5, 2.0), (1.0, -1.0)):
        yield f"moved {sign * h:+g} m {'xyz'[ax]}", "position", perturb_camera(camera,
                                                                               translation=np.eye(3)[ax] * sign * h)
    for scale in (0.85, 0.9, 1.1, 1.15):
        yield f"focal x{scale:g}", "focal", perturb_camera(camera, fx_scale=scale, fy_scale=scale)
    for axis in ("roll_deg", "pitch_deg", "yaw_deg"):
        yield f"turned 2 deg ({axis[:-4]})", None, perturb_camera(camera, **{axis: 2.0})


def drive_frames(folder: str) -> tuple[str, object, dict, object, list]:
    """(name, rig, images, scan, more_frames) of a drive: a folder of frame folders of one rig,
    the first (in name order) screened with the others as ``more_frames``."""
    folders = sorted(p for p in Path(folder).iterdir() if (p / "rig.json").is_file()) if Path(folder).is_dir() else []
    if len(folders) < 2:
        raise SystemExit(f"--drive {folder}: not a drive (a folder holding two or more frame folders)")
    loaded = [load_frame_folder(p) for p in folders]
    first = loaded[0]
    return (f"{folder} ({len(loaded)} frames pooled)", first.rig, first.images, first.scan,
            [(f.images, f.scan) for f in loaded[1:]])


def screened(extra: list[str], drives: list[str]) -> list[tuple]:
    """(name, rig, images, scan, more_frames) of what ``--pose`` and ``--turns`` screen: the
    embedded frames and the frame folders ``extra``, or with ``drives`` those folders and each
    drive (its frames pooled) instead of the embedded frames."""
    out = [(*frame, []) for frame in frames()] if not drives else []
    for p in extra:
        f = load_frame_folder(p)
        out.append((p, f.rig, f.images, f.scan, []))
    return out + [drive_frames(d) for d in drives]


def measure_pose(extra: list[str], drives: list[str] = ()) -> None:
    """The ``--pose`` measurement (module docstring); ``drives``: folders of frame folders,
    each screened as one drive (its frames pooled) instead of the embedded frames."""
    frame_list = screened(extra, drives)
    total = Counter()
    for name, rig, images, scan, more in frame_list:
        clean = screen_gross_errors(rig, images, scan, more)
        total["false alarms"] += len(clean.errors)
        looks = {"clean": [t for _, t in clean.pose_best.values()], "turned": [], "faults": []}
        print(f"== {name}: clean: {named(clean)}; best position/focal alternative per camera: "
              + ", ".join(f"{c} {k} {t:+.1f}" for c, (k, t) in clean.pose_best.items()))
        counts = Counter({"clean cameras with a not-ruled-out note": len(clean.not_ruled_out)})
        for cam in rig.names:
            for label, kind, bad in pose_faults(rig[cam]):
                s = screen_gross_errors(rig.replace(bad), images, scan, more)
                hits = [(e.sensor, e.kind) for e in s.errors]
                if cam in s.pose_best:
                    looks["faults" if kind else "turned"].append(s.pose_best[cam][1])
                if kind is None:
                    counts["turn named position/focal"] += any(k in ("position", "focal") for _, k in hits)
                    counts["turns"] += 1
                    continue
                counts[f"{kind} faults"] += 1
                if (cam, kind) in hits:
                    counts[f"{kind} named"] += 1
                    counts[f"{kind} fixed"] += bool(s.fixed is not None and _fixed(s.fixed[cam], rig[cam]))
                    counts[f"{kind} fix further off"] += bool(s.fixed is not None
                                                              and _further_off(s.fixed[cam], bad, rig[cam]))
                    counts["position named in the road, no fix"] += any(e.sensor == cam and ROAD in e.message
                                                                        for e in s.errors)
                if cam not in {h[0] for h in hits}:  # missed: does the screen say it could not rule it out?
                    said = s.not_ruled_out.get(cam)
                    counts["missed, its fix not ruled out (a note)" if said and _fix_in(said, kind, bad, rig[cam])
                           else "missed, not ruled out without its fix" if said
                           else "missed, another note names the camera" if any(cam in n for n in s.notes)
                           else "missed, nothing said"] += 1
                if any(h != (cam, kind) for h in hits):
                    if all(e.sensor == cam and NO_FIX in e.message for e in s.errors):
                        counts["right camera, two readings, no fix"] += 1
                        continue
                    counts["wrong"] += 1
                    print(f"   {cam} {label}: WRONG {named(s)}")
        print(f"   {dict(counts)}")
        print("   " + pose_margins(looks))
        total.update(counts)
    print(f"total: {dict(total)}")


def pose_margins(looks: dict[str, list[float]]) -> str:
    """The position and focal step's margins on one frame: the best alternative (in the
    step's standard errors, ``GrossScreen.pose_best``) of the clean cameras and of those turned
    2 deg at most, and how many faulty cameras' best reach each of a few thresholds."""
    reach = ", ".join(f">= {t:g}: {sum(x >= t for x in looks['faults'])}" for t in (1.5, 1.75, 2.0, 2.5, 3.0))
    return (f"pose step: clean cameras' best alternative at most {max(looks['clean'], default=float('nan')):+.2f}, "
            f"turned 2 deg {max(looks['turned'], default=float('nan')):+.2f}; faulty cameras' best "
            f"({len(looks['faults'])} screened) {reach}")


def measure_turns(extra: list[str], drives: list[str] = ()) -> None:
    """The ``--turns`` measurement (module docstring)."""
    frame_list = screened(extra, drives)
    total = Counter()
    for name, rig, images, scan, more in frame_list:
        counts = Counter()
        for cam, (label, turn) in itertools.product(rig.names, {**TURNS, "-90": TURNS["90"].T}.items()):
            M = np.eye(4)
            M[:3, :3] = turn
            s = screen_gross_errors(rig.replace(rig[cam].replace(cam_from_ego=M @ rig[cam].cam_from_ego)), images,
                                    scan, more)
            counts["turns"] += 1
            if [(e.sensor, e.kind) for e in s.errors] == [(cam, "turned")]:
                counts["named"] += 1
                counts["named, a move or refocus fits as well"] += "fits about as well" in s.errors[0].message
                counts["named, two readings, no fix"] += NO_FIX in s.errors[0].message
            else:
                print(f"   {cam} turned {label}: {named(s)}")
        print(f"== {name}: {dict(counts)}")
        total.update(counts)
    print(f"total: {dict(total)}")


def _fix_in(words: str, kind: str, faulty, truth) -> bool:
    """Whether a screen's not-ruled-out words (``GrossScreen.not_ruled_out``: "1-2 m further
    back, fx and fy x 1.1-1.2") name the direction of the fix that undoes a fault: the axis and
    sign of the move back, or the side of 1 of the focal scale back."""
    parts = words.split(", ")
    if kind == "position":
        d = truth.position - faulty.position
        ax = int(np.argmax(np.abs(d)))
        return any(p.endswith(" m " + AXIS_WORDS[ax][0 if d[ax] > 0 else 1]) for p in parts)
    side = truth.K[0, 0] > faulty.K[0, 0]
    return any((float(p.split(" x ")[1].split("-")[0]) > 1.0) == side for p in parts if p.startswith("fx and fy x "))


def _fixed(fixed, truth) -> bool:
    """Whether the screen's fix puts a camera back within a quarter metre of its true
    position and 3 % of its true focal lengths (a named fault of the right size)."""
    moved = np.linalg.norm(fixed.ego_from_cam[:3, 3] - truth.ego_from_cam[:3, 3])
    return bool(moved <= 0.25 and np.allclose(np.diag(fixed.K)[:2], np.diag(truth.K)[:2], rtol=0.03))


def _further_off(fixed, faulty, truth) -> bool:
    """Whether the screen's fix leaves a camera further from the truth than the fault did: its
    optical centre further from the true one, or its focal length further from the true one
    (as a ratio)."""
    def off(c):
        return np.linalg.norm(c.position - truth.position), abs(np.log(c.K[0, 0] / truth.K[0, 0]))
    (p1, f1), (p0, f0) = off(fixed), off(faulty)
    return bool(p1 > p0 + 1e-6 or f1 > f0 + 1e-6)


def named(screen) -> str:
    return "; ".join(e.message for e in screen.errors) or "nothing"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=int, default=5, help="noise seeds per frame")
    ap.add_argument("--swaps", action="store_true", help="every pair of images swapped")
    ap.add_argument("--pose", nargs="*", metavar="FRAME_FOLDER", help="measure the position and focal alternatives")
    ap.add_argument("--drive", nargs="+", default=[], metavar="DRIVE_FOLDER",
                    help="with --pose or --turns: screen these drives (folders of frame folders), their frames pooled, "
                         "instead of the embedded frames")
    ap.add_argument("--turns", nargs="*", metavar="FRAME_FOLDER",
                    help="every camera turned 90, -90 and 180 deg: named, and said to fit a move about as well")
    args = ap.parse_args()
    if args.turns is not None:
        measure_turns(args.turns, args.drive)
        return
    if args.pose is not None:
        measure_pose(args.pose, args.drive)
        return
    for name, rig, images, scan in frames():
        t0 = time.perf_counter()
        clean = screen_gross_errors(rig, images, scan)
        t_screen = time.perf_counter() - t0
        print(f"== {name}: clean: {named(clean)}")
        for cam, (label, t) in clean.best.items():
            print(f"   {cam:16s} best alternative {label:24s} {t:+6.1f} standard errors")
        for cam, (label, turn) in itertools.product(rig.names, TURNS.items()):
            M = np.eye(4)
            M[:3, :3] = turn
            faulty = rig.replace(rig[cam].replace(cam_from_ego=M @ rig[cam].cam_from_ego))
            s = screen_gross_errors(faulty, images, scan)
            print(f"   {cam} turned {label}: {named(s)}")
        if len(rig) > 1:
            a, b = rig.names[0], rig.names[len(rig) // 2]
            print(f"   {a} given {b}'s image: {named(screen_gross_errors(rig, {**images, a: images[b]}, scan))}")
            pairs = itertools.combinations(rig.names, 2) if args.swaps else [(a, b)]
            for a, b in pairs:
                swapped = {**images, a: images[b], b: images[a]}
                print(f"   {a} <-> {b}: {named(screen_gross_errors(rig, swapped, scan))}")
        for axis, move in ((2, -1.9), (2, 1.2), (0, 1.5)):
            pts = scan.points.copy()
            pts[:, axis] += move
            s = screen_gross_errors(rig, images, dataclasses.replace(scan, points=pts))
            print(f"   LiDAR moved {move:+.1f} m along {'xyz'[axis]}: {named(s)}")
        for yaw in (90.0, 180.0, 270.0):  # a scan in its sensor's frame: mounted (0.94, 0, 1.84) m, turned
            a = np.radians(yaw)
            R = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
            pts = np.array(scan.points)
            pts[:, :3] = (pts[:, :3] - np.array([0.94, 0.0, 1.84])) @ R
            t0 = time.perf_counter()
            s = screen_gross_errors(rig, images, dataclasses.replace(scan, points=pts))
            dt = time.perf_counter() - t0
            print(f"   LiDAR in its sensor's frame, turned {yaw:.0f} deg: {named(s)} ({dt:.1f} s)")
        rng = np.random.default_rng(0)
        found = 0
        for _ in range(args.noise):
            noise = {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in images.items()}
            found += len(screen_gross_errors(rig, noise, scan).errors)
        for level in (0, 128, 255):
            flat = {n: np.full(im.shape, level, np.uint8) for n, im in images.items()}
            found += len(screen_gross_errors(rig, flat, scan).errors)
        print(f"   structureless images ({args.noise} noise seeds, black, grey, white): {found} errors named")
        t0 = time.perf_counter()
        diagnose(rig, images, lidar=scan)
        t_doctor = time.perf_counter() - t0
        print(f"   time: screen {t_screen:.2f} s, diagnose {t_doctor:.2f} s (ratio {t_screen / t_doctor:.2f}), "
              f"{len(rig)} cameras")


if __name__ == "__main__":
    main()
