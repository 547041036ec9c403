"""The LiDAR witness: a camera is where its image edges meet the scan's edges.

Rooms, bottom up: :mod:`~bevviz.calibration.lidar.masks` (per-camera ignore polygons),
:mod:`~bevviz.calibration.lidar.edge_maps` (image edge attraction per gradient orientation),
:mod:`~bevviz.calibration.lidar.edges` (depth and reflectivity edges of the scan in each
camera's view, no point order needed), :mod:`~bevviz.calibration.lidar.frames` (each frame's
images paired with its scan, made once), :mod:`~bevviz.calibration.lidar.alignment` (the
edge alignment score, its search and bootstrap), :mod:`~bevviz.calibration.lidar.sync`
(a LiDAR displaced along the car's axis: timing), :mod:`~bevviz.calibration.lidar.evidence`
(per camera: optimum, spread, halves, timing), :mod:`~bevviz.calibration.lidar.consensus`
(what all cameras share: the LiDAR's own error) and :mod:`~bevviz.calibration.lidar.pinned`
(what the bootstrap pins down of an offset), :mod:`~bevviz.calibration.lidar.ego_motion` (the
car's motion between two sweeps, registered), :mod:`~bevviz.calibration.lidar.overlays` (a
correction's before and after, frame by frame), :mod:`~bevviz.calibration.lidar.repeats` (frames
that repeat a view, images that froze). Nothing here reads the seams
(:mod:`bevviz.calibration.seams` is the other witness); the verdicts on top of both live in
:mod:`bevviz.calibration.verdicts`.

Convention:
    Offsets in body-frame (FLU) degrees: roll about the optical axis, pitch positive
    looking down, yaw positive turning left (docs/conventions.md).
"""

from bevviz.calibration.lidar.alignment import (
    AXES,
    BOOTSTRAP,
    MIN_VERDICT_POINTS,
    SEARCH_RADIUS_DEG,
    EdgeAlignment,
    hypothesis_matrix,
)
from bevviz.calibration.lidar.consensus import RigConsensus, rig_consensus
from bevviz.calibration.lidar.edge_maps import attraction_maps, edge_mask, edge_strength, oriented_attraction_maps
from bevviz.calibration.lidar.edges import (
    DEPTH,
    REFLECTIVITY,
    LidarEdges,
    intensity_ranks,
    lidar_edges,
    return_ranks,
    view_edges,
)
from bevviz.calibration.lidar.ego_motion import ExposureMotions, MotionEstimate, estimate_motion, exposure_motions
from bevviz.calibration.lidar.evidence import CameraEvidence, agreement_of, camera_evidence, lidar_evidence
from bevviz.calibration.lidar.frames import LidarFrame, as_lidar_frames
from bevviz.calibration.lidar.masks import ignore_masks, in_mask
from bevviz.calibration.lidar.overlays import EdgeOverlay, edge_overlays
from bevviz.calibration.lidar.pinned import PinnedOffset, pinned_offset
from bevviz.calibration.lidar.sync import TimingFit, rig_timing, timing_fit

__all__ = [
    "AXES", "BOOTSTRAP", "MIN_VERDICT_POINTS", "SEARCH_RADIUS_DEG", "EdgeAlignment", "LidarFrame", "as_lidar_frames",
    "hypothesis_matrix",
    "RigConsensus", "rig_consensus",
    "attraction_maps", "edge_mask", "edge_strength", "oriented_attraction_maps",
    "ExposureMotions", "MotionEstimate", "estimate_motion", "exposure_motions",
    "DEPTH", "REFLECTIVITY", "LidarEdges", "intensity_ranks", "lidar_edges", "return_ranks", "view_edges",
    "CameraEvidence", "agreement_of", "camera_evidence", "lidar_evidence",
    "ignore_masks", "in_mask",
    "EdgeOverlay", "edge_overlays",
    "PinnedOffset", "pinned_offset",
    "TimingFit", "rig_timing", "timing_fit",
]
