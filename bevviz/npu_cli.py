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
from collections.abc import Sequence
from pathlib import Path

import click

from bevviz.export.model_check import ModelCheck, backends, check_model
from bevviz.export.model_parity import parse_dims
from bevviz.export.rewrite import INDEX_DTYPES, RewriteOptions, RewriteReport, rewrite_grid_sample
from bevviz.shapes import field_error

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
        Path(path).write_text(text + "\n", encoding="utf-8")


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
    if Path(src).resolve() == Path(dst).resolve():
        raise field_error("OUT.onnx", dst, "must differ from IN.onnx")
    options = RewriteOptions(fuse=not per_node, max_intermediate_mib=max_intermediate_mib, backend=backend)
    report = rewrite_grid_sample(src, dst, index_dtype=index_dtype, check=check, dims=parse_dims(dims, "--dim"),
                                 runs=runs, threads=threads, options=options)
    if json_path != "-":
        print_rewrite(report)
    _write_json(json_path, report.to_dict())
    bad = bool(report.refused) or (report.parity is not None and not report.parity.ok)
    return EXIT_FAILED if bad else EXIT_OK
