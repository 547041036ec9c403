"""The rewrite benchmark at toy sizes: original, per-node and fused, each in a fresh process."""

from __future__ import annotations

import json

from bevviz.export.rewrite_bench import TARGETS, main, verdicts


def test_quick_run_reports_latency_memory_and_parity_per_variant(tmp_path, capsys):
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    assert main(["--quick", "--rounds", "1", "--runs", "1", "--threads", "1", "--out", str(out_json),
                 "--markdown", str(out_md)]) == 0
    printed = capsys.readouterr().out
    assert "VmHWM" in printed and "targets of issue 40 (quick" in printed
    assert printed.count(" target: latency ") == 4  # per-node and fused of both models
    out = json.loads(out_json.read_text())
    assert set(out["models"]) == {"sca", "msda"}
    for row in out["models"].values():
        v = row["variants"]
        assert set(v) == {"original", "per-node", "fused"}
        assert v["original"]["latency_ratio"] == 1.0 and v["original"]["vmhwm_ratio"] == 1.0
        assert v["per-node"]["forms"] == ["per-node"]
        assert all(f.startswith("fused: ") for f in v["fused"]["forms"])
        for name in ("per-node", "fused"):
            assert v[name]["grid_sample"][1] == 0 and v[name]["indices_int32"]
            assert v[name]["max_abs_diff"] <= 1e-5
            # a fresh light process: its peak is onnxruntime's and the inputs', far from a torch parent's
            assert 0 < v[name]["before_session_mib"] <= v[name]["vmhwm_mib"] < 1024
        assert set(row["targets"]) == {"per-node", "fused"}
        assert row["targets"]["per-node"]["vmhwm_ratio"]["met"] == (v["per-node"]["vmhwm_ratio"] <= 2.0)
    misses = sum(not c["met"] for row in out["models"].values() for checks in row["targets"].values()
                 for c in checks.values())
    assert len(out["targets_missed"]) == misses
    table = out_md.read_text()
    assert table.count("\n") == 2 + 6 and "| quick | msda | fused |" in table


def test_verdicts_compare_each_ratio_with_the_issue_targets():
    row = {"variants": {"original": {"latency_ratio": 1.0, "vmhwm_ratio": 1.0},
                        "per-node": {"latency_ratio": 1.5, "vmhwm_ratio": 2.03},
                        "fused": {"latency_ratio": 1.21, "vmhwm_ratio": 0.3}}}
    got = verdicts(row)
    assert got["per-node"]["latency_ratio"] == {"ratio": 1.5, "limit": TARGETS["per-node"]["latency_ratio"],
                                                "met": True}
    assert not got["per-node"]["vmhwm_ratio"]["met"] and not got["fused"]["latency_ratio"]["met"]
    assert got["fused"]["vmhwm_ratio"]["met"] and "original" not in got
