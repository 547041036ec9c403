"""Measure the doctor and the gross-error screen on repeated views and frozen images (a measurement, not a test).

Usage: ``python scripts/measure_repeats.py [--drive DRIVE_FOLDER]`` (default: the committed TRI
drive, ``sample_data/real_tri_drive``).

For each embedded development frame (the real nuScenes keyframe, the TRI and KITTI frame
folders) it diagnoses the frame alone, given three times (exact copies: a parked car's frames
as one scan and one set of images) and given five times (the copies' sweeps with 2 cm of
range noise), and prints per camera the verdict, the roll spread (the bootstrap's, degrees)
and the frames its evidence pooled. Then, on the drive, each camera in turn shows its first
image in every frame (a frozen image stream): that camera's verdict and offset, and the same
camera judged on the first frame alone, and what the gross-error screen names; and the screen
of the drive's first frame given three times (copies with 2 cm of range noise): the frames it
pooled and the errors it named. docs/calibration.md ("Frames that repeat a view") and
docs/gross_errors.md quote it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import diagnose  # noqa: E402
from bevviz.calibration.gross import screen_gross_errors  # noqa: E402
from bevviz.io.frame_folder import load_frame_folder  # noqa: E402
from bevviz.io.nuscenes import load_lidar, load_sample  # noqa: E402
from bevviz.lidar import as_lidar_scan  # noqa: E402
from bevviz.session.embedded import sample_path  # noqa: E402


def frames():
    """(name, rig, images, scan) of each embedded development frame."""
    root = sample_path("real-nuscenes")
    rig, images = load_sample(root)
    yield "real-nuscenes", rig, dict(images), as_lidar_scan(load_lidar(root))
    for name in ("real-tri", "real-kitti"):
        f = load_frame_folder(sample_path(name))
        yield name, f.rig, f.images, as_lidar_scan(f.scan)


def noisy(scan, rng: np.random.Generator, sigma_m: float = 0.02):
    """The same sweep again with ``sigma_m`` of range noise."""
    pts = np.array(scan.points)
    r = np.linalg.norm(pts[:, :3], axis=1, keepdims=True)
    pts[:, :3] *= 1 + rng.normal(0.0, sigma_m, (len(pts), 1)) / np.maximum(r, 1e-3)
    return dataclasses.replace(scan, points=pts)


def _row(f) -> str:
    spread = f.uncertainty_deg["roll"] if f.uncertainty_deg else float("nan")
    frames = f.evidence.frames if f.evidence is not None else 0
    doubt = f" ({f.doubt.name.lower()})" if f.doubt else ""
    return f"{f.verdict}{doubt}, roll spread {spread:.2f} deg, {frames} frame(s)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drive", type=Path, default=ROOT / "sample_data" / "real_tri_drive")
    args = ap.parse_args()
    for name, rig, images, scan in frames():
        rng = np.random.default_rng(0)
        cases = {"alone": ([images], [scan]), "3 exact copies": ([images] * 3, [scan] * 3),
                 "5 noisy copies": ([images] * 5, [scan, *(noisy(scan, rng) for _ in range(4))])}
        found = {label: {f.camera: f for f in diagnose(rig, imgs, lidar=scans)}
                 for label, (imgs, scans) in cases.items()}
        print(f"== {name}")
        for cam in rig.names:
            print(f"   {cam:16s} " + " | ".join(f"{label}: {_row(found[label][cam])}" for label in cases))
    drive = [load_frame_folder(p) for p in sorted(q for q in args.drive.iterdir() if (q / "rig.json").is_file())]
    rig = drive[0].rig
    alone = {f.camera: f for f in diagnose(rig, drive[0].images, lidar=drive[0].scan)}
    print(f"== {args.drive}: each camera's image frozen in turn (its first image in all {len(drive)} frames)")
    for cam in rig.names:
        images = [dict(f.images) for f in drive]
        for imgs in images[1:]:
            imgs[cam] = drive[0].images[cam]
        scans = [fr.scan for fr in drive]
        f = diagnose(rig, images, lidar=scans).by_camera(cam)
        off = ", ".join(f"{a} {v:+.2f}" for a, v in (f.offset_deg or {}).items())
        named = [(e.sensor, e.kind) for e in screen_gross_errors(rig, images[0], scans[0],
                                                                 list(zip(images[1:], scans[1:]))).errors]
        print(f"   {cam:12s} frozen: {_row(f)}, offset {off} | first frame alone: {_row(alone[cam])} | "
              f"screen names {named or 'nothing'}")
    scan = as_lidar_scan(drive[0].scan)
    rng = np.random.default_rng(0)
    parked = screen_gross_errors(rig, drive[0].images, scan, [(drive[0].images, noisy(scan, rng)) for _ in range(2)])
    print(f"== {args.drive}: its first frame three times (a parked car): the screen pooled {parked.frames} frame(s), "
          f"named {[e.message for e in parked.errors] or 'nothing'}; best position/focal alternatives "
          + ", ".join(f"{c} {t:+.1f}" for c, (_, t) in parked.pose_best.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
