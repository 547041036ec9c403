"""Choosing the verdict's constants on some rigs and testing them on another (leave-one-rig-out).

A case of :mod:`~bevviz.lab.evaluate` keeps what its verdicts can be re-judged from
(:class:`Stored`: the evidence of every camera, the rig consensus, the seam verdicts), so a
:class:`~bevviz.calibration.verdicts.VerdictRule` is tried on stored cases without
measuring anything again. :func:`leave_one_rig_out` chooses, for each rig, the rule of
``RULE_GRID`` with no false alarm and no wrong camera on the *other* rigs that names the
most faults there (ties: the strictest), and gives its result on the held-out rig.

Convention:
    A case is anything with ``camera`` (the turned camera, None for an unperturbed rig)
    and ``frame`` (its frame's name), as :class:`bevviz.lab.evaluate.Case`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from bevviz.calibration.lidar.consensus import RigConsensus
from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.calibration.verdicts import (
    MISCALIBRATED,
    RULE,
    SeamVerdict,
    VerdictRule,
    combine,
    lidar_verdict,
    seam_verdict,
)
from bevviz.camera import Rig

__all__ = ["RULE_GRID", "Stored", "choose", "judge", "leave_one_rig_out", "rig_key", "rules", "score_rule", "stored"]

#: The verdict constants the leave-one-rig-out search tries (each combination).
RULE_GRID = {"z_gap": (0.5, 0.75, 1.0), "half_gain": (0.5, 0.75, 1.0), "half_agree_deg": (1.0, 1.5),
             "z_structure": (1.0, 1.5), "max_sd_deg": (0.5, 0.7), "z_reject": (1.0, 1.5, 2.0),
             "half_reject": (0.5, 1.0), "axis_drop": (0.5, 0.75)}


class _Case(Protocol):
    camera: str | None
    frame: str


@dataclass
class Stored:
    """What a case's verdicts can be re-judged from: the evidence, the consensus, the seams."""

    rig: Rig
    evidence: dict[str, CameraEvidence]
    consensus: RigConsensus
    seams: dict[str, tuple[SeamVerdict, float]]


def stored(rig: Rig, evidence: dict[str, CameraEvidence], found) -> Stored:
    """What a diagnosis ``found`` (:func:`~bevviz.calibration.diagnose.diagnose`'s findings) of
    ``rig`` can be re-judged from."""
    return Stored(rig, evidence, found.consensus,
                  {f.camera: (seam_verdict(f.quick_score, len(f.seams), found.seam_median), f.quick_score)
                   for f in found})


def judge(case: Stored, rule: VerdictRule) -> list[str]:
    """Cameras named "miscalibrated" under ``rule`` (as :func:`diagnose` judges them)."""
    named = []
    for cam, ev in case.evidence.items():
        seams, quick = case.seams[cam]
        if combine(lidar_verdict(ev, case.consensus, rule=rule), seams, quick).verdict == MISCALIBRATED:
            named.append(cam)
    return named


def rules(grid: dict = RULE_GRID) -> list[VerdictRule]:
    """Every combination of ``grid``'s values, the shipped rule's other constants kept."""
    keys = list(grid)
    return [replace(RULE, **dict(zip(keys, vals))) for vals in itertools.product(*(grid[k] for k in keys))]


def score_rule(rule: VerdictRule, cases: Sequence[_Case], stores: Sequence[Stored]) -> tuple[int, int, int, int]:
    """(false alarms, wrong, named, faults) of ``rule`` on stored cases."""
    fa = wrong = named = n = 0
    for c, s in zip(cases, stores):
        got = judge(s, rule)
        if c.camera is None:
            fa += len(got)
        else:
            n += 1
            named += c.camera in got
            wrong += len([g for g in got if g != c.camera])
    return fa, wrong, named, n


def choose(cases: Sequence[_Case], stores: Sequence[Stored], candidates: Sequence[VerdictRule]) -> VerdictRule:
    """The rule with no false alarm and no wrong camera that names the most faults (ties: the
    strictest, i.e. the largest thresholds)."""
    best, key = candidates[-1], None
    for r in candidates:
        fa, wrong, named, _ = score_rule(r, cases, stores)
        if fa or wrong:
            continue
        k = (named, r.z_gap + r.half_gain + r.z_structure + r.z_reject + r.half_reject + r.axis_drop
             - r.half_agree_deg - r.max_sd_deg)
        if key is None or k > key:
            best, key = r, k
    return best


def rig_key(rig: Rig) -> str:
    """A rig's name for the table: its camera when it has one, else the count and the first."""
    names = rig.names
    return names[0] if len(names) == 1 else f"{len(names)} cameras ({names[0]}, ...)"


def leave_one_rig_out(cases: Sequence[_Case], stores: Sequence[Stored], rigs: dict[str, str],
                      grid: dict = RULE_GRID) -> tuple[list[str], dict]:
    """The leave-one-rig-out table: per rig, the rule chosen on the others and its result there.

    Args:
        cases, stores: From :func:`~bevviz.lab.evaluate.evaluate_frames`.
        rigs: Frame name -> rig name (frames of one rig share their camera names).
        grid: The constants tried.

    Returns:
        (table lines, totals {"false_alarms", "wrong", "named", "faults"}).
    """
    candidates = rules(grid)
    head = (f"{'held-out rig':<28} {'rule chosen on the other rigs':<128} {'false alarms':>12} {'wrong':>5} "
            f"{'named':>12}")
    rows = [head, "-" * len(head)]
    tot = np.zeros(4, dtype=int)
    for rig in dict.fromkeys(rigs.values()):
        train = [(c, s) for c, s in zip(cases, stores) if rigs[c.frame] != rig]
        test = [(c, s) for c, s in zip(cases, stores) if rigs[c.frame] == rig]
        r = choose([c for c, _ in train], [s for _, s in train], candidates)
        fa, wrong, named, n = score_rule(r, [c for c, _ in test], [s for _, s in test])
        tot += (fa, wrong, named, n)
        text = (f"z_gap {r.z_gap:g}, half_gain {r.half_gain:g}, half_agree {r.half_agree_deg:g}, "
                f"z_structure {r.z_structure:g}, max_sd {r.max_sd_deg:g}, z_reject {r.z_reject:g}, "
                f"half_reject {r.half_reject:g}, axis_drop {r.axis_drop:g}")
        rows.append(f"{rig:<28} {text:<128} {fa:>12} {wrong:>5} {named:>4}/{n:<3} ({named / max(n, 1):4.0%})")
    rows.append(f"{'TOTAL':<28} {'':<128} {tot[0]:>12} {tot[1]:>5} {tot[2]:>4}/{tot[3]:<3} "
                f"({tot[2] / max(tot[3], 1):4.0%})")
    return rows, {"false_alarms": int(tot[0]), "wrong": int(tot[1]), "named": int(tot[2]), "faults": int(tot[3])}
