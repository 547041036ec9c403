"""Figures of the Calibration Doctor: BEV mosaics with seams, seam errors, rankings, loss curves.

Pure builders: numbers in, ``go.Figure`` out (no Streamlit, no geometry).

Convention:
    BEV inputs are in BEV layout (row 0 front, column 0 left); figures show forward up and
    left on the left, on metric axes (see :mod:`bevviz.viz.common`).
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bevviz.bev_grid import BEVGrid
from bevviz.viz.common import (
    HeatmapStyle,
    base_layout,
    bev_axes,
    bev_heatmap_trace,
    bev_image_trace,
    camera_color,
    figure,
    plain_text,
    subplot_grid,
    to_uint8,
)

#: Seam error colour scale: transparent-looking blue (agree) to red (disagree).
SEAM_SCALE = [[0.0, "#2c7bb6"], [0.35, "#ffffbf"], [1.0, "#d7191c"]]


def highlight_seams(mosaic: np.ndarray, seam_error: np.ndarray, strength: float = 0.6,
                    vmax: float = 1.0) -> np.ndarray:
    """Tint the seam cells of a BEV mosaic by their disagreement.

    Args:
        mosaic: RGB mosaic, shape (H_bev, W_bev, 3), float in [0, 1] or uint8.
        seam_error: Per-cell disagreement, shape (H_bev, W_bev), NaN off the seams.
        strength: Blend of the tint on seam cells (0 = none, 1 = tint only).
        vmax: Error mapped to full red.

    Returns:
        RGB uint8, shape (H_bev, W_bev, 3): seams tinted blue (agree) to red (disagree).
    """
    rgb = np.asarray(mosaic, dtype=np.float64)
    if np.asarray(mosaic).dtype == np.uint8:
        rgb = rgb / 255.0
    err = np.asarray(seam_error, dtype=np.float64)
    on = np.isfinite(err)
    t = np.clip(np.nan_to_num(err, nan=0.0) / max(vmax, 1e-9), 0.0, 1.0)
    blue, yellow, red = np.array([0.17, 0.48, 0.71]), np.array([1.0, 1.0, 0.75]), np.array([0.84, 0.1, 0.11])
    lo = t < 0.35
    a = np.where(lo, t / 0.35, (t - 0.35) / 0.65)[..., None]
    tint = np.where(lo[..., None], blue * (1 - a) + yellow * a, yellow * (1 - a) + red * a)
    out = rgb.copy()
    out[on] = (1 - strength) * rgb[on] + strength * tint[on]
    return (np.clip(out, 0.0, 1.0) * 255).round().astype(np.uint8)


def mosaic_figure(mosaic: np.ndarray, grid: BEVGrid, seam_error: np.ndarray | None = None,
                  title: str | None = None, height: int = 460, strength: float = 0.6) -> go.Figure:
    """A BEV mosaic (the cameras' ground projections averaged) with seams highlighted.

    Args:
        mosaic: RGB, shape (H_bev, W_bev, 3), float in [0, 1] or uint8.
        grid: The grid of the mosaic.
        seam_error: Optional per-cell seam disagreement, shape (H_bev, W_bev), NaN off seams.
        title: Figure title.
        height: Figure height in pixels.
        strength: Tint strength on seams.

    Returns:
        Figure with the mosaic image (and a hidden-scale heatmap giving hover values on
        seams).
    """
    rgb = highlight_seams(mosaic, seam_error, strength) if seam_error is not None else (
        np.asarray(mosaic) if np.asarray(mosaic).dtype == np.uint8 else to_uint8(mosaic, 0.0, 1.0))
    data = [bev_image_trace(rgb, grid, name=title or "mosaic")]
    if seam_error is not None:
        data.append(dict(bev_heatmap_trace(seam_error, grid, name="seam error", hover_label="seam disagreement",
                                           style=HeatmapStyle(SEAM_SCALE, 0.0, 1.0, showscale=False)),
                         opacity=0.0))
    xaxis, yaxis = bev_axes(grid)
    return figure(data, base_layout(height, title, xaxis=xaxis, yaxis=yaxis))


def before_after_figure(before: np.ndarray, after: np.ndarray, grid: BEVGrid,
                        seam_before: np.ndarray | None = None, seam_after: np.ndarray | None = None,
                        titles: Sequence[str] = ("before", "after"), height: int = 440) -> go.Figure:
    """Two BEV mosaics side by side (e.g. before and after a refinement).

    Args:
        before: RGB mosaic, shape (H_bev, W_bev, 3).
        after: RGB mosaic, shape (H_bev, W_bev, 3).
        grid: Their grid.
        seam_before: Optional seam errors (H_bev, W_bev) to tint ``before``.
        seam_after: Optional seam errors (H_bev, W_bev) to tint ``after``.
        titles: Panel titles.
        height: Figure height.

    Returns:
        Figure with two image panels on linked metric axes.
    """
    axes, refs, notes = subplot_grid(2, 2, list(titles), hspace=0.04)
    data = []
    for k, (img, err) in enumerate(((before, seam_before), (after, seam_after))):
        rgb = highlight_seams(img, err) if err is not None else (
            np.asarray(img) if np.asarray(img).dtype == np.uint8 else to_uint8(img, 0.0, 1.0))
        tr = bev_image_trace(rgb, grid, name=titles[k])
        tr["xaxis"], tr["yaxis"] = refs[k]
        data.append(tr)
        xa, ya = bev_axes(grid, anchor=refs[k][1], title=k == 0)
        sfx = "" if k == 0 else str(k + 1)
        axes[f"xaxis{sfx}"].update(xa)
        axes[f"yaxis{sfx}"].update(ya)
    axes["xaxis2"]["matches"] = "x"
    axes["yaxis2"]["matches"] = "y"
    return figure(data, base_layout(height, None, annotations=notes, **axes))


def seam_matrix_figure(names: Sequence[str], pairs: Sequence[dict], height: int = 320,
                       title: str | None = "Seam cost per camera pair") -> go.Figure:
    """Seam costs as a camera x camera matrix (blank where footprints do not overlap).

    Args:
        names: Camera names (rows and columns, in rig order).
        pairs: Rows with ``"camera A"``, ``"camera B"`` and ``"seam cost"`` keys (as
            :meth:`bevviz.calibration.SeamAnalysis.table` gives, or any dict with those).
        height: Figure height.
        title: Figure title.

    Returns:
        Heatmap figure, symmetric.
    """
    idx = {n: i for i, n in enumerate(names)}
    m = np.full((len(names), len(names)), np.nan)
    for p in pairs:
        i, j = idx[p["camera A"]], idx[p["camera B"]]
        cost = [v for k, v in p.items() if k.startswith("seam cost")][0]
        m[i, j] = m[j, i] = cost
    short = [plain_text(n.replace("CAM_", "")) for n in names]
    text = [["" if not np.isfinite(v) else f"{v:.2f}" for v in row] for row in m]
    data = [dict(type="heatmap", z=m.tolist(), x=short, y=short, colorscale=SEAM_SCALE, zmin=0.0, zmax=1.2,
                 text=text, texttemplate="%{text}", hovertemplate="%{y} - %{x}: %{z:.3f}<extra></extra>",
                 colorbar=dict(title=dict(text="cost"), thickness=12))]
    return figure(data, base_layout(height, title, yaxis=dict(autorange="reversed")))


def ranking_figure(cameras: Sequence[str], scores: Sequence[float], all_names: Sequence[str] | None = None,
                   title: str | None = "Suspicion per camera (higher = worse)", height: int = 260,
                   x_title: str = "score") -> go.Figure:
    """Horizontal bars of the diagnosis scores, worst on top.

    Args:
        cameras: Camera names, worst first.
        scores: Their scores.
        all_names: Rig order, for the camera colours (default ``cameras``).
        title: Figure title.
        height: Figure height.
        x_title: Axis title.

    Returns:
        Bar figure.
    """
    order = list(all_names or cameras)
    colors = [camera_color(order.index(c)) if c in order else "#888888" for c in cameras]
    data = [dict(type="bar", x=list(scores), y=[plain_text(c.replace("CAM_", "")) for c in cameras], orientation="h",
                 marker=dict(color=colors), text=[f"{s:.3f}" for s in scores], textposition="auto",
                 hovertemplate="%{y}: %{x:.4f}<extra></extra>")]
    return figure(data, base_layout(height, title, xaxis=dict(title=dict(text=x_title)),
                                    yaxis=dict(autorange="reversed")))


def loss_curve_figure(losses: Sequence[float], levels: Sequence[int] | None = None,
                      rotations: Sequence[Sequence[float]] | None = None, title: str | None = "Seam loss",
                      height: int = 300) -> go.Figure:
    """Refinement loss per step (and, optionally, the rotation correction on a second axis).

    Args:
        losses: Loss per step, length S.
        levels: Schedule level per step, length S (level changes are marked).
        rotations: Per step (roll, pitch, yaw) correction in degrees, shape (S, 3).
        title: Figure title.
        height: Figure height.

    Returns:
        Line figure; loss on the left axis, rotation components (deg) on the right.
    """
    steps = list(range(len(losses)))
    data = [dict(type="scatter", x=steps, y=list(losses), mode="lines", name="loss", line=dict(color="#222222"))]
    shapes = []
    if levels is not None:
        for s in range(1, len(levels)):
            if levels[s] != levels[s - 1]:
                shapes.append(dict(type="line", x0=s, x1=s, y0=0, y1=1, yref="paper",
                                   line=dict(color="#999999", dash="dot", width=1)))
    layout = base_layout(height, title, legend=True, shapes=shapes, xaxis=dict(title=dict(text="step")),
                         yaxis=dict(title=dict(text="loss")))
    if rotations is not None and len(rotations):
        r = np.asarray(rotations, dtype=float)
        for k, (name, color) in enumerate((("roll", "#1f77b4"), ("pitch", "#2ca02c"), ("yaw", "#d62728"))):
            data.append(dict(type="scatter", x=steps, y=r[:, k].tolist(), mode="lines", name=f"{name} (deg)",
                             yaxis="y2", line=dict(color=color, width=1.5, dash="dash")))
        layout["yaxis2"] = dict(title=dict(text="correction (deg)"), overlaying="y", side="right", showgrid=False)
    return figure(data, layout)
