"""Tests for bevviz.io.images: RGB uint8 in, RGB uint8 out, named errors."""

from __future__ import annotations

import os
import stat

import cv2
import numpy as np
import pytest

from bevviz.io.images import decode_image, read_image, write_image


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
