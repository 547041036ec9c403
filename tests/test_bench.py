"""Tests of bevviz.bench: the quick configuration runs end to end and reports every entry.

Timings are printed and saved by the benchmark, never asserted here; neither are verdicts
(the quick run has none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bevviz import bench, timing


def test_bench_quick_runs_and_writes_json(tmp_path):
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(timing.HUGE_PAGES_ENV, None)  # the bench starts itself afresh with it set
    proc = subprocess.run(
        [sys.executable, "-m", "bevviz.bench", "--quick", "--threads", "1", "--repeats", "1", "--out", str(out)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "targets:" in proc.stdout and "max |output - reference|" in proc.stdout
    report = json.loads(out.read_text())
    assert report["config"]["huge_pages"].startswith("torch THP allocations on (kernel: ")
    expected = {"reference", "gather_scatter", "deformable_bilinear", "deformable_floor", "deformable_reference",
                "lut_build", "lut_apply_bag", "lut_apply_sparse", "lut_apply_gather", "lut_apply", "lut_pipeline",
                "F.grid_sample", "gather_scatter.grid_sample", "F.grid_sample[in-image]",
                "gather_scatter.grid_sample[in-image]"}
    assert expected <= set(report["results"])
    for name, res in report["results"].items():
        assert 0 < res["forward_min_s"] <= res["forward_s"] <= res["forward_max_s"], name
        assert res["ratio"] > 0, name
    for name in ("reference", "gather_scatter", "deformable_bilinear", "deformable_floor"):
        assert report["results"][name]["backward_s"] > 0
    diffs = report["max_abs_diff"]
    for name in ("gather_scatter", "deformable_bilinear", "lut_apply", "lut_pipeline", "gather_scatter.grid_sample",
                 "gather_scatter.grid_sample[in-image]"):
        assert diffs[name] < 1e-5, name
    assert diffs["deformable_floor"] > 1e-3
    assert report["config"]["quick"] is True and report["config"]["threads"] == 1
    assert report["config"]["dropin_alternations"] == bench.CONFIGS["quick"]["dropin_alternations"]
    assert bench.CONFIGS["default"]["dropin_alternations"] >= bench.CONFIGS["default"]["alternations"]
    targets = report["targets"]
    assert {"gather_scatter_ok", "lut_ok", "dropin_ok", "dropin_in_image_ok", "dropin_backward_ok",
            "dropin_in_image_ratio"} <= set(targets)
    assert 0 < targets["bev_grid_inside_fraction"] < 1
    # Toy sizes judge nothing: every verdict is "n/a (quick)", in the JSON and the report.
    for key in ("gather_scatter", "lut", "dropin", "dropin_in_image", "dropin_backward"):
        assert targets[f"{key}_ok"] is None and targets[key]["verdict"] == "n/a (quick)"
        low, high = targets[key]["spread"]
        assert 0 < low <= high
    assert "PASS" not in proc.stdout and "FAIL" not in proc.stdout
    assert proc.stdout.count("n/a (quick)") == 5
    # The machine a ratio was measured on, as found, in the JSON and (twice) in the report.
    machine = report["config"]["machine_info"]
    assert machine["threads"] == 1 and machine["interop_threads"] >= 1 and machine["torch"]
    assert machine["cpu_capability"] == report["config"]["cpu_capability"]
    assert set(machine["isa"]) <= set(timing.ISA_FLAGS)
    assert proc.stdout.count(timing.machine_line(machine)) == 2
    # Each drop-in ratio is the ratio of minima against F.grid_sample on its own grid, with
    # the per-round spread around it.
    results = report["results"]
    for suffix in ("", "[in-image]"):
        mine, base = results["gather_scatter.grid_sample" + suffix], results["F.grid_sample" + suffix]
        assert abs(mine["ratio"] - mine["forward_min_s"] / base["forward_min_s"]) < 1e-12
        assert mine["forward_baseline"] == "F.grid_sample" + suffix
        low, high = mine["ratio_spread"]
        assert 0 < low <= high
    assert results["gather_scatter.grid_sample"]["backward_baseline"] == "F.grid_sample"
    assert set(report["pairs"]["gather_scatter.grid_sample"]) == {"forward", "backward"}
    assert report["process"]["user_s"] > 0 and report["process"]["minor_faults"] >= 0


def test_pair_stats_and_verdicts_need_the_whole_spread():
    def member(samples):  # one sample per round
        return {"samples": samples, "round_min": samples}

    stats = timing.PairStats.of(member([1.0, 1.2, 1.9]), member([1.0, 1.0, 1.0]))
    assert stats.ratio == 1.0 and stats.spread == (1.0, 1.9) and stats.median == 1.2
    assert bench.verdict(stats, 2.0, "max", quick=False) == ("PASS", True)
    assert bench.verdict(stats, 1.5, "max", quick=False) == ("FAIL", False)  # ratio fine, spread not
    assert bench.verdict(stats, 2.0, "max", quick=False, extra_ok=False) == ("FAIL", False)
    assert bench.verdict(stats, 2.0, "max", quick=True) == ("n/a (quick)", None)
    # minima 0.9 / 0.02 = 45x; rounds 1.0 / 0.02 = 50x and 0.9 / 0.03 = 30x
    speedup = timing.PairStats.of(member([0.02, 0.03]), member([1.0, 0.9])).inverse()
    assert speedup.ratio == pytest.approx(45) and speedup.spread == pytest.approx((30, 50))
    assert bench.verdict(speedup, 30.0, "min", quick=False) == ("PASS", True)
    assert bench.verdict(speedup, 31.0, "min", quick=False) == ("FAIL", False)
