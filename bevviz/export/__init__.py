"""NPU readiness: export samplers to ONNX, inventory their ops, check backend rules, prove parity.

Public API (docs/api.md): :func:`export_sampler` (name in "grid_sample", "gather_scatter",
"deformable", "lut") and :func:`inspect_onnx` (-> :class:`OpReport` with ``.op_counts``).
Also :func:`evaluate_rules` (the rules table ``bevviz/backend_rules.json``) and
:func:`check_parity` (onnxruntime vs torch: max |diff| and latency).
"""

from bevviz.export.exporter import ExportError, ExportResult, export_module, export_sampler, export_with
from bevviz.export.inspection import IndexUse, OpReport, TensorInfo, inspect_onnx
from bevviz.export.models import (
                                  SAMPLERS,
                                  ExportSettings,
                                  ExportSpec,
                                  build_spec,
                                  coarsen_factors,
                                  coarsen_grid,
                                  default_bev_grid,
                                  sampling_grid,
)
from bevviz.export.parity import ParityResult, check_parity
from bevviz.export.rules import (
                                  DEFAULT_RULES_PATH,
                                  FIELDS,
                                  Rule,
                                  RuleResult,
                                  evaluate_rules,
                                  load_rules,
                                  parse_rules,
                                  rule_facts,
)
from bevviz.export.workflow import STEPS, ExportOutcome, run_export

__all__ = [
    "DEFAULT_RULES_PATH", "FIELDS", "SAMPLERS", "STEPS", "ExportError", "ExportOutcome", "ExportResult",
    "ExportSettings", "ExportSpec", "IndexUse", "OpReport", "ParityResult", "Rule", "RuleResult", "TensorInfo",
    "build_spec", "check_parity", "coarsen_factors", "coarsen_grid", "run_export", "default_bev_grid",
    "evaluate_rules", "export_module", "export_sampler", "export_with", "inspect_onnx",
    "load_rules", "parse_rules", "rule_facts", "sampling_grid",
]
