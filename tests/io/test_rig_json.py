"""Tests for bevviz.io.rig_json: the JSON rig format, its images and its errors."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
from pyquaternion import Quaternion

from bevviz.camera import Rig
from bevviz.conventions import NUSCENES, Convention, RawCamera
from bevviz.io.images import write_image
from bevviz.io.rig_json import (
    RigFile,
    load_rig,
    load_rig_file,
    load_rig_images,
    parse_rig,
    rig_to_dict,
    save_rig,
)

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
                                         r"\(got 'images/CAM_FRONT_RIGHT\.png'\)"):
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
