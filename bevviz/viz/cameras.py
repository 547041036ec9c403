"""Camera image figures with projected BEV points, LiDAR points, boxes and geometric overlays.

Convention:
    Axes are in full-resolution pixel coordinates (u right, v down; integer values at pixel
    centres, the image spans [-0.5, W - 0.5] x [-0.5, H - 0.5]). The image itself is a
    downsampled copy stretched over that extent as a layout image, so overlays never need
    rescaling and hover shows the true (u, v).
    See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from bevviz.camera import Camera
from bevviz.viz.common import (
    STATUS_COLORS,
    base_layout,
    colorbar_style,
    data_uri,
    downsample,
    figure,
    plain_text,
    resolve_colorscale,
    subplot_grid,
)

#: customdata columns of the projected-point trace.
POINT_FIELDS = ("x", "y", "z", "u", "v", "depth")


@dataclass
class CameraOverlay:
    """What to draw on one camera image (all pixel coordinates at full resolution).

    Attributes:
        points_uv: Projected points, shape (P, 2).
        color: Colour value per point, shape (P,).
        customdata: Per point (x, y, z, u, v, depth), shape (P, 6), for hover.
        ghost_uv: Points behind the camera where a missing depth test would put them, (Q, 2).
        grid_uv: Ground grid lines, shape (L, S, 2) with NaN gaps.
        grid_labels: Label per line, length L.
        grid_label_uv: Label positions, shape (L, 2), NaN when not visible.
        horizon: Horizon segment end points, shape (2, 2), or None.
        picks: Markers for a picked BEV cell: list of dicts with u, v, z, status.
        lidar_uv: LiDAR points the camera sees, shape (Q, 2).
        lidar_color: Colour value per LiDAR point, shape (Q,).
        lidar_customdata: Per LiDAR point (depth, intensity), shape (Q, 2), for hover.
        box_segments: Annotation box edges, shape (E, 2, 2) (end points).
        box_labels: Category of each edge's box, length E (hover).
    """

    points_uv: np.ndarray | None = None
    color: np.ndarray | None = None
    customdata: np.ndarray | None = None
    ghost_uv: np.ndarray | None = None
    grid_uv: np.ndarray | None = None
    grid_labels: list[str] = field(default_factory=list)
    grid_label_uv: np.ndarray | None = None
    horizon: np.ndarray | None = None
    picks: list[dict] = field(default_factory=list)
    lidar_uv: np.ndarray | None = None
    lidar_color: np.ndarray | None = None
    lidar_customdata: np.ndarray | None = None
    box_segments: np.ndarray | None = None
    box_labels: list[str] = field(default_factory=list)


#: Colour of the annotation boxes' wireframes.
BOX_COLOR = "#00ff66"


@dataclass
class _Panel:
    """The pieces of one camera panel, on axes ``xref`` / ``yref``."""

    data: list[dict] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)
    shapes: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)


def _segments_polyline(segments: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """(E, 2, 2) segments -> one (3E, 2) polyline with NaN gaps, and a label per vertex (shown
    literally: the labels are the dataset's categories)."""
    E = segments.shape[0]
    line = np.concatenate([segments, np.full((E, 1, 2), np.nan)], axis=1).reshape(-1, 2)
    return line, [plain_text(lab) for lab in labels for _ in range(3)]


def _lidar_and_boxes(camera: Camera, ov: CameraOverlay, axes: dict, lidar_marker: dict,
                     marker_size: float) -> list[dict]:
    """The "boxes" and "lidar" traces of one camera."""
    data, who = [], plain_text(camera.name)
    if ov.box_segments is not None and len(ov.box_segments):
        line, text = _segments_polyline(np.asarray(ov.box_segments, dtype=np.float64), ov.box_labels)
        data.append(dict(type="scatter", x=line[:, 0], y=line[:, 1], mode="lines", name="boxes", text=text,
                         line=dict(color=BOX_COLOR, width=1.3), connectgaps=False,
                         hovertemplate=f"<b>{who}</b><br>%{{text}}<extra></extra>", **axes))
    if ov.lidar_uv is not None and len(ov.lidar_uv):
        data.append(dict(
            type="scattergl", x=ov.lidar_uv[:, 0], y=ov.lidar_uv[:, 1], mode="markers", name="lidar",
            customdata=ov.lidar_customdata, marker=dict(lidar_marker, size=marker_size - 0.5,
                                                        color=ov.lidar_color, opacity=0.9),
            hovertemplate=(f"<b>{who}</b> LiDAR<br>(u, v) = (%{{x:.1f}}, %{{y:.1f}})<br>depth "
                           "%{customdata[0]:.2f} m, intensity %{customdata[1]:.0f}<extra></extra>"), **axes))
    return data


def _camera_panel(camera: Camera, image: np.ndarray | str | None, ov: CameraOverlay, refs: tuple[str, str],
                  style: CameraStyle, markers: tuple[dict, dict]) -> _Panel:
    """Traces, layout image, shapes and label annotations of one camera on ``refs`` (xref, yref),
    its points and LiDAR points coloured by ``markers`` (see :func:`_marker_colors`)."""
    (xref, yref), (marker, lidar_marker) = refs, markers
    max_width, marker_size = style.max_width, style.marker_size
    W, H = camera.width, camera.height
    panel = _Panel()
    axes = dict(xaxis=xref, yaxis=yref)
    who = plain_text(camera.name)
    if image is not None:
        source = image if isinstance(image, str) else data_uri(downsample(image, max_width)[0], "jpeg")
        panel.images.append(dict(source=source, xref=xref, yref=yref, x=-0.5, y=-0.5, sizex=W, sizey=H,
                                 sizing="stretch", layer="below", xanchor="left", yanchor="top"))
    else:
        panel.shapes.append(dict(type="rect", x0=-0.5, y0=-0.5, x1=W - 0.5, y1=H - 0.5, xref=xref, yref=yref,
                                 fillcolor="#eeeeee", line=dict(width=0), layer="below"))
    if ov.grid_uv is not None and ov.grid_uv.size:
        L = ov.grid_uv.shape[0]
        lines = np.concatenate([ov.grid_uv, np.full((L, 1, 2), np.nan)], axis=1).reshape(-1, 2)
        panel.data.append(dict(type="scatter", x=lines[:, 0], y=lines[:, 1], mode="lines", name="ground grid",
                               line=dict(color="rgba(255,255,255,0.85)", width=1.2), connectgaps=False,
                               hoverinfo="skip", **axes))
        if ov.grid_label_uv is not None:
            panel.notes = _grid_labels(ov.grid_labels, ov.grid_label_uv, style.label_spacing * W, xref, yref)
    if ov.horizon is not None:
        panel.data.append(dict(type="scatter", x=ov.horizon[:, 0], y=ov.horizon[:, 1], mode="lines", name="horizon",
                               line=dict(color="#00e5ff", width=2, dash="dash"), hoverinfo="skip", **axes))
    if ov.ghost_uv is not None and len(ov.ghost_uv):
        panel.data.append(dict(type="scattergl", x=ov.ghost_uv[:, 0], y=ov.ghost_uv[:, 1], mode="markers",
                               name="behind camera",
                               marker=dict(color=STATUS_COLORS[1], size=marker_size + 1, symbol="x"),
                               hovertemplate=f"<b>{who}</b><br>behind the camera: (%{{x:.0f}}, %{{y:.0f}}) "
                                             "if the depth test were skipped<extra></extra>", **axes))
    panel.data += _lidar_and_boxes(camera, ov, axes, lidar_marker, marker_size)
    if ov.points_uv is not None and len(ov.points_uv):
        panel.data.append(dict(
            type="scattergl", x=ov.points_uv[:, 0], y=ov.points_uv[:, 1], mode="markers", name="points",
            customdata=ov.customdata, marker=dict(marker, size=marker_size, color=ov.color, opacity=0.85),
            hovertemplate=(f"<b>{who}</b><br>BEV x %{{customdata[0]:.2f}}, y %{{customdata[1]:.2f}},"
                           " z %{customdata[2]:.2f} m<br>(u, v) = (%{customdata[3]:.1f}, %{customdata[4]:.1f})"
                           "<br>depth %{customdata[5]:.2f} m<extra></extra>"), **axes))
    shown = [p for p in ov.picks if p["status"] == "valid"]
    if shown:
        panel.data.append(dict(
            type="scatter", x=[p["u"] for p in shown], y=[p["v"] for p in shown], mode="markers+text",
            name="picked cell", text=[f"z={p['z']:g}" for p in shown], textposition="middle right",
            textfont=dict(color="white", size=11),
            marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color="#ff00ff", width=2.5), symbol="circle"),
            hovertemplate=f"<b>{who}</b><br>picked cell, %{{text}}<br>(u, v) = (%{{x:.1f}}, %{{y:.1f}})"
                          "<extra></extra>", **axes))
    return panel


def pixel_axes(camera: Camera, x_anchor: str) -> tuple[dict, dict]:
    """Hidden (x, y) axes over a camera's full-resolution pixel extent, v down, equal aspect
    (``x_anchor``: the x axis reference the y axis scales with, ``"x"``, ``"x2"``, ...)."""
    W, H = camera.width, camera.height
    return (dict(range=[-0.5, W - 0.5], visible=False, constrain="domain"),
            dict(range=[H - 0.5, -0.5], visible=False, scaleanchor=x_anchor, scaleratio=1, constrain="domain"))


@dataclass(frozen=True)
class ColorScale:
    """One colour scale of camera points, with its colour bar.

    Attributes:
        colorscale: A plotly colour scale name or list.
        cmin: Lowest value of the scale (None: the data's; share it between cameras so
            colours compare).
        cmax: Highest value of the scale (None: the data's).
        title: The colour bar's title.
    """

    colorscale: str | list = "Turbo"
    cmin: float | None = None
    cmax: float | None = None
    title: str = ""


@dataclass(frozen=True)
class CameraStyle:
    """How camera figures draw their image and points.

    Attributes:
        points: Colour scale of the projected BEV points.
        lidar: Colour scale of the LiDAR points.
        max_width: Width images given as arrays are downsampled to for display.
        marker_size: Point marker size.
        label_spacing: Grid labels closer than this fraction of the image width to an
            earlier one are left out (labels nearest the camera go first).
    """

    points: ColorScale = ColorScale()
    lidar: ColorScale = ColorScale("Plasma")
    max_width: int = 400
    marker_size: float = 3.0
    label_spacing: float = 0.06


def _marker_colors(scale: ColorScale, showscale: bool, x: float | None = None) -> dict:
    bar = colorbar_style(scale.title, thickness=8, len=0.95, xpad=4, tickfont=dict(size=9))
    bar["title"]["side"] = "right"
    if x is not None:
        bar["x"] = x
    return dict(colorscale=resolve_colorscale(scale.colorscale), cmin=scale.cmin, cmax=scale.cmax,
                showscale=showscale, colorbar=bar)


def camera_figure(camera: Camera, image: np.ndarray | str | None, overlay: CameraOverlay | None = None, *,
                  style: CameraStyle = CameraStyle(), showscale: bool = False, height: int = 260) -> go.Figure:
    """One camera: its image and the overlays, on full-resolution pixel axes.

    Args:
        camera: The camera (name and image size set the axes).
        image: RGB uint8 image, shape (H, W, 3) (downsampled to ``style.max_width`` and
            encoded here), an already encoded image as a ``data:`` URI (any size: it is
            stretched over the full-resolution extent), or None for a blank frame.
        overlay: What to draw on top.
        style: Colour scales, image width, marker size and label spacing.
        showscale: Whether the points' colour bar is drawn (the LiDAR one never is here).
        height: Figure height in pixels.

    Returns:
        The figure: traces "ground grid", "horizon", "behind camera", "boxes", "lidar",
        "points" and "picked cell" for the overlays given; grid labels are annotations.
    """
    panel = _camera_panel(camera, image, overlay or CameraOverlay(), ("x", "y"), style,
                          (_marker_colors(style.points, showscale), _marker_colors(style.lidar, False)))
    xaxis, yaxis = pixel_axes(camera, "x")
    layout = base_layout(height, title=camera.name, images=panel.images, shapes=panel.shapes, annotations=panel.notes,
                         xaxis=xaxis, yaxis=yaxis, plot_bgcolor="rgba(0,0,0,0)", dragmode="zoom",
                         uirevision=camera.name)
    return figure(panel.data, layout)


def camera_grid_figure(cameras: list[list[Camera | None]], images: dict[str, np.ndarray | str | None],
                       overlays: dict[str, CameraOverlay], *, style: CameraStyle = CameraStyle(),
                       row_height: int = 250) -> go.Figure:
    """Every camera of a rig in ONE figure, laid out in rows (e.g. :meth:`Rig.display_grid`).

    One figure keeps all WebGL point traces in one WebGL context: browsers allow about 16
    per page, and six separate camera figures re-created on every rerun run out of them
    (the oldest figure then silently loses its points).

    Args:
        cameras: Rows of cameras (None for an empty slot), e.g. 2 rows of 3.
        images: Camera name -> image (array, data URI or None); see :func:`camera_figure`.
        overlays: Camera name -> what to draw on it.
        style: ``style.points``: one colour scale shared by every camera, with one colour
            bar; ``style.lidar``: the LiDAR points' one (shared by every camera, its own
            colour bar right of the points' one); image width, marker size and label
            spacing as in :func:`camera_figure`.
        row_height: Height of each row in pixels.

    Returns:
        The figure: per camera the traces of :func:`camera_figure` (and "lidar" and "boxes"
        for the overlays that have them) on their own axes (trace ``meta`` holds the camera
        name) and a title annotation per camera.
    """
    has_points = any(o is not None and o.points_uv is not None and len(o.points_uv) for o in overlays.values())
    first_lidar = True
    cols = max((len(r) for r in cameras), default=1)
    flat = [cam for row in cameras for cam in (list(row) + [None] * (cols - len(row)))]
    axes, refs, titles = subplot_grid(len(flat), cols, titles=[c.name if c else "" for c in flat],
                                      hspace=0.015, vspace=0.1 if len(cameras) > 1 else 0.0)
    data, imgs, shapes, notes = [], [], [], [n for n in titles if n["text"]]
    first_points = True
    for cam, (xr, yr) in zip(flat, refs):
        xa, ya = axes["xaxis" + xr[1:]], axes["yaxis" + yr[1:]]
        if cam is None:
            xa.update(visible=False)
            ya.update(visible=False)
            continue
        px, py = pixel_axes(cam, xr)
        xa.update(px)
        ya.update(py)
        ov = overlays.get(cam.name) or CameraOverlay()
        showscale = first_points and ov.points_uv is not None and len(ov.points_uv) > 0
        marker = _marker_colors(style.points, showscale)
        lidar_scale = first_lidar and ov.lidar_uv is not None and len(ov.lidar_uv) > 0
        lidar_marker = _marker_colors(style.lidar, lidar_scale, x=1.075 if has_points else None)
        panel = _camera_panel(cam, images.get(cam.name), ov, (xr, yr), style, (marker, lidar_marker))
        first_points = first_points and not showscale
        first_lidar = first_lidar and not lidar_scale
        for tr in panel.data:
            tr["meta"] = cam.name
            tr["legendgroup"] = tr["name"]
        data += panel.data
        imgs += panel.images
        shapes += panel.shapes
        notes += panel.notes
    layout = base_layout(row_height * len(cameras), images=imgs, shapes=shapes, annotations=notes,
                         plot_bgcolor="rgba(0,0,0,0)", dragmode="zoom", uirevision="cameras", **axes)
    layout["margin"].update(t=24, r=120 if has_points and not first_lidar else 60)
    return figure(data, layout)


def _grid_labels(labels: list[str], label_uv: np.ndarray, spacing: float, xref: str = "x",
                 yref: str = "y") -> list[dict]:
    """Label annotations, nearest the bottom of the image (closest to the camera) first,
    skipping any closer than ``spacing`` pixels to one already placed."""
    ok = np.isfinite(label_uv).all(axis=1)
    order = [k for k in np.argsort(-np.where(ok, label_uv[:, 1], -np.inf)) if ok[k]]
    placed: list[np.ndarray] = []
    notes = []
    for k in order:
        p = label_uv[k]
        if any(np.hypot(*(p - q)) < spacing for q in placed):
            continue
        placed.append(p)
        notes.append(dict(x=float(p[0]), y=float(p[1]), xref=xref, yref=yref, text=labels[k].replace(" ", ""),
                          showarrow=False,
                          font=dict(color="white", size=9), bgcolor="rgba(0,0,0,0.45)", borderpad=1))
    return notes
