"""bevviz.lab.rule_search: the verdict's constants chosen on some rigs, tested on another."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from bevviz.calibration.lidar.consensus import RigConsensus
from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.calibration.verdicts import RULE, VerdictRule, seam_verdict
from bevviz.lab.rule_search import RULE_GRID, Stored, choose, judge, leave_one_rig_out, rules, score_rule


@dataclass
class _Case:
    camera: str | None
    frame: str


def _stored(gap_z: float, offset_deg: float = 1.5) -> Stored:
    """One camera, CAM_X, off by ``offset_deg`` in yaw (tightly bootstrapped), its stored pose
    ``gap_z`` robust z below the optimum (landscape: median 0.70, spread 0.02, optimum 0.80)."""
    off = np.array([0.0, 0.0, offset_deg])
    ev = CameraEvidence("CAM_X", off, off + np.random.default_rng(0).normal(0, 0.05, (24, 3)), n_points=400,
                        n_clusters=40, score_best_coarse=0.80, score_median=0.70, score_spread=0.02,
                        score_stored_coarse=0.80 - 0.02 * gap_z, halves_deg=np.array([off, off]),
                        half_gain=np.array([2.0, 2.0]))
    return Stored(rig=None, evidence={"CAM_X": ev}, consensus=RigConsensus(),
                  seams={"CAM_X": (seam_verdict(1.0, 1, 0.06), 1.0)})  # one seam: the seams cannot judge


GRID = {"z_gap": (0.5, 0.75, 1.25)}


def test_rules_are_every_combination_of_the_grid_with_the_shipped_rule_elsewhere():
    got = rules({"z_gap": (0.5, 1.0), "axis_drop": (0.5, 0.75)})
    assert [(r.z_gap, r.axis_drop) for r in got] == [(0.5, 0.5), (0.5, 0.75), (1.0, 0.5), (1.0, 0.75)]
    assert all(r.tolerance_deg == RULE.tolerance_deg and r.half_gain == RULE.half_gain for r in got)
    assert set(RULE_GRID) <= {f for f in VerdictRule.__dataclass_fields__}
    assert all(getattr(RULE, k) in v for k, v in RULE_GRID.items())  # the shipped rule is one of the grid's


def test_judge_and_score_count_false_alarms_named_and_wrong():
    far = _stored(1.0)
    assert judge(far, RULE) == ["CAM_X"] and judge(far, VerdictRule(z_gap=1.25)) == []
    cases = [_Case(None, "a"), _Case("CAM_X", "a"), _Case("CAM_Y", "a")]
    # a clean rig named (a false alarm), a fault named, a fault of CAM_Y with CAM_X named (wrong)
    assert score_rule(RULE, cases, [far, far, far]) == (1, 1, 1, 2)


def test_choose_drops_rules_with_a_false_alarm_then_names_most_then_is_strictest():
    cases = [_Case(None, "a"), _Case("CAM_X", "a")]
    # the clean camera stands 0.6 z below its optimum: z_gap 0.5 calls it a false alarm
    assert choose(cases, [_stored(0.6), _stored(1.0)], rules(GRID)).z_gap == 0.75
    # every rule names the fault (2 z) and none raises a false alarm: the strictest
    assert choose(cases, [_stored(0.2), _stored(2.0)], rules(GRID)).z_gap == 1.25


def test_leave_one_rig_out_tests_each_rig_on_the_rule_chosen_on_the_others():
    cases = [_Case(None, "a1"), _Case("CAM_X", "a1"), _Case(None, "b1"), _Case("CAM_X", "b1")]
    stores = [_stored(0.6), _stored(1.0), _stored(0.2), _stored(0.6)]
    rows, totals = leave_one_rig_out(cases, stores, {"a1": "rig A", "b1": "rig B"}, grid=GRID)
    # held out A: chosen on B (no false alarm at any z_gap; 0.5 names B's fault) -> A's clean
    # camera is a false alarm. Held out B: chosen on A (0.75) -> B's fault (0.6 z) is missed.
    assert totals == {"false_alarms": 1, "wrong": 0, "named": 1, "faults": 2}
    assert rows[2].startswith("rig A") and "z_gap 0.5," in rows[2] and rows[2].split()[-4:-1] == ["1", "0", "1/1"]
    assert rows[3].startswith("rig B") and "z_gap 0.75," in rows[3] and "axis_drop 0.75" in rows[3]
    assert rows[-1].startswith("TOTAL")


@pytest.mark.parametrize("gap", [0.6, 1.0])
def test_the_offset_must_be_beyond_the_tolerance_to_be_named(gap):
    assert judge(_stored(gap, offset_deg=0.3), VerdictRule(z_gap=0.5)) == []
