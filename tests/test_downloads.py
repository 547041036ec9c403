"""Download byte builders: CSV, NPZ, PNG, JSON."""

import io
import json

import cv2
import numpy as np
import pytest

from bevviz import downloads, overlays
from bevviz.bev_grid import BEVGrid
from bevviz.synthetic import nuscenes_like_rig

RIG = nuscenes_like_rig().resized(0.1)  # 160 x 90
GRID = BEVGrid((-10.0, 10.0), (-10.0, 10.0), (0.0, 1.0), 2.0)


def test_projection_csv_and_npz():
    proj = overlays.grid_projection(RIG, GRID)
    text = downloads.projection_csv(proj, RIG, GRID).decode()
    lines = text.strip().split("\n")
    assert lines[0] == ",".join(downloads.CSV_COLUMNS)
    assert len(lines) - 1 == int(proj.valid.sum())
    first = lines[1].split(",")
    assert first[0] in RIG.names and first[-1] == "valid"
    # Values: every row's point, pixel and depth to the printed 1e-3 (mm / thousandth px).
    table = np.genfromtxt(io.StringIO(text), delimiter=",", names=True, dtype=None, encoding="utf-8")
    cam = np.array([RIG.names.index(n) for n in table["camera"]])
    k, i, j = table["z_index"], table["row"], table["col"]
    pts = GRID.points().numpy()[k, i, j]
    uv = proj.uv.numpy()[cam, k, i, j]
    for col, ref in (("x", pts[:, 0]), ("y", pts[:, 1]), ("z", pts[:, 2]), ("u", uv[:, 0]), ("v", uv[:, 1]),
                     ("depth", proj.depth.numpy()[cam, k, i, j])):
        np.testing.assert_allclose(table[col], ref, rtol=0, atol=5e-4 + 1e-6, err_msg=col)
    assert proj.valid.numpy()[cam, k, i, j].all()
    full = downloads.projection_csv(proj, RIG, GRID, valid_only=False, max_rows=100).decode()
    assert len(full.strip().split("\n")) == 101
    data = np.load(io.BytesIO(downloads.projection_npz(proj, RIG, GRID)))
    assert list(data["cameras"]) == RIG.names
    assert data["uv"].shape == (6, 2, 10, 10, 2) and data["status"].shape == (6, 2, 10, 10)
    np.testing.assert_array_equal(data["valid"], proj.valid.numpy())


def test_heatmap_png_scalar_and_rgb():
    v = np.linspace(0, 1, 12).reshape(3, 4)
    img = cv2.imdecode(np.frombuffer(downloads.heatmap_png(v), np.uint8), cv2.IMREAD_COLOR)
    assert img.shape == (3, 4, 3)
    rgb = np.zeros((3, 4, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    back = cv2.imdecode(np.frombuffer(downloads.heatmap_png(rgb), np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
    np.testing.assert_array_equal(back, rgb)  # BEV layout and RGB order kept


def test_rig_json_round_trip(tmp_path):
    rig_json = pytest.importorskip("bevviz.io.rig_json")
    data = downloads.rig_json(RIG)
    json.loads(data)
    p = tmp_path / "rig.json"
    p.write_bytes(data)
    back = rig_json.load_rig(p)
    assert back.names == RIG.names
    for a, b in zip(back, RIG):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
