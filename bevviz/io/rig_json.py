"""bevviz's JSON rig format: read, validate, write.

Format (version 1)::

    {"format": "bevviz-rig", "version": 1,
     "convention": {"extrinsic": "sensor_to_ego", "quaternion": "wxyz", "camera_axes": "RDF"},
     "cameras": [{"name": "CAM_FRONT", "K": [[fx, 0, cx], [0, fy, cy], [0, 0, 1]],
                  "rotation": [w, x, y, z],  # or a 3x3 matrix
                  "translation": [x, y, z], "width": 1600, "height": 900,
                  "image": "images/CAM_FRONT.jpg",
                  "ignore": [[[0, 800], [1600, 800], [1600, 899], [0, 899]]]}]}

``format`` and ``version`` may be left out; when present they must be ``"bevviz-rig"`` and
``1``. The ``convention`` block is optional and so is each of its keys (default nuScenes:
``sensor_to_ego``, ``wxyz``, ``RDF``). ``image`` is optional (a path relative to the JSON
file, or null; it must resolve inside the JSON file's folder). ``ignore`` is optional: polygons
of (u, v) pixels of the calibrated image that do not show the world (the car's own body); the
Calibration Doctor uses no LiDAR point that projects inside them. Unknown keys are rejected so
that a typo (``"translaton"``) or an unsupported field (``"distortion"``) cannot be silently
ignored.

Limits (:mod:`bevviz.checks`, checked before anything of their size is built): the text is
at most ``MAX_RIG_JSON_BYTES`` and nests at most ``MAX_JSON_DEPTH`` deep (checked on the
text, before the decoder recurses), at most ``MAX_CAMERAS`` cameras, widths and heights at
most ``MAX_IMAGE_SIDE`` (compared as integers), quaternions of norm 1 within
``QUATERNION_NORM_TOL``, camera names by the rule of :func:`bevviz.checks.check_camera_name`.

Every error is a ``ValueError`` that starts with the source (file name) and names the camera,
the field and the value, e.g. ``rig.json: camera CAM_FRONT: field 'K': fx and fy must be > 0
(got ...)``. Nothing is returned unless the whole file is valid.

Convention:
    Stored calibration is converted to bevviz's frames (``cam_from_ego``, RDF camera axes)
    by :func:`bevviz.camera.camera_from_raw` with the file's convention. :func:`save_rig`
    writes nuScenes' convention: ``ego_from_cam`` (sensor_to_ego), quaternion (w, x, y, z), RDF.
    See docs/conventions.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from bevviz.camera import Camera, Rig, raw_from_camera
from bevviz.checks import (
    MAX_CAMERAS,
    MAX_RIG_JSON_BYTES,
    check_at_most,
    check_camera_name,
    check_json_like,
    check_polygons,
    check_shape,
    field_error,
    image_side,
    limit_error,
)
from bevviz.errors import InputError
from bevviz.io.images import DecodedImage, atomic_write_bytes, check_camera_size, decode_image_report, read_image_report
from bevviz.io.json_reader import parse_json
from bevviz.storage import NUSCENES, Convention, RawCamera

FORMAT = "bevviz-rig"
VERSION = 1
TOP_KEYS = ("format", "version", "convention", "cameras")
CONVENTION_KEYS = ("extrinsic", "quaternion", "camera_axes")
CAMERA_KEYS = ("name", "K", "rotation", "translation", "width", "height", "image", "ignore")
REQUIRED_CAMERA_KEYS = ("name", "K", "rotation", "translation", "width", "height")


@dataclass(frozen=True, eq=False)
class RigFile:
    """A parsed rig file.

    Attributes:
        rig: The rig in bevviz's frames.
        raw_cameras: Calibration exactly as stored in the file, in file order.
        convention: The convention the file stores its extrinsics in.
        image_files: Camera name -> image path as written in the file (relative to the
            file), or None where the file names no image. Every camera has a key.
        source: Where the data came from (file name), used in messages.
        ignore: Camera name -> polygons (lists of [u, v] pixels of the calibrated image) that
            do not show the world, for the cameras whose entry has ``ignore``.
    """

    rig: Rig
    raw_cameras: list[RawCamera]
    convention: Convention
    image_files: dict[str, str | None] = field(default_factory=dict)
    source: str = "<rig json>"
    ignore: dict[str, list[list[list[float]]]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# Parsing helpers
# --------------------------------------------------------------------------------------


def _load_json_text(text: str) -> Any:
    # NaN and inf are read as such: each number is checked where the error can name its camera.
    return parse_json(text, "json", max_bytes=MAX_RIG_JSON_BYTES, limit_name="MAX_RIG_JSON_BYTES", finite=False)


def _numbers(value: Any, shape: tuple[int, ...], field_name: str, camera: str) -> np.ndarray:
    """A JSON array of numbers (no strings, booleans or nulls) as float64 of ``shape``."""

    def leaves_ok(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return all(leaves_ok(x) for x in v)
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))

    if isinstance(value, np.ndarray):  # a dict built in Python rather than read from JSON
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not leaves_ok(value):
        raise field_error(field_name, value, "must be an array of numbers", camera)
    try:
        arr = np.array(value, dtype=np.float64)
    except ValueError:  # ragged nesting
        raise field_error(field_name, value, f"must be an array of shape {shape}", camera) from None
    except OverflowError:  # an int beyond float64
        raise field_error(field_name, value, "numbers must fit in a float64", camera) from None
    check_shape(arr, shape, field_name, camera)
    if not np.all(np.isfinite(arr)):
        raise field_error(field_name, arr, "must be finite (no NaN or inf)", camera)
    return arr


def _rotation(value: Any, camera: str) -> np.ndarray:
    """Quaternion (4,) or matrix (3, 3), finite; the convention decides how it is read."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(isinstance(r, (list, tuple)) for r in value):
        return _numbers(value, (3, 3), "rotation", camera)
    if isinstance(value, (list, tuple)) and len(value) == 4:
        return _numbers(value, (4,), "rotation", camera)
    if isinstance(value, (list, tuple)):
        raise field_error("rotation", value, "must be a quaternion of 4 numbers or a 3x3 matrix", camera)
    raise field_error("rotation", value, "must be a quaternion [4 numbers] or a 3x3 matrix", camera)


def _convention(block: Any) -> Convention:
    if block is None:
        return NUSCENES
    if not isinstance(block, dict):
        raise field_error("convention", block, "must be an object with extrinsic, quaternion, camera_axes")
    unknown = sorted(set(block) - set(CONVENTION_KEYS))
    if unknown:
        raise field_error("convention", unknown, f"unknown keys; allowed: {list(CONVENTION_KEYS)}")
    values = {**NUSCENES.to_dict(), **block}
    for key in CONVENTION_KEYS:
        if not isinstance(values[key], str):
            raise field_error(key, values[key], "must be a string")
    return Convention(values["extrinsic"], values["quaternion"], values["camera_axes"])


def _camera(entry: Any, index: int, seen: set[str]) -> tuple[RawCamera, str | None, list | None]:
    where = f"#{index}"
    if not isinstance(entry, dict):
        raise field_error("cameras", entry, "every camera must be a JSON object", where)
    name = entry.get("name")
    if "name" not in entry:
        raise field_error("name", sorted(entry), "missing field (keys given are shown)", where)
    check_camera_name(name, where)
    if name in seen:
        raise field_error("name", name, "duplicate camera name", name)
    seen.add(name)
    missing = [k for k in REQUIRED_CAMERA_KEYS if k not in entry]
    if missing:
        raise field_error(missing[0], sorted(entry), "missing field (keys given are shown)", name)
    unknown = sorted(set(entry) - set(CAMERA_KEYS))
    if unknown:
        raise field_error(unknown[0], entry[unknown[0]], f"unknown field; allowed: {list(CAMERA_KEYS)}", name)
    K = _numbers(entry["K"], (3, 3), "K", name)
    rotation = _rotation(entry["rotation"], name)
    translation = _numbers(entry["translation"], (3,), "translation", name)
    width = image_side(entry["width"], "width", name)
    height = image_side(entry["height"], "height", name)
    image = entry.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise field_error("image", image, "must be a file path (string) or null", name)
    ignore = check_polygons(entry["ignore"], "ignore", name) if entry.get("ignore") is not None else None
    return RawCamera(name, K, rotation, translation, width, height), image, ignore


def _with_source(source: str, err: InputError) -> InputError:
    return err.within(source)


def parse_rig(data: dict | str | bytes, source: str = "<rig json>") -> RigFile:
    """Parse and validate a rig in bevviz's JSON format.

    Args:
        data: The parsed JSON object, or its text (str, or UTF-8 bytes).
        source: Name of the data's origin (a file name) for error messages.

    Returns:
        The :class:`RigFile`.

    Raises:
        InputError: ``"<source>: camera <name>: field '<field>': <problem> (got <value>)"``
            for malformed JSON (with line and column), a missing or unknown field, a wrong
            shape, NaN/inf, a non-orthonormal rotation, a zero or non-unit quaternion (the
            message names its norm), bad sizes, a camera name outside the rule, a duplicate
            camera name, an unknown convention, or a limit of :mod:`bevviz.checks` hit (text
            size, nesting depth, number of cameras, width / height), named with its value.

    Convention:
        See the module docstring.
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            check_at_most(len(data), MAX_RIG_JSON_BYTES, "MAX_RIG_JSON_BYTES", "json", shown=f"{len(data)} bytes")
            try:
                data = data.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                raise field_error("json", data[max(0, e.start - 10): e.start + 10],
                                  f"not UTF-8 text (byte {e.start})") from None
        if isinstance(data, str):
            data = _load_json_text(data)
        elif isinstance(data, dict):  # built in Python: walk it (no recursion) before reading it
            check_json_like(data, "json")
        if not isinstance(data, dict):
            raise field_error("rig", type(data).__name__, "the top level must be a JSON object")
        unknown = sorted(set(data) - set(TOP_KEYS))
        if unknown:
            raise field_error(unknown[0], data[unknown[0]], f"unknown top-level field; allowed: {list(TOP_KEYS)}")
        if "format" in data and data["format"] != FORMAT:
            raise field_error("format", data["format"], f"must be '{FORMAT}'")
        if "version" in data and (isinstance(data["version"], bool) or data["version"] != VERSION):
            raise field_error("version", data["version"], f"only version {VERSION} is supported")
        convention = _convention(data.get("convention"))
        if "cameras" not in data:
            raise field_error("cameras", sorted(data), "missing field (keys given are shown)")
        cameras = data["cameras"]
        if not isinstance(cameras, list) or not cameras:
            raise field_error("cameras", cameras, "must be a non-empty array of camera objects")
        if len(cameras) > MAX_CAMERAS:  # before any camera is read
            raise limit_error("cameras", f"{len(cameras)} cameras", "MAX_CAMERAS", MAX_CAMERAS)
        seen: set[str] = set()
        raws, images, ignore = [], {}, {}
        for i, entry in enumerate(cameras):
            raw, image, polygons = _camera(entry, i, seen)
            raws.append(raw)
            images[raw.name] = image
            if polygons:
                ignore[raw.name] = polygons
        rig = Rig.from_raw(raws, convention)
    except InputError as e:  # any other exception is a bug and goes up as it is
        raise _with_source(source, e) from None
    return RigFile(rig=rig, raw_cameras=raws, convention=convention, image_files=images, source=source,
                   ignore=ignore)


def load_rig_file(path: str | os.PathLike) -> RigFile:
    """Read and validate a rig JSON file.

    Args:
        path: The file.

    Returns:
        The :class:`RigFile` (images are not read; see :func:`load_rig_images`).

    Raises:
        InputError: field ``path`` when the file is missing, unreadable or larger than
            :data:`bevviz.checks.MAX_RIG_JSON_BYTES` (checked before reading it); anything
            :func:`parse_rig` rejects, prefixed with the file name.
    """
    p = Path(path)
    try:
        if not p.is_file():
            raise field_error("path", str(p), "rig file not found" if not p.exists() else "not a file")
        n = p.stat().st_size
        check_at_most(n, MAX_RIG_JSON_BYTES, "MAX_RIG_JSON_BYTES", "path", shown=f"{p}: {n} bytes")  # before reading
        data = p.read_bytes()
    except OSError as e:
        raise field_error("path", str(p), f"cannot read the rig file ({e.strerror or e})") from None
    return parse_rig(data, source=p.name)


def load_rig(path: str | os.PathLike) -> Rig:
    """Read a rig JSON file and return its :class:`~bevviz.camera.Rig` (images not read).

    Args:
        path: The file.

    Returns:
        The rig.

    Raises:
        InputError: see :func:`load_rig_file`.
    """
    return load_rig_file(path).rig


# --------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------


def _match_uploads(rig_file: RigFile, uploaded: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """Camera name -> (upload key, value); keys match a camera name, the image file name the
    JSON gives (with or without folders), or that name's stem / the camera name as a stem."""
    names = rig_file.rig.names
    aliases: dict[str, str] = {}
    for name in names:
        aliases[name] = name
        aliases.setdefault(f"stem:{name}", name)
        path = rig_file.image_files.get(name)
        if path:
            aliases.setdefault(f"file:{path}", name)
            aliases.setdefault(f"file:{PurePath(path).name}", name)
            aliases.setdefault(f"stem:{PurePath(path).stem}", name)
    out: dict[str, tuple[str, Any]] = {}
    for key, value in uploaded.items():
        key_s = str(key)
        cam = (aliases.get(key_s) or aliases.get(f"file:{key_s}") or aliases.get(f"file:{PurePath(key_s).name}")
               or aliases.get(f"stem:{PurePath(key_s).stem}"))
        if cam is None:
            raise field_error("camera", key_s, f"an image was given for an unknown camera name; the rig has {names}")
        if cam in out:
            raise field_error("image", [out[cam][0], key_s], "two images were given for one camera", cam)
        out[cam] = (key_s, value)
    return out


class RigImages(dict):
    """Camera name -> RGB image, shape (H, W, 3), uint8, in rig order (a ``dict``), plus what
    reading them did.

    Attributes:
        conversions: Camera name -> the conversions made to turn its file into RGB uint8
            (:attr:`bevviz.io.images.DecodedImage.conversions`); only cameras with one.
        sources: Camera name -> the file (path as the JSON names it, or upload key) read.
    """

    def __init__(self, images: Mapping[str, np.ndarray] = (), conversions: Mapping[str, tuple[str, ...]] = (),
                 sources: Mapping[str, str] = ()) -> None:
        super().__init__(images)
        self.conversions: dict[str, tuple[str, ...]] = dict(conversions)
        self.sources: dict[str, str] = dict(sources)

    @property
    def warnings(self) -> list[str]:
        """One line per converted image, in rig order:
        ``"camera CAM_FRONT: images/CAM_FRONT.png: 16-bit samples cut to 8 bits"``."""
        return [f"camera {cam}: {self.sources.get(cam, '?')}: {', '.join(notes)}"
                for cam, notes in self.conversions.items() if notes]


def _as_rgb(value: Any, label: str, camera: Camera) -> DecodedImage:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return decode_image_report(value, label, camera.name, size=camera.size)
    arr = np.asarray(value)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise field_error("image", f"{label}: array of shape {arr.shape} and dtype {arr.dtype}",
                          "must be RGB uint8 of shape (H, W, 3)", camera.name)
    check_camera_size(arr.shape[1], arr.shape[0], camera.size, label, camera.name)
    return DecodedImage(arr, label, "array")


def _image_path(base_dir: str | os.PathLike, label: str, camera: str, allow_outside: bool) -> Path:
    """``label`` resolved (symlinks too) against ``base_dir``; it must lie inside unless
    ``allow_outside``."""
    folder = Path(base_dir)
    try:
        root, target = folder.resolve(), (folder / label).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a name too long, a symlink loop
        raise field_error("image", label, f"cannot resolve the path ({exc})", camera) from None
    if not allow_outside and not target.is_relative_to(root):
        raise field_error("image", label, f"resolves to {target}, outside the rig's folder {root}; images must "
                                          "lie inside the JSON file's folder (allow_outside=True reads it anyway)",
                          camera)
    return target


def load_rig_images(rig_file: RigFile, base_dir: str | os.PathLike | None,
                    uploaded: Mapping[str, Any] | None = None, require_all: bool = False,
                    allow_outside: bool = False) -> RigImages:
    """Read the images of a rig: uploaded ones first, then the files the JSON names.

    Args:
        rig_file: The parsed rig.
        base_dir: Folder that the JSON's relative image paths are relative to (the JSON
            file's folder), or None to read nothing from disk.
        uploaded: Optional images given directly: key -> encoded bytes or RGB uint8 array
            (H, W, 3). A key is matched to a camera by the camera name, by the image file
            name the JSON gives for it, or by either one's stem (``CAM_FRONT.png`` matches
            camera ``CAM_FRONT``). A key that matches no camera is an error.
        require_all: If True, every camera must end up with an image.
        allow_outside: If True, read image paths that resolve outside ``base_dir`` (an
            absolute path, ``..``, a symlink out); by default they are refused.

    Returns:
        :class:`RigImages`: camera name -> RGB image, shape (H, W, 3), uint8, in rig order,
        with the conversions made (``.warnings``: one line per converted file). Cameras
        with no uploaded image and no image path (or no ``base_dir``) are left out unless
        ``require_all``.

    Raises:
        InputError: naming the camera, the field (``image`` / ``camera``) and the value
            for an unknown camera name, a missing or unreadable image, a path outside
            ``base_dir``, an image over a limit of :mod:`bevviz.checks`, or one whose size
            disagrees with the calibration's width and height (checked from the file's header,
            before decoding). Nothing is returned then.

    Convention:
        Images are RGB uint8 with (H, W) = (height, width) of the camera; no resizing is
        done here (rescale the camera with :meth:`bevviz.camera.Camera.resized` instead).
    """
    matched = _match_uploads(rig_file, uploaded or {})
    images, conversions, sources = {}, {}, {}
    for cam in rig_file.rig:
        if cam.name in matched:
            label, value = matched[cam.name]
            decoded = _as_rgb(value, label, cam)
        elif rig_file.image_files.get(cam.name) and base_dir is not None:
            label = rig_file.image_files[cam.name]
            path = _image_path(base_dir, label, cam.name, allow_outside)
            decoded = read_image_report(path, camera=cam.name, size=cam.size)
        elif require_all:
            raise field_error("image", rig_file.image_files.get(cam.name), "no image given for this camera", cam.name)
        else:
            continue
        images[cam.name], sources[cam.name] = decoded.rgb, label
        if decoded.conversions:
            conversions[cam.name] = decoded.conversions
    return RigImages(images, conversions, sources)


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _floats(a: np.ndarray) -> list:
    """Nested lists of Python floats; -0.0 written as 0.0."""
    return (np.asarray(a, dtype=np.float64) + 0.0).tolist()


def rig_to_dict(rig: Rig, convention: Convention = NUSCENES,
                image_files: Mapping[str, str | None] | None = None,
                ignore: Mapping[str, Any] | None = None) -> dict:
    """The rig in bevviz's JSON format, stored in ``convention``.

    Args:
        rig: The rig.
        convention: How to store the extrinsics (default nuScenes: sensor_to_ego, wxyz, RDF);
            rotations are written as quaternions in the convention's order.
        image_files: Optional camera name -> image path to record (None entries are left out).
        ignore: Optional camera name -> polygons of (u, v) pixels that do not show the world.

    Returns:
        A JSON-ready dict (floats written by ``json`` round-trip exactly).

    Raises:
        InputError: ``image_files`` names a camera that is not in the rig, or a path that
            is not a string.
    """
    image_files = dict(image_files or {})
    for name, path in image_files.items():
        if name not in rig:
            raise field_error("camera", name, f"image_files names an unknown camera; the rig has {rig.names}")
        if path is not None and not isinstance(path, str):
            raise field_error("image", path, "must be a file path (string) or None", name)
    polygons = {}
    for name, polys in dict(ignore or {}).items():
        if name not in rig:
            raise field_error("camera", name, f"ignore names an unknown camera; the rig has {rig.names}")
        polygons[name] = check_polygons(polys, "ignore", name)
    cameras = []
    for cam in rig:
        raw = raw_from_camera(cam, convention)
        entry = {"name": raw.name, "K": _floats(raw.K), "rotation": _floats(raw.rotation),
                 "translation": _floats(raw.translation), "width": raw.width, "height": raw.height}
        if image_files.get(cam.name):
            entry["image"] = image_files[cam.name]
        if polygons.get(cam.name):
            entry["ignore"] = polygons[cam.name]
        cameras.append(entry)
    return {"format": FORMAT, "version": VERSION, "convention": convention.to_dict(), "cameras": cameras}


def save_rig(rig: Rig, path: str | os.PathLike, image_files: Mapping[str, str | None] | None = None,
             ignore: Mapping[str, Any] | None = None) -> Path:
    """Write ``rig`` as bevviz JSON (nuScenes convention), atomically.

    The JSON goes to a temporary file beside ``path`` that is then moved into place with
    ``os.replace``, so a reader never sees a half-written file and a failure leaves any old
    file untouched.

    Args:
        rig: The rig.
        path: Target file.
        image_files: Optional camera name -> image path (relative to the JSON) to record.
        ignore: Optional camera name -> ignore polygons to record.

    Returns:
        The written path.

    Convention:
        sensor_to_ego (``ego_from_cam``), quaternion (w, x, y, z), RDF camera axes.
    """
    p = Path(path)
    text = json.dumps(rig_to_dict(rig, NUSCENES, image_files, ignore), indent=2, allow_nan=False) + "\n"
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, text.encode("utf-8"))
    return p


__all__ = ["RigFile", "RigImages", "parse_rig", "load_rig_file", "load_rig", "load_rig_images", "rig_to_dict",
           "save_rig", "FORMAT", "VERSION"]
