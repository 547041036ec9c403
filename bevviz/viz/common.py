"""Shared pieces of the figure builders: image encoding, BEV axes, colours, literal text.

Pure: nothing here calls Streamlit; builders return ``plotly.graph_objects.Figure``.

Plotly renders a subset of HTML (``<b>``, ``<i>``, ``<br>``, ``<a href>``, ``<span style>``)
in titles, hover labels, legends, tick labels and text. Names that come from the user's data
(camera names, file names, dataset categories and scene names) go through :func:`plain_text`
wherever a builder puts them into one of those, and :func:`base_layout` and
:func:`subplot_grid` pass every title through it, so they show as they read.

Convention:
    BEV figures use metric axes: the horizontal axis is ego y drawn reversed (left of the car
    on the left), the vertical axis is ego x (forward up). Arrays in BEV layout (row 0 at the
    front, column 0 at the left) are flipped in both directions before plotting, because
    plotly places element [0][0] at the smallest coordinates.
    See docs/conventions.md.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np
import plotly.colors
import plotly.graph_objects as go

from bevviz.bev_grid import BEVGrid
from bevviz.checks import field_error

#: One colour per camera, by rig order: plotly's D3 palette without its red, green and blue,
#: which draw the x / y / z axes (:data:`AXIS_COLORS`); readable on dark and light.
CAMERA_COLORS = ("#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
                 "#7f7f7f", "#393b79", "#ad494a", "#637939")
#: The x / y / z axes of a frame (red, green, blue), never a camera's colour.
AXIS_COLORS = ("#e41a1c", "#4daf4a", "#377eb8")
#: Colours of the point statuses valid / behind / outside.
STATUS_COLORS = ("#2ca02c", "#d62728", "#ff7f0e")
FONT = dict(size=11)


def plain_text(text: object) -> str:
    """``text`` as plotly shows it literally: ``&``, ``<`` and ``>`` written as entities
    (which plotly turns back into the characters), so no tag in it renders.

    Args:
        text: A name or title (a camera or file name, a dataset category, a figure title).

    Returns:
        The escaped text; text without ``&``, ``<`` or ``>`` is returned unchanged. Quotes
        are left as they are (plotly does not decode ``&quot;``, and outside a tag a quote
        means nothing).
    """
    return html.escape(str(text), quote=False)


def camera_color(index: int) -> str:
    """Stable colour of the camera at ``index`` in rig order."""
    return CAMERA_COLORS[index % len(CAMERA_COLORS)]


def downsample(image: np.ndarray, max_width: int = 400) -> tuple[np.ndarray, float]:
    """Shrink an image for display (area interpolation), never enlarging it.

    Args:
        image: Shape (H, W) or (H, W, 3), uint8.
        max_width: Largest output width.

    Returns:
        ``(small, scale)`` with ``small`` of width ``round(W * scale)``.

    Convention:
        A pixel-centre resize: a point at full-resolution pixel u sits at
        ``(u + 0.5) * scale - 0.5`` in ``small``.
    """
    img = np.asarray(image)
    W = img.shape[1]
    if W <= max_width:
        return img, 1.0
    scale = max_width / W
    h = max(1, round(img.shape[0] * scale))
    return cv2.resize(img, (max_width, h), interpolation=cv2.INTER_AREA), scale


def data_uri(image: np.ndarray, fmt: str = "png", quality: int = 88) -> str:
    """Encode an RGB (or grey) uint8 image as a ``data:`` URI for plotly images.

    Args:
        image: Shape (H, W, 3) RGB or (H, W), uint8.
        fmt: ``"png"`` (exact; BEV maps) or ``"jpeg"`` (small; photos).
        quality: JPEG quality.

    Raises:
        InputError: naming ``image`` when it is not uint8.
    """
    img = np.ascontiguousarray(np.asarray(image))
    if img.dtype != np.uint8:
        raise field_error("image", f"dtype {img.dtype}", "must be uint8")
    bgr = img[..., ::-1] if img.ndim == 3 else img
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if fmt == "jpeg" else []
    ok, buf = cv2.imencode("." + fmt, np.ascontiguousarray(bgr), params)
    if not ok:
        raise ValueError(f"field 'image': could not encode as {fmt}")
    mime = "jpeg" if fmt == "jpeg" else "png"
    return f"data:image/{mime};base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def to_uint8(values: np.ndarray, vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """Scale floats linearly so [vmin, vmax] maps to [0, 255] (clipped), as uint8."""
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    lo = float(finite.min()) if vmin is None and finite.size else (vmin if vmin is not None else 0.0)
    hi = float(finite.max()) if vmax is None and finite.size else (vmax if vmax is not None else 1.0)
    span = hi - lo if hi > lo else 1.0
    out = np.clip((np.nan_to_num(v, nan=lo) - lo) / span, 0.0, 1.0) * 255.0
    return out.round().astype(np.uint8)


def bev_coords(grid: BEVGrid) -> tuple[np.ndarray, np.ndarray]:
    """Ascending cell-centre coordinates (ys along the horizontal axis, xs along the vertical)."""
    xs, ys = (c.numpy() for c in grid.cell_centers())
    return ys[::-1].copy(), xs[::-1].copy()


def flip_bev(values: np.ndarray) -> np.ndarray:
    """BEV layout (row 0 front, column 0 left) -> plotting layout (ascending x and y)."""
    return np.ascontiguousarray(np.asarray(values)[::-1, ::-1])


# --------------------------------------------------------------------------------------
# Figures from plain dicts
# --------------------------------------------------------------------------------------

#: Validate every property when a figure is built. Off in the app: plotly's validation of
#: nested layout objects costs tens of milliseconds per figure, more than drawing it; the
#: tests switch it on so that a misspelt property still fails there.
VALIDATE = False


@lru_cache(maxsize=64)
def _named_colorscale(name: str) -> tuple:
    return tuple(tuple(step) for step in plotly.colors.get_colorscale(name))


def resolve_colorscale(scale) -> list:
    """A colour scale as explicit [position, colour] steps.

    Named scales must be resolved in Python: plotly.js itself knows only a handful of names
    (not "Turbo" or "Inferno"), and figures here skip the validator that would resolve them.
    Colours that Streamlit's theme would mistake for its placeholders are nudged.
    """
    steps = [list(step) for step in _named_colorscale(scale)] if isinstance(scale, str) else scale
    return [[pos, _unplaceholder(col)] for pos, col in steps]


def _unplaceholder(color: str) -> str:
    """Streamlit's theme swaps the exact colours #000001 .. #0000ff for theme colours (its
    template placeholders); Inferno and Magma start at #000004. Nudge such colours by one."""
    if isinstance(color, str) and len(color) == 7 and color.lower().startswith("#0000"):
        return "#01" + color[3:]
    return color


def figure(data: list[dict], layout: dict) -> go.Figure:
    """A ``go.Figure`` from trace dicts (each with ``type``) and a layout dict, built in one
    step (no incremental updates, validation only when :data:`VALIDATE`)."""
    if VALIDATE:
        return go.Figure(data=data, layout=layout)
    return go.Figure(data=data, layout=layout, _validate=False)


#: Top margin (pixels) of a figure with a title, and with a title and the legend above the plot.
TITLE_MARGIN, TITLE_LEGEND_MARGIN = 36, 64


def base_layout(height: int, title: str | None = None, legend: bool = False, **extra) -> dict:
    """Layout dict with the compact margins and font shared by every figure (``title`` shown
    literally, through :func:`plain_text`).

    The title sits at the top of the figure and a legend in one row just above the plot;
    with both, the top margin holds the two lines one under the other
    (:data:`TITLE_LEGEND_MARGIN`), so the legend never covers the title. A builder that
    moves the legend elsewhere (the right side, below the plot) may take the margin back.
    """
    top = (TITLE_LEGEND_MARGIN if legend else TITLE_MARGIN) if title else 8
    layout = dict(height=height, margin=dict(l=8, r=8, t=top, b=8), font=FONT,
                  showlegend=legend,
                  legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0))
    if title:
        layout["title"] = dict(text=plain_text(title), x=0.01, xanchor="left", font=dict(size=13),
                               yref="container", y=1.0, yanchor="top", pad=dict(t=10))
    layout.update(extra)
    return layout


def subplot_grid(n: int, cols: int, titles: list[str] | None = None, hspace: float = 0.03,
                 vspace: float = 0.08, title_offset: float = 0.0) -> tuple[dict, list[tuple[str, str]], list[dict]]:
    """Axis domains for ``n`` panels in rows of ``cols`` (a light ``make_subplots``).

    Returns:
        ``(axes, refs, annotations)``: layout entries ``xaxis``, ``yaxis``, ``xaxis2`` ...
        with domains and anchors; per panel the (xref, yref) trace references ``("x", "y")``,
        ``("x2", "y2")``, ...; and one title annotation per panel when ``titles`` is given
        (each shown literally, through :func:`plain_text`).
    """
    cols = max(1, min(cols, n))
    rows = max(1, (n + cols - 1) // cols)
    w = (1.0 - hspace * (cols - 1)) / cols
    h = (1.0 - vspace * (rows - 1)) / rows
    axes, refs, notes = {}, [], []
    for k in range(n):
        r, c = divmod(k, cols)
        sfx = "" if k == 0 else str(k + 1)
        x0 = c * (w + hspace)
        y1 = 1.0 - r * (h + vspace)
        axes[f"xaxis{sfx}"] = dict(domain=[_unit(x0), _unit(x0 + w)], anchor=f"y{sfx}")
        axes[f"yaxis{sfx}"] = dict(domain=[_unit(y1 - h), _unit(y1)], anchor=f"x{sfx}")
        refs.append((f"x{sfx}", f"y{sfx}"))
        if titles is not None:
            notes.append(dict(text=plain_text(titles[k]), x=x0 + w / 2, y=y1 + title_offset, xref="paper", yref="paper",
                              xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=12)))
    return axes, refs, notes


def _unit(v: float) -> float:
    return min(1.0, max(0.0, round(v, 9)))


def bev_axes(grid: BEVGrid, anchor: str = "y", title: bool = True) -> tuple[dict, dict]:
    """Metric BEV axes: ego y reversed horizontally, ego x up, equal aspect, fixed extent.

    Args:
        grid: The BEV grid (its extent sets the ranges).
        anchor: The y axis reference of the subplot (``"y"``, ``"y2"``, ...), which the y axis
            is scale-anchored to through its x axis.
        title: Axis titles on.

    Returns:
        ``(xaxis, yaxis)`` dicts to merge into the subplot's layout entries.
    """
    x_ref = "x" + anchor[1:]
    xaxis = dict(range=[grid.y_range[1], grid.y_range[0]], constrain="domain", zeroline=False, showgrid=False)
    yaxis = dict(range=[grid.x_range[0], grid.x_range[1]], constrain="domain", zeroline=False, showgrid=False,
                 scaleanchor=x_ref, scaleratio=1)
    if title:
        xaxis["title"] = dict(text="y (m, left +)")
        yaxis["title"] = dict(text="x (m, forward +)")
    return xaxis, yaxis


def bev_image_trace(rgb: np.ndarray, grid: BEVGrid, name: str = "", hover: bool = True) -> dict:
    """An RGB BEV map (BEV layout, uint8 (H_bev, W_bev, 3)) as an image trace on metric axes."""
    res = grid.resolution
    tr = dict(type="image", source=data_uri(flip_bev(rgb), "png"), x0=grid.y_range[0] + res / 2, dx=res,
              y0=grid.x_range[0] + res / 2, dy=res, name=plain_text(name))
    if hover:
        tr["hovertemplate"] = "x %{y:.2f} m, y %{x:.2f} m<extra>" + plain_text(name) + "</extra>"
    else:
        tr["hoverinfo"] = "skip"
    return tr


def colorbar_style(title: str = "", **extra) -> dict:
    """A colour bar: thin, titled, and numbers with exponents written as ``5e-13`` (plotly's
    default SI prefixes read ``0.5p`` for 5e-13, like a pixel count).

    Args:
        title: The bar's title.
        **extra: Further colour bar properties (``len``, ``x``, ``tickvals``, ...).
    """
    return {"title": dict(text=title), "thickness": 12, "exponentformat": "e", **extra}


@dataclass(frozen=True)
class HeatmapStyle:
    """How a BEV heatmap is coloured (ignored when the trace shares a ``coloraxis``).

    Attributes:
        colorscale: A plotly colour scale name or list.
        zmin: Lowest value of the scale (None: the data's).
        zmax: Highest value of the scale (None: the data's).
        showscale: Whether the colour bar is drawn.
        colorbar_title: The colour bar's title.
        colorbar: More colour bar settings (tick values, labels).
    """

    colorscale: str | list = "Viridis"
    zmin: float | None = None
    zmax: float | None = None
    showscale: bool = True
    colorbar_title: str = ""
    colorbar: dict | None = None


def bev_heatmap_trace(values: np.ndarray, grid: BEVGrid, name: str = "", style: HeatmapStyle = HeatmapStyle(),
                      hover_label: str = "value", coloraxis: str | None = None) -> dict:
    """A scalar BEV map (BEV layout, shape (H_bev, W_bev)) as a heatmap trace on metric axes, coloured
    by ``style`` or by the shared ``coloraxis``."""
    ys, xs = bev_coords(grid)
    tr = dict(type="heatmap", z=flip_bev(values), x=ys, y=xs, name=plain_text(name),
              hovertemplate=(f"x %{{y:.2f}} m, y %{{x:.2f}} m<br>{plain_text(hover_label)} %{{z:.4g}}"
                             f"<extra>{plain_text(name)}</extra>"))
    if coloraxis:
        tr["coloraxis"] = coloraxis
    else:
        tr.update(colorscale=resolve_colorscale(style.colorscale), zmin=style.zmin, zmax=style.zmax,
                  showscale=style.showscale,
                  colorbar=colorbar_style(style.colorbar_title, len=0.8, **(style.colorbar or {})))
    return tr
