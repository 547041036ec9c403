"""Tests for bevviz.io.images: RGB uint8 in, RGB uint8 out, named errors."""

from __future__ import annotations

import io
import os
import stat
import struct
import time
import tracemalloc
import zlib
from unittest import mock

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from bevviz import checks
from bevviz.io import images
from bevviz.io.images import (
    ImageHeader,
    decode_image,
    decode_image_report,
    image_header,
    read_image,
    read_image_report,
    write_image,
)


def pattern(h: int = 24, w: int = 32) -> np.ndarray:
    """RGB uint8 test pattern (h, w, 3): distinct red, green and blue ramps."""
    v, u = np.mgrid[:h, :w]
    return np.stack([u * 255 // (w - 1), v * 255 // (h - 1), (u + v) % 256], -1).astype(np.uint8)


# --- channel order and formats --------------------------------------------------------------

def test_png_round_trip_is_exact_and_rgb(tmp_path):
    img = pattern()
    path = write_image(tmp_path / "a.png", img)
    assert path == tmp_path / "a.png"
    out = read_image(path)
    assert out.dtype == np.uint8 and out.shape == (24, 32, 3)
    np.testing.assert_array_equal(out, img)


def test_red_is_red(tmp_path):
    """A file OpenCV wrote as pure red (BGR (0, 0, 255)) reads as RGB (255, 0, 0)."""
    bgr = np.zeros((4, 5, 3), np.uint8)
    bgr[..., 2] = 255
    cv2.imwrite(str(tmp_path / "red.png"), bgr)
    out = read_image(tmp_path / "red.png")
    assert out[0, 0].tolist() == [255, 0, 0]
    # ... and write_image stores RGB so that other tools see red too.
    write_image(tmp_path / "red2.png", out)
    assert cv2.imread(str(tmp_path / "red2.png"))[0, 0].tolist() == [0, 0, 255]


@pytest.mark.parametrize("suffix", [".jpg", ".jpeg", ".JPG"])
def test_jpeg_round_trip_close(tmp_path, suffix):
    img = np.full((32, 48, 3), (200, 60, 20), np.uint8)
    write_image(tmp_path / f"a{suffix}", img, quality=95)
    out = read_image(tmp_path / f"a{suffix}")
    assert out.shape == img.shape and out.dtype == np.uint8
    assert np.abs(out.astype(int) - img).max() <= 4
    with open(tmp_path / f"a{suffix}", "rb") as f:
        assert f.read(2) == b"\xff\xd8"  # really a JPEG


def test_jpeg_quality_changes_size(tmp_path):
    img = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    small = write_image(tmp_path / "q10.jpg", img, quality=10).stat().st_size
    large = write_image(tmp_path / "q95.jpg", img, quality=95).stat().st_size
    assert small < large


def test_grayscale_file_becomes_rgb(tmp_path):
    gray = pattern()[..., 0]
    cv2.imwrite(str(tmp_path / "g.png"), gray)
    out = read_image(tmp_path / "g.png")
    assert out.shape == (24, 32, 3)
    for c in range(3):
        np.testing.assert_array_equal(out[..., c], gray)
    # write_image accepts (H, W) too.
    write_image(tmp_path / "g2.png", gray)
    np.testing.assert_array_equal(read_image(tmp_path / "g2.png")[..., 1], gray)


def test_rgba_file_drops_alpha(tmp_path):
    rgb = pattern()
    bgra = np.dstack([rgb[..., ::-1], np.full(rgb.shape[:2], 7, np.uint8)])
    cv2.imwrite(str(tmp_path / "a.png"), bgra)
    out = read_image(tmp_path / "a.png")
    assert out.shape == (24, 32, 3)
    np.testing.assert_array_equal(out, rgb)


def test_16bit_file_becomes_8bit(tmp_path):
    img16 = (pattern().astype(np.uint16) * 257)[..., ::-1]
    cv2.imwrite(str(tmp_path / "d.png"), np.ascontiguousarray(img16))
    out = read_image(tmp_path / "d.png")
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, pattern())


def test_decode_image_from_bytes(tmp_path):
    img = pattern()
    ok, enc = cv2.imencode(".png", img[..., ::-1])
    assert ok
    out = decode_image(enc.tobytes(), "upload.png")
    np.testing.assert_array_equal(out, img)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(decode_image(bytearray(enc.tobytes()), "upload.png"), img)
    np.testing.assert_array_equal(decode_image(memoryview(enc.tobytes()), "upload.png"), img)


def test_pixel_grid_is_not_rotated_by_exif(tmp_path):
    """EXIF orientation 6 (rotate 90) is ignored: W and H stay as stored, as the calibration expects."""
    img = pattern(16, 40)
    ok, enc = cv2.imencode(".jpg", img[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])
    jpeg = enc.tobytes()
    # Minimal APP1 Exif segment, big-endian TIFF with one IFD entry: Orientation (0x0112) = 6.
    tiff = (b"MM\x00\x2a\x00\x00\x00\x08" + b"\x00\x01" + b"\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00"
            + b"\x00\x00\x00\x00")
    payload = b"Exif\x00\x00" + tiff
    app1 = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    with_exif = jpeg[:2] + app1 + jpeg[2:]
    assert cv2.imdecode(np.frombuffer(with_exif, np.uint8), cv2.IMREAD_COLOR).shape[:2] == (40, 16)  # OpenCV rotates
    assert decode_image(with_exif, "exif.jpg").shape == (16, 40, 3)  # bevviz does not


# --- errors ---------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    missing = tmp_path / "nope.jpg"
    with pytest.raises(ValueError, match=r"field 'image': file not found \(got '.*nope\.jpg'\)"):
        read_image(missing)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': file not found"):
        read_image(str(missing), camera="CAM_FRONT")


def test_directory_is_not_an_image(tmp_path):
    with pytest.raises(ValueError, match=r"field 'image': not a file"):
        read_image(tmp_path)


@pytest.mark.parametrize("content", [b"", b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20,
                                     b"\xff\xd8\xff\xe0garbage"])
def test_unreadable_file(tmp_path, content):
    path = tmp_path / "bad.jpg"
    path.write_bytes(content)
    with pytest.raises(ValueError,
                       match=r"field 'image': (the file is empty|cannot decode the file as an image).*bad\.jpg"):
        read_image(path)


def test_truncated_jpeg_is_a_named_error():
    _, enc = cv2.imencode(".jpg", pattern(64, 64))
    data = enc.tobytes()[:40]
    with pytest.raises(ValueError, match=r"field 'image'.*'cut\.jpg'"):
        decode_image(data, "cut.jpg")


def test_unreadable_file_permission(tmp_path, monkeypatch):
    """An OSError while reading (e.g. no permission) becomes a named error (simulated: tests may run as root)."""
    path = write_image(tmp_path / "locked.png", pattern())

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "read_bytes", refuse)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': cannot read the file \(Permission denied\) "
                                         r"\(got '.*locked\.png'\)"):
        read_image(path, camera="CAM_FRONT")


def test_decode_rejects_non_bytes():
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'image': expected encoded image bytes, got str"):
        decode_image("abc", "x.png", camera="CAM_BACK")


@pytest.mark.parametrize("arr, pattern_", [
    (np.zeros((4, 4, 3), np.float32), r"field 'image': must be uint8 for a\.png \(got 'array of dtype float32'\)"),
    (np.zeros((4, 4, 4), np.uint8), r"field 'image': must be \(H, W, 3\) RGB or \(H, W\).*\(4, 4, 4\)"),
    (np.zeros((4,), np.uint8), r"field 'image'.*\(4,\)"),
    (np.zeros((0, 4, 3), np.uint8), r"field 'image'.*\(0, 4, 3\)"),
])
def test_write_rejects_bad_arrays(tmp_path, arr, pattern_):
    with pytest.raises(ValueError, match=pattern_):
        write_image(tmp_path / "a.png", arr)
    assert not (tmp_path / "a.png").exists()


def test_write_rejects_unknown_suffix_and_quality(tmp_path):
    with pytest.raises(ValueError,
                       match=r"field 'path': image files must end in \.jpg, \.jpeg or \.png \(got '.*a\.bmp'\)"):
        write_image(tmp_path / "a.bmp", pattern())
    for q in (-1, 101, 90.5, True):
        with pytest.raises(ValueError, match=r"field 'quality'"):
            write_image(tmp_path / "a.jpg", pattern(), quality=q)


def test_write_is_atomic_and_creates_folders(tmp_path):
    target = tmp_path / "images" / "CAM_FRONT.jpg"
    write_image(target, pattern())
    first = target.read_bytes()
    # Overwriting replaces the file in one step and leaves no temporary files behind.
    write_image(target, 255 - pattern())
    assert target.read_bytes() != first
    assert sorted(p.name for p in target.parent.iterdir()) == ["CAM_FRONT.jpg"]
    # The file has ordinary permissions (not mkstemp's 0600).
    if os.name == "posix":
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = write_image(tmp_path / "a.png", pattern())
    before = target.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_image(target, 255 - pattern())
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"]


# --- limits: the header is read and checked before anything is decoded (issue 14) ----------

def png_header(width: int, height: int, bit_depth: int = 8, colour: int = 2) -> bytes:
    """The first 33 bytes of a PNG (signature and IHDR with its CRC) declaring ``width`` x ``height``."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


def png_bomb(width: int = 30000, height: int = 30000, size: int = 900_000) -> bytes:
    """A ``size``-byte PNG declaring ``width`` x ``height`` RGB pixels: its IDAT is the start of
    the deflate stream of all-zero rows (what a real bomb holds), cut off at ``size`` bytes."""
    row = b"\x00" * (1 + 3 * width)
    z = zlib.compressobj(9)
    data = b""
    while len(data) < size:
        data += z.compress(row * 64)
    idat = data[:size]
    chunk = struct.pack(">I", len(idat)) + b"IDAT" + idat + struct.pack(">I", zlib.crc32(b"IDAT" + idat))
    return png_header(width, height) + chunk


@pytest.fixture
def no_decode(monkeypatch):
    """cv2.imdecode fails the test: proof that a refusal came from the header alone."""
    def refuse(*args, **kwargs):
        raise AssertionError("decoded before the header check refused the file")

    monkeypatch.setattr(cv2, "imdecode", refuse)


def test_a_decompression_bomb_is_refused_from_its_header(no_decode):
    bomb = png_bomb()
    assert 800_000 < len(bomb) < 1_000_000
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': more than MAX_IMAGE_SIDE = 8192 "
                                             r"\(got 'bomb\.png: 30000 x 30000 px'\)"):
            decode_image(bomb, "bomb.png", camera="CAM_FRONT")
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.05 and peak < 2 * len(bomb)  # 2.7 GB of pixels were never allocated


def test_a_bomb_on_disk_is_refused_the_same_way(tmp_path, no_decode):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_bomb(8000, 8000, 50_000))
    with pytest.raises(ValueError, match=r"field 'image': more than MAX_IMAGE_PIXELS = 33554432 "
                                         r"\(got '.*bomb\.png: 8000 x 8000 px'\)"):
        read_image(path)


def test_the_camera_size_is_checked_from_the_header(no_decode):
    data = png_header(640, 360) + struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'image': image is 640 x 360 px but the calibration "
                                         r"says width x height = 64 x 36; resize the image or rescale K"):
        decode_image(data, "back.png", camera="CAM_BACK", size=(64, 36))


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "MAX_IMAGE_FILE_BYTES", 1000)
    path = write_image(tmp_path / "a.png", np.random.default_rng(0).integers(0, 256, (64, 64, 3), np.uint8))
    monkeypatch.setattr(type(path), "read_bytes", lambda self: pytest.fail("read before the size check"))
    with pytest.raises(ValueError, match=r"field 'image': more than MAX_IMAGE_FILE_BYTES = 1000 \(got '.*a\.png: \d+ "
                                         r"bytes'\)"):
        read_image(path)
    with pytest.raises(ValueError, match=r"field 'image': more than MAX_IMAGE_FILE_BYTES = 1000 \(got 'up\.png: 1001 "):
        decode_image(b"\x89PNG" + b"\0" * 997, "up.png")


def _encoded(ext: str, arr: np.ndarray) -> bytes:
    ok, enc = cv2.imencode(ext, arr)
    assert ok
    return enc.tobytes()


@pytest.mark.parametrize("ext, fmt", [(".png", "PNG"), (".jpg", "JPEG"), (".bmp", "BMP"), (".tiff", "TIFF")])
def test_headers_of_every_read_format(ext, fmt):
    data = _encoded(ext, pattern(13, 21))
    assert image_header(data, "x") == ImageHeader(fmt, 21, 13, 3 if fmt == "JPEG" else None)
    out = decode_image_report(data, f"x{ext}", size=(21, 13))
    assert out.format == fmt and out.rgb.shape == (13, 21, 3) and out.conversions == () and out.warning is None


def test_big_endian_tiff_core_bmp_and_progressive_jpeg_headers():
    buf = io.BytesIO()
    Image.fromarray(pattern(9, 11)).save(buf, "TIFF", tiffinfo={}, compression=None)
    le = buf.getvalue()
    assert image_header(le, "le.tif") == ImageHeader("TIFF", 11, 9)
    buf = io.BytesIO()
    Image.fromarray(pattern(9, 11)).save(buf, "JPEG", progressive=True)
    assert image_header(buf.getvalue(), "p.jpg") == ImageHeader("JPEG", 11, 9, 3)
    core = b"BM" + b"\0" * 12 + struct.pack("<IHH", 12, 300, 200) + b"\0" * 8
    assert image_header(core, "core.bmp") == ImageHeader("BMP", 300, 200)
    top_down = b"BM" + b"\0" * 12 + struct.pack("<Iii", 40, 300, -200) + b"\0" * 8
    assert image_header(top_down, "td.bmp") == ImageHeader("BMP", 300, 200)
    mm = b"MM\x00*" + struct.pack(">I", 8) + struct.pack(">H", 2) + struct.pack(">HHIHH", 256, 3, 1, 5000, 0) \
        + struct.pack(">HHII", 257, 4, 1, 70000)
    assert image_header(mm, "mm.tif") == ImageHeader("TIFF", 5000, 70000)


@pytest.mark.parametrize("data, why", [
    (b"GIF89a" + b"\0" * 20, "not a PNG, JPEG, BMP or TIFF file"),
    (b"RIFF\0\0\0\0WEBPVP8 ", "not a PNG, JPEG, BMP or TIFF file"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 30, "the PNG has no IHDR chunk first"),
    (png_header(0, 10), r"the PNG header declares 0 x 10 px"),
    (b"\xff\xd8\xff\xda" + b"\0" * 10, r"the JPEG has no frame header \(SOF\) before its image data"),
    (b"\xff\xd8" + b"\xff\xd0" * 5000, r"no JPEG frame header \(SOF\) in the first 4096 segments"),
    (b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x10\x03", r"the JPEG header declares 16 x 0 px"),
    (b"\xff\xd8\xff\xe0\xff\xff", r"the JPEG ends before its frame header"),
    (b"\xff\xd8\x00", r"no JPEG marker at byte 2"),
    (b"BM" + b"\0" * 12 + struct.pack("<I", 20) + b"\0" * 8, r"BMP info header of 20 bytes"),
    (b"II+\x00" + b"\0" * 12, "BigTIFF files are not read"),
    (b"II*\x00" + struct.pack("<I", 1 << 30), "the TIFF's first directory lies past the end of the file"),
    (b"II*\x00" + struct.pack("<IH", 8, 100), "the TIFF's first directory is truncated"),
    (b"II*\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHII", 256, 4, 1, 5),
     "the TIFF's first directory has no ImageWidth and ImageLength"),
    (b"II*\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHII", 256, 2, 1, 5), "TIFF tag 256 has type 2"),
    (b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x07", r"the JPEG declares 7 colour components"),
    # OpenCV allocates a PNG chunk's declared length before reading it: 37 bytes would take 2 GB.
    (png_header(7, 6) + b"\x7f\x00\x00\x00IDAT\0\0\0\0",
     r"PNG chunk b'IDAT' at byte 33 declares 2130706432 bytes, past the end of the file"),
    (png_header(7, 6) + (struct.pack(">I", 0) + b"tEXt" + b"\0" * 4) * 70000, r"more than 65536 PNG chunks"),
    (png_header(1, 1) + b"\x17\x00\x00\x00", r"the PNG ends inside the chunk header at byte 33"),
])
def test_damaged_headers_are_named_errors(data, why, no_decode):
    with pytest.raises(ValueError, match=rf"camera CAM_X: field 'image': cannot decode the file as an image \({why}"
                                         rf".*\(got 'h\.img'\)"):
        decode_image(data, "h.img", camera="CAM_X")


@pytest.mark.parametrize("declared", [(2 ** 32 - 1, 1), (1, 65535), (8193, 8), (65535, 65535)])
def test_huge_declared_sizes_in_every_format(declared, no_decode):
    w, h = declared
    sof = b"\xff\xd8\xff\xc0" + struct.pack(">HBHHB", 17, 8, h & 0xFFFF, w & 0xFFFF, 3) + b"\0" * 9
    bmp = b"BM" + b"\0" * 12 + struct.pack("<Iii", 40, min(w, 2 ** 31 - 1), h) + b"\0" * 8
    tif = (b"II*\x00" + struct.pack("<IH", 8, 2) + struct.pack("<HHII", 256, 4, 1, w)
           + struct.pack("<HHII", 257, 4, 1, h))
    for data in (png_header(w, h), sof, bmp, tif):
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match=r"field 'image': more than MAX_IMAGE_(SIDE|PIXELS)"):
            decode_image(data, "huge")
        assert time.perf_counter() - t0 < 0.05


# --- conversions are reported (issue 14: no silent grey / RGBA / 16-bit) -----------------------

def test_conversions_are_reported_naming_the_file(tmp_path):
    rgb = pattern()
    cases = {
        "grey.png": (rgb[..., 0], ("greyscale replicated to RGB",)),
        "rgba.png": (np.dstack([rgb[..., ::-1], np.full(rgb.shape[:2], 7, np.uint8)]), ("alpha channel dropped",)),
        "deep.png": (np.ascontiguousarray((rgb.astype(np.uint16) * 257)[..., ::-1]), ("16-bit samples cut to 8 bits",)),
        "deep_grey_alpha.png": (np.dstack([rgb[..., :1].astype(np.uint16) * 257] * 4),
                                ("16-bit samples cut to 8 bits", "alpha channel dropped")),
        "plain.png": (rgb[..., ::-1], ()),
    }
    for name, (arr, notes) in cases.items():
        cv2.imwrite(str(tmp_path / name), arr)
        out = read_image_report(tmp_path / name, size=(32, 24))
        assert out.conversions == notes, name
        assert out.rgb.dtype == np.uint8 and out.rgb.shape == (24, 32, 3)
        assert (out.warning is None) if not notes else out.warning == f"{tmp_path / name}: {', '.join(notes)}"
    buf = io.BytesIO()
    Image.fromarray(rgb).convert("CMYK").save(buf, "JPEG")
    assert decode_image_report(buf.getvalue(), "cmyk.jpg").warning == "cmyk.jpg: CMYK converted to RGB"


def test_float_tiffs_are_refused_by_name():
    data = _encoded(".tiff", np.zeros((4, 5, 3), np.float32))
    with pytest.raises(ValueError, match=r"field 'image': cannot decode the file as an image \(float32 samples; "
                                         r"bevviz reads 8- and 16-bit images\) \(got 'f\.tif'\)"):
        decode_image(data, "f.tif")


# --- fuzz: any bytes give an image or a named error, within the budget ----------------------------

_VALID = [_encoded(ext, arr) for ext in (".png", ".jpg", ".bmp", ".tiff")
          for arr in (pattern(5, 7), pattern(3, 2)[..., 0], (pattern(4, 4).astype(np.uint16) * 200))
          if not (ext in (".jpg", ".bmp") and arr.dtype == np.uint16)]


def _flip(data: bytes, at: int, value: int) -> bytes:
    i = at % len(data)
    return data[:i] + bytes([value]) + data[i + 1:]


_SIGNATURES = st.sampled_from([b"\x89PNG\r\n\x1a\n", b"\xff\xd8", b"BM", b"II*\x00", b"MM\x00*"])


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(
    st.binary(max_size=600),
    st.builds(lambda sig, tail: sig + tail, _SIGNATURES, st.binary(max_size=300)),  # a real magic, a damaged rest
    st.builds(lambda v, k: v[: max(1, len(v) - k)], st.sampled_from(_VALID), st.integers(0, 400)),  # truncated
    st.builds(lambda v, at, b: _flip(v, at, b), st.sampled_from(_VALID), st.integers(0, 400), st.integers(0, 255)),
    st.builds(lambda w, h, tail: png_header(w, h) + tail, st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1),
              st.binary(max_size=64)),
    st.builds(lambda w, h, n: b"\xff\xd8\xff\xc0" + struct.pack(">HBHHB", 17, 8, h, w, n) + b"\0" * 9,
              st.integers(0, 65535), st.integers(0, 65535), st.integers(0, 255)),
), size=st.one_of(st.none(), st.tuples(st.integers(1, 9), st.integers(1, 9))))
def test_fuzz_image_bytes(data, size):
    # Smaller limits keep every example fast (a damaged header may declare up to 8192 x 4096
    # pixels, which then really are decoded); the code paths are the same.
    with mock.patch.object(checks, "MAX_IMAGE_SIDE", 512), mock.patch.object(checks, "MAX_IMAGE_PIXELS", 1 << 16):
        _decode_or_named_error(data, size)


def _decode_or_named_error(data: bytes, size: tuple[int, int] | None) -> None:
    try:
        out = decode_image_report(data, "fuzz.img", camera="CAM_F", size=size)
    except ValueError as exc:
        assert str(exc).startswith("camera CAM_F: field 'image': ") and "(got " in str(exc)
    else:
        header = image_header(data, "fuzz.img")
        assert out.rgb.dtype == np.uint8 and out.rgb.shape == (header.height, header.width, 3)
        assert size is None or out.rgb.shape[1::-1] == size


def test_sixteen_bit_file_of_a_twelve_bit_sensor_is_scaled_by_its_significant_bits(tmp_path):
    # a 12-bit camera stored in a 16-bit PNG (values 0..4095): keeping the high byte would
    # leave values 0..15, an image 16 times too dark; its 8 highest significant bits are kept
    rgb = pattern()
    cv2.imwrite(str(tmp_path / "raw12.png"), np.ascontiguousarray((rgb.astype(np.uint16) * 16 + 7)[..., ::-1]))
    out = read_image_report(tmp_path / "raw12.png", size=(32, 24))
    assert 2048 <= int(rgb.max()) * 16 + 7 < 4096  # exactly 12 significant bits
    np.testing.assert_array_equal(out.rgb, rgb)
    assert out.conversions == ("16-bit samples with 12 significant bits scaled to 8 bits",)
