"""The evaluation's summary: a target that was not checked never reads as met."""

from __future__ import annotations

from bevviz.lab.evaluate import Case, summary


def _cases(end_deg: float, accepted: bool) -> list[Case]:
    clean = Case(None, None, 0.0, frame="f")
    fault = Case("CAM", "random", 1.5, frame="f", lidar_named=["CAM"], start_deg=1.5, lidar_accepted=accepted,
                 lidar_end_deg=end_deg)
    timed = Case(None, "timing", 0.3, frame="f")
    return [clean, fault, timed]


def test_skipped_refinements_read_not_run_and_fail_the_summary():
    rows, ok = summary(_cases(float("nan"), False), {})
    assert not ok
    assert any(r.startswith("NOT RUN  accepted LiDAR refinements") for r in rows)
    assert any(r.startswith("NOT RUN  LiDAR refinement never worse") for r in rows)
    assert not any(r.startswith("PASS  LiDAR refinement never worse") for r in rows)


def test_refinements_that_ran_are_judged():
    rows, ok = summary(_cases(0.2, True), {})
    assert ok, rows
    assert any(r.startswith("PASS  accepted LiDAR refinements end within 0.3 deg: 1/1") for r in rows)
    rows, ok = summary(_cases(0.5, True), {})
    assert not ok
    assert any(r.startswith("FAIL  accepted LiDAR refinements") for r in rows)
    rows, ok = summary(_cases(1.5, False), {})  # ran, none accepted: nothing to judge, not a failure
    assert ok, rows
    assert any("none of the 1 refinements was accepted" in r for r in rows)


def test_timing_cases_are_a_target():
    cases = _cases(0.2, True)
    rows, ok = summary(cases[:2], {})
    assert not ok and any(r.startswith("NOT RUN  LiDAR on the unperturbed rigs with the LiDAR displaced") for r in rows)
    cases[2].lidar_named = ["CAM"]
    rows, ok = summary(cases, {})
    assert not ok and any(r.startswith("FAIL  LiDAR on the unperturbed rigs with the LiDAR displaced") for r in rows)
