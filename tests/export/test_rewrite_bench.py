"""The rewrite benchmark at toy sizes: every model rewritten, checked and timed against its original."""

from __future__ import annotations

import json

from bevviz.export.rewrite_bench import main


def test_quick_run_reports_parity_and_ratios(tmp_path, capsys):
    assert main(["--quick", "--modes", "--rounds", "1", "--threads", "1", "--out", str(tmp_path / "b.json")]) == 0
    assert "ratio" in capsys.readouterr().out
    out = json.loads((tmp_path / "b.json").read_text())
    assert set(out["models"]) == {"sca", "msda", "sca_nearest_zeros", "sca_bilinear_border",
                                  "sca_bilinear_reflection"}
    for row in out["models"].values():
        assert row["grid_sample_nodes"][1] == 0 and row["grid_sample_nodes"][0] >= 1
        assert row["max_abs_diff"] <= 1e-5 and row["indices_int32"]
        assert row["original_s"] > 0 and row["rewritten_s"] > 0 and row["ratio"]["ratio"] > 0
