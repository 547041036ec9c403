"""Valid masks & coverage: footprints, overlap counts, validity settings, overlap policies."""

import pandas as pd
import streamlit as st

from appkit import compute, current
from appkit.guards import require_images, shown_errors
from appkit.navigation import require_app
from appkit.sidebar import BOUNDS_OPTIONS, EPS_OPTIONS, validity
from bevviz import overlays
from bevviz.checks import escape_markdown
from bevviz.viz.bev import bev_map, bev_panels, difference_map, footprint_composite, overlap_map

require_app()  # first: a page URL opened as the first request runs through app.py

scene, grid = current()
rig = scene.rig
eps, bounds = validity()

st.title("Valid masks & coverage")
st.caption(f"{escape_markdown(scene.label)} · {grid.height} x {grid.width} cells x {grid.num_z} heights · "
           f"a cell is covered by a camera when any of its pillar points is valid "
           f"(depth > {eps:g} m, {bounds} bounds)")

with st.spinner("Projecting the BEV grid ..."):
    fp = compute.footprints(rig, grid, eps, bounds)
    rows = compute.status_rows(rig, grid, eps, bounds)
count = overlays.overlap_count(fp)
summary = overlays.overlap_summary(count)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Blind spots (0 cameras)", f"{summary['blind %']:.1f} %")
m2.metric("Single camera", f"{summary['single %']:.1f} %")
m3.metric("Seams (2+ cameras)", f"{summary['seam %']:.1f} %")
m4.metric("Max cameras on a cell", int(count.max()) if count.size else 0)

c1, c2 = st.columns(2)
c1.plotly_chart(footprint_composite(fp, rig.names, grid), key="cov_footprints")
c2.plotly_chart(overlap_map(count, grid), key="cov_overlap")

st.subheader("Points per camera: valid, behind, outside")
st.caption("Every reference point (all pillar heights) against every camera. Behind = depth <= eps "
           "(wins over outside); outside = in front but off the image.")
st.dataframe(pd.DataFrame(rows), hide_index=True, key="cov_table", column_config={
    f"{s} %": st.column_config.ProgressColumn(f"{s} %", min_value=0, max_value=100, format="%.1f %%")
    for s in ("valid", "behind", "outside")})

if st.toggle("Per-camera footprints", value=False, key="cov_show_panels"):
    names = [n for row in rig.display_grid() for n in row if n is not None]
    st.plotly_chart(bev_panels({n: fp[rig.index(n)].astype(float) for n in names}, grid, cols=3,
                               colorscale=[[0, "#f4f4f4"], [1, "#2171b5"]], zmin=0, zmax=1,
                               hover_label="covered", panel_height=260),
                    key="cov_panels")

# ---- eps and bounds ----
st.subheader("Validity settings: where do they disagree?")
st.markdown("Setting **A** is the sidebar's. Pick setting **B**; the map highlights cells whose footprint "
            "changes for some camera and pillar point. `pixel` bounds accept the full pixel-centre extent "
            "-0.5 <= u <= W - 0.5; BEVFormer's `0 < u/W < 1` drops the outer half pixel on the left and top "
            "and adds the strip W - 0.5 < u < W on the right and bottom.")
b1, b2, b3 = st.columns([1, 1, 2])
other = BOUNDS_OPTIONS[1] if bounds == BOUNDS_OPTIONS[0] else BOUNDS_OPTIONS[0]
eps_b = b1.selectbox("B: depth eps (m)", EPS_OPTIONS, index=EPS_OPTIONS.index(eps) if eps in EPS_OPTIONS else 0,
                     format_func=lambda e: f"{e:g}", key="cov_eps_b")
bounds_b = b2.selectbox("B: image bounds", BOUNDS_OPTIONS, index=BOUNDS_OPTIONS.index(other), key="cov_bounds_b")
cmp = compute.validity_comparison(rig, grid, (eps, bounds), (float(eps_b), bounds_b))
ring = b3.toggle("Ring differing cells", value=True, key="cov_ring",
                 help="A few differing cells vanish at screen resolution; rings make them visible.")
c1, c2 = st.columns([1.3, 1])
c1.plotly_chart(difference_map(cmp.seen, cmp.differs, grid, max_markers=3000 if ring else 0,
                               title=f"A (eps {eps:g}, {bounds}) vs B (eps {eps_b:g}, {bounds_b})"),
                key="cov_diff")
with c2:
    st.metric("Cells that differ", f"{int(cmp.differs.sum()):,}",
              help="Cells where any camera's validity differs for any pillar point.")
    st.dataframe(pd.DataFrame({"camera": rig.names, "points that differ": cmp.points_differ,
                               "footprint cells that differ": cmp.cells_differ}),
                 hide_index=True, key="cov_diff_table")

# ---- overlap policies ----
st.subheader("Overlap policies: mean vs first hit vs last write")
st.markdown("Where two cameras see a cell, BEVFormer averages them (**mean**); NPU ports often keep "
            "the **first** camera that hits the cell, or let the **last** write win. They agree on "
            "single-camera cells and can only disagree on seams. Features: RGB at stride 8, "
            "`grid_sample` reference sampler.")
if not require_images(scene, "Comparing overlap policies"):
    st.stop()
with shown_errors("Comparing overlap policies"), \
        st.spinner("Sampling BEV features under three overlap policies ..."):
    policies = {p: compute.bev(scene, grid, "RGB", 8, "grid_sample", overlap=p, eps=eps, bounds=bounds)
                for p in ("mean", "first_hit", "last_write")}
maps = {p: r["features"] for p, r in policies.items()}
dis = overlays.disagreement(maps)
differs = dis > 1e-6
st.plotly_chart(bev_panels({p: overlays.channel_view(m, "rgb") for p, m in maps.items()}, grid, cols=3,
                           zmin=0.0, zmax=1.0, panel_height=340), key="cov_policies")
c1, c2 = st.columns([1.4, 1])
c1.plotly_chart(bev_map(dis, grid, title="max |difference| between policies (over RGB channels)",
                        colorscale="Inferno", zmin=0.0, colorbar_title="|diff|", hover_label="|diff|",
                        height=460), key="cov_policy_diff")
c2.metric("Cells where policies disagree", f"{int(differs.sum()):,}")
c2.metric("... of which are seams", f"{int((differs & (count >= 2)).sum()):,}")
c2.metric("Largest disagreement", f"{float(dis.max()):.3f}")
c2.caption("Seams where the cameras disagree most are where calibration or exposure differ; a first-hit or "
           "last-write port shows them as hard edges that the mean blends away.")
