"""Tests for bevviz.io.rig_json: the JSON rig format, its images and its errors."""

from __future__ import annotations

import copy
import json
import os
import re
import time
import tracemalloc

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyquaternion import Quaternion

from bevviz.camera import Rig
from bevviz.checks import MAX_CAMERAS, MAX_JSON_DEPTH, MAX_RIG_JSON_BYTES
from bevviz.conventions import NUSCENES, Convention, RawCamera
from bevviz.io import rig_json
from bevviz.io.images import write_image
from bevviz.io.rig_json import (
    RigFile,
    RigImages,
    load_rig,
    load_rig_file,
    load_rig_images,
    parse_rig,
    rig_to_dict,
    save_rig,
)

from .test_images import png_bomb, png_header

#: Three real nuScenes v1.0-mini calibrated_sensor records (scene-0061), images 1600 x 900.
RECORDS = [
    ("CAM_FRONT", [0.4998015430569128, -0.5030316162024876, 0.4997798114386805, -0.49737083824542755],
     [1.70079118954, 0.0159456324149, 1.51095763913], (1266.417203046554, 816.2670197447984, 491.50706579294757)),
    ("CAM_FRONT_RIGHT", [0.2060347966337182, -0.2026940577919598, 0.6824507824531167, -0.6713610884174485],
     [1.5508477543, -0.493404796419, 1.49574800619], (1260.8474446004698, 807.968244525554, 495.3344268742088)),
    ("CAM_BACK", [0.5037872666382278, -0.49740249788611096, -0.4941850223835201, 0.5045496097725578],
     [0.0283260309358, 0.00345136761476, 1.57910346144], (809.2209905677063, 829.2196003259838, 481.77842384512485)),
]
NAMES = [r[0] for r in RECORDS]
SMALL = (64, 36)  # (W, H) of the small test images: 1600 x 900 scaled by 0.04


def nuscenes_dict(width: int = 1600, height: int = 900) -> dict:
    """The three records as a bevviz rig JSON object, written by hand (nuScenes convention)."""
    s = width / 1600
    cams = []
    for name, q, t, (f, cx, cy) in RECORDS:
        K = [[f * s, 0.0, s * (cx + 0.5) - 0.5], [0.0, f * s, s * (cy + 0.5) - 0.5], [0.0, 0.0, 1.0]]
        cams.append({"name": name, "K": K, "rotation": q, "translation": t, "width": width, "height": height,
                     "image": f"images/{name}.png"})
    return {"format": "bevviz-rig", "version": 1,
            "convention": {"extrinsic": "sensor_to_ego", "quaternion": "wxyz", "camera_axes": "RDF"},
            "cameras": cams}


def small_dict() -> dict:
    return nuscenes_dict(*SMALL)


def camera_image(i: int, size: tuple[int, int] = SMALL) -> np.ndarray:
    img = np.zeros((size[1], size[0], 3), np.uint8)
    img[..., i % 3] = (37 * (i + 1)) % 256
    img[0, 0] = (255, 255, 255)
    return img


def write_rig_folder(tmp_path, data: dict | None = None) -> os.PathLike:
    """A folder with rig.json and its PNG images; returns the JSON path."""
    data = small_dict() if data is None else data
    for i, cam in enumerate(data["cameras"]):
        if cam.get("image"):
            write_image(tmp_path / cam["image"], camera_image(i, (cam["width"], cam["height"])))
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def assert_same_rig(a: Rig, b: Rig, atol: float = 1e-12) -> None:
    assert a.names == b.names
    for ca, cb in zip(a, b):
        assert ca.size == cb.size
        np.testing.assert_allclose(ca.K, cb.K, rtol=0, atol=atol)
        np.testing.assert_allclose(ca.cam_from_ego, cb.cam_from_ego, rtol=0, atol=atol)


def expect_error(data, pattern: str, source: str = "rig.json") -> None:
    with pytest.raises(ValueError, match=pattern):
        parse_rig(data if isinstance(data, (str, bytes)) else json.dumps(data), source=source)


# --- reading --------------------------------------------------------------------------------

def test_parse_nuscenes_records_matches_devkit_definition():
    rf = parse_rig(nuscenes_dict(), source="rig.json")
    assert isinstance(rf, RigFile) and rf.source == "rig.json"
    assert rf.rig.names == NAMES and rf.convention == NUSCENES
    for cam, (_, q, t, (f, cx, cy)) in zip(rf.rig, RECORDS):
        # nuScenes: rotation/translation are ego_from_sensor; bevviz stores its inverse.
        ego_from_cam = np.eye(4)
        ego_from_cam[:3, :3] = Quaternion(q).rotation_matrix
        ego_from_cam[:3, 3] = t
        np.testing.assert_allclose(cam.cam_from_ego, np.linalg.inv(ego_from_cam), atol=1e-12)
        np.testing.assert_allclose(cam.K, [[f, 0, cx], [0, f, cy], [0, 0, 1]], atol=0)
        assert cam.size == (1600, 900)
    assert rf.image_files == {n: f"images/{n}.png" for n in NAMES}
    assert [r.name for r in rf.raw_cameras] == NAMES
    np.testing.assert_array_equal(rf.raw_cameras[0].rotation, RECORDS[0][1])  # as stored
    np.testing.assert_array_equal(rf.raw_cameras[0].translation, RECORDS[0][2])


def test_parse_accepts_dict_str_bytes_and_bom():
    d = nuscenes_dict()
    text = json.dumps(d)
    rigs = [parse_rig(d).rig, parse_rig(text).rig, parse_rig(text.encode()).rig,
            parse_rig(b"\xef\xbb\xbf" + text.encode()).rig, parse_rig(bytearray(text.encode())).rig]
    for r in rigs[1:]:
        assert r == rigs[0]


def test_python_dict_with_tuples_and_arrays():
    d = nuscenes_dict()
    d["cameras"][0]["K"] = np.array(d["cameras"][0]["K"])
    d["cameras"][0]["rotation"] = tuple(d["cameras"][0]["rotation"])
    d["cameras"][1]["rotation"] = Quaternion(d["cameras"][1]["rotation"]).rotation_matrix  # ndarray (3, 3)
    d["cameras"][2]["translation"] = np.array(d["cameras"][2]["translation"])
    assert_same_rig(parse_rig(d).rig, parse_rig(nuscenes_dict()).rig)


def test_convention_block_and_format_are_optional():
    d = nuscenes_dict()
    bare = {"cameras": d["cameras"]}
    assert parse_rig(bare).rig == parse_rig(d).rig
    assert parse_rig(bare).convention == NUSCENES
    partial = {"convention": {"camera_axes": "RDF"}, "cameras": d["cameras"]}
    assert parse_rig(partial).convention == NUSCENES


def test_image_is_optional():
    d = nuscenes_dict()
    del d["cameras"][0]["image"]
    d["cameras"][1]["image"] = None
    rf = parse_rig(d)
    assert rf.image_files == {"CAM_FRONT": None, "CAM_FRONT_RIGHT": None, "CAM_BACK": "images/CAM_BACK.png"}


def test_matrix_rotation_is_accepted():
    d = nuscenes_dict()
    for cam in d["cameras"]:
        cam["rotation"] = Quaternion(cam["rotation"]).rotation_matrix.tolist()
    assert_same_rig(parse_rig(d).rig, parse_rig(nuscenes_dict()).rig)


@pytest.mark.parametrize("convention", Convention.all(), ids=lambda c: c.label.replace(" / ", "-"))
def test_every_convention_round_trips(convention):
    rig = parse_rig(nuscenes_dict()).rig
    d = rig_to_dict(rig, convention)
    assert d["convention"] == convention.to_dict()
    rf = parse_rig(json.loads(json.dumps(d)))
    assert rf.convention == convention
    assert_same_rig(rf.rig, rig)


def test_load_rig_and_load_rig_file(tmp_path):
    path = write_rig_folder(tmp_path)
    rig = load_rig(path)
    assert isinstance(rig, Rig) and rig.names == NAMES and rig["CAM_BACK"].size == SMALL
    rf = load_rig_file(str(path))
    assert rf.rig == rig and rf.source == "rig.json"


# --- writing --------------------------------------------------------------------------------

def test_save_and_load_round_trip(tmp_path):
    rig = parse_rig(nuscenes_dict()).rig
    out = save_rig(rig, tmp_path / "out" / "rig.json")
    assert out == tmp_path / "out" / "rig.json"
    assert_same_rig(load_rig(out), rig)


def test_saved_file_is_nuscenes_convention(tmp_path):
    rig = parse_rig(nuscenes_dict()).rig
    path = save_rig(rig, tmp_path / "rig.json")
    d = json.loads(path.read_text())
    assert d["format"] == "bevviz-rig" and d["version"] == 1
    assert d["convention"] == {"extrinsic": "sensor_to_ego", "quaternion": "wxyz", "camera_axes": "RDF"}
    for cam, (name, q, t, _) in zip(d["cameras"], RECORDS):
        assert cam["name"] == name and (cam["width"], cam["height"]) == (1600, 900)
        assert "image" not in cam
        np.testing.assert_allclose(cam["translation"], t, atol=1e-12)  # the camera's position in ego
        qq = np.array(cam["rotation"])
        assert qq[0] >= 0 and min(np.abs(qq - q).max(), np.abs(qq + q).max()) < 1e-12  # wxyz, up to sign


def test_save_preserves_image_file_names(tmp_path):
    rf = load_rig_file(write_rig_folder(tmp_path))
    path = save_rig(rf.rig, tmp_path / "copy.json", image_files=rf.image_files)
    again = load_rig_file(path)
    assert again.image_files == rf.image_files
    images = load_rig_images(again, tmp_path)
    assert sorted(images) == sorted(NAMES)
    partial = save_rig(rf.rig, tmp_path / "partial.json", image_files={"CAM_BACK": "b.png"})
    assert load_rig_file(partial).image_files == {"CAM_FRONT": None, "CAM_FRONT_RIGHT": None, "CAM_BACK": "b.png"}


def test_rig_to_dict_rejects_image_for_unknown_camera():
    rig = parse_rig(nuscenes_dict()).rig
    with pytest.raises(ValueError, match=r"field 'camera': image_files names an unknown camera.*\(got 'CAM_SIDE'\)"):
        rig_to_dict(rig, image_files={"CAM_SIDE": "x.png"})


def test_save_is_atomic(tmp_path, monkeypatch):
    rig = parse_rig(nuscenes_dict()).rig
    path = save_rig(rig, tmp_path / "rig.json")
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        save_rig(rig.resized(0.5), path)
    assert path.read_bytes() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["rig.json"]  # no temporary left behind
    monkeypatch.undo()
    save_rig(rig.resized(0.5), path)
    assert load_rig(path)["CAM_FRONT"].size == (800, 450)


# --- images ---------------------------------------------------------------------------------

def test_load_images_from_disk(tmp_path):
    rf = load_rig_file(write_rig_folder(tmp_path))
    images = load_rig_images(rf, tmp_path)
    assert list(images) == NAMES
    for i, name in enumerate(NAMES):
        np.testing.assert_array_equal(images[name], camera_image(i))
        assert images[name].dtype == np.uint8 and images[name].shape == (36, 64, 3)


def test_no_base_dir_reads_nothing_from_disk(tmp_path):
    rf = load_rig_file(write_rig_folder(tmp_path))
    assert load_rig_images(rf, None) == {}
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': no image given for this camera"):
        load_rig_images(rf, None, require_all=True)


@pytest.mark.parametrize("key", ["CAM_FRONT", "CAM_FRONT.png", "CAM_FRONT.jpg", "images/CAM_FRONT.png"])
def test_uploaded_bytes_matched_by_name_file_or_stem(tmp_path, key):
    rf = parse_rig(small_dict())
    data = (write_image(tmp_path / "up.png", camera_image(5))).read_bytes()
    images = load_rig_images(rf, None, uploaded={key: data})
    assert list(images) == ["CAM_FRONT"]
    np.testing.assert_array_equal(images["CAM_FRONT"], camera_image(5))


def test_uploaded_file_name_differs_from_camera_name(tmp_path):
    d = small_dict()
    d["cameras"][2]["image"] = "rear_cam_0001.jpg"
    rf = parse_rig(d)
    data = write_image(tmp_path / "x.png", camera_image(1)).read_bytes()
    assert list(load_rig_images(rf, None, uploaded={"rear_cam_0001.jpg": data})) == ["CAM_BACK"]


def test_uploaded_arrays_and_override_disk(tmp_path):
    rf = load_rig_file(write_rig_folder(tmp_path))
    images = load_rig_images(rf, tmp_path, uploaded={"CAM_BACK": camera_image(7)}, require_all=True)
    np.testing.assert_array_equal(images["CAM_BACK"], camera_image(7))
    np.testing.assert_array_equal(images["CAM_FRONT"], camera_image(0))


def test_unknown_camera_name_in_uploads():
    rf = parse_rig(small_dict())
    with pytest.raises(ValueError, match=r"field 'camera': an image was given for an unknown camera name; "
                                         r"the rig has \['CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_BACK'\] "
                                         r"\(got 'CAM_SIDE\.jpg'\)"):
        load_rig_images(rf, None, uploaded={"CAM_FRONT": camera_image(0), "CAM_SIDE.jpg": camera_image(1)})


def test_two_uploads_for_one_camera():
    rf = parse_rig(small_dict())
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'image': two images were given for one camera"):
        load_rig_images(rf, None, uploaded={"CAM_BACK": camera_image(0), "CAM_BACK.png": camera_image(1)})


def test_image_size_disagrees_with_calibration(tmp_path):
    path = write_rig_folder(tmp_path)
    write_image(tmp_path / "images" / "CAM_FRONT_RIGHT.png", camera_image(1, (32, 18)))
    rf = load_rig_file(path)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT_RIGHT: field 'image': image is 32 x 18 px but the "
                                         r"calibration says width x height = 64 x 36.*"
                                         r"\(got '.*images/CAM_FRONT_RIGHT\.png'\)"):
        load_rig_images(rf, tmp_path)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': image is 36 x 64 px"):
        load_rig_images(rf, None, uploaded={"CAM_FRONT": np.zeros((64, 36, 3), np.uint8)})  # transposed


def test_uploaded_array_must_be_rgb_uint8():
    rf = parse_rig(small_dict())
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': must be RGB uint8 of shape \(H, W, 3\)"):
        load_rig_images(rf, None, uploaded={"CAM_FRONT": np.zeros((36, 64), np.uint8)})
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image'.*float64"):
        load_rig_images(rf, None, uploaded={"CAM_FRONT": np.zeros((36, 64, 3))})


def test_missing_image_file(tmp_path):
    path = write_rig_folder(tmp_path)
    (tmp_path / "images" / "CAM_BACK.png").unlink()
    with pytest.raises(ValueError,
                       match=r"camera CAM_BACK: field 'image': file not found \(got '.*images/CAM_BACK\.png'\)"):
        load_rig_images(load_rig_file(path), tmp_path)


def test_unreadable_image_file(tmp_path):
    path = write_rig_folder(tmp_path)
    (tmp_path / "images" / "CAM_FRONT.png").write_bytes(b"this is not a png")
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': cannot decode the file as an image"):
        load_rig_images(load_rig_file(path), tmp_path)


def test_unreadable_uploaded_bytes():
    rf = parse_rig(small_dict())
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': cannot decode.*\(got 'CAM_FRONT\.jpg'\)"):
        load_rig_images(rf, None, uploaded={"CAM_FRONT.jpg": b"\xff\xd8\xff garbage"})


# --- errors in the JSON ---------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"field 'path': rig file not found \(got '.*nope\.json'\)"):
        load_rig(tmp_path / "nope.json")
    with pytest.raises(ValueError, match=r"field 'path': not a file"):
        load_rig_file(tmp_path)


def test_malformed_json_gives_line_and_column(tmp_path):
    text = json.dumps(nuscenes_dict(), indent=2).splitlines()
    text[5] = text[5] + ","  # a stray comma on line 6
    path = tmp_path / "rig.json"
    path.write_text("\n".join(text))
    with pytest.raises(ValueError, match=r"^rig\.json: field 'json': malformed JSON at line \d+, column \d+: "):
        load_rig(path)
    expect_error('{"cameras": [\n  {"name": "CAM_FRONT",\n   "K": [[1, 2}\n]}',
                 r"rig\.json: field 'json': malformed JSON at line 3, column 15: .* \(got '\"K\": \[\[1, 2\}'\)")


def test_non_utf8_bytes():
    expect_error(b'{"cameras": "\xff\xfe"}', r"rig\.json: field 'json': not UTF-8 text")


def test_duplicate_json_key():
    expect_error('{"cameras": [], "cameras": []}', r"rig\.json: field 'cameras': the key appears twice")


@pytest.mark.parametrize("field", ["K", "rotation", "translation", "width", "height"])
def test_missing_camera_field(field):
    d = nuscenes_dict()
    del d["cameras"][1][field]
    expect_error(d, rf"^rig\.json: camera CAM_FRONT_RIGHT: field '{field}': missing field \(keys given are shown\) "
                    r"\(got \[")


def test_missing_name_and_cameras():
    d = nuscenes_dict()
    del d["cameras"][2]["name"]
    expect_error(d, r"rig\.json: camera #2: field 'name': missing field")
    expect_error({"format": "bevviz-rig"}, r"rig\.json: field 'cameras': missing field .*\(got \['format'\]\)")
    expect_error({"cameras": []}, r"field 'cameras': must be a non-empty array of camera objects \(got \[\]\)")
    expect_error({"cameras": [42]}, r"camera #0: field 'cameras': every camera must be a JSON object \(got 42\)")
    expect_error([1, 2], r"field 'rig': the top level must be a JSON object \(got 'list'\)")


def test_unknown_fields_are_rejected():
    d = nuscenes_dict()
    d["cameras"][0]["distortion"] = [0.1, 0.0, 0.0, 0.0]
    expect_error(d, r"camera CAM_FRONT: field 'distortion': unknown field; allowed: \[")
    d = nuscenes_dict()
    d["convention"]["quaternion_order"] = "xyzw"
    expect_error(d, r"field 'convention': unknown keys; allowed: .* \(got \['quaternion_order'\]\)")
    d = nuscenes_dict()
    d["camera"] = []
    expect_error(d, r"field 'camera': unknown top-level field")


@pytest.mark.parametrize("field, value, pattern", [
    ("K", [[1266.4, 0, 816.3, 0], [0, 1266.4, 491.5, 0], [0, 0, 1, 0]], r"expected shape \(3, 3\), got shape \(3, 4\)"),
    ("K", [[1266.4, 0, 816.3], [0, 1266.4, 491.5]], r"expected shape \(3, 3\), got shape \(2, 3\)"),
    ("K", [[1266.4, 0, 816.3], [0, 1266.4], [0, 0, 1]], r"must be an array of shape \(3, 3\)"),
    ("translation", [1.0, 2.0], r"expected shape \(3,\), got shape \(2,\)"),
    ("translation", 1.5, r"must be an array of numbers \(got 1\.5\)"),
    ("rotation", [0.5, 0.5, 0.5], r"must be a quaternion of 4 numbers or a 3x3 matrix \(got \[0\.5, 0\.5, 0\.5\]\)"),
    ("rotation", [[1, 0, 0], [0, 1, 0]], r"expected shape \(3, 3\), got shape \(2, 3\)"),
    ("rotation", "identity", r"must be a quaternion \[4 numbers\] or a 3x3 matrix \(got 'identity'\)"),
])
def test_wrong_shape(field, value, pattern):
    d = nuscenes_dict()
    d["cameras"][0][field] = value
    expect_error(d, rf"rig\.json: camera CAM_FRONT: field '{field}': {pattern}")


@pytest.mark.parametrize("field, value", [
    ("translation", ["1.7", 0.0, 1.5]), ("K", [[True, 0, 1], [0, 1, 1], [0, 0, 1]]), ("translation", [None, 0.0, 1.5]),
])
def test_non_numbers_are_rejected(field, value):
    d = nuscenes_dict()
    d["cameras"][0][field] = value
    expect_error(d, rf"camera CAM_FRONT: field '{field}': must be an array of numbers")


@pytest.mark.parametrize("field, literal", [("K", "NaN"), ("translation", "Infinity"), ("rotation", "-Infinity")])
def test_nan_and_inf(field, literal):
    d = nuscenes_dict()
    d["cameras"][1][field] = "@@"
    text = json.dumps(d).replace('"@@"', {"K": f"[[{literal}, 0, 1], [0, 1, 1], [0, 0, 1]]",
                                          "translation": f"[1.0, {literal}, 1.5]",
                                          "rotation": f"[1.0, 0.0, {literal}, 0.0]"}[field])
    expect_error(text, rf"rig\.json: camera CAM_FRONT_RIGHT: field '{field}': must be finite \(no NaN or inf\) "
                       r"\(got .*(nan|inf)")


def test_non_orthonormal_rotation_matrix():
    d = nuscenes_dict()
    R = Quaternion(d["cameras"][2]["rotation"]).rotation_matrix
    R[0] *= 1.01
    d["cameras"][2]["rotation"] = R.tolist()
    expect_error(d, r"rig\.json: camera CAM_BACK: field 'rotation': rotation is not orthonormal \(max \|R R\^T - I\| = "
                    r"0\.02.*\) \(got \[\[")


def test_reflection_matrix():
    d = nuscenes_dict()
    d["cameras"][0]["rotation"] = (-Quaternion(d["cameras"][0]["rotation"]).rotation_matrix).tolist()
    expect_error(d, r"camera CAM_FRONT: field 'rotation': rotation has det -1")


def test_zero_quaternion():
    d = nuscenes_dict()
    d["cameras"][1]["rotation"] = [0, 0, 0, 0]
    expect_error(d, r"rig\.json: camera CAM_FRONT_RIGHT: field 'rotation': quaternion has zero norm "
                    r"\(got \[0\., 0\., 0\., 0\.\]\)")


def test_duplicate_camera_name():
    d = nuscenes_dict()
    d["cameras"][2]["name"] = "CAM_FRONT"
    expect_error(d, r"rig\.json: camera CAM_FRONT: field 'name': duplicate camera name \(got 'CAM_FRONT'\)")


@pytest.mark.parametrize("field, value", [("width", 0), ("height", -900), ("width", 1600.5), ("height", "900"),
                                          ("width", None), ("height", True)])
def test_bad_image_size_fields(field, value):
    d = nuscenes_dict()
    d["cameras"][0][field] = value
    expect_error(d, rf"camera CAM_FRONT: field '{field}': must be a positive integer \(got ")


def test_bad_intrinsics():
    d = nuscenes_dict()
    d["cameras"][0]["K"][1][1] = -1266.4
    expect_error(d, r"camera CAM_FRONT: field 'K': fx and fy must be > 0 .*fy=-1266\.4")
    d = nuscenes_dict()
    d["cameras"][0]["K"][2] = [0, 0, 2]
    expect_error(d, r"camera CAM_FRONT: field 'K': must be upper triangular with last row \(0, 0, 1\)")


@pytest.mark.parametrize("block, pattern", [
    ({"extrinsic": "world_to_cam"}, r"field 'extrinsic': must be one of .* \(got 'world_to_cam'\)"),
    ({"quaternion": "xyz"}, r"field 'quaternion': must be one of .* \(got 'xyz'\)"),
    ({"camera_axes": "ENU"}, r"field 'camera_axes': must be one of .* \(got 'ENU'\)"),
    ({"camera_axes": 3}, r"field 'camera_axes': must be a string \(got 3\)"),
    ("nuscenes", r"field 'convention': must be an object"),
])
def test_bad_convention(block, pattern):
    d = nuscenes_dict()
    d["convention"] = block
    expect_error(d, rf"rig\.json: {pattern}")


def test_bad_format_and_version():
    d = nuscenes_dict()
    d["format"] = "nuscenes"
    expect_error(d, r"field 'format': must be 'bevviz-rig' \(got 'nuscenes'\)")
    d = nuscenes_dict()
    d["version"] = 2
    expect_error(d, r"field 'version': only version 1 is supported \(got 2\)")


def test_bad_image_field():
    d = nuscenes_dict()
    d["cameras"][0]["image"] = 17
    expect_error(d, r"camera CAM_FRONT: field 'image': must be a file path \(string\) or null \(got 17\)")


def test_ignore_polygons_are_read_checked_and_written_back(tmp_path):
    """A camera's ``ignore`` polygons (its car body, in pixels) survive a round trip; a
    malformed one is named with the camera, the field and the polygon's index."""
    d = nuscenes_dict()
    body = [[[0, 800], [1599, 800], [1599, 899], [0, 899]], [[0, 0], [10, 0], [10.5, 10]]]
    d["cameras"][1]["ignore"] = body
    rf = parse_rig(d)
    name = d["cameras"][1]["name"]
    assert rf.ignore == {name: [[list(map(float, p)) for p in poly] for poly in body]}
    path = save_rig(rf.rig, tmp_path / "rig.json", ignore=rf.ignore)
    assert load_rig_file(path).ignore == rf.ignore
    assert parse_rig(nuscenes_dict()).ignore == {}
    for bad, pattern in (
        ([[0, 1], [2, 3]], r"field 'ignore': must be a list of polygons|polygon 0 must"),
        ([[[0, 0], [1, 1]]], r"polygon 0 must hold at least three finite \(u, v\) pixels"),
        ([[[0, 0], [1, 1], [float("nan"), 2]]], r"polygon 0 must hold at least three finite"),
        ([[[0, 0], [1, 1], [2, 2]], "abc"], r"polygon 1 must be a list of \(u, v\) pixels"),
        ("body", r"must be a list of polygons"),
    ):
        d["cameras"][1]["ignore"] = bad
        with pytest.raises(ValueError, match=rf"camera {name}: field 'ignore': .*({pattern})"):
            parse_rig(d)
    with pytest.raises(ValueError, match="ignore names an unknown camera"):
        rig_to_dict(rf.rig, ignore={"CAM_NONE": body})


def test_no_partial_rig_on_error(tmp_path):
    """An error in the last camera means no rig at all (and the caller's old state stays)."""
    d = nuscenes_dict()
    d["cameras"][-1]["translation"] = [0.0, 0.0]
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(d))
    result = None
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'translation'"):
        result = load_rig_file(path)
    assert result is None


def test_input_dict_is_not_modified():
    d = nuscenes_dict()
    before = copy.deepcopy(d)
    parse_rig(d)
    assert d == before


def test_raw_cameras_keep_the_file_convention():
    d = rig_to_dict(parse_rig(nuscenes_dict()).rig, Convention("ego_to_sensor", "xyzw", "FLU"))
    rf = parse_rig(d)
    raw = rf.raw_cameras[0]
    assert isinstance(raw, RawCamera)
    np.testing.assert_array_equal(raw.rotation, d["cameras"][0]["rotation"])
    np.testing.assert_array_equal(raw.translation, d["cameras"][0]["translation"])


# --- limits and the validation story (issue 14) ---------------------------------------------------

def fast_and_small(fn, seconds: float = 1.0, peak_bytes: int = 20_000_000):
    """Run ``fn``; assert it raised a ValueError within ``seconds`` and a traced peak of ``peak_bytes``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError) as info:
            fn()
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < seconds and peak < peak_bytes, (elapsed, peak)
    return str(info.value)


def many_cameras(n: int) -> str:
    d = nuscenes_dict()
    cam = d["cameras"][0]
    d["cameras"] = [{**cam, "name": f"CAM_{i:04d}", "image": f"images/CAM_{i:04d}.jpg"} for i in range(n)]
    return json.dumps(d)


@pytest.mark.parametrize("n", [500, 1000])
def test_a_rig_of_hundreds_of_cameras_is_refused_before_any_camera_is_read(n, monkeypatch):
    text = many_cameras(n)
    assert n < 1000 or len(text) > 250_000  # the file was 282 KB
    monkeypatch.setattr(rig_json, "_camera", lambda *a: pytest.fail("a camera was read"))
    msg = fast_and_small(lambda: parse_rig(text, source="big.json"))
    assert msg == f"big.json: field 'cameras': more than MAX_CAMERAS = 32 (got '{n} cameras')"


def test_max_cameras_are_accepted():
    assert len(parse_rig(many_cameras(MAX_CAMERAS)).rig) == MAX_CAMERAS


@pytest.mark.parametrize("width", ["9223372036854775808", "1e9", "1000000000", "100000000000000000000", "1e20",
                                   "1" + "0" * 400])
def test_huge_widths_in_the_text_are_refused_as_integers(width):
    text = json.dumps(nuscenes_dict()).replace('"width": 1600', f'"width": {width}', 1)
    msg = fast_and_small(lambda: parse_rig(text, source="rig.json"), seconds=0.5)
    assert re.match(r"rig\.json: (camera CAM_FRONT: field 'width': more than MAX_IMAGE_SIDE = 8192|field 'json': "
                    r"numbers must fit in a float64)", msg), msg


def test_huge_widths_in_a_dict_and_a_too_long_integer():
    for width in (2 ** 63, 10 ** 20, 1e9, 10 ** 5000):
        d = nuscenes_dict()
        d["cameras"][0]["height"] = width
        expect_error_obj(d, r"camera CAM_FRONT: field 'height': more than MAX_IMAGE_SIDE = 8192")
    expect_error('{"cameras": [], "version": ' + "9" * 400 + "}",
                 r"rig\.json: field 'json': numbers must fit in a float64 \(at most 309 digits\) "
                 r"\(got 'an integer of 400 digits'\)")
    d = nuscenes_dict()
    d["cameras"][0]["translation"] = [10 ** 400, 0, 0]
    expect_error_obj(d, r"camera CAM_FRONT: field 'translation': numbers must fit in a float64")


def expect_error_obj(data: dict, pattern: str) -> None:
    """``expect_error`` on the Python object itself (not its JSON text)."""
    with pytest.raises(ValueError, match=pattern):
        parse_rig(data, source="rig.json")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_deeply_nested_json_is_refused_before_decoding(depth):
    text = '{"cameras": ' + "[" * depth + "]" * depth + "}"
    msg = fast_and_small(lambda: parse_rig(text, source="deep.json"))
    assert msg == (f"deep.json: field 'json': more than MAX_JSON_DEPTH = {MAX_JSON_DEPTH} "
                   f"(got 'nested {depth + 1} deep')")
    unclosed = "[" * depth  # never closed: still the depth error, never a RecursionError
    assert "MAX_JSON_DEPTH" in fast_and_small(lambda: parse_rig(unclosed.encode()))


def test_deep_python_objects_are_refused_without_recursion():
    deep: list = [1.0]
    for _ in range(50_000):
        deep = [deep]
    d = nuscenes_dict()
    d["cameras"][0]["K"] = deep
    assert "more than MAX_JSON_DEPTH" in fast_and_small(lambda: parse_rig(d))
    expect_error_obj({"cameras": [{3: "x"}]}, r"field 'json': object keys must be strings \(got 3\)")


def test_brackets_inside_strings_do_not_count_as_nesting():
    d = nuscenes_dict()
    d["cameras"][0]["image"] = "[" * 500 + '\\"{{{{' + "]" * 3
    assert parse_rig(json.dumps(d)).image_files["CAM_FRONT"] == d["cameras"][0]["image"]
    # An unterminated string with many escaped quotes is scanned in linear time.
    text = '{"cameras": "' + '\\"[' * 300_000
    assert "malformed JSON" in fast_and_small(lambda: parse_rig(text), peak_bytes=60_000_000)


def test_a_text_over_max_rig_json_bytes_is_refused_before_decoding(tmp_path, monkeypatch):
    big = " " * (MAX_RIG_JSON_BYTES + 1)
    assert fast_and_small(lambda: parse_rig(big.encode(), source="big.json"), peak_bytes=3 * MAX_RIG_JSON_BYTES) == (
        f"big.json: field 'json': more than MAX_RIG_JSON_BYTES = 2097152 (got '{MAX_RIG_JSON_BYTES + 1} bytes')")
    path = tmp_path / "big.json"
    path.write_bytes(big.encode())
    monkeypatch.setattr(type(path), "read_bytes", lambda self: pytest.fail("read before the size check"))
    with pytest.raises(ValueError, match=r"field 'path': more than MAX_RIG_JSON_BYTES = 2097152 \(got '.*big\.json: "
                                         r"2097153 bytes'\)"):
        load_rig_file(path)


def test_a_quaternion_of_norm_2_names_its_norm():
    d = nuscenes_dict()
    d["cameras"][1]["rotation"] = [2 * x for x in d["cameras"][1]["rotation"]]
    expect_error(d, r"rig\.json: camera CAM_FRONT_RIGHT: field 'rotation': quaternion norm is 2, not 1 \(off by more "
                    r"than QUATERNION_NORM_TOL = 0\.001\)")


@pytest.mark.parametrize("name, why", [
    ("x" * 10_000, "has 10000 characters, more than CAMERA_NAME_MAX_CHARS = 64"),
    ("CAM\x07FRONT", r"character '\\x07' is not allowed"),
    ("CAM\u202eTNORF", r"character '\\u202e' is not allowed"),
    ("**CAM**", r"character '\*' is not allowed"),
    ("CAM_FRONT](javascript:x)", r"character '\]' is not allowed"),
    ("<script>", "character '<' is not allowed"),
])
def test_camera_names_outside_the_rule_are_refused(name, why):
    d = nuscenes_dict()
    d["cameras"][1]["name"] = name
    msg = fast_and_small(lambda: parse_rig(json.dumps(d), source="rig.json"))
    assert re.match(rf"rig\.json: camera #1: field 'name': {why}; a camera name is 1 to 64 characters", msg), msg
    assert len(msg) < 600


def _upload_png(arr: np.ndarray) -> bytes:
    ok, enc = cv2.imencode(".png", arr)
    assert ok
    return enc.tobytes()


def test_an_uploaded_decompression_bomb_is_refused_from_its_header(monkeypatch):
    rf = parse_rig(small_dict())
    monkeypatch.setattr(cv2, "imdecode", lambda *a: pytest.fail("decoded before the header check"))
    bomb = png_bomb()
    msg = fast_and_small(lambda: load_rig_images(rf, None, uploaded={"CAM_FRONT.png": bomb}), seconds=0.5)
    assert msg == ("camera CAM_FRONT: field 'image': more than MAX_IMAGE_SIDE = 8192 "
                   "(got 'CAM_FRONT.png: 30000 x 30000 px')")
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'image': image is 1600 x 900 px but the calibration "
                                         r"says width x height = 64 x 36"):
        load_rig_images(rf, None, uploaded={"CAM_BACK": png_header(1600, 900) + b"\0" * 12})


def test_conversions_come_back_as_warnings_naming_camera_and_file(tmp_path):
    rgb = camera_image(0)
    grey, rgba = rgb[..., 0], np.dstack([rgb[..., ::-1], np.full(rgb.shape[:2], 9, np.uint8)])
    deep = np.ascontiguousarray(rgb[..., ::-1].astype(np.uint16) * 257)
    path = write_rig_folder(tmp_path)
    cv2.imwrite(str(tmp_path / "images" / "CAM_BACK.png"), deep)
    images = load_rig_images(load_rig_file(path), tmp_path,
                             uploaded={"CAM_FRONT.png": _upload_png(grey), "CAM_FRONT_RIGHT": _upload_png(rgba)})
    assert isinstance(images, RigImages) and isinstance(images, dict) and list(images) == NAMES
    assert images.warnings == ["camera CAM_FRONT: CAM_FRONT.png: greyscale replicated to RGB",
                               "camera CAM_FRONT_RIGHT: CAM_FRONT_RIGHT: alpha channel dropped",
                               "camera CAM_BACK: images/CAM_BACK.png: 16-bit samples cut to 8 bits"]
    assert images.conversions["CAM_BACK"] == ("16-bit samples cut to 8 bits",)
    np.testing.assert_array_equal(images["CAM_BACK"], rgb)
    assert load_rig_images(load_rig_file(write_rig_folder(tmp_path / "clean")), tmp_path / "clean").warnings == []


# --- paths stay inside the JSON's folder ---------------------------------------------------------

@pytest.mark.parametrize("where", ["../outside.png", "images/../../outside.png", "ABSOLUTE"])
def test_image_paths_outside_the_folder_are_refused(tmp_path, where):
    folder = tmp_path / "rig"
    outside = tmp_path / "outside.png"
    write_image(outside, camera_image(0))
    d = small_dict()
    d["cameras"][0]["image"] = str(outside) if where == "ABSOLUTE" else where
    path = write_rig_folder(folder, d) if folder.mkdir() is None else None
    rf = load_rig_file(path)
    with pytest.raises(ValueError, match=rf"camera CAM_FRONT: field 'image': resolves to {re.escape(str(outside))}, "
                                         rf"outside the rig's folder {re.escape(str(folder.resolve()))}; images must "
                                         r"lie inside the JSON file's folder \(allow_outside=True reads it anyway\) "
                                         rf"\(got '{re.escape(d['cameras'][0]['image'])}'\)"):
        load_rig_images(rf, folder)
    images = load_rig_images(rf, folder, allow_outside=True)
    np.testing.assert_array_equal(images["CAM_FRONT"], camera_image(0))


def test_a_symlink_out_of_the_folder_is_refused_and_one_inside_is_fine(tmp_path):
    folder = tmp_path / "rig"
    folder.mkdir()
    path = write_rig_folder(folder)
    secret = tmp_path / "secret.png"
    write_image(secret, camera_image(0))
    (folder / "images" / "CAM_FRONT.png").unlink()
    (folder / "images" / "CAM_FRONT.png").symlink_to(secret)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': resolves to .*secret\.png, outside"):
        load_rig_images(load_rig_file(path), folder)
    (folder / "images" / "CAM_FRONT.png").unlink()
    write_image(folder / "real.png", camera_image(0))
    (folder / "images" / "CAM_FRONT.png").symlink_to(folder / "real.png")
    np.testing.assert_array_equal(load_rig_images(load_rig_file(path), folder)["CAM_FRONT"], camera_image(0))


def test_unresolvable_paths_are_named_errors(tmp_path):
    d = small_dict()
    d["cameras"][0]["image"] = "images/a\x00b.png"
    rf = parse_rig(d)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': cannot resolve the path"):
        load_rig_images(rf, tmp_path)
    d["cameras"][0]["image"] = "x" * 5000 + ".png"
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': (cannot resolve|cannot read|file not)"):
        load_rig_images(parse_rig(d), tmp_path)


# --- fuzz: any input gives a rig or a named error, within the budget ------------------------------

_LEAVES = (st.none() | st.booleans() | st.integers() | st.integers(-(10 ** 400), 10 ** 400)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
_JSON_LIKE = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=24)


def rig_or_named_error(data, source: str = "fuzz.json") -> None:
    try:
        rf = parse_rig(data, source=source)
    except ValueError as exc:
        assert str(exc).startswith(f"{source}: ") and "field '" in str(exc), str(exc)
    else:
        assert isinstance(rf, RigFile) and 1 <= len(rf.rig) <= MAX_CAMERAS


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(_JSON_LIKE)
def test_fuzz_json_like_objects(value):
    rig_or_named_error(value)
    rig_or_named_error({"cameras": value})
    rig_or_named_error(json.dumps(value))


_KEYS = st.sampled_from(["name", "K", "rotation", "translation", "width", "height", "image", "distortion"])


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(camera=st.integers(0, 2), key=_KEYS, value=_JSON_LIKE, drop=st.booleans(),
       top=st.sampled_from(["format", "version", "convention", "cameras", "extra", None]), top_value=_JSON_LIKE)
def test_fuzz_one_field_of_a_valid_rig(camera, key, value, drop, top, top_value):
    d = small_dict()
    if drop:
        d["cameras"][camera].pop(key, None)
    else:
        d["cameras"][camera][key] = value
    rig_or_named_error(d)
    if top is not None:
        d[top] = top_value
        rig_or_named_error(d)
    rig_or_named_error(json.dumps(d).encode())


_VALID_TEXT = json.dumps(small_dict(), indent=1)


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300),
    st.builds(lambda cut: _VALID_TEXT[:cut], st.integers(0, len(_VALID_TEXT))),
    st.builds(lambda at, junk: _VALID_TEXT[:at] + junk + _VALID_TEXT[at:], st.integers(0, len(_VALID_TEXT)),
              st.text(alphabet='[]{}",:0123456789.eE-+ \\nulltrefas\x00\ud800', max_size=12)),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 40)),
))
def test_fuzz_raw_text(text):
    rig_or_named_error(text)
