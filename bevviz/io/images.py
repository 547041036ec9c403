"""Image files in and out with OpenCV: always RGB uint8 (H, W, 3) inside bevviz.

Reading is bounded: the width and height come from the file's own header (PNG IHDR, JPEG
SOF, BMP info header, TIFF first IFD), parsed here before OpenCV decodes a byte, and are
checked against :data:`bevviz.checks.MAX_IMAGE_SIDE` and :data:`bevviz.checks.MAX_IMAGE_PIXELS`
and, when given, the camera's calibrated size. A 0.9 MB PNG that declares 30000 x 30000
pixels (a decompression bomb) is refused from its first 24 bytes. Other formats are refused.

Convention:
    Arrays are RGB (not OpenCV's BGR), uint8, shape (H, W, 3), row 0 at the top, so pixel
    (u, v) = (column, row) is ``image[v, u]``. Grayscale files are replicated to three
    channels, an alpha channel is dropped, 16-bit samples keep their 8 highest significant bits
    (all 16 bits used: the high byte; a 12-bit sensor stored in 16 bits: bits 4..11, so its
    image is not 16 times too dark), a CMYK JPEG
    becomes RGB; each such conversion is reported (:attr:`DecodedImage.conversions`) so
    that a caller can warn about it. EXIF orientation is ignored: calibration refers to the
    sensor's pixel grid as stored, and rotating the pixels would silently swap W and H.
    See docs/conventions.md.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from bevviz.checks import MAX_IMAGE_FILE_BYTES, check_at_most, check_image_size, field_error
from bevviz.io.atomic import atomic_write_bytes

__all__ = ["DecodedImage", "ImageHeader", "atomic_write_bytes", "check_camera_size", "decode_image",
           "decode_image_report", "image_header", "read_image", "read_image_report", "write_image"]

_JPEG_SUFFIXES = (".jpg", ".jpeg")
_PNG_SUFFIXES = (".png",)
#: What each conversion to RGB uint8 is reported as.
GREY_TO_RGB = "greyscale replicated to RGB"
ALPHA_DROPPED = "alpha channel dropped"
SIXTEEN_TO_EIGHT_BITS = "16-bit samples cut to 8 bits"
#: Said of a 16-bit file whose samples use fewer bits (``{bits}``: how many).
SIGNIFICANT_TO_EIGHT_BITS = "16-bit samples with {bits} significant bits scaled to 8 bits"
CMYK_TO_RGB = "CMYK converted to RGB"


@dataclass(frozen=True)
class ImageHeader:
    """What an image file's header declares.

    Attributes:
        format: ``"PNG"``, ``"JPEG"``, ``"BMP"`` or ``"TIFF"``.
        width: W in pixels, as stored (no EXIF rotation).
        height: H in pixels.
        components: Colour components a JPEG declares (1 grey, 3 YCbCr, 4 CMYK); None for
            the other formats.
    """

    format: str
    width: int
    height: int
    components: int | None = None


@dataclass(frozen=True, eq=False)
class DecodedImage:
    """A decoded image and what was done to make it RGB uint8.

    Attributes:
        rgb: The image, shape (H, W, 3), uint8, RGB.
        name: The file name (or path) it came from.
        format: The file format (see :class:`ImageHeader`).
        conversions: The conversions made, in words (``"greyscale replicated to RGB"``,
            ``"alpha channel dropped"``, ``"16-bit samples cut to 8 bits"``, ``"CMYK
            converted to RGB"``); empty for an 8-bit RGB file.
    """

    rgb: np.ndarray
    name: str
    format: str
    conversions: tuple[str, ...] = ()

    @property
    def warning(self) -> str | None:
        """``"<name>: <conversion>, <conversion>"``, or None when nothing was converted."""
        return f"{self.name}: {', '.join(self.conversions)}" if self.conversions else None


class _BadHeader(Exception):
    """Why a header cannot be read (becomes the named ``ValueError`` in :func:`image_header`)."""


#: Chunks looked through in a PNG (real files have a few hundred; IDAT is split in 8-64 KB pieces).
_PNG_MAX_CHUNKS = 1 << 16


def _png_size(data: bytes) -> tuple[int, int, None]:
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise _BadHeader("the PNG has no IHDR chunk first")
    width, height = struct.unpack(">II", data[16:24])
    # Every chunk must fit in the file: OpenCV's reader allocates a chunk's declared length
    # before it reads it (a 37-byte PNG declaring a 2 GB chunk took 2 GB and 2 s).
    i, n = 8, len(data)
    for _ in range(_PNG_MAX_CHUNKS):
        if i >= n:
            return width, height, None  # no IEND: the decoder says so, without allocating
        if i + 12 > n:
            raise _BadHeader(f"the PNG ends inside the chunk header at byte {i}")
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        if i + 12 + length > n:
            raise _BadHeader(f"PNG chunk {kind!r} at byte {i} declares {length} bytes, past the end of the file")
        if kind == b"IEND":
            return width, height, None
        i += 12 + length
    raise _BadHeader(f"more than {_PNG_MAX_CHUNKS} PNG chunks")


#: JPEG start-of-frame markers (SOF0-3, 5-7, 9-11, 13-15): their segment gives the size.
_JPEG_SOF = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))
#: Segments looked through for the frame header (real files have fewer than 30 before it).
_JPEG_MAX_SEGMENTS = 4096
_JPEG_FILL = re.compile(rb"\xff+")


def _jpeg_size(data: bytes) -> tuple[int, int, int]:
    i, n = 2, len(data)
    for _ in range(_JPEG_MAX_SEGMENTS):
        if i >= n:
            raise _BadHeader("the JPEG ends before its frame header (SOF)")
        if data[i] != 0xFF:
            raise _BadHeader(f"no JPEG marker at byte {i}")
        i = _JPEG_FILL.match(data, i).end()
        if i >= n:
            raise _BadHeader("the JPEG ends before its frame header (SOF)")
        marker = data[i]
        i += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a segment
            continue
        if marker in (0xD9, 0xDA):
            raise _BadHeader("the JPEG has no frame header (SOF) before its image data")
        if i + 2 > n:
            raise _BadHeader("the JPEG ends inside a segment header")
        length = int.from_bytes(data[i:i + 2], "big")
        if marker in _JPEG_SOF:
            if length < 8 or i + 8 > n:
                raise _BadHeader("the JPEG frame header (SOF) is truncated")
            height, width = struct.unpack(">HH", data[i + 3:i + 7])
            if data[i + 7] not in (1, 3, 4):
                raise _BadHeader(f"the JPEG declares {data[i + 7]} colour components (1, 3 or 4 are read)")
            return width, height, data[i + 7]
        if length < 2:
            raise _BadHeader(f"JPEG segment length {length} at byte {i}")
        i += length
    raise _BadHeader(f"no JPEG frame header (SOF) in the first {_JPEG_MAX_SEGMENTS} segments")


def _bmp_size(data: bytes) -> tuple[int, int, None]:
    if len(data) < 22:
        raise _BadHeader("the BMP header is truncated")
    info = int.from_bytes(data[14:18], "little")
    if info == 12:  # BITMAPCOREHEADER: 16-bit unsigned sizes
        width, height = struct.unpack("<HH", data[18:22])
    elif info >= 40 and len(data) >= 26:  # BITMAPINFOHEADER and later: height < 0 is top-down
        width, height = struct.unpack("<ii", data[18:26])
        height = abs(height)
    else:
        raise _BadHeader(f"BMP info header of {info} bytes")
    return width, height, None


def _tiff_size(data: bytes) -> tuple[int, int, None]:
    order = "<" if data[:2] == b"II" else ">"
    if struct.unpack(order + "H", data[2:4])[0] != 42:
        raise _BadHeader("BigTIFF files are not read")
    if len(data) < 8:
        raise _BadHeader("the TIFF header is truncated")
    offset = struct.unpack(order + "I", data[4:8])[0]
    if offset + 2 > len(data):
        raise _BadHeader("the TIFF's first directory lies past the end of the file")
    count = struct.unpack(order + "H", data[offset:offset + 2])[0]
    end = offset + 2 + 12 * count
    if end > len(data):
        raise _BadHeader("the TIFF's first directory is truncated")
    sizes = {}
    for tag, kind, _count, value in struct.iter_unpack(order + "HHI4s", data[offset + 2:end]):
        if tag in (256, 257):  # ImageWidth, ImageLength: SHORT or LONG
            if kind not in (3, 4):
                raise _BadHeader(f"TIFF tag {tag} has type {kind}, not SHORT or LONG")
            sizes[tag] = struct.unpack(order + ("H" if kind == 3 else "I"), value[:2] if kind == 3 else value)[0]
    if 256 not in sizes or 257 not in sizes:
        raise _BadHeader("the TIFF's first directory has no ImageWidth and ImageLength")
    return sizes[256], sizes[257], None


#: File signature -> (format, header parser).
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "PNG", _png_size),
    (b"\xff\xd8", "JPEG", _jpeg_size),
    (b"BM", "BMP", _bmp_size),
    (b"II*\x00", "TIFF", _tiff_size), (b"MM\x00*", "TIFF", _tiff_size),
    (b"II+\x00", "TIFF", _tiff_size), (b"MM\x00+", "TIFF", _tiff_size),
)


def _cannot_decode(name: str, why: str, camera: str | None) -> ValueError:
    return field_error("image", name, f"cannot decode the file as an image ({why})", camera)


def image_header(data: bytes, name: str, camera: str | None = None) -> ImageHeader:
    """The format and size an encoded image declares, read from its header only.

    Args:
        data: The file's bytes (only the header is looked at).
        name: File name for error messages.
        camera: Camera name for error messages.

    Returns:
        The :class:`ImageHeader`.

    Raises:
        InputError: field ``image`` naming ``name``: not a PNG, JPEG, BMP or TIFF, a header
            that is truncated or damaged, or a zero width or height.
    """
    head = bytes(data[:16])
    match = next(((fmt, parse) for sig, fmt, parse in _SIGNATURES if head.startswith(sig)), None)
    if match is None:
        raise _cannot_decode(name, "not a PNG, JPEG, BMP or TIFF file", camera)
    fmt, parse = match
    try:
        width, height, components = parse(bytes(data) if fmt != "BMP" else bytes(data[:32]))
    except _BadHeader as exc:
        raise _cannot_decode(name, str(exc), camera) from None
    if width <= 0 or height <= 0:
        raise _cannot_decode(name, f"the {fmt} header declares {width} x {height} px", camera)
    return ImageHeader(fmt, width, height, components)


def check_camera_size(width: int, height: int, expected: tuple[int, int], label: str,
                      camera: str | None = None) -> None:
    """Raise unless an image of ``width`` x ``height`` has the camera's size ``expected`` (W, H).

    Raises:
        InputError: field ``image`` naming ``label``, both sizes and the fix.
    """
    if (width, height) != tuple(expected):
        raise field_error(
            "image", label,
            f"image is {width} x {height} px but the calibration says width x height = "
            f"{expected[0]} x {expected[1]}; resize the image or rescale K", camera)


def _to_rgb(img: np.ndarray, name: str, header: ImageHeader, camera: str | None) -> DecodedImage:
    """OpenCV's unchanged decode (BGR / BGRA / grey, 8 or 16 bits) as RGB uint8, with notes."""
    notes = []
    if img.dtype == np.uint16:
        bits = max(8, int(img.max()).bit_length())  # a 10- or 12-bit sensor in a 16-bit file
        img = (img >> (bits - 8)).astype(np.uint8)
        notes.append(SIXTEEN_TO_EIGHT_BITS if bits == 16 else SIGNIFICANT_TO_EIGHT_BITS.format(bits=bits))
    elif img.dtype != np.uint8:
        raise _cannot_decode(name, f"{img.dtype} samples; bevviz reads 8- and 16-bit images", camera)
    channels = 1 if img.ndim == 2 else img.shape[2]
    if channels == 1:
        rgb = cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        notes.append(GREY_TO_RGB)
    elif channels == 3:
        rgb = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if header.components == 4:
            notes.append(CMYK_TO_RGB)
    elif channels == 4:
        rgb = cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
        notes.append(ALPHA_DROPPED)
    else:
        raise _cannot_decode(name, f"{channels} channels; bevviz reads grey, RGB and RGBA images", camera)
    return DecodedImage(np.ascontiguousarray(rgb), name, header.format, tuple(notes))


def decode_image_report(data: bytes, name: str, camera: str | None = None,
                        size: tuple[int, int] | None = None) -> DecodedImage:
    """Decode an encoded image held in memory, within the limits; say what was converted.

    The header is parsed and checked (against :data:`bevviz.checks.MAX_IMAGE_SIDE`,
    :data:`~bevviz.checks.MAX_IMAGE_PIXELS` and ``size``) before OpenCV decodes anything.

    Args:
        data: The encoded file's bytes (e.g. a Streamlit upload's ``getvalue()``), at most
            :data:`bevviz.checks.MAX_IMAGE_FILE_BYTES`.
        name: File name for error messages and warnings.
        camera: Camera name for error messages, when the image belongs to one.
        size: The (W, H) the image must have (the camera's calibrated size), or None.

    Returns:
        The :class:`DecodedImage`: ``rgb`` of shape (H, W, 3), uint8, and its conversions.

    Raises:
        InputError: field ``image`` naming ``name``: not bytes, empty, larger than a limit
            (the message names it), a size other than ``size``, an unknown format, or a
            damaged file.

    Convention:
        See the module docstring (RGB, conversions reported, no EXIF rotation).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise field_error("image", name, f"expected encoded image bytes, got {type(data).__name__}", camera)
    n = memoryview(data).nbytes
    if n == 0:
        raise field_error("image", name, "the file is empty", camera)
    check_at_most(n, MAX_IMAGE_FILE_BYTES, "MAX_IMAGE_FILE_BYTES", "image", camera, shown=f"{name}: {n} bytes")
    header = image_header(data, name, camera)
    check_image_size(header.width, header.height, "image", camera, label=name)
    if size is not None:
        check_camera_size(header.width, header.height, size, name, camera)
    try:
        img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)  # no EXIF rotation
    except cv2.error:
        img = None
    if img is None or img.size == 0:
        raise _cannot_decode(name, f"a damaged {header.format} file", camera)
    if img.shape[:2] != (header.height, header.width):
        raise _cannot_decode(name, f"it decodes to {img.shape[1]} x {img.shape[0]} px, its header says "
                                   f"{header.width} x {header.height}", camera)
    return _to_rgb(img, name, header, camera)


def decode_image(data: bytes, name: str, camera: str | None = None, size: tuple[int, int] | None = None) -> np.ndarray:
    """:func:`decode_image_report`'s image only: RGB, shape (H, W, 3), uint8 (conversions unreported).

    Convention:
        See the module docstring.
    """
    return decode_image_report(data, name, camera, size).rgb


def read_image_report(path: str | os.PathLike, camera: str | None = None,
                      size: tuple[int, int] | None = None) -> DecodedImage:
    """Read an image file within the limits; say what was converted.

    Args:
        path: Image file path.
        camera: Camera name for error messages, when the image belongs to one.
        size: The (W, H) the image must have, or None.

    Returns:
        The :class:`DecodedImage` (its ``name`` is the path).

    Raises:
        InputError: field ``image`` naming the path when the file is missing, not a file,
            unreadable, larger than :data:`bevviz.checks.MAX_IMAGE_FILE_BYTES`, or anything
            :func:`decode_image_report` refuses.

    Convention:
        See the module docstring.
    """
    p = Path(path)
    try:
        if not p.exists():
            raise field_error("image", str(p), "file not found", camera)
        if not p.is_file():
            raise field_error("image", str(p), "not a file", camera)
        n = p.stat().st_size
        check_at_most(n, MAX_IMAGE_FILE_BYTES, "MAX_IMAGE_FILE_BYTES", "image", camera, shown=f"{p}: {n} bytes")
        data = p.read_bytes()  # bytes + imdecode also works for non-ASCII paths on Windows
    except OSError as exc:
        raise field_error("image", str(p), f"cannot read the file ({exc.strerror or exc})", camera) from None
    return decode_image_report(data, str(p), camera, size)


def read_image(path: str | os.PathLike, camera: str | None = None, size: tuple[int, int] | None = None) -> np.ndarray:
    """:func:`read_image_report`'s image only: RGB, shape (H, W, 3), uint8 (conversions unreported).

    Convention:
        See the module docstring.
    """
    return read_image_report(path, camera, size).rgb


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
        InputError: naming the field (``path``, ``image`` or ``quality``) and the value.

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
