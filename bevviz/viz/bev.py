"""BEV maps: scalar heatmaps, RGB maps, footprints, overlap counts, a cell picker.

Convention:
    Inputs are in BEV layout (row 0 front, column 0 left); figures show forward up and
    left on the left, with metric axes (see :mod:`bevviz.viz.common`).
    See docs/conventions.md.
"""

from __future__ import annotations

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
    colorbar_style,
    figure,
    plain_text,
    resolve_colorscale,
    subplot_grid,
    to_uint8,
)


def _rgb(hex_color: str) -> np.ndarray:
    h = hex_color.lstrip("#")
    return np.array([int(h[i:i + 2], 16) for i in (0, 2, 4)], dtype=np.float64)


def _single(trace: dict, grid: BEVGrid, height: int, title: str | None, legend: bool = False,
            extra: list[dict] | None = None, **layout_extra) -> go.Figure:
    xaxis, yaxis = bev_axes(grid)
    return figure([trace] + (extra or []),
                  base_layout(height, title, legend=legend, xaxis=xaxis, yaxis=yaxis, **layout_extra))


def bev_map(values: np.ndarray, grid: BEVGrid, title: str | None = None, colorscale="Viridis",
            zmin: float | None = None, zmax: float | None = None, colorbar_title: str = "",
            hover_label: str = "value", height: int = 420) -> go.Figure:
    """A scalar BEV map, shape (H_bev, W_bev), as a heatmap; an RGB map (H_bev, W_bev, 3) as
    an image (uint8, or floats scaled from [zmin, zmax])."""
    v = np.asarray(values)
    if v.ndim == 3:
        rgb = v if v.dtype == np.uint8 else to_uint8(v, zmin, zmax)
        trace = bev_image_trace(rgb, grid, name=title or "")
    else:
        trace = bev_heatmap_trace(v, grid, name=title or "", hover_label=hover_label,
                                  style=HeatmapStyle(colorscale, zmin, zmax, colorbar_title=colorbar_title))
    return _single(trace, grid, height, title)


def bev_panels(maps: dict[str, np.ndarray], grid: BEVGrid, cols: int = 3, colorscale="Viridis",
               zmin: float | None = None, zmax: float | None = None, colorbar_title: str = "",
               hover_label: str = "value", panel_height: int = 300, title: str | None = None) -> go.Figure:
    """Several BEV maps side by side with ONE shared colour scale.

    Args:
        maps: Title -> map; scalar maps (H_bev, W_bev) share a coloraxis over [zmin, zmax]
            (the joint min/max when not given); RGB maps (H_bev, W_bev, 3) are drawn as
            images (floats scaled from [zmin, zmax]).
        grid: The BEV grid.
        cols: Panels per row.

    Returns:
        One panel per map, titled with its key.
    """
    names = list(maps)
    arrays = [np.asarray(maps[k]) for k in names]
    scalars = [a.astype(np.float64) for a in arrays if a.ndim == 2]
    if scalars and (zmin is None or zmax is None):
        finite = np.concatenate([s[np.isfinite(s)].ravel() for s in scalars])
        if finite.size:
            zmin = float(finite.min()) if zmin is None else zmin
            zmax = float(finite.max()) if zmax is None else zmax
    rows = (len(names) + max(1, min(cols, len(names))) - 1) // max(1, min(cols, len(names)))
    axes, refs, notes = subplot_grid(len(names), cols, titles=names, hspace=0.02,
                                     vspace=0.1 if rows > 1 else 0.0)
    data = []
    for name, a, (xr, yr) in zip(names, arrays, refs):
        if a.ndim == 3:
            tr = bev_image_trace(a if a.dtype == np.uint8 else to_uint8(a, zmin, zmax), grid, name=name)
        else:
            tr = bev_heatmap_trace(a, grid, name=name, coloraxis="coloraxis", hover_label=hover_label)
        tr.update(xaxis=xr, yaxis=yr)
        data.append(tr)
        xa, ya = bev_axes(grid, anchor=yr, title=False)
        axes["xaxis" + xr[1:]].update(xa, showticklabels=rows == 1 or xr == refs[-1][0], ticks="")
        axes["yaxis" + yr[1:]].update(ya, showticklabels=False)
    layout = base_layout(panel_height * rows + (30 if title else 0), title, annotations=notes, **axes)
    layout["margin"]["t"] = 30 + (30 if title else 0)
    if scalars:
        layout["coloraxis"] = dict(colorscale=resolve_colorscale(colorscale), cmin=zmin, cmax=zmax,
                                   colorbar=colorbar_style(colorbar_title))
    return figure(data, layout)


def footprint_composite(footprint: np.ndarray, names: list[str], grid: BEVGrid,
                        title: str | None = "Camera footprints", height: int = 460) -> go.Figure:
    """Every camera's footprint in its own colour; seams blend the colours, blind spots are black.

    Args:
        footprint: Shape (N_cam, H_bev, W_bev), bool.
        names: Camera names (legend), length N_cam.
    """
    fp = np.asarray(footprint, dtype=np.float64)
    colors = np.stack([_rgb(camera_color(i)) for i in range(len(names))])  # (N, 3)
    count = fp.sum(0)
    mix = np.einsum("nhw,nc->hwc", fp, colors) / np.maximum(count, 1)[..., None]
    # Seams a little brighter so they read as overlaps.
    mix = np.where((count >= 2)[..., None], np.minimum(mix * 1.25 + 30, 255), mix)
    legend = [dict(type="scatter", x=[None], y=[None], mode="markers", name=plain_text(name),
                   marker=dict(color=camera_color(i), size=10, symbol="square")) for i, name in enumerate(names)]
    fig = _single(bev_image_trace(mix.round().astype(np.uint8), grid, name="footprints"), grid, height, title,
                  legend=True, extra=legend)
    fig.layout.legend.update(orientation="v", x=1.02, y=1.0, xanchor="left", yanchor="top")
    return fig


def overlap_map(count: np.ndarray, grid: BEVGrid, title: str | None = "Cameras per cell",
                height: int = 460) -> go.Figure:
    """Overlap count per cell with discrete colours: 0 = blind spot (red), 1 = single camera
    (grey), 2+ = seam (blue shades)."""
    c = np.asarray(count)
    top = max(int(c.max()) if c.size else 0, 3)
    palette = ["#d62728", "#d9d9d9", "#6baed6", "#2171b5", "#08306b", "#041836"]
    scale = []
    for k in range(top + 1):
        col = palette[min(k, len(palette) - 1)]
        scale += [[k / (top + 1), col], [(k + 1) / (top + 1), col]]
    ticks = dict(tickvals=list(range(top + 1)), ticktext=["0 blind"] + [str(k) for k in range(1, top + 1)])
    tr = bev_heatmap_trace(c.astype(float), grid, name="cameras", hover_label="cameras",
                           style=HeatmapStyle(scale, -0.5, top + 0.5, colorbar_title="cameras", colorbar=ticks))
    return _single(tr, grid, height, title)


def difference_map(base: np.ndarray, differs: np.ndarray, grid: BEVGrid, title: str | None = None,
                   labels: tuple[str, str, str] = ("unseen", "seen, same", "differs"),
                   height: int = 460, max_markers: int = 3000) -> go.Figure:
    """Categorical map: unseen cells, seen cells where two settings agree, and cells where
    they differ (highlighted, and ringed with markers — up to ``max_markers`` — so a handful of
    cells still shows).

    Args:
        base: Cells seen under either setting, shape (H_bev, W_bev), bool.
        differs: Cells where the settings disagree, shape (H_bev, W_bev), bool.
    """
    cat = np.where(np.asarray(differs), 2, np.where(np.asarray(base), 1, 0)).astype(float)
    scale = [[0, "#f0f0f0"], [1 / 3, "#f0f0f0"], [1 / 3, "#9ecae1"], [2 / 3, "#9ecae1"],
             [2 / 3, "#e6550d"], [1, "#e6550d"]]
    tr = bev_heatmap_trace(cat, grid, name="difference", hover_label="class",
                           style=HeatmapStyle(scale, -0.5, 2.5,
                                              colorbar=dict(tickvals=[0, 1, 2], ticktext=list(labels))))
    # A few differing cells vanish at screen resolution: ring them too.
    rows, cols = np.nonzero(np.asarray(differs))
    keep = np.linspace(0, len(rows) - 1, min(len(rows), max_markers)).round().astype(int) if len(rows) else []
    xs, ys = (c.numpy() for c in grid.cell_centers())
    ring = dict(type="scatter", x=ys[cols[keep]], y=xs[rows[keep]], mode="markers", name=labels[2],
                marker=dict(size=7, color="rgba(0,0,0,0)", line=dict(color="#e6550d", width=1.5)),
                hovertemplate="x %{y:.2f} m, y %{x:.2f} m<extra>" + plain_text(labels[2]) + "</extra>")
    return _single(tr, grid, height, title, extra=[ring] if len(keep) else [])


def pick_map(background: np.ndarray, grid: BEVGrid, picked_xy: tuple[float, float] | None,
             lattice_step: float = 2.0, title: str | None = "Pick a BEV cell (click)",
             colorscale=None, height: int = 420, colorbar_title: str = "") -> go.Figure:
    """A BEV map to pick a cell on: the background, a marker on the picked cell, and an
    invisible lattice of clickable points every ``lattice_step`` metres.

    Args:
        background: Scalar (H_bev, W_bev) or RGB uint8 (H_bev, W_bev, 3) map.
        picked_xy: Ego (x, y) of the picked cell centre, or None.
        lattice_step: Spacing of the clickable points (metres).

    Returns:
        Figure whose trace named "pick" carries the clickable points (x axis = ego y,
        y axis = ego x).
    """
    bg = np.asarray(background)
    if bg.ndim == 3:
        trace = bev_image_trace(bg if bg.dtype == np.uint8 else to_uint8(bg), grid, name="map", hover=False)
    else:
        trace = bev_heatmap_trace(bg.astype(float), grid, name="map",
                                  style=HeatmapStyle(colorscale or "Greys", showscale=bool(colorbar_title),
                                                     colorbar_title=colorbar_title))
    gx = np.arange(grid.x_range[0] + lattice_step / 2, grid.x_range[1], lattice_step)
    gy = np.arange(grid.y_range[0] + lattice_step / 2, grid.y_range[1], lattice_step)
    XX, YY = np.meshgrid(gx, gy, indexing="ij")
    extra = [dict(type="scatter", x=YY.ravel(), y=XX.ravel(), mode="markers", name="pick",
                  marker=dict(size=max(4, 600 / max(len(gx), len(gy), 1)), color="rgba(0,0,0,0)"),
                  hovertemplate="x %{y:.1f} m, y %{x:.1f} m<extra>click to pick</extra>")]
    if picked_xy is not None:
        x, y = picked_xy
        extra.append(dict(type="scatter", x=[y], y=[x], mode="markers", name="picked",
                          marker=dict(size=16, symbol="x-thin", color="#ff00ff", line=dict(width=3, color="#ff00ff")),
                          hovertemplate=f"picked cell x {x:.2f} m, y {y:.2f} m<extra></extra>"))
    return _single(trace, grid, height, title, extra=extra, clickmode="event+select", dragmode="pan",
                   uirevision="pick")
