"""bevviz.audit.store: atomic part files, resume, and the manifest's identity."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from bevviz.audit import ROW_COLUMNS, SCHEMA, AuditStore, error_row, part_files, read_manifest, read_rows

MANIFEST = {"dataroot": "/data", "version": "v1.0-mini", "scenes": None, "settings": {"lidar": False}, "samples": 3}


def _rows(token: str, n: int = 2) -> list[dict]:
    rows = []
    for k in range(n):
        r = error_row(token, "x", 0.1, {"scene": "scene-0001", "sample_index": 0, "timestamp": 1})
        r.update(camera=f"CAM_{k}", verdict="ok", error=None)
        rows.append(r)
    return rows


def test_the_schema_is_the_checks_row():
    assert tuple(SCHEMA.names) == ROW_COLUMNS


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
    AuditStore(tmp_path, MANIFEST, resume=True)
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
