"""``bevviz npu``: any user's ONNX model, checked against NPU backend rules and made GridSample-free.

``bevviz npu check MODEL.onnx [--backend NAME ...] [--json PATH]``: the op inventory, index
dtypes and dynamic axes against the backend rules table; exit 1 when a rule of severity
error or warn fails (info rules never fail the command), 2 on bad input.

``bevviz npu rewrite IN.onnx OUT.onnx [--index-dtype int32|int64] [--check/--no-check]
[--dim NAME=SIZE ...] [--backend NAME] [--max-intermediate-mib M] [--per-node] [--json PATH]``:
every GridSample (any mode, 4-D or 5-D) replaced by a chunked gather from a channels-last
table, fused with the weighted sum that follows it where there is one (``--per-node``: never
fused); with ``--backend``, only the nodes that backend's rules reject; every gather / scatter
index int32; the original and the rewritten model run in onnxruntime on the same random
inputs (max |diff| per output, both latencies); exit 1 when a GridSample node was refused (it
stays in OUT, and the table says why) or parity fails, 2 on bad input.

The group is registered in :mod:`bevviz.cli`, whose ``main`` turns an
:class:`~bevviz.errors.InputError` into one line on stderr and exit 2.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import click
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from bevviz.errors import InputError
from bevviz.export.model_check import ModelCheck, backends, check_model
from bevviz.export.model_parity import parse_dims
from bevviz.export.onnx_file import MAX_ONNX_BYTES, walk_graphs
from bevviz.export.rewrite import INDEX_DTYPES, RewriteOptions, RewriteReport, rewrite_grid_sample
from bevviz.io.atomic import atomic_write, atomic_write_bytes
from bevviz.io.outputs import Reads, refuse_input_as_output, writable_file

__all__ = ["npu"]

EXIT_OK, EXIT_FAILED = 0, 1
#: Failing rules of these severities make ``npu check`` exit 1.
FAILING_SEVERITIES = ("error", "warn")


def _table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """A plain fixed-width text table."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _write_json(path: str | None, data: dict) -> None:
    if not path:
        return
    text = json.dumps(data, indent=2, default=str, allow_nan=True)
    if path == "-":
        click.echo(text)
    else:
        atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def _model_file(field: str, model: str) -> str:
    """``model`` when it names an existing file; else an InputError naming the argument."""
    if os.path.isdir(model):
        raise InputError(f"field '{field}': {model!r} is a folder, not an ONNX file", field, model)
    if not os.path.isfile(model):
        raise InputError(f"field '{field}': no such file (got {model!r})", field, model)
    return model


def model_reads(model: str) -> Reads:
    """What reading the ONNX file ``model`` reads: the file and every external-data file its
    tensors name (relative to its folder), for the output-path rule.

    A file that is missing, too large or not ONNX is the file alone: reading it fails later
    with the model reader's named error, before anything is written.

    Args:
        model: Path of the ``.onnx`` file.

    Returns:
        The :class:`~bevviz.io.outputs.Reads`.
    """
    files = [Path(model)]
    if not os.path.isfile(model) or os.path.getsize(model) > MAX_ONNX_BYTES:
        return Reads.of(files)
    try:
        proto = onnx.load_model(model, load_external_data=False)
    except DecodeError:
        return Reads.of(files)
    folder = Path(model).parent
    for graph in walk_graphs(proto.graph):
        for t in [*graph.initializer, *(a.t for n in graph.node for a in n.attribute if a.HasField("t"))]:
            if t.data_location == TensorProto.EXTERNAL:
                location = {e.key: e.value for e in t.external_data}.get("location", "")
                if location:
                    files.append(folder / location)
    return Reads.of(files)


def _refuse_outputs(reads: Reads, json_path: str | None, model_out: str | None = None) -> None:
    """The output-path rule for ``npu check`` / ``npu rewrite``: no output is a file the model
    reading reads, and the JSON report is not the rewritten model."""
    if model_out is not None:
        refuse_input_as_output("OUT.onnx", writable_file("OUT.onnx", model_out), reads)
        refuse_input_as_output("OUT.onnx", model_out + ".data", reads)  # weights beside a model over 2 GB
    if json_path and json_path != "-":
        refuse_input_as_output("--json", writable_file("--json", json_path),
                               reads + Reads.of([model_out] if model_out else []))


@click.group("npu", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def npu() -> None:
    """NPU readiness of any ONNX model: check it against backend rules, make it GridSample-free.

    \b
    COMMANDS
      check MODEL.onnx            op inventory against the backend rules table
      rewrite IN.onnx OUT.onnx    replace every 4-D GridSample, int32 indices, prove parity
    """


def print_check(result: ModelCheck) -> None:
    """The check as text: GridSample nodes, index dtypes, then every rule that applies."""
    rep = result.report
    click.echo(f"{result.name}: opset {rep.opset}, {rep.num_nodes} nodes, "
               f"{rep.op_counts.get('GridSample', 0)} GridSample")
    if result.grid_samples:
        click.echo(_table([(g["node"], g["mode"], g["padding_mode"], g["align_corners"], g["dtype"],
                            "x".join(str(d) for d in g["features"] or ["?"])) for g in result.grid_samples],
                          ("GridSample node", "mode", "padding", "align_corners", "dtype", "X")))
    data = [u for u in rep.index_uses if u.role == "data"]
    click.echo(f"gather / scatter data indices: {len(data)} ({', '.join(rep.index_dtypes()) or 'none'}); "
               f"dynamic inputs: {', '.join(rep.dynamic_dims) or 'none'}")
    rows = [r for r in result.rows if r.result.status != "n/a"]
    click.echo(_table([(r.result.status, r.result.rule.severity, r.result.rule.backend, r.result.rule.title,
                        r.nodes and ", ".join(r.nodes) or "model", r.result.reason) for r in rows],
                      ("status", "severity", "backend", "rule", "where", "reason")))
    click.echo(f"{sum(r.result.status == 'n/a' for r in result.rows)} rules do not apply.")
    if result.onnxruntime_refusal:
        click.echo(f"onnxruntime refuses to load the model: {result.onnxruntime_refusal}")


@npu.command("check")
@click.argument("model", metavar="MODEL.onnx")
@click.option("--backend", "backend", multiple=True, metavar="NAME",
              help="Only rules whose backend contains NAME (case-insensitive; repeatable), e.g. CANN, DrivingSDK, "
                   "Ascend, ONNX.")
@click.option("--json", "json_path", metavar="PATH", help="Write the result as JSON ('-' for stdout).")
@click.pass_context
def check(ctx: click.Context, model: str, backend: tuple[str, ...], json_path: str | None) -> int:
    """Check MODEL.onnx against the backend rules table (exit 1: a rule of severity error or warn fails)."""
    if (ctx.obj or {}).get("parse_only"):
        return EXIT_OK
    _refuse_outputs(model_reads(_model_file("MODEL.onnx", model)), json_path)
    result = check_model(model, backend=backend)
    if json_path != "-":
        print_check(result)
    _write_json(json_path, result.to_dict())
    failed = result.failed(FAILING_SEVERITIES)
    if failed and json_path != "-":
        click.echo(f"FAILED: {len(failed)} rule(s) of severity {' / '.join(FAILING_SEVERITIES)}; backends known: "
                   f"{', '.join(backends())}")
    return EXIT_FAILED if failed else EXIT_OK


def _fmt(x: float | None) -> str:
    return "-" if x is None else ("inf" if math.isinf(x) else f"{x:.2e}")


def print_rewrite(report: RewriteReport) -> None:
    """The rewrite as text: nodes replaced and refused, index changes, parity and latency."""
    click.echo(f"{report.name}: GridSample {report.grid_sample_before} -> {report.grid_sample_after}, "
               f"nodes {report.nodes_before} -> {report.nodes_after}"
               + (f"; written to {report.path}" if report.path else ""))
    for note in report.notes:
        click.echo(f"note: {note}")
    if report.replaced:
        click.echo(_table([(c.node, c.mode, c.padding_mode, c.align_corners, c.form, c.chunks, c.index_dtype,
                            c.nodes_added, c.note) for c in report.replaced],
                          ("replaced", "mode", "padding", "align_corners", "form", "chunks", "index", "nodes",
                           "range")))
    if report.refused:
        click.echo(_table([(r.node, r.reason) for r in report.refused], ("REFUSED (kept)", "reason")))
    if report.kept:
        click.echo(_table([(k.node, k.reason) for k in report.kept], ("kept for the backend", "why")))
    changed = [c for c in report.index_changes if c.was != c.now or c.now != "int32"]
    if changed:
        click.echo(_table([(c.node, c.op_type, f"{c.was} -> {c.now}", c.how, c.range) for c in changed],
                          ("index of", "op", "dtype", "how", "range")))
    click.echo(f"gather / scatter indices all int32: {'yes' if report.int32_ok else 'NO'}")
    p = report.parity
    if p is not None:
        click.echo(_table([(o.name, "x".join(map(str, o.shape)), _fmt(o.max_abs_diff), "ok" if o.ok else "FAIL")
                           for o in p.outputs], ("output", "shape", "max |diff|", f"<= {p.tol:g}")))
        click.echo(_table([("original", f"{p.original_ms:.3f}", "1.00"),
                           ("rewritten", f"{p.rewritten_ms:.3f}", f"{p.ratio:.2f}")],
                          (f"onnxruntime CPU, {p.threads} threads, median of {p.runs}", "ms", "ratio")))


@npu.command("rewrite")
@click.argument("src", metavar="IN.onnx")
@click.argument("dst", metavar="OUT.onnx")
@click.option("--index-dtype", type=click.Choice(list(INDEX_DTYPES)), default="int32", show_default=True,
              help="Index dtype of the sampler's gathers and of the model's own gather / scatter indices.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Run original and rewritten in onnxruntime on the same random inputs: max |diff|, latency.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE",
              help="Size of a symbolic input axis for the check (repeatable; default 2).")
@click.option("--runs", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs of each model.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Intra-op threads (default: torch's).")
@click.option("--backend", default=None, metavar="NAME",
              help="Rewrite only the GridSample nodes this backend's rules reject (e.g. DrivingSDK, CANN); "
                   "the others are kept and listed with why. Default: rewrite all.")
@click.option("--max-intermediate-mib", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Largest gather chunk of the rewrite in MiB (default: a tenth of the GridSample output, 1-64).")
@click.option("--per-node", is_flag=True, help="Do not fuse GridSample with the weighted sum that follows it.")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
@click.pass_context
def rewrite(ctx: click.Context, src: str, dst: str, index_dtype: str, check: bool, dims: tuple[str, ...], runs: int,
            threads: int | None, backend: str | None, max_intermediate_mib: float | None, per_node: bool,
            json_path: str | None) -> int:
    """Replace the GridSample nodes of IN.onnx by chunked int32 gathers (fused with a following weighted sum).

    Exit 1 when a GridSample node was refused (integer features with linear weights, ...: kept
    in OUT.onnx, with the reason) or the check's max |diff| exceeds 1e-5.
    """
    if (ctx.obj or {}).get("parse_only"):
        return EXIT_OK
    _refuse_outputs(model_reads(_model_file("IN.onnx", src)), json_path, dst)
    dims_ = parse_dims(dims, "--dim")
    options = RewriteOptions(fuse=not per_node, max_intermediate_mib=max_intermediate_mib, backend=backend)
    done: list[RewriteReport] = []
    # Written whole or not at all: the rewrite saves to a temporary file beside OUT.onnx, which
    # replaces OUT.onnx only once the rewrite (and its check) has finished.
    atomic_write(dst, lambda tmp: done.append(rewrite_grid_sample(
        src, tmp, index_dtype=index_dtype, check=check, dims=dims_, runs=runs, threads=threads, options=options)))
    report = done[0]
    report.path = dst
    if json_path != "-":
        print_rewrite(report)
    _write_json(json_path, report.to_dict())
    bad = bool(report.refused) or (report.parity is not None and not report.parity.ok)
    return EXIT_FAILED if bad else EXIT_OK
