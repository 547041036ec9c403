"""Pixel-space panels (feature maps, sampled outputs, |diff| maps) and 1D profiles.

Convention:
    Maps are (H, W) scalars or (H, W, 3) RGB, drawn with row 0 at the top and pixel centres
    at integer (u, v), the image spanning [-0.5, W - 0.5] x [-0.5, H - 0.5].
    See docs/conventions.md.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bevviz.viz.common import (
    base_layout,
    colorbar_style,
    figure,
    plain_text,
    resolve_colorscale,
    subplot_grid,
    to_uint8,
)


def image_panels(maps: dict[str, np.ndarray], cols: int = 3, colorscale="Viridis",
                 zmin: float | None = None, zmax: float | None = None, colorbar_title: str = "",
                 panel_height: int = 240, title: str | None = None,
                 extents: dict[str, tuple[float, float, float, float]] | None = None,
                 frame: tuple[float, float, float, float] | None = None) -> go.Figure:
    """Maps side by side; scalar maps share one colour scale.

    Args:
        maps: Title -> map, (H, W) or (H, W, 3) (RGB floats are scaled from [zmin, zmax]).
        cols: Panels per row.
        colorscale: Colour scale of scalar maps.
        zmin, zmax: Shared range (joint min / max when not given).
        extents: Optional title -> (u0, u1, v0, v1): the coordinates of the first and last
            pixel centres (default: 0 .. W - 1, 0 .. H - 1), so outputs that reach past the
            input can be drawn in input pixel units.
        frame: Optional (u_min, u_max, v_min, v_max) rectangle drawn on every panel (e.g.
            the input image's extent).

    Returns:
        One subplot per map, titled with its key.
    """
    names = list(maps)
    arrays = {k: np.asarray(maps[k], dtype=np.float64) for k in names}
    scalars = [a for a in arrays.values() if a.ndim == 2]
    allv = [a[np.isfinite(a)].ravel() for a in arrays.values()]
    allv = np.concatenate(allv) if allv else np.zeros(0)
    if allv.size:
        zmin = float(allv.min()) if zmin is None else zmin
        zmax = float(allv.max()) if zmax is None else zmax
    cols = max(1, min(cols, len(names)))
    rows = (len(names) + cols - 1) // cols
    axes, refs, notes = subplot_grid(len(names), cols, titles=names, hspace=0.03, vspace=0.12 if rows > 1 else 0.0)
    data, shapes = [], []
    for name, (xr, yr) in zip(names, refs):
        a, shown = arrays[name], plain_text(name)
        H, W = a.shape[:2]
        u0, u1, v0, v1 = (extents or {}).get(name, (0.0, W - 1.0, 0.0, H - 1.0))
        dx = (u1 - u0) / max(W - 1, 1)
        dy = (v1 - v0) / max(H - 1, 1)
        if a.ndim == 3:
            data.append(dict(type="image", z=to_uint8(a, zmin, zmax), x0=u0, dx=dx, y0=v0, dy=dy, name=shown,
                             xaxis=xr, yaxis=yr,
                             hovertemplate="u %{x:.2f}, v %{y:.2f}<br>%{z}<extra>" + shown + "</extra>"))
        else:
            data.append(dict(type="heatmap", z=a, x0=u0, dx=dx, y0=v0, dy=dy, coloraxis="coloraxis", name=shown,
                             xaxis=xr, yaxis=yr,
                             hovertemplate="u %{x:.2f}, v %{y:.2f}<br>%{z:.4g}<extra>" + shown + "</extra>"))
        if frame is not None:
            shapes.append(dict(type="rect", x0=frame[0], x1=frame[1], y0=frame[2], y1=frame[3], xref=xr, yref=yr,
                               line=dict(color="#ff00ff", width=1.5, dash="dot")))
        axes["xaxis" + xr[1:]].update(range=[u0 - dx / 2, u1 + dx / 2], showgrid=False, zeroline=False,
                                      constrain="domain", tickfont=dict(size=9))
        axes["yaxis" + yr[1:]].update(range=[v1 + dy / 2, v0 - dy / 2], showgrid=False, zeroline=False,
                                      constrain="domain", scaleanchor=xr, scaleratio=1, tickfont=dict(size=9))
    layout = base_layout(panel_height * rows + (30 if title else 0), title, annotations=notes, shapes=shapes,
                         **axes)
    layout["margin"]["t"] = 28 + (30 if title else 0)
    if scalars:
        layout["coloraxis"] = dict(colorscale=resolve_colorscale(colorscale), cmin=zmin, cmax=zmax,
                                   colorbar=colorbar_style(colorbar_title))
    return figure(data, layout)


def profile_figure(u: np.ndarray, curves: dict[str, np.ndarray], borders: tuple[float, float] | None = None,
                   title: str | None = None, x_title: str = "u (input pixels)", y_title: str = "value",
                   height: int = 320, markers: bool = True) -> go.Figure:
    """1D profiles along one row, with the input's borders marked.

    Args:
        u: Sample positions, shape (S,).
        curves: Name -> values, shape (S,).
        borders: (u_min, u_max) of the input image (e.g. (-0.5, W - 0.5)), drawn as lines.

    Returns:
        One line trace per curve.
    """
    data = [dict(type="scatter", x=np.asarray(u), y=np.asarray(values), mode="lines+markers" if markers else "lines",
                 name=name, marker=dict(size=4), line=dict(width=1.8)) for name, values in curves.items()]
    shapes, notes = [], []
    for b, label in zip(borders or (), ("left border", "right border")):
        shapes.append(dict(type="line", x0=b, x1=b, y0=0, y1=1, xref="x", yref="paper",
                           line=dict(color="#ff00ff", width=1.5, dash="dot")))
        notes.append(dict(x=b, y=1, xref="x", yref="paper", text=label, showarrow=False, yanchor="bottom",
                          font=dict(size=10, color="#ff00ff")))
    layout = base_layout(height, title, legend=True, shapes=shapes, annotations=notes,
                         xaxis=dict(title=dict(text=x_title)), yaxis=dict(title=dict(text=y_title)))
    layout["legend"].update(y=-0.25, yanchor="top")
    return figure(data, layout)


def bar_figure(labels: list[str], values: list[float], title: str | None = None, x_title: str = "",
               height: int = 260, text_format: str = "{:.1f}", colors: list[str] | None = None) -> go.Figure:
    """Horizontal bars (e.g. time per sampler), top to bottom in ``labels`` order.

    Args:
        labels: Bar labels.
        values: Bar lengths, one per label.
        title: Figure title.
        x_title: Value axis title.
        height: Figure height, pixels.
        text_format: Format of the value written on each bar.
        colors: One colour per bar (default: one colour for all).
    """
    data = [dict(type="bar", x=values, y=labels, orientation="h", text=[text_format.format(v) for v in values],
                 textposition="auto", marker=dict(color=colors or "#4c78a8"))]
    return figure(data, base_layout(height, title, xaxis=dict(title=dict(text=x_title)),
                                    yaxis=dict(autorange="reversed")))
