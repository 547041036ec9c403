"""One call for the whole NPU check of a sampler: export, inspect, rules, parity.

Used by the NPU export page (which reports progress through ``on_step``) and by tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import field_error
from bevviz.errors import InputError
from bevviz.export.exporter import ExportError, ExportResult, export_with
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS, OpReport, inspect_onnx
from bevviz.export.models import ExportSettings
from bevviz.export.parity import ParityResult, check_parity
from bevviz.export.rules import Rule, RuleResult, evaluate_rules

#: The steps :func:`run_export` reports, in order.
STEPS = ("export", "inspect", "rules", "parity")


@dataclass
class ExportOutcome:
    """Everything the NPU check found for one sampler.

    Attributes:
        settings: The settings used.
        result: The export, or None when it failed.
        report: The op inventory, or None.
        rules: Rule results (on the settings alone when the export failed).
        parity: onnxruntime vs torch, or None.
        error: The failure message (names the field and value), or None.
    """

    settings: ExportSettings
    result: ExportResult | None = None
    report: OpReport | None = None
    rules: list[RuleResult] = field(default_factory=list)
    parity: ParityResult | None = None
    error: str | None = None

    @property
    def sampler(self) -> str:
        """Sampler name."""
        return self.settings.sampler

    def rule_counts(self) -> dict[str, int]:
        """Failing rules by severity (``error``, ``warn``, ``info``) plus ``pass``."""
        out = {"pass": 0, "error": 0, "warn": 0, "info": 0}
        for r in self.rules:
            if r.passed:
                out["pass"] += 1
            elif r.failed:
                out[r.rule.severity] += 1
        return out

    def summary(self) -> dict[str, Any]:
        """One flat row for a comparison table."""
        row: dict[str, Any] = {"sampler": self.sampler, "opset": self.settings.opset}
        if self.result is not None:
            row["opset"] = self.result.opset
            row["export (s)"] = round(self.result.seconds, 2)
        rep = self.report
        if rep is not None:
            row.update({
                "nodes": rep.num_nodes,
                "GridSample": rep.op_counts.get("GridSample", 0),
                "gather index": "/".join(rep.index_dtypes(GATHER_OPS)) or "—",
                "scatter index": "/".join(rep.index_dtypes(SCATTER_OPS)) or "—",
                "casts → index": rep.casts_into_index,
                "dynamic-shape ops": ", ".join(f"{k}×{v}" for k, v in rep.dynamic_ops.items()) or "none",
                "dynamic inputs": ", ".join(f"{n}[{','.join(str(a) for a in ax)}]"
                                            for n, ax in rep.dynamic_dims.items()
                                            if n in {t.name for t in rep.inputs}) or "none",
            })
        if self.parity is not None:
            row.update({"max |diff|": self.parity.max_abs_diff, "parity": "ok" if self.parity.ok else "FAIL",
                        "torch (ms)": self.parity.torch_ms, "onnxruntime (ms)": self.parity.ort_ms})
        counts = self.rule_counts()
        row["rules failed"] = f"{counts['error']} error / {counts['warn']} warn"
        if self.error:
            row["error"] = self.error
        return row


def run_export(settings: ExportSettings, path: str | os.PathLike, *, rig: Rig | None = None,
               bev_grid: BEVGrid | None = None, features: torch.Tensor | None = None,
               rules: list[Rule] | None = None, runs: int = 5,
               on_step: Callable[[str, int], None] | None = None) -> ExportOutcome:
    """Export, inspect, check the rules and run parity for one sampler; never raises on a
    failed export (the outcome carries the message).

    Args:
        settings: Sampler and export settings.
        path: Output ``.onnx`` path.
        rig: The rig; default the nuScenes-like sample rig.
        bev_grid: The BEV grid; default :func:`bevviz.export.models.default_bev_grid`.
        features: Feature maps, shape (N_cam, C, H_f, W_f), or None for seeded random ones.
        rules: Rules to evaluate; default the shipped table.
        runs: Timed runs for the latency medians.
        on_step: Called as ``on_step(step, index)`` before each of :data:`STEPS`.

    Returns:
        An :class:`ExportOutcome`.

    Raises:
        InputError: only for a bad ``settings`` object (not an :class:`ExportSettings`).
    """
    if not isinstance(settings, ExportSettings):
        raise field_error("settings", type(settings).__name__, "must be an ExportSettings")
    step = on_step or (lambda name, i: None)
    out = ExportOutcome(settings)
    facts = settings.facts()
    try:
        step("export", 0)
        out.result = export_with(settings, path, rig=rig, bev_grid=bev_grid, features=features)
        facts = out.result.facts()
        step("inspect", 1)
        out.report = inspect_onnx(out.result.path)
    except (InputError, ExportError) as exc:  # bad settings or a failed export: the message names the field
        out.error = str(exc)
    except Exception as exc:  # anything else from a sampler's code: a message, never a crash
        out.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
    step("rules", 2)
    out.rules = evaluate_rules(facts, out.report, rules)
    if out.result is not None:
        step("parity", 3)
        try:
            out.parity = check_parity(out.result, runs=runs)
        except Exception as exc:  # onnxruntime refuses the model: report, do not crash
            out.error = f"onnxruntime could not run the model: {type(exc).__name__}: {str(exc)[:400]}"
    return out

