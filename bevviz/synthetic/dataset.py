"""The dataset writer: ``sample_data``, bit for bit (``python -m bevviz.synthetic --out sample_data``).

A nuScenes-format mini dataset (three scenes: a calibrated one, one with a known
miscalibrated camera, and one in which a camera's stored calibration drifts), a bevviz
JSON rig with its images (through :func:`bevviz.io.rig_json.rig_to_dict`, the one
rig-JSON writer), and the ground texture.

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres; at the
    identity ego pose the ego frame (x forward, y left, z up) coincides with it. See
    docs/conventions.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from bevviz.camera import NUSCENES_CAMERAS
from bevviz.checks import field_error
from bevviz.io.rig_json import rig_to_dict
from bevviz.rotations import body_rotation, make_transform, matrix_to_quaternion
from bevviz.storage import NUSCENES
from bevviz.synthetic.renderer import LIDAR_MOUNT, lidar_scan, render
from bevviz.synthetic.rig import nuscenes_like_rig
from bevviz.synthetic.texture import ground_texture
from bevviz.synthetic.world import World, default_world

__all__ = [
    "BASE_TIMESTAMP", "JPEG_QUALITY", "README", "SCENES", "axis_angle_matrix", "generate", "main",
    "write_nuscenes",
]


JPEG_QUALITY = 85

#: Scenes of the embedded nuScenes-format dataset. Ego poses are translations along the
#: road (world x); scene B stores CAM_FRONT_RIGHT with a yaw error, images use the truth.
#: Scene C (the calibration audit's target) stores CAM_BACK_LEFT with a body-frame pitch that
#: drifts from its third sample on, one calibrated_sensor per sample_data (as nuScenes
#: allows); it is camera-only (no LIDAR_TOP) and its JPEGs use quality 50, to keep
#: sample_data small. Its poses keep every seam clear of boxes.
SCENES = (
    {"name": "scene-0001", "log": "bevviz-synthetic-a", "ego_x": (0.0, 5.0),
     "description": "bevviz synthetic street, calibrated rig", "error": None},
    {"name": "scene-0002", "log": "bevviz-synthetic-b", "ego_x": (-8.0, -3.0),
     "description": "bevviz synthetic street, CAM_FRONT_RIGHT stored with a 2 deg yaw error",
     "error": {"camera": "CAM_FRONT_RIGHT", "axis": (0.0, 0.0, 1.0), "degrees": 2.0}},
    {"name": "scene-0003", "log": "bevviz-synthetic-c", "ego_x": (-5.0, -4.5, -4.0, -3.5),
     "description": "bevviz synthetic street, CAM_BACK_LEFT's stored pitch drifts from sample 2 on (no LiDAR)",
     "error": None, "lidar": False, "jpeg_quality": 50,
     "drift": {"camera": "CAM_BACK_LEFT", "axis": "pitch", "degrees": (0.0, 0.0, 1.5, 2.5)}},
)


BASE_TIMESTAMP = 1_700_000_000_000_000  # microseconds; fixed, so output is reproducible


def _token(*parts: object) -> str:
    """Deterministic 32-hex nuScenes-style token."""
    return hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()


def _encode(img_rgb: np.ndarray, ext: str, quality: int = JPEG_QUALITY) -> bytes:
    """Encode an RGB uint8 image with OpenCV (JPEG at ``quality``, default 85, or PNG level 9)."""
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if ext == ".jpg" else [cv2.IMWRITE_PNG_COMPRESSION, 9]
    ok, buf = cv2.imencode(ext, cv2.cvtColor(np.ascontiguousarray(img_rgb), cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise field_error("image", img_rgb.shape, f"OpenCV could not encode {ext}")
    return buf.tobytes()


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _json(obj: object) -> str:
    return json.dumps(obj, indent=2) + "\n"


def axis_angle_matrix(axis, degrees: float) -> np.ndarray:
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    th = math.radians(degrees)
    S = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(th) * S + (1 - math.cos(th)) * S @ S


def write_nuscenes(root: Path, world: World, log=print) -> dict:
    """Write the nuScenes-format mini dataset (v1.0-mini tables, images, lidar, map).

    Args:
        root: Dataset root (``.../nuscenes``); tables go to ``root / "v1.0-mini"``.
        world: The world to render.
        log: Progress printer.

    Returns:
        The miscalibration record written to ``miscalibration.json``, plus the renders of
        scene A's first sample under key ``"first_images"`` (not written to that file). The
        drift of scene C is recorded in ``drift.json``.

    Convention:
        ``calibrated_sensor`` holds sensor -> ego (``ego_from_cam``), quaternion w, x, y,
        z, as nuScenes does; ``ego_pose`` holds ego -> global. Global = the world frame.
    """
    rig = nuscenes_like_rig()
    T: dict[str, list] = {k: [] for k in (
        "category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose",
        "log", "scene", "sample", "sample_data", "sample_annotation", "map")}
    T["category"] = [
        {"token": _token("category", n), "name": n, "description": d} for n, d in (
            ("vehicle.car", "Vehicle designed primarily for personal use."),
            ("vehicle.truck", "Vehicles primarily designed to haul cargo."),
            ("movable_object.barrier", "Temporary road barrier (unused in this synthetic sample)."))]
    cat = {c["name"]: c["token"] for c in T["category"]}
    T["attribute"] = [{"token": _token("attribute", n), "name": n, "description": d} for n, d in (
        ("vehicle.parked", "Vehicle is stationary with no driver."),
        ("vehicle.stopped", "Vehicle, with a driver, is stationary."))]
    T["visibility"] = [{"token": str(i + 1), "level": lv, "description": f"visibility of whole object is {lv}"}
                       for i, lv in enumerate(("v0-40", "v40-60", "v60-80", "v80-100"))]
    channels = list(NUSCENES_CAMERAS) + ["LIDAR_TOP"]
    T["sensor"] = [{"token": _token("sensor", ch), "channel": ch,
                    "modality": "lidar" if ch == "LIDAR_TOP" else "camera"} for ch in channels]
    map_token = _token("map", "bevviz-synthetic")
    T["map"] = [{"token": map_token, "log_tokens": [], "category": "semantic_prior",
                 "filename": "maps/bevviz-synthetic-placeholder.png"}]
    raw_true = {r.name: r for r in rig.to_raw(NUSCENES)}
    record: dict = {}
    drift_record: dict = {}
    first_images: dict[str, np.ndarray] = {}
    annotated = [(i, b) for i, b in enumerate(world.boxes) if b.kind in ("car", "truck")]
    for si, sc in enumerate(SCENES):
        scene_channels = channels if sc.get("lidar", True) else list(NUSCENES_CAMERAS)
        drift = sc.get("drift")
        log_token = _token("log", sc["log"])
        scene_token = _token("scene", sc["name"])
        T["log"].append({"token": log_token, "logfile": sc["log"], "vehicle": "bevviz-synthetic",
                         "date_captured": "2024-01-01", "location": "synthetic-street"})
        T["map"][0]["log_tokens"].append(log_token)
        cs_tokens = {}
        for ch in channels:
            tok = _token("calibrated_sensor", sc["name"], ch)
            cs_tokens[ch] = tok
            if ch == "LIDAR_TOP":
                T["calibrated_sensor"].append({"token": tok, "sensor_token": _token("sensor", ch),
                                               "translation": list(LIDAR_MOUNT), "rotation": [1.0, 0.0, 0.0, 0.0],
                                               "camera_intrinsic": []})
                continue
            raw = raw_true[ch]
            rot = list(map(float, raw.rotation))
            err = sc["error"]
            if err and err["camera"] == ch:
                R_true = rig[ch].ego_from_cam[:3, :3]
                R_stored = axis_angle_matrix(err["axis"], err["degrees"]) @ R_true
                rot = list(map(float, matrix_to_quaternion(R_stored, "wxyz")))
                record = {
                    "scene": sc["name"], "scene_token": scene_token, "camera": ch,
                    "calibrated_sensor_token": tok,
                    "rotation_error": {"axis_ego": list(err["axis"]), "degrees": err["degrees"],
                                       "description": "yaw about ego z (left-positive)"},
                    "applied_as": "R_stored = R(axis, degrees) @ R_true, on ego_from_cam "
                                  "(calibrated_sensor.rotation, sensor -> ego); translation unchanged",
                    "true_rotation_wxyz": list(map(float, raw.rotation)),
                    "stored_rotation_wxyz": rot,
                    "translation": list(map(float, raw.translation)),
                    "note": "images of this scene are rendered with the TRUE calibration",
                }
            T["calibrated_sensor"].append({"token": tok, "sensor_token": _token("sensor", ch),
                                           "translation": list(map(float, raw.translation)), "rotation": rot,
                                           "camera_intrinsic": raw.K.tolist()})
        n = len(sc["ego_x"])
        sample_tokens = [_token("sample", sc["name"], k) for k in range(n)]
        sample_cs = {}  # (channel, sample index) -> calibrated_sensor token, where it drifts
        if drift:
            ch = drift["camera"]
            raw = raw_true[ch]
            drift_record = {"scene": sc["name"], "scene_token": scene_token, "camera": ch, "axis": drift["axis"],
                            "frame": "camera body FLU (roll about the optical axis, pitch positive looking down, "
                                     "yaw positive turning left): ego_from_body' = ego_from_body @ Rz Ry Rx",
                            "note": "images of this scene are rendered with the TRUE calibration; the stored "
                                    "camera is turned by 'degrees' away from the truth",
                            "samples": []}
            for k, deg in enumerate(drift["degrees"]):
                tok = cs_tokens[ch]
                if deg:
                    tok = _token("calibrated_sensor", sc["name"], ch, k)
                    R = body_rotation(rig[ch].ego_from_cam[:3, :3], **{f"{drift['axis']}_deg": deg})
                    T["calibrated_sensor"].append({
                        "token": tok, "sensor_token": _token("sensor", ch),
                        "translation": list(map(float, raw.translation)),
                        "rotation": list(map(float, matrix_to_quaternion(R, "wxyz"))),
                        "camera_intrinsic": raw.K.tolist()})
                    sample_cs[(ch, k)] = tok
                drift_record["samples"].append({"index": k, "sample_token": sample_tokens[k],
                                                "calibrated_sensor_token": tok, "degrees": float(deg)})
        inst_tokens = {i: _token("instance", sc["name"], b.name) for i, b in annotated}
        ann_tokens = {(i, k): _token("sample_annotation", sc["name"], b.name, k)
                      for i, b in annotated for k in range(n)}
        for i, b in annotated:
            T["instance"].append({"token": inst_tokens[i], "category_token": cat[f"vehicle.{b.kind}"],
                                  "nbr_annotations": n, "first_annotation_token": ann_tokens[(i, 0)],
                                  "last_annotation_token": ann_tokens[(i, n - 1)]})
        for k, ex in enumerate(sc["ego_x"]):
            ts = BASE_TIMESTAMP + si * 100_000_000 + k * 500_000
            world_from_ego = make_transform(np.eye(3), np.array([ex, 0.0, 0.0]))
            pose_token = _token("ego_pose", sc["name"], k)
            T["ego_pose"].append({"token": pose_token, "timestamp": ts, "rotation": [1.0, 0.0, 0.0, 0.0],
                                  "translation": [float(ex), 0.0, 0.0]})
            T["sample"].append({"token": sample_tokens[k], "timestamp": ts,
                                "prev": sample_tokens[k - 1] if k > 0 else "",
                                "next": sample_tokens[k + 1] if k + 1 < n else "",
                                "scene_token": scene_token})
            t0 = time.perf_counter()
            images = render(rig, world, world_from_ego)
            log(f"  {sc['name']} sample {k}: rendered {len(images)} cameras in {time.perf_counter() - t0:.1f} s")
            if si == 0 and k == 0:
                first_images = images
            lidar_counts = {i: 0 for i, _ in annotated}
            for ch in scene_channels:
                sd_token = _token("sample_data", sc["name"], ch, k)
                prev = _token("sample_data", sc["name"], ch, k - 1) if k > 0 else ""
                nxt = _token("sample_data", sc["name"], ch, k + 1) if k + 1 < n else ""
                stem = f"{sc['name']}__{ch}__{ts}"
                if ch == "LIDAR_TOP":
                    pts, hit_box = lidar_scan(world, world_from_ego)
                    fname = f"samples/LIDAR_TOP/{stem}.pcd.bin"
                    _write(root / fname, pts.tobytes())
                    lidar_counts = {i: int((hit_box == i).sum()) for i, _ in annotated}
                    w = h = 0
                    fmt = "pcd"
                else:
                    fname = f"samples/{ch}/{stem}.jpg"
                    _write(root / fname, _encode(images[ch], ".jpg", sc.get("jpeg_quality", JPEG_QUALITY)))
                    w, h, fmt = rig[ch].width, rig[ch].height, "jpg"
                T["sample_data"].append({
                    "token": sd_token, "sample_token": sample_tokens[k], "ego_pose_token": pose_token,
                    "calibrated_sensor_token": sample_cs.get((ch, k), cs_tokens[ch]), "timestamp": ts,
                    "fileformat": fmt, "is_key_frame": True, "height": h, "width": w, "filename": fname,
                    "prev": prev, "next": nxt})
            for i, b in annotated:
                yaw = math.radians(b.yaw_deg)
                T["sample_annotation"].append({
                    "token": ann_tokens[(i, k)], "sample_token": sample_tokens[k], "instance_token": inst_tokens[i],
                    "visibility_token": "4", "attribute_tokens": [_token("attribute", "vehicle.parked")],
                    "translation": [float(v) for v in b.center3],
                    "size": [b.size[1], b.size[0], b.size[2]],  # nuScenes: width, length, height
                    "rotation": [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)],
                    "prev": ann_tokens[(i, k - 1)] if k > 0 else "",
                    "next": ann_tokens[(i, k + 1)] if k + 1 < n else "",
                    "num_lidar_pts": lidar_counts[i], "num_radar_pts": 0})
        T["scene"].append({"token": scene_token, "log_token": log_token, "nbr_samples": n,
                           "first_sample_token": sample_tokens[0], "last_sample_token": sample_tokens[-1],
                           "name": sc["name"], "description": sc["description"]})
    for name, table in T.items():
        _write(root / "v1.0-mini" / f"{name}.json", _json(table))
    # The devkit opens a map mask per map record; this is a small placeholder (not used).
    _write(root / T["map"][0]["filename"], _encode(np.zeros((16, 16, 3), np.uint8), ".png"))
    _write(root / "miscalibration.json", _json(record))
    _write(root / "drift.json", _json(drift_record))
    return {**record, "first_images": first_images}


README = """# bevviz sample_data (generated: do not edit by hand)

Regenerate bit for bit with `python -m bevviz.synthetic --out sample_data`.

- `nuscenes/`: a nuScenes-format dataset that `NuScenes(version="v1.0-mini",
  dataroot="sample_data/nuscenes")` loads. `scene-0001` and `scene-0002`: two key-frame
  samples each, six cameras (1600 x 900 JPEG) plus a ray-cast LIDAR_TOP sweep and box
  annotations for the cars. `scene-0001` is calibrated. In `scene-0002` the stored
  `calibrated_sensor` of one camera carries a known rotation error while its images use
  the true calibration; the truth is in `nuscenes/miscalibration.json`. `scene-0003`: four
  samples, six cameras (JPEG quality 50), no LiDAR; from its third sample on one camera's
  stored calibration drifts (a calibrated_sensor per sample_data), recorded in
  `nuscenes/drift.json`. The map mask is a placeholder. No box stands on the ground two
  neighbouring cameras share, in any sample (the cars park ahead of and behind the ego),
  so seam checks on the true rig find nothing.
- `rig.json` + `images/`: the true rig in the bevviz JSON format (sensor_to_ego, wxyz,
  RDF) with the images of scene-0001's first sample (ego pose = identity).
- `ground_texture.png` + `ground_texture.json`: the painted ground (BEV orientation: row 0
  = front / max x, column 0 = left / max y) and its metric extent.

World frame = nuScenes global frame; at the identity ego pose it equals the ego frame
(x forward, y left, z up, ground at z = 0).
"""


def generate(out: str | os.PathLike, log=print) -> dict[str, str]:
    """Write all of ``sample_data`` into ``out``.

    Args:
        out: Output folder (created if needed).
        log: Progress printer.

    Returns:
        Relative path -> sha256 of every file written.
    """
    out = Path(out)
    world = default_world()
    tex, grid = ground_texture()
    t0 = time.perf_counter()
    _write(out / "ground_texture.png", _encode(tex, ".png"))
    _write(out / "ground_texture.json", _json({
        "x_range": list(grid.x_range), "y_range": list(grid.y_range), "resolution": grid.resolution,
        "shape": [grid.height, grid.width, 3], "image": "ground_texture.png",
        "orientation": "BEV display: row 0 = front (max x), column 0 = left (max y); texel (i, j) centre at "
                       "x = x_max - (i + 0.5) * res, y = y_max - (j + 0.5) * res (as bevviz.bev_grid.BEVGrid)",
        "frame": "world = nuScenes global frame; equals the ego frame at the identity ego pose; ground z = 0",
    }))
    rec = write_nuscenes(out / "nuscenes", world, log)
    images = rec.pop("first_images")
    rig = nuscenes_like_rig()
    paths = {n: f"images/{n}.jpg" for n in rig.names}
    for name, path in paths.items():
        _write(out / path, _encode(images[name], ".jpg"))
    _write(out / "rig.json", _json(rig_to_dict(rig, NUSCENES, paths)))
    _write(out / "README.md", README)
    log(f"sample_data written to {out} in {time.perf_counter() - t0:.1f} s")
    digests = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            digests[p.relative_to(out).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return digests


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m bevviz.synthetic --out sample_data``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sample_data", help="output folder (default: sample_data)")
    args = parser.parse_args(argv)
    generate(args.out)
    return 0
