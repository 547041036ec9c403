"""A rig given as bytes: a JSON rig, image files and an optional point cloud (the app's upload).

:func:`uploaded_scene` takes plain bytes, so it is testable without a browser. The limits
here are the upload's own, on top of the library's (:mod:`bevviz.checks`): the rig JSON's
is :data:`bevviz.checks.MAX_RIG_JSON_BYTES`; an encoded image gets 25 MiB, below the
library's MAX_IMAGE_FILE_BYTES (a 32-bit BMP of the most pixels), since a camera photo is a
few MB and an upload is held in memory whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from bevviz.checks import (
    MAX_CAMERAS,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_LIDAR_POINTS,
    MAX_RIG_JSON_BYTES,
    MiB,
    field_error,
)
from bevviz.io.pointcloud import read_pointcloud
from bevviz.io.rig_json import load_rig_images, parse_rig
from bevviz.session.loaders import loaded_images
from bevviz.session.scene import Scene

__all__ = [
    "MAX_IMAGE_BYTES", "MAX_POINTCLOUD_BYTES", "MAX_TOTAL_BYTES", "check_upload_sizes", "upload_digest",
    "upload_limits_text", "uploaded_scene",
]

#: Largest encoded image of an upload.
MAX_IMAGE_BYTES = 25 * MiB
#: A point cloud: room for MAX_LIDAR_POINTS points of a nuScenes .bin (20 bytes each).
MAX_POINTCLOUD_BYTES = 100 * MiB
#: Everything uploaded at once.
MAX_TOTAL_BYTES = 200 * MiB


def size_text(n: int) -> str:
    """A byte count as ``"2.0 MB"`` (from a tenth of a MiB) or ``"300 kB"``."""
    return f"{n / MiB:.1f} MB" if n >= MiB / 10 else f"{n / 1024:.0f} kB"


def upload_limits_text() -> str:
    """The upload limits in one line (plain text, no user input)."""
    return (f"Limits: JSON {size_text(MAX_RIG_JSON_BYTES)}, {MAX_CAMERAS} cameras; "
            f"{size_text(MAX_IMAGE_BYTES)} and {MAX_IMAGE_SIDE:,} px a side ({MAX_IMAGE_PIXELS / MiB:.0f} Mpx) "
            f"per image; point cloud {size_text(MAX_POINTCLOUD_BYTES)}, {MAX_LIDAR_POINTS:,} points.")


def check_upload_sizes(json_name: str, json_bytes: bytes, images: Mapping[str, bytes],
                       lidar: tuple[str, bytes] | None = None) -> None:
    """Refuse oversized uploads with a message naming the file.

    Raises:
        InputError: field ``upload``: the JSON is larger than
            :data:`bevviz.checks.MAX_RIG_JSON_BYTES`, an image larger than
            :data:`MAX_IMAGE_BYTES`, the point cloud larger than :data:`MAX_POINTCLOUD_BYTES`,
            or everything together larger than :data:`MAX_TOTAL_BYTES`.
    """
    if lidar is not None and len(lidar[1]) > MAX_POINTCLOUD_BYTES:
        raise field_error("upload", f"{len(lidar[1])} bytes", f"point cloud {lidar[0]} is "
                          f"{size_text(len(lidar[1]))}, more than the {size_text(MAX_POINTCLOUD_BYTES)} limit")
    if len(json_bytes) > MAX_RIG_JSON_BYTES:
        raise field_error("upload", f"{len(json_bytes)} bytes", f"rig file {json_name} is "
                          f"{size_text(len(json_bytes))}, more than the {size_text(MAX_RIG_JSON_BYTES)} limit "
                          "for a JSON rig")
    for name, data in images.items():
        if len(data) > MAX_IMAGE_BYTES:
            raise field_error("upload", f"{len(data)} bytes", f"image {name} is {size_text(len(data))}, more "
                              f"than the {size_text(MAX_IMAGE_BYTES)} limit per image")
    total = len(json_bytes) + sum(len(d) for d in images.values()) + (len(lidar[1]) if lidar else 0)
    if total > MAX_TOTAL_BYTES:
        raise field_error("upload", f"{total} bytes", f"the files add up to {size_text(total)}, more than the "
                          f"{size_text(MAX_TOTAL_BYTES)} limit")


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
        InputError: oversized files, anything :mod:`bevviz.io.rig_json` rejects (camera,
            field, value), or a point cloud :func:`~bevviz.io.pointcloud.read_pointcloud`
            rejects (file and field).
    """
    check_upload_sizes(json_name, json_bytes, images, lidar)
    rig_file = parse_rig(bytes(json_bytes), source=json_name)
    loaded = load_rig_images(rig_file, None, uploaded=dict(images))
    scan = None if lidar is None else read_pointcloud(bytes(lidar[1]), name=lidar[0])
    key = f"upload:{upload_digest(json_bytes, images, lidar)}"
    label = f"Uploaded rig {json_name}" + (f" with point cloud {lidar[0]}" if lidar is not None else "")
    return Scene(key=key, label=label, rig=rig_file.rig, **loaded_images(loaded),
                 raw_cameras=tuple(rig_file.raw_cameras), convention=rig_file.convention,
                 image_files={k: v for k, v in rig_file.image_files.items() if v}, lidar=scan,
                 lidar_key=key if scan is not None else "",
                 source={"kind": "upload", "path": json_name, "name": json_name})
