"""``bevviz audit``: every sample of a dataset checked, rows to Parquet, a summary and a report.

:func:`run_audit` plans the work (:func:`plan`: the samples of every scene, or of the
``scenes`` named, and an error row for every problem the table screen or a scene's sample
chain found), refuses an audit with nothing to do, takes the output folder
(:class:`bevviz.audit.store.AuditStore`: its lock, and on ``resume`` the same arguments and
the same dataset :func:`fingerprint`; the units already written are skipped), writes the
problem rows, runs the engine (``"local"``, the default: this process; ``"ray"``: Ray
actors), shows a progress bar with rate and ETA, and ends with the summary
(``summary.json``) and the HTML report (``report.html``), both written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from tqdm.auto import tqdm

from bevviz.audit.check import CheckSettings, check_sample, dataset, error_row
from bevviz.audit.local import EngineStats, SampleFn, run_local
from bevviz.audit.ray_engine import RETRIES, run_ray
from bevviz.audit.report import report_html, summarize
from bevviz.audit.store import AuditStore, hold_lock, read_rows, row_key
from bevviz.checks import _fmt_value, field_error
from bevviz.io.nuscenes import SampleInfo, list_scenes, record_problems, scene_samples
from bevviz.io.nuscenes_tables import INT64_MAX, RecordProblem

__all__ = ["ENGINES", "AuditRun", "Plan", "fingerprint", "plan", "problem_row", "run_audit"]

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
        problems: Error rows of table problems (this run's and the resumed ones' alike).
        notes: What the store did on the way (damaged parts set aside), one line each.
    """

    out: Path
    rows: pa.Table
    summary: list[dict]
    stats: EngineStats
    planned: int
    checked: int
    seconds: float
    report: Path | None = None
    problems: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def samples_per_second(self) -> float:
        """This run's throughput (0 when nothing was checked)."""
        return self.checked / self.seconds if self.checked and self.seconds > 0 else 0.0


@dataclass
class Plan:
    """What an audit is to do.

    Attributes:
        samples: (scene name, sample token) of each sample to check, scenes in table order,
            samples in time order.
        problems: One error row per sample a table problem keeps from being checked, and one
            per other problem (a bad record that concerns no sample checked, a scene whose
            chain of samples breaks), with the problem's table, record, field and value.
        scenes: Scenes in the audit.
    """

    samples: list[tuple[str, str]]
    problems: list[dict]
    scenes: int


def problem_row(p: RecordProblem, scene_names: Mapping[str, str], sample: SampleInfo | None = None,
                scene: str | None = None) -> dict:
    """The error row of a table problem: of the ``sample`` it keeps from being checked, or
    (``sample`` None) of the problem itself (its key is then ``table/token/field``).

    Args:
        p: The :class:`~bevviz.io.nuscenes_tables.RecordProblem`.
        scene_names: Scene token -> name.
        sample: The sample the problem blocks, or None.
        scene: Token of the scene the sample was reached in (default: the problem's scene).

    Returns:
        A row of :data:`bevviz.audit.store.SCHEMA` with verdict ``"error"``.
    """
    scene = p.scene if scene is None else scene
    meta = {"scene": scene_names.get(scene), "scene_token": scene}
    if sample is not None:
        stamp = sample.timestamp if 0 <= sample.timestamp <= INT64_MAX else None
        meta.update(sample_index=sample.index, timestamp=stamp)
    text = str(p) if sample is None else f"not checked: {p}"
    row = error_row(None if sample is None else sample.token, text, 0.0, meta)
    row.update(error_table=p.table, error_record=p.token, error_field=p.field, error_value=_fmt_value(p.value))
    return row


def plan(nusc, scenes: Sequence[str] | None = None) -> Plan:
    """The work of an audit: the samples to check and the rows of the table problems.

    Each scene's samples are found by following its chain (bounded, loops refused:
    :func:`bevviz.io.nuscenes.scene_samples`); a sample the table screen blocks
    (:func:`bevviz.io.nuscenes.record_problems`) gets an error row instead of a check; a
    sample reached twice is planned once.

    Args:
        nusc: Devkit handle from :func:`bevviz.io.nuscenes.open_dataset`.
        scenes: Scene names to keep (default every scene).

    Returns:
        :class:`Plan`.

    Raises:
        ValueError: naming ``--scenes`` and the unknown names (or an empty list).
    """
    all_scenes = list_scenes(nusc)
    if scenes is not None:
        names = {s.name for s in all_scenes}
        unknown = [s for s in scenes if s not in names]
        if not scenes or unknown:
            raise field_error("--scenes", list(scenes) if not unknown else unknown,
                              f"{'names no scene' if not scenes else 'no such scene in the dataset'} "
                              f"(it has {sorted(names)[:20]}{' ...' if len(names) > 20 else ''})")
        all_scenes = [s for s in all_scenes if s.name in set(scenes)]
    problems, blocked = record_problems(nusc)
    scene_names = {s.token: s.name for s in list_scenes(nusc)}
    chosen = {s.token for s in all_scenes}
    items, rows, used, seen = [], [], set(), set()
    for sc in all_scenes:
        samples, broken = scene_samples(nusc, sc.token)
        if broken is not None:
            problems.append(broken)
        for s in samples:
            if s.token in seen:
                continue
            seen.add(s.token)
            if s.token in blocked:
                rows.append(problem_row(blocked[s.token], scene_names, s, sc.token))
                used.add(blocked[s.token].key)
            else:
                items.append((sc.name, s.token))
    keys = set()
    for p in problems:
        if p.key in used or p.key in keys or (scenes is not None and p.scene not in chosen):
            continue
        keys.add(p.key)
        rows.append(problem_row(p, scene_names))
    return Plan(items, rows, len(all_scenes))


def fingerprint(nusc, samples: Sequence[str]) -> dict:
    """What the audit's rows depend on, in a few hashes (a resumed run must find the same).

    Args:
        nusc: Devkit handle (its ``dataroot`` and ``version``).
        samples: Tokens of the samples to check.

    Returns:
        ``{"tables": sha256 of every table file's name and bytes, "files": sha256 of the
        path, size and modification time of each key-frame file of the samples}``.
    """
    tables = hashlib.sha256()
    for path in sorted(Path(nusc.dataroot, nusc.version).glob("*.json")):
        tables.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                tables.update(block)
    files = hashlib.sha256()
    for token in samples:
        for sd_token in sorted(nusc.get("sample", token)["data"].values()):
            name = str(nusc.get("sample_data", sd_token).get("filename"))
            try:
                st = os.stat(Path(nusc.dataroot, name))
                files.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            except OSError:
                files.update(f"{name}\0missing\n".encode())
    return {"tables": tables.hexdigest(), "files": files.hexdigest()}


def _open(root: str, version: str, out, scenes, settings: CheckSettings, resume: bool, flush_every: int,
          lock: int | None) -> tuple[AuditStore, Plan]:
    """Plan the audit, refuse one with no sample to check, and open its store (see :func:`run_audit`);
    ``lock`` (held, or None) is let go of on a refusal and handed to the store otherwise."""
    try:
        nusc = dataset(root, version)
        work = plan(nusc, None if scenes is None else list(scenes))
        if not work.samples:  # an audit that checks nothing must not end as if it had
            where = ("the scenes named hold no sample that can be checked" if scenes is not None else
                     f"the dataset's {work.scenes} scene{'s' if work.scenes != 1 else ''} hold no sample that "
                     "can be checked")
            first = f"; {len(work.problems)} table problem(s), the first: {work.problems[0]['error']}" \
                if work.problems else ""
            raise field_error("--scenes" if scenes is not None else "dataroot",
                              scenes if scenes is not None else root, f"nothing to audit: {where}{first}")
        manifest = {"dataroot": root, "version": version, "scenes": sorted(scenes) if scenes else None,
                    "settings": settings.to_dict(), "problems": len(work.problems),
                    # samples in the audit: those to check and those a table problem blocks
                    "samples": len(work.samples) + sum(r["sample"] is not None for r in work.problems),
                    "fingerprint": fingerprint(nusc, [t for _, t in work.samples])}
    except BaseException:
        if lock is not None:
            os.close(lock)  # closing the descriptor lets go of the lock
        raise
    return AuditStore(out, manifest, resume=resume, flush_every=flush_every, lock=lock), work


@dataclass(frozen=True)
class AuditOptions:
    """How an audit runs: the dataset's table folder, the engine and what is written.

    Attributes:
        version: Table folder.
        engine: ``"local"`` (this process) or ``"ray"``.
        address: Ray: address of a running cluster (default: start Ray locally).
        workers: Ray: actors (default 2); local: must be None or 1.
        retries: Ray: attempts after the first at a sample whose worker died.
        flush_every: Samples per Parquet part.
        report: Write ``summary.json`` and ``report.html`` at the end.
    """

    version: str = "v1.0-mini"
    engine: str = "local"
    address: str | None = None
    workers: int | None = None
    retries: int = RETRIES
    flush_every: int = 16
    report: bool = True


def run_audit(dataroot: str | os.PathLike, out: str | os.PathLike, *, scenes: Sequence[str] | None = None,
              settings: CheckSettings | None = None, resume: bool = False, options: AuditOptions = AuditOptions(),
              progress: bool = True, on_progress: Callable[[int, int], None] | None = None,
              fn: SampleFn = check_sample) -> AuditRun:
    """Audit every sample of a nuScenes-format dataset (see the module docstring).

    Args:
        dataroot: Dataset root.
        out: Output folder (:mod:`bevviz.audit.store` layout).
        scenes: Scene names to audit (default all).
        settings: :class:`~bevviz.audit.check.CheckSettings` (default ``CheckSettings()``).
        resume: Continue the audit in ``out`` (same arguments), skipping what is written.
        options: Table folder, engine, workers, retries, part size and report
            (:class:`AuditOptions`).
        progress: Show a progress bar (stderr) with rate and ETA.
        on_progress: Optional ``callback(done, total)`` after every sample (for the app).
        fn: The per-sample function (tests inject faults through it).

    Returns:
        :class:`AuditRun`.

    Raises:
        ValueError: naming the argument (``--engine``, ``--workers``, ``--scenes``,
            ``--out``, ``dataroot``, ``version``) and its value; among them an audit with no
            sample to check (``dataroot`` / ``--scenes``: nothing to audit), another run
            holding ``out`` and, on ``resume``, a dataset that changed since the audit began
            (``--out``).
    """
    version, engine, address, workers = options.version, options.engine, options.address, options.workers
    if engine not in ENGINES:
        raise field_error("--engine", engine, f"must be one of {', '.join(ENGINES)}")
    if engine == "local" and workers not in (None, 1):
        raise field_error("--workers", workers, "the local engine runs in one process; use --engine ray for more")
    if address and engine != "ray":
        raise field_error("--address", address, "applies to --engine ray only")
    settings = CheckSettings() if settings is None else settings
    root = str(Path(dataroot).resolve())
    # An existing folder is locked before the dataset is opened (minutes on trainval), so a
    # second run on it is refused at once; a new folder is made (and locked) by the store.
    lock = hold_lock(out) if Path(out).is_dir() else None
    store, work = _open(root, version, out, scenes, settings, resume, options.flush_every, lock)
    items = work.samples
    try:
        done = store.done()
        store.add_units([[r] for r in work.problems if row_key(r) not in done])
        todo = [token for _, token in items if token not in done]
        bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="sample", desc=f"audit ({engine})",
                   disable=not progress, dynamic_ncols=True)
        count = [len(items) - len(todo)]

        def on_result(token: str, rows: list) -> None:
            # every row is the sample's own; a sample is never left without a row
            rows = [{**r, "sample": token} for r in rows] or [error_row(token, "the check returned no rows", 0.0)]
            store.add(rows)
            count[0] += 1
            bar.update(1)
            if on_progress is not None:
                on_progress(count[0], len(items))

        t0 = time.perf_counter()
        try:
            if engine == "ray":
                stats = run_ray(root, version, todo, settings, on_result, workers=workers or 2, address=address,
                                fn=fn, retries=options.retries)
            else:
                stats = run_local(root, version, todo, settings, on_result, fn=fn)
        finally:
            store.flush()
            bar.close()
        seconds = time.perf_counter() - t0
        rows = read_rows(out)
        summary = summarize(rows)
        run = AuditRun(Path(out), rows, summary, stats, len(items), len(todo), seconds, problems=len(work.problems),
                       notes=list(store.notes))
        if options.report:
            store.write_file("summary.json", json.dumps(summary, indent=2) + "\n")
            run.report = store.write_file("report.html", report_html(rows, summary, store.manifest))
    finally:
        store.close()
    return run
