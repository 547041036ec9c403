"""bevviz.session.loaders: one loader for every source; the image lookup; names never shadow paths."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import numpy as np
import pytest

from bevviz.calibration import perturb_camera
from bevviz.errors import InputError
from bevviz.io.frame_folder import load_frame_folder
from bevviz.io.rig_json import load_rig_file
from bevviz.session import (
    DEFAULT_FRAMES,
    MAX_FRAMES,
    Doctor,
    dataset,
    drive_scene,
    embedded,
    find_images,
    frame_folder_scene,
    load_scene,
    nuscenes_scene,
)


@pytest.fixture
def sample_rig(sample_data):
    if not (sample_data / "rig.json").is_file():
        pytest.skip("sample_data/rig.json is missing")
    return json.loads((sample_data / "rig.json").read_text())


def _write(tmp_path, rig: dict, name: str = "rig.json"):
    path = tmp_path / name
    path.write_text(json.dumps(rig))
    return path


def test_the_embedded_samples_are_found_with_importlib_resources(sample_data):
    assert embedded.sample_data_dir().resolve() == sample_data.resolve()
    assert embedded.sample_path("real-nuscenes") == embedded.sample_data_dir() / "real_nuscenes"
    assert embedded.EMBEDDED["rig"] == embedded.sample_path("rig")


@pytest.mark.parametrize(("name", "cameras", "licence"), [("real-tri", 6, embedded.REAL_TRI_ATTRIBUTION),
                                                          ("real-kitti", 1, embedded.REAL_KITTI_ATTRIBUTION)])
def test_the_real_frame_folders_are_embedded_samples_with_their_attribution(sample_data, name, cameras, licence):
    scene = load_scene(name)
    assert scene.source["kind"] == "frame-folder" and len(scene.rig) == cameras and scene.lidar is not None
    assert scene.attribution == licence and "non-commercial" in licence
    assert load_scene(str(embedded.sample_path(name))).attribution == licence
    assert embedded.attribution(sample_data / "rig.json") == ""


def test_images_are_found_by_json_path_then_file_name_then_camera_name(tmp_path, sample_rig, sample_data):
    images = tmp_path / "pics"
    (images / "images").mkdir(parents=True)
    cams = sample_rig["cameras"]
    src = {c["name"]: sample_data / c["image"] for c in cams}
    names = [c["name"] for c in cams]
    # 0: the JSON's path under DIR. 1: only its file name in DIR (the JSON says shots/...).
    # 2: no image field: found by the camera's name. 3: the JSON's path wins over a file
    # named after the camera. 4, 5: nothing there.
    shutil.copy(src[names[0]], images / cams[0]["image"])
    cams[1]["image"] = "shots/right_0001.jpg"
    shutil.copy(src[names[1]], images / "right_0001.jpg")
    cams[2].pop("image")
    shutil.copy(src[names[2]], images / f"{names[2]}.jpg")
    shutil.copy(src[names[3]], images / cams[3]["image"])
    (images / f"{names[3]}.png").write_bytes(b"not an image: step 3 is never reached for this camera")
    path = _write(tmp_path, sample_rig)
    located, missing = find_images(load_rig_file(path), images)
    assert located.image_files[names[0]] == cams[0]["image"]
    assert located.image_files[names[1]] == "right_0001.jpg"
    assert located.image_files[names[2]] == f"{names[2]}.jpg"
    assert located.image_files[names[3]] == cams[3]["image"]
    assert located.image_files[names[4]] is None and located.image_files[names[5]] is None
    assert names[4] in missing and names[5] in missing and "looked for, in order" in missing
    scene = load_scene(str(path), images=str(images))
    assert set(scene.images) == set(names[:4])
    with pytest.raises(InputError, match="field '--images'") as info:
        scene.require_images("--images")
    assert info.value.value == names[4:]


def test_the_first_cli_command_of_a_new_user_finds_the_images(sample_data):
    # `bevviz check sample_data/rig.json --images sample_data/images`: the JSON names
    # images/CAM_*.jpg, DIR is the images folder itself; step 2 (the file name) finds them.
    if not (sample_data / "rig.json").is_file():
        pytest.skip("sample_data/rig.json is missing")
    scene = load_scene(str(sample_data / "rig.json"), images=str(sample_data / "images"))
    assert scene.has_all_images and not scene.missing_images


def test_an_embedded_name_never_shadows_a_path_that_exists(tmp_path, monkeypatch, real_root):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(real_root, tmp_path / "nuscenes")  # the user's own ./nuscenes
    scene = load_scene("nuscenes", lidar=False)
    assert scene.source["kind"] == "nuscenes" and scene.source["path"] == "nuscenes"
    assert scene.source["scene"] == "scene-0061"  # the user's data, not the embedded synthetic scene-0001
    shutil.rmtree(tmp_path / "nuscenes")
    (tmp_path / "nuscenes").mkdir()  # a folder that is no dataroot: named, never the sample instead
    with pytest.raises(InputError, match="field 'SOURCE'"):
        load_scene("nuscenes")


def test_a_missing_embedded_sample_is_named(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(embedded, "SAMPLE_DATA", tmp_path / "nothing")
    with pytest.raises(InputError, match="missing from this installation") as info:
        load_scene("real-nuscenes")
    assert info.value.field == "SOURCE" and info.value.value == "real-nuscenes"


def test_the_lidar_rule_is_one_rule(nuscenes_root, real_root):
    real = load_scene(str(real_root))
    assert real.lidar is not None and len(real.boxes) > 0 and real.lidar_key == real.key
    off = load_scene(str(real_root), lidar=False)
    assert off.lidar is None and off.notes == ("LiDAR witness off (settings)",)
    drift = json.loads((nuscenes_root / "drift.json").read_text())
    synthetic = load_scene(str(nuscenes_root), sample=drift["samples"][-1]["sample_token"])
    assert synthetic.lidar is None and any("has no LIDAR_TOP" in n for n in synthetic.notes)


def test_frames_adds_the_neighbouring_samples_of_the_scene(nuscenes_root):
    """``--frames N``: the sample and the next N-1 of its scene, each with its scan; at the
    scene's end the preceding ones; a note when fewer than N could be used."""
    nusc = dataset(str(nuscenes_root), "v1.0-mini")
    scene = next(s for s in nusc.scene if s["nbr_samples"] >= 2 and s["name"] == "scene-0001")
    first = scene["first_sample_token"]
    two = nuscenes_scene(nusc, nuscenes_root, "v1.0-mini", first, frames=2)
    assert len(two.more_frames) == 1 and two.more_frames[0].lidar is not None
    assert two.more_frames[0].label == "sample 1 of scene-0001"  # the next one (bevviz.io.nuscenes.neighbour_samples)
    assert set(two.more_frames[0].images) == set(two.rig.names) and two.source["frames"] == 2
    one = nuscenes_scene(nusc, nuscenes_root, "v1.0-mini", first, frames=1)
    assert one.more_frames == () and "frames" not in one.source and one.key != two.key
    assert not any("frame(s) of the scene used" in n for n in one.notes)
    many = nuscenes_scene(nusc, nuscenes_root, "v1.0-mini", first, frames=5)
    assert len(many.more_frames) == 1 and any("--frames 5: 2 frame(s) of the scene used" in n for n in many.notes)
    # unasked, up to DEFAULT_FRAMES (5): the scene's two, and the note says it was the default
    default = nuscenes_scene(nusc, nuscenes_root, "v1.0-mini", first)
    assert DEFAULT_FRAMES == 5 and default.key == many.key and default.source["frames"] == 2
    assert any("up to 5 frames (the default): 2 frame(s) of the scene used" in n for n in default.notes)
    with pytest.raises(InputError, match="--frames"):
        nuscenes_scene(nusc, nuscenes_root, "v1.0-mini", first, frames=0)


def test_frames_applies_to_a_dataset_only(sample_data):
    with pytest.raises(InputError, match="'--frames'.*nuScenes dataroot only"):
        load_scene(str(sample_data / "rig.json"), frames=2)
    with pytest.raises(InputError, match="'--frames'.*frame folder holds one frame"):
        load_scene(str(sample_data / "real_kitti"), frames=2)


def test_a_frame_folder_is_a_source_with_its_lidar_and_ignore_polygons(tmp_path, sample_data):
    src = sample_data / "real_kitti"
    folder = tmp_path / "kitti"
    shutil.copytree(src, folder)
    scene = load_scene(str(folder))
    assert scene.source["kind"] == "frame-folder" and scene.lidar is not None and len(scene.lidar) > 1000
    assert scene.has_all_images and scene.ignore == {}
    rig = json.loads((folder / "rig.json").read_text())
    cam = rig["cameras"][0]
    cam["ignore"] = [[[0, 300], [1241, 300], [1241, 374], [0, 374]]]
    (folder / "rig.json").write_text(json.dumps(rig))
    (folder / "ignore.json").write_text(json.dumps({cam["name"]: [[[0, 0], [100, 0], [100, 100]]]}))
    scene = load_scene(str(folder))
    assert len(scene.ignore[cam["name"]]) == 2  # the rig's own polygon and ignore.json's
    (folder / "ignore.json").write_text(json.dumps({cam["name"]: [[[0, 0], [1, 1]]]}))
    with pytest.raises(InputError, match="ignore.json.*polygon 0 must hold at least three"):
        load_scene(str(folder))


def test_a_frame_folder_under_home_may_be_named_with_a_tilde(tmp_path, sample_data, monkeypatch):
    shutil.copytree(sample_data / "real_kitti", tmp_path / "t0")
    monkeypatch.setenv("HOME", str(tmp_path))  # what a user pastes into the app's box
    assert frame_folder_scene("~/t0").source["path"] == str(tmp_path / "t0")
    with pytest.raises(InputError, match="'More frame folders': is named twice"):
        frame_folder_scene("~/t0", more=[str(tmp_path / "t0")], more_field="More frame folders")


def test_several_frame_folders_of_one_rig_are_one_source_and_any_other_is_named(tmp_path, sample_data):
    first, second = tmp_path / "t0", tmp_path / "t1"
    shutil.copytree(sample_data / "real_kitti", first)
    shutil.copytree(sample_data / "real_kitti", second)
    points = np.load(second / "lidar_ego.npy")
    points[:, 0] += 0.5  # another moment of the drive: another scan
    np.save(second / "lidar_ego.npy", points)
    scene = load_scene(str(first), more=[str(second)])
    assert scene.source["frames"] == 2 and scene.source["more"] == [str(second)]
    assert "+ 1 more frame folder" in scene.label and scene.key != load_scene(str(first)).key
    (frame,) = scene.complete_frames
    np.testing.assert_array_equal(frame.lidar.points, points)
    assert frame.images.keys() == scene.images.keys()
    with pytest.raises(InputError, match="'SOURCE': is named twice: each frame folder counts once"):
        load_scene(str(first), more=[str(second), str(second / ".." / "t0")])  # its evidence would count twice
    with pytest.raises(InputError, match="'SOURCE'.*not a frame folder"):
        load_scene(str(first), more=[str(sample_data / "rig.json")])
    with pytest.raises(InputError, match="'SOURCE'.*only several frame folders"):
        load_scene(str(sample_data / "real_nuscenes"), more=[str(first)])
    with pytest.raises(InputError, match="holds cameras"):
        load_scene(str(first), more=[str(sample_data / "real_tri")])
    rig = json.loads((second / "rig.json").read_text())
    rig["cameras"][0]["K"][0][0] += 5.0
    (second / "rig.json").write_text(json.dumps(rig))
    with pytest.raises(InputError, match="calibrates image_2 differently"):
        load_scene(str(first), more=[str(second)])
    rig["cameras"][0]["K"][0][0] -= 5.0
    rig["cameras"][0]["ignore"] = [[[0, 300], [1241, 300], [1241, 374]]]
    (second / "rig.json").write_text(json.dumps(rig))
    with pytest.raises(InputError, match="other ignore polygons"):
        load_scene(str(first), more=[str(second)])
    with pytest.raises(InputError, match="MAX_FRAMES"):
        load_scene(str(first), more=[str(first)] * MAX_FRAMES)


@pytest.mark.parametrize(("file", "content", "named"), [
    ("lidar_ego.npy", "not an array", "header"),
    ("exposure.json", '{"cameras": {"image_2": {"exposure_from_keyframe": [[1, 0], [0]]}}}', "exposure.json"),
    ("exposure.json", '{"cameras": {"image_2": {"exposure_from_keyframe": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}}}',
     "exposure_from_keyframe[image_2]"),
    ("ignore.json", "[1, 2]", "ignore.json"),
    ("exposure.json", '{"lidar_timestamp": "yesterday"}', "exposure.json lidar_timestamp"),
    ("exposure.json", '{"cameras": {"image_2": {"timestamp": [1]}}}',
     "camera image_2: field 'exposure.json timestamp'"),
    ("exposure.json", '{"lidar_origin": [0.9, 1.8]}', "exposure.json lidar_origin"),
    ("exposure.json", '{"lidar_origin": [0.9, "0", 1.8]}', "exposure.json lidar_origin"),
])
def test_a_broken_frame_folder_is_a_named_error(tmp_path, sample_data, file, content, named):
    folder = tmp_path / "kitti"
    shutil.copytree(sample_data / "real_kitti", folder)
    (folder / file).write_text(content)
    with pytest.raises(InputError, match=re.escape(named)):
        load_scene(str(folder))


@pytest.mark.parametrize(("ring", "problem"), [
    (lambda n: np.zeros(n - 3, np.int16), "expected shape"),
    (lambda n: np.full(n, 1.5), "whole numbers"),
])
def test_a_ring_file_that_does_not_fit_the_cloud_is_a_named_error(tmp_path, sample_data, ring, problem):
    folder = tmp_path / "kitti"
    shutil.copytree(sample_data / "real_kitti", folder)
    n = len(np.load(folder / "lidar_ego.npy"))
    np.save(folder / "lidar_ring.npy", ring(n))
    with pytest.raises(InputError, match=f"lidar_ring.npy.*{n} points.*{problem}"):
        load_scene(str(folder))


def test_the_miscalibration_record_is_a_note_or_says_why_it_is_not(tmp_path, nuscenes_root):
    from bevviz.session import loaders

    assert loaders._miscalibration_note(tmp_path, "scene-0002") == ()  # no record: no note
    record = json.loads((nuscenes_root / "miscalibration.json").read_text())
    (tmp_path / "miscalibration.json").write_text(json.dumps(record))
    note, = loaders._miscalibration_note(tmp_path, record["scene"])
    assert note.startswith(f"Known miscalibration: {record['camera']}")
    assert loaders._miscalibration_note(tmp_path, "another scene") == ()
    (tmp_path / "miscalibration.json").write_text("{not json")
    note, = loaders._miscalibration_note(tmp_path, record["scene"])
    assert note.startswith("miscalibration.json not read (") and "malformed JSON" in note \
        and "no known miscalibration" in note


def _drive(sample_data):
    drive = sample_data / "real_tri_drive"
    if not (drive / "t2" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri_drive is missing")
    return drive


def test_a_folder_of_frame_folders_is_a_drive_of_its_frames_in_name_order(sample_data):
    drive = _drive(sample_data)
    for source in ("real-tri-drive", str(drive)):
        scene = load_scene(source)
        assert scene.source["kind"] == "drive" and scene.source["frames"] == 3
        assert scene.source["frame_folders"] == ["t0", "t1", "t2"] and len(scene.more_frames) == 2
        assert len(scene.rig) == 6 and all(f.lidar is not None and len(f.images) == 6 for f in scene.more_frames)
        assert scene.attribution == embedded.REAL_TRI_ATTRIBUTION and "3 frames" in scene.label
    # its first frame is the embedded real_tri frame, byte for byte
    first = load_scene("real-tri")
    assert np.array_equal(np.asarray(scene.lidar.points), np.asarray(first.lidar.points))
    assert scene.rig.fingerprint == first.rig.fingerprint
    # the other frames are other moments: other scans
    assert len(scene.more_frames[0].lidar) != len(scene.lidar)


def test_a_drive_whose_frames_disagree_in_calibration_is_refused_naming_camera_and_field(sample_data, tmp_path):
    drive = tmp_path / "drive"
    shutil.copytree(_drive(sample_data), drive)
    rig = json.loads((drive / "t1" / "rig.json").read_text())
    cam = rig["cameras"][2]
    cam["K"][0][0] += 5.0  # another focal length in the second frame
    (drive / "t1" / "rig.json").write_text(json.dumps(rig))
    with pytest.raises(InputError) as err:
        load_scene(str(drive))
    assert err.value.field == "SOURCE" and err.value.value == str(drive / "t1") and err.value.camera == cam["name"]
    assert "K differs by up to 5" in str(err.value) and cam["name"] in str(err.value)
    # a subfolder that is no frame folder is named, not skipped
    shutil.copyfile(drive / "t0" / "rig.json", drive / "t1" / "rig.json")
    (drive / "t3").mkdir()
    with pytest.raises(InputError) as err:
        load_scene(str(drive))
    assert err.value.field == "SOURCE" and err.value.value == str(drive / "t3")
    # a drive takes no --frames (all its frames are judged)
    (drive / "t3").rmdir()
    assert load_scene(str(drive)).source["frames"] == 3
    with pytest.raises(InputError, match="--frames"):
        load_scene(str(drive), frames=2)


def _drive_without_motion(sample_data, tmp_path, keep_times: bool):
    """The TRI drive copied with its exposure motions taken out (its time stamps kept or not)."""
    drive = tmp_path / "drive"
    shutil.copytree(sample_data / "real_tri_drive", drive)
    for t in ("t0", "t1", "t2"):
        p = drive / t / "exposure.json"
        d = json.loads(p.read_text())
        for c in d["cameras"].values():
            c.pop("exposure_from_keyframe")
            if not keep_times:
                c.pop("timestamp")
        p.write_text(json.dumps(d))
    return drive


def test_a_drive_with_times_but_no_motion_gets_its_motion_from_the_sweeps(sample_data, tmp_path):
    scene = drive_scene(_drive_without_motion(sample_data, tmp_path, keep_times=True))
    assert any(n.startswith("ego motion to the cameras' exposures estimated from the sweeps for t0, t1, t2")
               for n in scene.notes), scene.notes
    given = [load_frame_folder(sample_data / "real_tri_drive" / t) for t in ("t0", "t1", "t2")]
    for f, scan in zip(given, [scene.lidar, *(m.lidar for m in scene.more_frames)]):
        assert set(scan.exposure_from_keyframe) == set(scene.rig.names)
        for cam, m in scan.exposure_from_keyframe.items():
            # the car drove forward at 1.26-1.27 m/s and every exposure precedes its sweep (by
            # 81-92 ms, the stamps say): the world sits that far ahead at the exposure
            ahead = 1.265 * (f.lidar_time_s - f.camera_times_s[cam])
            assert m[0, 3] == pytest.approx(ahead, abs=0.01)
            assert abs(m[1, 3]) < 0.01 and abs(m[2, 3]) < 0.01
    # without the times nothing is estimated (and nothing is said)
    bare = drive_scene(_drive_without_motion(sample_data, tmp_path / "b", keep_times=False))
    assert not bare.lidar.exposure_from_keyframe and not any("ego motion" in n for n in bare.notes)


@pytest.mark.slow
def test_the_motion_from_the_sweeps_lets_the_doctor_name_a_turned_camera(sample_data, tmp_path):
    for keep_times, expected in ((True, "miscalibrated"), (False, "inconclusive")):
        scene = drive_scene(_drive_without_motion(sample_data, tmp_path / str(keep_times), keep_times))
        bad = dataclasses.replace(scene, rig=scene.rig.replace(perturb_camera(scene.rig["CAMERA_05"], yaw_deg=2.0)))
        found = {f.camera: f for f in Doctor(bad).diagnose()}
        assert found["CAMERA_05"].verdict == expected, found["CAMERA_05"].reason
        assert not [c for c, f in found.items() if f.verdict == "miscalibrated" and c != "CAMERA_05"]



def test_a_json_rig_takes_a_scan_per_image_set(sample_data):
    drive = sample_data / "real_tri_drive"
    scene = load_scene(str(drive / "t0" / "rig.json"), images=[drive / "t0" / "images", drive / "t1" / "images"],
                       scans=[drive / "t0" / "lidar_ego.npy", drive / "t1" / "lidar_ego.npy"])
    assert scene.lidar is not None and scene.more_frames[0].lidar is not None
    assert len(scene.more_frames[0].lidar) != len(scene.lidar)  # t1's own sweep
    assert scene.source["frames"] == 2 and len(scene.source["scans"]) == 2
    assert scene.label.endswith("+ 1 more frame for the LiDAR witness with point clouds lidar_ego.npy, lidar_ego.npy")
    assert Doctor(scene).n_frames == 2
    with pytest.raises(InputError, match="'--scan'.*one per image set"):
        load_scene(str(drive / "t0" / "rig.json"), images=[drive / "t0" / "images"],
                   scans=[drive / "t0" / "lidar_ego.npy", drive / "t1" / "lidar_ego.npy"])
