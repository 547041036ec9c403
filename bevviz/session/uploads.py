"""A rig given as bytes: a JSON rig, image files and an optional point cloud (the app's upload).

:func:`uploaded_scene` takes plain bytes, so it is testable without a browser. The limits
here are the upload's own, on top of the library's (:mod:`bevviz.checks`): the rig JSON's
is :data:`bevviz.checks.MAX_RIG_JSON_BYTES`; an encoded image gets 25 MiB, below the
library's MAX_IMAGE_FILE_BYTES (a 32-bit BMP of the most pixels), since a camera photo is a
few MB and an upload is held in memory whole. Further image sets of the same rig (other
moments of a drive, for the seams to average over) come as one ``.zip`` each
(:func:`read_image_set`).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from bevviz.checks import (
    MAX_CAMERAS,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_LIDAR_POINTS,
    MAX_RIG_JSON_BYTES,
    MiB,
    field_error,
)
from bevviz.errors import InputError
from bevviz.io.pointcloud import read_pointcloud
from bevviz.io.rig_json import RigFile, load_rig_images, parse_rig
from bevviz.session.loaders import MAX_FRAMES, loaded_images
from bevviz.session.scene import Scene, SceneFrame

__all__ = [
    "MAX_IMAGE_BYTES", "MAX_POINTCLOUD_BYTES", "MAX_TOTAL_BYTES", "MORE_IMAGES_FIELD", "UPLOAD_IMAGE_EXTENSIONS",
    "UPLOAD_SCAN_EXTENSIONS", "ImageSet", "check_upload_sizes", "read_image_set", "upload_digest",
    "upload_limits_text", "uploaded_scene",
]

#: The field a further image set's errors name (the app's uploader of that name).
MORE_IMAGES_FIELD = "more image sets"
#: Image files an upload takes (in a further set's .zip, other files are passed over) ...
UPLOAD_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
#: ... and point clouds (:func:`bevviz.io.pointcloud.read_pointcloud`).
UPLOAD_SCAN_EXTENSIONS = (".bin", ".npy")

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


@dataclass(frozen=True)
class ImageSet:
    """One further image set as uploaded (a ``.zip``).

    Attributes:
        images: Image file name -> its bytes.
        scan: ``(file name, bytes)`` of the set's point cloud (``.npy`` or ``.bin``), or None.
    """

    images: dict[str, bytes]
    scan: tuple[str, bytes] | None = None


def read_image_set(name: str, data: bytes) -> ImageSet:
    """One further image set uploaded as a ``.zip``: its images and, optionally, its point cloud.

    Folders inside the archive are ignored (each image is matched by its file name, as an
    uploaded image is), and so are other files and the hidden files archivers add
    (``__MACOSX/``, ``._*``). Sizes are checked from the archive's directory before anything
    is read.

    Raises:
        InputError: field ``more image sets`` naming the archive: not a zip, no image in it,
            two images of one file name or two point clouds, an image over
            :data:`MAX_IMAGE_BYTES`, a point cloud over :data:`MAX_POINTCLOUD_BYTES` or all
            of it over :data:`MAX_TOTAL_BYTES` unpacked.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    except zipfile.BadZipFile:
        raise field_error(MORE_IMAGES_FIELD, name, "is not a .zip archive (one .zip per further image set)") from None
    out: dict[str, bytes] = {}
    scan: tuple[str, bytes] | None = None
    total = 0
    with archive:
        for info in archive.infolist():
            path = PurePosixPath(info.filename)
            suffix = path.suffix.lower()
            if (info.is_dir() or path.parts[0] == "__MACOSX" or path.name.startswith(".")
                    or suffix not in UPLOAD_IMAGE_EXTENSIONS + UPLOAD_SCAN_EXTENSIONS):
                continue
            total += info.file_size
            if total > MAX_TOTAL_BYTES:
                raise field_error(MORE_IMAGES_FIELD, name,
                                  f"unpacks to more than the {size_text(MAX_TOTAL_BYTES)} limit")
            if suffix in UPLOAD_SCAN_EXTENSIONS:
                if scan is not None:
                    raise field_error(MORE_IMAGES_FIELD, f"{name}: {info.filename}",
                                      f"a second point cloud (the first: {scan[0]}): one scan per set")
                if info.file_size > MAX_POINTCLOUD_BYTES:
                    raise field_error(MORE_IMAGES_FIELD, f"{name}: {info.filename}",
                                      f"unpacks to {size_text(info.file_size)}, more than the "
                                      f"{size_text(MAX_POINTCLOUD_BYTES)} limit per point cloud")
                scan = (path.name, archive.read(info))
                continue
            if info.file_size > MAX_IMAGE_BYTES:
                raise field_error(MORE_IMAGES_FIELD, f"{name}: {info.filename}",
                                  f"unpacks to {size_text(info.file_size)}, more than the "
                                  f"{size_text(MAX_IMAGE_BYTES)} limit per image")
            if path.name in out:
                raise field_error(MORE_IMAGES_FIELD, f"{name}: {info.filename}",
                                  f"a second image named {path.name}: one image per camera in a set")
            out[path.name] = archive.read(info)
    if not out:
        raise field_error(MORE_IMAGES_FIELD, name, f"holds no image ({', '.join(UPLOAD_IMAGE_EXTENSIONS)})")
    return ImageSet(out, scan)


def uploaded_scene(json_name: str, json_bytes: bytes, images: Mapping[str, bytes],
                   lidar: tuple[str, bytes] | None = None, more_images: Sequence[tuple[str, bytes]] = ()) -> Scene:
    """A scene from an uploaded JSON rig, uploaded image files and an optional point cloud.

    Args:
        json_name: File name of the rig JSON (for messages).
        json_bytes: Its contents.
        images: Uploaded image file name -> bytes; matched to cameras by the file name the
            JSON names, by file stem, or by camera name.
        lidar: Optional ``(file name, bytes)`` of a point cloud in the ego frame: a nuScenes
            ``.bin`` (5 x float32 per point) or a ``.npy`` (N, 3) / (N, 4) float array (read
            without unpickling, :func:`bevviz.io.pointcloud.read_pointcloud`).
        more_images: Further image sets of the rig, ``(file name, bytes)`` of one ``.zip``
            each (:func:`read_image_set`), every camera's image in each and, when ``lidar``
            is given, the set's own point cloud: the scene's :attr:`Scene.more_frames`,
            which the seams average over and the LiDAR witness adds up (as ``bevviz check
            rig.json --images DIR --scan FILE --images DIR2 --scan FILE2``).

    Returns:
        The scene (with ``lidar`` when a point cloud was given; no boxes, no ego motion), its
        ``warnings`` naming each image that was converted to RGB uint8.

    Raises:
        InputError: oversized files, anything :mod:`bevviz.io.rig_json` rejects (camera,
            field, value), a point cloud :func:`~bevviz.io.pointcloud.read_pointcloud`
            rejects (file and field), or a further image set that is no zip of images,
            lacks a camera's image or holds one of another size (field ``more image sets``,
            naming the archive; more than ``MAX_FRAMES - 1`` of them too).
    """
    check_upload_sizes(json_name, json_bytes, images, lidar)
    rig_file = parse_rig(bytes(json_bytes), source=json_name)
    loaded = load_rig_images(rig_file, None, uploaded=dict(images))
    scan = None if lidar is None else read_pointcloud(bytes(lidar[1]), name=lidar[0])
    more = _more_frames(rig_file, more_images, with_scans=scan is not None)
    key = f"upload:{upload_digest(json_bytes, images, lidar)}"
    for name, data in more_images:
        key += f":{hashlib.sha1(name.encode() + bytes(data)).hexdigest()[:12]}"
    label = f"Uploaded rig {json_name}" + (f" with point cloud {lidar[0]}" if lidar is not None else "")
    extra: dict = {}
    if more:
        label += (f" + {len(more)} more frame{'s' if len(more) > 1 else ''} for the LiDAR witness" if scan is not None
                  else f" + {len(more)} more image set{'s' if len(more) > 1 else ''} for the seams")
        extra = {"frames": 1 + len(more), "more": [name for name, _ in more_images]}
    return Scene(key=key, label=label, rig=rig_file.rig, **loaded_images(loaded),
                 raw_cameras=tuple(rig_file.raw_cameras), convention=rig_file.convention,
                 image_files={k: v for k, v in rig_file.image_files.items() if v}, lidar=scan,
                 lidar_key=key if scan is not None else "", more_frames=more,
                 source={"kind": "upload", "path": json_name, "name": json_name, **extra})


def _more_frames(rig_file: RigFile, more_images: Sequence[tuple[str, bytes]], with_scans: bool
                 ) -> tuple[SceneFrame, ...]:
    """Each further image set (:func:`read_image_set`) with every camera's image, checked
    as the first set's (sizes against the calibration), and with its point cloud exactly
    when the first set has one (``with_scans``)."""
    if len(more_images) > MAX_FRAMES - 1:
        raise field_error(MORE_IMAGES_FIELD, f"{len(more_images)} archives",
                          f"at most {MAX_FRAMES - 1} further image sets (the doctor adds up {MAX_FRAMES} frames)")
    out = []
    for name, data in more_images:
        found = read_image_set(name, data)
        if with_scans and found.scan is None:
            raise field_error(MORE_IMAGES_FIELD, name, "holds no point cloud (.npy or .bin): the rig's upload has "
                              "one, so each further set needs its own")
        if not with_scans and found.scan is not None:
            raise field_error(MORE_IMAGES_FIELD, name, f"holds a point cloud ({found.scan[0]}) but the rig's upload "
                              "has none: upload the first frame's point cloud too, or leave the sets' out")
        try:
            read = load_rig_images(rig_file, None, uploaded=found.images, require_all=True)
            scan = None if found.scan is None else read_pointcloud(found.scan[1], name=found.scan[0])
        except InputError as e:
            raise InputError(f"field {MORE_IMAGES_FIELD!r} ({name!r}): {e}", MORE_IMAGES_FIELD, name) from e
        out.append(SceneFrame(f"images {name}", loaded_images(read)["images"], scan))
    return tuple(out)
