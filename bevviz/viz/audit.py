"""Figures of a calibration audit: offsets along each scene's timeline, verdicts per scene x camera.

Input is plain rows (dicts with the columns of ``bevviz.audit.store.SCHEMA``), so the app
and the HTML report draw the same figures.

Convention:
    Offsets are body-frame (FLU) degrees, the stored camera turned away from where the
    evidence puts it; the drawn value is the rotation's size ``sqrt(roll^2 + pitch^2 +
    yaw^2)``. See docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from bevviz.viz.common import base_layout, camera_color, figure, plain_text, subplot_grid

__all__ = ["camera_offsets_figure", "offset_size", "offset_timeline_figure", "verdict_matrix_figure"]

AXES = ("roll", "pitch", "yaw")
VERDICT_SYMBOLS = {"miscalibrated": "x", "inconclusive": "diamond-open", "ok": "circle-open"}


def offset_size(row: Mapping) -> tuple[float | None, float | None]:
    """(size of the offset, its standard deviation) in degrees; None where not estimated."""
    vals = [row.get(f"{a}_deg") for a in AXES]
    if any(v is None for v in vals):
        return None, None
    size = math.sqrt(sum(v * v for v in vals))
    uncs = [row.get(f"{a}_unc_deg") for a in AXES]
    if any(u is None for u in uncs) or size == 0:
        return size, None
    # First-order propagation of independent per-axis deviations onto the size.
    return size, math.sqrt(sum((v / size * u) ** 2 for v, u in zip(vals, uncs)))


def _hover(row: Mapping) -> str:
    axes = ", ".join(f"{a} {row[f'{a}_deg']:+.2f}" + (f" +- {row[f'{a}_unc_deg']:.2f}"
                                                       if row.get(f"{a}_unc_deg") is not None else "")
                     for a in AXES if row.get(f"{a}_deg") is not None)
    src = row.get("offset_source")
    return (f"{plain_text(row['camera'])} · sample {row['sample_index']} · {row['verdict']}<br>"
            + (f"offset {axes} deg ({src}{'' if row.get('offset_checked') else ', unchecked'})" if axes
               else "offset not estimated"))


def offset_timeline_figure(rows: Sequence[Mapping], cameras: Sequence[str] | None = None,
                           tolerance_deg: float = 0.5, height_per_scene: int = 220) -> go.Figure:
    """Estimated offset per camera along each scene's timeline (one panel per scene).

    A calibrated camera's line stays at zero; a drifting one leaves it. Where the offset
    was not estimated (seams only, camera not flagged), an ``ok`` verdict is drawn at zero
    with an open marker and anything else is left out.

    Args:
        rows: Audit rows (error rows are skipped).
        cameras: Camera order for the colours (default: order of first appearance).
        tolerance_deg: Drawn as a dashed line (the doctor's tolerance).
        height_per_scene: Pixel height of one panel.

    Returns:
        Line figure; x = seconds since the scene's first sample, y = degrees.
    """
    rows = [r for r in rows if r.get("camera") is not None and r.get("timestamp") is not None]
    scenes = list(dict.fromkeys(r["scene"] for r in rows))
    order = list(cameras or dict.fromkeys(r["camera"] for r in rows))
    axes, refs, notes = subplot_grid(max(1, len(scenes)), 1, titles=scenes or ["(no rows)"], vspace=0.12)
    data, shown = [], set()
    for (xref, yref), scene in zip(refs, scenes):
        srows = sorted((r for r in rows if r["scene"] == scene), key=lambda r: r["timestamp"])
        t0 = srows[0]["timestamp"]
        for cam in [c for c in order if any(r["camera"] == c for r in srows)]:
            crows = [r for r in srows if r["camera"] == cam]
            xs, ys, errs, symbols, texts = [], [], [], [], []
            for r in crows:
                size, unc = offset_size(r)
                if size is None:  # not estimated: an ok camera sits at zero, anything else is a gap
                    size = 0.0 if r["verdict"] == "ok" else None
                xs.append((r["timestamp"] - t0) / 1e6)
                ys.append(size)
                errs.append(unc or 0.0)
                symbols.append(VERDICT_SYMBOLS.get(r["verdict"], "circle"))
                texts.append(_hover(r))
            color = camera_color(order.index(cam))
            data.append(dict(type="scatter", mode="lines+markers", x=xs, y=ys, xaxis=xref, yaxis=yref,
                             name=plain_text(cam.replace("CAM_", "")), legendgroup=cam, showlegend=cam not in shown,
                             connectgaps=False, line=dict(color=color, width=2),
                             marker=dict(symbol=symbols, size=9, color=color),
                             error_y=dict(type="data", array=errs, visible=any(errs), color=color),
                             text=texts, hovertemplate="%{text}<extra></extra>"))
            shown.add(cam)
        axes["xaxis" + xref[1:]].update(title=dict(text="seconds since the scene's first sample"), zeroline=False)
        axes["yaxis" + yref[1:]].update(title=dict(text="offset (deg)"), rangemode="tozero")
        data.append(dict(type="scatter", mode="lines", x=[0, max(1e-6, (srows[-1]["timestamp"] - t0) / 1e6)],
                         y=[tolerance_deg] * 2, xaxis=xref, yaxis=yref, name=f"tolerance {tolerance_deg:g} deg",
                         legendgroup="tol", showlegend="tol" not in shown, hoverinfo="skip",
                         line=dict(color="#888888", dash="dash", width=1)))
        shown.add("tol")
    layout = base_layout(60 + height_per_scene * max(1, len(scenes)), "Estimated offset along each scene",
                         legend=True, annotations=notes, **axes)
    # Legend on the right: above the panels it would cover the first panel's title.
    layout.update(legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top"),
                  margin=dict(l=8, r=8, t=48, b=8))
    return figure(data, layout)


def verdict_matrix_figure(summary: Sequence[Mapping], cameras: Sequence[str] | None = None,
                          height: int | None = None) -> go.Figure:
    """Scene x camera heatmap of the share of samples flagged miscalibrated.

    Args:
        summary: Rows of ``bevviz.audit.report.summarize`` (scene, camera, samples, counts).
        cameras: Column order (default: order of first appearance).
        height: Figure height (default from the number of scenes).

    Returns:
        Heatmap; each cell's text reads ``miscalibrated / samples`` (and errors, if any).
    """
    scenes = list(dict.fromkeys(s["scene"] for s in summary))
    cams = list(cameras or dict.fromkeys(s["camera"] for s in summary))
    cell = {(s["scene"], s["camera"]): s for s in summary}
    z, text = [], []
    for sc in scenes:
        zr, tr = [], []
        for cam in cams:
            s = cell.get((sc, cam))
            if s is None or not s["samples"]:
                zr.append(None)
                tr.append("")
                continue
            zr.append(s["miscalibrated"] / s["samples"])
            tr.append(f"{s['miscalibrated']}/{s['samples']}" + (f" ({s['error']} err)" if s.get("error") else ""))
        z.append(zr)
        text.append(tr)
    data = [dict(type="heatmap", z=z, x=[plain_text(c.replace("CAM_", "")) for c in cams],
                 y=[plain_text(sc) for sc in scenes], text=text,
                 texttemplate="%{text}", zmin=0, zmax=1, colorscale=[[0, "#e8f5e9"], [1, "#c62828"]],
                 colorbar=dict(title=dict(text="flagged"), thickness=10),
                 hovertemplate="%{y} %{x}: %{text} flagged<extra></extra>")]
    return figure(data, base_layout(height or 80 + 36 * max(1, len(scenes)), "Samples flagged miscalibrated",
                                    yaxis=dict(autorange="reversed")))


def camera_offsets_figure(rows: Sequence[Mapping], cameras: Sequence[str] | None = None,
                          height: int = 300) -> go.Figure:
    """Estimated offset per camera and axis (grouped bars, error bars where known).

    Args:
        rows: One row per camera (columns ``camera``, ``roll_deg`` ..., ``roll_unc_deg`` ...).
        cameras: Bar order (default the rows' order).
        height: Figure height.

    Returns:
        Bar figure; a camera without an estimate has no bars.
    """
    by_cam = {r["camera"]: r for r in rows if r.get("camera") is not None}
    cams = [c for c in (cameras or by_cam) if c in by_cam]
    data = []
    for a, color in zip(AXES, ("#1f77b4", "#ff7f0e", "#2ca02c")):
        vals = [by_cam[c].get(f"{a}_deg") for c in cams]
        uncs = [by_cam[c].get(f"{a}_unc_deg") or 0.0 for c in cams]
        data.append(dict(type="bar", name=a, x=[plain_text(c.replace("CAM_", "")) for c in cams], y=vals,
                         marker=dict(color=color), error_y=dict(type="data", array=uncs, visible=any(uncs)),
                         hovertemplate=f"%{{x}} {a}: %{{y:+.2f}} deg<extra></extra>"))
    return figure(data, base_layout(height, "Estimated offset per camera (deg; none where not estimated)",
                                    legend=True, barmode="group", yaxis=dict(title=dict(text="deg"))))
