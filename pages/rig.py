"""Rig & Projection: every camera with the projected BEV points (and the LiDAR points and
annotation boxes when the scene has them), a BEV cell picker, the rig in 3D."""

import pandas as pd
import streamlit as st

from appkit import compute, current
from appkit.navigation import require_app
from appkit.sidebar import validity
from bevviz import downloads, overlays
from bevviz.checks import MAX_CAMERA_LIDAR_POINTS, escape_markdown
from bevviz.viz.bev import pick_map
from bevviz.viz.cameras import CameraStyle, ColorScale, camera_grid_figure
from bevviz.viz.rig3d import rig_figure

require_app()  # first: a page URL opened as the first request runs through app.py

scene, grid = current()
rig = scene.rig
eps, bounds = validity()

st.title("Rig & Projection")
st.caption(f"{escape_markdown(scene.label)} · {grid.height} x {grid.width} BEV cells x {grid.num_z} heights · "
           f"valid: depth > {eps:g} m, {bounds} bounds")
for note in scene.notes:
    st.info(escape_markdown(note))

# ---- display controls (display-only: nothing is recomputed when they change) ----
c1, c2, c3, c4, c5, c6 = st.columns([1.2, 1.2, 1, 1, 1, 1])
color_by = c1.selectbox("Colour points by", compute.COLOR_BY, key="rig_color_by")
max_points = c2.select_slider("Points per camera", [250, 500, 1000, 2000, 4000, 8000, 16000], value=1000,
                              key="rig_max_points")
show_grid = c3.toggle("Ground grid (10 m)", value=True, key="rig_show_grid")
show_horizon = c4.toggle("Horizon", value=True, key="rig_show_horizon")
show_behind = c5.toggle("Behind-camera points", value=False, key="rig_show_behind",
                        help="Where points BEHIND a camera would land if the depth test were skipped "
                             "(dividing by a negative depth mirrors them into the image).")
# With a LiDAR scan the LiDAR points are the evidence to look at: the BEV points start off
# (both at once are two clouds with two colour bars). One remembered state per case, so that
# switching to a source with LiDAR starts from its own default.
has_lidar = scene.lidar is not None
show_points = c6.toggle("BEV points", value=not has_lidar,
                        key="rig_show_points_lidar" if has_lidar else "rig_show_points")
show_lidar = show_boxes = False
lidar_color_by = "depth"
if scene.lidar is not None or scene.boxes:
    l1, l2, l3, _ = st.columns([1.2, 1.2, 1, 3])
    show_lidar = l1.toggle("LiDAR points", value=scene.lidar is not None, key="rig_show_lidar",
                           disabled=scene.lidar is None)
    lidar_color_by = l2.selectbox("Colour LiDAR by", tuple(compute.LIDAR_COLOR_BY), key="rig_lidar_color_by",
                                  disabled=not show_lidar)
    show_boxes = l3.toggle("Boxes", value=bool(scene.boxes), key="rig_show_boxes", disabled=not scene.boxes)

# ---- the picked BEV cell (number inputs, or a click on the map below) ----
ss = st.session_state
ss.setdefault("pick_x", 20.0)
ss.setdefault("pick_y", 5.0)
sel = ss.get("pick_map")
if sel is not None:
    pts = [p for p in (sel.get("selection", {}) or {}).get("points", []) if "x" in p and "y" in p]
    if pts:
        sig = (round(pts[-1]["x"], 3), round(pts[-1]["y"], 3))
        if sig != ss.get("pick_last_click"):
            ss["pick_last_click"] = sig
            ss["pick_x"], ss["pick_y"] = float(sig[1]), float(sig[0])
ss["pick_x"] = min(max(float(ss["pick_x"]), grid.x_range[0]), grid.x_range[1])
ss["pick_y"] = min(max(float(ss["pick_y"]), grid.y_range[0]), grid.y_range[1])
cell = grid.cell_of(ss["pick_x"], ss["pick_y"])
report = overlays.cell_report(rig, grid, *cell, eps=eps, bounds=bounds) if cell else []

# ---- cameras in display order ----
with st.spinner("Projecting the BEV grid ..."):
    cams = compute.camera_overlays(rig, grid, eps, bounds, show_behind) if show_points or show_behind else {}
    lines = compute.ground_lines(rig, grid, 10.0) if show_grid else None
    _, _, horizons = compute.rig_geometry(rig, 3.0)
    pictures = compute.display_images(scene)
    lidar = compute.lidar_points(scene) if show_lidar else {}
    boxes = compute.box_wireframes(scene) if show_boxes else {}
cmin, cmax = cams.get("_range", {}).get(color_by, (None, None))
unit = {"depth": "depth (m)", "pillar z": "z (m)", "BEV x": "x (m)", "BEV y": "y (m)"}[color_by]
overlays_by_camera = {}
for ci, name in enumerate(rig.names):
    ov = compute.overlay_for(cams.get(name), color_by, max_points, show_points, show_behind)
    ov.horizon = horizons[name] if show_horizon else None
    ov.picks = [r for r in report if r["camera"] == name]
    if lines is not None:
        ov.grid_uv, ov.grid_labels, ov.grid_label_uv = lines.uv[ci], lines.labels, lines.label_uv[ci]
    overlays_by_camera[name] = compute.lidar_overlay(ov, lidar.get(name), lidar_color_by, boxes.get(name))
layout = [[rig[n] if n is not None else None for n in row] for row in rig.display_grid()]
lmin, lmax = lidar.get("_range", {}).get(lidar_color_by, (None, None))
st.plotly_chart(camera_grid_figure(layout, pictures, overlays_by_camera, style=CameraStyle(
                    points=ColorScale(cmin=cmin, cmax=cmax, title=unit),
                    lidar=ColorScale("Plasma", lmin, lmax, compute.LIDAR_COLOR_BY[lidar_color_by][1]))),
                key="cameras", config={"displaylogo": False})
st.caption("Hover a point for its BEV cell (x, y, z), pixel (u, v) and depth. Dashed cyan: the horizon; "
           "white: the ground grid at z = 0 every 10 m; magenta rings: the picked cell below.")
if lidar:
    seen = [c for n, c in lidar.items() if n != "_range"]
    st.caption(f"LiDAR: each camera sees the scan at its own exposure time; points hidden behind nearer surfaces "
               f"(a per-camera depth buffer) are left out ({sum(c.hidden for c in seen):,} of "
               f"{sum(c.in_view for c in seen):,} in view), and at most {overlays.MAX_LIDAR_POINTS:,} "
               f"per camera are drawn, an even subsample ({sum(c.drawn for c in seen):,} drawn in all)."
               + (f" A dense cloud: {sum(c.thinned for c in seen):,} points in view were thinned first (at most "
                  f"{MAX_CAMERA_LIDAR_POINTS:,} per camera)." if any(c.thinned for c in seen) else ""))
if boxes:
    st.caption(f"Green: the {len(scene.boxes)} annotation boxes as 3-D wireframes (edges cut at the near plane "
               f"of each camera); hover an edge for its category.")

# ---- pick a BEV cell ----
st.subheader("Where does a BEV cell land?")
left, right = st.columns([1, 1.3])
with left:
    a, b = st.columns(2)
    a.number_input("x (m, forward)", min_value=grid.x_range[0], max_value=grid.x_range[1], step=grid.resolution,
                   format="%.3f", key="pick_x")
    b.number_input("y (m, left)", min_value=grid.y_range[0], max_value=grid.y_range[1], step=grid.resolution,
                   format="%.3f", key="pick_y")
    count = overlays.overlap_count(compute.footprints(rig, grid, eps, bounds))
    picked_xy = overlays.cell_center(grid, *cell) if cell else None
    st.plotly_chart(pick_map(count, grid, picked_xy, colorscale="Blues", colorbar_title="cameras",
                             title="Cameras per cell — click to pick"),
                    key="pick_map", on_select="rerun", selection_mode="points", config={"displaylogo": False})
with right:
    if cell is None:
        st.warning("That point is outside the BEV grid.")
    else:
        seen = sorted({r["camera"] for r in report if r["status"] == "valid"}, key=rig.index)
        missed = [n for n in rig.names if n not in seen]
        st.markdown(f"Cell **(row {cell[0]}, col {cell[1]})**, centre x = {picked_xy[0]:.2f} m, "
                    f"y = {picked_xy[1]:.2f} m: seen by **{escape_markdown(', '.join(seen)) or 'no camera'}**.")
        if missed:
            why = {n: ", ".join(sorted({r["status"] for r in report if r["camera"] == n})) for n in missed}
            st.markdown("Missed by " + "; ".join(f"{escape_markdown(n)} ({why[n]})" for n in missed) + ".")
        st.dataframe(pd.DataFrame(report).drop(columns=["x", "y"]), hide_index=True, height=300, column_config={
            "z": st.column_config.NumberColumn(format="%.2f"), "u": st.column_config.NumberColumn(format="%.1f"),
            "v": st.column_config.NumberColumn(format="%.1f"),
            "depth": st.column_config.NumberColumn(format="%.2f")})

# ---- the rig in 3D ----
st.subheader("The rig in the ego frame")
c1, c2 = st.columns([1, 3])
depth = c1.slider("Frustum length (m)", 0.5, 20.0, 4.0, 0.5, key="rig_frustum_depth")
show_extent = c1.toggle("BEV grid extent", value=False, key="rig_show_extent")
c1.caption("Camera axes are RDF: red = x (right), green = y (down), blue = z (forward). "
           "Ego: x forward, y left, z up.")
frustums, axes, _ = compute.rig_geometry(rig, depth)
c2.plotly_chart(rig_figure(rig.names, frustums, axes, grid if show_extent else None), key="rig3d")

# ---- downloads ----
st.subheader("Downloads")
st.caption("Built when clicked: every grid point in every camera, with the sidebar's grid and validity settings.")
d1, d2, d3 = st.columns(3)
d1.download_button("Projected points (CSV, valid only)",
                   lambda: downloads.projection_csv(overlays.grid_projection(rig, grid, eps, bounds), rig, grid),
                   file_name="projection.csv", mime="text/csv", on_click="ignore")
d2.download_button("Projected points (NPZ, all)",
                   lambda: downloads.projection_npz(overlays.grid_projection(rig, grid, eps, bounds), rig, grid),
                   file_name="projection.npz", mime="application/octet-stream", on_click="ignore")
d3.download_button("Current rig (JSON)", lambda: downloads.rig_json(rig, dict(scene.image_files)),
                   file_name="rig.json", mime="application/json", on_click="ignore")
