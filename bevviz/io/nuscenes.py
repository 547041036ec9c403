"""Load rigs and images from a nuScenes-format dataset through nuscenes-devkit.

The devkit handle is opened once (:func:`open_dataset`, which an app caches with
``st.cache_resource``); :func:`list_scenes`, :func:`list_samples` and
:func:`load_sample_from` then work on it without reloading the tables; :func:`sample_meta`,
:func:`neighbour_samples` and :func:`first_sample` (defined in :mod:`bevviz.io.nuscenes_walk`,
importable from here) walk the tables for the session's loaders.
:func:`load_sample` is the one-call form of the public API. :func:`load_lidar_from` /
:func:`load_lidar` read the LIDAR_TOP sweep(s) of a sample as a :class:`bevviz.lidar.LidarScan`
in the ego frame at the keyframe time, with the ego motion to each camera's exposure;
:func:`bevviz.io.nuscenes_boxes.load_boxes_from` reads a sample's annotation boxes in that
same frame.

Convention:
    nuScenes ``calibrated_sensor`` stores sensor -> ego (``ego_from_cam``) with a w, x, y, z
    quaternion, in OpenCV RDF camera axes; ``camera_intrinsic`` is K (3, 3). This module
    converts at the boundary with ``Rig.from_raw(raw, bevviz.storage.NUSCENES)`` (that is,
    ``Convention("sensor_to_ego", "wxyz", "RDF")``), so the returned cameras hold
    ``cam_from_ego``. ``ego_pose`` stores ego -> global (:func:`ego_pose` returns it as
    ``global_from_ego``). Images are RGB uint8.
    Every sample_data (each camera, each lidar sweep) has its own ego pose at its own
    timestamp; lidar points are moved sensor -> ego(t_sweep) -> global -> ego(t_keyframe).
"""

from __future__ import annotations

import functools
import io
import json
import os
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bevviz.camera import NUSCENES_CAMERAS, Rig
from bevviz.checks import MAX_LIDAR_POINTS, check_at_most, field_error, image_side, positive_int
from bevviz.errors import InputError
from bevviz.io.images import read_image_report
from bevviz.io.json_reader import MAX_TABLE_BYTES, read_json
from bevviz.io.nuscenes_tables import RecordProblem, follow, screen_tables, walk
from bevviz.io.nuscenes_walk import (  # noqa: F401  (the table walks: re-exported here for their callers)
    first_sample,
    is_dataroot,
    neighbour_samples,
    sample_meta,
    sample_position,
    sample_record,
)
from bevviz.io.pointcloud import read_points
from bevviz.io.rig_json import RigImages
from bevviz.lidar import LidarScan
from bevviz.rotations import invert_transform, make_transform, unit_quaternion_to_matrix
from bevviz.storage import NUSCENES, RawCamera

#: The LiDAR channel :func:`load_lidar` reads.
LIDAR_CHANNEL = "LIDAR_TOP"


@dataclass(frozen=True)
class SceneInfo:
    """One scene of a dataset.

    Attributes:
        name: Scene name, e.g. ``"scene-0061"``.
        token: Scene token.
        description: Free-text description.
        n_samples: Number of key-frame samples.
    """

    name: str
    token: str
    description: str
    n_samples: int


@dataclass(frozen=True)
class SampleInfo:
    """One key-frame sample of a scene.

    Attributes:
        token: Sample token.
        index: Position in its scene (0-based).
        timestamp: Microseconds (nuScenes timestamp).
        cameras: Camera channels present, in nuScenes ring order first.
    """

    token: str
    index: int
    timestamp: int
    cameras: tuple[str, ...]


def open_dataset(dataroot: str | os.PathLike, version: str = "v1.0-mini"):
    """Open a nuScenes-format dataset with nuscenes-devkit.

    Args:
        dataroot: Folder holding ``<version>/`` (the tables) and the sensor files.
        version: Table folder name, e.g. ``"v1.0-mini"``.

    Every record is screened before the devkit indexes the tables
    (:func:`bevviz.io.nuscenes_tables.screen_tables`): records the index cannot take (a
    dangling token, a missing key) are set aside, and the handle's ``problems`` (a list of
    :class:`~bevviz.io.nuscenes_tables.RecordProblem`) and ``blocked`` (sample token -> the
    problem that keeps it from being checked) say what was found; :func:`record_problems`
    reads them.

    Returns:
        The ``nuscenes.nuscenes.NuScenes`` handle (tables loaded, reverse index built).

    Raises:
        ValueError: naming ``dataroot`` (missing folder, broken or incomplete tables) or
            ``version`` (no such table folder) and the value.
    """
    root = Path(dataroot)
    if not root.is_dir():
        raise field_error("dataroot", str(dataroot), "is not an existing folder")
    if not isinstance(version, str) or not version or not (root / version).is_dir():
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "sample.json").exists())
        raise field_error("version", version, f"no table folder {root / str(version)} (found: {found or 'none'})")
    try:
        screened_devkit = _screened_devkit()
    except ImportError as exc:  # pragma: no cover - the devkit is a hard dependency
        raise field_error("dataroot", str(dataroot), f"nuscenes-devkit is not installed ({exc})") from exc
    try:
        with redirect_stdout(io.StringIO()):
            return screened_devkit(version=version, dataroot=str(root), verbose=False)
    except FileNotFoundError as exc:
        raise field_error("dataroot", str(dataroot), f"a table or file is missing: {exc}") from exc
    except InputError as exc:  # a table the JSON reader refused: it names the table and the value
        raise exc.within(f"dataroot {dataroot}") from None
    except json.JSONDecodeError as exc:
        raise field_error("dataroot", str(dataroot), f"a table in {version} is not valid JSON: {exc}") from exc
    except (AssertionError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise field_error("dataroot", str(dataroot),
                          f"tables in {version} are broken or incomplete ({type(exc).__name__}: {exc})") from exc


@functools.cache
def _screened_devkit() -> type:
    """The devkit's ``NuScenes`` with the tables screened before its reverse index is built."""
    from nuscenes.nuscenes import NuScenes  # optional heavy dependency: 2.4 s to import, opened on demand

    class ScreenedNuScenes(NuScenes):
        """``NuScenes`` whose index is built over screened tables (``problems``, ``blocked``)."""

        def __load_table__(self, table_name: str) -> object:
            # The one bounded JSON reader (size, depth, duplicate keys, numbers) instead of json.load.
            path = os.path.join(self.table_root, f"{table_name}.json")
            if not os.path.isfile(path):
                raise FileNotFoundError(path)
            return read_json(path, max_bytes=MAX_TABLE_BYTES, limit_name="MAX_TABLE_BYTES")

        def __make_reverse_index__(self, verbose: bool) -> None:
            screened = screen_tables({t: getattr(self, t) for t in self.table_names})
            for table, records in screened.tables.items():
                setattr(self, table, records)
            self.problems, self.blocked = screened.problems, screened.blocked
            super().__make_reverse_index__(verbose)

    return ScreenedNuScenes


def record_problems(nusc) -> tuple[list[RecordProblem], dict[str, RecordProblem]]:
    """The problems :func:`open_dataset` found in the tables, and the samples they block.

    Args:
        nusc: Handle from :func:`open_dataset` (a plain devkit handle has none).

    Returns:
        ``(problems, blocked)``: every :class:`~bevviz.io.nuscenes_tables.RecordProblem`, and
        sample token -> the problem that keeps that sample from being checked.
    """
    return list(getattr(nusc, "problems", ())), dict(getattr(nusc, "blocked", {}))


def list_scenes(nusc) -> list[SceneInfo]:
    """Scenes of an open dataset, in table order.

    Args:
        nusc: Handle from :func:`open_dataset`.

    Returns:
        One :class:`SceneInfo` per scene (a name stored as a number reads as its text; a
        sample count that is not a whole number >= 0 reads as 0: the table screen reports it).
    """
    out = []
    for s in nusc.scene:
        count = s.get("nbr_samples")
        count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
        desc = s.get("description", "")
        out.append(SceneInfo(str(s.get("name", s["token"])), s["token"], desc if isinstance(desc, str) else "", count))
    return out


def _camera_channels(nusc, sample: dict) -> list[str]:
    cams = [ch for ch, sd in sample["data"].items()
            if nusc.get("sample_data", sd).get("sensor_modality") == "camera"]
    ring = [c for c in NUSCENES_CAMERAS if c in cams]
    return ring + sorted(c for c in cams if c not in NUSCENES_CAMERAS)


def scene_samples(nusc, scene_token: str) -> tuple[list[SampleInfo], RecordProblem | None]:
    """Key-frame samples of a scene, in time order, and what cut the chain short.

    The ``next`` links are followed from the scene's ``first_sample_token``, each sample at
    most once (:func:`bevviz.io.nuscenes_tables.follow`): a link to a token not in the
    table, a loop back, or a sample of another scene ends the chain with a problem, after
    at most as many steps as the sample table holds.

    Args:
        nusc: Handle from :func:`open_dataset`.
        scene_token: Scene token.

    Returns:
        ``(samples, problem)``: one :class:`SampleInfo` per sample reached, and the
        :class:`~bevviz.io.nuscenes_tables.RecordProblem` of the bad link (None when the
        chain ends with ``""``).

    Raises:
        InputError: naming ``scene_token`` if it is unknown.
    """
    try:
        scene = nusc.get("scene", scene_token)
    except (KeyError, TypeError):
        raise field_error("scene_token", scene_token, "no such scene in the dataset") from None
    records, problem = follow(nusc.get, "sample", scene.get("first_sample_token"), "next", len(nusc.sample),
                              ("scene", scene_token, "first_sample_token"))
    out = []
    for s in records:
        if s.get("scene_token") != scene_token:
            holder = ("scene", scene_token, "first_sample_token") if not out else ("sample", out[-1].token, "next")
            problem = RecordProblem(*holder, s["token"], f"leads to a sample of another scene "
                                    f"({s.get('scene_token')!r}, not {scene_token!r})", scene=scene_token)
            break
        stamp = s.get("timestamp")
        out.append(SampleInfo(s["token"], len(out), stamp if isinstance(stamp, int) else 0,
                              tuple(_camera_channels(nusc, s))))
    if problem is not None and problem.scene is None:
        problem = RecordProblem(problem.table, problem.token, problem.field, problem.value, problem.problem,
                                problem.token if problem.table == "sample" else None, scene_token)
    return out, problem


def list_samples(nusc, scene_token: str) -> list[SampleInfo]:
    """Key-frame samples of a scene, in time order (following ``next`` links, bounded).

    Args:
        nusc: Handle from :func:`open_dataset`.
        scene_token: Scene token.

    Returns:
        One :class:`SampleInfo` per sample.

    Raises:
        InputError: naming ``scene_token`` if it is unknown, or the bad link as
            :func:`scene_samples` finds it (``sample.next``, ``scene.first_sample_token``:
            a dangling token, a loop, a sample of another scene) and its value.
    """
    samples, problem = scene_samples(nusc, scene_token)
    if problem is not None:
        raise problem.error()
    return samples


def ego_pose(nusc, sample_token: str, channel: str = "CAM_FRONT") -> np.ndarray:
    """The ego pose of a sample as ``global_from_ego``, shape (4, 4).

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.
        channel: Sensor whose sample_data gives the pose (nuScenes stores one per sensor
            reading); falls back to the first camera present.

    Raises:
        InputError: naming ``sample_token`` (unknown, or without cameras) or
            ``ego_pose.rotation`` (a quaternion whose norm is off 1 by more than
            :data:`bevviz.checks.QUATERNION_NORM_TOL`).
    """
    s = sample_record(nusc, sample_token)
    chans = _camera_channels(nusc, s)
    if channel not in s["data"]:
        if not chans:
            raise field_error("sample_token", sample_token, "sample has no camera data")
        channel = chans[0]
    pose = nusc.get("ego_pose", nusc.get("sample_data", s["data"][channel])["ego_pose_token"])
    return make_transform(unit_quaternion_to_matrix(pose["rotation"], "wxyz", "ego_pose.rotation"),
                          np.asarray(pose["translation"], float))


def _recorded_size(sd: dict, camera: str) -> tuple[int, int] | None:
    """The (W, H) a camera's sample_data records, checked against the image limits; None
    when it records no whole size (0 or missing: the size then comes from the image)."""
    width, height = sd.get("width"), sd.get("height")
    if not width or not height:
        return None
    return image_side(width, "sample_data.width", camera), image_side(height, "sample_data.height", camera)


def _data_path(nusc, sd: dict, field: str, camera: str | None = None) -> str:
    """The file of a sample_data record, refused when it resolves outside the dataroot.

    Tables are input like any other: a ``filename`` of ``../../etc/passwd`` or an absolute
    path must not make the loader read outside the dataset (symlinks resolved).
    """
    root = Path(nusc.dataroot).resolve()
    target = (root / str(sd["filename"])).resolve()
    if not target.is_relative_to(root):
        raise field_error(field, sd["filename"], f"sample_data {sd['token']} points outside the dataroot {root}",
                          camera)
    return str(target)


def load_sample_from(nusc, sample_token: str, with_images: bool = True) -> tuple[Rig, RigImages]:
    """Rig and camera images of one sample of an open dataset.

    Images go through :func:`bevviz.io.images.read_image_report`: the file's header is
    checked against the limits of :mod:`bevviz.checks` and the size sample_data records
    before anything is decoded, and conversions to RGB uint8 are reported.

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.
        with_images: Read the image files (else the dict is empty).

    Returns:
        ``(rig, images)``: cameras in nuScenes ring order (those present; other camera
        channels follow, sorted); images: a :class:`bevviz.io.rig_json.RigImages`, camera
        name -> RGB uint8 (H, W, 3), whose ``warnings`` name each converted file
        (``"camera CAM_FRONT: samples/CAM_FRONT/x.png: 16-bit samples cut to 8 bits"``).

    Raises:
        InputError: naming ``sample_token`` (unknown, or without cameras),
            ``sample_data.width`` / ``sample_data.height`` (not a size within the limits) or
            ``image`` (missing or damaged file, over a limit, size not the one recorded).

    Convention:
        See the module docstring: stored sensor -> ego (wxyz, RDF) becomes cam_from_ego.
    """
    s = sample_record(nusc, sample_token)
    channels = _camera_channels(nusc, s)
    if not channels:
        raise field_error("sample_token", sample_token, "sample has no camera data")
    raws, images, conversions, files = [], {}, {}, {}
    for ch in channels:
        sd = nusc.get("sample_data", s["data"][ch])
        cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
        size = _recorded_size(sd, ch)
        width, height = size or (0, 0)
        if with_images:
            path = _data_path(nusc, sd, "image", ch)
            if not os.path.isfile(path):
                raise field_error("image", path, "file listed in sample_data does not exist", ch)
            decoded = read_image_report(path, camera=ch, size=size)
            height, width = decoded.rgb.shape[:2]
            images[ch], files[ch] = decoded.rgb, sd["filename"]
            if decoded.conversions:
                conversions[ch] = decoded.conversions
        raws.append(RawCamera(ch, np.asarray(cs["camera_intrinsic"], float), np.asarray(cs["rotation"], float),
                              np.asarray(cs["translation"], float), width, height))
    return Rig.from_raw(raws, NUSCENES), RigImages(images, conversions, files)


def load_sample(dataroot: str | os.PathLike, version: str = "v1.0-mini",
                sample_token: str | None = None) -> tuple[Rig, RigImages]:
    """Rig and images of one sample of a nuScenes-format dataset.

    Args:
        dataroot: Dataset root (holds ``<version>/`` and ``samples/``).
        version: Table folder, e.g. ``"v1.0-mini"``.
        sample_token: Sample to load; None: the first sample of the first scene.

    Returns:
        ``(rig, images)``: the rig (cameras in nuScenes ring order, ``cam_from_ego``) and
        camera name -> RGB uint8 image (H, W, 3), with the conversions' ``warnings``
        (see :func:`load_sample_from`).

    Raises:
        InputError: naming ``dataroot``, ``version`` or ``sample_token`` and its value.
    """
    nusc = open_dataset(dataroot, version)
    if sample_token is None:
        sample_token = first_sample(nusc, "dataroot", str(dataroot))
    return load_sample_from(nusc, sample_token)


def _devkit_pose(nusc, table: str, token: str) -> np.ndarray:
    """The ``calibrated_sensor`` or ``ego_pose`` record ``token`` of ``table`` as its 4x4 transform.

    ``calibrated_sensor`` gives ``ego_from_sensor``, ``ego_pose`` gives ``global_from_ego``;
    built with the devkit's own ``transform_matrix`` so that results match its point clouds.
    The devkit normalises the quaternion; one whose norm is off 1 by more than
    :data:`bevviz.checks.QUATERNION_NORM_TOL` is refused first (field ``<table>.rotation``).
    """
    # nuscenes-devkit (and its pyquaternion) is heavy; imported where a handle is in use.
    from nuscenes.utils.geometry_utils import transform_matrix
    from pyquaternion import Quaternion

    record = nusc.get(table, token)
    unit_quaternion_to_matrix(record["rotation"], "wxyz", f"{table}.rotation")
    return transform_matrix(record["translation"], Quaternion(record["rotation"]))


def load_lidar_from(nusc, sample_token: str, sweeps: int = 1, min_distance: float = 0.0) -> LidarScan:
    """The LIDAR_TOP point cloud of one sample of an open dataset, in the ego frame.

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.
        sweeps: Number of sweeps: 1 = the keyframe sweep alone; k > 1 adds up to k - 1
            earlier sweeps, following the sample_data ``prev`` links as the devkit's
            ``LidarPointCloud.from_file_multisweep`` does (non-key sweeps in nuScenes; a
            dataset without them links to the previous keyframe's sweep).
        min_distance: Drop points with ``|x| < min_distance and |y| < min_distance`` in
            the sensor frame of their sweep, as the devkit's ``remove_close`` does
            (``from_file_multisweep`` uses 1.0). Default 0: keep every point, including the
            returns from the car's own roof (about 8,000 of 35,000 points on the real
            sample lie within 1 m of the sensor).

    Returns:
        :class:`LidarScan`: points (N, 4) float32 (x, y, z in the ego frame at the keyframe
        time, intensity), ring (N,) int16 from the ``.bin``, sweep (N,) int16, origin = the
        LIDAR_TOP mount position in the ego frame, ``timestamp_us`` = the keyframe sweep's
        timestamp, ``exposure_from_keyframe[cam] = inv(global_from_ego(t_cam)) @
        global_from_ego(t_keyframe)`` for every camera of the sample.

    Raises:
        InputError: naming ``sample_token`` (unknown, or no LIDAR_TOP channel), ``sweeps``,
            ``min_distance``, the lidar file (missing, or as
            :func:`bevviz.io.pointcloud.read_points`), ``sample_data.prev`` (a dangling
            token or a loop among the sweeps), or ``calibrated_sensor.rotation`` /
            ``ego_pose.rotation`` (a quaternion whose norm is off 1 by more than
            :data:`bevviz.checks.QUATERNION_NORM_TOL`), and the value.

    Convention:
        Sweep k's points go sensor -> ego(t_k) -> global -> ego(t_keyframe): one 4x4
        ``ego_kf_from_global @ global_from_ego_k @ ego_k_from_sensor`` per sweep, applied
        with the devkit's ``LidarPointCloud.transform`` (float32 points, as the devkit).
        The keyframe sweep uses ``ego_from_sensor`` alone, so for ``sweeps=1`` the points
        equal the devkit's ``LidarPointCloud.from_file(...).transform(ego_from_sensor)``.
    """
    from nuscenes.utils.data_classes import LidarPointCloud  # heavy devkit import, as above

    s = sample_record(nusc, sample_token)
    sweeps = positive_int(sweeps, "sweeps")
    if isinstance(min_distance, bool) or not isinstance(min_distance, (int, float, np.integer, np.floating)) \
            or not np.isfinite(float(min_distance)) or float(min_distance) < 0:
        raise field_error("min_distance", min_distance, "must be a finite number >= 0 (metres)")
    if LIDAR_CHANNEL not in s["data"]:
        raise field_error("sample_token", sample_token,
                          f"sample has no {LIDAR_CHANNEL} sample_data (channels: {sorted(s['data'])})")
    key_sd = nusc.get("sample_data", s["data"][LIDAR_CHANNEL])
    ego_from_lidar = _devkit_pose(nusc, "calibrated_sensor", key_sd["calibrated_sensor_token"])
    global_from_ego_kf = _devkit_pose(nusc, "ego_pose", key_sd["ego_pose_token"])
    ego_kf_from_global = invert_transform(global_from_ego_kf)

    chain = walk(nusc.get, "sample_data", key_sd["token"], "prev", len(nusc.sample_data),
                 ("sample", sample_token, f"data.{LIDAR_CHANNEL}"), stop=sweeps)
    chunks, rings, sweep_ids, total = [], [], [], 0
    for k, sd in enumerate(chain):
        path = _data_path(nusc, sd, "lidar")
        if not os.path.isfile(path):
            raise field_error("lidar", path, f"file listed in sample_data {sd['token']} does not exist")
        points, ring = read_points(path)
        if min_distance > 0:
            keep = ~((np.abs(points[:, 0]) < min_distance) & (np.abs(points[:, 1]) < min_distance))
            points, ring = points[keep], ring[keep]
        total += len(points)
        check_at_most(total, MAX_LIDAR_POINTS, "MAX_LIDAR_POINTS", "sweeps",
                      shown=f"{k + 1} of {sweeps} sweeps, {total} points")
        if k == 0:
            ego_kf_from_sensor = ego_from_lidar
        else:
            ego_k_from_sensor = _devkit_pose(nusc, "calibrated_sensor", sd["calibrated_sensor_token"])
            global_from_ego_k = _devkit_pose(nusc, "ego_pose", sd["ego_pose_token"])
            ego_kf_from_sensor = ego_kf_from_global @ global_from_ego_k @ ego_k_from_sensor
        pc = LidarPointCloud(np.ascontiguousarray(points.T))
        pc.transform(ego_kf_from_sensor)
        chunks.append(pc.points.T)
        rings.append(ring)
        sweep_ids.append(np.full(len(points), k, np.int16))

    exposure = {}
    for ch in _camera_channels(nusc, s):
        cam_sd = nusc.get("sample_data", s["data"][ch])
        global_from_ego_cam = _devkit_pose(nusc, "ego_pose", cam_sd["ego_pose_token"])
        exposure[ch] = invert_transform(global_from_ego_cam) @ global_from_ego_kf
    return LidarScan(
        points=np.concatenate(chunks).astype(np.float32),
        ring=np.concatenate(rings),
        sweep=np.concatenate(sweep_ids),
        origin=ego_from_lidar[:3, 3].copy(),
        timestamp_us=int(key_sd["timestamp"]),
        exposure_from_keyframe=exposure,
    )


def load_lidar(dataroot: str | os.PathLike, version: str = "v1.0-mini", sample_token: str | None = None,
               sweeps: int = 1, min_distance: float = 0.0) -> LidarScan:
    """The LIDAR_TOP point cloud of one sample of a nuScenes-format dataset, in the ego frame.

    Args:
        dataroot: Dataset root (holds ``<version>/`` and ``samples/``).
        version: Table folder, e.g. ``"v1.0-mini"``.
        sample_token: Sample to load; None: the first sample of the first scene (as
            :func:`load_sample`).
        sweeps: 1 = the keyframe sweep; k > 1 adds up to k - 1 earlier sweeps,
            motion-compensated (see :func:`load_lidar_from`).
        min_distance: Drop points within this square half-size of the sensor (devkit
            ``remove_close``); default 0 keeps every point.

    Returns:
        :class:`bevviz.lidar.LidarScan` (points (N, 4) float32 in the ego frame at the
        keyframe time, ring, sweep, origin, timestamp, per-camera exposure motion).

    Raises:
        InputError: naming ``dataroot``, ``version``, ``sample_token``, ``sweeps``,
            ``min_distance`` or the lidar file, and the value.

    Convention:
        See :func:`load_lidar_from` and :mod:`bevviz.lidar`.
    """
    nusc = open_dataset(dataroot, version)
    if sample_token is None:
        sample_token = first_sample(nusc, "dataroot", str(dataroot))
    return load_lidar_from(nusc, sample_token, sweeps=sweeps, min_distance=min_distance)


def has_lidar(nusc, sample_token: str) -> bool:
    """Whether a sample has a LIDAR_TOP sweep (what :func:`load_lidar_from` and
    :func:`bevviz.io.nuscenes_boxes.load_boxes_from` need).

    Raises:
        InputError: naming ``sample_token`` when it is unknown.
    """
    return LIDAR_CHANNEL in sample_record(nusc, sample_token)["data"]
