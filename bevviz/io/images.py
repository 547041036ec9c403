"""Image files in and out with OpenCV: always RGB uint8 (H, W, 3) inside bevviz.

Convention:
    Arrays are RGB (not OpenCV's BGR), uint8, shape (H, W, 3), row 0 at the top, so pixel
    (u, v) = (column, row) is ``image[v, u]``. Grayscale files are replicated to three
    channels, an alpha channel is dropped, and 16-bit files are scaled to 8 bits (OpenCV's
    ``IMREAD_COLOR``). EXIF orientation is ignored: calibration refers to the sensor's pixel
    grid as stored, and rotating the pixels would silently swap W and H.
    See docs/conventions.md.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import cv2
import numpy as np

from bevviz.shapes import field_error

#: OpenCV flags used for every read: 3-channel BGR, 8-bit, no EXIF rotation.
_READ_FLAGS = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
_JPEG_SUFFIXES = (".jpg", ".jpeg")
_PNG_SUFFIXES = (".png",)


def decode_image(data: bytes, name: str, camera: str | None = None) -> np.ndarray:
    """Decode an encoded image (JPEG, PNG, ... as OpenCV reads them) held in memory.

    Args:
        data: The encoded file's bytes (e.g. a Streamlit upload's ``getvalue()``).
        name: File name for error messages.
        camera: Camera name for error messages, when the image belongs to one.

    Returns:
        RGB image, shape (H, W, 3), uint8.

    Raises:
        ValueError: field ``image`` naming ``name`` when the bytes are empty or not an image.

    Convention:
        See the module docstring (RGB, grayscale replicated, alpha dropped, no EXIF rotation).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise field_error("image", name, f"expected encoded image bytes, got {type(data).__name__}", camera)
    buf = np.frombuffer(data, dtype=np.uint8)
    if buf.size == 0:
        raise field_error("image", name, "the file is empty", camera)
    try:
        bgr = cv2.imdecode(buf, _READ_FLAGS)
    except cv2.error:
        bgr = None
    if bgr is None or bgr.ndim != 3 or bgr.shape[2] != 3 or bgr.size == 0:
        raise field_error("image", name, "cannot decode the file as an image (not a JPEG/PNG or corrupt)", camera)
    return np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))


def read_image(path: str | os.PathLike, camera: str | None = None) -> np.ndarray:
    """Read an image file as RGB.

    Args:
        path: Image file path.
        camera: Camera name for error messages, when the image belongs to one.

    Returns:
        RGB image, shape (H, W, 3), uint8.

    Raises:
        ValueError: field ``image`` naming the path when the file is missing, not a file,
            unreadable or not an image.

    Convention:
        See the module docstring.
    """
    p = Path(path)
    if not p.exists():
        raise field_error("image", str(p), "file not found", camera)
    if not p.is_file():
        raise field_error("image", str(p), "not a file", camera)
    try:
        data = p.read_bytes()  # bytes + imdecode also works for non-ASCII paths on Windows
    except OSError as exc:
        raise field_error("image", str(p), f"cannot read the file ({exc.strerror or exc})", camera) from None
    return decode_image(data, str(p), camera)


def write_image(path: str | os.PathLike, rgb: np.ndarray, quality: int = 90) -> Path:
    """Write an RGB image as JPEG or PNG, chosen by the file suffix.

    The file is written to a temporary name next to ``path`` and moved into place, so a
    reader never sees a half-written image. Missing parent folders are created.

    Args:
        path: Target path ending in ``.jpg``, ``.jpeg`` or ``.png`` (any case).
        rgb: RGB image, shape (H, W, 3), or grayscale (H, W); uint8.
        quality: JPEG quality 0..100 (ignored for PNG).

    Returns:
        The written path.

    Raises:
        ValueError: naming the field (``path``, ``image`` or ``quality``) and the value.

    Convention:
        ``rgb`` is RGB (converted to OpenCV's BGR here).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in _JPEG_SUFFIXES + _PNG_SUFFIXES:
        raise field_error("path", str(p), "image files must end in .jpg, .jpeg or .png")
    arr = np.asarray(rgb)
    if arr.dtype != np.uint8:
        raise field_error("image", f"array of dtype {arr.dtype}", f"must be uint8 for {p.name}")
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)) or arr.size == 0:
        raise field_error("image", f"array of shape {arr.shape}", f"must be (H, W, 3) RGB or (H, W) for {p.name}")
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 0 <= quality <= 100:
        raise field_error("quality", quality, "JPEG quality must be an integer in 0..100")
    bgr = arr if arr.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(arr), cv2.COLOR_RGB2BGR)
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)] if suffix in _JPEG_SUFFIXES else []
    ok, encoded = cv2.imencode(".jpg" if suffix in _JPEG_SUFFIXES else ".png", bgr, params)
    if not ok:
        raise field_error("image", str(p), "OpenCV could not encode the image")
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, encoded.tobytes())
    return p


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a fresh temporary file beside ``path``, then ``os.replace`` it.

    The temporary file is opened normally (not with ``mkstemp``), so the result gets the
    usual umask permissions. On any error the temporary file is removed and ``path`` is
    left as it was.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
