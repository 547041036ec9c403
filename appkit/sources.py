"""Rig sources for the app: Streamlit caches around the use-case layer's loaders.

Every scene is loaded by :mod:`bevviz.session` (the loaders ``bevviz check`` and the audit
use too); this module only caches: dataset handles and loaded scenes with
``st.cache_resource`` (scenes are read-only: their image arrays are not writeable, and a
:class:`bevviz.lidar.LidarScan` is read-only itself), tables with ``st.cache_data``. Each
loader returns a :class:`bevviz.session.Scene` or raises the library's
:class:`bevviz.errors.InputError` (camera, field, value). Where the embedded samples are
is :mod:`bevviz.session.embedded`'s to say; the names below are its answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import streamlit as st

from bevviz.checks import MAX_RIG_JSON_BYTES
from bevviz.io.nuscenes import list_samples, list_scenes, open_dataset
from bevviz.session import Scene, embedded, loaders, uploads
from bevviz.session.embedded import REAL_NUSCENES_ATTRIBUTION
from bevviz.session.loaders import NUSCENES_VERSIONS
from bevviz.session.uploads import (
    MAX_IMAGE_BYTES,
    MAX_POINTCLOUD_BYTES,
    MAX_TOTAL_BYTES,
    check_upload_sizes,
    upload_digest,
    upload_limits_text,
)

__all__ = [
    "FRAME_FOLDER_FIELD", "MAX_IMAGE_BYTES", "MAX_POINTCLOUD_BYTES", "MAX_RIG_JSON_BYTES", "MAX_TOTAL_BYTES",
    "MORE_FOLDERS_FIELD", "NUSCENES_VERSIONS", "REAL_KITTI", "REAL_NUSCENES", "REAL_NUSCENES_ATTRIBUTION",
    "REAL_TRI", "REAL_TRI_DRIVE", "SAMPLE_NUSCENES", "SAMPLE_RIG", "Scene", "check_upload_sizes", "default_scene",
    "drive_scene", "embedded_scene_table", "frame_folder_scene", "is_drive", "nuscenes_samples", "nuscenes_scene",
    "nuscenes_scenes",
    "open_nuscenes", "rig_json_scene", "sample_available", "sample_texture", "synthetic_scene",
    "upload_digest", "upload_limits_text", "uploaded_scene",
]

#: The embedded samples (paths from :mod:`bevviz.session.embedded`, for the pages' pickers).
SAMPLE_RIG = embedded.sample_path("rig")
SAMPLE_NUSCENES = embedded.sample_path("nuscenes")
#: One real nuScenes keyframe (scene-0061) with its LiDAR sweep and boxes, in v1.0-mini format.
REAL_NUSCENES = embedded.sample_path("real-nuscenes")
#: Real frame folders: a TRI 6-camera rig (its car body in the side and rear images) and a KITTI
#: camera-LiDAR pair.
REAL_TRI = embedded.sample_path("real-tri")
REAL_KITTI = embedded.sample_path("real-kitti")
#: A drive: three consecutive TRI frames (``t0/``, ``t1/``, ``t2/``), judged together.
REAL_TRI_DRIVE = embedded.sample_path("real-tri-drive")


@st.cache_resource(show_spinner=False)
def sample_texture() -> tuple[np.ndarray, tuple[float, float], tuple[float, float]] | None:
    """The embedded sample's ground texture and its extent (:func:`bevviz.session.embedded.sample_texture`)."""
    return embedded.sample_texture()


@st.cache_resource(show_spinner=False, max_entries=4)
def rig_json_scene(path: str) -> Scene:
    """A JSON rig file with the images it names (:func:`bevviz.session.rig_json_scene`)."""
    return loaders.rig_json_scene(path, texture=sample_texture())


@st.cache_resource(show_spinner=False, max_entries=4)
def open_nuscenes(dataroot: str, version: str):
    """The nuscenes-devkit handle (cached per dataroot and version)."""
    return open_dataset(dataroot, version)


@st.cache_data(show_spinner=False, max_entries=16)
def nuscenes_scenes(dataroot: str, version: str) -> list:
    """Scenes of a dataset: list of :class:`bevviz.io.nuscenes.SceneInfo`."""
    return list_scenes(open_nuscenes(dataroot, version))


@st.cache_data(show_spinner=False, max_entries=4)
def embedded_scene_table(dataroot: str | None = None) -> list[dict]:
    """An embedded dataset's scenes (name, token, description, nbr_samples), read straight
    from its ``scene.json`` table (default: the synthetic dataset): listing them must not cost
    the seconds that opening the dataset with nuscenes-devkit takes, since the sidebar shows
    them on every first load. A dataset not shipped has no scenes; a damaged one is a bug of
    the package and raises."""
    root = Path(dataroot) if dataroot is not None else embedded.sample_path("nuscenes")
    try:
        text = (root / "v1.0-mini" / "scene.json").read_text()
    except FileNotFoundError:
        return []
    return [{k: r[k] for k in ("name", "token", "description", "nbr_samples")} for r in json.loads(text)]


@st.cache_data(show_spinner=False, max_entries=64)
def nuscenes_samples(dataroot: str, version: str, scene_token: str) -> list:
    """Key-frame samples of a scene: list of :class:`bevviz.io.nuscenes.SampleInfo`."""
    return list_samples(open_nuscenes(dataroot, version), scene_token)


@st.cache_resource(show_spinner=False, max_entries=6)
def nuscenes_scene(dataroot: str, version: str, sample_token: str, frames: int = 1) -> Scene:
    """One sample of a nuScenes-format dataset (:func:`bevviz.session.nuscenes_scene`): rig,
    images and, when the sample has a LIDAR_TOP sweep, the scan and the annotation boxes;
    with ``frames`` > 1 also the next samples of the scene for the doctor."""
    return loaders.nuscenes_scene(open_nuscenes(dataroot, version), dataroot, version, sample_token,
                                  texture=sample_texture(), frames=frames)


#: What the sidebar's frame-folder boxes are called in errors.
FRAME_FOLDER_FIELD = "Frame folder"
MORE_FOLDERS_FIELD = "More frame folders"


def frame_folder_scene(path: str, more: tuple[str, ...] = ()) -> Scene:
    """A frame folder, and further frame folders of the same rig whose LiDAR evidence the doctor
    adds up (:func:`bevviz.session.frame_folder_scene`, as ``bevviz check FOLDER [FOLDER ...]``);
    not cached: a user's folder may change between loads, and the sidebar loads once per request."""
    return loaders.frame_folder_scene(path, more=more, field=FRAME_FOLDER_FIELD, more_field=MORE_FOLDERS_FIELD)


def is_drive(path: str) -> bool:
    """Whether ``path`` is a drive: a folder whose subfolders are frame folders
    (:func:`bevviz.session.loaders.drive_frames`)."""
    return bool(loaders.drive_frames(Path(path).expanduser()))


def drive_scene(path: str) -> Scene:
    """A drive: a folder whose subfolders are frame folders of one rig, all judged together
    (:func:`bevviz.session.drive_scene`, as ``bevviz check DRIVE``); not cached, as
    :func:`frame_folder_scene`."""
    return loaders.drive_scene(path, field=FRAME_FOLDER_FIELD)


def uploaded_scene(json_name: str, json_bytes: bytes, images: Mapping[str, bytes],
                   lidar: tuple[str, bytes] | None = None, more_images: Sequence[tuple[str, bytes]] = ()) -> Scene:
    """A scene from uploaded bytes (:func:`bevviz.session.uploaded_scene`); not cached:
    the sidebar loads an upload once per request."""
    return uploads.uploaded_scene(json_name, json_bytes, images, lidar, more_images)


@st.cache_resource(show_spinner=False)
def synthetic_scene() -> Scene:
    """The nuScenes-like rig with rendered images, used when sample_data is missing."""
    return loaders.synthetic_scene()


def sample_available() -> bool:
    """Whether the embedded sample (sample_data/rig.json) is there."""
    return embedded.sample_path("rig").exists()


def default_scene() -> Scene:
    """The scene the app opens on: the embedded sample rig, else (sample_data missing) the
    synthetic fallback. An embedded sample that fails to load is a bug and raises."""
    if sample_available():
        return rig_json_scene(str(embedded.sample_path("rig")))
    return synthetic_scene()
