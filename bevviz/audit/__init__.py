"""Headless checks and the whole-dataset calibration audit.

:mod:`~bevviz.audit.check` checks one dataset sample as rows (the audit's pure per-sample
function), through the use cases of :mod:`bevviz.session` (which check one rig);
:mod:`~bevviz.audit.store` keeps the rows in atomic Parquet part files with resume;
:mod:`~bevviz.audit.local` and :mod:`~bevviz.audit.ray_engine` run the function over many
samples (this process, or Ray actors); :mod:`~bevviz.audit.run` is ``bevviz audit``;
:mod:`~bevviz.audit.report` writes the summary and the self-contained HTML pages;
``python -m bevviz.audit.bench`` measures the engines. Every public name is re-exported here.

Convention:
    Offsets are body-frame (FLU) degrees, the stored camera turned away from where the
    evidence puts it. See docs/conventions.md and docs/audit.md.
"""

from bevviz.audit.check import (
    EMBEDDED,
    ERROR,
    ROW_COLUMNS,
    CameraCheck,
    CameraSanity,
    CheckReport,
    CheckSettings,
    ConventionCheck,
    check_rig,
    check_sample,
    dataset,
    error_row,
    projection_sanity,
    report_rows,
)
from bevviz.audit.local import EngineStats, peak_rss_mib, run_local
from bevviz.audit.ray_engine import RETRIES, SampleWorker, run_ray
from bevviz.audit.report import SAMPLE_ROW, check_html, degraded_samples, flagged_rows, summarize, write_report
from bevviz.audit.run import ENGINES, AuditOptions, AuditRun, plan, run_audit
from bevviz.audit.store import SCHEMA, AuditStore, part_files, read_manifest, read_rows

__all__ = [
    # one rig, one sample
    "EMBEDDED", "ERROR", "ROW_COLUMNS", "CameraCheck", "CameraSanity", "CheckReport", "CheckSettings",
    "ConventionCheck", "check_rig", "check_sample", "dataset", "error_row", "projection_sanity", "report_rows",
    # engines
    "ENGINES", "RETRIES", "EngineStats", "SampleWorker", "peak_rss_mib", "run_local", "run_ray",
    # the audit, its store and report
    "SAMPLE_ROW", "SCHEMA", "AuditOptions", "AuditRun", "AuditStore", "check_html", "degraded_samples",
    "flagged_rows", "part_files", "plan",
    "read_manifest", "read_rows", "run_audit", "summarize", "write_report",
]
