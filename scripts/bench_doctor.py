"""Time one diagnosis with LiDAR from scratch (a benchmark, not a test).

Usage: ``python scripts/bench_doctor.py [FRAME ...] [--repeat N] [--threads 2]``

Each FRAME is a frame folder (``rig.json``, ``images/``, ``lidar_ego.npy``, ...) or a
nuScenes-format dataroot (its first sample); default: the embedded real nuScenes keyframe and
the embedded TRI frame (6 cameras each). Every camera is aligned afresh (nothing cached),
the seams analysed and the verdicts given, as ``bevviz.calibration.diagnose(rig, images,
lidar=scan)`` does. The issue's budget: under 10 s for 6 cameras on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import diagnose  # noqa: E402
from bevviz.calibration.evaluate import load_frames  # noqa: E402

DEFAULT = (ROOT / "sample_data" / "real_nuscenes", ROOT / "sample_data" / "real_tri")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("frames", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--repeat", type=int, default=3, help="runs per frame (the minimum is reported)")
    parser.add_argument("--threads", type=int, default=2, help="torch / OpenCV threads (the budget's cores)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    for frame in load_frames(args.frames):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            found = diagnose(frame.rig, frame.images, lidar=frame.scan)
            times.append(time.perf_counter() - t0)
        verdicts = ", ".join(f"{f.camera}: {f.verdict}" for f in found)
        print(f"{frame.name}: {len(frame.rig)} cameras, {len(frame.scan)} points: diagnose with LiDAR "
              f"min {min(times):.2f} s, max {max(times):.2f} s over {args.repeat} runs ({args.threads} threads; "
              f"budget 10 s for 6 cameras) | {verdicts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
