"""Verdicts: "miscalibrated", "ok" or "inconclusive", from each witness and from both.

The doctor says "inconclusive" rather than guess. Each verdict is decided by an ordered
list of named checks (:data:`LIDAR_CHECKS`, :data:`SEAM_CHECKS`); the first that raises a
:class:`~bevviz.calibration.verdicts.doubts.Doubt` makes the camera inconclusive, and a camera no
check doubts is miscalibrated or ok on a :class:`~bevviz.calibration.verdicts.doubts.Basis`. The
sentence a user reads is rendered from that afterwards (:mod:`bevviz.calibration.verdicts.doubts`).

LiDAR witness (per camera, on its residual after the rig consensus,
:mod:`~bevviz.calibration.lidar.consensus`), the checks in order:
    * fewer than ``MIN_EDGE_POINTS`` visible edge points, or fewer than ``MIN_CLUSTERS``
      image cells holding them (``TOO_FEW_EDGE_POINTS``);
    * edge points a median depth outside ``MIN_MEDIAN_DEPTH_M`` .. ``MAX_MEDIAN_DEPTH_M``
      from the camera: a scan that is not in metres (``NOT_IN_METRES``);
    * a flat score: the optimum beats the search grid's median by less than
      ``flat_contrast`` (``FLAT_CONTRAST``), or stands less than ``z_structure`` robust z above it (``FLAT_SCORE``);
    * the camera is *accused* when the stored pose is rejected in one of two ways and its
      raw offset is beyond the tolerance:
        (A) *located*: on the directions the evidence pins down (principal directions of
            the bootstrap spread at most ``max_sd_deg``; a wide camera seldom pins its roll,
            a side camera often only a mix of roll and pitch,
            :mod:`~bevviz.calibration.lidar.pinned`), at least ``CONFIDENCE`` of the bootstrap
            replicates put the camera turned more than ``TOLERANCE_DEG`` however the
            unpinned rest lies;
        (B) *rejected*: the stored pose stands ``z_reject`` robust z below the optimum in
            the score landscape and each image half alone prefers the optimum by
            ``half_reject``, though where the camera points stays uncertain (the offset is
            then reported with its spread, and refinement refuses to guess).
      An accusation stands unless one of these doubts (in order): fewer than
      ``MIN_VERDICT_POINTS`` edge points per frame (``SPARSE_CLOUD``), fewer than
      ``MIN_ANCHORS`` other cameras lining up with the LiDAR at their stored pose
      (``LIDAR_MAY_BE_OFF``), the optimum at the edge of the search as widened (``AT_SEARCH_EDGE``),
      the stored pose less than ``z_gap`` below it (``STORED_POSE_CLOSE``), an image half
      that gains less than ``half_gain`` (``HALF_UNSUPPORTED``), path A only: no axis carrying
      the offset (beyond ``TOLERANCE_DEG / sqrt(3)``) whose return to its stored value costs
      the score ``axis_drop`` (``FLAT_VALLEY``: the optimum slides along a flat valley) or
      halves whose own optima differ by more than ``half_agree_deg`` (``HALVES_APART``), an
      offset within the tolerance on every axis of where the *other* cameras alone put it
      under some plausible consensus model (``OTHERS_EXPLAIN``), or a camera within the
      tolerance on every axis (of the consensus, or of the LiDAR itself) once the LiDAR may be
      displaced along the car's axis (``TIMING``, :mod:`~bevviz.calibration.lidar.sync`); else
      miscalibrated. Where the first doubt is one of the landscape (``SECOND_LOOK_DOUBTS``)
      and the evidence holds a *second look*
      (attraction maps less their local mean, :mod:`~bevviz.calibration.lidar.evidence`), the
      same checks judge the second look under ``SECOND_LOOK_RULE``, and its "miscalibrated"
      stands instead, its "ok" only after ``AT_SEARCH_EDGE`` (``SECOND_LOOK_CLEARS``);
    * not accused: a bootstrap spread above ``max_sd_deg`` on some axis, even with
      ``CONFIDENCE`` of the replicates within the tolerance (a few far off: a blurred
      image's spread, not a sharp clean camera's) (``NOT_PINNED``);
    * ok on its own but beyond the tolerance against the LiDAR because the whole rig is
      (the consensus is larger than the tolerance): the LiDAR-to-ego calibration is the
      suspect (``RIG_OFF``);
    * fewer than ``CONFIDENCE`` of the replicates within the tolerance (``SPLIT``);
      otherwise ok.

Seam witness (images only): informative only when the rig's median seam cost is at most
``SEAM_TRUST_COST`` (``SEAMS_UNTRUSTED``) and the camera has two seams
(``TOO_FEW_SEAMS``). Then a camera whose seams stand out (``STANDOUT_RATIO``) is
miscalibrated, one whose seams do not is ok.

Both: a camera the LiDAR calls miscalibrated and informative seams call clearly fine (or
the other way round) is inconclusive: the witnesses disagree (``WITNESSES_DISAGREE``).
Where the LiDAR cannot judge (too few edge points, a flat score, split evidence),
informative seams decide; but they cannot clear a camera that most of the LiDAR's replicates
put beyond the tolerance (``WITNESSES_DISAGREE``: blurred images' seams agree everywhere).

``TOLERANCE_DEG = 0.5``: half a degree moves a point 50 m out by 0.44 m, less than one BEV
cell of 0.512 m; a larger error smears objects across cells. It bounds the angle a camera is
turned (:func:`~bevviz.rotations.offset_angle_deg`, the norm of roll, pitch and yaw), as the
fault bands do: turned 0.4 deg in roll and 0.4 in yaw, a camera is 0.57 deg off. The doubts
that clear an accusation by an explanation ask for the looser "within the tolerance on every
axis" (:func:`~bevviz.rotations.within_every_axis`), so a doubt errs towards "inconclusive".
docs/calibration.md says on what every other constant was chosen and which command tests it
again.

Convention:
    Offsets in body-frame (FLU) degrees, see :mod:`bevviz.calibration.lidar.evidence` and
    docs/conventions.md.
"""


from bevviz.calibration.lidar.alignment import MIN_VERDICT_POINTS
from bevviz.calibration.seams.analysis import SEAM_TRUST_COST
from bevviz.calibration.verdicts.both import SEAM_CHECKS, Judgement, SeamVerdict, combine, seam_verdict
from bevviz.calibration.verdicts.doubts import ACCUSED_DOUBTS, Basis, Doubt, Why, format_axes
from bevviz.calibration.verdicts.lidar import (
    LIDAR_CHECKS,
    SECOND_LOOK_CLEARS,
    SECOND_LOOK_DOUBTS,
    LidarCase,
    LidarVerdict,
    lidar_verdict,
)
from bevviz.calibration.verdicts.rule import (
    ANCHOR_MAX_DROP_Z,
    ANCHOR_MAX_OFFSET_DEG,
    ANCHOR_MIN_Z,
    CONFIDENCE,
    FLAT_CONTRAST,
    INCONCLUSIVE,
    MAX_MEDIAN_DEPTH_M,
    MIN_ANCHORS,
    MIN_CLUSTERS,
    MIN_EDGE_POINTS,
    MIN_MEDIAN_DEPTH_M,
    MISCALIBRATED,
    OK,
    PAIR_NOTE,
    RULE,
    SEAMS_FINE_RATIO,
    SECOND_LOOK_RULE,
    STANDOUT_RATIO,
    TOLERANCE_DEG,
    VERDICTS,
    VerdictRule,
    anchors,
    lidar_doubt,
    rig_doubt,
)

__all__ = [
    "ACCUSED_DOUBTS", "ANCHOR_MAX_DROP_Z", "ANCHOR_MAX_OFFSET_DEG", "ANCHOR_MIN_Z", "CONFIDENCE", "FLAT_CONTRAST",
    "INCONCLUSIVE", "LIDAR_CHECKS", "MAX_MEDIAN_DEPTH_M", "MIN_ANCHORS", "MIN_CLUSTERS", "MIN_EDGE_POINTS",
    "MIN_MEDIAN_DEPTH_M", "MIN_VERDICT_POINTS", "MISCALIBRATED", "OK", "PAIR_NOTE", "RULE", "SECOND_LOOK_CLEARS",
    "SECOND_LOOK_DOUBTS", "SECOND_LOOK_RULE",
    "SEAMS_FINE_RATIO", "SEAM_CHECKS", "SEAM_TRUST_COST", "STANDOUT_RATIO", "TOLERANCE_DEG", "VERDICTS", "Basis",
    "Doubt", "Judgement", "LidarCase", "LidarVerdict", "SeamVerdict", "VerdictRule", "Why", "anchors", "combine",
    "format_axes", "lidar_doubt", "lidar_verdict", "rig_doubt", "seam_verdict",
]
