"""Calibration Doctor: perturb cameras, watch the seams break, find the faulty camera, refine it.

With a LiDAR scan in the scene the LiDAR is a second, stronger witness: each camera is
aligned with the scan's edges, and a camera is named only when the evidence is clear.
Every number comes from the scene's :class:`bevviz.session.Doctor` (``appkit.session``),
the one ``bevviz check`` asks: this page only draws what it answers.
"""

import json

import pandas as pd
import streamlit as st

from appkit import compute, doctor
from appkit.doctor import HELP
from appkit.guards import require_images, shown_errors
from appkit.session import adopt_rig, current_doctor, current_scene
from bevviz import downloads
from bevviz.calibration import PERTURBATION_KEYS, STANDOUT_RATIO
from bevviz.limits import escape_markdown as esc
from bevviz.session import fixed_rig_json
from bevviz.viz.calibration import before_after_figure, mosaic_figure, seam_matrix_figure
from bevviz.viz.calibration_lidar import lidar_alignment_figure, score_profiles_figure

scene = current_scene()
ss = st.session_state
st.title("Calibration Doctor")
st.caption(f"{esc(scene.label)} · {doctor.INTRO_TEXT}")
for note in scene.notes:
    st.info(esc(note))
if not require_images(scene, "The Calibration Doctor"):
    st.stop()

with st.expander("Seam grid and frames", expanded=False):
    c1, c2, c3 = st.columns(3)
    radius = c1.selectbox("Ground radius (m)", (20.0, 30.0), index=1, key="cd_radius", help=HELP["cd_radius"])
    cell = c2.selectbox("Cell size (m)", (0.2, 0.3, 0.4, 0.5), index=0, key="cd_cell", help=HELP["cd_cell"])
    frames_choice = c3.radio("Frames", ("this sample", "all embedded samples"), index=0, key="cd_frames",
                             disabled=scene.ground_truth is None, horizontal=True, help=HELP["cd_frames"])
    all_frames = scene.ground_truth is not None and frames_choice == "all embedded samples"


def reset_perturbations() -> None:
    ss.update(doctor.slider_defaults(scene.rig.names))


def adopt(rig, camera: str) -> None:
    adopt_rig(rig, camera)
    reset_perturbations()


st.subheader("Perturb")
pc1, pc2 = st.columns([1, 3])
pert_cam = pc1.selectbox("Camera", scene.rig.names, key="cd_pert_cam")
pc1.button("Reset all perturbations", on_click=reset_perturbations, key="cd_reset")
cols = pc2.columns(4)
for i, (k, label, lo, hi, step) in enumerate(doctor.SLIDERS):
    ss.setdefault(doctor.slider_key(pert_cam, k), PERTURBATION_KEYS[k])
    cols[i % 4].slider(label, lo, hi, step=step, key=doctor.slider_key(pert_cam, k))
perturbed = doctor.perturbations(ss, scene.rig.names)
grid = doctor.seam_grid_of(radius, cell)
doc = current_doctor(grid=grid, all_frames=all_frames)
if scene.lidar is not None:  # the gross errors first: the fine search below cannot see them
    with st.spinner("Screening the stored rig for gross errors ..."), shown_errors("Gross-error screen"):
        screen = doc.gross()
    if screen is not None and screen.errors:
        st.subheader("Gross errors")
        for fault in screen.errors:
            st.warning(esc(fault.message))
        if (fixed := doc.fixed_rig()) is not None:
            st.download_button("Download the fixed rig (JSON)", fixed_rig_json(fixed), file_name="rig_fixed.json",
                               mime="application/json", key="cd_fixed_rig")
    elif screen is not None:
        st.caption("Gross-error screen: no camera turned or swapped, the LiDAR where the cameras put it.")
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
    frames = "" if doc.n_frames == 1 else f" in this frame; the evidence of {doc.n_frames} frames is added up"
    st.caption(f"{len(scene.lidar):,} LiDAR points{frames}. {doctor.LIDAR_TEXT}")
    if st.button("Run the LiDAR diagnosis", type="primary", key="cd_lidar_run"):
        with st.status("Aligning every camera with the LiDAR edges ...", expanded=True) as run_status, \
                shown_errors("LiDAR diagnosis"):
            bar = st.progress(0.0, text="Aligning ...")
            doc.diagnose(progress=lambda k, n, c: bar.progress(
                k / max(n, 1), text=f"Aligning {esc(c)} ..." if c else "Judging the cameras ..."))
            run_status.update(label="LiDAR diagnosis done", state="complete", expanded=False)
        if doc.diagnosed:
            ss["cd_lidar_cam"] = doc.diagnosed[0].camera  # the worst camera first
    if (found := doc.diagnosed) is None:
        if doc.aligned_before:
            st.info("The rig changed since the last LiDAR diagnosis: run it again (unchanged cameras are kept).")
        else:
            st.caption("Runs on demand.")
    else:
        st.markdown(doctor.named_markdown(found))
        for note in (found.lidar_doubt, found.timing):  # rig-level findings: before the per-camera table
            if note:
                st.warning(esc(note))
        st.dataframe(doctor.verdict_table(found), hide_index=True, key="cd_lidar_verdicts",
                     column_order=("camera", "verdict", "roll (deg)", "pitch (deg)", "yaw (deg)", "edge points",
                                   "witnesses"))
        st.caption(doctor.OFFSETS_TEXT)
        st.markdown("**Why, per camera**")
        st.markdown(doctor.reasons_markdown(found))
        st.markdown("**Evidence, per camera and frame**")
        st.dataframe(pd.DataFrame(doctor.evidence_rows(found)), hide_index=True, key="cd_lidar_evidence")
        st.caption(doctor.Z_TEXT)
        summary = doctor.consensus_summary(found.consensus)
        k1, k2, k3 = st.columns([1.6, 1, 1])
        k1.metric("LiDAR rotation (ego x / y / z, deg)", summary["rotation"])
        k2.metric("Common pitch", summary["pitch"])
        aside = summary["set_aside"]
        k3.metric("Set aside from the consensus", f"{len(aside)} camera{'s' if len(aside) != 1 else ''}" if aside
                  else "none", help="Cameras whose own errors did not fit the rest of the rig.")
        if aside:  # names in full (a metric cuts a long value off)
            k3.caption(esc(", ".join(aside)))
        if summary["suspect"]:
            st.warning(esc(summary["suspect"]))
        elif not summary["fitted"]:
            st.caption(f"No rig consensus: {esc(summary['why'])}.")

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
            lh = lres.history
            if lh.accepted:
                st.success(f"Accepted: {esc(lh.check)}")
                value, why = doctor.correction_metric(lh.delta)
                st.metric("Correction", value, help=why)
                a1, a2 = st.columns(2)
                a1.button("Apply to the session rig", key="cd_lidar_apply", on_click=adopt, args=(lres.rig, look),
                          help=HELP["adopt"])
                a2.download_button("Refined rig (JSON)", downloads.rig_json(lres.rig, dict(scene.image_files) or None),
                                   file_name="rig_refined.json", mime="application/json", key="cd_lidar_dl")
            elif (proposed := lres.proposed_rig) is not None:
                st.warning(f"{esc(lh.check[:1].upper() + lh.check[1:])}. The rig is left as it is.")
                value, why = doctor.correction_metric(lh.delta)
                st.metric("Proposed correction", value, help=why)
                p1, p2 = st.columns(2)
                p1.button("Apply the proposal anyway", key="cd_lidar_apply_proposal", on_click=adopt,
                          args=(proposed, look), help=HELP["adopt_proposal"])
                p2.download_button("Proposed rig (JSON)", downloads.rig_json(proposed, dict(scene.image_files) or None),
                                   file_name="rig_proposed.json", mime="application/json", key="cd_lidar_dl_proposal")
            else:
                st.warning(f"Not accepted (the rig is left as it is): {esc(lh.check)}")

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
    hist, d = res.history, res.history.delta
    k1, k2, k3, k4 = st.columns(4)
    k1.metric("Seam loss", f"{hist.final_loss:.3f}", delta=f"{hist.final_loss - hist.initial_loss:+.3f}",
              delta_color="inverse")
    k2.metric("Correction", f"{d.angle_deg:.2f} deg")
    k3.metric("roll / pitch / yaw", f"{d.roll_deg:+.2f} / {d.pitch_deg:+.2f} / {d.yaw_deg:+.2f}")
    k4.metric("Left vs the loaded calibration", f"{res.from_loaded_deg:.3f} deg", help=HELP["from_loaded"])
    st.plotly_chart(doctor.loss_figure(hist), key="cd_loss")
    st.plotly_chart(before_after_figure(view.mosaic, res.after.mosaic, view.analysis.grid, view.error, res.after.error,
                                        titles=("before", "after")), key="cd_before_after")
    b1, b2, b3 = st.columns(3)
    b1.download_button("Corrected rig (JSON)", downloads.rig_json(res.rig, dict(scene.image_files) or None),
                       file_name="rig_refined.json", mime="application/json", key="cd_dl_rig")
    b2.download_button("Correction per camera (JSON)", res.deltas_json().encode(), file_name="rig_correction.json",
                       mime="application/json", key="cd_dl_delta")
    b3.button("Adopt the corrected rig", key="cd_adopt", on_click=adopt, args=(res.rig, res.camera), help=HELP["adopt"])
    with st.expander("Correction as JSON"):
        st.code(json.dumps(d.to_dict(), indent=2), language="json")
