"""Padding lab: how the reference grid_sample and the gather-scatter sampler treat borders."""

import pandas as pd
import streamlit as st

from appkit import compute, current
from appkit.guards import require_images, shown_errors
from appkit.navigation import require_app
from bevviz import overlays
from bevviz.viz.panels import image_panels, profile_figure

require_app()  # first: a page URL opened as the first request runs through app.py

scene, grid = current()
rig = scene.rig

st.title("Padding lab")
st.caption("The same sampling grid goes through `torch.nn.functional.grid_sample` (reference) and the "
           "gather-scatter drop-in; the grid reaches past the input's borders so every padding mode shows.")

c1, c2, c3, c4 = st.columns([1.2, 1.2, 1, 1])
source = c1.radio("Input", ("test pattern", "camera features"), horizontal=True, key="pad_source")
camera = c2.selectbox("Camera", rig.names, key="pad_camera", disabled=source != "camera features")
stride = c2.select_slider("Feature stride", [16, 32, 64], value=32, key="pad_stride",
                          disabled=source != "camera features")
margin = c3.slider("Margin past the borders", 0.0, 1.0, 0.3, 0.05, key="pad_margin",
                   help="The grid spans [-1 - m, 1 + m] in normalised coordinates.")
upsample = c3.select_slider("Output / input size", [1, 2, 3, 4], value=2, key="pad_upsample")
mode = c4.radio("Mode", ("bilinear", "nearest"), horizontal=True, key="pad_mode")
align = c4.toggle("align_corners", value=False, key="pad_align")

if source == "camera features" and not require_images(scene, "Camera features"):
    st.stop()
with shown_errors("Padding lab"), st.spinner("Sampling every mode x padding x align_corners ..."):
    feat = compute.padding_input(scene, source, camera, stride)
    cases = compute.padding_cases(feat, margin, upsample)
H, W = feat.shape[-2:]
C = feat.shape[1]

worst = max(c.max_error for c in cases)
m1, m2, m3 = st.columns(3)
m1.metric("Input", f"{C} x {H} x {W}")
m2.metric("Worst max |gather-scatter - reference| (12 settings)", f"{worst:.2e}")
m3.metric("Output", f"{cases[0].reference.shape[1]} x {cases[0].reference.shape[2]}")

table = pd.DataFrame([{"mode": c.mode, "padding": c.padding, "align_corners": c.align_corners,
                       "max |diff|": c.max_error} for c in cases])
with st.expander("All 12 settings: max |gather-scatter - reference|", expanded=False):
    st.dataframe(table, hide_index=True, key="pad_table",
                 column_config={"max |diff|": st.column_config.NumberColumn(format="%.2e")})

shown = [c for c in cases if c.mode == mode and c.align_corners == align]
out_h, out_w = shown[0].reference.shape[1:]
u_out, v_out = overlays.margin_grid_pixels(out_h, out_w, margin, H, W, align)  # output samples, input pixels
extent = (float(u_out[0]), float(u_out[-1]), float(v_out[0]), float(v_out[-1]))
frame = (-0.5, W - 0.5, -0.5, H - 0.5)
view = "rgb" if C >= 3 else 0
st.markdown(f"**{mode}, align_corners={align}** — drawn in input pixel coordinates; the dotted frame is "
            f"the input's extent [-0.5, {W - 0.5}] x [-0.5, {H - 0.5}].")
for case in shown:
    a, b = st.columns([2, 1])
    panels = {f"{case.padding}: reference": overlays.channel_view(case.reference, view),
              f"{case.padding}: gather-scatter": overlays.channel_view(case.candidate, view)}
    a.plotly_chart(image_panels(panels, cols=2, zmin=0.0, zmax=1.0, panel_height=230,
                                extents={k: extent for k in panels}, frame=frame),
                   key=f"pad_out_{case.padding}")
    diff = overlays.disagreement({"r": case.reference, "c": case.candidate})
    b.plotly_chart(image_panels({f"|diff|, max {case.max_error:.1e}": diff}, cols=1, colorscale="Inferno",
                                zmin=0.0, zmax=max(case.max_error, 1e-12), panel_height=230,
                                extents={f"|diff|, max {case.max_error:.1e}": extent}, frame=frame),
                   key=f"pad_diff_{case.padding}")

st.subheader("Edge behaviour along one row")
p1, p2 = st.columns([1, 3])
row = p1.slider("Output row", 0, out_h - 1, out_h // 2, key="pad_row")
channel = p1.selectbox("Channel", list(range(C)), key="pad_channel")
curves = {}
for case in shown:
    curves[f"{case.padding} (reference)"] = case.reference[channel, row]
    curves[f"{case.padding} (gather-scatter)"] = case.candidate[channel, row]
p2.plotly_chart(profile_figure(u_out, curves, borders=(-0.5, W - 0.5), y_title=f"channel {channel}",
                               title=f"row {row} (v = {v_out[row]:.2f}), {mode}, align_corners={align}"),
                key="pad_profile")
p1.caption("zeros: fades to 0 past the border (bilinear blends with the zero padding over the last half "
           "pixel); border: repeats the edge value; reflection: mirrors about the border "
           "(about the outer pixel edge for align_corners=False, the outer pixel centre for True).")

st.subheader("The half-pixel story")
st.markdown("`grid_sample` reads normalised coordinates with one of two formulas. A grid built with one and "
            "sampled with the other is off by up to half a pixel at the borders:")
l1, l2 = st.columns(2)
l1.latex(r"\texttt{align\_corners=False:}\quad g = \frac{2u + 1}{W} - 1 \qquad u = \frac{(g + 1)\,W - 1}{2}")
l2.latex(r"\texttt{align\_corners=True:}\quad g = \frac{2u}{W - 1} - 1 \qquad u = \frac{(g + 1)(W - 1)}{2}")
st.latex(r"\text{grid with False, sampler with True:}\quad u' - u = \frac{W - 1 - 2u}{2W}"
         r"\;\in\; \left[-\tfrac{1}{2} + \tfrac{1}{2W},\; \tfrac{1}{2} - \tfrac{1}{2W}\right]")
st.markdown("Every sample is pulled towards the centre (the image shrinks by one pixel); the opposite mismatch "
            "pushes samples outwards and reads half a pixel of padding at each border. On a stride-16 "
            "feature map half a feature pixel is 8 image pixels.")
hp = compute.half_pixel(feat)
hp_views = {"input": overlays.channel_view(feat[0], view)}
hp_views.update({k: overlays.channel_view(v, view) for k, v in hp.items()})
st.plotly_chart(image_panels(hp_views, cols=4, zmin=0.0, zmax=1.0, panel_height=220), key="pad_halfpixel")
errs = {k: overlays.disagreement({"a": feat[0], "b": v}) for k, v in hp.items()}
st.plotly_chart(image_panels({f"|{k} - input|, max {float(e.max()):.3f}": e for k, e in errs.items()}, cols=3,
                             colorscale="Inferno", zmin=0.0, panel_height=220), key="pad_halfpixel_err")
