"""3D view of a rig in the ego frame: frustums, RDF camera axes, ego axes, BEV grid extent."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bevviz.bev_grid import BEVGrid
from bevviz.viz.common import AXIS_COLORS, base_layout, camera_color, figure, plain_text

#: Share of the figure's height below the 3-D scene that holds the legend.
LEGEND_SHARE = 0.22


def _polyline(segments: list[np.ndarray]) -> np.ndarray:
    """Join polylines (each (k, 3)) into one array with NaN rows between them."""
    parts = []
    for s in segments:
        parts.append(np.asarray(s, dtype=float))
        parts.append(np.full((1, 3), np.nan))
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def frustum_segments(frustum: np.ndarray) -> list[np.ndarray]:
    """Edges of a frustum given as (centre, tl, tr, br, bl), shape (5, 3)."""
    c, tl, tr, br, bl = frustum
    return [np.stack([c, tl]), np.stack([c, tr]), np.stack([c, br]), np.stack([c, bl]),
            np.stack([tl, tr, br, bl, tl])]


def rig_figure(names: list[str], frustums: dict[str, np.ndarray],
               axes: dict[str, tuple[np.ndarray, np.ndarray]], grid: BEVGrid | None = None,
               ego_axis_length: float = 3.0, height: int = 560, show_labels: bool = True) -> go.Figure:
    """The rig in 3D, in the ego frame (x forward, y left, z up).

    Args:
        names: Camera names in rig order (colours follow this order).
        frustums: Name -> frustum points (centre, tl, tr, br, bl), shape (5, 3).
        axes: Name -> (origin (3,), tips (3, 3)) of the camera's RDF axes.
        grid: When given, the BEV grid's extent is drawn (ground rectangle at z = 0 and the
            pillar heights' box).
        ego_axis_length: Length of the ego axes arrows (metres).
        height: Figure height.
        show_labels: Label cameras with their names.

    Returns:
        Figure with one frustum trace per camera, "camera x/y/z (RDF)" axis traces, "ego axes"
        and, with a grid, "BEV extent".
    """
    data: list[dict] = []
    for i, name in enumerate(names):
        if name not in frustums:
            continue
        f, shown = frustums[name], plain_text(name)
        line = _polyline(frustum_segments(f))
        data.append(dict(type="scatter3d", x=line[:, 0], y=line[:, 1], z=line[:, 2], mode="lines", name=shown,
                         line=dict(color=camera_color(i), width=4),
                         hovertemplate=f"{shown}<br>x %{{x:.2f}}, y %{{y:.2f}}, z %{{z:.2f}}<extra></extra>"))
        if show_labels:
            tip = f[1:].mean(axis=0)
            data.append(dict(type="scatter3d", x=[tip[0]], y=[tip[1]], z=[tip[2]], mode="text",
                             text=[plain_text(name.replace("CAM_", ""))], showlegend=False, hoverinfo="skip",
                             textfont=dict(color=camera_color(i), size=11)))
    for k, label in enumerate(("camera x (RDF right)", "camera y (RDF down)", "camera z (RDF forward)")):
        segs = [np.stack([o, tips[k]]) for o, tips in (axes[n] for n in names if n in axes)]
        if not segs:
            continue
        line = _polyline(segs)
        data.append(dict(type="scatter3d", x=line[:, 0], y=line[:, 1], z=line[:, 2], mode="lines", name=label,
                         line=dict(color=AXIS_COLORS[k], width=5), hoverinfo="skip"))
    # Ego axes with cone heads.
    L = ego_axis_length
    ego = np.array([[L, 0, 0], [0, L, 0], [0, 0, L]], dtype=float)
    line = _polyline([np.stack([np.zeros(3), e]) for e in ego])
    data.append(dict(type="scatter3d", x=line[:, 0], y=line[:, 1], z=line[:, 2], mode="lines", name="ego axes",
                     line=dict(color="#333333", width=7), hoverinfo="skip"))
    data.append(dict(type="cone", x=ego[:, 0], y=ego[:, 1], z=ego[:, 2], u=ego[:, 0] / L, v=ego[:, 1] / L,
                     w=ego[:, 2] / L, sizemode="absolute", sizeref=L * 0.08, anchor="tail",
                     colorscale=[[0, "#333333"], [1, "#333333"]], showscale=False, name="ego axes",
                     hoverinfo="skip", showlegend=False))
    data.append(dict(type="scatter3d", x=ego[:, 0] * 1.2, y=ego[:, 1] * 1.2, z=ego[:, 2] * 1.2, mode="text",
                     text=["x fwd", "y left", "z up"], showlegend=False, hoverinfo="skip",
                     textfont=dict(color="#333333", size=12)))
    if grid is not None:
        (x0, x1), (y0, y1) = grid.x_range, grid.y_range
        z0, z1 = min(grid.z_values), max(grid.z_values)

        def rect(z):
            return np.array([[x0, y0, z], [x1, y0, z], [x1, y1, z], [x0, y1, z], [x0, y0, z]])

        segs = [rect(0.0)]
        if z1 > z0:
            segs += [rect(z0), rect(z1)] + [np.array([[x, y, z0], [x, y, z1]]) for x in (x0, x1) for y in (y0, y1)]
        line = _polyline(segs)
        data.append(dict(type="scatter3d", x=line[:, 0], y=line[:, 1], z=line[:, 2], mode="lines",
                         name="BEV extent", line=dict(color="#888888", width=2, dash="dash"),
                         hovertemplate="BEV extent<br>x %{x:.1f}, y %{y:.1f}, z %{z:.2f}<extra></extra>"))
    # The legend in rows below the scene, outside it: above it, its rows pushed the scene's
    # bottom out of the figure, and beside it a narrow column has no room left for the scene.
    # The eye far enough back that the whole extent fits.
    layout = base_layout(height, legend=True, uirevision="rig3d",
                         scene=dict(aspectmode="data", xaxis=dict(title=dict(text="x (m)")),
                                    yaxis=dict(title=dict(text="y (m)")), zaxis=dict(title=dict(text="z (m)")),
                                    domain=dict(x=[0.0, 1.0], y=[LEGEND_SHARE, 1.0]),
                                    camera=dict(eye=dict(x=-1.5, y=-1.25, z=1.1), up=dict(x=0, y=0, z=1))))
    layout["legend"] = dict(orientation="h", x=0.0, xanchor="left", y=LEGEND_SHARE - 0.01, yanchor="top")
    layout["margin"] = dict(l=0, r=0, t=8, b=0)
    return figure(data, layout)
