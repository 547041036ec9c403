"""NPU export: each sampler to ONNX, its op inventory, backend rules, onnxruntime parity and latency."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from appkit import compute, current, npu
from appkit.guards import shown_errors
from appkit.navigation import require_app
from bevviz.checks import MiB, escape_markdown
from bevviz.errors import InputError
from bevviz.export import STEPS, ExportSettings, coarsen_factors, coarsen_grid, load_rules, run_export
from bevviz.export.models import DTYPES, MAX_OPSET, MIN_OPSET
from bevviz.features import feature_size
from bevviz.samplers import SAMPLERS
from bevviz.samplers.reference import MODES, PADDING_MODES
from bevviz.viz.export import latency_figure, op_inventory_figure, parity_figure

require_app()  # first: a page URL opened as the first request runs through app.py

RESULTS = "npu_export_outcomes"  # session key: {"label": str, "outcomes": {sampler: ExportOutcome}}
WORKDIR = "npu_export_dir"
LABELS = {"grid_sample": "grid_sample (reference)", "gather_scatter": "gather-scatter",
          "deformable": "deformable (floor)", "lut": "lookup table"}
FEATURES = ("conv C=64", "RGB", "random")
# Plain text: the dataframe draws on a canvas with the page's fonts, where emoji (without an
# emoji font installed, as in a bare Chromium) were empty boxes.
STATUS_ICONS = {"pass": "pass", "fail": "FAIL", "n/a": "n/a", "unknown": "unknown"}
SOURCE_SAMPLERS, SOURCE_UPLOAD = "bevviz samplers", "Your ONNX model"


def _rules_frame(rows) -> pd.DataFrame:
    """The rule rows that apply, with status icons."""
    df = pd.DataFrame([r.as_row() for r in rows if r.result.status != "n/a"])
    if not df.empty:
        df["status"] = df["status"].map(STATUS_ICONS)
    return df


def _your_model() -> None:
    """Upload any .onnx: its GridSample nodes and rule results; rewrite it, prove parity, download."""
    st.caption("Bring your own model: any ONNX export (opset >= 16) of a BEV model. bevviz lists its GridSample "
               "nodes and checks it against the backend rules, then replaces every GridSample (4-D and 5-D, "
               "every mode; fused with a weighted sum that follows it) by int32 row gathers with folded "
               "weights, and makes every "
               "gather / scatter index int32. The model is never run except in onnxruntime, on random inputs.")
    st.file_uploader("ONNX model", type=["onnx"], key=npu.UPLOAD,
                     help=f"At most {npu.MAX_ONNX_UPLOAD_BYTES // MiB} MiB, weights inside the file (no external "
                          "data). Larger models: bevviz npu rewrite IN.onnx OUT.onnx (up to 1 GiB).")
    got = npu.uploaded_model()
    if got is None:
        st.info("Upload an **.onnx** model to check and rewrite it.")
        return
    name, data = got
    with shown_errors(f"Reading {escape_markdown(name)}"):
        loaded, result = npu.checked(name, data)
    rep = result.report
    m = st.columns(4)
    m[0].metric("opset", rep.opset)
    m[1].metric("nodes", rep.num_nodes)
    m[2].metric("GridSample", rep.op_counts.get("GridSample", 0))
    m[3].metric("dynamic inputs", len([t for t in rep.inputs if t.dynamic_axes]))
    if rep.checker_error:
        st.warning(f"onnx.checker: {escape_markdown(rep.checker_error)}")
    st.markdown("**GridSample nodes**")
    if result.grid_samples:
        st.dataframe(pd.DataFrame([{**g, "features": str(g["features"]), "grid": str(g["grid"])}
                                   for g in result.grid_samples]), hide_index=True, key="npu_up_gridsample")
    else:
        st.caption("none")
    st.markdown("**Backend rules** (GridSample rules per node)")
    st.dataframe(_rules_frame(result.rows)[["status", "severity", "rule", "nodes", "reason", "backend", "source"]],
                 hide_index=True, key="npu_up_rules")

    c1, c2, c3 = st.columns([1, 2, 1])
    index_dtype = c1.radio("Index dtype", ("int32", "int64"), horizontal=True, key="npu_up_index",
                           help="int32: the NPU form (the sampler's rows and the model's own gather / scatter "
                                "indices); int64 leaves the model's own indices alone.")
    dims_text = c2.text_input("Sizes of symbolic axes", value="", key="npu_up_dims", placeholder="batch=2, queries=900",
                              help="For the random inputs of the parity check; unnamed symbolic axes get 2.")
    runs = c3.number_input("Timed runs", 1, 50, 5, key="npu_up_runs")
    if st.button("Rewrite", type="primary", key="npu_up_run"):
        bar = st.progress(0.0, text="Rewriting ...")
        with st.status("Rewriting ...", expanded=False) as status:
            def on_step(step: str, frac: float) -> None:
                status.update(label=f"{step} ...")
                bar.progress(min(1.0, frac), text=step)

            with shown_errors(f"Rewriting {escape_markdown(name)}"):
                npu.rewritten(loaded, data, index_dtype, dims_text, int(runs), on_step)
            status.update(label="done", state="complete")
    with shown_errors(f"Rewriting {escape_markdown(name)}"):
        report = npu.cached_rewrite(data, index_dtype, dims_text, int(runs))
    if report is None:
        st.info("Press **Rewrite** to replace the GridSample nodes and compare the result in onnxruntime.")
        return
    _show_rewrite(name, report)


def _show_rewrite(name: str, report) -> None:
    """Replaced and refused nodes, index changes, parity and latency side by side, the download."""
    p = report.parity
    st.subheader("Rewritten")
    k = st.columns(4)
    k[0].metric("GridSample", report.grid_sample_after, delta=report.grid_sample_after - report.grid_sample_before,
                delta_color="inverse")
    k[1].metric("nodes", report.nodes_after, delta=report.nodes_after - report.nodes_before, delta_color="off")
    k[2].metric("indices int32", "yes" if report.int32_ok else "no")
    k[3].metric("max |diff|", f"{p.max_abs_diff:.1e}", delta="ok" if p.ok else f"> {p.tol:g}",
                delta_color="normal" if p.ok else "inverse")
    for note in report.notes:
        st.caption(f"• {escape_markdown(note)}")
    for r in report.refused:
        st.error(f"GridSample node {escape_markdown(r.node)} kept: {escape_markdown(r.reason)}")
    if report.replaced:
        st.dataframe(pd.DataFrame([vars(c) | {"features": str(c.features), "grid": str(c.grid)}
                                   for c in report.replaced]), hide_index=True, key="npu_up_replaced")
    changed = [vars(c) for c in report.index_changes if c.was != c.now or c.now != "int32"]
    if changed:
        st.markdown("**The model's own gather / scatter indices**")
        st.dataframe(pd.DataFrame(changed), hide_index=True, key="npu_up_indices")
    left, right = st.columns(2)
    left.plotly_chart(parity_figure({o.name: o.max_abs_diff for o in p.outputs}, tol=p.tol,
                                    title="Parity per output (onnxruntime)", compared="rewritten − original"),
                      key="npu_up_parity")
    right.plotly_chart(latency_figure({"model": (p.original_ms, p.rewritten_ms)}, series=("original", "rewritten"),
                                      title=f"Median latency, onnxruntime CPU, {p.threads} threads"),
                       key="npu_up_latency")
    st.caption(f"Random inputs {escape_markdown(p.inputs)}; {p.runs} timed runs each, alternating; rewritten / "
               f"original = {p.ratio:.2f}.")
    stem = name[:-5] if name.lower().endswith(".onnx") else name
    st.download_button("Download the rewritten .onnx", report.model.SerializeToString(),
                       file_name=f"{stem}_gridsample_free.onnx", mime="application/octet-stream", key="npu_up_download")

scene, grid = current()
rig = scene.rig

st.title("NPU export")
source = st.radio("Model", (SOURCE_SAMPLERS, SOURCE_UPLOAD), horizontal=True, key="npu_source",
                  help="bevviz's own samplers exported with the current rig, or any ONNX model you bring.")
if source == SOURCE_UPLOAD:
    _your_model()
    st.stop()
st.caption("Export each sampler to ONNX with the current rig, BEV grid and features; list its ops and index "
           "dtypes; check it against NPU backend limits (rules as data, each with its source); run it in "
           "onnxruntime against torch. torch.onnx's dynamo exporter (torch 2.13's default) is used unless you "
           "pick the legacy TorchScript one.")

c1, c2, c3, c4 = st.columns([1.3, 1, 1.1, 1.1])
samplers = c1.multiselect("Samplers", SAMPLERS, default=["grid_sample", "gather_scatter"],
                          format_func=LABELS.get, key="npu_samplers")
exporter = c1.radio("Exporter", ("dynamo", "torchscript"), horizontal=True, key="npu_exporter",
                    help="dynamo: torch.export based (needs onnxscript), native opset 18. torchscript: the "
                         "deprecated tracer; fails loudly for GridSample below opset 16.")
opset = c1.number_input("Opset", MIN_OPSET, MAX_OPSET, 18, step=1, key="npu_opset",
                        help="GridSample exists from opset 16: try 15 to see the reference fail.")
mode = c2.selectbox("Mode", MODES, key="npu_mode", help="grid_sample / gather-scatter only.")
padding = c2.selectbox("Padding", PADDING_MODES, key="npu_padding", help="grid_sample / gather-scatter only.")
align = c2.toggle("align_corners", value=False, key="npu_align")
kind = c3.radio("Features", FEATURES, horizontal=True, key="npu_features",
                help="The app's feature maps (conv C=64 or RGB at the stride) or seeded random ones of any C.")
stride = c3.select_slider("Stride", [8, 16, 32], value=16, key="npu_stride")
channels = c3.number_input("C (random)", 1, 512, 8, key="npu_channels", disabled=kind != "random")
dtype = c3.selectbox("dtype", tuple(DTYPES), key="npu_dtype")
factors, default_factor = coarsen_factors(grid)
factor = c4.select_slider("BEV cells coarser by", factors, value=default_factor, key=f"npu_factor_{grid.shape}",
                          help="Exports unroll per-camera loops: a coarser grid keeps the graph small. "
                               "Only factors that tile the current grid exactly are offered.")
ground_only = c4.toggle("Ground points only (z = 0)", value=False, key="npu_ground")
dynamic = c4.toggle("Dynamic batch / feature H, W", value=True, key="npu_dynamic")
keep_int32 = c4.toggle("Keep int32 indices", value=True, key="npu_int32",
                       help="dynamo only: bevviz's translations of index_select / index_add that keep int32.")

try:
    export_grid = coarsen_grid(grid, factor, (0.0,) if ground_only else None)
    H_f, W_f = feature_size(rig, stride)
except InputError as e:
    st.error(escape_markdown(e))
    st.stop()
st.caption(f"{escape_markdown(scene.label)} · {len(rig)} cameras · export grid {export_grid.height} x "
           f"{export_grid.width} cells x {export_grid.num_z} heights · features {H_f} x {W_f} at stride {stride}")

if st.button("Export", type="primary", key="npu_run", disabled=not samplers):
    if kind == "random":
        feats, C = None, int(channels)
    else:
        feats = compute.features(scene, kind, stride)
        C = int(feats.shape[1])
    workdir = st.session_state.setdefault(WORKDIR, tempfile.mkdtemp(prefix="bevviz-onnx-"))
    outcomes = {}
    bar = st.progress(0.0, text="Exporting ...")
    for i, name in enumerate(samplers):
        try:
            settings = ExportSettings(sampler=name, mode=mode, padding_mode=padding, align_corners=bool(align),
                                      channels=C, feature_size=(H_f, W_f), dtype=dtype, opset=int(opset),
                                      exporter=exporter, dynamic=bool(dynamic), keep_int32=bool(keep_int32))
        except InputError as e:
            st.error(f"{LABELS[name]}: {escape_markdown(e)}")
            continue
        with st.status(f"{LABELS[name]}: exporting ...", expanded=False) as status:
            def on_step(step, k, _name=name, _i=i, _status=status):
                _status.update(label=f"{LABELS[_name]}: {step} ...")
                bar.progress((_i + k / len(STEPS)) / len(samplers), text=f"{LABELS[_name]}: {step}")

            out = run_export(settings, Path(workdir) / f"{name}.onnx", rig=rig, bev_grid=export_grid,
                             features=feats, on_step=on_step)
            failed = out.error is not None or (out.parity is not None and not out.parity.ok)
            status.update(label=f"{LABELS[name]}: " + (escape_markdown(out.error[:120]) if out.error else "done"),
                          state="error" if failed else "complete")
        outcomes[name] = out
    bar.progress(1.0, text="Done")
    st.session_state[RESULTS] = {"label": f"{exporter} · opset {opset} · {mode} / {padding} / align_corners="
                                          f"{align} · C={C} · {dtype}", "outcomes": outcomes}

saved = st.session_state.get(RESULTS)
if not saved or not saved["outcomes"]:
    st.info("Choose samplers and settings, then press **Export**.")
    st.stop()
outcomes = saved["outcomes"]
st.subheader("Summary")
st.caption(saved["label"])
for name, out in outcomes.items():
    if out.error:
        st.error(f"{LABELS[name]}: {escape_markdown(out.error)}")

table = pd.DataFrame([out.summary() for out in outcomes.values()])
table["sampler"] = table["sampler"].map(LABELS)
st.dataframe(table.drop(columns=["error"], errors="ignore"), hide_index=True, key="npu_summary",
             column_config={"max |diff|": st.column_config.NumberColumn(format="%.2e"),
                            "torch (ms)": st.column_config.NumberColumn(format="%.2f"),
                            "onnxruntime (ms)": st.column_config.NumberColumn(format="%.2f")})

done = {LABELS[n]: o for n, o in outcomes.items() if o.report is not None}
if done:
    f1, f2 = st.columns([1.3, 1])
    f1.plotly_chart(op_inventory_figure({k: o.report.op_counts for k, o in done.items()}, title="Op inventory",
                                        top=25), key="npu_ops")
    timed = {k: o.parity for k, o in done.items() if o.parity is not None}
    if timed:
        f2.plotly_chart(parity_figure({k: p.max_abs_diff for k, p in timed.items()},
                                      tol=next(iter(timed.values())).tol, title="Parity: onnxruntime vs torch"),
                        key="npu_parity")
        f2.plotly_chart(latency_figure({k: (p.torch_ms, p.ort_ms) for k, p in timed.items()},
                                       title="Median latency (same inputs, same threads)"), key="npu_latency")

tabs = st.tabs([LABELS[n] for n in outcomes])
for tab, (name, out) in zip(tabs, outcomes.items()):
    with tab:
        res, rep = out.result, out.report
        if res is not None:
            st.markdown(f"**{Path(res.path).name}** · opset {res.opset} (asked {res.requested_opset}) · "
                        f"{res.exporter} exporter · {res.seconds:.1f} s")
            st.dataframe(pd.DataFrame([{"tensor": t.name, "kind": kind_, "shape": str(t.shape), "dtype": t.dtype}
                                       for kind_, ts in (("input", res.inputs), ("output", res.outputs))
                                       for t in ts]), hide_index=True, key=f"npu_io_{name}")
            for note in res.notes:
                st.caption(f"• {note}")
            st.download_button("Download .onnx", Path(res.path).read_bytes(),
                               file_name=f"bevviz_{name}_opset{res.opset}.onnx",
                               mime="application/octet-stream", key=f"npu_dl_{name}")
        rows = [r.as_row() for r in out.rules if r.status != "n/a"]
        st.markdown("**Backend rules**")
        if rows:
            rules_df = pd.DataFrame(rows)
            rules_df["status"] = rules_df["status"].map(STATUS_ICONS)
            st.dataframe(rules_df[["status", "severity", "rule", "reason", "backend", "source"]],
                         hide_index=True, key=f"npu_rules_{name}")
        st.caption(f"{sum(r.status == 'n/a' for r in out.rules)} rules do not apply to this model.")
        if rep is not None:
            o1, o2 = st.columns([1, 2])
            o1.markdown("**Ops**")
            o1.dataframe(pd.DataFrame(rep.op_rows()), hide_index=True, key=f"npu_optable_{name}")
            o2.markdown("**Index tensors of gather / scatter ops**")
            if rep.index_uses:
                o2.dataframe(pd.DataFrame(rep.index_rows()), hide_index=True, key=f"npu_index_{name}")
            else:
                o2.caption("none")
            if rep.checker_error:
                st.warning(f"onnx.checker: {escape_markdown(rep.checker_error)}")

with st.expander("The rules table (bevviz/backend_rules.json): add a rule by adding a row"):
    st.dataframe(pd.DataFrame([{"id": r.id, "severity": r.severity, "backend": r.backend,
                                "when": " and ".join(c.describe() for c in r.when) or "always",
                                "check": " and ".join(c.describe() for c in r.check), "source": r.source}
                               for r in load_rules()]), hide_index=True, key="npu_rule_table")
