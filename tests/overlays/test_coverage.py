"""bevviz.overlays.coverage: cell reports, validity rules compared, differences, subsamples."""

import numpy as np
import pytest

from bevviz import overlays
from bevviz.bev_grid import BEVGrid
from bevviz.synthetic import nuscenes_like_rig

RIG = nuscenes_like_rig().resized(0.2)  # 320 x 180, full field of view
GRID = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (-1.0, 0.0, 2.0), 1.0)


def test_cell_report_and_compare_validity():
    rows = overlays.cell_report(RIG, GRID, *GRID.cell_of(15.0, 0.0))
    assert len(rows) == 6 * 3 and {r["status"] for r in rows} <= {"valid", "behind", "outside"}
    assert any(r["camera"] == "CAM_FRONT" and r["status"] == "valid" for r in rows)
    assert all(r["status"] == "behind" for r in rows if r["camera"] == "CAM_BACK")
    with pytest.raises(ValueError, match="BEV cell"):
        overlays.cell_center(GRID, 40, 0)
    same = overlays.compare_validity(RIG, GRID, (1e-5, "pixel"), (1e-5, "pixel"))
    assert not same.differs.any() and same.points_differ.sum() == 0
    cmp = overlays.compare_validity(RIG, GRID, (1e-5, "pixel"), (30.0, "pixel"))
    assert cmp.differs.any() and (cmp.b <= cmp.a).all()  # a larger eps only removes points
    assert cmp.seen.shape == GRID.shape and cmp.cells_differ.shape == (6,)


def test_disagreement_error_table_and_channel_view():
    a = np.zeros((3, 2, 2))
    b = a.copy()
    b[1, 0, 0] = 0.5
    c = a.copy()
    c[2, 1, 1] = -2.0
    d = overlays.disagreement({"a": a, "b": b, "c": c})
    np.testing.assert_allclose(d, [[0.5, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(overlays.disagreement({"a": a, "b": b, "c": c}, reference="b"),
                               [[0.5, 0.0], [0.0, 2.0]])
    rows = overlays.error_table({"a": a, "b": b}, "a")
    assert rows[0]["max |diff|"] == 0 and rows[1]["max |diff|"] == 0.5
    assert rows[1]["mean |diff|"] == pytest.approx(0.5 / 12)
    assert overlays.channel_view(c, "rgb").shape == (2, 2, 3)
    np.testing.assert_allclose(overlays.channel_view(c, "norm"), [[0, 0], [0, 2]])
    np.testing.assert_allclose(overlays.channel_view(c, 2), c[2])
    with pytest.raises(ValueError, match="channel"):
        overlays.channel_view(c, 3)


def test_subsample_indices_is_deterministic_bounded_and_prefix_stable():
    m = np.zeros(1000, bool)
    m[::3] = True
    idx = overlays.subsample_indices(m, 50)
    assert len(idx) == 50 and m[idx].all() and len(set(idx)) == 50
    assert np.array_equal(idx, overlays.subsample_indices(m, 50))
    assert np.array_equal(overlays.subsample_indices(m, 200)[:50], idx)  # a prefix is a sample too
    assert len(overlays.subsample_indices(m, 10_000)) == m.sum()
    assert np.ptp(idx) > 800  # spread over the whole mask
