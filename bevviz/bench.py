"""Benchmark of the samplers and pipelines: ``python -m bevviz.bench [--quick] [--out PATH]``.

Default configuration (BEVFormer-base-like): the 6-camera nuScenes-like rig, features
64 x 56 x 100 per camera (1600 x 900 images at stride 16), a 200 x 200 BEV grid with 4
pillar points. One run measures, for every entry:

* ``forward_s``: median wall time of a forward call (``torch.no_grad``), after one warm-up;
* ``backward_s``: median wall time of ``out.sum().backward()`` after an untimed forward with
  gradients (features require grad), where the entry is differentiable;
* ``peak_rss_mb``: the peak resident-memory increase of one forward call (and
  ``peak_rss_backward_mb`` of one forward + backward). Method: ``malloc_trim(0)`` returns
  freed heap pages to the OS, ``/proc/self/clear_refs`` (5) resets the kernel's RSS
  high-water mark, then ``VmHWM - VmRSS(before)`` after the call. That counts every page
  the call touched at its peak -- torch's CPU allocator is plain malloc, so this is the real
  working set, including allocator overhead and excluding memory live before the call.
  ``tracemalloc`` would miss torch entirely. Linux only (``null`` elsewhere).

Entries: the pipelines ``reference`` (dense ``F.grid_sample``), ``gather_scatter``,
``deformable_bilinear`` / ``deformable_floor`` (3 x 3 taps, zero offsets) and their dense
``deformable_reference``; ``lut_build``, ``lut_apply_sparse``, ``lut_apply_gather`` (and
``lut_apply``, the faster of the two, which is the table's default) and ``lut_pipeline``
(``bev_features(sampler="lut", lut=table)``, i.e. with key checks); the standalone drop-in
``gather_scatter.grid_sample`` against ``F.grid_sample`` on the reference's own grid
(N_cam, Z * H_bev, W_bev, 2), and (informational, forward only) both on a seeded grid of
the same shape entirely inside the image (``[in-image]``), where the drop-in cannot skip
points that miss the image. Ratios are time / reference time (pipelines) or time /
``F.grid_sample`` time on the same grid (drop-in); ``speedup`` is the inverse. Max abs differences of every
output against its reference are printed and saved. Results go to ``--out`` as JSON.

Targets checked (reported, never asserted): gather-scatter pipeline <= 1.0x the reference;
LUT apply >= 30x faster than the reference with output equal to 1e-5; drop-in within 2x of
``F.grid_sample``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bevviz.aggregation import bev_geometry, point_weights
from bevviz.bev_grid import BEVGrid
from bevviz.pipeline import bev_features
from bevviz.samplers import BEV_VARIANTS, SamplerVariant
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.deformable import DeformableConfig, deformable_bev_reference
from bevviz.samplers.lut import build_lut
from bevviz.synthetic import nuscenes_like_rig

DEFAULT_OUT = "bench_results/bench.json"
CONFIGS = {
    "default": dict(channels=64, feature_size=(56, 100), grid=dict(resolution=0.512), repeats=5, build_repeats=3),
    "quick": dict(channels=8, feature_size=(28, 50), grid=dict(resolution=4.096), repeats=2, build_repeats=1),
}
TARGETS = {"gather_scatter_max_ratio": 1.0, "lut_min_speedup": 30.0, "lut_max_abs_diff": 1e-5,
           "dropin_max_ratio": 2.0}


# --------------------------------------------------------------------------- measurement

def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # pragma: no cover - not glibc
        return None


_LIBC = _libc()


def _status_kb(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:  # pragma: no cover - not Linux
        return None
    m = re.search(field + r":\s+(\d+) kB", text)
    return int(m.group(1)) if m else None


def peak_rss_mb(fn: Callable[[], object]) -> float | None:
    """Peak resident-memory increase (MiB) while ``fn()`` runs; see the module docstring."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    before = _status_kb("VmRSS")
    result = fn()
    peak = _status_kb("VmHWM")
    del result
    if before is None or peak is None:
        return None
    return max(0.0, (peak - before) / 1024.0)


def backward_once(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Wall time of the backward part of ``forward(x).sum().backward()`` (forward untimed)."""
    xr = x.detach().clone().requires_grad_(True)
    loss = forward(xr).sum()
    t = time.perf_counter()
    loss.backward()
    return time.perf_counter() - t


def _fwd_bwd_peak(forward, x):
    def run():
        xr = x.detach().clone().requires_grad_(True)
        forward(xr).sum().backward()
        return xr.grad
    return peak_rss_mb(run)


# --------------------------------------------------------------------------- benchmark

def run_bench(quick: bool = False, repeats: int | None = None, log=print) -> dict:
    """Run every measurement once (see the module docstring).

    Timed calls go round-robin over the entries (one call of each entry per round), so a
    burst of load from other processes hits all entries alike instead of skewing a ratio.

    Args:
        quick: Small configuration (C=8, 28 x 50 features, 25 x 25 BEV) for smoke tests.
        repeats: Timed repeats per entry (default 5, quick 2).
        log: Progress printer.

    Returns:
        JSON-ready dict with ``config``, ``results`` (name -> timings/memory/ratios),
        ``max_abs_diff``, ``targets``.
    """
    cfg = dict(CONFIGS["quick" if quick else "default"])
    reps = int(repeats or cfg["repeats"])
    build_reps = min(reps, cfg["build_repeats"])
    rig = nuscenes_like_rig()
    grid = BEVGrid(**cfg["grid"])
    hf, wf = cfg["feature_size"]
    C = cfg["channels"]
    feats = torch.randn(len(rig), C, hf, wf, generator=torch.Generator().manual_seed(0))
    H, W = grid.shape
    config = {
        "quick": quick, "cameras": len(rig), "channels": C, "feature_size": [hf, wf],
        "bev": [H, W], "pillar_points": grid.num_z, "repeats": reps, "dtype": "float32",
        "torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()), "machine": platform.machine(),
        "python": platform.python_version(),
    }
    try:
        config["load_average_start"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    log(f"bevviz bench: {len(rig)} cameras, features {C} x {hf} x {wf}, BEV {H} x {W} x {grid.num_z} "
        f"points, float32, {reps} repeats, torch {torch.__version__} on {config['threads']} threads")

    table = build_lut(rig, grid, (hf, wf))
    g = bev_geometry(rig, grid).grid.to(torch.float32).reshape(len(rig), grid.num_z * H, W, 2)
    g_in = torch.rand(g.shape, generator=torch.Generator().manual_seed(1)) * 2 - 1
    bil = DeformableConfig(kernel_size=3, rounding="bilinear")

    def pipe(variant: SamplerVariant) -> Callable:
        kw: dict = {"lut": table} if variant.sampler == "lut" else {}
        if variant.rounding is not None:
            kw["deformable"] = DeformableConfig(kernel_size=3, rounding=variant.rounding)
        return lambda f: bev_features(f, rig, grid, variant.sampler, **kw).features

    def deformable_dense(f):
        geom = bev_geometry(rig, grid)
        w, _, _ = point_weights(geom.valid)
        return deformable_bev_reference(f, geom.grid, w, bil)

    # name -> (forward, differentiable, timed repeats)
    # The pipeline variants (the registry the pages show), the LUT's last, next to its parts.
    variants = {v.key: (pipe(v), True, reps) for v in BEV_VARIANTS}
    lut_pipeline = {k: variants.pop(k) for k in [v.key for v in BEV_VARIANTS if v.sampler == "lut"]}
    entries: dict[str, tuple[Callable, bool, int]] = {
        **variants,
        "deformable_reference": (deformable_dense, True, reps),
        "lut_build": (lambda f: build_lut(rig, grid, (hf, wf)), False, build_reps),
        "lut_apply_sparse": (lambda f: table.apply(f, method="sparse"), True, reps),
        "lut_apply_gather": (lambda f: table.apply(f, method="gather"), True, reps),
        **lut_pipeline,
        "F.grid_sample": (lambda f: torch.nn.functional.grid_sample(f, g, align_corners=False), True, reps),
        "gather_scatter.grid_sample": (lambda f: gs.grid_sample(f, g, align_corners=False), True, reps),
        # Informational: a grid of the same shape entirely inside the image (no target).
        "F.grid_sample[in-image]": (
            lambda f: torch.nn.functional.grid_sample(f, g_in, align_corners=False), False, reps),
        "gather_scatter.grid_sample[in-image]": (
            lambda f: gs.grid_sample(f, g_in, align_corners=False), False, reps),
    }
    outputs: dict[str, object] = {}
    fwd = {name: [] for name in entries}
    bwd = {name: [] for name, e in entries.items() if e[1]}
    with torch.no_grad():
        log("  warm-up and outputs ...")
        for name, (fn, _, _) in entries.items():
            outputs[name] = fn(feats)
        log("  forward timings (round-robin) ...")
        for r in range(reps):
            for name, (fn, _, n) in entries.items():
                if r < n:
                    t = time.perf_counter()
                    fn(feats)
                    fwd[name].append(time.perf_counter() - t)
    log("  backward timings (round-robin) ...")
    for r in range(reps + 1):  # round 0 is a warm-up
        for name in bwd:
            t = backward_once(entries[name][0], feats)
            if r:
                bwd[name].append(t)
    log("  peak memory ...")
    results: dict[str, dict] = {}
    for name, (fn, diff, _) in entries.items():
        with torch.no_grad():
            mem = peak_rss_mb(lambda fn=fn: fn(feats))
        res = {"forward_s": statistics.median(fwd[name]), "forward_min_s": min(fwd[name]),
               "forward_times_s": fwd[name], "peak_rss_mb": mem}
        if diff:
            res.update(backward_s=statistics.median(bwd[name]), backward_min_s=min(bwd[name]),
                       backward_times_s=bwd[name], peak_rss_backward_mb=_fwd_bwd_peak(fn, feats))
        results[name] = res
    results["lut_build"].update(nnz=table.nnz, ell_slots=int(table.ell[0].shape[1]))
    best = min(("sparse", "gather"), key=lambda m: results[f"lut_apply_{m}"]["forward_s"])
    results["lut_apply"] = dict(results[f"lut_apply_{best}"], method=best)

    ref = outputs["reference"]
    d_ref = outputs["deformable_reference"]
    diffs = {
        "gather_scatter": float((outputs["gather_scatter"] - ref).abs().max()),
        "deformable_bilinear": float((outputs["deformable_bilinear"] - d_ref).abs().max()),
        "deformable_floor": float((outputs["deformable_floor"] - d_ref).abs().max()),
        "deformable_floor_mean": float((outputs["deformable_floor"] - d_ref).abs().mean()),
        "deformable_floor_relative_rms": float(((outputs["deformable_floor"] - d_ref).pow(2).mean()
                                                / d_ref.pow(2).mean().clamp(min=1e-30)).sqrt()),
        "lut_apply_sparse": float((outputs["lut_apply_sparse"] - ref).abs().max()),
        "lut_apply_gather": float((outputs["lut_apply_gather"] - ref).abs().max()),
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

    ref_t = results["reference"]
    for name, res in results.items():
        if "grid_sample" in name:  # drop-in entries: against F.grid_sample on the same grid
            base = results["F.grid_sample" + name.split("grid_sample", 1)[1]]
        else:
            base = ref_t
        res["ratio"] = res["forward_s"] / base["forward_s"]
        res["speedup"] = base["forward_s"] / res["forward_s"]
        res["ratio_of_min"] = res["forward_min_s"] / base["forward_min_s"]
        if "backward_s" in res and "backward_s" in base:
            res["backward_ratio"] = res["backward_s"] / base["backward_s"]
    targets = {
        "gather_scatter_ratio": results["gather_scatter"]["ratio"],
        "gather_scatter_ok": results["gather_scatter"]["ratio"] <= TARGETS["gather_scatter_max_ratio"],
        "lut_apply_speedup": results["lut_apply"]["speedup"],
        "lut_apply_max_abs_diff": diffs["lut_apply"],
        "lut_ok": (results["lut_apply"]["speedup"] >= TARGETS["lut_min_speedup"]
                   and diffs["lut_apply"] <= TARGETS["lut_max_abs_diff"]),
        "dropin_ratio": results["gather_scatter.grid_sample"]["ratio"],
        "dropin_ok": results["gather_scatter.grid_sample"]["ratio"] <= TARGETS["dropin_max_ratio"],
        "dropin_in_image_ratio": results["gather_scatter.grid_sample[in-image]"]["ratio"],
        "bev_grid_inside_fraction": float((g.abs() <= 1).all(-1).float().mean()),
        "thresholds": TARGETS,
    }
    try:
        config["load_average_end"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    return {"config": config, "results": results, "max_abs_diff": diffs, "targets": targets}


def format_report(report: dict) -> str:
    """Human-readable table of a :func:`run_bench` report."""
    lines = []
    width = max(28, *(len(name) for name in report["results"]))
    hdr = (f"{'entry':{width}s} {'fwd ms':>9s} {'min ms':>9s} {'ratio':>7s} {'speedup':>8s} {'bwd ms':>9s} "
           f"{'bwd ratio':>9s} {'peak MB':>8s} {'bwd MB':>8s}")
    lines += [hdr, "-" * len(hdr)]

    def fmt(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else f"{'-':>{spec.split('.')[0]}}"

    for name, r in report["results"].items():
        lines.append(
            f"{name:{width}s} {fmt(r['forward_s'] * 1e3, '9.2f')} {fmt(r['forward_min_s'] * 1e3, '9.2f')} "
            f"{fmt(r.get('ratio'), '7.3f')} "
            f"{fmt(r.get('speedup'), '8.2f')} {fmt(r['backward_s'] * 1e3 if 'backward_s' in r else None, '9.2f')} "
            f"{fmt(r.get('backward_ratio'), '9.3f')} {fmt(r.get('peak_rss_mb'), '8.1f')} "
            f"{fmt(r.get('peak_rss_backward_mb'), '8.1f')}")
    lines.append("")
    c = report["config"]
    lines.append("median forward/backward times; ratios = median / median of the reference (dense grid_sample "
                 "pipeline), *grid_sample entries / F.grid_sample; peak MB = peak RSS increase of one call")
    lines.append(f"torch {c['torch']}, {c['threads']} threads, {c['cpus']} CPUs ({c['cpu_capability']}), "
                 f"load average {c.get('load_average_start', ['?'])[0]} -> {c.get('load_average_end', ['?'])[0]}")
    lines.append(f"lut_apply uses method '{report['results']['lut_apply'].get('method')}'; "
                 f"lut nnz {report['results']['lut_build'].get('nnz')}, "
                 f"ELL slots {report['results']['lut_build'].get('ell_slots')}")
    lines.append("max |output - reference|:")
    for k, v in report["max_abs_diff"].items():
        lines.append(f"  {k:{width + 4}s} {v:.3e}")
    t = report["targets"]
    lines.append("targets:")
    lines.append(f"  gather-scatter pipeline {t['gather_scatter_ratio']:.3f}x reference (<= 1.0x): "
                 f"{'PASS' if t['gather_scatter_ok'] else 'FAIL'}")
    lines.append(f"  LUT apply {t['lut_apply_speedup']:.1f}x faster than reference (>= 30x), max diff "
                 f"{t['lut_apply_max_abs_diff']:.2e} (<= 1e-5): {'PASS' if t['lut_ok'] else 'FAIL'}")
    lines.append(f"  drop-in grid_sample {t['dropin_ratio']:.3f}x F.grid_sample (<= 2x) on the BEV grid "
                 f"({100 * t['bev_grid_inside_fraction']:.0f} % of points inside the image): "
                 f"{'PASS' if t['dropin_ok'] else 'FAIL'}")
    lines.append(f"  (informational, no target) drop-in on a grid entirely inside the image: "
                 f"{t['dropin_in_image_ratio']:.3f}x F.grid_sample")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m bevviz.bench [--quick] [--repeats N] [--threads N] [--out PATH]``."""
    ap = argparse.ArgumentParser(prog="python -m bevviz.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small configuration (smoke test)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per entry")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"JSON output path (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    report = run_bench(quick=args.quick, repeats=args.repeats)
    print(format_report(report))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
