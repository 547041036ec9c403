"""Why the doctor is (not) sure, as data, and the sentences read from it.

A verdict of :mod:`bevviz.calibration.verdicts` is decided by an ordered list of named
checks. Each check that stops the doctor from being sure raises a :class:`Doubt`; a sure
verdict rests on a :class:`Basis`. Either comes as a :class:`Why` with the figures it was
decided on, and every sentence the user reads (``CameraFinding.reason``) is rendered from
a :class:`Why` afterwards (:func:`lidar_sentence`, :func:`seam_sentence`). Tests and
callers ask ``finding.doubt is Doubt.FLAT_SCORE``, never the wording.

The figures a sentence needs travel in :attr:`Why.figures` (thresholds included), so this
module knows no constant of the verdict; docs/calibration.md explains each doubt.

Convention:
    Offsets in body-frame (FLU) degrees (roll, pitch, yaw), see
    :mod:`bevviz.calibration.lidar.evidence` and docs/conventions.md.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration.lidar.alignment import AXES

__all__ = ["ACCUSED_DOUBTS", "Basis", "Doubt", "Why", "format_axes", "lidar_sentence", "rig_sentence", "seam_sentence"]


class Doubt(enum.Enum):
    """What keeps the doctor from a sure verdict on a camera (the verdict is then
    "inconclusive"); the value is a short name for tables."""

    # The LiDAR cannot judge the camera at all.
    TOO_FEW_EDGE_POINTS = "too few LiDAR edge points"
    NOT_IN_METRES = "the scan is not in metres"
    FLAT_SCORE = "the alignment score is flat"
    # The LiDAR moves the camera beyond the tolerance, but ...
    SPARSE_CLOUD = "too few edge points per frame to convict"
    LIDAR_MAY_BE_OFF = "too few other cameras line up with the LiDAR"
    AT_SEARCH_EDGE = "the optimum lies at the search's edge"
    STORED_POSE_CLOSE = "the stored pose scores almost as well"
    HALF_UNSUPPORTED = "an image half does not support the offset"
    FLAT_VALLEY = "the axes the landscape holds do not carry the offset"
    HALVES_APART = "the image halves put it at different rotations"
    OTHERS_EXPLAIN = "within the tolerance of where the other cameras put it"
    TIMING = "a LiDAR displacement along the car explains it"
    FRAME_SET_ASIDE = "a frame was set aside: the frames do not agree"
    # The LiDAR does not convict it, nor clear it.
    NOT_PINNED = "the offset is not pinned down"
    RIG_OFF = "the whole rig is off against the LiDAR"
    SPLIT = "the bootstrap evidence is split"
    # The seams.
    SEAMS_UNTRUSTED = "the seams cannot judge this rig"
    TOO_FEW_SEAMS = "fewer than two seams"
    NO_FOOTPRINT = "no footprint on the known ground texture"
    # Both witnesses, and the scan itself.
    WITNESSES_DISAGREE = "the witnesses disagree"
    SCAN_WITHOUT_INTENSITY_OR_MOTION = "the scan has neither intensity nor ego motion"
    SCAN_WITHOUT_MOTION = "the scan came without the ego motion to the exposures"
    IMAGE_WITHOUT_EDGES = "the image shows too little of the LiDAR's edges"
    IMAGE_TOO_BLURRED = "the image's edges are too broad to place the camera"
    # The rig as a whole (Diagnosis.lidar_doubt).
    LIDAR_LOOKS_OFF = "almost no camera lines up with the LiDAR"


#: The doubts that can stand between an accusation (the LiDAR moves a camera beyond the
#: tolerance) and "miscalibrated", in the order they are checked.
ACCUSED_DOUBTS = (Doubt.SPARSE_CLOUD, Doubt.LIDAR_MAY_BE_OFF, Doubt.AT_SEARCH_EDGE, Doubt.STORED_POSE_CLOSE,
                  Doubt.HALF_UNSUPPORTED, Doubt.FLAT_VALLEY, Doubt.HALVES_APART, Doubt.OTHERS_EXPLAIN, Doubt.TIMING,
                  Doubt.FRAME_SET_ASIDE)


class Basis(enum.Enum):
    """What a sure verdict rests on."""

    LOCATED = "located beyond the tolerance"  # LiDAR, miscalibrated (path A)
    REJECTED = "stored pose rejected"  # LiDAR, miscalibrated (path B)
    WITHIN = "within the tolerance"  # LiDAR, ok
    STANDS_OUT = "its seams stand out"  # seams, miscalibrated
    IN_LINE = "its seams are in line"  # seams, ok


@dataclass(frozen=True)
class Why:
    """A doubt or a basis with the figures it was decided on.

    Attributes:
        kind: A :class:`Doubt` (the verdict is "inconclusive") or a :class:`Basis`.
        figures: Name -> value (numbers, tuples of numbers, words) the sentence quotes.
    """

    kind: Doubt | Basis
    figures: Mapping[str, object] = field(default_factory=dict)

    @property
    def doubt(self) -> Doubt | None:
        """The :class:`Doubt`, or None for a basis (a sure verdict)."""
        return self.kind if isinstance(self.kind, Doubt) else None

    def __getitem__(self, name: str):
        return self.figures[name]


def format_axes(v: np.ndarray, unc: np.ndarray | None = None) -> str:
    """``"roll +0.12, pitch -0.30, yaw +0.05"`` of a (3,) offset in degrees, each with
    ``+- u`` when uncertainties ``unc`` (3,) are given."""
    if unc is None:
        return ", ".join(f"{a} {x:+.2f}" for a, x in zip(AXES, v))
    return ", ".join(f"{a} {x:+.2f} +- {u:.2f}" for a, x, u in zip(AXES, v, unc))


def _accused_clause(w: Why) -> str:
    """The clause after "the LiDAR alignment moves it (...), but" for a doubt of an accusation."""
    k = w.kind
    if k is Doubt.SPARSE_CLOUD:
        return (f"only {w['per_frame']:.0f} edge points per frame support it (at least {w['needed']} to call "
                "a camera miscalibrated: a sparse cloud places its edges too coarsely, and more frames of it "
                "do not make them finer)")
    if k is Doubt.LIDAR_MAY_BE_OFF:
        return (f"only {w['lined']} of the rig's {w['others']} other cameras line up with the LiDAR where "
                f"they are stored (their best rotation within {w['max_offset_deg']:g} deg and "
                f"{w['max_drop_z']:g} robust z of it; at least {w['needed']} needed): the LiDAR itself may be off "
                "(points in the sensor's frame instead of the car's, a wrong height or sweep) rather than this "
                "camera")
    if k is Doubt.AT_SEARCH_EDGE:
        return (f"the best alignment lies at the edge of the +-{w['radius_deg']:g} deg search "
                f"({format_axes(w['offset_deg'])} deg): the score keeps rising outside it, so it is no "
                "optimum")
    if k is Doubt.STORED_POSE_CLOSE:
        return (f"the stored pose scores almost as well as the best one (robust z {w['z_stored']:.1f} vs "
                f"{w['z_best']:.1f} within the +-{w['radius_deg']:g} deg landscape; a drop of {w['z_gap']:g} is "
                "needed to reject it)")
    if k is Doubt.HALF_UNSUPPORTED:
        return (f"the offset is not supported by both image halves (gain over the stored pose: left "
                f"{w['half_gain'][0]:+.1f}, right {w['half_gain'][1]:+.1f} robust z; "
                f"{w['needed']:g} needed in each)")
    if k is Doubt.FLAT_VALLEY:
        held = (f"only {' and '.join(w['held_axes'])} is held by the landscape, and it carries "
                f"{w['held_deg']:.2f} deg of the offset (more than {w['tolerance_deg']:g} needed); "
                if "held_axes" in w.figures else "no axis it is off on is held there by the landscape: ")
        return (f"{held}setting {' or '.join(w['axes'])} back to the stored value (the "
                f"other axes at the best alignment) costs at most {w['drop_z']:.1f} robust z "
                f"({w['needed']:g} needed on one of them): the best alignment slides along a flat valley "
                "of the score, which a model error (lens distortion left in the images, wrong intrinsics) "
                "can tilt as much as a rotation")
    if k is Doubt.HALVES_APART:
        return (f"the two image halves put it at different rotations (left {format_axes(w['left_deg'])}, right "
                f"{format_axes(w['right_deg'])} deg: {w['apart_deg']:.1f} deg apart, at most {w['max_deg']:g})")
    if k is Doubt.OTHERS_EXPLAIN:
        return (f"it is within {w['tolerance_deg']:g} deg of where the other cameras alone put it "
                f"({format_axes(w['from_others_deg'])} deg): the verdict would hang on how the rest of the rig is "
                "modelled")
    if k is Doubt.TIMING:
        return (f"a displacement of the LiDAR points by {w['shift_m']:+.1f} m along the car's axis "
                f"explains the evidence as well, with the camera within {w['tolerance_deg']:g} deg of where "
                f"{'the rig' if w['by_rig'] else 'the LiDAR itself'} puts it "
                f"({format_axes(w['from_reference_deg'])} deg): a "
                "LiDAR-camera timing error on a moving car (or a translation error of the calibration) looks "
                "like this rotation")
    if k is Doubt.FRAME_SET_ASIDE:
        frames = " and ".join(str(f) for f in w["frames"])
        return (f"frame {frames} of the drive was set aside ({w['reason']}), and a camera is convicted only where "
                f"every frame agrees: the {w['kept']} frames kept may clear a camera, not convict it")
    raise AssertionError(f"not a doubt of an accusation: {k}")


def _second_look_clause(w: Why) -> str:
    """"; seen on a second look ..." where ``w`` is a second look's (it carries the first
    look's doubt, ``first_doubt``), else ""."""
    if "first_doubt" not in w.figures:
        return ""
    if "first_offset_deg" in w.figures:
        first = (f"the first look's best alignment lay at the edge of its +-{w['first_radius_deg']:g} deg search "
                 f"({format_axes(w['first_offset_deg'])} deg)")
    else:
        first = f"the first look was unsure ({Doubt(w['first_doubt']).value})"
    return (f"; seen on a second look, at image edges less their local mean: {first}, where a textured region "
            "(foliage, a tree line) scores for its texture")


def lidar_sentence(camera: str, w: Why, own: str, support: str) -> str:
    """The LiDAR witness's sentence about ``camera``, read from ``w``.

    Args:
        camera: The camera's name.
        w: The doubt or basis of the verdict (:func:`bevviz.calibration.verdicts.lidar_verdict`).
        own: ``"its own offset roll +0.10 +- 0.05, ..."``: the camera's residual in words.
        support: ``"400 edge points (300 depth, 100 reflectivity)"``.
    """
    k = w.kind
    if k is Doubt.TOO_FEW_EDGE_POINTS:
        return (f"{camera}: too few LiDAR edge points to judge ({w['n_points']} in {w['n_clusters']} image cells; "
                f"at least {w['min_points']} in {w['min_clusters']} needed)")
    if k is Doubt.NOT_IN_METRES:
        return (f"{camera}: the LiDAR edge points lie a median {w['depth_m']:.3g} m in front of the camera (a "
                f"scan in metres puts them {w['min_m']:g} to {w['max_m']:g} m away): the "
                "scan is probably not in metres (millimetres? centimetres?), so it cannot judge the camera")
    if k is Doubt.FLAT_SCORE:
        return (f"{camera}: the LiDAR alignment score is flat (the best rotation stands {w['z_best']:.1f} "
                f"robust z above a typical one within +-{w['radius_deg']:g} deg, at least {w['z_structure']:g} "
                f"needed; best {w['best']:.3f} vs {w['typical']:.3f} typical): the "
                "image edges do not pin the rotation down (too little structure, or noise)")
    if k in ACCUSED_DOUBTS:
        return f"{camera}: the LiDAR alignment moves it ({own}), but {_accused_clause(w)}; {support}"
    if k is Doubt.NOT_PINNED:
        return (f"{camera}: the LiDAR alignment moves it ({own}), but the offset is not pinned down: its "
                f"bootstrap spread is {w['spread_deg']:.2f} deg on {w['axis']} (at most "
                f"{w['max_sd_deg']:g}; {w['pinned']}) and the stored pose is not "
                f"rejected either (robust z {w['z_stored']:.1f} "
                f"vs {w['z_best']:.1f}: a drop of {w['z_reject']:g} with both halves agreeing is needed); "
                f"{support}")
    if k is Doubt.RIG_OFF:
        return (f"{camera}: {w['cameras']} cameras are off against the LiDAR by the same rotation "
                f"(LiDAR rotation {format_axes(w['lidar_rotation_deg'])} deg in the ego frame, "
                f"common pitch {w['common_pitch_deg']:+.2f} deg); the LiDAR-to-ego "
                f"calibration (or the LiDAR's height) is the suspect, not this camera; {own}")
    if k is Doubt.SPLIT:
        if "raw_deg" in w.figures:  # not split: the rig consensus and the LiDAR alone disagree
            return (f"{camera}: {w['beyond']:.0%} of the replicates put its own offset (against where the "
                    f"other cameras put the LiDAR) more than {w['tolerance_deg']:g} deg off, but against "
                    f"the LiDAR alone it is turned {w['raw_deg']:.2f} deg, within the tolerance: {own}; {support}")
        return (f"{camera}: the LiDAR evidence is split ({w['beyond']:.0%} of the replicates put it more than "
                f"{w['tolerance_deg']:g} deg off): {own}; {support}")
    if k is Basis.WITHIN:
        return (f"{camera}: within {w['tolerance_deg']:g} deg of the LiDAR edges in {w['within']:.0%} of the "
                f"replicates: {own}; {support}{_second_look_clause(w)}")
    if k in (Basis.LOCATED, Basis.REJECTED):
        if k is Basis.LOCATED:
            how = (f"turned more than {w['tolerance_deg']:g} deg in at least {w['confidence']:.0%} of "
                   f"the bootstrap replicates, wherever it lies along what the evidence leaves free (it pins down "
                   f"{w['pinned']})")
        else:
            how = (f"the stored pose stands {w['gap_z']:.1f} robust z below the best alignment (at least "
                   f"{w['z_reject']:g}) and each image half alone prefers the best one by at least "
                   f"{w['half_reject']:g}; where the camera really points is known only as well as the spread says")
        return (f"{camera}: the LiDAR rejects the stored pose: {how}, {own}; the stored pose is {w['gap_z']:.1f} "
                f"robust z below the best in the +-{w['radius_deg']:g} deg landscape and both image "
                f"halves support the offset (gains {w['half_gain'][0]:+.1f}, {w['half_gain'][1]:+.1f}); {support}"
                f"{_second_look_clause(w)}")
    raise AssertionError(f"not a LiDAR doubt or basis: {k}")


def seam_sentence(w: Why) -> str:
    """The seam witness's clause about a camera (no name), read from ``w``."""
    k = w.kind
    if k is Doubt.SEAMS_UNTRUSTED:
        return (f"seams cannot judge here: the rig's median seam cost is {w['median_cost']:.2f} "
                f"(above {w['trust_cost']:g}: overlaps too narrow, low texture or objects in the seams)")
    if k is Doubt.TOO_FEW_SEAMS:
        return "fewer than two seams: seams cannot tell which side is off"
    if k is Basis.STANDS_OUT:
        return f"its seams stand out ({w['quick_score']:.1f}x the rig median, threshold {w['ratio']:g}x)"
    if k is Basis.IN_LINE:
        return f"its seams are in line with the rig ({w['quick_score']:.2f}x the rig median)"
    raise AssertionError(f"not a seam doubt or basis: {k}")


def rig_sentence(w: Why) -> str:
    """The rig-level sentence of :attr:`Doubt.LIDAR_LOOKS_OFF` (``Diagnosis.lidar_doubt``)."""
    if w.kind is not Doubt.LIDAR_LOOKS_OFF:
        raise AssertionError(f"not a rig-level doubt: {w.kind}")
    lined = w["lined"]
    which = f" ({', '.join(lined)})" if lined else ""
    return (f"only {len(lined)} of {w['cameras']} cameras{which} line up with the LiDAR where they are stored: the "
            "LiDAR itself looks off (points in the sensor's frame instead of the car's? a wrong height, sweep or "
            "time?), so no camera is judged against it")
