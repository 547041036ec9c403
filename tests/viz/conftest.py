"""Figure builders validate every plotly property under test (the app skips it for speed)."""

import pytest

from bevviz.viz import common


@pytest.fixture(autouse=True)
def validate_figures(monkeypatch):
    monkeypatch.setattr(common, "VALIDATE", True)
