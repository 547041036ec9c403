"""Figures of the NPU export page: op inventory, parity and latency.

Pure: nothing here calls Streamlit; builders return ``plotly.graph_objects.Figure``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import plotly.graph_objects as go

from bevviz.export.inspection import DYNAMIC_SHAPE_OPS, INDEX_OPS
from bevviz.viz.common import plain_text

#: Op category -> bar colour.
CATEGORY_COLORS = {
    "flagged": "#d62728",   # GridSample, data-dependent shapes, control flow
    "index": "#ff7f0e",     # gather / scatter
    "cast": "#9467bd",
    "shape": "#7f7f7f",     # shape bookkeeping
    "compute": "#4c78a8",
}
#: One colour per model in comparison charts.
MODEL_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2", "#9d755d")
SHAPE_OPS = frozenset({"Shape", "Reshape", "Unsqueeze", "Squeeze", "Concat", "Slice", "Expand", "Range",
                       "ConstantOfShape", "Transpose", "Flatten", "Identity", "Constant", "Split", "Tile"})
FLAGGED_OPS = frozenset({"GridSample", *DYNAMIC_SHAPE_OPS})


def _layout(fig: go.Figure, height: int, title: str | None = None, legend: bool = False) -> go.Figure:
    """Compact margins, small font, optional title and a horizontal legend on top."""
    top = (36 if title else 8) + (24 if title and legend else 0)  # the legend sits between title and plot
    fig.update_layout(height=height, margin=dict(l=8, r=8, t=top, b=8), font=dict(size=11),
                      showlegend=legend, template="plotly_white",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0))
    if title:
        fig.update_layout(title=dict(text=plain_text(title), x=0.01, xanchor="left", y=1.0, yref="container",
                                     yanchor="top", pad=dict(t=8), font=dict(size=13)))
    return fig


def op_category(op_type: str) -> str:
    """``"flagged"``, ``"index"``, ``"cast"``, ``"shape"`` or ``"compute"``."""
    if op_type in FLAGGED_OPS:
        return "flagged"
    if op_type in INDEX_OPS:
        return "index"
    if op_type == "Cast":
        return "cast"
    if op_type in SHAPE_OPS:
        return "shape"
    return "compute"


def _label(op_type: str) -> str:
    return f"⚠ {op_type}" if op_type in FLAGGED_OPS else op_type


def op_inventory_figure(op_counts: Mapping[str, Mapping[str, int]], title: str | None = None,
                        top: int | None = 30, height: int | None = None) -> go.Figure:
    """Horizontal bars of op-type counts for one or more exported models.

    Args:
        op_counts: Model label (e.g. sampler name) -> {op type: count}.
        title: Figure title.
        top: Show at most this many op types (by total count); None for all.
        height: Figure height in px; default grows with the number of op types.

    Returns:
        With one model, bars coloured by category (red: GridSample / dynamic-shape ops,
        orange: gather / scatter, purple: Cast, grey: shape bookkeeping, blue: compute);
        with several, grouped bars, one colour per model. Flagged ops are marked "⚠".
    """
    totals: dict[str, int] = {}
    for counts in op_counts.values():
        for op, n in counts.items():
            totals[op] = totals.get(op, 0) + int(n)
    ops = sorted(totals, key=lambda o: (-totals[o], o))
    if top is not None:
        ops = ops[:top]
    labels = [_label(o) for o in ops]
    fig = go.Figure()
    if len(op_counts) == 1:
        (name, counts), = op_counts.items()
        fig.add_trace(go.Bar(
            x=[counts.get(o, 0) for o in ops], y=labels, orientation="h", name=name,
            marker_color=[CATEGORY_COLORS[op_category(o)] for o in ops],
            text=[counts.get(o, 0) for o in ops], textposition="auto",
            customdata=[op_category(o) for o in ops],
            hovertemplate="%{y}: %{x} nodes (%{customdata})<extra></extra>"))
        legend = False
    else:
        for i, (name, counts) in enumerate(op_counts.items()):
            fig.add_trace(go.Bar(x=[counts.get(o, 0) for o in ops], y=labels, orientation="h", name=name,
                                 marker_color=MODEL_COLORS[i % len(MODEL_COLORS)],
                                 hovertemplate=f"{name}<br>%{{y}}: %{{x}} nodes<extra></extra>"))
        fig.update_layout(barmode="group")
        legend = True
    fig.update_xaxes(title_text="nodes")
    fig.update_yaxes(autorange="reversed", type="category")
    rows = max(1, len(ops)) * (1 if len(op_counts) == 1 else len(op_counts))
    return _layout(fig, height or min(1400, 90 + 18 * rows), title, legend=legend)


def latency_figure(latency_ms: Mapping[str, tuple[float, float]], title: str | None = None,
                   height: int | None = None, series: tuple[str, str] = ("torch", "onnxruntime")) -> go.Figure:
    """Two median latencies per model: torch vs onnxruntime, or original vs rewritten.

    Args:
        latency_ms: Model label -> (first ms, second ms).
        title: Figure title.
        height: Figure height in px.
        series: Names of the first and the second value (the legend).

    Returns:
        Grouped horizontal bars (log x axis when the values span more than 100x).
    """
    names = list(latency_ms)
    torch_ms = [float(latency_ms[n][0]) for n in names]
    ort_ms = [float(latency_ms[n][1]) for n in names]
    fig = go.Figure([
        go.Bar(x=torch_ms, y=names, orientation="h", name=plain_text(series[0]), marker_color="#4c78a8",
               text=[f"{v:.2f}" for v in torch_ms], textposition="auto"),
        go.Bar(x=ort_ms, y=names, orientation="h", name=plain_text(series[1]), marker_color="#f58518",
               text=[f"{v:.2f}" for v in ort_ms], textposition="auto"),
    ])
    values = [v for v in torch_ms + ort_ms if v > 0 and math.isfinite(v)]
    log = bool(values) and max(values) / min(values) > 100
    fig.update_xaxes(title_text="median latency (ms)", type="log" if log else "linear")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="group")
    return _layout(fig, height or 80 + 60 * max(1, len(names)), title, legend=True)


def parity_figure(max_abs_diff: Mapping[str, float], tol: float = 1e-5, title: str | None = None,
                  height: int | None = None, compared: str = "onnxruntime − torch") -> go.Figure:
    """max |difference| per model (or output) on a log axis, with the tolerance line.

    Args:
        max_abs_diff: Model (or output) label -> max |diff|.
        tol: Tolerance drawn as a dashed line; bars above it are red.
        title: Figure title.
        height: Figure height in px.
        compared: What was compared, for the axis title (``"rewritten − original"``).
    """
    names = list(max_abs_diff)
    floor = tol * 1e-6
    vals = [max(float(max_abs_diff[n]), floor) if math.isfinite(float(max_abs_diff[n])) else 1e3 for n in names]
    colors = ["#2ca02c" if float(max_abs_diff[n]) <= tol else "#d62728" for n in names]
    fig = go.Figure(go.Bar(x=vals, y=names, orientation="h", marker_color=colors,
                           text=[f"{float(max_abs_diff[n]):.1e}" for n in names], textposition="auto",
                           hovertemplate="%{y}: max |diff| %{text}<extra></extra>"))
    fig.add_vline(x=tol, line_dash="dash", line_color="#d62728",
                  annotation_text=f"tol {tol:g}", annotation_position="top")
    fig.update_xaxes(title_text=plain_text(f"max |{compared}|"), type="log")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, height or 90 + 40 * max(1, len(names)), title)
