"""Tests of bevviz.bench: the quick configuration runs end to end and reports every entry.

Timings are printed and saved by the benchmark, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_bench_quick_runs_and_writes_json(tmp_path):
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "bevviz.bench", "--quick", "--threads", "1", "--repeats", "1", "--out", str(out)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "targets:" in proc.stdout and "max |output - reference|" in proc.stdout
    report = json.loads(out.read_text())
    expected = {"reference", "gather_scatter", "deformable_bilinear", "deformable_floor", "deformable_reference",
                "lut_build", "lut_apply_sparse", "lut_apply_gather", "lut_apply", "lut_pipeline",
                "F.grid_sample", "gather_scatter.grid_sample", "F.grid_sample[in-image]",
                "gather_scatter.grid_sample[in-image]"}
    assert expected <= set(report["results"])
    for name, res in report["results"].items():
        assert res["forward_s"] > 0 and res["ratio"] > 0, name
    for name in ("reference", "gather_scatter", "deformable_bilinear", "deformable_floor"):
        assert report["results"][name]["backward_s"] > 0
    diffs = report["max_abs_diff"]
    for name in ("gather_scatter", "deformable_bilinear", "lut_apply", "lut_pipeline", "gather_scatter.grid_sample",
                 "gather_scatter.grid_sample[in-image]"):
        assert diffs[name] < 1e-5, name
    assert diffs["deformable_floor"] > 1e-3
    assert report["config"]["quick"] is True and report["config"]["threads"] == 1
    targets = report["targets"]
    assert {"gather_scatter_ok", "lut_ok", "dropin_ok", "dropin_in_image_ratio"} <= set(targets)
    assert 0 < targets["bev_grid_inside_fraction"] < 1
    # Each drop-in ratio is against F.grid_sample on its own grid.
    results = report["results"]
    for suffix in ("", "[in-image]"):
        ratio = (results["gather_scatter.grid_sample" + suffix]["forward_s"]
                 / results["F.grid_sample" + suffix]["forward_s"])
        assert abs(results["gather_scatter.grid_sample" + suffix]["ratio"] - ratio) < 1e-12
