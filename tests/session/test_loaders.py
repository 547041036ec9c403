"""bevviz.session.loaders: one loader for every source; the image lookup; names never shadow paths."""

from __future__ import annotations

import json
import shutil

import pytest

from bevviz.errors import InputError
from bevviz.io.rig_json import load_rig_file
from bevviz.session import embedded, find_images, load_scene


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
