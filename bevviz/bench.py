"""Benchmark of the samplers and pipelines: ``python -m bevviz.bench [--quick] [--out PATH]``.

Default configuration (BEVFormer-base-like): the 6-camera nuScenes-like rig, features
64 x 56 x 100 per camera (1600 x 900 images at stride 16), a 200 x 200 BEV grid with 4
pillar points. Every figure that a target judges is a ratio against a baseline measured
in the same run, under the same conditions:

* **Threads pinned**: torch runs on ``--threads`` intra-op threads (default: the CPUs this
  process may use), set once before anything runs and stated in the report; the
  gather-scatter workers (:mod:`bevviz.threads`) follow that count.
* **Freed memory kept** (see :func:`keep_freed_memory`): glibc's ``malloc`` hands every
  block above its mmap threshold (at most 32 MiB) straight back to the kernel on ``free``,
  so each call's large buffers are fresh pages that fault in, 4 KiB at a time, zeroed by
  the kernel (``F.grid_sample``'s 245 MB output on the BEV grid: 60 000 faults a call;
  the reference pipeline's backward: 1.7 million). That was the "as much system time as user time" of a
  full run: ~70 million minor page faults, ~170 s of system time against ~210 s of user
  time, and the noisiest part of every figure (page faulting contends with every other
  process on the machine). The bench keeps freed memory in the heap, as a long-running
  process with a caching allocator would: every timed call of a target's entries then
  runs without a fault. What faults remain is the memory phase (it trims the heap before
  each measured call, by design) and the dense ``deformable_reference``'s 6 GB backward,
  whose heap top exceeds the largest trim threshold ``mallopt`` can set. ``--system-malloc``
  measures with glibc's defaults.
* **Huge pages**: ``python -m bevviz.bench`` starts itself afresh with PyTorch's
  ``THP_MEM_ALLOC_ENABLE=1`` (tensors of 2 MiB and more on transparent huge pages where the
  kernel allows them; the report says whether it did), for every entry and baseline alike,
  as a serving process would. Sampling reads a feature table at scattered rows: on 4 KiB
  pages the 8.6 MB table spans 2100 pages, more than the TLB holds, and the LUT's apply
  paid ~17 % for it (2.4 vs 2.0 ms, the reference pipeline unchanged within noise).
  ``--system-malloc`` leaves this off too.
* **Warm-up**: every entry runs once untimed (its output is checked), then once more to
  size its samples.
* **Interleaved rounds**: entries are timed in groups of a baseline and its candidates.
  A round is a few alternations, each timing every member once, the order reversed every
  other time (A B C, C B A, A B C), so a burst of load from other processes hits the
  members alike; a round's ratio is the candidate's fastest sample in it over the
  baseline's (load only ever adds time, and a burst shorter than the round is filtered).
  A candidate's **ratio** is the ratio of minima over all its samples, and its **spread**
  the range of the rounds' ratios: independent estimates of the same ratio. The drop-in's
  forward groups (fast calls, judged in every round) take twice the alternations per round
  (24): on a shared machine a round of 12 still caught a stretch of load on one side
  (rounds 0.76-1.07x about a ratio of 0.86x).
* **Equal windows**: a sample of an entry much faster than its baseline is the mean of
  several calls lasting about as long as one baseline call (as ``timeit``'s autorange),
  so both sides of a ratio are exposed to the machine's load for the same time.
* **Verdicts with margin**: a target is PASS only if even the worst round's ratio meets
  it (the whole spread is on the right side), else FAIL. ``--quick`` (toy sizes) prints
  every measurement and marks every verdict ``n/a (quick)``: ratios at those sizes say
  nothing about the real one.

Measured per entry: ``forward_*`` (``torch.no_grad`` call), ``backward_*`` (the
``out.sum().backward()`` after an untimed forward with gradients w.r.t. the features,
where the entry is differentiable): the samples (seconds per call), their min / median /
max, and the median minor page faults per call (``*_faults_per_call``); ``peak_rss_mb``
(and ``peak_rss_backward_mb`` of one forward + backward): the peak resident-memory
increase of one call. Method: ``malloc_trim(0)`` returns freed heap pages to the OS,
``/proc/self/clear_refs`` (5) resets the kernel's RSS high-water mark, then ``VmHWM -
VmRSS(before)`` after the call -- every page the call touched at its peak, allocator
overhead included (``tracemalloc`` would miss torch entirely). Linux only (``null``
elsewhere). The report ends with this process's user and system time and page faults,
in all and in the timed part.

Entries and their baselines: the pipelines ``gather_scatter``, ``deformable_bilinear`` /
``deformable_floor`` (3 x 3 taps, zero offsets), their dense ``deformable_reference``,
``lut_build``, ``lut_apply_bag``, ``lut_apply_sparse``, ``lut_apply_gather`` (the
table's methods; ``lut_apply`` is its default, what ``table.apply`` runs) and
``lut_pipeline`` (``bev_features(sampler="lut", lut=table)``, with key checks) against
``reference`` (the dense ``F.grid_sample`` pipeline); the drop-in
``gather_scatter.grid_sample`` against ``F.grid_sample`` on the reference's own grid
(N_cam, Z * H_bev, W_bev, 2), forward and backward, and (forward only) both on a seeded
grid of that shape entirely inside the image (``[in-image]``), where the drop-in cannot
skip points that miss the image. The deformable entries, ``lut_build``,
the table's other methods and the pipelines' backward passes are informational and run
fewer rounds. Max abs differences of every output against its reference are printed and
saved. Results go to ``--out`` as JSON.

Targets (reported, never asserted): gather-scatter pipeline <= 1.0x the reference; LUT
apply >= 30x faster than the reference with output equal to 1e-5; drop-in
``grid_sample`` forward at or under ``F.grid_sample`` (<= 1.0x) on the BEV grid and on the
in-image grid, its backward within 2x.

The machine: a ratio depends on it (the CPU's vector units decide how fast
``F.grid_sample``'s gathers are; the thread count decides both sides), so the report
starts with what the bench found (:func:`machine_info`): CPU model and vector ISA flags,
torch's kernel capability, intra-op and inter-op threads (and torch's own default before
``--threads``), the thread-count environment variables, torch version, parallel backend
(OpenMP), MKL and oneDNN. Compare ratios only between runs whose machine lines agree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from bevviz.aggregation import bev_geometry, point_weights
from bevviz.bev_grid import BEVGrid
from bevviz.pipeline import bev_features
from bevviz.samplers import BEV_VARIANTS, SamplerVariant
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.deformable import DeformableConfig, deformable_bev_reference
from bevviz.samplers.lut import METHODS as LUT_METHODS
from bevviz.samplers.lut import build_lut
from bevviz.synthetic import nuscenes_like_rig
from bevviz.timing import (
    HUGE_PAGES_ENV,
    PairStats,
    forward_backward_peak_mb,
    forward_backward_timers,
    huge_pages_state,
    keep_freed_memory,
    machine_info,
    machine_line,
    peak_rss_mb,
    pin_threads,
    process_usage,
    summary,
    time_group,
)

DEFAULT_OUT = "bench_results/bench.json"
CONFIGS = {
    # rounds x alternations per round of the targets' groups (the drop-in's forward groups:
    # dropin_alternations); (rounds, alternations) of the rest
    "default": dict(channels=64, feature_size=(56, 100), grid=dict(resolution=0.512), rounds=6, alternations=12,
                    dropin_alternations=24, info=(2, 2)),
    "quick": dict(channels=8, feature_size=(28, 50), grid=dict(resolution=4.096), rounds=2, alternations=1,
                  dropin_alternations=1, info=(1, 1)),
}
#: Thresholds; every one is judged on ratios against a baseline of the same run.
TARGETS = {"gather_scatter_max_ratio": 1.0, "lut_min_speedup": 30.0, "lut_max_abs_diff": 1e-5,
           "dropin_max_ratio": 1.0, "dropin_in_image_max_ratio": 1.0, "dropin_backward_max_ratio": 2.0}
QUICK_VERDICT = "n/a (quick)"
MALLOC_KEPT = "freed memory kept (M_MMAP_MAX=0, M_TRIM_THRESHOLD=2 GiB)"


def verdict(stats: PairStats, limit: float, kind: str, quick: bool, extra_ok: bool = True) -> tuple[str, bool | None]:
    """PASS if the whole spread meets the target (see the module docstring).

    Args:
        stats: The candidate's figures, as ratios (``kind="max"``) or speedups (``"min"``).
        limit: The threshold.
        kind: ``"max"`` (at most ``limit``) or ``"min"`` (at least).
        quick: Toy sizes: no verdict.
        extra_ok: Another condition of the target (e.g. accuracy).

    Returns:
        ``(text, ok)``: ``"PASS"`` / ``"FAIL"`` / ``"n/a (quick)"`` and True / False / None.
    """
    if quick:
        return QUICK_VERDICT, None
    worst = stats.spread[1] if kind == "max" else stats.spread[0]
    ok = bool(extra_ok and (worst <= limit if kind == "max" else worst >= limit))
    return ("PASS" if ok else "FAIL"), ok


# --------------------------------------------------------------------------- machine

# --------------------------------------------------------------------------- benchmark

def run_bench(quick: bool = False, repeats: int | None = None, log=print, malloc: str = "as found",
              default_threads: int | None = None) -> dict:
    """Run every measurement once (see the module docstring).

    Args:
        quick: Small configuration (C=8, 28 x 50 features, 25 x 25 BEV) for smoke tests.
        repeats: Interleaved rounds of the targets' groups (default 6 of 12 alternations,
            24 for the drop-in's forward; quick 2 of 1); the informational ones run at most 2.
        log: Progress printer.
        malloc: How the process's ``malloc`` is set up (recorded; see :func:`keep_freed_memory`).
        default_threads: torch's thread count before the bench set it (recorded).

    Returns:
        JSON-ready dict with ``config``, ``results`` (name -> timings/memory/ratios),
        ``pairs`` (candidate -> forward/backward :class:`PairStats` against its
        baseline), ``max_abs_diff``, ``targets``, ``process`` (CPU time and page faults).
    """
    usage_start = process_usage()
    cfg = dict(CONFIGS["quick" if quick else "default"])
    rounds = int(repeats or cfg["rounds"])
    dropin = (rounds, cfg["dropin_alternations"])
    info = (min(rounds, cfg["info"][0]), cfg["info"][1])
    rig = nuscenes_like_rig()
    grid = BEVGrid(**cfg["grid"])
    hf, wf = cfg["feature_size"]
    C = cfg["channels"]
    feats = torch.randn(len(rig), C, hf, wf, generator=torch.Generator().manual_seed(0))
    H, W = grid.shape
    config = _config(quick, cfg, rounds, dropin, info, (len(rig), C, hf, wf, H, W, grid.num_z), malloc,
                     default_threads)
    log(f"bevviz bench: {len(rig)} cameras, features {C} x {hf} x {wf}, BEV {H} x {W} x {grid.num_z} "
        f"points, float32, {rounds} interleaved rounds of {cfg['alternations']} (drop-in forward: {dropin[1]}), "
        f"torch {torch.__version__} pinned to {config['threads']} threads")
    log(machine_line(config["machine_info"]))

    table = build_lut(rig, grid, (hf, wf))
    g = bev_geometry(rig, grid).grid.to(torch.float32).reshape(len(rig), grid.num_z * H, W, 2)
    g_in = torch.rand(g.shape, generator=torch.Generator().manual_seed(1)) * 2 - 1
    entries = _entries(rig, grid, table, (hf, wf), g, g_in)
    full = (rounds, cfg["alternations"])
    # (baseline, candidates, forward schedule, backward schedule): the targets' groups first;
    # a schedule is (rounds, alternations per round), None for not timed.
    groups = [
        ("reference", ["gather_scatter", f"lut_apply_{table.method}", "lut_pipeline"], full, info),
        ("F.grid_sample", ["gather_scatter.grid_sample"], dropin, full),
        ("F.grid_sample[in-image]", ["gather_scatter.grid_sample[in-image]"], dropin, None),
        ("reference", [*(f"lut_apply_{m}" for m in LUT_METHODS if m != table.method), "lut_build",
                       "deformable_bilinear", "deformable_floor"], info, info),
        # 1-3 s a call and a 6 GB backward that faults in afresh every time (see above): once.
        ("reference", ["deformable_reference"], (1, 2), (1, 1)),
    ]
    outputs: dict[str, object] = {}
    with torch.no_grad():
        log("  warm-up and outputs ...")
        for name, (fn, _) in entries.items():
            outputs[name] = fn(feats)
    measured = _timed(entries, groups, feats, log)
    usage_timed = process_usage()
    log("  peak memory ...")
    results, pairs = _results(entries, measured, feats)
    results["lut_build"].update(nnz=table.nnz, ell_slots=int(table.ell[0].shape[1]))
    best = table.method  # what table.apply(features) runs
    results["lut_apply"] = dict(results[f"lut_apply_{best}"], method=best)
    pairs["lut_apply"] = pairs[f"lut_apply_{best}"]
    diffs = _diffs(outputs, feats, rig, grid, best)

    targets = _targets(measured, results, diffs, best, quick)
    targets["bev_grid_inside_fraction"] = float((g.abs() <= 1).all(-1).float().mean())
    try:
        config["load_average_end"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    usage_end = process_usage()
    process = {k: usage_end[k] - usage_start[k] for k in usage_end}
    process["timings"] = {k: usage_timed[k] - usage_start[k] for k in usage_end}
    return {"config": config, "results": results, "pairs": pairs, "max_abs_diff": diffs, "targets": targets,
            "process": process}


def _config(quick: bool, cfg: dict, rounds: int, dropin: tuple[int, int], info: tuple[int, int], sizes: tuple,
            malloc: str, default_threads: int | None) -> dict:
    """The report's ``config``: sizes, schedules, versions, threads and the machine, as found."""
    n_cam, C, hf, wf, H, W, num_z = sizes
    config = {
        "quick": quick, "cameras": n_cam, "channels": C, "feature_size": [hf, wf],
        "bev": [H, W], "pillar_points": num_z, "rounds": rounds, "alternations": cfg["alternations"],
        "dropin_alternations": dropin[1],
        "info_rounds": list(info),
        "dtype": "float32", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(), "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "machine": platform.machine(), "python": platform.python_version(), "malloc": malloc,
        "huge_pages": huge_pages_state(), "machine_info": machine_info(default_threads),
    }
    try:
        config["load_average_start"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    return config


def _entries(rig, grid: BEVGrid, table, feature_size: tuple[int, int], g: torch.Tensor,
             g_in: torch.Tensor) -> dict[str, tuple[Callable, bool]]:
    """Name -> (forward of the features, differentiable): every pipeline, sampler and LUT step timed.

    Args:
        rig: The rig.
        grid: The BEV grid.
        table: Its lookup table (:func:`bevviz.samplers.lut.build_lut`).
        feature_size: ``(H_f, W_f)`` of the features.
        g: ``(N_cam, Z * H, W, 2)`` the BEV grid's sampling coordinates, float32.
        g_in: The same shape, every point inside the image.
    """
    bil = DeformableConfig(kernel_size=3, rounding="bilinear")

    def pipe(variant: SamplerVariant) -> Callable:
        kw = variant.options(kernel_size=3, lut=table)
        return lambda f: bev_features(f, rig, grid, variant.sampler, **kw).features

    def deformable_dense(f):
        geom = bev_geometry(rig, grid)
        w, _, _ = point_weights(geom.valid)
        return deformable_bev_reference(f, geom.grid, w, bil)

    pipelines = {v.key: pipe(v) for v in BEV_VARIANTS}
    return {
        **{k: (fn, True) for k, fn in pipelines.items() if k != "lut_pipeline"},
        "deformable_reference": (deformable_dense, True),
        "lut_build": (lambda f: build_lut(rig, grid, feature_size), False),
        **{f"lut_apply_{m}": (lambda f, m=m: table.apply(f, method=m), True) for m in LUT_METHODS},
        "lut_pipeline": (pipelines["lut_pipeline"], True),
        "F.grid_sample": (lambda f: torch.nn.functional.grid_sample(f, g, align_corners=False), True),
        "gather_scatter.grid_sample": (lambda f: gs.grid_sample(f, g, align_corners=False), True),
        # Informational: a grid of the same shape entirely inside the image (no target).
        "F.grid_sample[in-image]": (
            lambda f: torch.nn.functional.grid_sample(f, g_in, align_corners=False), False),
        "gather_scatter.grid_sample[in-image]": (lambda f: gs.grid_sample(f, g_in, align_corners=False), False),
    }


def _timed(entries: dict, groups: list, feats: torch.Tensor, log) -> dict[str, dict[str, dict]]:
    """Phase (forward, backward) -> entry -> its samples, faults and, for a candidate, its
    :class:`PairStats` against its group's baseline: every group timed in interleaved rounds."""
    timers = {name: forward_backward_timers(fn, feats) for name, (fn, _) in entries.items()}
    measured: dict[str, dict[str, dict]] = {"forward": {}, "backward": {}}
    for phase in ("forward", "backward"):
        log(f"  {phase} timings (interleaved rounds) ...")
        for base, candidates, fwd_schedule, bwd_schedule in groups:
            members = [n for n in [base, *candidates] if phase == "forward" or entries[n][1]]
            schedule = fwd_schedule if phase == "forward" else bwd_schedule
            if len(members) < 2 or schedule is None:
                continue
            if phase == "backward":
                for n in members:  # a first backward of each, untimed
                    timers[n]["backward"]()
            res = time_group({n: timers[n][phase] for n in members}, base, *schedule)
            for n in members:
                measured[phase].setdefault(n, {"baselines": {}})
                if n == base:
                    measured[phase][n].setdefault("samples", res["samples"][n])
                    measured[phase][n].setdefault("faults", res["faults"][n])
                    continue
                measured[phase][n]["faults"] = res["faults"][n]
                measured[phase][n]["samples"] = res["samples"][n]
                measured[phase][n]["calls"] = res["calls"][n]
                measured[phase][n]["pair"] = PairStats.of(*({k: res[k][m] for k in ("samples", "round_min")}
                                                            for m in (n, base)))
                measured[phase][n]["base"] = base
    return measured


def _results(entries: dict, measured: dict, feats: torch.Tensor) -> tuple[dict, dict]:
    """(results, pairs): per entry its timing summaries, peak memory and ratios; per candidate
    its pairs' statistics (JSON-ready)."""
    results: dict[str, dict] = {}
    pairs: dict[str, dict] = {}
    for name, (fn, diff) in entries.items():
        with torch.no_grad():
            mem = peak_rss_mb(lambda fn=fn: fn(feats))
        res = {**summary(measured["forward"][name], "forward"), "peak_rss_mb": mem}
        if diff:
            res.update(summary(measured["backward"][name], "backward"),
                       peak_rss_backward_mb=forward_backward_peak_mb(fn, feats))
        for phase, key in (("forward", "ratio"), ("backward", "backward_ratio")):
            m = measured[phase].get(name, {})
            if "pair" in m:
                res[key] = m["pair"].ratio
                res[f"{key}_spread"] = list(m["pair"].spread)
                res[f"{phase}_calls_per_sample"] = m["calls"]
                res[f"{phase}_baseline"] = m["base"]
                pairs.setdefault(name, {})[phase] = m["pair"].to_dict()
            elif phase == "forward" or diff:
                res[key] = 1.0  # a baseline
        if "ratio" in res:
            res["speedup"] = 1.0 / res["ratio"]
        results[name] = res
    return results, pairs


def _diffs(outputs: dict, feats: torch.Tensor, rig, grid: BEVGrid, best: str) -> dict[str, float]:
    """Max |diff| of every candidate's output against its reference (and the deformable
    floor's mean and relative RMS error)."""
    ref = outputs["reference"]
    d_ref = outputs["deformable_reference"]
    diffs = {
        "gather_scatter": float((outputs["gather_scatter"] - ref).abs().max()),
        "deformable_bilinear": float((outputs["deformable_bilinear"] - d_ref).abs().max()),
        "deformable_floor": float((outputs["deformable_floor"] - d_ref).abs().max()),
        "deformable_floor_mean": float((outputs["deformable_floor"] - d_ref).abs().mean()),
        "deformable_floor_relative_rms": float(((outputs["deformable_floor"] - d_ref).pow(2).mean()
                                                / d_ref.pow(2).mean().clamp(min=1e-30)).sqrt()),
        **{f"lut_apply_{m}": float((outputs[f"lut_apply_{m}"] - ref).abs().max()) for m in LUT_METHODS},
        "lut_pipeline": float((outputs["lut_pipeline"] - ref).abs().max()),
        "gather_scatter.grid_sample": float((outputs["gather_scatter.grid_sample"]
                                             - outputs["F.grid_sample"]).abs().max()),
        "gather_scatter.grid_sample[in-image]": float(
            (outputs["gather_scatter.grid_sample[in-image]"]
             - outputs["F.grid_sample[in-image]"]).abs().max()),
    }
    with torch.no_grad():
        d_one = bev_features(feats, rig, grid, "deformable", deformable=DeformableConfig(kernel_size=1)).features
    diffs["deformable_k1_vs_reference"] = float((d_one - ref).abs().max())
    diffs["lut_apply"] = diffs[f"lut_apply_{best}"]
    return diffs


def _targets(measured: dict, results: dict, diffs: dict, lut_method: str, quick: bool) -> dict:
    """Every target's figures and verdict (see :func:`verdict`)."""
    fwd, bwd = measured["forward"], measured["backward"]
    judged = {
        "gather_scatter": (fwd["gather_scatter"]["pair"], TARGETS["gather_scatter_max_ratio"], "max", True),
        "lut": (fwd[f"lut_apply_{lut_method}"]["pair"].inverse(), TARGETS["lut_min_speedup"], "min",
                diffs["lut_apply"] <= TARGETS["lut_max_abs_diff"]),
        "dropin": (fwd["gather_scatter.grid_sample"]["pair"], TARGETS["dropin_max_ratio"], "max", True),
        "dropin_in_image": (fwd["gather_scatter.grid_sample[in-image]"]["pair"], TARGETS["dropin_in_image_max_ratio"],
                            "max", True),
        "dropin_backward": (bwd["gather_scatter.grid_sample"]["pair"], TARGETS["dropin_backward_max_ratio"], "max",
                            True),
    }
    targets: dict = {"thresholds": TARGETS, "rule": "each is met only if every interleaved round's ratio meets it"}
    for key, (stats, limit, kind, extra) in judged.items():
        text, ok = verdict(stats, limit, kind, quick, extra)
        targets[key] = {**stats.to_dict(), "limit": limit, "kind": kind, "verdict": text}
        targets[f"{key}_ok"] = ok
    targets["gather_scatter_ratio"] = targets["gather_scatter"]["ratio"]
    targets["lut_apply_speedup"] = targets["lut"]["ratio"]
    targets["lut_apply_max_abs_diff"] = diffs["lut_apply"]
    targets["dropin_ratio"] = targets["dropin"]["ratio"]
    targets["dropin_backward_ratio"] = targets["dropin_backward"]["ratio"]
    dropin = results["gather_scatter.grid_sample"]
    base = results["F.grid_sample"]
    targets["dropin_backward_ms"] = {"gather_scatter.grid_sample": 1e3 * dropin["backward_min_s"],
                                     "F.grid_sample": 1e3 * base["backward_min_s"]}
    targets["dropin_in_image_ratio"] = targets["dropin_in_image"]["ratio"]
    return targets


def format_report(report: dict) -> str:
    """Human-readable table of a :func:`run_bench` report."""
    lines = []
    width = max(28, *(len(name) for name in report["results"]))
    hdr = (f"{'entry':{width}s} {'fwd min':>8s} {'median':>8s} {'max':>8s} {'ratio':>7s} {'spread':>13s} "
           f"{'bwd min':>8s} {'median':>8s} {'bwd ratio':>9s} {'spread':>13s} {'peak MB':>8s} {'bwd MB':>8s}")
    lines += [hdr, "-" * len(hdr)]

    def fmt(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else f"{'-':>{spec.split('.')[0]}}"

    def ms(r, key):
        return fmt(r[key] * 1e3 if key in r else None, "8.2f")

    def spread(r, key):
        s = r.get(key)
        return f"{s[0]:6.3f}-{s[1]:<6.3f}" if s else f"{'-':>13s}"

    for name, r in report["results"].items():
        lines.append(
            f"{name:{width}s} {ms(r, 'forward_min_s')} {ms(r, 'forward_s')} {ms(r, 'forward_max_s')} "
            f"{fmt(r.get('ratio'), '7.3f')} {spread(r, 'ratio_spread')} "
            f"{ms(r, 'backward_min_s')} {ms(r, 'backward_s')} {fmt(r.get('backward_ratio'), '9.3f')} "
            f"{spread(r, 'backward_ratio_spread')} {fmt(r.get('peak_rss_mb'), '8.1f')} "
            f"{fmt(r.get('peak_rss_backward_mb'), '8.1f')}")
    lines.append("")
    c = report["config"]
    lines.append("times in ms per call (min / median / max over the rounds); ratio = ratio of minima against the "
                 "entry's baseline (the reference pipeline; *grid_sample entries: F.grid_sample on the same grid), "
                 "spread = range of the per-round ratios; peak MB = peak RSS increase of one call")
    lines.append(machine_line(c["machine_info"]))
    lines.append(f"torch {c['torch']}, pinned to {c['threads']} threads, {c['cpus']} CPUs ({c['cpu_capability']}), "
                 f"{c['rounds']} rounds of {c['alternations']} (drop-in forward: "
                 f"{c.get('dropin_alternations', c['alternations'])}; informational: {c['info_rounds'][0]} of "
                 f"{c['info_rounds'][1]}), malloc: "
                 f"{c.get('malloc', '?')}, {c.get('huge_pages', '?')}, "
                 f"load average {c.get('load_average_start', ['?'])[0]} -> "
                 f"{c.get('load_average_end', ['?'])[0]}")
    p = report.get("process")
    if p:
        def usage(u):
            return (f"{u['user_s']:.1f} s user, {u['system_s']:.1f} s system, {u['minor_faults']} minor page faults, "
                    f"{u['involuntary_switches']} involuntary context switches")
        lines.append(f"this run: {usage(p)}; of which the timings: {usage(p['timings'])} (the memory phase trims "
                     f"the heap before each call, so its pages fault in afresh by design)")
    lines.append(f"lut_apply uses method '{report['results']['lut_apply'].get('method')}'; "
                 f"lut nnz {report['results']['lut_build'].get('nnz')}, "
                 f"ELL slots {report['results']['lut_build'].get('ell_slots')}")
    lines.append("max |output - reference|:")
    for k, v in report["max_abs_diff"].items():
        lines.append(f"  {k:{width + 4}s} {v:.3e}")
    t = report["targets"]

    def judged(key: str, unit: str) -> str:
        d = t[key]
        return f"{d['ratio']:.3f}{unit} [rounds {d['spread'][0]:.3f}-{d['spread'][1]:.3f}{unit}]"

    ms_bwd = t["dropin_backward_ms"]
    lines.append(f"targets: ({t['rule']})")
    lines.append(f"  gather-scatter pipeline {judged('gather_scatter', 'x')} reference (<= 1.0x): "
                 f"{t['gather_scatter']['verdict']}")
    lines.append(f"  LUT apply {judged('lut', 'x')} faster than reference (>= 30x), max diff "
                 f"{t['lut_apply_max_abs_diff']:.2e} (<= 1e-5): {t['lut']['verdict']}")
    lines.append(f"  drop-in grid_sample {judged('dropin', 'x')} F.grid_sample (<= 1x) on the BEV grid "
                 f"({100 * t['bev_grid_inside_fraction']:.0f} % of points inside the image): "
                 f"{t['dropin']['verdict']}")
    lines.append(f"  drop-in grid_sample backward {judged('dropin_backward', 'x')} F.grid_sample's (<= 2x), "
                 f"{ms_bwd['gather_scatter.grid_sample']:.1f} vs {ms_bwd['F.grid_sample']:.1f} ms: "
                 f"{t['dropin_backward']['verdict']}")
    lines.append(f"  drop-in grid_sample {judged('dropin_in_image', 'x')} F.grid_sample (<= 1x) on a grid entirely "
                 f"inside the image: {t['dropin_in_image']['verdict']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m bevviz.bench [--quick] [--repeats N] [--threads N] [--system-malloc]
    [--out PATH]``."""
    ap = argparse.ArgumentParser(prog="python -m bevviz.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small configuration (smoke test; no verdicts)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved rounds of the targets' groups")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: the CPUs this process may use)")
    ap.add_argument("--system-malloc", action="store_true",
                    help="leave glibc's malloc and torch's page size at their defaults (every large block a "
                         "fresh mapping of 4 KiB pages)")
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"JSON output path (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    default_threads = torch.get_num_threads()
    pin_threads(args.threads)
    kept = False if args.system_malloc else keep_freed_memory()
    report = run_bench(quick=args.quick, repeats=args.repeats, malloc=MALLOC_KEPT if kept else "system default",
                       default_threads=default_threads)
    print(format_report(report))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


def _exec_with_huge_pages(argv: list[str]) -> None:
    """Start the bench afresh with torch's huge-page allocations on (see "Huge pages" in the
    module docstring): torch reads the switch once, at its first allocation, which has
    happened by the time :func:`main` runs. Not with ``--system-malloc``, nor when the
    switch is already set either way."""
    if "--system-malloc" in argv or HUGE_PAGES_ENV in os.environ:
        return
    os.environ[HUGE_PAGES_ENV] = "1"
    os.execv(sys.executable, [sys.executable, "-m", "bevviz.bench", *argv])


if __name__ == "__main__":
    _exec_with_huge_pages(sys.argv[1:])
    sys.exit(main())
