"""Real frame folders: one rig, its images and the LiDAR sweep of the same moment, on disk.

The format the doctor's evaluation reads (``python -m bevviz.lab.evaluate --frames
DIR ...``) and the embedded ``sample_data/real_tri`` and ``sample_data/real_kitti`` frames use:

* ``rig.json``: a bevviz rig (:mod:`bevviz.io.rig_json`) whose cameras name their ``image``
  (a path relative to the folder);
* ``lidar_ego.npy``: float32 (N, 4): x, y, z in the ego frame and intensity in the source's
  own scale (any: the doctor ranks it per scan), in the source's point order (any);
* ``lidar_ring.npy`` (optional): (N,) laser ring index;
* ``exposure.json`` (optional): ``{"lidar_timestamp": T, "cameras": {name:
  {"exposure_from_keyframe": 4x4, "timestamp": T}}}``, the ego motion from the LiDAR time to
  each camera's exposure (:attr:`bevviz.lidar.LidarScan.exposure_from_keyframe`) and the
  instants themselves, each optional; a time ``T`` is seconds (a number) or an ISO 8601 UTC
  string (``"2019-07-09T10:41:03.5Z"``). A drive of frames with times but no motion gets its
  motion estimated from the sweeps (:func:`bevviz.session.frame_folder_scene`). An optional
  ``"lidar_origin": [x, y, z]`` (metres, ego frame) locates the LiDAR's optical centre
  (:attr:`bevviz.lidar.LidarScan.origin`; default the ego origin): a sparse spinning LiDAR
  whose points carry no ring index and no firing order gets its rings from its lasers'
  elevations about it (:func:`bevviz.calibration.lidar.rings.scan_lines`);
* ``ignore.json`` (optional): ``{name: [[[u, v], ...], ...]}``, per camera a list of
  polygons in pixels of the calibrated image that do not show the world (the car's own
  body), added to those of the cameras' own ``ignore`` fields in ``rig.json``;
  :func:`bevviz.calibration.lidar.masks.ignore_masks` turns them into masks.

Convention:
    Ego frame x forward, y left, z up, metres; pixels at centres. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bevviz.camera import Rig
from bevviz.checks import check_polygons, field_error
from bevviz.errors import InputError
from bevviz.io.json_reader import read_json
from bevviz.io.pointcloud import read_points
from bevviz.io.rig_json import load_rig_file, load_rig_images
from bevviz.lidar import LidarScan

__all__ = ["RealFrame", "load_frame_folder"]


@dataclass
class RealFrame:
    """One frame of a rig read from a folder.

    Attributes:
        name: The folder's name.
        rig: The rig as stored (the dataset's calibration).
        images: Camera name -> uint8 RGB (H, W, 3).
        scan: The LiDAR sweep (ego frame at the LiDAR time, with the exposure motion).
        ignore: Camera name -> polygons (each a list of (u, v) pixels) not showing the world.
        lidar_time_s: The sweep's instant (seconds; ``exposure.json``), or None.
        camera_times_s: Camera name -> its exposure's instant (seconds), where given.
    """

    name: str
    rig: Rig
    images: dict[str, np.ndarray]
    scan: LidarScan
    ignore: dict[str, list[list[list[float]]]] = field(default_factory=dict)
    lidar_time_s: float | None = None
    camera_times_s: dict[str, float] = field(default_factory=dict)


def _json(path: Path) -> object:
    return read_json(path)  # bounded: size, depth, duplicate keys, numbers; errors name the file


def _origin(value: object) -> np.ndarray:
    """``exposure.json``'s ``lidar_origin``: three finite numbers (metres, ego frame), (3,)."""
    ok = (isinstance(value, list) and len(value) == 3
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value))
    if not ok:
        raise field_error("exposure.json lidar_origin", value, "must be [x, y, z]: three finite numbers (metres, "
                          "the LiDAR's optical centre in the ego frame)")
    return np.asarray(value, dtype=np.float64)


def _seconds(value: object, what: str, camera: str | None = None) -> float:
    """A time of ``exposure.json`` in seconds: a number, or an ISO 8601 string (UTC when it
    names no zone)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
    raise field_error(f"exposure.json {what}", value, "must be seconds (a number) or an ISO 8601 time "
                      "such as 2019-07-09T10:41:03.5Z", camera)


def load_frame_folder(path: str | os.PathLike) -> RealFrame:
    """Read one frame folder (format in the module docstring).

    Args:
        path: The folder.

    Returns:
        :class:`RealFrame`.

    Raises:
        ValueError: naming the file and what is wrong with it (missing rig or LiDAR file,
            an image missing, a malformed array or transform).
    """
    folder = Path(path)
    if not (folder / "rig.json").is_file():
        raise field_error("frames", str(folder), "is not a frame folder: it holds no rig.json")
    rig_file = load_rig_file(folder / "rig.json")
    images = dict(load_rig_images(rig_file, folder, require_all=True))
    lidar_path = folder / "lidar_ego.npy"
    if not lidar_path.is_file():
        raise field_error("lidar_ego.npy", str(lidar_path), "missing: a frame folder needs its LiDAR sweep")
    points, _ = read_points(lidar_path)  # header, dtype, shape and size checked before reading
    ring_path = folder / "lidar_ring.npy"
    ring = np.load(ring_path, allow_pickle=False) if ring_path.is_file() else None
    motion, times, lidar_time, origin = {}, {}, None, np.zeros(3)
    if (folder / "exposure.json").is_file():
        data = _json(folder / "exposure.json")
        cams = data.get("cameras", {}) if isinstance(data, dict) else {}
        if isinstance(data, dict) and data.get("lidar_timestamp") is not None:
            lidar_time = _seconds(data["lidar_timestamp"], "lidar_timestamp")
        if isinstance(data, dict) and data.get("lidar_origin") is not None:
            origin = _origin(data["lidar_origin"])
        for name, entry in cams.items():
            if isinstance(entry, dict) and entry.get("timestamp") is not None:
                times[str(name)] = _seconds(entry["timestamp"], "timestamp", str(name))
            if isinstance(entry, dict) and "exposure_from_keyframe" in entry:
                try:
                    motion[name] = np.asarray(entry["exposure_from_keyframe"], dtype=np.float64)
                except (TypeError, ValueError):
                    raise field_error("exposure.json", entry["exposure_from_keyframe"],
                                      "exposure_from_keyframe must be a 4x4 matrix of numbers", name) from None
    ignore = {k: list(v) for k, v in rig_file.ignore.items()}  # the cameras' own "ignore" fields
    if (folder / "ignore.json").is_file():
        data = _json(folder / "ignore.json")
        if not isinstance(data, dict):
            raise field_error("ignore.json", type(data).__name__, "must map camera names to lists of polygons")
        for k, v in data.items():
            ignore[str(k)] = ignore.get(str(k), []) + check_polygons(v, "ignore.json", str(k))
    try:  # the ring index first, alone: its errors name its file
        scan = LidarScan(points, ring, np.zeros(len(points), np.int16), origin, 0, {})
    except InputError as exc:
        problem = f"is not valid beside lidar_ego.npy ({len(points)} points): {exc}"
        raise field_error("lidar_ring.npy", str(ring_path), problem) from None
    try:
        scan = dataclasses.replace(scan, exposure_from_keyframe=motion)
    except InputError as exc:  # name the file the bad motion came from
        raise field_error("exposure.json", str(folder / "exposure.json"), str(exc)) from None
    return RealFrame(folder.name, rig_file.rig, images, scan, ignore, lidar_time, times)
