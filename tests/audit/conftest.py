"""Fixtures of the audit tests: the embedded datasets' recorded truths, check settings, row comparison
(the dataset roots themselves are tests/conftest.py's)."""

from __future__ import annotations

import json

import pytest

from bevviz.audit import CheckSettings

#: Seams only (the synthetic sweep is too sparse to judge: the seams decide), no offset estimates: fast.
FAST = CheckSettings(lidar=False, estimate=False)
#: Seams only, with the offset of every flagged camera estimated.
SEAMS = CheckSettings(lidar=False)


@pytest.fixture(scope="session")
def drift(nuscenes_root) -> dict:
    """The drift scene's truth (``drift.json``)."""
    return json.loads((nuscenes_root / "drift.json").read_text())


@pytest.fixture(scope="session")
def miscal(nuscenes_root) -> dict:
    """Scene B's truth (``miscalibration.json``)."""
    return json.loads((nuscenes_root / "miscalibration.json").read_text())


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
