"""The embedded nuScenes-format sample loads with nuscenes-devkit and through bevviz.io.nuscenes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from bevviz.camera import NUSCENES_CAMERAS
from bevviz.cli import main
from bevviz.errors import InputError
from bevviz.io import nuscenes as nu
from bevviz.io import nuscenes_boxes as nb
from bevviz.projection import project_points
from bevviz.rotations import quaternion_to_matrix, rotation_angle_deg
from bevviz.synthetic import BOXES, camera_rays, cast_rays, default_world, nuscenes_like_rig

from .test_images import png_bomb

DATAROOT = Path(__file__).resolve().parents[2] / "sample_data" / "nuscenes"


@pytest.fixture(scope="module")
def nusc():
    return nu.open_dataset(DATAROOT, "v1.0-mini")


@pytest.fixture(scope="module")
def miscal() -> dict:
    return json.loads((DATAROOT / "miscalibration.json").read_text())


def _assert_rig_close(rig, truth, tol=1e-9):
    assert rig.names == truth.names
    for a, b in zip(rig, truth):
        np.testing.assert_allclose(a.K, b.K, atol=tol)
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=tol)
        assert (a.width, a.height) == (b.width, b.height)


def test_devkit_loads_the_sample_unchanged():
    from nuscenes.nuscenes import NuScenes

    ds = NuScenes(version="v1.0-mini", dataroot=str(DATAROOT), verbose=False)
    # scene-0001 and scene-0002 (2 samples each) and the drift scene scene-0003 (4 samples).
    assert len(ds.scene) == 3 and len(ds.sample) == 8
    sample = ds.sample[0]
    assert set(NUSCENES_CAMERAS) | {"LIDAR_TOP"} == set(sample["data"])
    path, boxes, K = ds.get_sample_data(sample["data"]["CAM_FRONT"])
    assert Path(path).is_file() and K.shape == (3, 3) and boxes


def test_load_sample_default_is_scene_a_with_the_true_rig():
    rig, images = nu.load_sample(DATAROOT)
    assert rig.names == list(NUSCENES_CAMERAS)
    assert list(images) == list(NUSCENES_CAMERAS)
    for img in images.values():
        assert img.shape == (900, 1600, 3) and img.dtype == np.uint8
    _assert_rig_close(rig, nuscenes_like_rig())


def test_scene_and_sample_listing(nusc):
    scenes = nu.list_scenes(nusc)
    assert [s.name for s in scenes] == ["scene-0001", "scene-0002", "scene-0003"]
    assert [s.n_samples for s in scenes] == [2, 2, 4]
    samples = nu.list_samples(nusc, scenes[0].token)
    assert [s.index for s in samples] == [0, 1]
    assert samples[0].timestamp < samples[1].timestamp
    assert samples[0].cameras == NUSCENES_CAMERAS
    # Every sample of scene A carries the true rig; the ego moves along the road.
    rig, images = nu.load_sample_from(nusc, samples[1].token)
    _assert_rig_close(rig, nuscenes_like_rig())
    np.testing.assert_allclose(nu.ego_pose(nusc, samples[1].token)[:3, 3], [5.0, 0.0, 0.0])


def test_where_a_sample_sits_and_which_are_around_it(nusc, tmp_path):
    scenes = nu.list_scenes(nusc)
    samples = nu.list_samples(nusc, scenes[2].token)
    tokens = [s.token for s in samples]
    assert len(tokens) == 4
    assert nu.sample_meta(nusc, tokens[2]) == {"scene": "scene-0003", "scene_token": scenes[2].token,
                                               "sample": tokens[2], "sample_index": 2,
                                               "timestamp": samples[2].timestamp}
    with pytest.raises(InputError, match=r"field '--sample': no such sample in the dataset \(got 'deadbeef'\)"):
        nu.sample_meta(nusc, "deadbeef", "--sample")
    assert nu.neighbour_samples(nusc, tokens[0], 3) == tokens[1:3]
    assert nu.neighbour_samples(nusc, tokens[2], 4) == [tokens[3], tokens[1], tokens[0]]  # then the preceding ones
    assert nu.neighbour_samples(nusc, tokens[3], 3) == [tokens[2], tokens[1]]  # the scene's end: nearest first
    assert nu.neighbour_samples(nusc, tokens[0], 1) == []
    assert nu.first_sample(nusc, "SOURCE", "x") == nu.list_samples(nusc, scenes[0].token)[0].token
    with pytest.raises(InputError, match=r"field 'SOURCE': the dataset has no scenes \(got 'empty'\)"):
        nu.first_sample(SimpleNamespace(scene=[]), "SOURCE", "empty")
    assert nu.is_dataroot(DATAROOT) and not nu.is_dataroot(DATAROOT / "v1.0-mini") and not nu.is_dataroot(tmp_path)


def test_scene_b_stores_the_recorded_rotation_error(nusc, miscal):
    scene_b = next(s for s in nu.list_scenes(nusc) if s.name == miscal["scene"])
    truth = nuscenes_like_rig()
    for sample in nu.list_samples(nusc, scene_b.token):
        rig, _ = nu.load_sample_from(nusc, sample.token, with_images=False)
        for cam in rig:
            angle = rotation_angle_deg(cam.cam_from_ego[:3, :3], truth[cam.name].cam_from_ego[:3, :3])
            if cam.name == miscal["camera"]:
                assert angle == pytest.approx(miscal["rotation_error"]["degrees"], abs=1e-6)
                np.testing.assert_allclose(cam.position, truth[cam.name].position, atol=1e-9)
            else:
                assert angle < 1e-6
    # The record's quaternions: the true one is the rig's, the stored one is in the table.
    cs = nusc.get("calibrated_sensor", miscal["calibrated_sensor_token"])
    np.testing.assert_allclose(cs["rotation"], miscal["stored_rotation_wxyz"], atol=1e-12)
    np.testing.assert_allclose(quaternion_to_matrix(miscal["true_rotation_wxyz"]),
                               truth[miscal["camera"]].ego_from_cam[:3, :3], atol=1e-9)
    # The error is a yaw about ego z: R_stored = Rz(deg) @ R_true.
    R_rel = quaternion_to_matrix(miscal["stored_rotation_wxyz"]) @ quaternion_to_matrix(miscal["true_rotation_wxyz"]).T
    yaw = np.degrees(np.arctan2(R_rel[1, 0], R_rel[0, 0]))
    assert yaw == pytest.approx(miscal["rotation_error"]["degrees"], abs=1e-9)


def test_devkit_annotations_land_on_their_boxes_in_the_images(nusc):
    """Independent check of the sample's geometry with nuscenes-devkit's own transforms:
    annotated box centres, moved into each camera frame by the devkit (ego pose and
    calibrated_sensor) and projected with view_points, land on pixels of that box."""
    from nuscenes.utils.geometry_utils import view_points

    world = default_world()
    truth = nuscenes_like_rig()
    checked = 0
    for sample in nusc.sample:
        if nusc.get("scene", sample["scene_token"])["name"] != "scene-0001":
            continue
        _, images = nu.load_sample_from(nusc, sample["token"])
        pose = nu.ego_pose(nusc, sample["token"])
        for ch in NUSCENES_CAMERAS:
            _, boxes, K = nusc.get_sample_data(sample["data"][ch])
            for box in boxes:
                if box.center[2] <= 0.5:
                    continue
                u, v = view_points(box.center[:, None], K, normalize=True)[:2, 0]
                pu, pv = int(round(u)), int(round(v))
                if not (0 <= pu < 1600 and 0 <= pv < 900):
                    continue
                ann = nusc.get("sample_annotation", box.token)
                i = next(k for k, b in enumerate(BOXES) if np.allclose(b.center3, ann["translation"]))
                origin, d = camera_rays(truth[ch], pose, np.array([[u, v]]))
                hit = cast_rays(world, origin, d)
                if hit.box[0] != i:  # hidden behind another box
                    continue
                # Seen obliquely, a box centre can project onto a vertical edge, which the
                # renderer draws as a dark outline: skip pixels within 15 cm of an edge.
                local = (hit.point[0] - BOXES[i].center3) @ BOXES[i].rotation
                if (np.abs(np.abs(local) - np.array(BOXES[i].size) / 2) < 0.15).sum() >= 2:
                    continue
                face = np.asarray(BOXES[i].face_colors[hit.face[0]], float)
                px = images[ch][pv, pu].astype(float)
                # Shading and exposure scale the face colour by roughly 0.7 .. 1.1.
                s = float(px @ face / (face @ face))
                assert 0.6 < s < 1.15 and np.linalg.norm(px - s * face) < 25, (ch, BOXES[i].name, px, face)
                checked += 1
    print(f"devkit box centres checked: {checked}")
    assert checked >= 5


def test_projection_of_the_stored_rig_matches_the_devkit(nusc):
    """bevviz's cam_from_ego (converted at load) projects ego points like the devkit's
    calibrated_sensor inverse does."""
    from pyquaternion import Quaternion

    rig, _ = nu.load_sample_from(nusc, nusc.scene[1]["first_sample_token"], with_images=False)
    pts = np.array([[8.0, -3.0, 0.0], [15.0, 2.0, 1.0], [-9.0, 1.0, 0.5], [2.0, -9.0, 0.0], [1.0, 8.0, 0.2]])
    proj = project_points(pts, rig)
    s = nusc.get("sample", nusc.scene[1]["first_sample_token"])
    for ci, ch in enumerate(rig.names):
        cs = nusc.get("calibrated_sensor", nusc.get("sample_data", s["data"][ch])["calibrated_sensor_token"])
        p_cam = (pts - np.array(cs["translation"])) @ Quaternion(cs["rotation"]).rotation_matrix  # R^T (p - t)
        front = p_cam[:, 2] > 0.1
        uv = (p_cam @ np.array(cs["camera_intrinsic"]).T)[:, :2] / p_cam[:, 2:]
        np.testing.assert_allclose(proj.uv[ci].numpy()[front], uv[front], atol=1e-7)


def test_errors_name_the_field_and_value(tmp_path, nusc):
    with pytest.raises(ValueError, match="dataroot.*no_such_folder"):
        nu.load_sample(tmp_path / "no_such_folder")
    with pytest.raises(ValueError, match="version.*v9.9-nope"):
        nu.load_sample(DATAROOT, version="v9.9-nope")
    with pytest.raises(ValueError, match="sample_token.*deadbeef"):
        nu.load_sample(DATAROOT, sample_token="deadbeef")
    with pytest.raises(ValueError, match="sample_token.*deadbeef"):
        nu.load_sample_from(nusc, "deadbeef")
    with pytest.raises(ValueError, match="scene_token.*deadbeef"):
        nu.list_samples(nusc, "deadbeef")


def test_broken_tables_are_a_named_error(tmp_path):
    root = tmp_path / "nuscenes"
    shutil.copytree(DATAROOT / "v1.0-mini", root / "v1.0-mini")
    shutil.copytree(DATAROOT / "maps", root / "maps")
    (root / "v1.0-mini" / "sample.json").write_text("[{not json")
    with pytest.raises(InputError, match="dataroot.*field .sample.json.: malformed JSON at line 1"):
        nu.open_dataset(root)
    # An empty sample table: every sample_data and scene points nowhere; each is a reported
    # problem (not a bare KeyError from the devkit's index), and loading a sample is a named error.
    (root / "v1.0-mini" / "sample.json").write_text("[]")
    problems, blocked = nu.record_problems(nu.open_dataset(root))
    assert {(p.table, p.field) for p in problems} >= {("sample_data", "sample_token"),
                                                      ("scene", "first_sample_token")} and not blocked
    with pytest.raises(ValueError, match="sample_token"):
        nu.load_sample(root)
    (root / "v1.0-mini" / "sample.json").unlink()
    with pytest.raises(ValueError, match="dataroot.*missing"):
        nu.open_dataset(root)


def test_missing_image_is_a_named_error(tmp_path):
    root = tmp_path / "nuscenes"
    shutil.copytree(DATAROOT / "v1.0-mini", root / "v1.0-mini")
    shutil.copytree(DATAROOT / "maps", root / "maps")
    with pytest.raises(ValueError, match="image"):
        nu.load_sample(root)


# --- hostile datasets (issue 14): the checked image reader and unit quaternions -------------------


@pytest.fixture
def copied(tmp_path) -> Path:
    """A writable copy of the embedded dataset (4 MB)."""
    root = tmp_path / "nuscenes"
    shutil.copytree(DATAROOT, root)
    return root


def _rewrite(root: Path, table: str, edit) -> None:
    path = root / "v1.0-mini" / f"{table}.json"
    rows = json.loads(path.read_text())
    edit(rows)
    path.write_text(json.dumps(rows))


def _first_camera_record(root: Path, channel: str = "CAM_FRONT") -> dict:
    rows = json.loads((root / "v1.0-mini" / "sample_data.json").read_text())
    return next(r for r in rows if r["is_key_frame"] and f"/{channel}/" in r["filename"] and not r["prev"])


def _replace_image(root: Path, record: dict, encoded: bytes, suffix: str = ".png") -> str:
    """Store ``encoded`` as ``record``'s image under a new file name; return the name the table gives."""
    name = record["filename"].rsplit(".", 1)[0] + suffix
    (root / name).write_bytes(encoded)

    def edit(rows):
        next(r for r in rows if r["token"] == record["token"])["filename"] = name
    _rewrite(root, "sample_data", edit)
    return name


def test_conversions_of_a_dataset_image_come_back_as_warnings(copied):
    rec = _first_camera_record(copied)
    grey16 = (np.arange(rec["width"], dtype=np.uint16)[None, :] * 40).repeat(rec["height"], 0)
    name = _replace_image(copied, rec, cv2.imencode(".png", grey16)[1].tobytes())
    rig, images = nu.load_sample(copied, sample_token=rec["sample_token"])
    assert images["CAM_FRONT"].shape == (900, 1600, 3) and images["CAM_FRONT"].dtype == np.uint8
    np.testing.assert_array_equal(images["CAM_FRONT"][0, :, 0], (grey16[0] >> 8).astype(np.uint8))
    assert images.warnings == [f"camera CAM_FRONT: {name}: 16-bit samples cut to 8 bits, "
                               "greyscale replicated to RGB"]
    assert images.conversions == {"CAM_FRONT": ("16-bit samples cut to 8 bits", "greyscale replicated to RGB")}
    # ... and they reach the check's --json notes (issue 22: they were dropped there)
    out = copied / "check.json"
    assert main(["check", str(copied), "--sample", rec["sample_token"], "--no-lidar", "--no-estimate",
                 "--json", str(out)]) in (0, 1)
    assert images.warnings[0] in json.loads(out.read_text())["notes"]
    # The unconverted sample has none.
    assert nu.load_sample(DATAROOT)[1].warnings == []


def test_a_dataset_image_of_the_wrong_size_is_refused_from_its_header(copied, monkeypatch):
    rec = _first_camera_record(copied)
    _replace_image(copied, rec, png_bomb(800, 450, 2000))
    monkeypatch.setattr(cv2, "imdecode", lambda *a, **k: pytest.fail("decoded before the header was checked"))
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': image is 800 x 450 px but the "
                                         r"calibration says width x height = 1600 x 900"):
        nu.load_sample(copied, sample_token=rec["sample_token"])
    _replace_image(copied, rec, png_bomb())
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'image': more than MAX_IMAGE_SIDE = 8192"):
        nu.load_sample(copied, sample_token=rec["sample_token"])


def test_a_recorded_size_over_the_limits_is_a_named_error(copied):
    rec = _first_camera_record(copied)

    def edit(rows):
        next(r for r in rows if r["token"] == rec["token"])["width"] = 2 ** 63
    _rewrite(copied, "sample_data", edit)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'sample_data.width': more than MAX_IMAGE_SIDE"):
        nu.load_sample(copied, sample_token=rec["sample_token"])


def _scale_quaternion(token: str, factor: float):
    def edit(rows):
        rec = next(r for r in rows if r["token"] == token)
        rec["rotation"] = [factor * q for q in rec["rotation"]]
    return edit


def test_ego_pose_and_box_quaternions_off_unit_norm_are_named_errors(copied, nusc):
    sample = nusc.sample[0]
    pose = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])["ego_pose_token"]  # the cameras' too
    ann = sample["anns"][0]
    # Rounding is normalised away: 1e-7 off still loads, to the same rotation.
    _rewrite(copied, "ego_pose", _scale_quaternion(pose, 1 + 1e-7))
    _rewrite(copied, "sample_annotation", _scale_quaternion(ann, 1 - 1e-7))
    ds = nu.open_dataset(copied)
    np.testing.assert_allclose(nu.ego_pose(ds, sample["token"]), nu.ego_pose(nusc, sample["token"]), atol=1e-12)
    assert len(nb.load_boxes_from(ds, sample["token"])) == len(sample["anns"])
    # A scaled box quaternion is refused ...
    _rewrite(copied, "sample_annotation", _scale_quaternion(ann, 1.01))
    with pytest.raises(ValueError, match=rf"field 'sample_annotation {ann} rotation': quaternion norm is 1\.01, "
                                         r"not 1 \(off by more than QUATERNION_NORM_TOL = 0\.001\)"):
        nb.load_boxes_from(nu.open_dataset(copied), sample["token"])
    # ... and so is a scaled ego pose, wherever it is read.
    _rewrite(copied, "ego_pose", _scale_quaternion(pose, 2.0))
    ds = nu.open_dataset(copied)
    for read in (nu.ego_pose, nu.load_lidar_from, nb.load_boxes_from):
        with pytest.raises(ValueError, match=r"field 'ego_pose\.rotation': quaternion norm is 2, not 1 \(off by "
                                             r"more than QUATERNION_NORM_TOL = 0\.001\)"):
            read(ds, sample["token"])


def test_a_lidar_mount_quaternion_off_unit_norm_is_a_named_error(copied, nusc):
    sample = nusc.sample[0]
    cs_token = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])["calibrated_sensor_token"]
    _rewrite(copied, "calibrated_sensor", _scale_quaternion(cs_token, 3.0))
    with pytest.raises(ValueError, match=r"field 'calibrated_sensor\.rotation': quaternion norm is 3, not 1"):
        nu.load_lidar_from(nu.open_dataset(copied), sample["token"])



@pytest.mark.parametrize("where", ["../outside.jpg", "absolute"])
def test_sample_data_paths_outside_the_dataroot_are_refused(copied, where):
    """A table naming ``../`` or an absolute path must not make the loader read outside the dataset."""
    record = _first_camera_record(copied)
    outside = copied.parent / "outside.jpg"
    shutil.copy(copied / record["filename"], outside)
    name = "../outside.jpg" if where != "absolute" else str(outside)

    def edit(rows):
        next(r for r in rows if r["token"] == record["token"])["filename"] = name

    _rewrite(copied, "sample_data", edit)
    with pytest.raises(ValueError, match=r"image.*points outside the dataroot.*outside\.jpg"):
        nu.load_sample_from(nu.open_dataset(copied), record["sample_token"])
