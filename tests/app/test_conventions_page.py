"""AppTest of the Conventions page: ranking of the loaded rig's stored numbers, a simulated
mix-up recovered, candidate preview, adopting the winner, and the image-operation checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bevviz.session import load_scene

pytestmark = pytest.mark.slow

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "conventions.py")
MIXUP = "loaded rig, stored in another convention (a mix-up)"


@pytest.fixture(scope="module")
def page():
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state["grid_res"] = 2.048  # small BEV grid for the previews and image checks
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metric(at: AppTest, label: str) -> str:
    return {m.label: m.value for m in at.metric}[label]


def test_loaded_rig_reads_as_nuscenes(page):
    at = page
    assert not at.error, [e.value for e in at.error]
    assert _metric(at, "Most plausible") == "sensor_to_ego / wxyz / RDF"
    assert float(_metric(at, "Margin to the next")) > 0.1
    assert at.success and "ranking picks sensor_to_ego / wxyz / RDF" in at.success[0].value
    assert len(at.get("plotly_chart")) == 5  # scores, checks, preview cameras, preview 3D, image check
    (raw,) = [d.value for d in at.dataframe if "rotation (as stored)" in d.value.columns]
    assert len(raw) == 6


@pytest.mark.parametrize("stored", ["ego_to_sensor / xyzw / RUB", "sensor_to_ego / xyzw / RDF",
                                    "sensor_to_ego / wxyz / FLU"])
def test_mixup_is_recovered_and_previewed(page, stored):
    at = page
    at.radio(key="cv_source").set_value(MIXUP).run()
    at.selectbox(key="cv_stored").set_value(stored).run()
    assert not at.exception, [e.value for e in at.exception]
    assert _metric(at, "Most plausible") == stored
    assert not at.error
    at.selectbox(key="cv_preview").set_value("sensor_to_ego / wxyz / RUB" if stored != "sensor_to_ego / wxyz / RUB"
                                             else "sensor_to_ego / wxyz / RDF").run()
    assert not at.exception, [e.value for e in at.exception]


def test_image_operation_checks(page):
    at = page
    (table,) = [d.value for d in at.dataframe if "check" in d.value.columns]
    assert len(table) == 5
    shifts = dict(zip(table["check"], table["max shift (px)"]))
    crop = [k for k in shifts if k.startswith("crop")][0]
    assert shifts[crop] > 100
    half = [k for k in shifts if "half-pixel" in k][0]
    assert 0.1 < shifts[half] < 1.0
    for which in table["check"]:
        at.selectbox(key="cv_op_which").set_value(which).run()
        assert not at.exception, [e.value for e in at.exception]


def test_adopt_winner_of_a_mixup():
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state["grid_res"] = 2.048
    at.run()
    rig0 = at.session_state["scene"].rig
    at.radio(key="cv_source").set_value(MIXUP).run()
    at.selectbox(key="cv_stored").set_value("ego_to_sensor / wxyz / FLU").run()
    at.button(key="cv_adopt").click().run()
    assert not at.exception, [e.value for e in at.exception]
    scene = at.session_state["scene"]
    assert "read as ego_to_sensor / wxyz / FLU" in scene.label
    for a, b in zip(scene.rig, rig0):  # the winning reading gives back the loaded cameras
        assert abs(a.cam_from_ego - b.cam_from_ego).max() < 1e-9


def test_a_rig_stored_in_its_lidars_frame_is_ranked_from_the_road_its_lidar_sees(sample_data):
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state["grid_res"] = 2.048
    at.session_state["scene"] = load_scene(str(sample_data / "real_kitti"))  # the Velodyne's frame
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert any("sees the road at z = -1.68 m" in c.value for c in at.caption)
    assert _metric(at, "Most plausible") == "sensor_to_ego / wxyz / RDF"
    assert at.success and "ranking picks sensor_to_ego / wxyz / RDF" in at.success[0].value
    (best,) = [e for e in at.expander if e.label.startswith("1. ")]
    shown = [m.value.replace("\\", "") for m in best.markdown]  # markdown-escaped sentences
    assert any("sit 1.60-1.60 m above the ground (plausible" in t for t in shown), shown
