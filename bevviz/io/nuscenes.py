"""Load rigs and images from a nuScenes-format dataset through nuscenes-devkit.

The devkit handle is opened once (:func:`open_dataset`, which an app caches with
``st.cache_resource``); :func:`list_scenes`, :func:`list_samples` and
:func:`load_sample_from` then work on it without reloading the tables.
:func:`load_sample` is the one-call form of the public API.

Convention:
    nuScenes ``calibrated_sensor`` stores sensor -> ego (``ego_from_cam``) with a w, x, y, z
    quaternion, in OpenCV RDF camera axes; ``camera_intrinsic`` is K (3, 3). This module
    converts at the boundary with ``Rig.from_raw(raw, Convention("sensor_to_ego", "wxyz",
    "RDF"))``, so the returned cameras hold ``cam_from_ego``. ``ego_pose`` stores ego ->
    global (:func:`ego_pose` returns it as ``global_from_ego``). Images are RGB uint8.
"""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bevviz.camera import NUSCENES_CAMERAS, Rig
from bevviz.rotations import make_transform, quaternion_to_matrix
from bevviz.shapes import field_error
from bevviz.storage import Convention, RawCamera

#: How nuScenes stores calibration.
NUSCENES_CONVENTION = Convention("sensor_to_ego", "wxyz", "RDF")


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


def _read_image(path: str, camera: str) -> np.ndarray:
    """Read an image file as RGB uint8 (H, W, 3) with OpenCV (via bevviz.io.images)."""
    try:
        from bevviz.io.images import read_image
    except ImportError:  # the shared image reader is not there: plain OpenCV
        read_image = None
    if read_image is not None:
        return read_image(path, camera=camera)
    import cv2

    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise field_error("image", path, "could not be read as an image", camera)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def open_dataset(dataroot: str | os.PathLike, version: str = "v1.0-mini"):
    """Open a nuScenes-format dataset with nuscenes-devkit.

    Args:
        dataroot: Folder holding ``<version>/`` (the tables) and the sensor files.
        version: Table folder name, e.g. ``"v1.0-mini"``.

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
        from nuscenes.nuscenes import NuScenes
    except ImportError as exc:  # pragma: no cover - the devkit is a hard dependency
        raise field_error("dataroot", str(dataroot), f"nuscenes-devkit is not installed ({exc})") from exc
    try:
        with redirect_stdout(io.StringIO()):
            return NuScenes(version=version, dataroot=str(root), verbose=False)
    except FileNotFoundError as exc:
        raise field_error("dataroot", str(dataroot), f"a table or file is missing: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise field_error("dataroot", str(dataroot), f"a table in {version} is not valid JSON: {exc}") from exc
    except (AssertionError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise field_error("dataroot", str(dataroot),
                          f"tables in {version} are broken or incomplete ({type(exc).__name__}: {exc})") from exc


def list_scenes(nusc) -> list[SceneInfo]:
    """Scenes of an open dataset, in table order.

    Args:
        nusc: Handle from :func:`open_dataset`.

    Returns:
        One :class:`SceneInfo` per scene.
    """
    return [SceneInfo(s["name"], s["token"], s.get("description", ""), int(s["nbr_samples"]))
            for s in nusc.scene]


def _sample(nusc, sample_token: str) -> dict:
    try:
        return nusc.get("sample", sample_token)
    except (KeyError, TypeError):
        raise field_error("sample_token", sample_token, "no such sample in the dataset") from None


def _camera_channels(nusc, sample: dict) -> list[str]:
    cams = [ch for ch, sd in sample["data"].items()
            if nusc.get("sample_data", sd).get("sensor_modality") == "camera"]
    ring = [c for c in NUSCENES_CAMERAS if c in cams]
    return ring + sorted(c for c in cams if c not in NUSCENES_CAMERAS)


def list_samples(nusc, scene_token: str) -> list[SampleInfo]:
    """Key-frame samples of a scene, in time order (following ``next`` links).

    Args:
        nusc: Handle from :func:`open_dataset`.
        scene_token: Scene token.

    Returns:
        One :class:`SampleInfo` per sample.

    Raises:
        ValueError: naming ``scene_token`` if it is unknown.
    """
    try:
        scene = nusc.get("scene", scene_token)
    except (KeyError, TypeError):
        raise field_error("scene_token", scene_token, "no such scene in the dataset") from None
    out, token = [], scene["first_sample_token"]
    while token:
        s = _sample(nusc, token)
        out.append(SampleInfo(token, len(out), int(s["timestamp"]), tuple(_camera_channels(nusc, s))))
        token = s["next"]
    return out


def ego_pose(nusc, sample_token: str, channel: str = "CAM_FRONT") -> np.ndarray:
    """The ego pose of a sample as ``global_from_ego``, shape (4, 4).

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.
        channel: Sensor whose sample_data gives the pose (nuScenes stores one per sensor
            reading); falls back to the first camera present.
    """
    s = _sample(nusc, sample_token)
    chans = _camera_channels(nusc, s)
    if channel not in s["data"]:
        if not chans:
            raise field_error("sample_token", sample_token, "sample has no camera data")
        channel = chans[0]
    pose = nusc.get("ego_pose", nusc.get("sample_data", s["data"][channel])["ego_pose_token"])
    return make_transform(quaternion_to_matrix(pose["rotation"], "wxyz", "ego_pose.rotation"),
                          np.asarray(pose["translation"], float))


def load_sample_from(nusc, sample_token: str, with_images: bool = True) -> tuple[Rig, dict[str, np.ndarray]]:
    """Rig and camera images of one sample of an open dataset.

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.
        with_images: Read the image files (else the dict is empty).

    Returns:
        ``(rig, images)``: cameras in nuScenes ring order (those present; other camera
        channels follow, sorted); images: camera name -> RGB uint8 (H, W, 3).

    Raises:
        ValueError: naming ``sample_token`` (unknown, or without cameras) or ``image``
            (missing file, size not the one recorded).

    Convention:
        See the module docstring: stored sensor -> ego (wxyz, RDF) becomes cam_from_ego.
    """
    s = _sample(nusc, sample_token)
    channels = _camera_channels(nusc, s)
    if not channels:
        raise field_error("sample_token", sample_token, "sample has no camera data")
    raws, images = [], {}
    for ch in channels:
        sd = nusc.get("sample_data", s["data"][ch])
        cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
        width, height = int(sd.get("width") or 0), int(sd.get("height") or 0)
        if with_images:
            path = os.path.join(nusc.dataroot, sd["filename"])
            if not os.path.isfile(path):
                raise field_error("image", path, "file listed in sample_data does not exist", ch)
            img = _read_image(path, ch)
            if width and height and img.shape[:2] != (height, width):
                raise field_error("image", img.shape, f"sample_data records {width} x {height} (W x H)", ch)
            height, width = img.shape[:2]
            images[ch] = img
        raws.append(RawCamera(ch, np.asarray(cs["camera_intrinsic"], float), np.asarray(cs["rotation"], float),
                              np.asarray(cs["translation"], float), width, height))
    return Rig.from_raw(raws, NUSCENES_CONVENTION), images


def load_sample(dataroot: str | os.PathLike, version: str = "v1.0-mini",
                sample_token: str | None = None) -> tuple[Rig, dict[str, np.ndarray]]:
    """Rig and images of one sample of a nuScenes-format dataset.

    Args:
        dataroot: Dataset root (holds ``<version>/`` and ``samples/``).
        version: Table folder, e.g. ``"v1.0-mini"``.
        sample_token: Sample to load; None: the first sample of the first scene.

    Returns:
        ``(rig, images)``: the rig (cameras in nuScenes ring order, ``cam_from_ego``) and
        camera name -> RGB uint8 image (H, W, 3).

    Raises:
        ValueError: naming ``dataroot``, ``version`` or ``sample_token`` and its value.
    """
    nusc = open_dataset(dataroot, version)
    if sample_token is None:
        if not nusc.scene:
            raise field_error("dataroot", str(dataroot), "dataset has no scenes")
        sample_token = nusc.scene[0]["first_sample_token"]
    return load_sample_from(nusc, sample_token)
