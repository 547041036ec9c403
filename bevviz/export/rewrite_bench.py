"""Benchmark of the GridSample rewrite: ``python -m bevviz.export.rewrite_bench [--quick] [--out PATH]``.

The rewritten model against the original, in onnxruntime (CPU, the same intra-op threads,
one inter-op thread), measured in the same run with :func:`bevviz.timing.time_group`'s
interleaved rounds (ratio of minima, spread of the rounds' ratios). Models at BEVFormer-like
sizes, built as ONNX graphs here (GridSample nodes as any exporter writes them):

- ``sca``: spatial cross-attention's sampling: 6 cameras x C = 256 features of 58 x 100
  (928 x 1600 images at stride 16), a 200 x 200 BEV x 4 pillar points per camera, summed over
  the pillar (``ReduceSum``): ``GridSample`` (6, 256, 58, 100) x (6, 40000, 4, 2).
- ``msda``: the multi-scale deformable attention fallback: 6 cameras x 8 heads x 32 channels,
  4 levels (58 x 100 to 8 x 13), 10,000 visible queries per camera x 4 points per level.
- ``sca_<mode>_<padding>`` (``--modes``): the ``sca`` sizes in the other modes and paddings.

Each model is first checked (max |diff| over its output, same random inputs; the peak
resident-memory increase of each session's first run, :func:`bevviz.timing.peak_rss_mb`,
is what its allocator grows to) and then timed.
Where the rewrite is slower on a CPU (bilinear, zeros: measured 0.8-1.9x on the ``sca`` sizes,
1.7-2.9x on ``msda``, README): ``GridSample`` is one kernel that writes each output element
once; the rewrite materialises each tap's gathered rows ``(N, H_out, W_out, C)``, multiplies
and adds them and transposes the channels-last result to NCHW at the end (several times the
output's memory traffic; the first run's peak RSS shows the extra tensors), and with short
rows (``msda``'s 32 channels) its per-point index arithmetic is shared by fewer values. In
nearest, border and reflection modes onnxruntime's CPU GridSample was the slower one. The rewrite exists
for NPUs whose compilers reject GridSample (or int64 gathers); there it costs a row gather of
C contiguous values per tap, the NPU's native operation.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

from bevviz.export.model_parity import random_feed
from bevviz.export.parity import max_abs_diff
from bevviz.export.rewrite import rewrite_grid_sample
from bevviz.timing import PairStats, peak_rss_mb, pin_threads, time_group

__all__ = ["CONFIGS", "main", "msda_model", "run", "sca_model"]

DEFAULT_OUT = "bench_results/rewrite_bench.json"
#: name -> sizes; ``quick`` shrinks every axis for a smoke run.
CONFIGS = {
    "full": {"cams": 6, "channels": 256, "feat": (58, 100), "bev": 200 * 200, "pillar": 4,
             "heads": 8, "head_ch": 32, "levels": [(58, 100), (29, 50), (15, 25), (8, 13)], "queries": 10000,
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


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
    return ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])


def _timer(session: ort.InferenceSession, feed: dict):
    def call() -> float:
        t = time.perf_counter()
        session.run(None, feed)
        return time.perf_counter() - t
    return call


def _first_run(session: ort.InferenceSession, feed: dict) -> tuple[float | None, np.ndarray]:
    """(peak RSS increase in MiB, output) of one run."""
    kept: list[np.ndarray] = []
    peak = peak_rss_mb(lambda: kept.append(session.run(None, feed)[0]))
    return peak, kept[0]


def _mb(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f} MiB"


def run(config: str = "full", modes: bool = False, rounds: int = 3, threads: int | None = None) -> dict:
    """Measure every model of ``config``; returns the JSON-ready results.

    Args:
        config: ``"full"`` (BEVFormer-like) or ``"quick"``.
        modes: Also the ``sca`` sizes in nearest / border / reflection.
        rounds: Interleaved rounds per model.
        threads: Intra-op threads of both sessions (default: the CPUs this process may use).
    """
    cfg = CONFIGS[config]
    threads = pin_threads(threads)
    models = {"sca": sca_model(cfg), "msda": msda_model(cfg)}
    if modes:
        for mode, padding in (("nearest", "zeros"), ("bilinear", "border"), ("bilinear", "reflection")):
            models[f"sca_{mode}_{padding}"] = sca_model(cfg, mode, padding)
    out = {"config": config, "sizes": cfg, "threads": threads, "onnxruntime": ort.__version__, "models": {}}
    for name, model in models.items():
        report = rewrite_grid_sample(model)
        feed = random_feed(model, seed=0)
        sessions = {"original": _session(model, threads), "rewritten": _session(report.model, threads)}
        # each session's first run: its allocator grows to what the model needs
        (peak_o, out_o), (peak_r, out_r) = (_first_run(sessions[k], feed) for k in ("original", "rewritten"))
        peaks = {"original": peak_o, "rewritten": peak_r}
        diff = max_abs_diff(out_o, out_r)
        del out_o, out_r
        measured = time_group({k: _timer(s, feed) for k, s in sessions.items()}, "original", rounds)
        member = {k: {"samples": measured["samples"][k], "round_min": measured["round_min"][k]} for k in sessions}
        stats = PairStats.of(member["rewritten"], member["original"])
        row = {"max_abs_diff": diff, "grid_sample_nodes": [report.grid_sample_before, report.grid_sample_after],
               "nodes": [report.nodes_before, report.nodes_after], "indices_int32": report.int32_ok,
               "original_s": min(measured["samples"]["original"]),
               "rewritten_s": min(measured["samples"]["rewritten"]), "ratio": stats.to_dict(),
               "first_run_peak_rss_mb": peaks,
               "inputs": {k: list(v.shape) for k, v in feed.items()}}
        out["models"][name] = row
        print(f"{name:28s} max|diff| {diff:.2e}  GridSample {report.grid_sample_before}->{report.grid_sample_after}  "
              f"original {row['original_s'] * 1e3:9.1f} ms  rewritten {row['rewritten_s'] * 1e3:9.1f} ms  "
              f"ratio {stats.ratio:5.2f} (rounds {stats.spread[0]:.2f}-{stats.spread[1]:.2f})  first-run peak RSS "
              f"{_mb(peaks['original'])} / {_mb(peaks['rewritten'])}", flush=True)
        del sessions, feed
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: run, print one line per model, write the JSON."""
    ap = argparse.ArgumentParser(prog="python -m bevviz.export.rewrite_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="toy sizes (smoke test)")
    ap.add_argument("--modes", action="store_true", help="also the sca sizes in nearest / border / reflection")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per model")
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: the CPUs available)")
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"JSON output path (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    np.random.seed(0)
    results = run("quick" if args.quick else "full", args.modes, args.rounds, args.threads)
    Path(os.path.dirname(os.path.abspath(args.out))).mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
