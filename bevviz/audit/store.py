"""The audit's output folder: a manifest, atomic Parquet part files, one writer, and resume.

Layout of ``OUT/``::

    manifest.json        what was audited: dataroot, version, scenes, settings, sample count,
                         and the dataset's fingerprint (:func:`bevviz.audit.run.fingerprint`)
    parts/part-*.parquet rows of complete samples (SCHEMA); each file appears whole or not at all
    quarantine/          damaged part files set aside by a resumed run (their samples redone)
    summary.json         per scene x camera verdict counts (written at the end)
    report.html          the self-contained report (written at the end)
    .lock                held (``flock``) by the one run writing to OUT

Every file is written to a hidden temporary name, flushed to disk and renamed into place
(:func:`atomic_write`; ``os.replace`` is atomic on POSIX). A part holds every row of the
samples it covers, so a run killed at any instant (even SIGKILL) leaves only whole samples
behind. ``--resume`` reads the parts, skips the work units they hold and checks the rest:
nothing is lost (samples in the unwritten buffer are checked again) and nothing is written
twice (a unit's rows are written once, by the one run that holds the lock).

Rows are made to fit :data:`SCHEMA` one sample at a time as they arrive (:func:`conform`),
so one value that does not fit (a timestamp of 2**70, a name that is a number) turns that
sample into an error row instead of failing the flush of every buffered row.

Convention:
    A work unit is a sample (key: its token) or a table problem that concerns no sample
    that is checked (key: ``table/token/field``, :func:`row_key`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bevviz.audit.check import ROW_COLUMNS
from bevviz.checks import field_error
from bevviz.errors import InputError
from bevviz.io.atomic import atomic_write
from bevviz.io.json_reader import parse_json, read_json

__all__ = ["FORMAT", "LOCK", "MANIFEST", "PARTS", "QUARANTINE", "RECORD_COLUMNS", "SCHEMA", "AuditStore",
           "atomic_write", "conform", "hold_lock", "part_files", "read_manifest", "read_rows", "row_key"]

LOG = logging.getLogger("bevviz.audit")
FORMAT = "bevviz-audit"
#: Version of the folder layout and row schema (2: the record columns, the fingerprint, the lock).
FORMAT_VERSION = 3  # 3: the degraded column
MANIFEST = "manifest.json"
PARTS = "parts"
QUARANTINE = "quarantine"
LOCK = ".lock"
#: Manifest fields that must match for ``--resume`` to continue a run.
IDENTITY = ("dataroot", "version", "scenes", "settings")

_F64, _I32, _STR = pa.float64(), pa.int32(), pa.string()
#: The bad record behind an error row that comes from the tables (null otherwise): its
#: table, token, field and value (as text).
RECORD_COLUMNS = ("error_table", "error_record", "error_field", "error_value")
_TYPES = {
    "sample_index": _I32, "timestamp": pa.int64(), "score": _F64, "quick_score": _F64,
    "roll_deg": _F64, "pitch_deg": _F64, "yaw_deg": _F64, "roll_unc_deg": _F64, "pitch_unc_deg": _F64,
    "yaw_unc_deg": _F64, "offset_checked": pa.bool_(), "edge_points": _I32, "seams": _I32, "lidar_points": _I32,
    "convention_ok": pa.bool_(), "runtime_s": _F64,
}
#: One row per sample x camera (one row per failed sample, with ``camera`` null): the
#: check's columns (:data:`bevviz.audit.check.ROW_COLUMNS`), then :data:`RECORD_COLUMNS`.
SCHEMA = pa.schema([(c, _TYPES.get(c, _STR)) for c in (*ROW_COLUMNS, *RECORD_COLUMNS)])
_RANGES = {pa.int32(): (-(1 << 31), (1 << 31) - 1), pa.int64(): (-(1 << 63), (1 << 63) - 1)}


def _fit(value: object, kind: pa.DataType) -> tuple[object, str | None]:
    """``value`` as column type ``kind`` wants it, or (None, why it does not fit)."""
    if value is None:
        return None, None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        value = value.item()
    if kind == _STR:
        if isinstance(value, str):
            return value, None
        if isinstance(value, (int, float)):  # a name stored as a number reads as its text
            return str(value) if not isinstance(value, bool) else str(value).lower(), None
        return None, f"{type(value).__name__} is not text"
    if kind == pa.bool_():
        return (value, None) if isinstance(value, bool) else (None, f"{type(value).__name__} is not true/false")
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"{type(value).__name__} is not a whole number"
        return (value, None) if lo <= value <= hi else (None, f"does not fit {kind} [{lo}, {hi}]")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"{type(value).__name__} is not a number"
    try:
        return float(value), None
    except OverflowError:
        return None, "does not fit float64"


def conform(rows: Sequence[Mapping]) -> list[dict]:
    """The rows of one work unit made to fit :data:`SCHEMA`, or one error row instead.

    Every column of every row is checked against its type (a number where text is wanted
    becomes its text; a whole float becomes an int); a value that does not fit (an integer
    past int64, text where a number is wanted) turns the unit into one error row that names
    the column and the value, with the unit's key columns kept.

    Args:
        rows: The unit's rows (dicts; missing columns are null, extra keys are dropped).

    Returns:
        Rows whose every value fits :data:`SCHEMA`.
    """
    out, bad = [], None
    for r in rows:
        fitted = {}
        for f in SCHEMA:
            v, why = _fit(r.get(f.name), f.type)
            if why is not None and bad is None:
                bad = (f.name, r.get(f.name), why)
            fitted[f.name] = v
        out.append(fitted)
    if bad is None:
        return out
    column, value, why = bad
    first = out[0] if out else {}
    row = {f.name: None for f in SCHEMA}
    row.update({k: first.get(k) for k in ("scene", "scene_token", "sample", "sample_index", "timestamp",
                                          *RECORD_COLUMNS)})
    if column in row and row[column] is not None and column != "sample":
        row[column] = None
    text = str(field_error(column, value, f"does not fit the audit's Parquet schema: {why}"))
    if isinstance(first.get("error"), str):  # the unit's own error first
        text = f"{first['error']}; {text}"
    row.update(verdict="error", error=text, runtime_s=first.get("runtime_s") if isinstance(
        first.get("runtime_s"), float) and math.isfinite(first["runtime_s"]) else 0.0)
    return [row]


def row_key(row: Mapping) -> str:
    """The work unit a row belongs to: its sample token, or ``table/token/field`` of the
    table problem it reports (a row with no sample)."""
    if row.get("sample") is not None:
        return str(row["sample"])
    return f"{row.get('error_table')}/{row.get('error_record')}/{row.get('error_field')}"


def read_manifest(out: str | os.PathLike) -> dict:
    """The manifest of an audit folder.

    Raises:
        ValueError: naming ``--out`` when the folder holds no readable audit manifest.
    """
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise field_error("--out", str(out), "holds no audit (no manifest.json)")
    try:
        data = read_json(path)  # bounded: a manifest is data on disk, edited or not
    except InputError as e:
        raise field_error("--out", str(out), f"its manifest.json cannot be read ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise field_error("--out", str(out), f"manifest.json is not a {FORMAT} manifest")
    return data


def part_files(out: str | os.PathLike) -> list[Path]:
    """The complete part files of an audit folder, in name order (temporaries excluded)."""
    d = Path(out) / PARTS
    return sorted(p for p in d.glob("part-*.parquet")) if d.is_dir() else []


def _read_part(path: Path, columns: Sequence[str] | None = None) -> pa.Table | None:
    """A part's rows in :data:`SCHEMA` (or ``columns`` of it); None when it is damaged."""
    try:
        return pq.read_table(path, schema=SCHEMA, columns=list(columns) if columns else None)
    except (OSError, pa.ArrowException, ValueError):
        return None


def read_rows(out: str | os.PathLike) -> pa.Table:
    """Every row of an audit folder, ordered by scene, time and camera.

    A damaged part file (truncated, or not this schema: not written by bevviz's atomic
    writer) is skipped with a warning that names it and says what to do
    (``bevviz audit ... --resume`` sets it aside and checks its samples again).

    Args:
        out: The audit folder.

    Returns:
        A ``pyarrow.Table`` with :data:`SCHEMA` (empty when no part is written yet).
    """
    tables = []
    for p in part_files(out):
        t = _read_part(p)
        if t is None:
            LOG.warning("bevviz audit: %s is damaged and is left out; run the same 'bevviz audit' with --resume "
                        "to move it to %s/ and check its samples again", p, QUARANTINE)
        else:
            tables.append(t)
    if not tables:
        return SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    return table.sort_by([("scene", "ascending"), ("timestamp", "ascending"), ("camera", "ascending")])


def hold_lock(out: str | os.PathLike) -> int:
    """Hold ``OUT/.lock`` (``flock``, released by the kernel when the process ends, so a
    lock left by a killed run is never stale); the file says who holds it.

    Args:
        out: An existing audit folder.

    Returns:
        The lock file's descriptor (:class:`AuditStore` takes it over and closes it).

    Raises:
        ValueError: naming ``--out`` when another process holds the lock, and who it is.
    """
    out = Path(out)
    path = out / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = parse_json(os.pread(fd, 4096, 0) or b"{}", LOCK)
        except InputError:  # a lock file someone wrote over: its holder is unknown
            holder = {}
        holder = holder if isinstance(holder, dict) else {}
        os.close(fd)
        who = (f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}" if holder
               else "another process")
        raise field_error("--out", str(out), f"another bevviz audit is writing to this folder ({who}); wait for "
                          "it to finish, or choose another --out") from None
    except OSError:
        os.close(fd)
        raise
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                     "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, me, 0)
    return fd


class AuditStore:
    """Buffered, crash-safe, single writer of an audit's rows (see the module docstring).

    Args:
        out: The output folder (created).
        manifest: What is audited: ``dataroot``, ``version``, ``scenes``, ``settings``
            (the identity a resumed run must match), ``fingerprint`` (the dataset's
            content: a resumed run must find it unchanged) and ``samples`` (how many in all).
        resume: Continue the run in ``out``; without it ``out`` must hold no audit yet.
        flush_every: Write a part after this many work units ...
        flush_seconds: ... or after this many seconds, whichever comes first.
        lock: The descriptor of ``OUT/.lock`` already held (:func:`hold_lock`), or None to
            take it here.

    Raises:
        ValueError: naming ``--out`` (another run holds its lock; an audit is there and
            ``resume`` is False; it was written by another format version; the dataset's
            content changed since), or the manifest field that differs from the run being
            resumed, and its value.
    """

    def __init__(self, out: str | os.PathLike, manifest: Mapping, *, resume: bool = False,
                 flush_every: int = 16, flush_seconds: float = 30.0, lock: int | None = None) -> None:
        self.out = Path(out)
        self.notes: list[str] = []
        self._fd: int | None = lock  # owned from here: released on any failure below
        try:
            self.flush_every = int(flush_every)
            self.flush_seconds = float(flush_seconds)
            if self.flush_every < 1:
                raise field_error("flush_every", flush_every, "must be >= 1")
            if self.out.exists() and not self.out.is_dir():
                raise field_error("--out", str(out), "exists and is not a folder")
            self.out.mkdir(parents=True, exist_ok=True)
            if self._fd is None:
                self._fd = hold_lock(self.out)
            self.manifest = self._open(manifest, resume)
        except BaseException:
            self.release()
            raise
        self._buffer: list[dict] = []
        self._units = 0
        self._last = time.monotonic()
        self._seq = len(part_files(self.out))

    def _open(self, manifest: Mapping, resume: bool) -> dict:
        manifest = {"format": FORMAT, "version_of_format": FORMAT_VERSION, **manifest}
        if (self.out / MANIFEST).exists():
            if not resume:
                raise field_error("--out", str(self.out), "already holds an audit; pass --resume to continue it, "
                                  "or choose another folder")
            old = read_manifest(self.out)
            if old.get("version_of_format") != FORMAT_VERSION:
                raise field_error("--out", str(self.out), f"holds an audit of format version "
                                  f"{old.get('version_of_format')} (this bevviz writes {FORMAT_VERSION}); "
                                  "start it again in another folder")
            for key in IDENTITY:
                if old.get(key) != manifest.get(key):
                    raise field_error(key, manifest.get(key), f"differs from the audit being resumed in {self.out} "
                                      f"(it has {old.get(key)!r}); resume with the same arguments")
            if "fingerprint" in manifest and old.get("fingerprint") != manifest["fingerprint"]:
                raise field_error("--out", str(self.out), "the dataset changed since this audit began (its tables "
                                  f"or files differ: {_changed(old.get('fingerprint'), manifest['fingerprint'])}); "
                                  "its rows would mix two datasets: start the audit again in another folder")
        parts = self.out / PARTS
        parts.mkdir(parents=True, exist_ok=True)
        for tmp in parts.glob(".*.tmp"):  # a part a killed run did not finish
            tmp.unlink()
        self._quarantine()
        atomic_write(self.out / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=2) + "\n"))
        return manifest

    def _quarantine(self) -> None:
        """Move damaged part files to ``quarantine/`` (their samples are checked again)."""
        for p in part_files(self.out):
            if _read_part(p) is None:
                dest = self.out / QUARANTINE
                dest.mkdir(exist_ok=True)
                os.replace(p, dest / p.name)
                note = (f"{p} is damaged (it cannot be read as an audit part): moved to {dest / p.name}; "
                        "its samples are checked again")
                self.notes.append(note)
                LOG.warning("bevviz audit: %s", note)

    def done(self) -> set[str]:
        """Keys (:func:`row_key`) of the work units whose rows are already written."""
        keys: set[str] = set()
        for p in part_files(self.out):
            t = _read_part(p, ["sample", *RECORD_COLUMNS[:3]])
            if t is not None:
                keys.update(map(row_key, t.to_pylist()))
        return keys

    def add(self, rows: Sequence[Mapping]) -> None:
        """Buffer the rows of one work unit (made to fit the schema first, :func:`conform`);
        write a part when the buffer is due."""
        self._buffer.extend(conform(rows))
        self._units += 1
        if self._units >= self.flush_every or time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def add_units(self, units: Sequence[Sequence[Mapping]]) -> None:
        """Buffer many work units at once (each conformed on its own) and write them as one part."""
        for rows in units:
            self._buffer.extend(conform(rows))
        self.flush()

    def flush(self) -> Path | None:
        """Write the buffered units as one part file (atomically); returns its path."""
        if not self._buffer:
            return None
        table = pa.Table.from_pylist(self._buffer, schema=SCHEMA)
        self._seq += 1
        path = self.out / PARTS / f"part-{self._seq:06d}-{uuid.uuid4().hex[:8]}.parquet"
        atomic_write(path, lambda p: pq.write_table(table, p))
        self._buffer, self._units, self._last = [], 0, time.monotonic()
        return path

    def write_file(self, name: str, text: str) -> Path:
        """Write ``OUT/name`` atomically (the summary, the report)."""
        return atomic_write(self.out / name, lambda p: p.write_text(text))

    def release(self) -> None:
        """Let go of the folder's lock (the file stays: removing it could let two runs in)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Write what is buffered and let go of the lock."""
        try:
            self.flush()
        finally:
            self.release()


def _changed(old: object, new: Mapping) -> str:
    """Which parts of two fingerprints differ, in words."""
    if not isinstance(old, Mapping):
        return "no fingerprint was recorded"
    parts = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(parts) or "?"
