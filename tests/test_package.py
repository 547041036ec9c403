"""The package: a wheel that declares its dependencies, carries the embedded samples and the app,
and, installed without the repository, checks an embedded sample from any folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    had_build = (ROOT / "build").exists()
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(out), str(ROOT)], check=True, timeout=300, capture_output=True)
    finally:
        if not had_build:  # setuptools builds in the checkout: leave it as it was
            shutil.rmtree(ROOT / "build", ignore_errors=True)
    (path,) = out.glob("bevviz-*.whl")
    return path


def test_the_wheel_declares_the_runtime_dependencies_and_the_extras(wheel):
    with zipfile.ZipFile(wheel) as z:
        meta = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    requires = meta.get_all("Requires-Dist")
    runtime = {r.split(";")[0].split("=")[0].split("<")[0].split(">")[0].strip() for r in requires if "extra" not in r}
    for name in ("torch", "numpy", "streamlit", "plotly", "nuscenes-devkit", "opencv-python-headless", "onnx",
                 "onnxruntime", "pyarrow", "click", "tqdm"):
        assert name in runtime, (name, requires)
    assert "torch==2.13.0" in requires and "numpy<2" in requires
    assert any(r.startswith("opencv-python-headless==") for r in requires)  # pinned: no backtracking
    assert set(meta.get_all("Provides-Extra")) >= {"ray", "dev"}
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"bevviz": "bevviz.cli:main"}


def test_the_wheel_carries_every_embedded_file_and_the_app(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    shipped = [p for p in (ROOT / "sample_data").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert shipped, "sample_data is empty"
    inside = {f"bevviz/sample_data/{p.relative_to(ROOT / 'sample_data').as_posix()}": p for p in shipped}
    missing = [p for name, p in inside.items() if name not in names]
    assert not missing, missing[:5]  # a new subfolder travels without a change to the build
    for page in (ROOT / "pages").glob("*.py"):
        assert f"appkit/streamlit_app/pages/{page.name}" in names
    assert {"appkit/streamlit_app/app.py", "appkit/streamlit_app/.streamlit/config.toml",
            "bevviz/backend_rules.json", "appkit/sources.py", "bevviz/session/embedded.py"} <= names


def _clean_env() -> dict[str, str]:
    """This process's environment without what would put the repository on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _running_environment_paths() -> list[str]:
    """Where this interpreter finds its packages, as it starts without this test's
    PYTHONPATH: a system interpreter's site-packages, a venv's (and whatever its own .pth
    files add, e.g. a venv made inside another one), a conda env's. The repository itself is
    never among them unless an installed .pth file points there."""
    out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"], env=_clean_env(),
                         cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True, timeout=60)
    return [p for p in json.loads(out.stdout) if p and Path(p).is_dir()]


def see_running_environment(env_dir: Path) -> None:
    """Let the venv at ``env_dir`` import what the running environment has installed, behind
    its own site-packages (so what is installed into the venv wins): one .pth file listing
    the running interpreter's package folders. ``system_site_packages`` would give the *base*
    interpreter's packages instead, which inside a venv or a conda env are not the ones the
    tests run with."""
    own = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import json, site, sys; print(json.dumps([sys.path, "
                          "site.getsitepackages()]))"], env=_clean_env(), capture_output=True, text=True,
                         check=True, timeout=60)
    own_path, (site_packages, *_) = json.loads(own.stdout)
    extra = [p for p in _running_environment_paths() if p not in own_path]
    (Path(site_packages) / "_running_environment.pth").write_text("".join(f"{p}\n" for p in extra))


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / "sample_data" / "rig.json").is_file(), reason="sample_data is missing")
def test_installed_without_the_repository_it_checks_an_embedded_sample_from_another_folder(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    # The dependencies come from the running environment (system, venv or conda); bevviz only
    # from the wheel (installed by this pip into the venv: no ensurepip).
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # Installed before the venv sees the running environment, and without PYTHONPATH: an
    # installed bevviz there (editable, or the checkout's egg-info) would count as installed.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   env=_clean_env(), check=True, timeout=300, capture_output=True)
    see_running_environment(env_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import importlib.util as u; "
                            "print(u.find_spec('bevviz').origin); print(u.find_spec('appkit').origin); "
                            "import cv2, torch, streamlit"],
                           cwd=elsewhere, env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert where.returncode == 0, where.stderr  # the running environment's packages are seen
    bevviz_init, appkit_init = map(Path, where.stdout.split())
    assert env_dir in bevviz_init.parents and env_dir in appkit_init.parents, where.stdout  # not the checkout
    assert (bevviz_init.parent / "sample_data" / "rig.json").is_file()
    assert (appkit_init.parent / "streamlit_app" / "pages").is_dir()
    run = subprocess.run([str(env_dir / "bin" / "bevviz"), "check", "rig", "--no-estimate", "--json", "r.json"],
                         cwd=elsewhere, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "flagged: none" in run.stdout and (elsewhere / "r.json").is_file()
    assert str(env_dir) in run.stdout  # the rig came from the installed package data
