"""Any user's ONNX model against the backend rules table: which nodes fail which backend, and why.

The rules (``bevviz/backend_rules.json``, :mod:`bevviz.export.rules`) read flat facts. For a
user's model the facts come from the model itself: its op inventory, index dtypes, casts,
dynamic ops and axes (:func:`bevviz.export.inspect_onnx`), and, for the rules about
GridSample, the settings of each GridSample node (mode, padding, align_corners, C, dtype,
feature size, element counts where shapes are static). So a GridSample rule is evaluated
once per GridSample node, and rows that come out the same for several nodes are merged.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx

from bevviz.checks import field_error
from bevviz.export.inspection import OpReport, dtype_name, inspect_onnx, tensor_types
from bevviz.export.model_validate import onnxruntime_refusal, validate_model
from bevviz.export.onnx_file import LoadedModel, as_loaded, walk_graphs
from bevviz.export.rules import Rule, RuleResult, evaluate_rule, load_rules, rule_facts

__all__ = ["CheckRow", "ModelCheck", "backend_verdicts", "backends", "check_model", "grid_sample_nodes"]

_MODES = {"linear": "bilinear", "cubic": "bicubic"}


@dataclass(frozen=True)
class CheckRow:
    """A rule's result, and the GridSample nodes it was evaluated on (empty: the whole model)."""

    result: RuleResult
    nodes: tuple[str, ...] = ()

    def as_row(self) -> dict:
        """Flat dict for a table (the rule's row plus ``nodes``)."""
        return {**self.result.as_row(), "nodes": ", ".join(self.nodes)}


@dataclass
class ModelCheck:
    """What :func:`check_model` found.

    Attributes:
        name: The model's name.
        report: Its op inventory (:class:`~bevviz.export.inspection.OpReport`).
        grid_samples: One dict of settings per GridSample node (``node``, ``mode``, ...).
        rows: Rule results (``n/a`` ones included), merged over nodes.
        backends: The backend filter used (empty: all).
        onnxruntime_refusal: What onnxruntime (CPU) said when it refused to load the model,
            or None when it loads it.
    """

    name: str
    report: OpReport
    grid_samples: list[dict[str, Any]]
    rows: list[CheckRow]
    backends: tuple[str, ...] = field(default_factory=tuple)
    onnxruntime_refusal: str | None = None

    def failed(self, severities: Sequence[str] = ("error", "warn")) -> list[CheckRow]:
        """Rows that fail with one of ``severities``."""
        return [r for r in self.rows if r.result.failed and r.result.rule.severity in severities]

    def to_dict(self) -> dict:
        """JSON-ready form (``bevviz npu check --json``)."""
        return {"model": self.name, "backends": list(self.backends), "summary": self.report.summary(),
                "onnxruntime_refusal": self.onnxruntime_refusal,
                "grid_sample_nodes": self.grid_samples, "index_uses": self.report.index_rows(),
                "rules": [r.as_row() for r in self.rows]}


def _numel(shape) -> int | None:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def grid_sample_nodes(model: onnx.ModelProto, types: dict | None = None) -> list[dict[str, Any]]:
    """Settings of every GridSample node, as rule facts.

    Args:
        model: The model.
        types: ``tensor_types(model)`` if already computed.

    Returns:
        One dict per node: ``node``, ``mode`` (opset-16 name), ``padding_mode``,
        ``align_corners``, ``dtype``, ``rank``, and where the shapes are static ``channels``,
        ``feature_height``, ``feature_width``, ``input_numel``, ``output_numel``; plus
        ``features`` and ``grid`` (the shapes, symbols as ``str``).
    """
    types = tensor_types(model) if types is None else types
    out, k = [], 0
    for g in walk_graphs(model.graph):
        for node in g.node:
            if node.op_type != "GridSample":
                continue
            k += 1
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            text = {n: (v.decode() if isinstance(v, bytes) else v) for n, v in attrs.items()}
            mode = str(text.get("mode", "bilinear"))
            x_type, x_shape = types.get(node.input[0], (0, None))
            y_shape = types.get(node.output[0], (0, None))[1]
            facts: dict[str, Any] = {
                "node": node.name or f"GridSample#{k}", "mode": _MODES.get(mode, mode),
                "padding_mode": str(text.get("padding_mode", "zeros")),
                "align_corners": bool(int(text.get("align_corners", 0))), "dtype": dtype_name(x_type),
                "rank": len(x_shape) if x_shape is not None else None,
                "features": list(x_shape) if x_shape is not None else None,
                "grid": list(types.get(node.input[1], (0, None))[1] or []) or None,
            }
            if x_shape is not None and len(x_shape) == 4:
                for name, d in zip(("channels", "feature_height", "feature_width"), x_shape[1:]):
                    if isinstance(d, int):
                        facts[name] = d
            for name, shape in (("input_numel", x_shape), ("output_numel", y_shape)):
                if _numel(shape) is not None:
                    facts[name] = _numel(shape)
            out.append(facts)
    return out


def backends(rules: Sequence[Rule] | None = None) -> list[str]:
    """The backends the rules table names, in table order."""
    return list(dict.fromkeys(r.backend for r in (load_rules() if rules is None else rules)))


def _pick(rules: list[Rule], wanted: Sequence[str]) -> list[Rule]:
    if not wanted:
        return rules
    keep = [r for r in rules if any(w.lower() in r.backend.lower() for w in wanted)]
    if not keep:
        raise field_error("backend", list(wanted), f"matches no backend of the rules table; known: {backends(rules)}")
    return keep


def check_model(src: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel, *, backend: Sequence[str] = (),
                rules: Sequence[Rule] | None = None) -> ModelCheck:
    """Evaluate the rules table on any ONNX model.

    Args:
        src: The model (path, bytes, ``ModelProto`` or ``LoadedModel``), read within the
            bounds of :mod:`bevviz.export.onnx_file` (a model ``onnx.checker`` rejects is
            checked, and fails the ``onnx-model-valid`` rule; one onnxruntime refuses to load
            fails ``onnxruntime-loads``, its words in :attr:`ModelCheck.onnxruntime_refusal`).
        backend: Keep only rules whose backend contains one of these (case-insensitive),
            e.g. ``["CANN", "DrivingSDK"]``; empty: all rules.
        rules: The table (default :func:`bevviz.export.load_rules`).

    Returns:
        A :class:`ModelCheck`.

    Raises:
        InputError: a hostile source, a model that breaks its opset's rules
            (:func:`bevviz.export.model_validate.validate_model`: mode names of another opset,
            duplicate node names, a GridSample dtype or rank its opset does not allow), or a
            ``backend`` that matches no rule.
    """
    loaded = as_loaded(src, validate=False)
    chosen = _pick(list(load_rules() if rules is None else rules), list(backend))
    model = loaded.model
    types = tensor_types(model)
    validate_model(model, loaded.name, types=types)
    report = inspect_onnx(loaded)
    nodes = grid_sample_nodes(model, types)
    refusal = onnxruntime_refusal(model)
    floats = Counter(t.dtype for t in report.inputs if t.dtype.startswith(("float", "bfloat")))
    base = {"sampler": "onnx model", "dtype": floats.most_common(1)[0][0] if floats else "unknown",
            "onnxruntime_loads": refusal is None}
    scopes = [(n["node"], {**base, **{k: v for k, v in n.items() if k not in ("node", "features", "grid")}})
              for n in nodes] or [("", base)]
    rows: list[CheckRow] = []
    for rule in chosen:
        merged: dict[tuple[str, str], list[str]] = {}
        for name, settings in scopes:
            res = evaluate_rule(rule, rule_facts(settings, report))
            merged.setdefault((res.status, res.reason), []).append(name)
        for (status, reason), names in merged.items():
            scoped = tuple(n for n in names if n) if nodes and _about_grid_sample(rule) else ()
            rows.append(CheckRow(RuleResult(rule, status, reason), scoped))
    return ModelCheck(name=loaded.name, report=report, grid_samples=nodes, rows=rows, backends=tuple(backend),
                      onnxruntime_refusal=refusal)


def backend_verdicts(model: onnx.ModelProto, backend: str, report: OpReport,
                     severities: Sequence[str] = ("error", "warn")) -> dict[str, tuple[bool, str]]:
    """Whether one backend's rules reject each GridSample node, and why.

    Args:
        model: The model.
        backend: A backend name of the rules table (matched as ``check_model``'s ``backend``).
        report: ``inspect_onnx(model)``.
        severities: Failing rules of these severities reject a node.

    Returns:
        Node label -> ``(rejected, why)``: the failing rules' reasons, or the rules that
        accept it (or that none of the backend's rules is about GridSample).

    Raises:
        InputError: a ``backend`` that matches no rule.
    """
    chosen = [r for r in _pick(list(load_rules()), [backend])
              if _about_grid_sample(r) or any(c.field == "grid_sample_used" for c in r.when)]
    out = {}
    base = {"sampler": "onnx model"}
    for facts in grid_sample_nodes(model):
        settings = {**base, **{k: v for k, v in facts.items() if k not in ("node", "features", "grid")}}
        results = [evaluate_rule(rule, rule_facts(settings, report)) for rule in chosen]
        failed = [r for r in results if r.failed and r.rule.severity in severities]
        if failed:
            out[facts["node"]] = (True, "; ".join(f"{r.rule.id}: {r.reason}" for r in failed))
        else:
            passed = [r.rule.id for r in results if r.passed]
            out[facts["node"]] = (False, f"{backend} runs it: " + (", ".join(passed) + " pass" if passed else
                                                                   "none of its rules is about this GridSample"))
    return out


def _about_grid_sample(rule: Rule) -> bool:
    """Whether the rule reads a GridSample node's settings."""
    node_fields = {"mode", "padding_mode", "align_corners", "channels", "dtype", "feature_height",
                   "feature_width", "input_numel", "output_numel"}
    return any(c.field in node_fields for c in (*rule.when, *rule.check))
