"""bevviz.audit.store: atomic part files, resume, the manifest's identity, one writer, and rows
that cannot break the schema."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bevviz.audit import ROW_COLUMNS, SCHEMA, AuditStore, error_row, part_files, read_manifest, read_rows
from bevviz.audit.store import RECORD_COLUMNS, conform, row_key

MANIFEST = {"dataroot": "/data", "version": "v1.0-mini", "scenes": None, "settings": {"lidar": False}, "samples": 3}


def _rows(token: str, n: int = 2) -> list[dict]:
    rows = []
    for k in range(n):
        r = error_row(token, "x", 0.1, {"scene": "scene-0001", "sample_index": 0, "timestamp": 1})
        r.update(camera=f"CAM_{k}", verdict="ok", error=None)
        rows.append(r)
    return rows


def test_the_schema_is_the_checks_row_and_the_record_columns():
    assert tuple(SCHEMA.names) == (*ROW_COLUMNS, *RECORD_COLUMNS)


def test_parts_hold_whole_samples_and_resume_skips_them(tmp_path):
    store = AuditStore(tmp_path, MANIFEST, flush_every=2)
    store.add(_rows("a"))
    assert not part_files(tmp_path)  # buffered
    store.add(_rows("b"))
    assert len(part_files(tmp_path)) == 1  # flushed after two samples
    store.add(_rows("c"))
    store.close()
    assert len(part_files(tmp_path)) == 2
    assert store.done() == {"a", "b", "c"}
    table = read_rows(tmp_path)
    assert table.schema == SCHEMA and table.num_rows == 6
    again = AuditStore(tmp_path, MANIFEST, resume=True)
    assert again.done() == {"a", "b", "c"}
    assert read_manifest(tmp_path)["samples"] == 3


def test_a_leftover_temporary_part_is_ignored_and_removed(tmp_path):
    store = AuditStore(tmp_path, MANIFEST, flush_every=1)
    store.add(_rows("a"))
    # A run killed inside a write leaves a hidden temporary (here: a truncated file).
    tmp = tmp_path / "parts" / ".part-000002-deadbeef.parquet.1234.tmp"
    tmp.write_bytes(b"PAR1 truncated")
    assert [p.name for p in part_files(tmp_path)] == [part_files(tmp_path)[0].name]
    assert read_rows(tmp_path).num_rows == 2
    store.close()
    AuditStore(tmp_path, MANIFEST, resume=True).close()
    assert not tmp.exists()


def test_an_existing_audit_needs_resume_and_the_same_identity(tmp_path):
    AuditStore(tmp_path, MANIFEST).close()
    with pytest.raises(ValueError, match="'--out'.*--resume"):
        AuditStore(tmp_path, MANIFEST)
    with pytest.raises(ValueError, match="field 'settings'.*differs"):
        AuditStore(tmp_path, {**MANIFEST, "settings": {"lidar": True}}, resume=True)
    with pytest.raises(ValueError, match="field 'scenes'"):
        AuditStore(tmp_path, {**MANIFEST, "scenes": ["scene-0001"]}, resume=True)


def test_no_audit_is_a_named_error(tmp_path):
    with pytest.raises(ValueError, match="'--out'.*no manifest"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a bevviz-audit manifest"):
        read_manifest(tmp_path)
    assert read_rows(tmp_path / "nothing").num_rows == 0


def test_a_part_is_a_plain_parquet_file(tmp_path):
    store = AuditStore(tmp_path, MANIFEST, flush_every=1)
    store.add(_rows("a", 3))
    t = pq.read_table(part_files(tmp_path)[0])
    assert t.num_rows == 3 and set(t.column("sample").to_pylist()) == {"a"}


# --- values that do not fit, one writer, damaged parts, atomic files (issue 22) -------------------

_ANY = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.sampled_from(SCHEMA.names), _ANY, max_size=6), min_size=1, max_size=3))
def test_conformed_rows_always_fit_the_schema_and_keep_their_unit(rows):
    for r in rows:
        r["sample"] = "tok"
    fitted = conform(rows)
    pa.Table.from_pylist(fitted, schema=SCHEMA)  # never raises
    assert {row_key(r) for r in fitted} == {"tok"}
    assert len(fitted) in (1, len(rows))
    if len(fitted) == 1 and fitted[0]["verdict"] == "error" and fitted[0]["error"]:
        assert "field '" in fitted[0]["error"] or rows[0].get("error") is not None


def test_one_value_out_of_range_does_not_lose_the_buffered_rows(tmp_path):
    store = AuditStore(tmp_path, MANIFEST, flush_every=3)
    store.add(_rows("a"))
    huge = _rows("b")
    huge[1]["timestamp"] = 2**70
    store.add(huge)
    named = _rows("c")
    named[0]["scene"] = 7  # a scene name that is a number reads as its text
    store.add(named)
    store.close()
    rows = read_rows(tmp_path).to_pylist()
    assert sorted({r["sample"] for r in rows}) == ["a", "b", "c"]
    bad = [r for r in rows if r["sample"] == "b"]
    assert len(bad) == 1 and bad[0]["verdict"] == "error"
    assert "field 'timestamp'" in bad[0]["error"] and str(2**70) in bad[0]["error"]
    assert {r["scene"] for r in rows if r["sample"] == "c"} == {"7", "scene-0001"}


_HOLD = """
import sys, time
from bevviz.audit import AuditStore
AuditStore(sys.argv[1], {"dataroot": "/data", "version": "v", "scenes": None, "settings": {}, "samples": 1})
print("held", flush=True)
time.sleep(60)
"""


def test_one_writer_per_folder_and_a_killed_writer_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"'--out'.*another bevviz audit is writing to this folder "
                                             rf"\(pid {proc.pid} on .*choose another --out"):
            AuditStore(out, MANIFEST, resume=True)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The kernel let go of the dead process's lock: the next run takes the folder.
    t0 = time.monotonic()
    store = AuditStore(out, {**MANIFEST, "version": "v", "settings": {}, "dataroot": "/data", "samples": 1},
                       resume=True)
    store.close()
    assert time.monotonic() - t0 < 5 and (out / ".lock").exists()
    # In one process too: a second store on the folder is refused while the first is open.
    first = AuditStore(tmp_path / "two", MANIFEST)
    with pytest.raises(ValueError, match="another bevviz audit"):
        AuditStore(tmp_path / "two", MANIFEST, resume=True)
    first.close()
    AuditStore(tmp_path / "two", MANIFEST, resume=True).close()


def test_a_changed_dataset_is_refused_on_resume(tmp_path):
    AuditStore(tmp_path, {**MANIFEST, "fingerprint": {"tables": "1", "files": "2"}}).close()
    with pytest.raises(ValueError, match=r"'--out'.*dataset changed since this audit began.*files.*another folder"):
        AuditStore(tmp_path, {**MANIFEST, "fingerprint": {"tables": "1", "files": "3"}}, resume=True)
    AuditStore(tmp_path, {**MANIFEST, "fingerprint": {"tables": "1", "files": "2"}}, resume=True).close()


def test_a_damaged_part_is_named_left_out_and_set_aside_on_resume(tmp_path, caplog):
    store = AuditStore(tmp_path, MANIFEST, flush_every=1)
    store.add(_rows("a"))
    store.add(_rows("b"))
    store.close()
    damaged = part_files(tmp_path)[1]
    damaged.write_bytes(damaged.read_bytes()[:100])  # truncated behind the writer's back
    with caplog.at_level(logging.WARNING, logger="bevviz.audit"):
        assert {r["sample"] for r in read_rows(tmp_path).to_pylist()} == {"a"}
    assert damaged.name in caplog.text and "--resume" in caplog.text
    again = AuditStore(tmp_path, MANIFEST, resume=True)
    assert again.done() == {"a"}  # b is checked again
    assert len(again.notes) == 1 and damaged.name in again.notes[0] and "checked again" in again.notes[0]
    assert (tmp_path / "quarantine" / damaged.name).exists() and not damaged.exists()
    again.add(_rows("b"))
    again.close()
    assert sorted(r["sample"] for r in read_rows(tmp_path).to_pylist()) == ["a", "a", "b", "b"]


def test_files_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    store = AuditStore(tmp_path, MANIFEST)
    store.write_file("summary.json", "old\n")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.write_file("summary.json", "new, half written")
    monkeypatch.undo()
    store.close()
    assert (tmp_path / "summary.json").read_text() == "old\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
