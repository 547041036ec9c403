"""Figures of the Calibration Doctor's LiDAR witness: edge points over image edges, score profiles.

Pure builders: numbers in, ``go.Figure`` out (no Streamlit, no geometry). The numbers come
from :class:`bevviz.calibration.CameraEvidence`.

Convention:
    Image figures use full-resolution pixel axes (u right, v down, integers at pixel
    centres), the picture stretched over ``[-0.5, W - 0.5] x [-0.5, H - 0.5]`` as in
    :mod:`bevviz.viz.cameras`. Rotations are body-frame (FLU) roll, pitch, yaw in degrees;
    a profile's x is the *offset* (how far the stored camera is turned away from where the
    evidence puts it: 0 is the stored calibration), as in :mod:`bevviz.calibration.lidar.evidence`.
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from bevviz.camera import Camera
from bevviz.viz.cameras import pixel_axes
from bevviz.viz.common import base_layout, data_uri, downsample, figure, subplot_grid, to_uint8

#: Colour of each verdict (tables and markers).
VERDICT_COLORS = {"miscalibrated": "#d62728", "inconclusive": "#ff9f1c", "ok": "#2ca02c"}
#: Colours of the edge points at the stored calibration and at the optimum.
STORED_COLOR, BEST_COLOR = "#ff3b30", "#34c759"
AXIS_NAMES = ("roll", "pitch", "yaw")


def edge_picture(strength: np.ndarray, max_width: int = 800, percentile: float = 99.0) -> str:
    """An edge-strength map as a grey JPEG data URI for :func:`lidar_alignment_figure`.

    Args:
        strength: Edge strength, shape (H, W), float (e.g.
            :func:`bevviz.calibration.edge_strength`).
        max_width: Width it is downsampled to.
        percentile: The strength mapped to white (higher values saturate).

    Returns:
        A ``data:image/jpeg`` URI of the (h, w) grey picture.
    """
    s = np.asarray(strength, dtype=np.float32)
    finite = s[np.isfinite(s)]
    top = float(np.percentile(finite, percentile)) if finite.size else 1.0
    grey = to_uint8(s, 0.0, max(top, 1e-6))
    return data_uri(downsample(grey, max_width)[0], "jpeg")


def lidar_alignment_figure(camera: Camera, picture: str | None, uv_stored: np.ndarray, uv_best: np.ndarray,
                           title: str | None = None, height: int = 420, marker_size: float = 3.5,
                           names: tuple[str, str] = ("stored calibration", "optimum")) -> go.Figure:
    """The LiDAR's edge points over a camera's image edges, before and after alignment.

    Args:
        camera: The camera (its size sets the axes).
        picture: The background (a ``data:`` URI, e.g. :func:`edge_picture`), or None.
        uv_stored: Edge points projected with the stored calibration, shape (M, 2), pixels.
        uv_best: The same points at the optimum, shape (M, 2).
        title: Figure title.
        height: Figure height in pixels.
        marker_size: Point size.
        names: The two traces' names (e.g. ``("before", "after")`` for a correction).

    Returns:
        The figure: traces named ``names`` (default "stored calibration" and "optimum") on
        pixel axes.
    """
    W, H = camera.width, camera.height
    images = []
    if picture is not None:
        images.append(dict(source=picture, xref="x", yref="y", x=-0.5, y=-0.5, sizex=W, sizey=H, sizing="stretch",
                           layer="below", xanchor="left", yanchor="top"))
    data = []
    for name, uv, color in ((names[0], uv_stored, STORED_COLOR), (names[1], uv_best, BEST_COLOR)):
        uv = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
        data.append(dict(type="scattergl", x=uv[:, 0], y=uv[:, 1], mode="markers", name=f"{name} ({len(uv)})",
                         marker=dict(color=color, size=marker_size, opacity=0.8),
                         hovertemplate=f"{name}<br>(u, v) = (%{{x:.1f}}, %{{y:.1f}})<extra></extra>"))
    xaxis, yaxis = pixel_axes(camera, "x")
    layout = base_layout(height, title=title, legend=True, images=images, xaxis=xaxis, yaxis=yaxis,
                         plot_bgcolor="#000000", dragmode="zoom", uirevision=camera.name)
    layout["legend"].update(yanchor="top", y=-0.01)
    layout["margin"].update(b=30)
    return figure(data, layout)


def score_profiles_figure(profiles: Mapping[str, tuple[np.ndarray, np.ndarray]],
                          optimum_deg: Sequence[float] | Mapping[str, float], title: str | None = None,
                          height: int = 300, cols: int = 3) -> go.Figure:
    """The alignment score along each axis through the optimum, stored calibration and optimum marked.

    Args:
        profiles: Axis (``"roll"``, ``"pitch"``, ``"yaw"``) -> (offsets (K,) degrees, scores (K,)),
            as :attr:`bevviz.calibration.CameraEvidence.profiles`.
        optimum_deg: The optimum's offset per axis: (3,) in roll, pitch, yaw order, or a
            mapping axis -> degrees (:attr:`CameraEvidence.offset_deg`).
        title: Figure title.
        height: Figure height in pixels.
        cols: Panels per row (3: side by side; 1: stacked, for a narrow column).

    Returns:
        One panel per axis: trace "score", and markers "stored" (offset 0) and "optimum".

    Convention:
        x is the offset (0 = the stored calibration), the other two axes held at the
        optimum; see the module docstring.
    """
    names = [a for a in AXIS_NAMES if a in profiles]
    opt = optimum_deg if isinstance(optimum_deg, Mapping) else dict(zip(AXIS_NAMES, optimum_deg))
    n = max(len(names), 1)
    cols = max(1, min(cols, n))
    axes, refs, notes = subplot_grid(n, cols, titles=names or [""], hspace=0.06, vspace=0.16)
    data, shapes = [], []
    for k, (name, (xr, yr)) in enumerate(zip(names, refs)):
        offs, scores = (np.asarray(v, dtype=np.float64) for v in profiles[name])
        here = dict(xaxis=xr, yaxis=yr)
        data.append(dict(type="scatter", x=offs, y=scores, mode="lines", name="score", showlegend=k == 0,
                         legendgroup="score", line=dict(color="#1f77b4", width=2),
                         hovertemplate=f"{name} offset %{{x:+.2f}} deg<br>score %{{y:.4f}}<extra></extra>", **here))
        o = float(opt.get(name, 0.0))
        for label, x, color in (("stored", 0.0, STORED_COLOR), ("optimum", o, BEST_COLOR)):
            y = float(np.interp(x, offs, scores)) if offs.size else 0.0
            data.append(dict(type="scatter", x=[x], y=[y], mode="markers", name=label, showlegend=k == 0,
                             legendgroup=label, marker=dict(color=color, size=9, line=dict(color="white", width=1)),
                             hovertemplate=f"{label}: {name} %{{x:+.2f}} deg, score %{{y:.4f}}<extra></extra>",
                             **here))
            shapes.append(dict(type="line", xref=xr, yref=f"{yr} domain", x0=x, x1=x, y0=0, y1=1,
                               line=dict(color=color, width=1, dash="dot")))
        bottom, left = k >= n - cols, k % cols == 0
        axes["xaxis" + xr[1:]].update(title=dict(text="offset (deg)") if bottom else None, zeroline=False)
        axes["yaxis" + yr[1:]].update(title=dict(text="score") if left else None)
    layout = base_layout(height, title=title, legend=True, shapes=shapes, annotations=notes, **axes)
    # The legend sits at the very bottom of the figure (container coordinates), under the
    # bottom row's axis title, so it can cover neither that title nor the figure's.
    layout["legend"].update(yref="container", yanchor="bottom", y=0.0)
    layout["margin"].update(t=56 if title else 30, b=84)
    return figure(data, layout)
