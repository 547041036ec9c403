"""``bevviz audit``: every sample of a dataset checked, rows to Parquet, a summary and a report.

:func:`run_audit` plans the samples (every scene, or the ``scenes`` named), opens the
output folder (:class:`bevviz.audit.store.AuditStore`; ``resume`` skips the samples already
written), runs the engine (``"local"``, the default: this process; ``"ray"``: Ray actors),
shows a progress bar with rate and ETA, and ends with the summary (``summary.json``) and
the HTML report (``report.html``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from tqdm.auto import tqdm

from bevviz.audit.check import CheckSettings, check_sample, dataset
from bevviz.audit.local import EngineStats, SampleFn, run_local
from bevviz.audit.ray_engine import RETRIES, run_ray
from bevviz.audit.report import summarize, write_report
from bevviz.audit.store import AuditStore, read_rows
from bevviz.io.nuscenes import list_samples, list_scenes
from bevviz.shapes import field_error

__all__ = ["ENGINES", "AuditRun", "plan", "run_audit"]

ENGINES = ("local", "ray")


@dataclass
class AuditRun:
    """What :func:`run_audit` did.

    Attributes:
        out: The output folder.
        rows: Every row of the audit (this run's and the resumed ones), ``pyarrow.Table``.
        summary: Per scene x camera verdict counts (:func:`bevviz.audit.report.summarize`).
        stats: The engine's :class:`~bevviz.audit.local.EngineStats`.
        planned: Samples in the audit.
        checked: Samples this run checked.
        seconds: Wall time of the engine (without opening the dataset and writing the report).
        report: The HTML report written, or None.
    """

    out: Path
    rows: pa.Table
    summary: list[dict]
    stats: EngineStats
    planned: int
    checked: int
    seconds: float
    report: Path | None = None

    @property
    def samples_per_second(self) -> float:
        """This run's throughput (0 when nothing was checked)."""
        return self.checked / self.seconds if self.checked and self.seconds > 0 else 0.0


def plan(nusc, scenes: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The samples to audit: (scene name, sample token), scenes in table order, samples in time order.

    Args:
        nusc: Devkit handle.
        scenes: Scene names to keep (default every scene).

    Raises:
        ValueError: naming ``--scenes`` and the unknown names.
    """
    all_scenes = list_scenes(nusc)
    if scenes:
        names = {s.name for s in all_scenes}
        unknown = [s for s in scenes if s not in names]
        if unknown:
            raise field_error("--scenes", unknown, f"no such scene in the dataset (it has {sorted(names)})")
        all_scenes = [s for s in all_scenes if s.name in set(scenes)]
    return [(sc.name, s.token) for sc in all_scenes for s in list_samples(nusc, sc.token)]


def run_audit(dataroot: str | os.PathLike, out: str | os.PathLike, *, version: str = "v1.0-mini",
              scenes: Sequence[str] | None = None, settings: CheckSettings | None = None, resume: bool = False,
              engine: str = "local", address: str | None = None, workers: int | None = None,
              flush_every: int = 16, progress: bool = True, on_progress: Callable[[int, int], None] | None = None,
              fn: SampleFn = check_sample, retries: int = RETRIES, report: bool = True) -> AuditRun:
    """Audit every sample of a nuScenes-format dataset (see the module docstring).

    Args:
        dataroot: Dataset root.
        out: Output folder (:mod:`bevviz.audit.store` layout).
        version: Table folder.
        scenes: Scene names to audit (default all).
        settings: :class:`~bevviz.audit.check.CheckSettings` (default ``CheckSettings()``).
        resume: Continue the audit in ``out`` (same arguments), skipping what is written.
        engine: ``"local"`` (this process) or ``"ray"``.
        address: Ray: address of a running cluster (default: start Ray locally).
        workers: Ray: actors (default 2); local: must be None or 1.
        flush_every: Samples per Parquet part.
        progress: Show a progress bar (stderr) with rate and ETA.
        on_progress: Optional ``callback(done, total)`` after every sample (for the app).
        fn: The per-sample function (tests inject faults through it).
        retries: Ray: attempts after the first at a sample whose worker died.
        report: Write ``summary.json`` and ``report.html`` at the end.

    Returns:
        :class:`AuditRun`.

    Raises:
        ValueError: naming the argument (``--engine``, ``--workers``, ``--scenes``,
            ``--out``, ``dataroot``, ``version``) and its value.
    """
    if engine not in ENGINES:
        raise field_error("--engine", engine, f"must be one of {', '.join(ENGINES)}")
    if engine == "local" and workers not in (None, 1):
        raise field_error("--workers", workers, "the local engine runs in one process; use --engine ray for more")
    if address and engine != "ray":
        raise field_error("--address", address, "applies to --engine ray only")
    settings = CheckSettings() if settings is None else settings
    root = str(Path(dataroot).resolve())
    items = plan(dataset(root, version), scenes)
    manifest = {"dataroot": root, "version": version, "scenes": sorted(scenes) if scenes else None,
                "settings": settings.to_dict(), "samples": len(items)}
    store = AuditStore(out, manifest, resume=resume, flush_every=flush_every)
    done = store.done()
    todo = [token for _, token in items if token not in done]
    bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="sample", desc=f"audit ({engine})",
               disable=not progress, dynamic_ncols=True)
    count = [len(items) - len(todo)]

    def on_result(token: str, rows: list) -> None:
        store.add(rows)
        count[0] += 1
        bar.update(1)
        if on_progress is not None:
            on_progress(count[0], len(items))

    t0 = time.perf_counter()
    try:
        if engine == "ray":
            stats = run_ray(root, version, todo, settings, on_result, workers=workers or 2, address=address, fn=fn,
                           retries=retries)
        else:
            stats = run_local(root, version, todo, settings, on_result, fn=fn)
    finally:
        store.close()
        bar.close()
    seconds = time.perf_counter() - t0
    rows = read_rows(out)
    summary = summarize(rows)
    run = AuditRun(Path(out), rows, summary, stats, len(items), len(todo), seconds)
    if report:
        (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        run.report = write_report(Path(out) / "report.html", rows, summary, store.manifest)
    return run
