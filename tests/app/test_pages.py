"""AppTest per page on the embedded sample: no exception, and the key elements present."""

from __future__ import annotations

import re

from .conftest import shown


def charts(at) -> int:
    return len(at.get("plotly_chart"))


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metric(at, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def test_rig_page_shows_six_cameras_picker_and_3d(app):
    at = app()  # the default page
    no_exception(at)
    assert at.title[0].value == "Rig & Projection"
    assert "sample" in at.sidebar.caption[0].value.lower() or "Loaded" in at.sidebar.caption[0].value
    # The six cameras (one figure, so they share one WebGL context), the cell picker, the 3D rig.
    assert charts(at) == 3
    cams = at.get("plotly_chart")[0].proto.spec
    for name in ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT"):
        assert f'"meta":"{name}"' in cams.replace(" ", "")
    assert len(at.dataframe) == 1  # where the picked cell lands, per camera and height
    assert len(at.get("download_button")) == 3
    md = " ".join(m.value for m in at.markdown)
    assert "seen by" in md


def test_rig_page_display_controls_rerun_cleanly(app):
    at = app()
    at.selectbox(key="rig_color_by").set_value("pillar z")
    at.toggle(key="rig_show_behind").set_value(True)
    at.toggle(key="rig_show_grid").set_value(False)
    at.toggle(key="rig_show_extent").set_value(True)
    at.run()
    no_exception(at)
    assert charts(at) == 3
    # Pick a cell behind the car: the back camera sees it, the front camera has it behind.
    at.number_input(key="pick_x").set_value(-15.0)
    at.number_input(key="pick_y").set_value(0.0)
    at.run()
    no_exception(at)
    md = " ".join(shown(m.value) for m in at.markdown)
    assert re.search(r"seen by [A-Z_, ]*CAM_BACK", md)
    assert "CAM_FRONT (behind)" in md


def test_coverage_page(app):
    at = app("pages/coverage.py")
    no_exception(at)
    assert at.title[0].value == "Valid masks & coverage"
    assert charts(at) == 5  # footprints, overlap, difference, policies, disagreement
    at.toggle(key="cov_show_panels").set_value(True)
    at.toggle(key="cov_ring").set_value(False)
    at.run()
    no_exception(at)
    assert charts(at) == 6  # + per-camera footprints
    assert len(at.dataframe) == 2  # status table, cells that differ per camera
    labels = [m.label for m in at.metric]
    for label in ("Blind spots (0 cameras)", "Seams (2+ cameras)", "Cells that differ",
                  "Cells where policies disagree"):
        assert label in labels
    assert float(metric(at, "Blind spots (0 cameras)").rstrip(" %")) < 10
    # Policies can only disagree where two cameras overlap.
    assert metric(at, "Cells where policies disagree") == metric(at, "... of which are seams")


def test_padding_page_gather_scatter_matches_reference(app):
    at = app("pages/padding.py")
    no_exception(at)
    assert charts(at) == 9  # 3 paddings x (outputs, |diff|) + profile + half-pixel maps and errors
    assert len(at.latex) >= 3
    assert float(metric(at, "Worst max |gather-scatter - reference| (12 settings)")) < 1e-5
    at.radio(key="pad_mode").set_value("nearest")
    at.toggle(key="pad_align").set_value(True)
    at.radio(key="pad_source").set_value("camera features")
    at.run()
    no_exception(at)
    assert charts(at) == 9


def test_bev_features_page(app):
    at = app("pages/bev_features.py")
    no_exception(at)
    assert at.title[0].value == "BEV features"
    assert charts(at) == 3  # sampler maps (+ ground truth), |diff| maps, timings
    table = at.dataframe[0].value
    errs = dict(zip(table["sampler"], table["max |diff|"]))
    assert errs["GridSample (reference)"] == 0
    for name in ("gather-scatter", "deformable (bilinear)", "LUT"):
        assert errs[name] < 1e-4, (name, errs[name])
    assert errs["deformable (floor)"] > 1e-3  # the half-pixel pull shows
    at.radio(key="bev_kind").set_value("conv C=64")
    at.run()
    no_exception(at)
    at.radio(key="bev_view_conv C=64").set_value("channel norm")
    at.run()
    no_exception(at)
    assert charts(at) == 3


def test_grid_settings_reach_every_page_and_bad_grid_keeps_previous(app):
    at = app(grid_z_mode="ground only (z = 0)")
    no_exception(at)
    assert "z = 0 m" in " ".join(c.value for c in at.sidebar.caption)
    at.number_input(key="grid_x_max").set_value(-60.0)  # max < min
    at.run()
    assert not at.exception
    assert any("x_range" in shown(e.value) and "keeping the previous grid" in shown(e.value) for e in at.error)
    assert charts(at) == 3  # the page still draws, on the previous grid
