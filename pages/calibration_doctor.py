"""Calibration Doctor: perturb cameras, watch the seams break, find the faulty camera, refine it.

With a LiDAR scan in the scene the LiDAR is a second, stronger witness: each camera is
aligned with the scan's edges, and a camera is named only when the evidence is clear.
"""

import dataclasses
import json

import pandas as pd
import streamlit as st

from appkit import compute, current, doctor
from appkit.guards import require_images, shown_errors
from appkit.sources import SAMPLE_NUSCENES
from appkit.state import HASH_FUNCS, SCENE
from bevviz import calibration as cal
from bevviz import downloads
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.io.nuscenes import list_samples, list_scenes, load_sample_from, open_dataset
from bevviz.limits import escape_markdown
from bevviz.viz.calibration import (
    before_after_figure,
    loss_curve_figure,
    mosaic_figure,
    ranking_figure,
    seam_matrix_figure,
)
from bevviz.viz.calibration_lidar import lidar_alignment_figure, score_profiles_figure

scene, _sidebar_grid = current()
rig0 = scene.rig
ss = st.session_state

st.title("Calibration Doctor")
st.caption(f"{escape_markdown(scene.label)} · every camera's image is projected onto the ground (z = 0); where two "
           "footprints overlap (a seam) both must show the same ground. A misaligned camera breaks "
           "the seams with both of its neighbours.")
for note in scene.notes:
    st.info(escape_markdown(note))
if not require_images(scene, "The Calibration Doctor"):
    st.stop()

# ---------------------------------------------------------------------------------------
# Settings: the seam grid (its own: the sidebar's BEV grid is usually too coarse for seams)
# ---------------------------------------------------------------------------------------
RADII = (20.0, 30.0)
CELLS = (0.2, 0.3, 0.4, 0.5)
with st.expander("Seam grid and frames", expanded=False):
    c1, c2, c3 = st.columns(3)
    radius = c1.selectbox("Ground radius (m)", RADII, index=1, key="cd_radius",
                          help="Ground cells up to this distance from the rig centre are compared.")
    cell = c2.selectbox("Cell size (m)", CELLS, index=1, key="cd_cell",
                        help="The side seams of a nuScenes-like rig are ~10 degree wedges: small cells keep "
                             "enough of them.")
    embedded = scene.ground_truth is not None
    frames_choice = c3.radio("Frames", ("this sample", "all embedded samples"), index=0, key="cd_frames",
                             disabled=not embedded, horizontal=True,
                             help="Objects standing in a seam hide the ground there; other samples of the same "
                                  "rig see those seams clear. Only for the embedded sample (same physical rig).")
grid = cal.seam_grid(radius=float(radius), resolution=float(cell))


@st.cache_resource(show_spinner=False)
def embedded_frames() -> list:
    """Images of every sample of the embedded nuScenes-format dataset (one physical rig)."""
    nusc = open_dataset(SAMPLE_NUSCENES)
    return [load_sample_from(nusc, s.token)[1] for sc in list_scenes(nusc) for s in list_samples(nusc, sc.token)]


def frames() -> list:
    """The frames to refine and diagnose with: this sample, or every embedded sample (this one included)."""
    if embedded and frames_choice == "all embedded samples":
        with st.spinner("Loading the embedded samples ..."):
            return embedded_frames()
    return [scene.images]


# ---------------------------------------------------------------------------------------
# Perturbation sliders
# ---------------------------------------------------------------------------------------
SLIDERS = (("roll_deg", "roll (deg)", -5.0, 5.0, 0.1), ("pitch_deg", "pitch (deg)", -5.0, 5.0, 0.1),
           ("yaw_deg", "yaw (deg)", -5.0, 5.0, 0.1), ("x_cm", "x (cm)", -50.0, 50.0, 1.0),
           ("y_cm", "y (cm)", -50.0, 50.0, 1.0), ("z_cm", "z (cm)", -50.0, 50.0, 1.0),
           ("fx_scale", "fx scale", 0.9, 1.1, 0.005), ("fy_scale", "fy scale", 0.9, 1.1, 0.005))


def _key(cam: str, k: str) -> str:
    return f"cd_p_{cam}_{k}"


def reset_perturbations() -> None:
    for cam in rig0.names:
        for k, *_ in SLIDERS:
            ss[_key(cam, k)] = cal.PERTURBATION_KEYS[k]
    ss.pop("cd_result", None)
    ss.pop("cd_diagnosis", None)


def adopt(new_rig: Rig, camera: str) -> None:
    """Make ``new_rig`` the loaded rig (every page), and clear the perturbations."""
    ss[SCENE] = dataclasses.replace(scene, rig=new_rig, key=f"{scene.key}|refined:{new_rig.fingerprint[:12]}",
                                    label=f"{scene.label} (refined {camera})")
    reset_perturbations()


st.subheader("Perturb")
pc1, pc2 = st.columns([1, 3])
with pc1:
    pert_cam = st.selectbox("Camera", rig0.names, key="cd_pert_cam")
    st.button("Reset all perturbations", on_click=reset_perturbations, key="cd_reset")
with pc2:
    cols = st.columns(4)
    for i, (k, label, lo, hi, step) in enumerate(SLIDERS):
        ss.setdefault(_key(pert_cam, k), cal.PERTURBATION_KEYS[k])
        cols[i % 4].slider(label, lo, hi, step=step, key=_key(pert_cam, k))
perturbations = {cam: {k: ss.get(_key(cam, k), cal.PERTURBATION_KEYS[k]) for k, *_ in SLIDERS} for cam in rig0.names}
active = {c: {k: v for k, v in p.items() if v != cal.PERTURBATION_KEYS[k]} for c, p in perturbations.items()}
active = {c: p for c, p in active.items() if p}
with shown_errors("Perturbation"):
    rig = cal.apply_perturbations(rig0, perturbations)
if active:
    st.caption("Active perturbations: " + "; ".join(
        f"{escape_markdown(c)}: "
        + ", ".join(f"{k} {v:+g}" if not k.endswith("scale") else f"{k} {v:g}" for k, v in p.items())
        for c, p in active.items()))

# ---------------------------------------------------------------------------------------
# Live seams
# ---------------------------------------------------------------------------------------


truth_texture = scene.ground_truth


@st.cache_data(show_spinner=False, max_entries=16, hash_funcs=HASH_FUNCS)
def seams(scene_key: str, rig: Rig, grid: BEVGrid, _images, _truth) -> dict:
    a = cal.analyze_seams(rig, _images, grid, ground_truth=_truth)
    return {"analysis": a, "mosaic": a.mosaic(), "error": a.seam_error_map(), "table": a.table()}


with st.spinner("Projecting every camera onto the ground ..."), shown_errors("Seam analysis"):
    live = seams(scene.cache_key, rig, grid, scene.images, truth_texture)
analysis = live["analysis"]
quick = cal.diagnose(rig, scene.images, grid, thorough=False, analyses=[analysis.without_ground_truth()])
versus_truth = cal.diagnose(rig, scene.images, grid, analyses=[analysis]) if analysis.gt_cost else None

st.subheader("Seams")
m1, m2, m3 = st.columns(3)
m1.metric("Seams", len(analysis.pairs))
m2.metric("Median seam cost", f"{analysis.median_cost:.3f}")
suspect = cal.standout(quick)
m3.metric("Stands out (quick)", escape_markdown(suspect.camera) if suspect else "none",
          help=(escape_markdown(suspect.reason) if suspect else
                f"No camera's seams are {cal.STANDOUT_RATIO:.0f}x the rig median or worse; "
                f"worst: {escape_markdown(quick[0].reason) if quick else '-'}"))
left, right = st.columns([1.3, 1])
left.plotly_chart(mosaic_figure(live["mosaic"], analysis.grid, live["error"],
                                title="BEV mosaic, seams tinted blue (agree) to red (disagree)"), key="cd_mosaic")
with right:
    st.plotly_chart(seam_matrix_figure(rig.names, live["table"]), key="cd_matrix")
    st.dataframe(pd.DataFrame(live["table"]), hide_index=True, key="cd_seam_table")
st.caption("Seam cost = 1 - correlation of the normalised gradient fields of the two cameras' ground "
           "projections (0 = the same edges; exposure does not matter; objects standing in a seam raise it "
           "whatever the calibration). NCC = the same on colours.")

# ---------------------------------------------------------------------------------------
# The LiDAR witness
# ---------------------------------------------------------------------------------------
if scene.lidar is not None:
    st.subheader("Which camera is off? The LiDAR witness")
    st.caption(f"{len(scene.lidar):,} LiDAR points. Each camera looks at the scan from its own exposure time and "
               "finds its edges: depth jumps no plane explains (silhouettes, placed between the two returns) and "
               "jumps of the per-scan intensity ranks (paint, signs), each scored on the image gradients across it. "
               "The rotation is searched over +-3 deg; a camera is called miscalibrated only when the stored pose "
               "is rejected (far below the best in the score landscape, the offset supported by both image "
               "halves, pinned down by a bootstrap); otherwise \"inconclusive\", with the reason. What all cameras "
               "share (the LiDAR's own error) is taken out by a rig consensus. About a second per camera; cached "
               "per camera and scan.")
    if st.button("Run the LiDAR diagnosis", type="primary", key="cd_lidar_run"):
        with st.status("Aligning every camera with the LiDAR edges ...", expanded=True) as run_status, \
                shown_errors("LiDAR diagnosis"):
            bar = st.progress(0.0, text="Aligning ...")
            evidence = compute.lidar_evidence(scene, rig, progress=lambda k, n, c: bar.progress(
                k / max(n, 1), text=f"Aligning {escape_markdown(c)} ..." if c else "Judging the cameras ..."))
            found = cal.diagnose(rig, scene.images, grid, evidence=evidence,
                                 analyses=[analysis.without_ground_truth()])
            run_status.update(label="LiDAR diagnosis done", state="complete", expanded=False)
        ss["cd_lidar_diagnosis"] = (rig.fingerprint, found)
        ss["cd_lidar_cam"] = found[0].camera  # show the worst camera first
    lidar_diag = ss.get("cd_lidar_diagnosis")
    if lidar_diag is None:
        st.caption("Runs on demand.")
    elif lidar_diag[0] != rig.fingerprint:
        st.info("The rig changed since the last LiDAR diagnosis: run it again (unchanged cameras are cached).")
    else:
        found = lidar_diag[1]
        named = [f.camera for f in found if f.verdict == cal.MISCALIBRATED]
        st.markdown(f"Miscalibrated: **{escape_markdown(', '.join(named)) or 'no camera'}** "
                    f"(tolerance {cal.TOLERANCE_DEG:g} deg, in {cal.CONFIDENCE:.0%} of the bootstrap replicates).")
        st.dataframe(doctor.verdict_table(found), hide_index=True, key="cd_lidar_verdicts",
                     column_order=("camera", "verdict", "roll (deg)", "pitch (deg)", "yaw (deg)", "edge points",
                                   "witnesses"))
        st.caption("Offsets: each camera's own rotation error (body frame: roll about the optical axis, pitch "
                   "positive looking down, yaw positive to the left) after the rig consensus, +- its bootstrap spread.")
        st.markdown("**Why, per camera**")
        for cam, verdict, reason in doctor.reason_lines(found):
            st.markdown(f"- **{escape_markdown(cam)}** · *{verdict}*: {escape_markdown(reason)}")
        st.markdown("**Evidence, per camera and frame**")
        st.dataframe(pd.DataFrame(doctor.evidence_rows(found)), hide_index=True, key="cd_lidar_evidence")
        st.caption("z: robust z within the +-3 deg score landscape (score minus its median, over 1.48 x its median "
                   "absolute deviation). A stored pose well below the best, with both image halves gaining from "
                   "the best rotation and agreeing on it, is what convicts a camera.")
        summary = doctor.consensus_summary(found.consensus)
        k1, k2, k3 = st.columns([1.6, 1, 1])
        k1.metric("LiDAR rotation (ego x / y / z, deg)", summary["rotation"])
        k2.metric("Common pitch", summary["pitch"])
        k3.metric("Set aside from the consensus", escape_markdown(", ".join(summary["set_aside"])) or "none")
        if summary["suspect"]:
            st.warning(escape_markdown(summary["suspect"]))
        elif not summary["fitted"]:
            st.caption(f"No rig consensus: {escape_markdown(summary['why'])}.")

        by_name = {f.camera: f for f in found}
        ss.setdefault("cd_lidar_cam", found[0].camera)
        look = st.selectbox("Camera", rig.names, key="cd_lidar_cam")
        ev = by_name[look].lidar
        f1, f2 = st.columns([1.6, 1])
        f1.plotly_chart(lidar_alignment_figure(rig[look], compute.edge_picture(scene, look), ev.uv_stored, ev.uv_best,
                                               title=f"{look}: LiDAR edge points over the image edges"),
                        key="cd_lidar_edges")
        f2.plotly_chart(score_profiles_figure(ev.profiles, ev.offset_deg, title="Alignment score per axis (+-3 deg)",
                                              height=480, cols=1), key="cd_lidar_profiles")
        f2.caption("Red: the edge points with the stored calibration; green: at the optimum. Each curve turns one "
                   "axis through the optimum (offset 0 = the stored calibration), the others held there.")

        if st.button(f"Refine {escape_markdown(look)} against the LiDAR", key="cd_lidar_refine"):
            with st.spinner(f"Refining {escape_markdown(look)} ..."), shown_errors("LiDAR refinement"):
                refined, lidar_hist = cal.refine_extrinsics(rig, scene.images, grid, look, lidar=scene.lidar,
                                                            evidence=compute.lidar_evidence(scene, rig))
            ss["cd_lidar_result"] = {"rig_in": rig.fingerprint, "camera": look, "rig": refined, "hist": lidar_hist}
        lres = ss.get("cd_lidar_result")
        if lres and lres["rig_in"] == rig.fingerprint and lres["camera"] == look:
            lh = lres["hist"]
            if lh.accepted:
                st.success(f"Accepted: {escape_markdown(lh.check)}")
                d = lh.delta
                st.metric("Correction", f"{d.angle_deg:.2f} deg",
                          help=f"roll {d.roll_deg:+.2f}, pitch {d.pitch_deg:+.2f}, yaw {d.yaw_deg:+.2f} deg")
                a1, a2 = st.columns(2)
                a1.button("Apply to the session rig", key="cd_lidar_apply", on_click=adopt, args=(lres["rig"], look),
                          help="Replace the loaded rig for every page (until another source is loaded).")
                a2.download_button("Refined rig (JSON)",
                                   downloads.rig_json(lres["rig"], dict(scene.image_files) or None),
                                   file_name="rig_refined.json", mime="application/json", key="cd_lidar_dl")
            else:
                st.warning(f"Not accepted (the rig is left as it is): {escape_markdown(lh.check)}")

# ---------------------------------------------------------------------------------------
# Diagnosis
# ---------------------------------------------------------------------------------------
st.subheader("Which camera is off? The seam witness" if scene.lidar is not None else "Which camera is off?")
d1, d2 = st.columns([1, 1])
with d1:
    st.plotly_chart(ranking_figure([f.camera for f in quick], [f.score for f in quick], rig.names,
                                   title="Quick ranking: better seam / rig median", x_title="x median"),
                    key="cd_quick_rank")
    if versus_truth is not None:
        st.plotly_chart(ranking_figure([f.camera for f in versus_truth], [f.score for f in versus_truth], rig.names,
                                       title="Against the known ground texture (sample only)",
                                       x_title="x median"), key="cd_truth_rank")
    st.dataframe(doctor.verdict_table(quick), hide_index=True, key="cd_seam_verdicts",
                 column_order=("camera", "verdict", "witnesses"))
    for cam, verdict, reason in doctor.reason_lines(quick):
        st.markdown(f"- **{escape_markdown(cam)}** · *{verdict}*: {escape_markdown(reason)}")
with d2:
    if st.button("Run the full diagnosis", key="cd_diagnose",
                 help="Lets each suspect rotate alone for a moment and measures how much that repairs "
                      "its seams: a misaligned camera repairs both, a good neighbour only trades one "
                      "seam for the other."):
        bar = st.progress(0.0, text="Testing suspects ...")
        with shown_errors("Diagnosis"):
            found = cal.diagnose(rig, frames(), grid,
                                 progress=lambda k, n, c: bar.progress(k / max(n, 1),
                                                                       text=f"Testing {escape_markdown(c)} ..."))
        bar.empty()
        ss["cd_diagnosis"] = (rig.fingerprint, [dataclasses.asdict(f) | {"seams": None} for f in found])
    diag = ss.get("cd_diagnosis")
    if diag and diag[0] == rig.fingerprint:
        found = diag[1]
        st.plotly_chart(ranking_figure([f["camera"] for f in found], [f["score"] for f in found], rig.names,
                                       title="Full diagnosis: seam repair when rotated alone",
                                       x_title="seam cost drop"), key="cd_full_rank")
        for f in found[:3]:
            st.write(escape_markdown(f["reason"]))
    else:
        st.caption("The full diagnosis runs on demand (a few seconds).")

# ---------------------------------------------------------------------------------------
# Auto-refine
# ---------------------------------------------------------------------------------------
st.subheader("Auto-refine")
r1, r2, r3, r4 = st.columns([1.2, 1, 1, 1])
default_cam = quick[0].camera if quick else rig.names[0]
ss.setdefault("cd_refine_cam", default_cam)
refine_cam = r1.selectbox("Camera to refine", rig.names, key="cd_refine_cam")
quality = r2.radio("Schedule", ("fast", "accurate"), index=1, key="cd_quality", horizontal=True,
                   help="accurate: 3 levels down to 0.2 m cells and half-size images; fast: 2 coarser levels.")
with_translation = r3.toggle("Also translation", value=False, key="cd_translation",
                             help="Seams constrain translation only weakly (a few cm move the ground by a few cm).")
go_refine = r4.button("Auto-refine", type="primary", key="cd_refine")
if go_refine:
    bar = st.progress(0.0, text="Refining ...")
    levels = cal.FAST_LEVELS if quality == "fast" else cal.DEFAULT_LEVELS
    with shown_errors("Refinement"):
        new_rig, hist = cal.refine_extrinsics(
            rig, frames(), grid, refine_cam, levels=levels, translation=with_translation,
            progress=lambda k, n, loss: bar.progress(k / n, text=f"step {k}/{n}, loss {loss:.3f}"))
    bar.empty()
    after = cal.analyze_seams(new_rig, scene.images, grid)
    ss["cd_result"] = {"rig_in": rig.fingerprint, "rig": new_rig, "hist": hist, "after": after.mosaic(),
                       "after_error": after.seam_error_map(), "after_table": after.table()}

res = ss.get("cd_result")
if res and res["rig_in"] == rig.fingerprint:
    hist, new_rig = res["hist"], res["rig"]
    d = hist.delta
    k1, k2, k3, k4 = st.columns(4)
    k1.metric("Seam loss", f"{hist.final_loss:.3f}", delta=f"{hist.final_loss - hist.initial_loss:+.3f}",
              delta_color="inverse")
    k2.metric("Correction", f"{d.angle_deg:.2f} deg")
    k3.metric("roll / pitch / yaw", f"{d.roll_deg:+.2f} / {d.pitch_deg:+.2f} / {d.yaw_deg:+.2f}")
    truth = cal.camera_delta(rig0[hist.camera], new_rig[hist.camera])
    k4.metric("Left vs the loaded calibration", f"{truth.angle_deg:.3f} deg",
              help="Rotation between the refined camera and the camera as loaded (before your perturbation).")
    rows = hist.rows()
    st.plotly_chart(loss_curve_figure([r["loss"] for r in rows], [r["level"] for r in rows],
                                      [(r["roll_deg"], r["pitch_deg"], r["yaw_deg"]) for r in rows],
                                      title=f"Refining {hist.camera} against {', '.join(hist.neighbours)} "
                                            f"({hist.seconds:.1f} s)"), key="cd_loss")
    st.plotly_chart(before_after_figure(live["mosaic"], res["after"], analysis.grid, live["error"],
                                        res["after_error"], titles=("before", "after")), key="cd_before_after")
    b1, b2, b3 = st.columns(3)
    b1.download_button("Corrected rig (JSON)", downloads.rig_json(new_rig, dict(scene.image_files) or None),
                       file_name="rig_refined.json", mime="application/json", key="cd_dl_rig")
    b2.download_button("Correction per camera (JSON)", cal.deltas_json(rig, new_rig).encode(),
                       file_name="rig_correction.json", mime="application/json", key="cd_dl_delta")
    b3.button("Adopt the corrected rig", key="cd_adopt", on_click=adopt, args=(new_rig, hist.camera),
              help="Replace the loaded rig for every page (until another source is loaded).")
    with st.expander("Correction as JSON"):
        st.code(json.dumps(d.to_dict(), indent=2), language="json")
