"""The Calibration Doctor page's larger sections, drawn from what the scene's Doctor answered.

Streamlit widgets only: every number comes from :class:`bevviz.session.Doctor` (via the
page), every table and sentence from :mod:`appkit.doctor`, every figure from
:mod:`bevviz.viz`. The page calls one function per section.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd
import streamlit as st

from appkit import compute, doctor
from appkit.doctor import HELP
from appkit.guards import shown_errors
from bevviz import downloads
from bevviz.calibration import PERTURBATION_KEYS, Diagnosis
from bevviz.camera import Rig
from bevviz.checks import escape_markdown as esc
from bevviz.session import Scene, fixed_rig_json
from bevviz.session.doctor import Doctor, Refinement, SeamView
from bevviz.viz.calibration import before_after_figure
from bevviz.viz.calibration_lidar import lidar_alignment_figure

__all__ = ["lidar_findings", "lidar_refinement", "perturb_controls", "seam_refinement"]

#: ``adopt(rig, camera)``: make ``rig`` the session's rig (the page's callback).
Adopt = Callable[[Rig, str], None]


def perturb_controls(names: list[str], reset: Callable[[], None]) -> None:
    """The camera picker, the reset button and the perturbation sliders of that camera."""
    ss = st.session_state
    pc1, pc2 = st.columns([1, 3])
    cam = pc1.selectbox("Camera", names, key="cd_pert_cam")
    pc1.button("Reset all perturbations", on_click=reset, key="cd_reset")
    cols = pc2.columns(4)
    for i, (k, label, lo, hi, step) in enumerate(doctor.SLIDERS):
        ss.setdefault(doctor.slider_key(cam, k), PERTURBATION_KEYS[k])
        cols[i % 4].slider(label, lo, hi, step=step, key=doctor.slider_key(cam, k))


def seam_grid_controls(scene: Scene) -> tuple[float, float, bool]:
    """The seam grid's radius and cell size (metres) and whether every embedded sample is judged."""
    with st.expander("Seam grid and frames", expanded=False):
        c1, c2, c3 = st.columns(3)
        radius = c1.selectbox("Ground radius (m)", (20.0, 30.0), index=1, key="cd_radius", help=HELP["cd_radius"])
        cell = c2.selectbox("Cell size (m)", (0.2, 0.3, 0.4, 0.5), index=0, key="cd_cell", help=HELP["cd_cell"])
        frames_choice = c3.radio("Frames", ("this sample", "all embedded samples"), index=0, key="cd_frames",
                                 disabled=scene.ground_truth is None, horizontal=True, help=HELP["cd_frames"])
    return radius, cell, scene.ground_truth is not None and frames_choice == "all embedded samples"


def gross_screen(doc: Doctor) -> None:
    """The gross-error screen of the stored rig (a camera turned or swapped, the LiDAR off),
    shown before the fine search, with the fixed rig to download when it has one."""
    with st.spinner("Screening the stored rig for gross errors ..."), shown_errors("Gross-error screen"):
        screen = doc.gross()
    if screen is None:
        return
    pooled = f" ({screen.frames} frames, their edges pooled)" if screen.frames > 1 else ""
    screened, cameras = len(screen.best), len(doc.rig)
    unsure = screen.not_ruled_out
    if not screen.errors:
        if screened == cameras:  # a clean screen is said only where every camera was screened
            lidar = ", the LiDAR where the cameras put it" if cameras > 1 else ""
            open_ = (f"; the positions and focal lengths of {len(unsure)} camera{'s' if len(unsure) != 1 else ''} "
                     "not ruled out (below)" if unsure else "")
            st.caption(f"Gross-error screen{pooled}: no camera turned or swapped{lidar}{open_}.")
        else:  # what could not be screened is never reported clean
            st.warning(f"Gross-error screen{pooled}: {screened} of {cameras} cameras screened, no gross error "
                       "named among them; the others could not be judged (below).")
    else:
        st.subheader("Gross errors")
        if pooled:
            st.caption(f"The cameras were screened on {screen.frames} frames, their edges pooled.")
        for fault in screen.errors:
            st.warning(esc(fault.message))
    said_below = set(screen.not_ruled_out_notes())
    for note in screen.notes:
        if note not in said_below:
            st.info(esc(note))
    if unsure:  # one table, not a note a camera
        with st.expander(f"Not ruled out: position or focal errors the LiDAR's edges cannot tell from none "
                         f"({len(unsure)} camera{'s' if len(unsure) != 1 else ''})"):
            st.dataframe(pd.DataFrame({"camera": list(unsure), "not ruled out": list(unsure.values())}),
                         hide_index=True, key="cd_gross_not_ruled_out")
            st.caption("Each, turned a little, fits the LiDAR's edges about as well as the stored pose, so the "
                       "screen's silence does not clear it. More frames (a drive) rule out more.")
    if (fixed := doc.fixed_rig()) is not None:  # a fix exists only for an error named
        st.download_button("Download the fixed rig (JSON)", fixed_rig_json(fixed), file_name="rig_fixed.json",
                           mime="application/json", key="cd_fixed_rig")


def lidar_findings(found: Diagnosis) -> None:
    """The LiDAR diagnosis: who is named, the rig-level notes, the verdicts, why, the evidence and the consensus."""
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


def _rig_download(col, label: str, rig: Rig, scene: Scene, file_name: str, key: str) -> None:
    col.download_button(label, downloads.rig_json(rig, dict(scene.image_files) or None), file_name=file_name,
                        mime="application/json", key=key)


def lidar_refinement(res: Refinement, scene: Scene, adopt: Adopt) -> None:
    """A camera refined against the LiDAR: accepted (apply, download), proposed (apply anyway) or
    refused; an accepted or proposed correction drawn before and after on every frame pooled."""
    lh, look = res.history, res.camera
    if lh.accepted:
        st.success(f"Accepted: {esc(lh.check)}")
        value, why = doctor.correction_metric(lh.delta)
        st.metric("Correction", value, help=why)
        a1, a2 = st.columns(2)
        a1.button("Apply to the session rig", key="cd_lidar_apply", on_click=adopt, args=(res.rig, look),
                  help=HELP["adopt"])
        _rig_download(a2, "Refined rig (JSON)", res.rig, scene, "rig_refined.json", "cd_lidar_dl")
    elif (proposed := res.proposed_rig) is not None:
        st.warning(f"{esc(lh.check[:1].upper() + lh.check[1:])}. The rig is left as it is.")
        value, why = doctor.correction_metric(lh.delta)
        st.metric("Proposed correction", value, help=why)
        p1, p2 = st.columns(2)
        p1.button("Apply the proposal anyway", key="cd_lidar_apply_proposal", on_click=adopt, args=(proposed, look),
                  help=HELP["adopt_proposal"])
        _rig_download(p2, "Proposed rig (JSON)", proposed, scene, "rig_proposed.json", "cd_lidar_dl_proposal")
    else:
        st.warning(f"Not accepted (the rig is left as it is): {esc(lh.check)}")
    if res.overlays:
        _overlays(res)


def _overlays(res: Refinement) -> None:
    """The correction on every frame it pooled: the LiDAR's edges before and after, side by side."""
    cam = res.rig_in[res.camera]
    what = "correction" if res.history.accepted else "proposed correction"
    n = len(res.overlays)
    with st.expander(f"The {what} on every frame it pooled ({n})", expanded=n == 1):
        st.caption(doctor.OVERLAYS_TEXT)
        cols = st.columns(min(n, 3))
        for k, o in enumerate(res.overlays):
            e = o.edges
            cols[k % len(cols)].plotly_chart(
                lidar_alignment_figure(cam, compute.image_edge_picture(o.image), e.uv_before, e.uv_after,
                                       title=f"{res.camera}, frame {e.frame + 1}", height=320, marker_size=2.5,
                                       names=("before", "after")),
                key=f"cd_overlay_{e.frame}")


def seam_refinement(res: Refinement, view: SeamView, scene: Scene, adopt: Adopt) -> None:
    """A camera refined against its seams: the loss, the correction, before and after, downloads."""
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
    _rig_download(b1, "Corrected rig (JSON)", res.rig, scene, "rig_refined.json", "cd_dl_rig")
    b2.download_button("Correction per camera (JSON)", res.deltas_json().encode(), file_name="rig_correction.json",
                       mime="application/json", key="cd_dl_delta")
    b3.button("Adopt the corrected rig", key="cd_adopt", on_click=adopt, args=(res.rig, res.camera), help=HELP["adopt"])
    with st.expander("Correction as JSON"):
        st.code(json.dumps(d.to_dict(), indent=2), language="json")
