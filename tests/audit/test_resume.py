"""Crash safety: an audit killed with SIGKILL midway and resumed loses no row and writes none twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bevviz.audit import part_files, read_rows, run_audit
from bevviz.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_sigkill_midway_then_resume_loses_nothing_and_duplicates_nothing(nuscenes_root, fast, comparable, tmp_path):
    out = tmp_path / "audit"
    args = ["audit", str(nuscenes_root), "--out", str(out), "--no-lidar", "--no-estimate", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "bevviz", *args, "--flush-every", "1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while len(part_files(out)) < 2:  # one part per sample: kill after the second
            assert proc.poll() is None, f"the audit ended before it could be killed: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, "no part written in time"
            time.sleep(0.005)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed = part_files(out)
    assert 2 <= len(killed) < 8, "killed midway: some samples written, not all"

    assert main([*args, "--resume"]) == 1  # scene-0002 and the drift are flagged
    rows = read_rows(out).to_pylist()
    keys = [(r["sample"], r["camera"]) for r in rows]
    assert len(keys) == len(set(keys)) == 8 * 6  # nothing lost, nothing twice
    assert set(killed) <= set(part_files(out))  # what the killed run wrote was kept, not redone
    reference = run_audit(nuscenes_root, tmp_path / "reference", settings=fast, progress=False)
    assert comparable(read_rows(out)) == comparable(reference.rows)
