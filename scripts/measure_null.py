"""Measure the doctor on images without structure (a measurement, not a test).

Usage: ``python scripts/measure_null.py [FRAME ...] [--noise N] [--replicates R] [--blur SIGMA]``

For each frame (a frame folder or a nuScenes dataroot; default: the three embedded
development frames) the real scan is kept and the images are replaced by: N seeds of uniform
noise, black, grey and white images of the same sizes, and the real images under a Gaussian
blur of SIGMA pixels. It prints, per frame and kind of image, how many cameras the doctor
called "miscalibrated", "ok" and "inconclusive" (and why: the doubts it named), and a total
line. The issue's target: 0 "miscalibrated" anywhere, 0 "ok" on noise, black, grey or white;
a blur never convicts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import MISCALIBRATED, OK, DiagnoseSettings, diagnose  # noqa: E402
from bevviz.lab.evaluate import load_frames  # noqa: E402

EMBEDDED = [ROOT / "sample_data" / n for n in ("real_nuscenes", "real_tri", "real_kitti")]


def variants(images: dict[str, np.ndarray], noise: int, blur: float):
    """(kind, images) for every structureless variant of one frame's images."""
    for seed in range(noise):
        rng = np.random.default_rng(seed)
        yield "noise", {n: rng.integers(0, 256, im.shape, dtype=np.uint8) for n, im in images.items()}
    for kind, level in (("black", 0), ("grey", 128), ("white", 255)):
        yield kind, {n: np.full(im.shape, level, np.uint8) for n, im in images.items()}
    if blur > 0:
        yield f"blur {blur:g} px", {n: cv2.GaussianBlur(im, (0, 0), blur) for n, im in images.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("frames", nargs="*", default=[str(p) for p in EMBEDDED])
    ap.add_argument("--noise", type=int, default=20, help="noise seeds per frame")
    ap.add_argument("--replicates", type=int, default=None, help="bootstrap replicates (default: the doctor's)")
    ap.add_argument("--blur", type=float, default=25.0, help="Gaussian sigma in pixels (0: no blur case)")
    args = ap.parse_args()
    settings = DiagnoseSettings() if args.replicates is None else DiagnoseSettings(replicates=args.replicates)
    total: Counter = Counter()
    for frame in load_frames(args.frames):
        t0 = time.perf_counter()
        by_kind: dict[str, Counter] = {}
        for kind, images in variants(frame.images, args.noise, args.blur):
            found = diagnose(frame.rig, images, lidar=frame.scan, settings=settings)
            c = by_kind.setdefault(kind, Counter())
            for f in found:
                c[f.verdict] += 1
                if f.verdict not in (MISCALIBRATED, OK):
                    c[f"  {f.doubt.name if f.doubt else 'no doubt'}"] += 1
                total[(kind.split()[0], f.verdict)] += 1
        dt = time.perf_counter() - t0
        print(f"== {frame.name} ({len(frame.rig)} cameras, {dt:.0f} s)")
        for kind, c in by_kind.items():
            doubts = ", ".join(f"{k.strip()} {v}" for k, v in sorted(c.items()) if k.startswith(" "))
            print(f"   {kind:12s} miscalibrated {c[MISCALIBRATED]:3d}  ok {c[OK]:3d}  "
                  f"inconclusive {c['inconclusive']:3d}  ({doubts})")
    print("== total (camera diagnoses)")
    for kind in dict.fromkeys(k for k, _ in total):
        print(f"   {kind:12s} miscalibrated {total[(kind, MISCALIBRATED)]:4d}  ok {total[(kind, OK)]:4d}  "
              f"inconclusive {total[(kind, 'inconclusive')]:4d}")


if __name__ == "__main__":
    main()
