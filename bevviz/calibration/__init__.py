"""Seam consistency: find the miscalibrated camera of a rig and refine its extrinsics.

A package of one concept per module. The LiDAR witness: :mod:`~bevviz.calibration.lidar_edges`
(depth and reflectivity edges in each camera's view, no point order needed),
:mod:`~bevviz.calibration.edge_maps` (image edge attraction per gradient orientation),
:mod:`~bevviz.calibration.masks` (per-camera ignore polygons),
:mod:`~bevviz.calibration.frame_folder` (real frames on disk),
:mod:`~bevviz.calibration.alignment` (the edge alignment score, its search and bootstrap),
:mod:`~bevviz.calibration.lidar` (per-camera evidence: optimum, spread, halves, timing),
:mod:`~bevviz.calibration.consensus` (what all cameras share: the LiDAR's own error),
:mod:`~bevviz.calibration.verdicts` ("miscalibrated" / "ok" / "inconclusive"),
:mod:`~bevviz.calibration.lidar_refine` (refinement with a held-out check) and
:mod:`~bevviz.calibration.evaluate` (injected faults on a real frame). The seam witness:
:mod:`~bevviz.calibration.perturbations` (body-frame
perturbations and deltas), :mod:`~bevviz.calibration.pyramid` (image levels and sampling at
pixels), :mod:`~bevviz.calibration.ground_truth` (a known texture),
:mod:`~bevviz.calibration.seams` (ground projections and seam costs),
:mod:`~bevviz.calibration.refine` (the optimiser) and :mod:`~bevviz.calibration.diagnose`
(which camera is off; :func:`refine_extrinsics`). Every public name is re-exported here.

Where the ground footprints of two cameras overlap, both cameras see the same ground. Each
camera's image is projected onto the ground plane z = 0 of a BEV grid (the inverse
perspective map, sampled with the two-stage gather-scatter sampler of
:mod:`bevviz.samplers.gather_scatter`); in the shared cells the two projections must agree.
A camera whose extrinsics are off paints the ground in the wrong place and disagrees with
*both* of its neighbours.

Seam costs (both robust to exposure, gain and white balance):
    *NCC*: each camera's colours are normalised per channel to zero mean and unit variance
    over the shared cells; the cost is half the mean squared difference, ``1 - NCC``, in
    [0, 2] (0 = identical up to exposure, 1 = unrelated). Smooth, wide basin; but an object
    standing in a seam (seen from two sides, smeared differently by the ground-plane
    projection) raises it and pulls on it.
    *NGF* (normalised gradient fields): each cell's BEV gradient (all channels) is scaled to
    ``g / sqrt(|g|^2 + eps^2)``; the cost is ``1 -`` their correlation. Every edge counts at
    most once and flat areas (asphalt, an object's faces) not at all, so objects pull far
    less, and the minimum is sharp. The seam tables report NGF.

Modes:
    *self-consistency* (real data): seams only. *ground truth* (a BEV texture is known, as
    for the synthetic sample): each camera's projection is compared with the texture over
    its whole footprint.

Refinement:
    :func:`refine_extrinsics` runs Adam on a small rotation (axis-angle, Rodrigues via
    :func:`bevviz.rotations.axis_angle_to_matrix`) and optionally a translation of one
    camera, minimising the seam cost with its neighbours; the gradient reaches the rotation
    through the gather-scatter sampler's bilinear tap weights (gradient with respect to the
    sampling positions). A coarse-to-fine schedule (NCC on 1/8 blurred images, then NGF on
    1/4 and 1/2 images) gives a basin of several degrees and a sharp end. Several frames of
    the same rig can be combined: an object hiding a seam in one frame rarely hides it in
    all.

Convention:
    Ego frame x forward, y left, z up; ground plane z = 0; camera RDF; pixels at centres;
    grids normalised with ``align_corners=False``: ``g = (2u + 1) / W - 1`` with the
    calibrated image width W (the same for every pyramid level, see :mod:`bevviz.features`).
    See docs/conventions.md.
    Small rotations of a camera are given in its *body* frame (FLU: roll about the optical
    axis, pitch about the camera's left axis, positive looking down, yaw about its up axis,
    positive to the left), composed ``R = Rz(yaw) Ry(pitch) Rx(roll)``.
"""

from bevviz.calibration.alignment import (
    AXES,
    BOOTSTRAP,
    SEARCH_RADIUS_DEG,
    EdgeAlignment,
    LidarFrame,
    as_lidar_frames,
    hypothesis_matrix,
)
from bevviz.calibration.consensus import RigConsensus, rig_consensus
from bevviz.calibration.diagnose import DIAGNOSE_LEVELS, CameraFinding, Diagnosis, diagnose, refine_extrinsics, standout
from bevviz.calibration.edge_maps import attraction_maps, edge_mask, edge_strength, oriented_attraction_maps
from bevviz.calibration.frame_folder import RealFrame, load_frame_folder
from bevviz.calibration.ground_truth import GroundTruth
from bevviz.calibration.lidar import CameraEvidence, camera_evidence, lidar_evidence
from bevviz.calibration.lidar_edges import LidarEdges, intensity_ranks, lidar_edges, return_ranks, view_edges
from bevviz.calibration.lidar_refine import (
    FLOOR_MEDIAN_DEG,
    TARGET_DEG,
    lidar_placement,
    placement_floor,
    refine_with_lidar,
)
from bevviz.calibration.masks import ignore_masks
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
from bevviz.calibration.pyramid import (
    ImagePyramid,
    Sampler,
    as_frames,
    as_pyramids,
    gaussian_blur,
    pixel_table,
    sample_at_pixels,
)
from bevviz.calibration.refine import (
    DEFAULT_LEVELS,
    FAST_LEVELS,
    ROBUST_K,
    SEARCH_DEG,
    SEARCH_LEVELS,
    SEARCH_STEP_DEG,
    Level,
    RefineHistory,
    RefineStep,
    refine_camera,
)
from bevviz.calibration.seams import (
    COSTS,
    MIN_SEAM_AREA_M2,
    MIN_SEAM_CELLS,
    NGF_EPS,
    SEAM_RING,
    SEAM_TRUST_COST,
    SeamAnalysis,
    SeamPair,
    analyze_seams,
    combine_seams,
    rig_centre,
    rig_seam_cost,
    ring_mask,
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
    LidarVerdict,
    VerdictRule,
    lidar_verdict,
    seam_verdict,
)

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
    "RefineHistory", "RefineStep", "refine_camera",
    # LiDAR witness
    "AXES", "BOOTSTRAP", "SEARCH_RADIUS_DEG", "CameraEvidence", "EdgeAlignment", "LidarEdges", "LidarFrame",
    "as_lidar_frames", "attraction_maps", "camera_evidence", "edge_mask", "edge_strength", "hypothesis_matrix",
    "lidar_edges", "lidar_evidence", "refine_with_lidar", "lidar_placement", "placement_floor", "FLOOR_MEDIAN_DEG",
    "TARGET_DEG", "view_edges", "intensity_ranks", "return_ranks",
    "oriented_attraction_maps",
    "ignore_masks",
    # real frame folders
    "RealFrame", "load_frame_folder",
    # consensus and verdicts
    "CONFIDENCE", "INCONCLUSIVE", "MISCALIBRATED", "OK", "RULE", "TOLERANCE_DEG", "VERDICTS", "LidarVerdict",
    "RigConsensus", "VerdictRule", "lidar_verdict", "rig_consensus", "seam_verdict",
    # diagnosis
    "DIAGNOSE_LEVELS", "STANDOUT_RATIO", "CameraFinding", "Diagnosis", "diagnose", "refine_extrinsics", "standout",
]
