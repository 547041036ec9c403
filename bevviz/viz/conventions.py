"""Figures of the Conventions page: candidate scores, per-check evidence, image-operation checks.

Pure builders: numbers in, ``go.Figure`` out (no Streamlit, no geometry).
See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bevviz.viz.common import base_layout, data_uri, downsample, figure

#: Check score colours: red (implausible) to green (plausible).
CHECK_SCALE = [[0.0, "#d7191c"], [0.5, "#fdae61"], [0.8, "#ffffbf"], [1.0, "#1a9641"]]


def candidate_scores_figure(labels: Sequence[str], scores: Sequence[float], best: str | None = None,
                            height: int = 360, title: str | None = "Plausibility per convention") -> go.Figure:
    """Horizontal bars of the candidates' scores, best on top.

    Args:
        labels: Convention labels, best first.
        scores: Their scores in [0, 1] (``-inf`` for unreadable candidates, drawn as 0).
        best: Label to highlight (the winner).
        height: Figure height.
        title: Figure title.

    Returns:
        Bar figure.
    """
    vals = [float(s) if np.isfinite(s) else 0.0 for s in scores]
    colors = ["#1a9641" if lab == best else "#4c78a8" for lab in labels]
    data = [dict(type="bar", x=vals, y=list(labels), orientation="h", marker=dict(color=colors),
                 text=[f"{s:.3f}" if np.isfinite(s) else "unreadable" for s in scores], textposition="auto",
                 hovertemplate="%{y}: %{x:.3f}<extra></extra>")]
    return figure(data, base_layout(height, title, xaxis=dict(range=[0, 1.02], title=dict(text="score")),
                                    yaxis=dict(autorange="reversed")))


def check_matrix_figure(labels: Sequence[str], checks: Sequence[dict], height: int = 380,
                        title: str | None = "Evidence per check (1 = plausible)") -> go.Figure:
    """Candidates x checks heatmap of the per-check scores.

    Args:
        labels: Convention labels (rows), best first.
        checks: Per candidate a dict check name -> score in [0, 1] (empty for unreadable ones).
        height: Figure height.
        title: Figure title.

    Returns:
        Heatmap figure with the values written in the cells.
    """
    names: list[str] = []
    for c in checks:
        names += [k for k in c if k not in names]
    z = [[c.get(n, np.nan) for n in names] for c in checks]
    text = [["" if not np.isfinite(v) else f"{v:.2f}" for v in row] for row in z]
    data = [dict(type="heatmap", z=z, x=names, y=list(labels), zmin=0.0, zmax=1.0, colorscale=CHECK_SCALE,
                 text=text, texttemplate="%{text}", hovertemplate="%{y}<br>%{x}: %{z:.3f}<extra></extra>",
                 colorbar=dict(thickness=12))]
    return figure(data, base_layout(height, title, yaxis=dict(autorange="reversed"),
                                    xaxis=dict(side="top")))


def image_op_figure(image: np.ndarray | None, size: tuple[int, int], uv_correct: np.ndarray,
                    uv_wrong: np.ndarray, crop: tuple[int, int, int, int] | None = None,
                    title: str | None = None, height: int = 380, max_width: int = 500) -> go.Figure:
    """One camera: where points land under the correct rule (green) and under the bug (red).

    Args:
        image: The camera image, RGB uint8 (H, W, 3) at its original size, or None.
        size: (W, H) of the image the check is about (resized / cropped); the picture is
            stretched (or, with ``crop``, cut) to that extent.
        uv_correct: Points under the correct rule, shape (P, 2), pixels of that image.
        uv_wrong: The same points under the bug, shape (P, 2).
        crop: (x0, y0, w, h) cut out of ``image`` first (the crop check).
        title: Figure title.
        height: Figure height.
        max_width: Display width of the picture.

    Returns:
        Figure on pixel axes (v down) with the two point sets joined by thin lines.
    """
    W, H = size
    layout_images = []
    if image is not None:
        img = np.asarray(image)
        if crop is not None:
            x0, y0, w, h = crop
            img = img[max(0, y0):max(0, y0) + h, max(0, x0):max(0, x0) + w]
        if img.size:
            layout_images.append(dict(source=data_uri(downsample(img, max_width)[0], "jpeg"), xref="x", yref="y",
                                      x=-0.5, y=-0.5, sizex=W, sizey=H, sizing="stretch", layer="below",
                                      xanchor="left", yanchor="top"))
    a, b = np.asarray(uv_correct, float), np.asarray(uv_wrong, float)
    seg = np.full((len(a) * 3, 2), np.nan)
    seg[0::3], seg[1::3] = a, b
    data = [dict(type="scatter", x=seg[:, 0], y=seg[:, 1], mode="lines", name="shift",
                 line=dict(color="rgba(255,255,255,0.6)", width=1), hoverinfo="skip"),
            dict(type="scattergl", x=a[:, 0], y=a[:, 1], mode="markers", name="correct rule",
                 marker=dict(color="#1a9641", size=5), hovertemplate="correct (%{x:.1f}, %{y:.1f})<extra></extra>"),
            dict(type="scattergl", x=b[:, 0], y=b[:, 1], mode="markers", name="with the bug",
                 marker=dict(color="#d7191c", size=5, symbol="x"),
                 hovertemplate="bug (%{x:.1f}, %{y:.1f})<extra></extra>")]
    layout = base_layout(height, title, legend=True, images=layout_images,
                         xaxis=dict(range=[-0.5, W - 0.5], constrain="domain", showgrid=False, zeroline=False),
                         yaxis=dict(range=[H - 0.5, -0.5], scaleanchor="x", scaleratio=1, constrain="domain",
                                    showgrid=False, zeroline=False),
                         plot_bgcolor="#eeeeee")
    return figure(data, layout)
