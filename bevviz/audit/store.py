"""The audit's output folder: a manifest, atomic Parquet part files, and resume.

Layout of ``OUT/``::

    manifest.json        what was audited: dataroot, version, scenes, settings, sample count
    parts/part-*.parquet rows of complete samples (SCHEMA); each file appears whole or not at all
    summary.json         per scene x camera verdict counts (written at the end)
    report.html          the self-contained report (written at the end)

A part is written to a hidden temporary name, flushed to disk and renamed into place
(``os.replace`` is atomic on POSIX), and holds every row of the samples it covers, so a run
killed at any instant (even SIGKILL) leaves only whole samples behind. ``--resume`` reads
the parts, skips the samples they hold and checks the rest: nothing is lost (samples in
the unwritten buffer are checked again) and nothing is written twice (a sample's rows are
written once, by the one run that checks it).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bevviz.shapes import field_error

__all__ = ["FORMAT", "MANIFEST", "PARTS", "SCHEMA", "AuditStore", "read_manifest", "read_rows", "part_files"]

FORMAT = "bevviz-audit"
MANIFEST = "manifest.json"
PARTS = "parts"
#: Manifest fields that must match for ``--resume`` to continue a run.
IDENTITY = ("dataroot", "version", "scenes", "settings")

_F64, _I32, _STR = pa.float64(), pa.int32(), pa.string()
#: One row per sample x camera (one row per failed sample, with ``camera`` null).
SCHEMA = pa.schema([
    ("scene", _STR), ("scene_token", _STR), ("sample", _STR), ("sample_index", _I32), ("timestamp", pa.int64()),
    ("camera", _STR), ("verdict", _STR), ("score", _F64), ("quick_score", _F64),
    ("roll_deg", _F64), ("pitch_deg", _F64), ("yaw_deg", _F64),
    ("roll_unc_deg", _F64), ("pitch_unc_deg", _F64), ("yaw_unc_deg", _F64),
    ("offset_source", _STR), ("offset_checked", pa.bool_()), ("seam_verdict", _STR), ("lidar_verdict", _STR),
    ("edge_points", _I32), ("seams", _I32), ("lidar_points", _I32), ("convention_ok", pa.bool_()),
    ("sanity", _STR), ("reason", _STR), ("runtime_s", _F64), ("error", _STR),
])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, write) -> None:
    """Write through ``write(tmp_path)`` to a hidden temporary file, fsync, rename into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def read_manifest(out: str | os.PathLike) -> dict:
    """The manifest of an audit folder.

    Raises:
        ValueError: naming ``--out`` when the folder holds no readable audit manifest.
    """
    path = Path(out) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise field_error("--out", str(out), "holds no audit (no manifest.json)") from None
    except (OSError, ValueError) as e:
        raise field_error("--out", str(out), f"its manifest.json cannot be read ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise field_error("--out", str(out), f"manifest.json is not a {FORMAT} manifest")
    return data


def part_files(out: str | os.PathLike) -> list[Path]:
    """The complete part files of an audit folder, in name order (temporaries excluded)."""
    d = Path(out) / PARTS
    return sorted(p for p in d.glob("part-*.parquet")) if d.is_dir() else []


def read_rows(out: str | os.PathLike) -> pa.Table:
    """Every row of an audit folder, ordered by scene, time and camera.

    Args:
        out: The audit folder.

    Returns:
        A ``pyarrow.Table`` with :data:`SCHEMA` (empty when no part is written yet).
    """
    tables = [pq.read_table(p, schema=SCHEMA) for p in part_files(out)]
    if not tables:
        return SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    return table.sort_by([("scene", "ascending"), ("timestamp", "ascending"), ("camera", "ascending")])


class AuditStore:
    """Buffered, crash-safe writer of an audit's rows (see the module docstring).

    Args:
        out: The output folder (created).
        manifest: What is audited: ``dataroot``, ``version``, ``scenes``, ``settings``
            (the identity a resumed run must match) and ``samples`` (how many in all).
        resume: Continue the run in ``out``; without it ``out`` must hold no audit yet.
        flush_every: Write a part after this many samples ...
        flush_seconds: ... or after this many seconds, whichever comes first.

    Raises:
        ValueError: naming ``--out`` (an audit is there and ``resume`` is False), or the
            manifest field that differs from the run being resumed, and its value.
    """

    def __init__(self, out: str | os.PathLike, manifest: Mapping, *, resume: bool = False,
                 flush_every: int = 16, flush_seconds: float = 30.0) -> None:
        self.out = Path(out)
        self.flush_every = int(flush_every)
        self.flush_seconds = float(flush_seconds)
        if self.flush_every < 1:
            raise field_error("flush_every", flush_every, "must be >= 1")
        if self.out.exists() and not self.out.is_dir():
            raise field_error("--out", str(out), "exists and is not a folder")
        manifest = {"format": FORMAT, "version_of_format": 1, **manifest}
        if (self.out / MANIFEST).exists():
            if not resume:
                raise field_error("--out", str(out), "already holds an audit; pass --resume to continue it, "
                                  "or choose another folder")
            old = read_manifest(self.out)
            for key in IDENTITY:
                if old.get(key) != manifest.get(key):
                    raise field_error(key, manifest.get(key), f"differs from the audit being resumed in {out} "
                                      f"(it has {old.get(key)!r}); resume with the same arguments")
        (self.out / PARTS).mkdir(parents=True, exist_ok=True)
        for tmp in (self.out / PARTS).glob(".*.tmp"):  # a part a killed run did not finish
            tmp.unlink()
        _atomic_write(self.out / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=2) + "\n"))
        self.manifest = manifest
        self._buffer: list[dict] = []
        self._samples = 0
        self._last = time.monotonic()
        self._seq = len(part_files(self.out))

    def done(self) -> set[str]:
        """Tokens of the samples whose rows are already written."""
        return {t for p in part_files(self.out) for t in pq.read_table(p, columns=["sample"]).column(0).to_pylist()}

    def add(self, rows: Sequence[dict]) -> None:
        """Buffer the rows of one sample; write a part when the buffer is due."""
        self._buffer.extend(rows)
        self._samples += 1
        if self._samples >= self.flush_every or time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def flush(self) -> Path | None:
        """Write the buffered samples as one part file (atomically); returns its path."""
        if not self._buffer:
            return None
        table = pa.Table.from_pylist(self._buffer, schema=SCHEMA)
        self._seq += 1
        path = self.out / PARTS / f"part-{self._seq:06d}-{uuid.uuid4().hex[:8]}.parquet"
        _atomic_write(path, lambda p: pq.write_table(table, p))
        self._buffer, self._samples, self._last = [], 0, time.monotonic()
        return path

    def close(self) -> None:
        """Write what is buffered."""
        self.flush()
