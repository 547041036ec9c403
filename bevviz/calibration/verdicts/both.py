"""The seam witness's verdict on one camera, and one verdict from both witnesses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration.seams.analysis import SEAM_TRUST_COST
from bevviz.calibration.verdicts.doubts import Basis, Doubt, Why, seam_sentence
from bevviz.calibration.verdicts.lidar import LidarVerdict
from bevviz.calibration.verdicts.rule import INCONCLUSIVE, MISCALIBRATED, OK, SEAMS_FINE_RATIO, STANDOUT_RATIO

__all__ = ["SEAM_CHECKS", "Judgement", "SeamVerdict", "combine", "seam_verdict"]


@dataclass(frozen=True)
class SeamVerdict:
    """The seam witness about one camera.

    Attributes:
        verdict: ``"miscalibrated"``, ``"ok"`` or ``"inconclusive"``.
        why: The doubt (inconclusive) or the basis (sure) with its figures.
    """

    verdict: str
    why: Why

    @property
    def doubt(self) -> Doubt | None:
        """Why it is not surer, None when sure."""
        return self.why.doubt

    @property
    def reason(self) -> str:
        """A readable clause (no camera name), rendered from :attr:`why`."""
        return seam_sentence(self.why)


def _seams_untrusted(quick_score: float, n_seams: int, median_cost: float) -> Why | None:
    if not np.isfinite(median_cost) or median_cost > SEAM_TRUST_COST:
        return Why(Doubt.SEAMS_UNTRUSTED, {"median_cost": median_cost, "trust_cost": SEAM_TRUST_COST})
    return None


def _too_few_seams(quick_score: float, n_seams: int, median_cost: float) -> Why | None:
    return Why(Doubt.TOO_FEW_SEAMS, {"seams": n_seams}) if n_seams < 2 else None


#: The seam verdict's checks, in order (arguments: quick score, seams, rig median cost).
SEAM_CHECKS: tuple[Callable[[float, int, float], Why | None], ...] = (_seams_untrusted, _too_few_seams)


def seam_verdict(quick_score: float, n_seams: int, rig_median_cost: float,
                 ratio: float = STANDOUT_RATIO) -> SeamVerdict:
    """The seam witness's verdict on one camera: :data:`SEAM_CHECKS` in order, then its standout.

    Args:
        quick_score: The camera's quick seam score (its better seam over the rig median).
        n_seams: How many seams the camera has.
        rig_median_cost: The rig's median seam cost (NGF).
        ratio: Standout ratio.
    """
    for check in SEAM_CHECKS:
        why = check(quick_score, n_seams, rig_median_cost)
        if why is not None:
            return SeamVerdict(INCONCLUSIVE, why)
    if quick_score >= ratio:
        return SeamVerdict(MISCALIBRATED, Why(Basis.STANDS_OUT, {"quick_score": quick_score, "ratio": ratio}))
    return SeamVerdict(OK, Why(Basis.IN_LINE, {"quick_score": quick_score}))


@dataclass(frozen=True)
class Judgement:
    """One verdict from both witnesses.

    Attributes:
        verdict: ``"miscalibrated"``, ``"ok"`` or ``"inconclusive"``.
        doubt: Why it is not surer (None when sure).
        reason: The witnesses' sentences joined.
        witnesses: Witness name -> its own verdict.
    """

    verdict: str
    doubt: Doubt | None
    reason: str
    witnesses: dict[str, str] = field(default_factory=dict)


def combine(lidar: LidarVerdict | None, seams: SeamVerdict, quick_score: float) -> Judgement:
    """One verdict from both witnesses (rules in the module docstring)."""
    if lidar is None:
        return Judgement(seams.verdict, seams.doubt, seams.reason, {"seams": seams.verdict})
    witnesses = {"lidar": lidar.verdict, "seams": seams.verdict}
    if ((lidar.verdict == MISCALIBRATED and seams.verdict == OK and quick_score < SEAMS_FINE_RATIO)
            or (lidar.verdict == OK and seams.verdict == MISCALIBRATED)):
        return Judgement(INCONCLUSIVE, Doubt.WITNESSES_DISAGREE,
                         f"witnesses disagree: {lidar.reason}; but {seams.reason}", witnesses)
    if lidar.verdict == INCONCLUSIVE and seams.verdict == OK and lidar.beyond >= 0.5:
        # the seams cannot clear a camera most of the LiDAR's replicates put beyond the tolerance: blurred
        # images' seams agree everywhere (TRI t2 under a 25 px blur: two cameras "ok", 2-3 deg off +- 1-2)
        return Judgement(INCONCLUSIVE, Doubt.WITNESSES_DISAGREE,
                         f"witnesses disagree: {seams.reason}; but {lidar.reason}", witnesses)
    if lidar.verdict == INCONCLUSIVE and seams.verdict != INCONCLUSIVE:
        return Judgement(seams.verdict, seams.doubt, f"seams decide: {seams.reason}; the LiDAR cannot: {lidar.reason}",
                         witnesses)
    return Judgement(lidar.verdict, lidar.doubt, f"{lidar.reason}; seams: {seams.reason}", witnesses)
