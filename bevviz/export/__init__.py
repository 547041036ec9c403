"""NPU readiness: export samplers to ONNX, inventory their ops, check backend rules, prove parity.

Public API (docs/api.md): :func:`export_sampler` (name in "grid_sample", "gather_scatter",
"deformable", "lut") and :func:`inspect_onnx` (-> :class:`OpReport` with ``.op_counts``).
Also :func:`evaluate_rules` (the rules table ``bevviz/backend_rules.json``) and
:func:`check_parity` (onnxruntime vs torch: max |diff| and latency).

Any user's model: :func:`rewrite_grid_sample` (-> :class:`RewriteReport`: every GridSample
replaced by a chunked int32 gather from a channels-last table, fused with the weighted sum
after it where there is one (:class:`RewriteOptions`), every gather / scatter index int32,
parity and latency against the original in onnxruntime), :func:`check_model` (its op inventory against
the rules table), and :func:`grid_sample_free` (``torch.onnx.export`` of an unmodified PyTorch
model without GridSample). Models are read within bounds (:mod:`bevviz.export.onnx_file`).
"""

from bevviz.export.exporter import ExportError, ExportResult, export_module, export_sampler, export_with
from bevviz.export.index_dtypes import IndexChange, make_indices_int32
from bevviz.export.inspection import IndexUse, OpReport, TensorInfo, inspect_onnx
from bevviz.export.model_check import CheckRow, ModelCheck, check_model
from bevviz.export.model_parity import ModelParity, OutputDiff, compare_models, random_feed
from bevviz.export.models import (
                                  SAMPLERS,
                                  ExportOptions,
                                  ExportSettings,
                                  ExportSpec,
                                  build_spec,
                                  coarsen_factors,
                                  coarsen_grid,
                                  default_bev_grid,
                                  sampling_grid,
)
from bevviz.export.onnx_file import MAX_ONNX_BYTES, LoadedModel, load_model, model_from_bytes
from bevviz.export.parity import ParityResult, check_parity
from bevviz.export.rewrite import Kept, NodeChange, Refusal, RewriteOptions, RewriteReport, rewrite_grid_sample
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
from bevviz.export.torch_free import grid_sample_free
from bevviz.export.workflow import STEPS, ExportOutcome, run_export

__all__ = [
    "DEFAULT_RULES_PATH", "FIELDS", "SAMPLERS", "STEPS", "ExportError", "ExportOutcome", "ExportResult",
    "ExportOptions", "ExportSettings", "ExportSpec", "IndexUse", "OpReport", "ParityResult", "Rule", "RuleResult",
    "TensorInfo",
    "build_spec", "check_parity", "coarsen_factors", "coarsen_grid", "run_export", "default_bev_grid",
    "evaluate_rules", "export_module", "export_sampler", "export_with", "inspect_onnx",
    "load_rules", "parse_rules", "rule_facts", "sampling_grid",
    "CheckRow", "IndexChange", "LoadedModel", "ModelCheck", "check_model", "MAX_ONNX_BYTES", "ModelParity",
    "Kept", "NodeChange", "OutputDiff", "Refusal", "RewriteOptions",
    "RewriteReport", "compare_models", "grid_sample_free", "load_model", "make_indices_int32", "model_from_bytes",
    "random_feed", "rewrite_grid_sample",
]
