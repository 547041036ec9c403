"""``python -m bevviz.calibration.evaluate``: the documented entry point runs the laboratory's harness."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bevviz.calibration import evaluate

ROOT = Path(__file__).resolve().parents[2]


def test_the_entry_point_runs_the_lab_harness():
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "bevviz.calibration.evaluate", "--help"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lab = subprocess.run([sys.executable, "-m", evaluate.LAB_MODULE, "--help"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert "--frames" in out.stdout and out.stdout == lab.stdout


def test_importing_the_library_loads_no_lab_module():
    code = ("import sys, bevviz.calibration, bevviz.calibration.evaluate, bevviz.session; "
            "print(sorted(m for m in sys.modules if m.startswith('bevviz.lab')))")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
