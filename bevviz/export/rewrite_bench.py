"""Benchmark of the GridSample rewrite: ``python -m bevviz.export.rewrite_bench [--size full|small|quick]``.

Per model, the original, the per-node rewrite (every GridSample on its own,
``RewriteOptions(fuse=False)``) and the fused rewrite (GridSample + weighted sum as one chunked
gather, the default), in onnxruntime (CPU, the same intra-op threads, one inter-op thread).
Each measurement runs in a fresh process started by path (:mod:`bevviz.export.ort_probe`: numpy
and onnxruntime only), so its peak resident memory ``VmHWM`` is the model's own; the
variants alternate round by round so load on the machine hits all alike. Reported: latency
(min over the rounds' runs), CPU time of a run (min; all threads: less dependent on other
load than wall time) and ``VmHWM``, each with its ratio to the original measured in the same
run, and max |diff| of each rewrite's output against the original's.

Models (built here as ONNX graphs, GridSample nodes as any exporter writes them):

- ``sca``: spatial cross-attention's sampling: cameras x C features, a BEV x pillar points
  per camera, summed over the pillar (``ReduceSum``); BEVFormer: 6 x 256 x 58 x 100
  (928 x 1600 images at stride 16), 200 x 200 x 4 points;
- ``msda``: the multi-scale deformable attention fallback: cameras x heads x 32 channels,
  4 levels (58 x 100 to 8 x 13), queries x 4 points per level, one GridSample per level,
  concatenated, times the attention weights, summed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from bevviz.export import ort_probe
from bevviz.export.model_parity import random_feed
from bevviz.export.parity import max_abs_diff
from bevviz.export.rewrite import RewriteOptions, rewrite_grid_sample

__all__ = ["CONFIGS", "TARGETS", "VARIANTS", "main", "markdown_table", "msda_model", "run", "sca_model", "verdicts"]

DEFAULT_OUT = "bench_results/rewrite_bench.json"
#: name -> sizes: ``full`` BEVFormer's, ``small`` a quarter of the BEV and of the features,
#: ``quick`` toy sizes for a smoke run.
CONFIGS = {
    "full": {"cams": 6, "channels": 256, "feat": (58, 100), "bev": 200 * 200, "pillar": 4,
             "heads": 8, "head_ch": 32, "levels": [(58, 100), (29, 50), (15, 25), (8, 13)], "queries": 10000,
             "points": 4},
    "small": {"cams": 6, "channels": 64, "feat": (29, 50), "bev": 50 * 50, "pillar": 4,
              "heads": 8, "head_ch": 32, "levels": [(29, 50), (15, 25), (8, 13), (4, 7)], "queries": 2500,
              "points": 4},
    "quick": {"cams": 2, "channels": 16, "feat": (12, 20), "bev": 30 * 30, "pillar": 4,
              "heads": 2, "head_ch": 8, "levels": [(12, 20), (6, 10)], "queries": 300, "points": 4},
}


def _opset(graph: onnx.GraphProto) -> onnx.ModelProto:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def sca_model(cfg: dict, mode: str = "bilinear", padding: str = "zeros") -> onnx.ModelProto:
    """``ReduceSum(GridSample(feats, grid), axis=-1)``: (N_cam, C, H, W) x (N_cam, BEV, D, 2) -> (N_cam, C, BEV)."""
    n, c, (h, w), bev, d = cfg["cams"], cfg["channels"], cfg["feat"], cfg["bev"], cfg["pillar"]
    nodes = [helper.make_node("GridSample", ["feats", "grid"], ["sampled"], name="sca_grid_sample", mode=mode,
                              padding_mode=padding, align_corners=0),
             helper.make_node("ReduceSum", ["sampled", "axes"], ["out"], keepdims=0)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
    return _opset(helper.make_graph(
        nodes, "sca", [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [n, c, h, w]),
                       helper.make_tensor_value_info("grid", TensorProto.FLOAT, [n, bev, d, 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [n, c, bev])], [axes]))


def msda_model(cfg: dict) -> onnx.ModelProto:
    """One GridSample per level, weighted and summed: the MSDA fallback's sampling core.

    Inputs ``value_l`` (N_cam * heads, C_h, H_l, W_l), ``loc`` (N_cam * heads, L, Q, P, 2),
    ``attn`` (N_cam * heads, 1, Q, L * P); output (N_cam * heads, C_h, Q).
    """
    nh, ch, q, p, levels = cfg["cams"] * cfg["heads"], cfg["head_ch"], cfg["queries"], cfg["points"], cfg["levels"]
    inputs = [helper.make_tensor_value_info(f"value_{i}", TensorProto.FLOAT, [nh, ch, h, w])
              for i, (h, w) in enumerate(levels)]
    inputs += [helper.make_tensor_value_info("loc", TensorProto.FLOAT, [nh, len(levels), q, p, 2]),
               helper.make_tensor_value_info("attn", TensorProto.FLOAT, [nh, 1, q, len(levels) * p])]
    nodes, inits, sampled = [], [], []
    for i in range(len(levels)):
        inits += [helper.make_tensor(f"s{i}", TensorProto.INT64, [1], [i]),
                  helper.make_tensor(f"e{i}", TensorProto.INT64, [1], [i + 1])]
        nodes += [helper.make_node("Slice", ["loc", f"s{i}", f"e{i}", "ax1"], [f"loc{i}_5d"]),
                  helper.make_node("Squeeze", [f"loc{i}_5d", "ax1"], [f"loc{i}"]),
                  helper.make_node("GridSample", [f"value_{i}", f"loc{i}"], [f"sampled{i}"], name=f"msda_level{i}",
                                   mode="bilinear", padding_mode="zeros", align_corners=0)]
        sampled.append(f"sampled{i}")
    inits.append(helper.make_tensor("ax1", TensorProto.INT64, [1], [1]))
    inits.append(helper.make_tensor("last", TensorProto.INT64, [1], [-1]))
    nodes += [helper.make_node("Concat", sampled, ["stacked"], axis=-1),  # (NH, C_h, Q, L * P)
              helper.make_node("Mul", ["stacked", "attn"], ["weighted"]),
              helper.make_node("ReduceSum", ["weighted", "last"], ["out"], keepdims=0)]
    return _opset(helper.make_graph(nodes, "msda", inputs,
                                    [helper.make_tensor_value_info("out", TensorProto.FLOAT, [nh, ch, q])], inits))


#: Variant -> rewrite options (None: the original model).
VARIANTS = {"original": None, "per-node": RewriteOptions(fuse=False), "fused": RewriteOptions(fuse=True)}
#: Variant -> issue 40's targets, ratios to the original of the same run: latency (least wall
#: time of a run) and peak resident memory (``VmHWM``).
TARGETS = {"per-node": {"latency_ratio": 1.5, "vmhwm_ratio": 2.0}, "fused": {"latency_ratio": 1.2, "vmhwm_ratio": 1.2}}


def verdicts(row: dict) -> dict[str, dict[str, dict]]:
    """Each rewritten variant's ratios against :data:`TARGETS`.

    Args:
        row: One model's results (``{"variants": {name: {"latency_ratio": ..., ...}}}``).

    Returns:
        Variant -> ratio name -> ``{"ratio", "limit", "met"}``.
    """
    return {variant: {key: {"ratio": row["variants"][variant][key], "limit": limit,
                            "met": bool(row["variants"][variant][key] <= limit)} for key, limit in limits.items()}
            for variant, limits in TARGETS.items() if variant in row["variants"]}


_WORDS = {"latency_ratio": "latency", "vmhwm_ratio": "memory"}


def _verdict_line(config: str, name: str, variant: str, checks: dict[str, dict]) -> str:
    parts = [f"{_WORDS[k]} {c['ratio']:.2f}x {'<=' if c['met'] else '>'} {c['limit']:g}x "
             f"{'met' if c['met'] else 'MISSED'}" for k, c in checks.items()]
    return f"{config:5s} {name:5s} {variant:9s} target: " + "; ".join(parts)


def _probe(model_path: Path, feed_path: Path, out_path: Path, threads: int, runs: int) -> dict:
    """One fresh process measuring one model (:mod:`bevviz.export.ort_probe`)."""
    cmd = [sys.executable, ort_probe.__file__, str(model_path), str(feed_path), str(out_path),
           "--threads", str(threads), "--runs", str(runs)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": ""})
    if done.returncode != 0:
        raise RuntimeError(f"the probe of {model_path.name} failed ({done.returncode}): {done.stderr[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure_model(name: str, model: onnx.ModelProto, folder: Path, threads: int, rounds: int, runs: int) -> dict:
    feed = random_feed(model, seed=0)
    feed_path = folder / f"{name}_feed.npz"
    np.savez(feed_path, **feed)
    del feed
    paths, forms = {}, {}
    for variant, options in VARIANTS.items():
        m = model
        if options is not None:
            report = rewrite_grid_sample(model, options=options)
            m = report.model
            forms[variant] = {"grid_sample": [report.grid_sample_before, report.grid_sample_after],
                              "nodes": [report.nodes_before, report.nodes_after], "indices_int32": report.int32_ok,
                              "forms": sorted({c.form for c in report.replaced}),
                              "chunks": max((c.chunks for c in report.replaced), default=0)}
        paths[variant] = folder / f"{name}_{variant}.onnx"
        onnx.save(m, paths[variant])
    samples = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            samples[variant].append(_probe(paths[variant], feed_path, folder / f"{name}_{variant}.npy", threads, runs))
    ref = np.load(folder / f"{name}_original.npy")
    row: dict = {"variants": {}}
    base_ms = min(min(s["runs_s"]) for s in samples["original"]) * 1e3
    base_mib = statistics.median(s["vmhwm_kib"] for s in samples["original"]) / 1024
    base_cpu = min(min(s["cpu_s"]) for s in samples["original"]) * 1e3
    for variant in VARIANTS:
        ms = min(min(s["runs_s"]) for s in samples[variant]) * 1e3
        cpu = min(min(s["cpu_s"]) for s in samples[variant]) * 1e3
        mib = statistics.median(s["vmhwm_kib"] for s in samples[variant]) / 1024
        round_ratios = [min(a["runs_s"]) / min(b["runs_s"]) for a, b in zip(samples[variant], samples["original"])]
        diff = 0.0 if variant == "original" else max_abs_diff(ref, np.load(folder / f"{name}_{variant}.npy"))
        row["variants"][variant] = {
            "latency_ms": ms, "latency_ratio": ms / base_ms, "round_ratios": round_ratios,
            "cpu_ms": cpu, "cpu_ratio": cpu / base_cpu,
            "vmhwm_mib": mib, "vmhwm_ratio": mib / base_mib,
            "before_session_mib": statistics.median(s["before_session_kib"] for s in samples[variant]) / 1024,
            "max_abs_diff": diff, **forms.get(variant, {})}
    return row


def run(config: str = "full", models: tuple[str, ...] = ("sca", "msda"), rounds: int = 2, runs: int = 2,
        threads: int = 2) -> dict:
    """Measure every model of ``config`` in every variant; returns the JSON-ready results.

    Args:
        config: ``"full"`` (BEVFormer), ``"small"`` or ``"quick"``.
        models: Which of ``sca``, ``msda``.
        rounds: Fresh processes per variant, alternating.
        runs: Timed runs per process (after one warm-up).
        threads: onnxruntime intra-op threads.
    """
    cfg = CONFIGS[config]
    builders = {"sca": sca_model, "msda": msda_model}
    out = {"config": config, "sizes": cfg, "threads": threads, "rounds": rounds, "runs": runs,
           "onnxruntime": ort.__version__, "machine": {"cpus": os.cpu_count(), "processor": platform.processor(),
                                                      "python": platform.python_version()},
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "load_average_before": list(os.getloadavg()), "models": {}}
    print(f"onnxruntime {ort.__version__}, {threads} intra-op threads, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rewrite_bench_") as tmp:
        for name in models:
            row = _measure_model(name, builders[name](cfg), Path(tmp), threads, rounds, runs)
            out["models"][name] = row
            for variant, v in row["variants"].items():
                print(f"{config:5s} {name:5s} {variant:9s} latency {v['latency_ms']:9.1f} ms "
                      f"({v['latency_ratio']:.2f}x; rounds {', '.join(f'{r:.2f}' for r in v['round_ratios'])})  "
                      f"CPU {v['cpu_ms']:9.1f} ms ({v['cpu_ratio']:.2f}x)  "
                      f"VmHWM {v['vmhwm_mib']:7.0f} MiB ({v['vmhwm_ratio']:.2f}x)  max|diff| {v['max_abs_diff']:.1e}",
                      flush=True)
            row["targets"] = verdicts(row)
            for variant, checks in row["targets"].items():
                print(_verdict_line(config, name, variant, checks), flush=True)
    out["load_average_after"] = list(os.getloadavg())
    missed = [f"{name} {variant} {_WORDS[key]}" for name, row in out["models"].items()
              for variant, checks in row["targets"].items() for key, c in checks.items() if not c["met"]]
    out["targets_missed"] = missed
    print(f"targets of issue 40 ({config}, this run, load average "
          f"{', '.join(f'{x:.1f}' for x in out['load_average_after'])}): "
          + ("all met" if not missed else f"{len(missed)} MISSED: {', '.join(missed)}"), flush=True)
    return out


def markdown_table(results: dict) -> str:
    """The results as a markdown table (one row per model and variant)."""
    lines = ["| size | model | variant | latency (ms) | x original | CPU time (ms) | x original | VmHWM (MiB) "
             "| x original | max abs diff |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in results["models"].items():
        for variant, v in row["variants"].items():
            lines.append(f"| {results['config']} | {name} | {variant} | {v['latency_ms']:.0f} | "
                         f"{v['latency_ratio']:.2f} | {v['cpu_ms']:.0f} | {v['cpu_ratio']:.2f} | "
                         f"{v['vmhwm_mib']:.0f} | {v['vmhwm_ratio']:.2f} | "
                         f"{v['max_abs_diff']:.1e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run, print one line per model and variant, write the JSON (and markdown)."""
    ap = argparse.ArgumentParser(prog="python -m bevviz.export.rewrite_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=list(CONFIGS), default="full", help="model sizes (default full: BEVFormer)")
    ap.add_argument("--quick", action="store_true", help="same as --size quick (toy sizes, a smoke test)")
    ap.add_argument("--models", nargs="+", choices=["sca", "msda"], default=["sca", "msda"])
    ap.add_argument("--rounds", type=int, default=2, help="fresh processes per variant, alternating")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per process, after one warm-up")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (default 2)")
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"JSON output path (default {DEFAULT_OUT})")
    ap.add_argument("--markdown", default=None, help="also write the table as markdown to this path")
    args = ap.parse_args(argv)
    results = run("quick" if args.quick else args.size, tuple(args.models), args.rounds, args.runs, args.threads)
    Path(os.path.dirname(os.path.abspath(args.out))).mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(results) + "\n", encoding="utf-8")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
