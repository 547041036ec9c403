"""Rig sources: the embedded samples, a nuScenes dataroot, an uploaded JSON rig with images.

Each loader returns a :class:`appkit.state.Scene` or raises ``ValueError`` with the
library's message (camera, field, value). Dataset handles and loaded scenes are cached with
``st.cache_resource`` (scenes are read-only: their image arrays are not writeable, and a
:class:`bevviz.lidar.LidarScan` is read-only itself). A nuScenes sample with a LIDAR_TOP
sweep carries its scan and annotation boxes; an uploaded JSON rig may come with a point
cloud. :func:`uploaded_scene` takes plain bytes, so it is testable without a browser.

What reading the user's images converted (greyscale, alpha, 16 bits, CMYK) is kept on the
scene as :attr:`appkit.state.Scene.warnings` (cached with it); the sidebar shows them. Size
limits come from :mod:`bevviz.limits`; the upload path adds the app's own, smaller bounds
on encoded images and point clouds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import streamlit as st

from appkit.state import Scene
from bevviz.calibration import GroundTruth
from bevviz.io.images import read_image
from bevviz.io.nuscenes import (
    ego_pose,
    has_lidar,
    list_samples,
    list_scenes,
    load_boxes_from,
    load_lidar_from,
    load_sample_from,
    open_dataset,
)
from bevviz.io.pointcloud import read_pointcloud
from bevviz.io.rig_json import RigImages, load_rig_file, load_rig_images, parse_rig
from bevviz.limits import (
    MAX_CAMERAS,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_LIDAR_POINTS,
    MAX_RIG_JSON_BYTES,
    MiB,
)
from bevviz.synthetic import ground_texture, nuscenes_like_rig, render

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = ROOT / "sample_data"
SAMPLE_RIG = SAMPLE_DIR / "rig.json"
SAMPLE_NUSCENES = SAMPLE_DIR / "nuscenes"
#: One real nuScenes keyframe (scene-0061) with its LiDAR sweep and boxes, in v1.0-mini format.
REAL_NUSCENES = SAMPLE_DIR / "real_nuscenes"
NUSCENES_VERSIONS = ("v1.0-mini", "v1.0-trainval", "v1.0-test")
#: What the sidebar shows while the real keyframe (or any data under it) is loaded: its
#: licence asks for the attribution (sample_data/real_nuscenes/README.md).
REAL_NUSCENES_ATTRIBUTION = ("Data: nuScenes (Motional), https://www.nuscenes.org, licensed CC BY-NC-SA 4.0 "
                             "(non-commercial use only).")

#: Limits on uploads (Streamlit's own server.maxUploadSize in .streamlit/config.toml caps
#: any single file first; these are checked again here so the message names the file). The
#: rig JSON's is the library's :data:`bevviz.limits.MAX_RIG_JSON_BYTES`; an encoded image
#: gets the app's 25 MiB, below the library's MAX_IMAGE_FILE_BYTES (a 32-bit BMP of the most
#: pixels): a camera photo is a few MB, and the app holds every upload in memory.
MAX_IMAGE_BYTES = 25 * MiB
#: A point cloud: room for MAX_LIDAR_POINTS points of a nuScenes .bin (20 bytes each).
MAX_POINTCLOUD_BYTES = 100 * MiB
MAX_TOTAL_BYTES = 200 * MiB


def upload_limits_text() -> str:
    """The upload limits in one line, for the sidebar (plain text, no user input)."""
    return (f"Limits: JSON {_size_text(MAX_RIG_JSON_BYTES)}, {MAX_CAMERAS} cameras; "
            f"{_size_text(MAX_IMAGE_BYTES)} and {MAX_IMAGE_SIDE:,} px a side ({MAX_IMAGE_PIXELS / MiB:.0f} Mpx) "
            f"per image; point cloud {_size_text(MAX_POINTCLOUD_BYTES)}, {MAX_LIDAR_POINTS:,} points.")


def _freeze(images: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, img in images.items():
        a = np.asarray(img)
        a.setflags(write=False)
        out[name] = a
    return out


def _loaded_images(images: RigImages) -> dict:
    """The Scene fields of what a loader read: ``images`` (read-only) and ``warnings``, the
    conversions made (read off before the arrays are frozen into a plain dict)."""
    warnings = tuple(images.warnings)
    return {"images": _freeze(images), "warnings": warnings}


# --------------------------------------------------------------------------------------
# Ground truth of the embedded sample
# --------------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def sample_texture() -> tuple[np.ndarray, tuple[float, float], tuple[float, float]] | None:
    """The embedded sample's ground texture (world frame) and its extent, or None."""
    meta_path = SAMPLE_DIR / "ground_texture.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    tex = read_image(SAMPLE_DIR / meta.get("image", "ground_texture.png"))
    tex.setflags(write=False)
    return tex, tuple(meta["x_range"]), tuple(meta["y_range"])


def _ground_truth(world_from_ego: np.ndarray | None = None) -> GroundTruth | None:
    tex = sample_texture()
    if tex is None:
        return None
    texture, xr, yr = tex
    return GroundTruth(texture, xr, yr, None if world_from_ego is None else np.asarray(world_from_ego))


# --------------------------------------------------------------------------------------
# JSON rig (file on disk)
# --------------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=4)
def rig_json_scene(path: str) -> Scene:
    """A JSON rig file with the images it names (relative to the file)."""
    p = Path(path)
    rig_file = load_rig_file(p)
    images = load_rig_images(rig_file, p.parent)
    is_sample = p.resolve() == SAMPLE_RIG.resolve()
    digest = hashlib.sha1(p.read_bytes()).hexdigest()[:12]
    label = "Embedded sample rig (sample_data/rig.json)" if is_sample else f"JSON rig {p.name}"
    return Scene(key=f"rigjson:{p.resolve()}:{digest}", label=label, rig=rig_file.rig, **_loaded_images(images),
                 ground_truth=_ground_truth() if is_sample else None,
                 image_files=dict(rig_file.image_files or {}))


# --------------------------------------------------------------------------------------
# nuScenes
# --------------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=4)
def open_nuscenes(dataroot: str, version: str):
    """The nuscenes-devkit handle (cached per dataroot and version)."""
    return open_dataset(dataroot, version)


@st.cache_data(show_spinner=False, max_entries=16)
def nuscenes_scenes(dataroot: str, version: str) -> list:
    """Scenes of a dataset: list of :class:`bevviz.io.nuscenes.SceneInfo`."""
    return list_scenes(open_nuscenes(dataroot, version))


@st.cache_data(show_spinner=False, max_entries=4)
def embedded_scene_table(dataroot: str = str(SAMPLE_NUSCENES)) -> list[dict]:
    """An embedded dataset's scenes (name, token, description, nbr_samples), read straight
    from its ``scene.json`` table: listing them must not cost the seconds that opening the
    dataset with nuscenes-devkit takes, since the sidebar shows them on every first load."""
    path = Path(dataroot) / "v1.0-mini" / "scene.json"
    try:
        rows = json.loads(path.read_text())
        return [{k: r[k] for k in ("name", "token", "description", "nbr_samples")} for r in rows]
    except (OSError, ValueError, KeyError, TypeError):
        return []


@st.cache_data(show_spinner=False, max_entries=64)
def nuscenes_samples(dataroot: str, version: str, scene_token: str) -> list:
    """Key-frame samples of a scene: list of :class:`bevviz.io.nuscenes.SampleInfo`."""
    return list_samples(open_nuscenes(dataroot, version), scene_token)


def _miscalibration_note(dataroot: str, scene_name: str) -> tuple[str, ...]:
    path = Path(dataroot) / "miscalibration.json"
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return ()
    if rec.get("scene") != scene_name:
        return ()
    err = rec.get("rotation_error", {})
    return (f"Known miscalibration: {rec.get('camera')} stored with a {err.get('degrees')} deg rotation "
            f"error ({err.get('description', '')}); its images use the true calibration.",)


def _lidar_and_boxes(nusc, sample_token: str) -> tuple[object, tuple, tuple[str, ...]]:
    """(scan or None, boxes, notes) of a sample: a sample without LIDAR_TOP has neither; a
    scan that cannot be read leaves the cameras loaded and says why in a note."""
    if not has_lidar(nusc, sample_token):
        return None, (), ()
    try:
        return load_lidar_from(nusc, sample_token), tuple(load_boxes_from(nusc, sample_token)), ()
    except ValueError as e:
        return None, (), (f"LiDAR and boxes not loaded: {e}",)


def _attribution(dataroot: str) -> str:
    root, real = Path(dataroot).resolve(), REAL_NUSCENES.resolve()
    return REAL_NUSCENES_ATTRIBUTION if root == real or real in root.parents else ""


@st.cache_resource(show_spinner=False, max_entries=6)
def nuscenes_scene(dataroot: str, version: str, sample_token: str, scene_name: str = "",
                   sample_index: int = 0) -> Scene:
    """One sample of a nuScenes-format dataset: rig from calibrated_sensor, camera images,
    and, when the sample has a LIDAR_TOP sweep, the scan and the annotation boxes."""
    nusc = open_nuscenes(dataroot, version)
    rig, images = load_sample_from(nusc, sample_token)
    scan, boxes, lidar_notes = _lidar_and_boxes(nusc, sample_token)
    embedded = Path(dataroot).resolve() == SAMPLE_NUSCENES.resolve()
    gt = _ground_truth(ego_pose(nusc, sample_token)) if embedded else None
    real = Path(dataroot).resolve() == REAL_NUSCENES.resolve()
    where = "embedded sample" if embedded else "embedded real keyframe" if real else dataroot
    label = f"nuScenes {scene_name or '?'} sample {sample_index} ({where})"
    key = f"nuscenes:{Path(dataroot).resolve()}:{version}:{sample_token}"
    return Scene(key=key, label=label, rig=rig, **_loaded_images(images), ground_truth=gt,
                 notes=_miscalibration_note(dataroot, scene_name) + lidar_notes, lidar=scan, boxes=boxes,
                 lidar_key=key if scan is not None else "", attribution=_attribution(dataroot))


# --------------------------------------------------------------------------------------
# Uploads
# --------------------------------------------------------------------------------------


def _size_text(n: int) -> str:
    return f"{n / MiB:.1f} MB" if n >= MiB / 10 else f"{n / 1024:.0f} kB"


def check_upload_sizes(json_name: str, json_bytes: bytes, images: Mapping[str, bytes],
                       lidar: tuple[str, bytes] | None = None) -> None:
    """Refuse oversized uploads with a message naming the file.

    Raises:
        ValueError: the JSON is larger than :data:`bevviz.limits.MAX_RIG_JSON_BYTES`, an
            image larger than ``MAX_IMAGE_BYTES``, the point cloud larger than
            ``MAX_POINTCLOUD_BYTES``, or everything together larger than ``MAX_TOTAL_BYTES``.
    """
    if lidar is not None and len(lidar[1]) > MAX_POINTCLOUD_BYTES:
        raise ValueError(f"field 'upload': point cloud {lidar[0]} is {_size_text(len(lidar[1]))}, more than the "
                         f"{_size_text(MAX_POINTCLOUD_BYTES)} limit (got {len(lidar[1])} bytes)")
    if len(json_bytes) > MAX_RIG_JSON_BYTES:
        raise ValueError(f"field 'upload': rig file {json_name} is {_size_text(len(json_bytes))}, more than "
                         f"the {_size_text(MAX_RIG_JSON_BYTES)} limit for a JSON rig (got {len(json_bytes)} bytes)")
    for name, data in images.items():
        if len(data) > MAX_IMAGE_BYTES:
            raise ValueError(f"field 'upload': image {name} is {_size_text(len(data))}, more than the "
                             f"{_size_text(MAX_IMAGE_BYTES)} limit per image (got {len(data)} bytes)")
    total = len(json_bytes) + sum(len(d) for d in images.values()) + (len(lidar[1]) if lidar else 0)
    if total > MAX_TOTAL_BYTES:
        raise ValueError(f"field 'upload': the files add up to {_size_text(total)}, more than the "
                         f"{_size_text(MAX_TOTAL_BYTES)} limit (got {total} bytes)")


def upload_digest(json_bytes: bytes, images: Mapping[str, bytes], lidar: tuple[str, bytes] | None = None) -> str:
    """Content hash of an upload (the JSON, every image, the point cloud), for request and cache keys."""
    h = hashlib.sha1(json_bytes)
    for name in sorted(images):
        h.update(name.encode() + hashlib.sha1(images[name]).digest())
    if lidar is not None:
        h.update(b"lidar:" + lidar[0].encode() + hashlib.sha1(lidar[1]).digest())
    return h.hexdigest()[:16]


def uploaded_scene(json_name: str, json_bytes: bytes, images: Mapping[str, bytes],
                   lidar: tuple[str, bytes] | None = None) -> Scene:
    """A scene from an uploaded JSON rig, uploaded image files and an optional point cloud.

    Args:
        json_name: File name of the rig JSON (for messages).
        json_bytes: Its contents.
        images: Uploaded image file name -> bytes; matched to cameras by the file name the
            JSON names, by file stem, or by camera name.
        lidar: Optional ``(file name, bytes)`` of a point cloud in the ego frame: a nuScenes
            ``.bin`` (5 x float32 per point) or a ``.npy`` (N, 3) / (N, 4) float array (read
            without unpickling, :func:`bevviz.io.pointcloud.read_pointcloud`).

    Returns:
        The scene (with ``lidar`` when a point cloud was given; no boxes, no ego motion), its
        ``warnings`` naming each image that was converted to RGB uint8.

    Raises:
        ValueError: oversized files, anything :mod:`bevviz.io.rig_json` rejects (the
            message names the camera, the field and the value), or a point cloud
            :func:`~bevviz.io.pointcloud.read_pointcloud` rejects (it names the file and the
            field).
    """
    check_upload_sizes(json_name, json_bytes, images, lidar)
    rig_file = parse_rig(bytes(json_bytes), source=json_name)
    loaded = load_rig_images(rig_file, None, uploaded=dict(images))
    scan = None if lidar is None else read_pointcloud(bytes(lidar[1]), name=lidar[0])
    key = f"upload:{upload_digest(json_bytes, images, lidar)}"
    label = f"Uploaded rig {json_name}" + (f" with point cloud {lidar[0]}" if lidar is not None else "")
    return Scene(key=key, label=label, rig=rig_file.rig, **_loaded_images(loaded),
                 image_files=dict(rig_file.image_files or {}), lidar=scan, lidar_key=key if scan is not None else "")


# --------------------------------------------------------------------------------------
# Fallback and default
# --------------------------------------------------------------------------------------

SYNTHETIC_SCALE = 0.4  # 640 x 360: rendering full-size images takes half a minute


@st.cache_resource(show_spinner=False)
def synthetic_scene() -> Scene:
    """The nuScenes-like rig with rendered images (used when sample_data is missing).

    Its ground truth is the procedural texture the images were rendered from (the same
    one sample_data/ground_texture.png stores), at the identity ego pose.
    """
    rig = nuscenes_like_rig().resized(SYNTHETIC_SCALE)
    images = render(rig, supersample=1)
    texture, grid = ground_texture()
    w, h = rig[0].size
    return Scene(key="synthetic", label=f"Synthetic nuScenes-like rig ({w} x {h}, rendered: sample_data is missing)",
                 rig=rig, images=_freeze(images),
                 ground_truth=GroundTruth(texture, tuple(grid.x_range), tuple(grid.y_range), None))


def sample_available() -> bool:
    """Whether the embedded sample (sample_data/rig.json) is there."""
    return SAMPLE_RIG.exists()


def default_scene() -> Scene:
    """The scene the app opens on: the embedded sample rig, else the synthetic fallback."""
    if sample_available():
        try:
            return rig_json_scene(str(SAMPLE_RIG))
        except (ValueError, ImportError):
            pass
    return synthetic_scene()
