"""Measure ego motion registered from consecutive sweeps (a measurement, not a test).

Usage: ``python scripts/measure_ego_motion.py FRAME_DIR FRAME_DIR [...] [--reference POSES.json] [--verdicts]``

The frame folders (``lidar_ego.npy``, optional ``exposure.json``) are one drive in time
order (default: the committed TRI drive, ``sample_data/real_tri_drive/t0..t2``). For each
consecutive pair (and first to last) it prints the motion
:func:`bevviz.calibration.lidar.ego_motion.estimate_motion` registers: translation, turn,
speed over the LiDAR stamps, point pairs, residual, condition and whether it is usable.

``--reference`` takes a JSON list with one 4x4 ``world_from_ego`` per frame (the source's
own poses at the LiDAR stamps): the script then prints each registration's difference from
``inv(world_from_ego_b) @ world_from_ego_a`` in centimetres and degrees.

Where ``exposure.json`` holds the LiDAR and camera stamps and the source's
``exposure_from_keyframe``, it compares the latter's translation with what the registered
velocity and the stamps give (:func:`bevviz.calibration.lidar.ego_motion.motion_at`): a
source whose stamps and poses disagree shows here.

``--verdicts`` judges the frames together (``diagnose``) three ways: with the source's own
exposure motion, with the motion :func:`bevviz.calibration.exposure_motions` estimates from
the sweeps and the stamps (what ``bevviz check`` does for a drive whose ``exposure.json``
holds times but no motion), and with none; clean and with every camera turned 1.5 deg about
each axis in turn: faults named, wrong cameras, false alarms (about 9 minutes for the TRI drive).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.calibration import diagnose, perturb_camera  # noqa: E402
from bevviz.calibration.lidar.ego_motion import estimate_motion, exposure_motions, motion_at  # noqa: E402
from bevviz.io.frame_folder import RealFrame, load_frame_folder  # noqa: E402

DRIVE = [ROOT / "sample_data" / "real_tri_drive" / t for t in ("t0", "t1", "t2")]


def _stamps(frame: RealFrame) -> dict | None:
    """The LiDAR stamp and per-camera (stamp, given translation) of a frame (as its
    ``exposure.json`` gives them, :func:`load_frame_folder`), or None without a LiDAR stamp."""
    if frame.lidar_time_s is None:
        return None
    given = frame.scan.exposure_from_keyframe
    cams = {name: (t, np.asarray(given[name])[:3, 3]) for name, t in frame.camera_times_s.items() if name in given}
    return {"lidar": frame.lidar_time_s, "cameras": cams}


def _angle_deg(R: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1))))


def verdicts(folders: list[Path]) -> int:
    """The ``--verdicts`` measurement (module docstring)."""
    frames = [load_frame_folder(f) for f in folders]
    if any(f.lidar_time_s is None or not f.camera_times_s for f in frames):
        print("--verdicts needs exposure.json with the LiDAR's and the cameras' times in every frame")
        return 2
    est = exposure_motions([f.scan for f in frames], [f.lidar_time_s for f in frames],
                           [f.camera_times_s for f in frames])
    if est.reason:
        print(f"no motion estimated: {est.reason}")
        return 1
    ways = {"source": [f.scan for f in frames],
            "estimated": [dataclasses.replace(f.scan, exposure_from_keyframe=m) for f, m in zip(frames, est.motions)],
            "none": [dataclasses.replace(f.scan, exposure_from_keyframe={}) for f in frames]}
    rig, images = frames[0].rig, [f.images for f in frames]
    faults = [(c, ax) for c in rig.names for ax in ("roll_deg", "pitch_deg", "yaw_deg")]
    print("motion    | faults | named | wrong | false alarms (clean) | seconds")
    for way, scans in ways.items():
        t0 = time.perf_counter()
        clean = [f.camera for f in diagnose(rig, images, lidar=scans) if f.verdict == "miscalibrated"]
        named = wrong = 0
        for cam, ax in faults:
            bad = rig.replace(perturb_camera(rig[cam], **{ax: 1.5}))
            accused = [f.camera for f in diagnose(bad, images, lidar=scans) if f.verdict == "miscalibrated"]
            named += cam in accused
            wrong += len([a for a in accused if a != cam])
        print(f"{way:9} | {len(faults)} | {named} | {wrong} | {len(clean)} {clean or ''} | "
              f"{time.perf_counter() - t0:.0f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("frames", nargs="*", type=Path, default=DRIVE, help="frame folders of one drive, in time order")
    ap.add_argument("--reference", type=Path, help="JSON list of one 4x4 world_from_ego per frame")
    ap.add_argument("--verdicts", action="store_true", help="the doctor's verdicts with the source's, the "
                    "estimated and no exposure motion")
    args = ap.parse_args(argv)
    if len(args.frames) < 2:
        ap.error("give at least two frame folders")
    if args.verdicts:
        return verdicts(args.frames)
    frames = [load_frame_folder(f) for f in args.frames]
    scans = [f.scan for f in frames]
    stamps = [_stamps(f) for f in frames]
    ref = None
    if args.reference:
        ref = [np.asarray(m, dtype=np.float64) for m in json.loads(args.reference.read_text())]
        if len(ref) != len(scans):
            ap.error(f"--reference holds {len(ref)} poses for {len(scans)} frames")
    pairs = [(i, i + 1) for i in range(len(scans) - 1)] + ([(0, len(scans) - 1)] if len(scans) > 2 else [])
    print("pair   | translation m (x, y, z) | turn deg | speed m/s | pairs | rmse cm | condition | "
          "vs reference (cm, deg) | seconds | usable")
    estimates = {}
    for i, j in pairs:
        t0 = time.perf_counter()
        est = estimate_motion(scans[i], scans[j])
        took = time.perf_counter() - t0
        estimates[(i, j)] = est
        dt = stamps[j]["lidar"] - stamps[i]["lidar"] if stamps[i] and stamps[j] else float("nan")
        vs = "-"
        if ref is not None:
            err = np.linalg.inv(np.linalg.inv(ref[j]) @ ref[i]) @ est.b_from_a
            vs = f"{100 * np.linalg.norm(err[:3, 3]):.2f}, {_angle_deg(err[:3, :3]):.3f}"
        t = est.b_from_a[:3, 3]
        print(f"{i}->{j}   | {t[0]:+.4f} {t[1]:+.4f} {t[2]:+.4f} | {est.rotation_deg:.3f} | "
              f"{est.translation_m / dt:.3f} | {est.pairs} | {100 * est.rmse_m:.2f} | {est.condition:.0f} | {vs} | "
              f"{took:.2f} | {'yes' if est.ok else est.reason}")
    print("\nexposure translation: given by the source vs registered velocity x (camera stamp - LiDAR stamp)")
    for k, st in enumerate(stamps):
        pair = (k, k + 1) if k + 1 < len(scans) else (k - 1, k)
        if st is None or stamps[pair[0]] is None or stamps[pair[1]] is None:
            continue
        dt = stamps[pair[1]]["lidar"] - stamps[pair[0]]["lidar"]
        for name, (cam_t, given) in st["cameras"].items():
            derived = motion_at(estimates[pair].b_from_a, dt, cam_t - st["lidar"])[:3, 3]
            print(f"frame {k} {name}: offset {1000 * (cam_t - st['lidar']):+.1f} ms, "
                  f"given {np.linalg.norm(given) * 100:.1f} cm, from the stamps {np.linalg.norm(derived) * 100:.1f} cm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
