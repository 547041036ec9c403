"""BEV features: every sampler's BEV map beside the GridSample reference (and the ground truth)."""

import pandas as pd
import streamlit as st

from appkit import compute, current
from appkit.guards import require_images, shown_errors
from appkit.navigation import require_app
from appkit.sidebar import validity
from bevviz import downloads, overlays
from bevviz.checks import escape_markdown
from bevviz.samplers import BEV_VARIANTS, REFERENCE
from bevviz.viz.bev import bev_panels
from bevviz.viz.panels import bar_figure

require_app()  # first: a page URL opened as the first request runs through app.py

scene, grid = current()
rig = scene.rig
eps, bounds = validity()

st.title("BEV features")
caption = st.empty()

c1, c2, c3, c4 = st.columns([1.2, 1, 1.3, 1])
kind = c1.radio("Features", compute.FEATURE_KINDS, horizontal=True, key="bev_kind",
                help="RGB: the images area-averaged to the stride. conv C=64: a fixed, seeded conv stack.")
stride = c1.select_slider("Stride", [4, 8, 16], value=8 if kind == "RGB" else 16, key=f"bev_stride_{kind}")
overlap = c2.selectbox("Overlap policy", ("mean", "first_hit", "last_write"), key="bev_overlap")
kernel = c2.select_slider("Deformable kernel", [1, 3], value=1, key="bev_kernel",
                          help="k x k taps averaged; k = 1 is a single tap (bilinear equals the reference).")
views = (["RGB composite"] if kind == "RGB" else []) + ["channel", "channel norm"]
view_name = c3.radio("Show", views, horizontal=True, key=f"bev_view_{kind}")
C = 3 if kind == "RGB" else 64
channel = c3.slider("Channel", 0, C - 1, 0, key=f"bev_channel_{kind}", disabled=view_name != "channel")
show_gt = c4.toggle("Ground truth", value=scene.ground_truth is not None, key="bev_show_gt",
                    disabled=scene.ground_truth is None,
                    help="The true ground texture on this grid (embedded sample only).")
ground_only = c4.toggle("Ground plane only (z = 0)", value=True, key="bev_ground_only",
                        help="Sample one point per cell on the ground instead of the sidebar's pillar heights: "
                             "the BEV then reconstructs the painted ground and compares with the ground truth. "
                             "Off: every pillar height is averaged, as BEVFormer does.")
if ground_only:
    grid = grid.with_z((0.0,))
view = {"RGB composite": "rgb", "channel norm": "norm"}.get(view_name, channel)
caption.caption(f"{escape_markdown(scene.label)} · {grid.height} x {grid.width} cells x {grid.num_z} heights "
                f"(z = {', '.join(f'{z:g}' for z in grid.z_values)} m) · depth > {eps:g} m, {bounds} bounds")

SAMPLERS = {v.label: dict(sampler=v.sampler, rounding=v.rounding or "bilinear") for v in BEV_VARIANTS}
REF = REFERENCE.label
if not require_images(scene, "Sampling BEV features"):
    st.stop()
results = {}
with shown_errors("Sampling BEV features"), \
        st.spinner("Sampling BEV features with every sampler (first time for these settings) ..."):
    for label, kw in SAMPLERS.items():
        results[label] = compute.bev(scene, grid, kind, stride, overlap=overlap, eps=eps, bounds=bounds,
                                     kernel_size=kernel, **kw)
    gt = compute.ground_truth_bev(scene, grid) if show_gt else None

maps = {k: overlays.channel_view(r["features"], view) for k, r in results.items()}
ref_view = maps[REF]
lo, hi = (0.0, 1.0) if view == "rgb" else (float(ref_view.min()), float(ref_view.max()))
panels = dict(maps)
if gt is not None:
    panels["ground truth (texture)"] = gt
st.plotly_chart(bev_panels(panels, grid, cols=3, zmin=lo, zmax=hi, colorscale="Viridis",
                           colorbar_title="norm" if view == "norm" else f"ch {view}" if view != "rgb" else "",
                           panel_height=360), key="bev_maps")

st.subheader("|difference| vs the GridSample reference")
feats = {k: r["features"] for k, r in results.items()}
diffs = {k: overlays.disagreement({REF: feats[REF], k: feats[k]}, reference=REF) for k in feats if k != REF}
st.plotly_chart(bev_panels(diffs, grid, cols=4, colorscale="Inferno", zmin=0.0, colorbar_title="|diff|",
                           hover_label="max over channels |diff|", panel_height=300), key="bev_diffs")

rows = overlays.error_table(feats, REF)
for row in rows:
    t = results[row["name"]]["timings"]
    row["sample (ms)"] = 1000 * t.get("sample", float("nan"))
    row["total (ms)"] = 1000 * t.get("total", float("nan"))
    row["table build (ms)"] = f"{1000 * t['build']:.0f}" if "build" in t else "—"
table = pd.DataFrame(rows).rename(columns={"name": "sampler"})
t1, t2 = st.columns([1.4, 1])
t1.dataframe(table, hide_index=True, key="bev_table", column_config={
    "max |diff|": st.column_config.NumberColumn(format="%.2e"),
    "mean |diff|": st.column_config.NumberColumn(format="%.2e"),
    "sample (ms)": st.column_config.NumberColumn(format="%.1f"),
    "total (ms)": st.column_config.NumberColumn(format="%.1f")})
t1.caption("Errors over all channels and cells; times measured when the result was computed (cached after). "
           "Total = the shared geometry and weights + sampling; LUT total excludes building the table (its own "
           "column). deformable (floor) converts with the align_corners=True formula and floors: a half-pixel "
           "pull towards the top-left.")
ref_t = results[REF]["timings"]
shared = 1000 * (ref_t.get("geometry", 0.0) + ref_t.get("weights", 0.0))
labels = [*table["sampler"], "shared: geometry + weights"]
t2.plotly_chart(bar_figure(labels, [*table["sample (ms)"], shared], title="sampling time per sampler (ms)",
                           x_title="ms", colors=["#4c78a8"] * len(table) + ["#9e9e9e"]), key="bev_times")

st.subheader("Downloads")
d1, d2 = st.columns([1, 2])
which = d1.selectbox("Heatmap", list(panels), key="bev_dl_which")
arr = panels[which]
d2.download_button("Download PNG", lambda: downloads.heatmap_png(arr, lo, hi),
                   file_name=f"bev_{which.split()[0].lower()}.png", mime="image/png", on_click="ignore")
