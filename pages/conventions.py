"""Conventions: which extrinsic direction / quaternion order / camera axes do the stored numbers use?
And what do image-operation mistakes (unscaled K, half-pixel shifts) do to the projection?"""

import dataclasses

import pandas as pd
import streamlit as st

from appkit import compute, current
from appkit.guards import shown_errors
from appkit.navigation import require_app
from appkit.state import HASH_FUNCS, SCENE
from bevviz.checks import escape_markdown
from bevviz.convention_ranking import image_operation_checks, raw_rows
from bevviz.conventions import NUSCENES, Convention, rank_conventions
from bevviz.io.rig_json import parse_rig
from bevviz.session import ground_shift
from bevviz.viz.cameras import CameraOverlay, camera_grid_figure
from bevviz.viz.conventions import candidate_scores_figure, check_matrix_figure, image_op_figure
from bevviz.viz.rig3d import rig_figure

require_app()  # first: a page URL opened as the first request runs through app.py

scene, grid = current()
rig = scene.rig
ss = st.session_state

st.title("Conventions")
st.caption(f"{escape_markdown(scene.label)} · a calibration file stores a rotation and a translation per camera; "
           "what they mean depends on the extrinsic direction (sensor->ego or ego->sensor), the quaternion order "
           "(wxyz or xyzw) and the camera axes (RDF / RUB / FLU). Every reading is scored on physical evidence.")

# ---------------------------------------------------------------------------------------
# The raw numbers
# ---------------------------------------------------------------------------------------
SOURCES = ("loaded rig, stored the nuScenes way", "loaded rig, stored in another convention (a mix-up)",
           "upload a rig JSON")
source = st.radio("Raw numbers", SOURCES, key="cv_source", horizontal=True)
labels = [c.label for c in Convention.all()]
if source == SOURCES[0]:
    raw = rig.to_raw(NUSCENES)
    truth_label = NUSCENES.label
elif source == SOURCES[1]:
    stored = st.selectbox("Store the loaded rig as", labels, index=labels.index("ego_to_sensor / xyzw / RUB"),
                          key="cv_stored")
    raw = rig.to_raw(Convention.all()[labels.index(stored)])
    truth_label = stored
else:
    up = st.file_uploader("Rig JSON (bevviz format; its convention block is ignored here)", type=["json"],
                          key="cv_upload")
    if up is None:
        st.info("Upload a rig JSON to rank its stored numbers.")
        st.stop()
    with shown_errors("Rig file"):
        raw = parse_rig(up.getvalue(), source=up.name).raw_cameras
    truth_label = None
with st.expander("The numbers as stored", expanded=False):
    st.dataframe(pd.DataFrame(raw_rows(raw)), hide_index=True, key="cv_raw")

use_images = st.toggle("Also score seam consistency with the images", value=False, key="cv_use_images",
                       help="Projects the images onto the ground under each reading and compares overlaps "
                            "(a few seconds).")
images = scene.images if use_images and all(n in scene.images for n in rig.names) else None


# The loaded scene's LiDAR says where its road is (a rig stored in a sensor's frame); an
# uploaded file's numbers may be in any frame, so they are judged from z = 0.
ground_z = 0.0 if source == SOURCES[2] else ground_shift(scene.lidar)
if ground_z:
    st.caption(f"The loaded scene's LiDAR sees the road at z = {ground_z:+.2f} m of its frame (a sensor's frame, "
               "not one on the ground): heights and the ground checks below are measured from that road, as "
               "`bevviz check` measures them.")


@st.cache_data(show_spinner=False, max_entries=16)
def ranked(raw_key: str, _raw, _images, with_images: bool, ground_z: float) -> list:
    return rank_conventions(_raw, images=_images if with_images else None, ground_z=ground_z)


raw_key = repr([(r.name, r.rotation.tolist(), r.translation.tolist(), r.K.tolist()) for r in raw])
with st.spinner("Scoring the 12 readings ..."), shown_errors("Ranking"):
    results = ranked(raw_key + scene.cache_key, raw, images, images is not None, ground_z)
best = results[0]

# ---------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------
st.subheader("Ranked readings")
m1, m2, m3 = st.columns([2, 1, 1])
m1.metric("Most plausible", best.label)
m2.metric("Score", f"{best.score:.3f}")
m3.metric("Margin to the next", f"{best.score - results[1].score:.3f}" if len(results) > 1 else "-")
if truth_label is not None:
    (st.success if best.label == truth_label or truth_label in best.ties else st.error)(
        f"The numbers were stored as {truth_label}; the ranking picks {best.label}.")
c1, c2 = st.columns(2)
c1.plotly_chart(candidate_scores_figure([r.label for r in results], [r.score for r in results], best.label),
                key="cv_scores")
c2.plotly_chart(check_matrix_figure([r.label for r in results], [r.checks for r in results]), key="cv_checks")
for k, r in enumerate(results):
    with st.expander(f"{k + 1}. {r.label} - score {r.score:.3f}", expanded=k == 0):
        for sentence in r.evidence:
            st.markdown(f"- {escape_markdown(sentence)}")


def adopt(rig_new, label: str) -> None:
    """Make the chosen reading's rig the loaded rig for every page."""
    ss[SCENE] = dataclasses.replace(scene, rig=rig_new, key=f"{scene.key}|convention:{label}",
                                    label=f"{scene.label} (read as {label})")


if best.rig is not None:
    st.button(f"Adopt the winner ({best.label})", key="cv_adopt", on_click=adopt, args=(best.rig, best.label),
              type="primary", help="Replace the loaded rig by this reading for every page.")

# ---------------------------------------------------------------------------------------
# Preview of a candidate
# ---------------------------------------------------------------------------------------
st.subheader("Preview a reading")
readable = [r for r in results if r.rig is not None]
pick = st.selectbox("Reading", [r.label for r in readable], key="cv_preview")
cand = next(r for r in readable if r.label == pick)
with st.spinner("Projecting ..."):
    lines = compute.ground_lines(cand.rig, grid, 10.0)
    frustums, axes, horizons = compute.rig_geometry(cand.rig, 3.0)
    pictures = compute.display_images(scene) if all(n in scene.images for n in rig.names) else {}
ovs = {}
for ci, name in enumerate(cand.rig.names):
    ovs[name] = CameraOverlay(grid_uv=lines.uv[ci], grid_labels=lines.labels, grid_label_uv=lines.label_uv[ci],
                              horizon=horizons[name])
layout = [[cand.rig[n] if n is not None else None for n in row] for row in cand.rig.display_grid()]
p1, p2 = st.columns([1.6, 1])
p1.plotly_chart(camera_grid_figure(layout, pictures, ovs), key="cv_preview_cams")
p2.plotly_chart(rig_figure(cand.rig.names, frustums, axes, None, height=420), key="cv_preview_3d")
st.caption("White: the ground grid (z = 0, every 10 m) as this reading projects it; dashed cyan: its horizon. "
           "Under the right reading the grid lies on the road and the horizon on the horizon.")

# ---------------------------------------------------------------------------------------
# Image-operation checks
# ---------------------------------------------------------------------------------------
st.subheader("Image-operation checks")
st.caption("What an intrinsic matrix that was not updated after a resize or crop, or a half-pixel "
           "(align_corners) mismatch, does to the projection of the ground on this rig.")
o1, o2, o3 = st.columns(3)
factor = o1.select_slider("Resize factor", [0.25, 0.5, 0.75, 1.5, 2.0], value=0.5, key="cv_resize")
stride = o2.select_slider("Feature stride", [2, 4, 8, 16, 32], value=16, key="cv_stride")
op_cam = o3.selectbox("Camera", rig.names, key="cv_op_cam")


@st.cache_data(show_spinner=False, max_entries=8, hash_funcs=HASH_FUNCS)
def op_checks(rig, grid_key: str, _points, factor: float, stride: int) -> list:
    return image_operation_checks(rig, _points, resize=factor, stride=stride)


ground = grid.with_z((0.0,))
with shown_errors("Image-operation checks"):
    checks = op_checks(rig, repr(ground.to_dict()), ground.points().numpy().reshape(-1, 3), float(factor),
                       int(stride))
st.dataframe(pd.DataFrame([{"check": c.name, "max shift (px)": round(c.max_shift_px, 2),
                            "what": c.description} for c in checks]), hide_index=True, key="cv_op_table")
which = st.selectbox("Show", [c.name for c in checks], key="cv_op_which")
chk = next(c for c in checks if c.name == which)
crop = chk.crop[op_cam] if chk.crop else None
st.plotly_chart(image_op_figure(scene.images.get(op_cam), chk.size[op_cam], chk.uv_correct[op_cam],
                                chk.uv_wrong[op_cam], crop=crop, title=f"{op_cam}: {chk.name}"),
                key="cv_op_fig")
st.dataframe(pd.DataFrame(chk.rows), hide_index=True, key="cv_op_rows")
