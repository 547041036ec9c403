"""Calibration Doctor: perturb cameras, watch the seams break, find the faulty camera, refine it.

With a LiDAR scan in the scene the LiDAR is a second, stronger witness: each camera is
aligned with the scan's edges, and a camera is named only when the evidence is clear.
Every number comes from the scene's :class:`bevviz.session.Doctor` (``appkit.session``),
the one ``bevviz check`` asks: this page only draws what it answers.
"""

import pandas as pd
import streamlit as st

from appkit import compute, doctor, doctor_views
from appkit.doctor import HELP
from appkit.guards import require_images, shown_errors
from appkit.navigation import require_app
from appkit.session import adopt_rig, current_doctor, current_scene
from bevviz.calibration import STANDOUT_RATIO
from bevviz.checks import escape_markdown as esc
from bevviz.viz.calibration import mosaic_figure, seam_matrix_figure
from bevviz.viz.calibration_lidar import lidar_alignment_figure, score_profiles_figure

require_app()  # first: a page URL opened as the first request runs through app.py

scene = current_scene()
ss = st.session_state
st.title("Calibration Doctor")
st.caption(f"{esc(scene.label)} · {doctor.INTRO_TEXT}")
for note in scene.notes:
    st.info(esc(note))
if not require_images(scene, "The Calibration Doctor"):
    st.stop()

radius, cell, all_frames = doctor_views.seam_grid_controls(scene)


def reset_perturbations() -> None:
    ss.update(doctor.slider_defaults(scene.rig.names))


def adopt(rig, camera: str) -> None:
    adopt_rig(rig, camera)
    reset_perturbations()


st.subheader("Perturb")
doctor_views.perturb_controls(scene.rig.names, reset_perturbations)
perturbed = doctor.perturbations(ss, scene.rig.names)
grid = doctor.seam_grid_of(radius, cell)
doc = current_doctor(grid=grid, all_frames=all_frames)
if scene.lidar is not None:  # the gross errors first: the fine search below cannot see them
    doctor_views.gross_screen(doc)
with shown_errors("Perturbation"):
    doc = current_doctor(grid=grid, perturbations=perturbed, all_frames=all_frames)
if active := doctor.active_perturbations(perturbed):
    st.caption("Active perturbations: " + esc(active))
rig = doc.rig

with st.spinner("Projecting every camera onto the ground ..."), shown_errors("Seam analysis"):
    view, quick, versus_truth = doc.seams(), doc.quick(), doc.versus_truth()
st.subheader("Seams")
m1, m2, m3 = st.columns(3)
m1.metric("Seams", len(view.analysis.pairs))
m2.metric("Median seam cost", f"{quick.seam_median:.3f}")
suspect = doc.standout()
m3.metric("Stands out (quick)", esc(suspect.camera) if suspect else "none",
          help=esc(suspect.reason) if suspect else f"No camera's seams are {STANDOUT_RATIO:.0f}x the rig median or "
                                                   f"worse; worst: {esc(quick[0].reason) if quick else '-'}")
left, right = st.columns([1.3, 1])
left.plotly_chart(mosaic_figure(view.mosaic, view.analysis.grid, view.error,
                                title="BEV mosaic, seams tinted blue (agree) to red (disagree)"), key="cd_mosaic")
right.plotly_chart(seam_matrix_figure(rig.names, view.table), key="cd_matrix")
# Full width below both figures: in the right column its last columns were cut off.
st.dataframe(pd.DataFrame(view.table), hide_index=True, key="cd_seam_table")
st.caption(doctor.SEAM_COST_TEXT)

if scene.lidar is not None:
    st.subheader("Which camera is off? The LiDAR witness")
    n_frames = doc.n_frames
    if together := doctor.frames_text(n_frames):
        st.info(together)
    here = "" if n_frames == 1 else " in this frame"
    st.caption(f"{len(scene.lidar):,} LiDAR points{here}. {doctor.LIDAR_TEXT}")
    over = "" if n_frames == 1 else f" over {n_frames} frames"
    if st.button("Run the LiDAR diagnosis", type="primary", key="cd_lidar_run"):
        with st.status(f"Aligning every camera with the LiDAR edges{over} ...", expanded=True) as run_status, \
                shown_errors("LiDAR diagnosis"):
            bar = st.progress(0.0, text="Aligning ...")
            doc.diagnose(progress=lambda k, n, c: bar.progress(
                k / max(n, 1), text=f"Aligning {esc(c)}{over} (step {k} of {n}: each camera's edges, then its "
                                    "evidence) ..." if c
                else "Judging the cameras ..."))
            run_status.update(label="LiDAR diagnosis done", state="complete", expanded=False)
        if doc.diagnosed:
            ss["cd_lidar_cam"] = doc.diagnosed[0].camera  # the worst camera first
    if (found := doc.diagnosed) is None:
        if doc.aligned_before:
            st.info("The rig changed since the last LiDAR diagnosis: run it again (unchanged cameras are kept).")
        else:
            st.caption("Runs on demand.")
    else:
        doctor_views.lidar_findings(found)
        ss.setdefault("cd_lidar_cam", found[0].camera)
        look = st.selectbox("Camera", rig.names, key="cd_lidar_cam")
        ev = doc.evidence()[look]
        f1, f2 = st.columns([1.6, 1])
        f1.plotly_chart(lidar_alignment_figure(rig[look], compute.edge_picture(scene, look), ev.uv_stored, ev.uv_best,
                                               title=f"{look}: LiDAR edge points over the image edges"),
                        key="cd_lidar_edges")
        f2.plotly_chart(score_profiles_figure(ev.profiles, ev.offset_deg, title="Alignment score per axis (+-3 deg)",
                                              height=480, cols=1), key="cd_lidar_profiles")
        f2.caption(doctor.PROFILES_TEXT)
        if st.button(f"Refine {esc(look)} against the LiDAR", key="cd_lidar_refine"):
            with st.spinner(f"Refining {esc(look)} ..."), shown_errors("LiDAR refinement"):
                refined = doc.refine_lidar(look)
                ss["cd_lidar_result"] = {"camera": look, "rig": refined.rig}  # the last one, for readers of the session
        if (lres := doc.refined("lidar", look)) is not None:
            doctor_views.lidar_refinement(lres, scene, adopt)

st.subheader("Which camera is off? The seam witness" if scene.lidar is not None else "Which camera is off?")
d1, d2 = st.columns([1, 1])
d1.plotly_chart(doctor.ranking(quick, rig.names, "Quick ranking: better seam / rig median"), key="cd_quick_rank")
if versus_truth is not None:
    d1.plotly_chart(doctor.ranking(versus_truth, rig.names, "Against the known ground texture (sample only)"),
                    key="cd_truth_rank")
d1.dataframe(doctor.verdict_table(quick), hide_index=True, key="cd_seam_verdicts",
             column_order=("camera", "verdict", "witnesses"))
d1.markdown(doctor.reasons_markdown(quick))
if d2.button("Run the full diagnosis", key="cd_diagnose", help=HELP["cd_diagnose"]):
    bar = d2.progress(0.0, text="Testing suspects ...")
    with shown_errors("Diagnosis"):
        doc.thorough(progress=lambda k, n, c: bar.progress(k / max(n, 1), text=f"Testing {esc(c)} ..."))
    bar.empty()
if (full := doc.thorough_done) is not None:
    d2.plotly_chart(doctor.ranking(full, rig.names, "Full diagnosis: seam repair when rotated alone",
                                   "seam cost drop"), key="cd_full_rank")
    for f in list(full)[:3]:
        d2.write(esc(f.reason))
else:
    d2.caption("The full diagnosis runs on demand (a few seconds).")

st.subheader("Auto-refine")
r1, r2, r3, r4 = st.columns([1.2, 1, 1, 1])
ss.setdefault("cd_refine_cam", quick[0].camera if quick else rig.names[0])
refine_cam = r1.selectbox("Camera to refine", rig.names, key="cd_refine_cam")
quality = r2.radio("Schedule", ("fast", "accurate"), 1, key="cd_quality", horizontal=True, help=HELP["cd_quality"])
with_translation = r3.toggle("Also translation", value=False, key="cd_translation", help=HELP["cd_translation"])
if r4.button("Auto-refine", type="primary", key="cd_refine"):
    bar = st.progress(0.0, text="Refining ...")
    with shown_errors("Refinement"):
        doc.refine_seams(refine_cam, fast=quality == "fast", translation=with_translation,
                         progress=lambda k, n, loss: bar.progress(k / n, text=f"step {k}/{n}, loss {loss:.3f}"))
    bar.empty()
if (res := doc.refined("seams")) is not None:
    doctor_views.seam_refinement(res, view, scene, adopt)
