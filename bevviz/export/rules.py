"""Backend capability rules as data, evaluated generically.

The rules live in ``bevviz/backend_rules.json``: one row per rule, each with its source.
A row says *when* it applies and *what* must hold, both as conditions
``{"field": ..., "op": ..., "value": ...}`` over a flat dict of facts (:data:`FIELDS`):
the current settings (sampler, mode, padding, C, dtype, opset, ...) and what
:func:`bevviz.export.inspect_onnx` found in the exported model (ops, index dtypes,
casts, dynamic ops and axes). No rule has its own Python code: add a rule by adding a row.

Example row::

    {"id": "drivingsdk-grid-sampler2d-v2-channels-max", "severity": "error",
     "when": [{"field": "grid_sample_used", "op": "==", "value": true}],
     "check": {"field": "channels", "op": "<=", "value": 128},
     "source": "Ascend DrivingSDK docs, grid_sampler2d_v2 ...", "message": "..."}

Each rule evaluates to ``pass``, ``fail``, ``n/a`` (its ``when`` does not hold) or
``unknown`` (a fact it needs is missing, e.g. the model could not be exported).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bevviz.checks import check_choice, field_error
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS, OpReport

#: The rules shipped with bevviz.
DEFAULT_RULES_PATH = Path(__file__).resolve().parent.parent / "backend_rules.json"

#: Facts a rule may name, with their meaning. ``op_counts.<Op>`` reads one count (0 when
#: the op is absent).
FIELDS: dict[str, str] = {
    "sampler": "sampler name: grid_sample, gather_scatter, deformable, lut",
    "mode": "interpolation mode: bilinear, nearest, bicubic",
    "padding_mode": "padding: zeros, border, reflection",
    "align_corners": "align_corners flag (bool)",
    "channels": "feature channels C",
    "dtype": "feature dtype name (float32, float16, float64)",
    "opset": "ONNX opset: of the exported file when there is one, else the requested one",
    "exporter": "torch.onnx exporter: dynamo or torchscript",
    "feature_height": "feature map height H_f",
    "feature_width": "feature map width W_f",
    "input_numel": "elements of the largest float input (features)",
    "output_numel": "elements of the output",
    "grid_sample_used": "the model holds GridSample (before export: sampler == grid_sample)",
    "ops": "op types present in the model (list)",
    "op_counts": "op type -> count; use op_counts.<Op>",
    "gather_index_dtypes": "dtypes of data indices of Gather / GatherElements / GatherND (list)",
    "scatter_index_dtypes": "dtypes of data indices of ScatterElements / ScatterND (list)",
    "scatter_add_count": "scatter ops with reduction='add' (count)",
    "scatter_add_index_dtypes": "dtypes of data indices of scatters with reduction='add' (list)",
    "nd_index_dtypes": "dtypes of every GatherND / ScatterND index (list)",
    "casts_into_index": "int -> int64 widening Cast nodes that produce an index, e.g. int32 -> int64 (count)",
    "dynamic_ops": "data-dependent-shape and control-flow op types present (list)",
    "dynamic_inputs": "graph inputs with symbolic axes (list of names)",
    "checker_ok": "onnx.checker full check passed (bool)",
    "onnxruntime_loads": "onnxruntime (CPU) loads the model (bool; checked for a user's model, bevviz npu check)",
}

SEVERITIES = ("error", "warn", "info")
STATUSES = ("pass", "fail", "n/a", "unknown")


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple, set, frozenset)):
        return list(x)
    if isinstance(x, Mapping):
        return list(x)
    return [x]


def _multiple_of(a: Any, b: Any) -> bool:
    return b != 0 and a % b == 0


#: Operator name -> (test, words used in reasons). ``is_empty`` / ``not_empty`` take no value.
OPS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "==": (lambda a, b: a == b, "=="),
    "!=": (lambda a, b: a != b, "!="),
    "<": (lambda a, b: a < b, "<"),
    "<=": (lambda a, b: a <= b, "<="),
    ">": (lambda a, b: a > b, ">"),
    ">=": (lambda a, b: a >= b, ">="),
    "in": (lambda a, b: a in _as_list(b), "in"),
    "not_in": (lambda a, b: a not in _as_list(b), "not in"),
    "multiple_of": (_multiple_of, "a multiple of"),
    "contains": (lambda a, b: b in _as_list(a), "contains"),
    "not_contains": (lambda a, b: b not in _as_list(a), "does not contain"),
    "all_in": (lambda a, b: all(x in _as_list(b) for x in _as_list(a)), "all in"),
    "any_in": (lambda a, b: any(x in _as_list(b) for x in _as_list(a)), "has one of"),
    "none_in": (lambda a, b: not any(x in _as_list(b) for x in _as_list(a)), "has none of"),
    "is_empty": (lambda a, b: len(_as_list(a)) == 0, "is empty"),
    "not_empty": (lambda a, b: len(_as_list(a)) > 0, "is not empty"),
}
_NO_VALUE = ("is_empty", "not_empty")


@dataclass(frozen=True)
class Condition:
    """``field op value``, e.g. ``channels <= 128``."""

    field: str
    op: str
    value: Any = None

    def describe(self) -> str:
        """Human form, e.g. ``"channels <= 128"``."""
        words = OPS[self.op][1]
        return f"{self.field} {words}" if self.op in _NO_VALUE else f"{self.field} {words} {self.value!r}"


@dataclass(frozen=True)
class Rule:
    """One row of the rules table (see the module docstring)."""

    id: str
    title: str
    backend: str
    severity: str
    when: tuple[Condition, ...]
    check: tuple[Condition, ...]
    source: str
    message: str


@dataclass(frozen=True)
class RuleResult:
    """A rule evaluated on one model + settings.

    Attributes:
        rule: The rule.
        status: ``"pass"``, ``"fail"``, ``"n/a"`` or ``"unknown"``.
        reason: Why, with the actual values (e.g. ``"channels = 130, needs channels <= 128"``).
    """

    rule: Rule
    status: str
    reason: str

    @property
    def passed(self) -> bool:
        """True for ``pass``."""
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        """True for ``fail``."""
        return self.status == "fail"

    def as_row(self) -> dict:
        """Flat dict for a table."""
        r = self.rule
        return {"status": self.status, "severity": r.severity, "rule": r.title, "reason": self.reason,
                "backend": r.backend, "id": r.id, "source": r.source, "message": r.message}


def _parse_condition(raw: Any, rule_id: str, where: str) -> Condition:
    if not isinstance(raw, Mapping):
        raise field_error(f"rules[{rule_id}].{where}", raw, "a condition must be {field, op, value}")
    fld, op = raw.get("field"), raw.get("op")
    if not isinstance(fld, str) or fld.split(".", 1)[0] not in FIELDS:
        raise field_error(f"rules[{rule_id}].{where}.field", fld, f"unknown field; known: {sorted(FIELDS)}")
    if op not in OPS:
        raise field_error(f"rules[{rule_id}].{where}.op", op, f"unknown operator; known: {list(OPS)}")
    if op not in _NO_VALUE and "value" not in raw:
        raise field_error(f"rules[{rule_id}].{where}.value", None, f"operator {op!r} needs a value")
    return Condition(fld, op, raw.get("value"))


def parse_rules(data: Mapping | Sequence) -> list[Rule]:
    """Validate and parse a rules table (the JSON's ``{"rules": [...]}`` or a bare list).

    Raises:
        ValueError: naming the rule id and the field that is wrong.
    """
    rows = data.get("rules") if isinstance(data, Mapping) else data
    if not isinstance(rows, (list, tuple)):
        raise field_error("rules", type(rows).__name__, "must be a list of rule rows")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise field_error(f"rules[{i}]", row, "a rule row must be an object")
        rid = row.get("id")
        if not isinstance(rid, str) or not rid:
            raise field_error(f"rules[{i}].id", rid, "every rule needs a non-empty string id")
        if rid in seen:
            raise field_error(f"rules[{rid}].id", rid, "duplicate rule id")
        seen.add(rid)
        for key in ("check", "source", "message"):
            if not row.get(key):
                raise field_error(f"rules[{rid}].{key}", row.get(key), "required")
        severity = row.get("severity", "error")
        check_choice(severity, SEVERITIES, f"rules[{rid}].severity")
        when_raw = row.get("when") or []
        check_raw = row.get("check")
        if isinstance(when_raw, Mapping):
            when = (_parse_condition(when_raw, rid, "when"),)
        else:
            when = tuple(_parse_condition(c, rid, "when") for c in _as_list(when_raw))
        check = (_parse_condition(check_raw, rid, "check"),) if isinstance(check_raw, Mapping) \
            else tuple(_parse_condition(c, rid, "check") for c in check_raw)
        rules.append(Rule(rid, str(row.get("title", rid)), str(row.get("backend", "")), severity,
                          when, check, str(row["source"]), str(row["message"])))
    return rules


def load_rules(path: str | os.PathLike | None = None) -> list[Rule]:
    """Load and validate the rules table (default: bevviz's ``backend_rules.json``).

    Raises:
        ValueError: naming ``path`` for a missing or malformed file, or the rule and field
            for a bad row.
    """
    p = Path(path) if path is not None else DEFAULT_RULES_PATH
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise field_error("path", str(p), "no such rules file") from None
    except json.JSONDecodeError as exc:
        raise field_error("path", str(p), f"malformed JSON ({exc})") from None
    return parse_rules(data)


def rule_facts(settings: Mapping[str, Any], report: OpReport | None = None) -> dict[str, Any]:
    """The flat facts rules read: settings, overlaid with what the model shows.

    Args:
        settings: Keys of :data:`FIELDS` known before export (sampler, mode, padding_mode,
            align_corners, channels, dtype, opset, exporter, feature sizes, numels). Other
            keys are kept too.
        report: The exported model's :class:`OpReport`, or ``None`` before / without one
            (model facts are then missing and rules needing them are ``unknown``).

    Returns:
        Field name -> value.
    """
    facts: dict[str, Any] = dict(settings)
    if report is None:
        if "sampler" in facts:
            facts.setdefault("grid_sample_used", facts["sampler"] == "grid_sample")
        return facts
    facts.update({
        "opset": report.opset,
        "grid_sample_used": report.has_grid_sample,
        "ops": sorted(report.op_counts),
        "op_counts": dict(report.op_counts),
        "gather_index_dtypes": report.index_dtypes(GATHER_OPS),
        "scatter_index_dtypes": report.index_dtypes(SCATTER_OPS),
        "scatter_add_count": report.scatter_add_count,
        "scatter_add_index_dtypes": report.index_dtypes(SCATTER_OPS, reduction="add"),
        "nd_index_dtypes": report.index_dtypes(("GatherND", "ScatterND"), role=None),
        "casts_into_index": report.casts_into_index,
        "dynamic_ops": sorted(report.dynamic_ops),
        "dynamic_inputs": [t.name for t in report.inputs if t.dynamic_axes],
        "checker_ok": report.checker_error is None,
    })
    return facts


_MISSING = object()


def _lookup(facts: Mapping[str, Any], name: str) -> Any:
    head, _, rest = name.partition(".")
    value = facts.get(head, _MISSING)
    if value is _MISSING or not rest:
        return value
    if isinstance(value, Mapping):
        return value.get(rest, 0 if head == "op_counts" else _MISSING)
    return _MISSING


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def _test(cond: Condition, facts: Mapping[str, Any]) -> tuple[bool | None, str]:
    value = _lookup(facts, cond.field)
    if value is _MISSING:
        return None, f"needs {cond.field} (not known yet: export the model first)"
    try:
        ok = bool(OPS[cond.op][0](value, cond.value))
    except TypeError:
        return False, f"{cond.field} = {_fmt(value)} cannot be compared with {cond.value!r}"
    return ok, f"{cond.field} = {_fmt(value)}"


def evaluate_rule(rule: Rule, facts: Mapping[str, Any]) -> RuleResult:
    """Evaluate one rule on the facts of :func:`rule_facts`."""
    for cond in rule.when:
        ok, said = _test(cond, facts)
        if ok is None:
            return RuleResult(rule, "unknown", said)
        if not ok:
            return RuleResult(rule, "n/a", f"does not apply: {said} (applies when {cond.describe()})")
    failures, passes = [], []
    for cond in rule.check:
        ok, said = _test(cond, facts)
        if ok is None:
            return RuleResult(rule, "unknown", said)
        (passes if ok else failures).append(f"{said}, needs {cond.describe()}")
    if failures:
        return RuleResult(rule, "fail", "; ".join(failures))
    return RuleResult(rule, "pass", "; ".join(passes))


def evaluate_rules(settings: Mapping[str, Any], report: OpReport | None = None,
                   rules: Sequence[Rule] | None = None) -> list[RuleResult]:
    """Evaluate every rule against the settings and (optionally) the exported model.

    Args:
        settings: See :func:`rule_facts`.
        report: The model's :class:`OpReport` or ``None``.
        rules: Rules to use; default :func:`load_rules`'s table.

    Returns:
        One :class:`RuleResult` per rule, in table order.
    """
    facts = rule_facts(settings, report)
    return [evaluate_rule(rule, facts) for rule in (load_rules() if rules is None else rules)]
