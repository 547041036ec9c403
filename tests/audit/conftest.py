"""Shared fixtures of the audit tests: the embedded datasets, their recorded truths, settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bevviz.audit import CheckSettings

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "sample_data" / "nuscenes"
REAL = ROOT / "sample_data" / "real_nuscenes"
#: Seams only (the synthetic sweep is too sparse to judge: the seams decide), no offset estimates: fast.
FAST = CheckSettings(lidar=False, estimate=False)
#: Seams only, with the offset of every flagged camera estimated.
SEAMS = CheckSettings(lidar=False)


def _needs(path: Path) -> Path:
    if not (path / "v1.0-mini").is_dir():
        pytest.skip(f"{path.relative_to(ROOT)} is missing")
    return path


@pytest.fixture(scope="session")
def synthetic_root() -> Path:
    """``sample_data/nuscenes`` (three synthetic scenes); tests skip when it is missing."""
    return _needs(SYNTHETIC)


@pytest.fixture(scope="session")
def real_root() -> Path:
    """``sample_data/real_nuscenes`` (one real keyframe with LIDAR_TOP)."""
    return _needs(REAL)


@pytest.fixture(scope="session")
def drift(synthetic_root) -> dict:
    """The drift scene's truth (``drift.json``)."""
    return json.loads((synthetic_root / "drift.json").read_text())


@pytest.fixture(scope="session")
def miscal(synthetic_root) -> dict:
    """Scene B's truth (``miscalibration.json``)."""
    return json.loads((synthetic_root / "miscalibration.json").read_text())


@pytest.fixture(scope="session")
def fast() -> CheckSettings:
    """:data:`FAST`."""
    return FAST


@pytest.fixture(scope="session")
def seams() -> CheckSettings:
    """:data:`SEAMS`."""
    return SEAMS


def _comparable(table) -> list[dict]:
    rows = [{k: v for k, v in r.items() if k != "runtime_s"} for r in table.to_pylist()]
    return sorted(rows, key=lambda r: (r["sample"], r["camera"] or ""))


@pytest.fixture(scope="session")
def comparable():
    """``comparable(table)``: rows without their run times, in a fixed order (what two runs share)."""
    return _comparable
