"""Calibration audit: which cameras in which scenes are off, along each scene's timeline.

Open the folder a ``bevviz audit`` run wrote (or run one on an embedded dataset here), see
the verdicts per scene x camera and the estimated offsets over time, and open a flagged
sample in the Calibration Doctor.
"""

import streamlit as st

from appkit import audit as au
from appkit.guards import shown_errors
from appkit.navigation import require_app
from bevviz.audit import CheckSettings, degraded_samples, flagged_rows
from bevviz.checks import escape_markdown
from bevviz.viz.audit import offset_timeline_figure, verdict_matrix_figure

require_app()  # first: a page URL opened as the first request runs through app.py

au.switch_if_pending()  # a flagged sample was picked: the sidebar has loaded it by now
ss = st.session_state

st.title("Calibration audit")
st.caption("Every sample of a dataset checked like `bevviz check` (conventions, projection sanity, the doctor); "
           "one row per sample x camera. A drifting camera's offset line leaves zero.")

tab_open, tab_run = st.tabs(["Open an audit folder", "Run on an embedded dataset"])
with tab_open:
    path = st.text_input("Audit folder", key="audit_path", placeholder="the --out folder of bevviz audit",
                         help="Holds manifest.json and parts/*.parquet.")
    if st.button("Open", key="audit_open", disabled=not path.strip()):
        ss[au.AUDIT_DIR] = path.strip()
with tab_run:
    name = st.selectbox("Dataset", list(au.EMBEDDED_DATASETS), key="audit_dataset")
    root = str(au.EMBEDDED_DATASETS[name])
    with shown_errors("Embedded dataset"):
        scene_names = au.audit_scenes(root)
    scenes = st.multiselect("Scenes (none: all)", scene_names, key=f"audit_scenes_{name}")
    c1, c2 = st.columns(2)
    lidar = c1.checkbox("LiDAR witness", value="LiDAR" in name, key=f"audit_lidar_{name}",
                        help="About 4 s per sample. The synthetic sweep is too sparse to judge: its seams decide.")
    estimate = c2.checkbox("Estimate flagged cameras' offsets", value=True, key="audit_estimate",
                           help="Refine each camera the seams flag alone (2-4 s each).")
    if st.button("Run audit", key="audit_run", type="primary"):
        bar = st.progress(0.0, text="Opening the dataset ...")

        def on_progress(done: int, total: int) -> None:
            bar.progress(done / max(total, 1), text=f"{done} / {total} samples")

        with shown_errors("Audit"):
            ss[au.AUDIT_DIR] = au.run_embedded(root, scenes or None, CheckSettings(lidar=lidar, estimate=estimate),
                                               on_progress)
        bar.empty()

out = ss.get(au.AUDIT_DIR)
if not out:
    st.info("Open an audit folder, or run an audit on an embedded dataset.")
    st.stop()
with shown_errors("Audit folder"):
    rows, summary, manifest = au.load_audit(out)

st.caption(escape_markdown(f"{out} · {manifest.get('dataroot')} · {manifest.get('version')} · "
                           f"settings {manifest.get('settings')}"))
cams = list(dict.fromkeys(r["camera"] for r in rows if r["camera"] is not None))
c = st.columns(4)
c[0].metric("Samples", f"{len({r['sample'] for r in rows if r['sample'] is not None})} / "
                       f"{manifest.get('samples', '?')}")
c[1].metric("Miscalibrated", sum(r["verdict"] == "miscalibrated" for r in rows))
c[2].metric("Inconclusive", sum(r["verdict"] == "inconclusive" for r in rows))
c[3].metric("Failed samples", sum(r["verdict"] == "error" for r in rows))
degraded = degraded_samples(rows)
if degraded:  # judged on less evidence than the settings asked for: said where the user looks
    token, why = next(iter(degraded.items()))
    st.warning(escape_markdown(f"{len(degraded)} sample{'s' if len(degraded) != 1 else ''} checked on less evidence "
                               f"than the settings ask for (column degraded); sample {token}: {why}"))
st.plotly_chart(verdict_matrix_figure(summary, cams), key="audit_matrix")
st.plotly_chart(offset_timeline_figure(rows, cams), key="audit_timeline")

flagged = [r for r in flagged_rows(rows) if r["scene"] is not None and r["sample_index"] is not None]
st.subheader("Flagged samples")
if not flagged:
    st.success("Nothing flagged.")
else:
    pick = st.selectbox("Sample", range(len(flagged)), key="audit_pick",
                        format_func=lambda i: f"{flagged[i]['scene']} #{flagged[i]['sample_index']} "
                                              f"{flagged[i]['camera'] or '(sample)'}: {flagged[i]['verdict']}")
    st.button("Open in the Calibration Doctor", key="audit_to_doctor", on_click=au.open_in_doctor,
              args=(flagged[pick], manifest), icon=":material/healing:")
    st.dataframe([{k: r[k] for k in ("scene", "sample_index", "camera", "verdict", "score", "roll_deg", "pitch_deg",
                                     "yaw_deg", "offset_source", "sanity", "error")} for r in flagged],
                 hide_index=True)
problems = [r for r in rows if r.get("error_table") is not None]
if problems:
    st.subheader(f"Table problems ({len(problems)})")
    st.caption("Bad records of the dataset's tables: a sample they concern was not checked; the rest was.")
    st.dataframe([{k: r[k] for k in ("scene", "sample", "error_table", "error_record", "error_field", "error_value",
                                     "error")} for r in problems], hide_index=True, key="audit_problems")
st.subheader("Per scene and camera")
st.dataframe(summary, hide_index=True)
