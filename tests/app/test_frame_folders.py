"""AppTests of frame folders in the sidebar: the embedded real TRI and KITTI frames (other rigs
than nuScenes, with their attribution) and a user's own frame folders, several of one rig added
up for the Calibration Doctor; a folder that is none, of another rig, or named twice is refused
with the field and the value, and the previous rig stays."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from appkit.sidebar import REAL_KITTI_OPTION, REAL_TRI_DRIVE_OPTION, REAL_TRI_OPTION
from appkit.sources import REAL_KITTI, REAL_TRI, REAL_TRI_DRIVE
from bevviz.calibration.verdicts import PAIR_NOTE
from bevviz.session.embedded import REAL_KITTI_ATTRIBUTION, REAL_TRI_ATTRIBUTION

from .conftest import make_app, shown

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (REAL_TRI.is_dir() and REAL_KITTI.is_dir()), reason="real frames missing")]
DOCTOR = "pages/calibration_doctor.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def loaded(at) -> str:
    return shown(next(c.value for c in at.sidebar.caption if c.value.startswith("Loaded")))


def lidar_table(at):
    (table,) = [d.value for d in at.dataframe if "edge points" in d.value.columns and d.value["edge points"].any()]
    return table


def lidar_diagnosis(option: str, caption: str, licence: str):
    """The app on an embedded real frame: its sidebar caption and licence line, then the
    Calibration Doctor's LiDAR diagnosis run."""
    at = make_app(sample_choice=option)
    no_exception(at)
    assert loaded(at) == caption
    assert licence in [c.value for c in at.sidebar.caption]
    at.switch_page(DOCTOR).run()
    no_exception(at)
    at.button(key="cd_lidar_run").click().run()
    no_exception(at)
    return at


def test_the_real_tri_frame_loads_and_the_doctor_judges_its_six_cameras():
    at = lidar_diagnosis(REAL_TRI_OPTION, "Loaded: Frame folder real_tri — 6 cameras, LiDAR 47,230 points",
                         REAL_TRI_ATTRIBUTION)
    assert any(shown(m.value).startswith("Miscalibrated: no camera") for m in at.markdown)
    table = lidar_table(at)
    assert len(table) == 6 and set(table["verdict"]) <= {"ok", "inconclusive"}


def test_the_real_kitti_frame_is_judged_as_a_camera_lidar_pair():
    at = lidar_diagnosis(REAL_KITTI_OPTION, "Loaded: Frame folder real_kitti — 1 camera, LiDAR 41,450 points",
                         REAL_KITTI_ATTRIBUTION)
    assert len(lidar_table(at)) == 1
    page = " ".join(shown(x.value) for x in [*at.markdown, *at.caption, *at.info, *at.warning])
    assert PAIR_NOTE in page


@pytest.fixture(scope="module")
def drive_doctor():
    """The Doctor's LiDAR diagnosis on the embedded TRI drive, run once (3 frames: tens of seconds)."""
    if not (REAL_TRI_DRIVE / "t2").is_dir():
        pytest.skip("sample_data/real_tri_drive is missing")
    return lidar_diagnosis(REAL_TRI_DRIVE_OPTION,
                           "Loaded: Drive real_tri_drive: 3 frames (t0, t1, t2) judged together — 6 cameras, "
                           "LiDAR 47,230 points", REAL_TRI_ATTRIBUTION)


def test_the_doctor_judges_the_embedded_drive_on_all_its_frames_and_says_so(drive_doctor):
    at = drive_doctor
    assert len(at.session_state["scene"].more_frames) == 2
    assert any(shown(i.value).startswith("3 frames judged together") for i in at.info)
    (evidence,) = [d.value for d in at.dataframe if "edge points per frame" in d.value.columns]
    assert len(evidence) == 6 and list(evidence["frames"]) == [3] * 6  # every verdict rests on the three frames
    assert all(len(per.split(" / ")) == 3 for per in evidence["edge points per frame"])
    verdicts = lidar_table(at)
    assert list(verdicts["frames"]) == [3] * 6  # the verdict table says so too
    assert set(verdicts["verdict"]) <= {"ok", "inconclusive"}  # its own calibration: no camera accused
    assert any(shown(m.value).startswith("Miscalibrated: no camera") for m in at.markdown)


def test_a_drive_named_in_the_frame_folder_box_is_judged_whole():
    if not (REAL_TRI_DRIVE / "t2").is_dir():
        pytest.skip("sample_data/real_tri_drive is missing")
    at = make_app(rig_source="Frame folders", ff_folder=str(REAL_TRI_DRIVE))
    no_exception(at)
    assert loaded(at).startswith("Loaded: Drive real_tri_drive: 3 frames (t0, t1, t2) judged together — 6 cameras")
    assert len(at.session_state["scene"].more_frames) == 2


def test_several_frame_folders_of_one_rig_are_added_up(tmp_path):
    first, second = tmp_path / "t0", tmp_path / "t1"
    shutil.copytree(REAL_TRI, first)
    shutil.copytree(REAL_TRI, second)
    at = make_app(rig_source="Frame folders", ff_folder=str(first), ff_more=f"{second}\n\n")
    no_exception(at)
    assert loaded(at).startswith("Loaded: Frame folder t0 + 1 more frame folder for the LiDAR witness — 6 cameras")
    assert len(at.session_state["scene"].more_frames) == 1
    at.switch_page(DOCTOR).run()
    no_exception(at)
    assert any(shown(i.value).startswith("2 frames judged together") for i in at.info)


@pytest.mark.parametrize(("folder", "more", "says"), [
    ("{tmp}/nothing", "", "field 'Frame folder': is not a frame folder (a folder holding rig.json and "
                          "lidar_ego.npy) (got '{tmp}/nothing')"),
    ("{tri}", "{tmp}", "field 'More frame folders': is not a frame folder"),
    ("{tri}", "{kitti}", "field 'More frame folders': holds cameras ['image_2'], not those of {tri}"),
    ("{tri}", "{tri}", "field 'More frame folders': is named twice: each frame folder counts once (got '{tri}')"),
])
def test_a_bad_frame_folder_is_refused_and_the_rig_stays(tmp_path, folder, more, says):
    def fill(s: str) -> str:
        return s.format(tmp=tmp_path, tri=REAL_TRI, kitti=REAL_KITTI)

    at = make_app()
    before = at.session_state["scene"].label
    at.radio(key="rig_source").set_value("Frame folders").run()
    assert [i.value for i in at.info if i.value.startswith("Name a frame folder")]
    at.text_input(key="ff_folder").set_value(fill(folder))
    at.text_area(key="ff_more").set_value(fill(more)).run()
    assert not at.exception
    (error,) = [shown(e.value) for e in at.error]
    assert fill(says) in error and f"Keeping the previous rig: {before}." in error
    assert at.session_state["scene"].label == before


@pytest.fixture(scope="module")
def tri_app():
    at = make_app(sample_choice=REAL_TRI_OPTION)
    no_exception(at)
    return at


@pytest.mark.parametrize("page", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "pages").glob("*.py")))
def test_every_page_runs_on_a_frame_folder(tri_app, page):
    at = tri_app
    at.switch_page(f"pages/{page}").run()
    no_exception(at)
    assert at.title and loaded(at).startswith("Loaded: Frame folder real_tri — 6 cameras")
