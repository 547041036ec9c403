"""Figure builders of the NPU export page (pure plotly)."""

from __future__ import annotations

import plotly.graph_objects as go

from bevviz.viz.export import CATEGORY_COLORS, latency_figure, op_category, op_inventory_figure, parity_figure


def test_op_categories():
    assert op_category("GridSample") == "flagged" and op_category("NonZero") == "flagged"
    assert op_category("Gather") == "index" and op_category("ScatterElements") == "index"
    assert op_category("Cast") == "cast" and op_category("Reshape") == "shape"
    assert op_category("Mul") == "compute"


def test_single_model_inventory_colours_by_category():
    fig = op_inventory_figure({"grid_sample": {"GridSample": 1, "Mul": 3, "Gather": 2}})
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    bar = fig.data[0]
    assert list(bar.y) == ["Mul", "Gather", "⚠ GridSample"]          # most frequent first
    assert list(bar.x) == [3, 2, 1]
    assert list(bar.marker.color) == [CATEGORY_COLORS["compute"], CATEGORY_COLORS["index"],
                                      CATEGORY_COLORS["flagged"]]


def test_many_models_are_grouped_and_top_limits_ops():
    counts = {"a": {f"Op{i}": i + 1 for i in range(40)}, "b": {"Op39": 5}}
    fig = op_inventory_figure(counts, top=10, title="ops")
    assert len(fig.data) == 2 and fig.layout.barmode == "group"
    assert len(fig.data[0].y) == 10 and fig.data[1].x[list(fig.data[1].y).index("Op39")] == 5
    assert fig.layout.title.text == "ops"


def test_latency_and_parity_figures():
    fig = latency_figure({"lut": (1.0, 0.5), "grid_sample": (0.01, 20.0)})
    assert [t.name for t in fig.data] == ["torch", "onnxruntime"]
    assert fig.layout.xaxis.type == "log"  # 0.01 .. 20 ms spans > 100x
    pf = parity_figure({"ok": 2e-7, "bad": 3e-3, "zero": 0.0}, tol=1e-5)
    colors = list(pf.data[0].marker.color)
    assert colors[0] != colors[1] and colors[0] == colors[2]
    assert pf.layout.xaxis.type == "log" and all(v > 0 for v in pf.data[0].x)
