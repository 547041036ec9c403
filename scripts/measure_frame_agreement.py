"""Measure which frames of a drive the doctor sets aside (a measurement, not a test).

Usage: ``python scripts/measure_frame_agreement.py [DRIVE_FOLDER]`` (default: the committed
TRI drive, ``sample_data/real_tri_drive``: frame folders ``t0``, ``t1``, ...).

For the clean drive, for the drive with one camera turned (a real fault, the same in every
frame), and for the drive with its second frame corrupted (its sweep turned 1, 2 or 4 deg
about the vertical; its images replaced by the first frame's), it prints per camera and frame
the distance (deg) and gap (robust z) of :func:`bevviz.calibration.lidar.frame_agreement.frame_gaps`,
the votes and what :func:`frames_to_set_aside` decides, and the time that took.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration.lidar.alignment import EdgeAlignment  # noqa: E402
from bevviz.calibration.lidar.frame_agreement import frame_gaps, frames_to_set_aside  # noqa: E402
from bevviz.calibration.lidar.frames import as_lidar_frames  # noqa: E402
from bevviz.calibration.perturbations import perturb_rig  # noqa: E402
from bevviz.io.frame_folder import load_frame_folder  # noqa: E402
from bevviz.rotations import rpy_to_matrix  # noqa: E402


def _turned_scan(frame, deg: float):
    pts = np.array(frame.scan.points)
    pts[:, :3] = pts[:, :3] @ rpy_to_matrix(0.0, 0.0, np.radians(deg)).T
    return dataclasses.replace(frame, scan=dataclasses.replace(frame.scan, points=pts))


def variants(frames):
    """(label, rig, frames) of every case."""
    rig = frames[0].rig
    yield "clean", rig, frames
    cam = rig.names[1]
    yield f"{cam} turned 1.5 deg in yaw (a fault, every frame)", perturb_rig(rig, cam, yaw_deg=1.5), frames
    for deg in (1.0, 2.0, 4.0):
        yield f"frame 2's sweep turned {deg:g} deg about z", rig, [frames[0], _turned_scan(frames[1], deg), *frames[2:]]
    yield "frame 2 with frame 1's images", rig, [frames[0], dataclasses.replace(frames[1], images=frames[0].images),
                                               *frames[2:]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drive", nargs="?", type=Path, default=ROOT / "sample_data" / "real_tri_drive")
    args = ap.parse_args()
    folders = sorted(p for p in args.drive.iterdir() if p.is_dir())
    frames = [load_frame_folder(p) for p in folders]
    for label, rig, fr in variants(frames):
        pairs = as_lidar_frames([f.images for f in fr], [f.scan for f in fr])
        t0 = time.perf_counter()
        alignments = {n: EdgeAlignment(rig[n], pairs) for n in rig.names}
        t1 = time.perf_counter()
        agreement = frames_to_set_aside(alignments)
        t2 = time.perf_counter()
        print(f"== {label}: {agreement.reason or 'nothing set aside'}; votes {agreement.votes} of "
              f"{agreement.voters} cameras (alignments {t1 - t0:.1f} s, agreement {t2 - t1:.1f} s)")
        for n, al in alignments.items():
            dist, gap = frame_gaps(al)
            cells = [f"f{k + 1} {d:.2f} deg, {g:+.2f} z" for k, (d, g) in enumerate(zip(dist, gap))]
            print(f"   {n:12s} " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
