"""The Doctor page's verdict sentence (appkit.doctor.named_markdown): "no camera" is never a clean bill
for cameras the witness could not judge."""

from __future__ import annotations

from appkit.doctor import named_markdown
from bevviz.calibration import INCONCLUSIVE, MISCALIBRATED, OK, CameraFinding

from .conftest import shown

HEAD = "Miscalibrated: no camera (turned more than 0.5 deg, in 90% of the bootstrap replicates)."


def _found(*verdicts: str) -> list[CameraFinding]:
    return [CameraFinding(f"CAM_{i}", 0.0, "", verdict=v) for i, v in enumerate(verdicts)]


def test_a_named_camera_is_the_sentence():
    line = shown(named_markdown(_found(MISCALIBRATED, INCONCLUSIVE, OK)))
    assert line == "Miscalibrated: CAM_0 (turned more than 0.5 deg, in 90% of the bootstrap replicates)."


def test_none_named_says_how_many_were_judged():
    assert shown(named_markdown(_found(OK, OK))) == HEAD
    assert shown(named_markdown(_found(OK, INCONCLUSIVE, INCONCLUSIVE))) == (
        f"{HEAD} 1 judged ok, 2 inconclusive (why: below).")
    assert shown(named_markdown(_found(INCONCLUSIVE, INCONCLUSIVE))) == (
        f"{HEAD} But none is judged ok either: all 2 are inconclusive (why: below).")
