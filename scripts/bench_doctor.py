"""Time one diagnosis with LiDAR from scratch (a benchmark, not a test).

Usage: ``python scripts/bench_doctor.py [FRAME ...] [--repeat N] [--threads 2] [--dense K]``

Each FRAME is a frame folder (``rig.json``, ``images/``, ``lidar_ego.npy``, ...) or a
nuScenes-format dataroot (its first sample); default: the embedded real nuScenes keyframe and
the embedded TRI frame (6 cameras each). Every camera is aligned afresh (nothing cached),
the seams analysed and the verdicts given, as ``bevviz.calibration.diagnose(rig, images,
lidar=scan)`` does. The issue's budget: under 10 s for 6 cameras on 2 cores.

``--dense K`` also times each frame with a cloud K times as dense (the scan plus K - 1 copies
jittered by 2 cm, shuffled, no ring: a merged multi-LiDAR or high-resolution sensor) and
prints its ratio to the frame's own time measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import diagnose  # noqa: E402
from bevviz.lab.evaluate import load_frames  # noqa: E402
from bevviz.lab.variants import denser  # noqa: E402

DEFAULT = (ROOT / "sample_data" / "real_nuscenes", ROOT / "sample_data" / "real_tri")


def _time(rig, images, scan, repeat: int) -> tuple[list[float], str]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        found = diagnose(rig, images, lidar=scan)
        times.append(time.perf_counter() - t0)
    return times, ", ".join(f"{f.camera}: {f.verdict}" for f in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("frames", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--repeat", type=int, default=3, help="runs per frame (the minimum is reported)")
    parser.add_argument("--threads", type=int, default=2, help="torch / OpenCV threads (the budget's cores)")
    parser.add_argument("--dense", type=int, default=1, help="also time a cloud this many times as dense")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    for frame in load_frames(args.frames):
        base = _time(frame.rig, frame.images, frame.scan, args.repeat)
        print(f"{frame.name}: {len(frame.rig)} cameras, {len(frame.scan)} points: diagnose with LiDAR "
              f"min {min(base[0]):.2f} s, max {max(base[0]):.2f} s over {args.repeat} runs ({args.threads} threads; "
              f"budget 10 s for 6 cameras) | {base[1]}")
        if args.dense > 1:
            cloud = denser(frame.scan, args.dense, np.random.default_rng(0))
            dense = _time(frame.rig, frame.images, cloud, args.repeat)
            print(f"{frame.name} x{args.dense} denser cloud ({len(frame.scan) * args.dense} points): "
                  f"min {min(dense[0]):.2f} s = {min(dense[0]) / min(base[0]):.2f}x the frame's own | {dense[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
