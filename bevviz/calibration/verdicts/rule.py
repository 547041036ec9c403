"""The verdict's constants (:class:`VerdictRule` and the fixed ones) and the rig-level doubt.

docs/calibration.md (tuning table) says on what each constant was chosen and which
command tests it again.

Convention:
    Offsets in body-frame (FLU) degrees (docs/conventions.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bevviz.calibration.lidar.consensus import RigConsensus
from bevviz.calibration.verdicts.doubts import Doubt, Why, rig_sentence

__all__ = [
    "ANCHOR_MAX_DROP_Z", "ANCHOR_MAX_OFFSET_DEG", "ANCHOR_MIN_Z", "CONFIDENCE", "FLAT_CONTRAST", "INCONCLUSIVE",
    "MAX_MEDIAN_DEPTH_M", "MIN_ANCHORS", "MIN_CLUSTERS", "MIN_EDGE_POINTS", "MIN_MEDIAN_DEPTH_M", "MISCALIBRATED",
    "OK", "PAIR_NOTE", "RULE", "SECOND_LOOK_RULE", "SEAMS_FINE_RATIO", "STANDOUT_RATIO", "TOLERANCE_DEG",
    "VERDICTS", "VerdictRule", "anchors", "lidar_doubt", "rig_doubt",
]

MISCALIBRATED, OK, INCONCLUSIVE = "miscalibrated", "ok", "inconclusive"
VERDICTS = (MISCALIBRATED, INCONCLUSIVE, OK)  # worst first
#: Largest rotation error (degrees, the angle a camera is turned) that counts as calibrated.
TOLERANCE_DEG = 0.5
#: Share of bootstrap replicates needed for a verdict either way.
CONFIDENCE = 0.9
#: Fewest visible edge points, and image cells holding them, for a LiDAR verdict.
MIN_EDGE_POINTS = 60
MIN_CLUSTERS = 8
# The fewest visible edge points per frame for a "miscalibrated" verdict, MIN_VERDICT_POINTS,
# lives in bevviz.calibration.lidar.alignment (where it also picks the edges a camera is scored on).

#: Other cameras that must line up with the LiDAR at their stored pose before one camera of a
#: rig is called miscalibrated (fewer when the rig has fewer other cameras with evidence). A
#: camera lines up when its landscape has structure (optimum at least ``ANCHOR_MIN_Z`` robust z
#: above a typical rotation), its stored pose stands less than ``ANCHOR_MAX_DROP_Z`` below the
#: optimum, and the optimum lies within ``ANCHOR_MAX_OFFSET_DEG`` of the stored pose on every
#: axis. Fixed constants, not the verdict rule's (docs/calibration.md, tuning table).
MIN_ANCHORS = 2
ANCHOR_MIN_Z = 1.0
ANCHOR_MAX_DROP_Z = 1.0
ANCHOR_MAX_OFFSET_DEG = 1.0
#: Plausible median depth (metres) of a camera's LiDAR edge points: an automotive LiDAR in
#: metres sees its edges a few to a few tens of metres away; a median beyond 300 m (or under
#: 1 m) is a scan in another unit.
MIN_MEDIAN_DEPTH_M = 1.0
MAX_MEDIAN_DEPTH_M = 300.0
#: Smallest gain of the optimum's score over the search grid's median (a flat score below).
FLAT_CONTRAST = 0.02
#: Quick seam score (a camera's better seam / rig median) from which a camera stands out.
STANDOUT_RATIO = 2.0
#: Quick seam score below which a camera's seams are clearly fine.
SEAMS_FINE_RATIO = 1.2


@dataclass(frozen=True)
class VerdictRule:
    """The constants of the LiDAR verdict, in one place (the laboratory tunes and tests them
    leave-one-rig-out: ``python -m bevviz.lab.evaluate --loro``; docs/calibration.md).

    Attributes:
        tolerance_deg: Largest rotation error (the angle turned,
            :func:`~bevviz.rotations.offset_angle_deg`) that counts as calibrated.
        z_structure: Smallest robust z of the optimum within the score landscape
            (:attr:`~bevviz.calibration.lidar.evidence.CameraEvidence.z_best`): below it the
            image and LiDAR edges do not single out any rotation (noise images, a blank wall).
        z_gap: Smallest drop (robust z) from the optimum to the stored calibration for the
            stored pose to be rejected.
        half_gain: Smallest gain (robust z) of the optimum over the stored pose within *each*
            image half: the offset must be supported by both halves.
        half_agree_deg: Largest disagreement (degrees, any axis) between the two halves' own optima.
        edge_margin_deg: An optimum within this of the search's edge (the radius searched in
            the end, :attr:`~bevviz.calibration.lidar.evidence.CameraEvidence.radius_deg`: the
            search widens up to ``MAX_RADIUS_DEG`` while its optimum lies at the edge) is no
            optimum: the landscape keeps rising outside the search.
        confidence: Share of bootstrap replicates beyond the tolerance needed.
        max_sd_deg: Largest bootstrap spread (degrees) of a principal direction that takes
            part in a *located* verdict (path A): a direction known no better than this says
            nothing (:func:`~bevviz.calibration.lidar.pinned.pinned_offset`).
        z_reject: Smallest drop (robust z) from the optimum to the stored pose that rejects
            it without locating the camera (path B).
        half_reject: Smallest gain (robust z) of the optimum over the stored pose within
            each image half for path B.
        flat_contrast: Smallest gain of the optimum's coarse score over the search grid's
            median (:attr:`~bevviz.calibration.lidar.evidence.CameraEvidence.score_median`):
            below it the score is flat, whatever its robust z.
        axis_drop: Smallest drop of the score (robust z) when one axis the camera is off on
            (its residual beyond the tolerance) is set back to its stored value, the other
            two kept at the optimum
            (:attr:`~bevviz.calibration.lidar.evidence.CameraEvidence.axis_drop_z`): at least
            one such axis must show it (path A; path B's rejection is the landscape's own).
            An optimum that slides along a flat valley of the landscape is no evidence on
            that axis, however tight its bootstrap (the bootstrap measures noise, not bias).
    """

    tolerance_deg: float = TOLERANCE_DEG
    z_structure: float = 1.0
    z_gap: float = 0.75
    half_gain: float = 0.75
    half_agree_deg: float = 1.5
    edge_margin_deg: float = 0.5
    confidence: float = CONFIDENCE
    max_sd_deg: float = 0.7
    z_reject: float = 1.5
    half_reject: float = 1.0
    axis_drop: float = 0.75
    flat_contrast: float = FLAT_CONTRAST


#: The shipped rule (docs/calibration.md: on what it was chosen, with which margin).
RULE = VerdictRule()
#: The rule a second look is judged by
#: (:attr:`~bevviz.calibration.lidar.evidence.CameraEvidence.second_look`: attraction less its
#: local mean). Its landscapes stand about twice as many robust z above their median as the
#: first look's (clean optima 3.6-8.4 z against 1.7-5.1), so the drops it asks for are
#: about twice the first look's too; chosen on stored evidence of the development frames with
#: the local mean taken off every camera's maps (docs/calibration.md, "A second look"), where
#: the clean cameras' stored poses stood at most 1.8 z below their optima.
SECOND_LOOK_RULE = VerdictRule(z_gap=3.0, z_reject=3.5, half_gain=1.5, flat_contrast=0.035)

#: Said of a one-camera rig.
PAIR_NOTE = ("one camera: judged as a camera-LiDAR pair, so an offset cannot tell the camera's mounting from "
             "the LiDAR's")


def anchors(landscapes: Mapping[str, tuple[float, float, float]], exclude: str | None = None) -> list[str]:
    """Cameras that line up with the LiDAR where they are stored: a structured landscape
    (optimum at least ``ANCHOR_MIN_Z`` robust z above a typical rotation) with the stored pose
    less than ``ANCHOR_MAX_DROP_Z`` below the optimum and the optimum within
    ``ANCHOR_MAX_OFFSET_DEG`` of it (``landscapes``: camera -> (z of the optimum, z of the
    stored pose, worst-axis degrees between them), :attr:`RigConsensus.landscapes`)."""
    return [n for n, (zb, zs, off) in landscapes.items()
            if n != exclude and zb >= ANCHOR_MIN_Z and zb - zs < ANCHOR_MAX_DROP_Z and off <= ANCHOR_MAX_OFFSET_DEG]


def rig_doubt(consensus: RigConsensus | None) -> Why | None:
    """:attr:`Doubt.LIDAR_LOOKS_OFF` when fewer than ``MIN_ANCHORS`` cameras (and fewer than
    half) of a rig of two or more line up with the LiDAR where they are stored: then the
    LiDAR itself looks off and no camera is judged against it; None otherwise."""
    seen = {} if consensus is None else consensus.landscapes
    lined = anchors(seen)
    if len(seen) < 2 or len(lined) >= MIN_ANCHORS or 2 * len(lined) >= len(seen):
        return None
    return Why(Doubt.LIDAR_LOOKS_OFF, {"lined": tuple(lined), "cameras": len(seen)})


def lidar_doubt(consensus: RigConsensus | None) -> str:
    """:func:`rig_doubt` as a sentence; "" when there is none."""
    why = rig_doubt(consensus)
    return "" if why is None else rig_sentence(why)
