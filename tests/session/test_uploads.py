"""A rig given as bytes (bevviz.session.uploads): further image sets as one .zip each."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from bevviz.errors import InputError
from bevviz.session import Doctor
from bevviz.session.uploads import MORE_IMAGES_FIELD, read_image_set, uploaded_scene

DRIVE = Path(__file__).resolve().parents[2] / "sample_data" / "real_tri_drive"
pytestmark = pytest.mark.skipif(not (DRIVE / "t2" / "rig.json").is_file(), reason="sample_data/real_tri_drive missing")


def images_of(t: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((DRIVE / t / "images").glob("*.jpg"))}


def zipped(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_two_more_image_sets_are_two_more_frames_for_the_seams():
    rig = (DRIVE / "t0" / "rig.json").read_bytes()
    # folders inside the archive, a README and the archiver's hidden files are passed over
    t1 = zipped({f"t1/images/{k}": v for k, v in images_of("t1").items()}
                | {"t1/README.md": b"notes", "__MACOSX/t1/._CAMERA_01.jpg": b"junk"})
    t2 = zipped(images_of("t2"))
    scene = uploaded_scene("rig.json", rig, images_of("t0"), more_images=[("t1.zip", t1), ("t2.zip", t2)])
    assert len(scene.more_frames) == 2 and scene.source["frames"] == 3
    assert scene.source["more"] == ["t1.zip", "t2.zip"]
    assert scene.label.endswith("+ 2 more image sets for the seams")
    assert set(scene.more_frames[0].images) == set(scene.rig.names) and scene.more_frames[0].lidar is None
    assert scene.more_frames[1].images["CAMERA_05"].shape == scene.images["CAMERA_05"].shape
    assert Doctor(scene).n_frames == 3
    # other sets, another scene
    assert uploaded_scene("rig.json", rig, images_of("t0"), more_images=[("t1.zip", t2)]).key != scene.key


def test_a_set_lacking_a_camera_names_the_archive_and_the_camera():
    partial = {k: v for k, v in images_of("t1").items() if k != "CAMERA_07.jpg"}
    with pytest.raises(InputError, match="t1.zip.*CAMERA_07") as err:
        uploaded_scene("rig.json", (DRIVE / "t0" / "rig.json").read_bytes(), images_of("t0"),
                       more_images=[("t1.zip", zipped(partial))])
    assert err.value.field == MORE_IMAGES_FIELD


@pytest.mark.parametrize(("data", "problem"), [
    (b"not a zip at all", "is not a .zip archive"),
    (zipped({"notes.txt": b"x"}), "holds no image"),
    (zipped({"a/CAMERA_01.jpg": b"1", "b/CAMERA_01.jpg": b"2"}), "a second image named CAMERA_01.jpg"),
    (zipped({"CAMERA_01.jpg": b"1", "a.npy": b"1", "b.bin": b"2"}), "a second point cloud"),
])
def test_a_bad_archive_is_a_named_error(data, problem):
    with pytest.raises(InputError, match=problem) as err:
        read_image_set("set.zip", data)
    assert err.value.field == MORE_IMAGES_FIELD and "set.zip" in str(err.value)


def test_each_set_may_bring_its_own_scan_when_the_first_frame_has_one():
    rig = (DRIVE / "t0" / "rig.json").read_bytes()
    scan = ("lidar_ego.npy", (DRIVE / "t0" / "lidar_ego.npy").read_bytes())
    sets = [(f"{t}.zip", zipped(images_of(t) | {"lidar_ego.npy": (DRIVE / t / "lidar_ego.npy").read_bytes()}))
            for t in ("t1", "t2")]
    scene = uploaded_scene("rig.json", rig, images_of("t0"), scan, more_images=sets)
    assert [len(f.lidar) for f in scene.more_frames] != [len(scene.lidar)] * 2  # each set's own sweep
    assert all(f.lidar is not None for f in scene.more_frames)
    assert scene.label.endswith("+ 2 more frames for the LiDAR witness")
    assert Doctor(scene).n_frames == 3
    # one frame with a scan and one without cannot be judged together: named, both ways
    with pytest.raises(InputError, match="holds no point cloud.*t1.zip"):
        uploaded_scene("rig.json", rig, images_of("t0"), scan, more_images=[("t1.zip", zipped(images_of("t1")))])
    with pytest.raises(InputError, match="holds a point cloud .lidar_ego.npy. but the rig.s upload has none.*t1.zip"):
        uploaded_scene("rig.json", rig, images_of("t0"), more_images=sets[:1])
    bad = [("t1.zip", zipped(images_of("t1") | {"cloud.npy": b"not numpy"}))]
    with pytest.raises(InputError, match="'more image sets' .'t1.zip'.*cloud.npy") as err:
        uploaded_scene("rig.json", rig, images_of("t0"), scan, more_images=bad)
    assert err.value.field == MORE_IMAGES_FIELD

