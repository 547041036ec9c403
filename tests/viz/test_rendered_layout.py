"""What a screenshot catches, measured in a real browser (headless Chromium): a legend over a
figure's title, SI-prefixed colour bars ("0.5p"), the 3-D rig's legend over its scene, and the
check page's camera table: witnesses as cells, not raw JSON (issue 22).

The figures are drawn by plotly.js in one static page (no app), so the module costs a few
seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bevviz.audit import CameraCheck, CameraSanity, CheckReport, CheckSettings, ConventionCheck, check_html
from bevviz.bev_grid import BEVGrid
from bevviz.viz.audit import camera_offsets_figure, offset_timeline_figure
from bevviz.viz.bev import bev_panels
from bevviz.viz.common import base_layout, figure
from bevviz.viz.conventions import candidate_scores_figure, image_op_figure
from bevviz.viz.panels import bar_figure
from bevviz.viz.rig3d import LEGEND_SHARE, rig_figure

pytestmark = [pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu"]
CAMS = ["CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT"]
#: Per figure: the title's, the legend's and the plot area's boxes, and the colour bars' tick texts.
MEASURE = """() => [...document.querySelectorAll('.js-plotly-plot')].map(d => {
  const box = s => { const e = d.querySelector(s); if (!e) return null;
                     const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const f = d.getBoundingClientRect();
  return {id: d.id, fig: [f.top, f.bottom], title: box('.g-gtitle text'), legend: box('.legend'),
          plot: box('.bglayer rect, .nsewdrag'),
          ticks: [...d.querySelectorAll('.colorbar .cbaxis text, .colorbar .ytick text')].map(t => t.textContent)};
})"""


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _render(browser, path: Path, html: str, width: int = 1200) -> list[dict]:
    path.write_text(html)
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    page.wait_for_timeout(500)
    return page


def _figures_page(figs: dict) -> str:
    divs = [f.to_html(full_html=False, include_plotlyjs=(k == 0), div_id=name)
            for k, (name, f) in enumerate(figs.items())]
    return "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "".join(divs) + "</body></html>"


def _overlap(a, b) -> bool:
    return a is not None and b is not None and a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def drawn(browser, tmp_path_factory):
    rows = [{"camera": c, "roll_deg": 0.1 * k, "pitch_deg": -0.2, "yaw_deg": 0.3, "roll_unc_deg": 0.1,
             "pitch_unc_deg": 0.1, "yaw_unc_deg": 0.1, "scene": "scene-1", "sample_index": k % 3,
             "timestamp": 1_000_000 * (k % 3), "verdict": "ok", "offset_source": "lidar"} for k, c in enumerate(CAMS)]
    grid = BEVGrid((-10.0, 10.0), (-10.0, 10.0), (0.0,), 1.0)
    tiny = np.full((20, 20), 5e-13)
    tiny[0, 0] = 0.0
    frustum = np.array([[0, 0, 1.5], [5, 2, 3], [5, -2, 3], [5, -2, 0], [5, 2, 0]], float)
    figs = {
        "offsets": camera_offsets_figure(rows, CAMS),
        "timeline": offset_timeline_figure(rows, CAMS),
        "candidates": candidate_scores_figure(["a / b / c", "d / e / f"], [0.9, 0.4], "a / b / c"),
        "image_op": image_op_figure(None, (160, 90), np.zeros((3, 2)), np.ones((3, 2)), title="crop check"),
        "times": bar_figure(["reference", "gather-scatter", "shared: geometry + weights"], [2.6, 5.0, 227.0],
                            title="sampling time per sampler (ms)", colors=["#4c78a8"] * 2 + ["#9e9e9e"]),
        "titled_legend": figure([dict(type="scatter", x=[0, 1], y=[0, 1], name=f"series {k}") for k in range(4)],
                                base_layout(300, "A title that is long enough to reach the legend's place",
                                            legend=True)),
        "diff": bev_panels({"gather-scatter": tiny, "LUT": tiny}, grid, cols=2, colorscale="Inferno", zmin=0.0,
                           colorbar_title="|diff|"),
        "rig3d": rig_figure(CAMS[:2], {c: frustum for c in CAMS[:2]},
                            {c: (frustum[0], frustum[0] + np.eye(3)) for c in CAMS[:2]}, grid),
    }
    page = _render(browser, tmp_path_factory.mktemp("figs") / "figures.html", _figures_page(figs))
    out = {m["id"]: m for m in page.evaluate(MEASURE)}
    page.close()
    return out


@pytest.mark.parametrize("name", ["offsets", "candidates", "image_op", "times", "titled_legend"])
def test_a_legend_never_covers_the_title(drawn, name):
    m = drawn[name]
    assert m["title"] is not None
    assert not _overlap(m["title"], m["legend"]), m
    if m["legend"] is not None:  # and stays out of the plot area
        assert not _overlap(m["legend"], m["plot"]), m


def test_colour_bars_write_exponents_not_si_prefixes(drawn):
    ticks = [t for t in drawn["diff"]["ticks"] if t.strip()]
    assert ticks, drawn["diff"]
    assert not [t for t in ticks if t.rstrip()[-1:] in "pnµmkMG" and not t.rstrip()[-1:].isdigit()], ticks
    assert any("e" in t for t in ticks), ticks


def test_the_3d_rig_keeps_its_legend_below_the_scene_and_inside_the_figure(drawn):
    m = drawn["rig3d"]
    top, bottom = m["fig"]
    scene_bottom = top + (1 - LEGEND_SHARE) * (bottom - top)
    assert m["legend"] is not None and scene_bottom - 2 <= m["legend"][1] and m["legend"][3] <= bottom, m


def test_the_check_page_shows_witnesses_as_cells_and_its_table_fits(browser, tmp_path):
    sanity = CameraSanity(1.5, 100, True, 2)
    cams = tuple(CameraCheck(c, "ok", 0.5, 1.0, f"{c}: " + "a long reason " * 12, {"seams": "ok", "lidar": "ok"},
                             {"roll": 0.1, "pitch": 0.2, "yaw": 0.3}, None, "lidar", True, 120, 2, sanity)
                 for c in CAMS)
    conv = ConventionCheck("sensor_to_ego / wxyz / RDF", "sensor_to_ego / wxyz / RDF", True,
                           (("sensor_to_ego / wxyz / RDF", 0.9), ("ego_to_sensor / wxyz / RDF", 0.4)), ())
    report = CheckReport({"kind": "nuscenes", "path": "/data", "name": "x"}, CheckSettings(), cams, conv)
    html = check_html(report)
    assert json.dumps({"seams": "ok", "lidar": "ok"}) not in html and "LiDAR witness" in html
    page = _render(browser, tmp_path / "check.html", html, width=1400)
    table = page.evaluate("() => { const r = document.querySelector('table').getBoundingClientRect(); "
                          "return [r.right, document.documentElement.clientWidth]; }")
    headers = page.evaluate("() => [...document.querySelectorAll('table th')].map(t => t.textContent)")
    measured = {m["id"]: m for m in page.evaluate(MEASURE)}
    page.close()
    assert table[0] <= table[1], table  # the reason column is not cut off at the page's edge
    assert "seam witness" in headers and "witnesses" not in headers
    for m in measured.values():
        assert not _overlap(m["title"], m["legend"]), m
