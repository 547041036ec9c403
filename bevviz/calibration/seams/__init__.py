"""The seam witness: cameras that see the same ground must paint it alike.

Rooms: :mod:`~bevviz.calibration.seams.pyramid` (image levels and sampling at pixels),
:mod:`~bevviz.calibration.seams.ground_truth` (a known texture),
:mod:`~bevviz.calibration.seams.analysis` (ground projections and seam costs),
:mod:`~bevviz.calibration.seams.objective` (one camera's seam loss, differentiable) and
:mod:`~bevviz.calibration.seams.refine` (the optimiser and its held-out check). Nothing
here reads a LiDAR scan (:mod:`bevviz.calibration.lidar` is the other witness).

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
    :func:`~bevviz.calibration.seams.refine.refine_camera` runs Adam on a small rotation (axis-angle, Rodrigues via
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

from bevviz.calibration.seams.analysis import (
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
from bevviz.calibration.seams.ground_truth import GroundTruth
from bevviz.calibration.seams.pyramid import (
    ImagePyramid,
    Sampler,
    as_frames,
    as_pyramids,
    gaussian_blur,
    pixel_table,
    sample_at_pixels,
)
from bevviz.calibration.seams.refine import (
    DEFAULT_LEVELS,
    FAST_LEVELS,
    ROBUST_K,
    SEARCH_DEG,
    SEARCH_LEVELS,
    SEARCH_STEP_DEG,
    Level,
    RefineHistory,
    RefineStep,
    SeamRefineSettings,
    refine_camera,
)

__all__ = [
    "ImagePyramid", "Sampler", "as_frames", "as_pyramids", "gaussian_blur", "pixel_table", "sample_at_pixels",
    "GroundTruth",
    "COSTS", "MIN_SEAM_AREA_M2", "MIN_SEAM_CELLS", "NGF_EPS", "SEAM_RING", "SEAM_TRUST_COST", "SeamAnalysis",
    "SeamPair", "analyze_seams", "combine_seams", "rig_centre", "rig_seam_cost", "ring_mask", "seam_cost",
    "seam_grid", "seam_neighbours",
    "DEFAULT_LEVELS", "FAST_LEVELS", "ROBUST_K", "SEARCH_DEG", "SEARCH_LEVELS", "SEARCH_STEP_DEG", "Level",
    "RefineHistory", "RefineStep", "SeamRefineSettings", "refine_camera",
]
