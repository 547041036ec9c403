"""The Calibration Doctor: which camera of a rig is miscalibrated, and by how much.

Two witnesses, each in its own room, and the judgement on top:

* :mod:`bevviz.calibration.seams`: the seam witness (images only): where the ground
  footprints of two cameras overlap, both must paint the same ground;
* :mod:`bevviz.calibration.lidar`: the LiDAR witness: each camera's image edges against
  the scan's depth and reflectivity edges, with a bootstrap spread and what all cameras
  share (the LiDAR's own error);
* :mod:`~bevviz.calibration.perturbations`: body-frame rotations of one camera (faults and
  corrections alike);
* :mod:`~bevviz.calibration.verdicts`: "miscalibrated" / "ok" / "inconclusive" from each
  witness and from both, as an ordered list of named checks, each raising a
  :class:`~bevviz.calibration.verdicts.doubts.Doubt` or none; :mod:`~bevviz.calibration.verdicts.doubts`
  holds the doubts and renders the sentences;
* :mod:`~bevviz.calibration.diagnose`: every camera's finding, one function per question
  (the full doctor, the seams' quick ranking, each suspect rotated alone, against a known
  texture), with its frozen :class:`DiagnoseSettings`;
* :mod:`~bevviz.calibration.refine`: one camera refined (against the LiDAR with a held-out
  check, or against its seams), with its frozen :class:`RefineSettings`.

The evaluation harnesses (injected faults on real frames, stress variants, the
leave-one-rig-out rule search) live outside the library in :mod:`bevviz.lab`
(``python -m bevviz.calibration.evaluate`` still runs :mod:`bevviz.lab.evaluate`); real
frame folders are read by :mod:`bevviz.io.frame_folder`. Every public name is re-exported
here; docs/calibration.md says how the doctor decides, and why its constants are what they are.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``. Small rotations of a camera are given in
    its *body* frame (FLU: roll about the optical axis, pitch about the camera's left axis,
    positive looking down, yaw about its up axis, positive to the left), composed
    ``R = Rz(yaw) Ry(pitch) Rx(roll)``. See docs/conventions.md.
"""

from bevviz.calibration.diagnose import (
    DIAGNOSE_LEVELS,
    CameraFinding,
    DiagnoseSettings,
    Diagnosis,
    against_texture,
    diagnose,
    judge_with_lidar,
    rank_seams,
    rotate_suspects,
    standout,
)
from bevviz.calibration.lidar import (
    AXES,
    BOOTSTRAP,
    SEARCH_RADIUS_DEG,
    CameraEvidence,
    EdgeAlignment,
    EdgeOverlay,
    ExposureMotions,
    LidarEdges,
    LidarFrame,
    RigConsensus,
    agreement_of,
    as_lidar_frames,
    attraction_maps,
    camera_evidence,
    edge_mask,
    edge_overlays,
    edge_strength,
    exposure_motions,
    hypothesis_matrix,
    ignore_masks,
    intensity_ranks,
    lidar_edges,
    lidar_evidence,
    oriented_attraction_maps,
    return_ranks,
    rig_consensus,
    view_edges,
)
from bevviz.calibration.perturbations import (
    PERTURBATION_KEYS,
    CameraDelta,
    apply_correction,
    apply_perturbations,
    camera_delta,
    deltas_json,
    perturb_camera,
    perturb_rig,
    rig_deltas,
)
from bevviz.calibration.refine import (
    FLOOR_MEDIAN_DEG,
    TARGET_DEG,
    RefineSettings,
    lidar_placement,
    placement_floor,
    refine_extrinsics,
    refine_with_lidar,
)
from bevviz.calibration.seams import (
    COSTS,
    DEFAULT_LEVELS,
    FAST_LEVELS,
    MIN_SEAM_AREA_M2,
    MIN_SEAM_CELLS,
    NGF_EPS,
    ROBUST_K,
    SEAM_RING,
    SEAM_TRUST_COST,
    SEARCH_DEG,
    SEARCH_LEVELS,
    SEARCH_STEP_DEG,
    GroundTruth,
    ImagePyramid,
    Level,
    RefineHistory,
    RefineStep,
    Sampler,
    SeamAnalysis,
    SeamPair,
    SeamRefineSettings,
    analyze_seams,
    as_frames,
    as_pyramids,
    combine_seams,
    gaussian_blur,
    pixel_table,
    refine_camera,
    rig_centre,
    rig_seam_cost,
    ring_mask,
    sample_at_pixels,
    seam_cost,
    seam_grid,
    seam_neighbours,
)
from bevviz.calibration.verdicts import (
    CONFIDENCE,
    INCONCLUSIVE,
    MISCALIBRATED,
    OK,
    RULE,
    STANDOUT_RATIO,
    TOLERANCE_DEG,
    VERDICTS,
    Basis,
    Doubt,
    Judgement,
    LidarVerdict,
    SeamVerdict,
    VerdictRule,
    Why,
    combine,
    lidar_verdict,
    seam_verdict,
)
from bevviz.io.frame_folder import RealFrame, load_frame_folder

__all__ = [
    # perturbations
    "PERTURBATION_KEYS", "CameraDelta", "apply_correction", "apply_perturbations", "camera_delta", "deltas_json",
    "perturb_camera", "perturb_rig", "rig_deltas",
    # images
    "ImagePyramid", "Sampler", "as_frames", "as_pyramids", "gaussian_blur", "pixel_table", "sample_at_pixels",
    # ground truth
    "GroundTruth",
    # seams
    "COSTS", "MIN_SEAM_AREA_M2", "MIN_SEAM_CELLS", "NGF_EPS", "SEAM_RING", "SEAM_TRUST_COST", "SeamAnalysis",
    "SeamPair", "analyze_seams", "combine_seams", "rig_centre", "rig_seam_cost", "ring_mask", "seam_cost",
    "seam_grid", "seam_neighbours",
    # refinement
    "DEFAULT_LEVELS", "FAST_LEVELS", "ROBUST_K", "SEARCH_DEG", "SEARCH_LEVELS", "SEARCH_STEP_DEG", "Level",
    "RefineHistory", "RefineStep", "SeamRefineSettings", "refine_camera",
    # LiDAR witness
    "AXES", "BOOTSTRAP", "SEARCH_RADIUS_DEG", "CameraEvidence", "EdgeAlignment", "EdgeOverlay", "LidarEdges",
    "LidarFrame", "edge_overlays", "ExposureMotions", "exposure_motions",
    "as_lidar_frames", "attraction_maps", "camera_evidence", "edge_mask", "edge_strength", "hypothesis_matrix",
    "lidar_edges", "lidar_evidence", "agreement_of", "refine_with_lidar", "lidar_placement", "placement_floor",
    "FLOOR_MEDIAN_DEG",
    "TARGET_DEG", "view_edges", "intensity_ranks", "return_ranks",
    "oriented_attraction_maps",
    "ignore_masks",
    # real frame folders
    "RealFrame", "load_frame_folder",
    # consensus and verdicts
    "CONFIDENCE", "INCONCLUSIVE", "MISCALIBRATED", "OK", "RULE", "TOLERANCE_DEG", "VERDICTS", "Basis", "Doubt",
    "Judgement", "LidarVerdict", "RigConsensus", "SeamVerdict", "VerdictRule", "Why", "combine", "lidar_verdict",
    "rig_consensus", "seam_verdict",
    # diagnosis and refinement, one function per question
    "DIAGNOSE_LEVELS", "STANDOUT_RATIO", "CameraFinding", "DiagnoseSettings", "Diagnosis", "RefineSettings",
    "against_texture", "diagnose", "judge_with_lidar", "rank_seams", "refine_extrinsics", "rotate_suspects",
    "standout",
]
