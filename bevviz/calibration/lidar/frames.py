"""Frames of evidence: each frame's images paired with the LiDAR scan taken with them
(:class:`LidarFrame`), made once per frame by :func:`as_lidar_frames` (the scan thinned to
what the doctor reads, its rings, ring edges and per-scan intensity ranks) and read by every
camera's :class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`, the gross-error screen and
the overlays.

Convention:
    Scans in the ego frame at their keyframe time, metres (x forward, y left, z up), with the
    ego motion to each camera's exposure (:class:`~bevviz.lidar.LidarScan`); masks at the
    calibrated image size, True where the image does not show the world. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bevviz.calibration.lidar.edges import LidarEdges, lidar_edges, return_ranks
from bevviz.calibration.lidar.rings import scan_lines
from bevviz.checks import MAX_DOCTOR_LIDAR_POINTS, field_error
from bevviz.depth_buffer import thin_indices
from bevviz.lidar import LidarScan, as_lidar_scan

__all__ = ["LidarFrame", "as_lidar_frames", "moved_frame", "moved_scan"]


@dataclass(frozen=True)
class LidarFrame:
    """One frame of evidence: the images of a rig and the LiDAR scan taken with them.

    Attributes:
        images: Camera name -> uint8 RGB image (H, W, 3).
        scan: The scan (ego frame at its keyframe time, with the exposure motion). Without
            a ring index each camera finds its edges in its own view
            (:func:`~bevviz.calibration.lidar.edges.view_edges`): no ring or point order needed.
        ranks: Per-scan intensity ranks among the returns (:func:`~bevviz.calibration.lidar.edges.return_ranks`),
            (N,), or None when the scan has no usable intensity.
        ignore: Camera name -> (H, W) bool mask at the calibrated size, True where the image
            does not show the world (the car's own body); cameras without one use all pixels.
        ring_edges: The scan's edges along its rings
            (:func:`~bevviz.calibration.lidar.edges.lidar_edges`) when the scan carries a ring
            index (a spinning LiDAR's own scan lines, as a nuScenes ``.bin`` stores them);
            None otherwise, and then each camera finds its edges in its own view.
    """

    images: Mapping[str, np.ndarray]
    scan: LidarScan
    ranks: np.ndarray | None = None
    ignore: Mapping[str, np.ndarray] = field(default_factory=dict)
    ring_edges: LidarEdges | None = None


def as_lidar_frames(images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                    lidar: object, ignore: Mapping[str, np.ndarray] | None = None) -> list[LidarFrame]:
    """Pair frames of images with their scans.

    Args:
        images: One frame (camera name -> image) or a list of frames.
        lidar: One scan for one frame, or a list with one per frame; each a
            :class:`~bevviz.lidar.LidarScan` (what ``load_lidar`` returns) or an array
            (N, 3) / (N, 4) in the ego frame (numpy or torch; see
            :func:`bevviz.lidar.as_lidar_scan`).
        ignore: Optional camera name -> (H, W) bool mask (calibrated size) of pixels that do
            not show the world (:func:`bevviz.calibration.lidar.masks.ignore_masks` builds them from
            polygons).

    Returns:
        One :class:`LidarFrame` per frame; a scan with a ring index, or whose firing order or
        elevations show its lines (:func:`~bevviz.calibration.lidar.rings.scan_lines`),
        carries its ring edges.

    Raises:
        ValueError: naming ``lidar`` when the counts differ or a scan is malformed.
    """
    frames = [images] if isinstance(images, Mapping) else list(images)
    scans = list(lidar) if isinstance(lidar, (list, tuple)) else [lidar]
    if len(scans) != len(frames):
        raise field_error("lidar", f"{len(scans)} scans", f"must give one scan per frame of images ({len(frames)})")
    out = []
    for k, (imgs, s) in enumerate(zip(frames, scans)):
        scan = as_lidar_scan(s, field="lidar" if len(scans) == 1 else f"lidar[{k}]")
        thin = thin_indices(len(scan), MAX_DOCTOR_LIDAR_POINTS)
        if thin is not None:  # an even, seeded sample; its rings no longer hold neighbours
            scan = replace(scan, points=scan.points[thin], ring=None, sweep=scan.sweep[thin])
            lines = None
        else:
            lines = scan_lines(scan)
        rings = lidar_edges(scan, lines) if lines is not None else None
        out.append(LidarFrame(imgs, scan, return_ranks(scan), dict(ignore or {}), rings))
    return out


def moved_scan(scan: LidarScan, ego_from_scan: np.ndarray) -> LidarScan:
    """``scan`` moved rigidly: its points and its origin (the LiDAR itself moves with them).

    Args:
        scan: The scan.
        ego_from_scan: (4, 4) rigid motion, ``p = ego_from_scan @ p_scan``.

    Convention:
        Ego frame x forward, y left, z up, metres; the exposure motions stay the scan's (they
        move the ego frame, not the LiDAR in it). See docs/conventions.md.
    """
    R, t = ego_from_scan[:3, :3], ego_from_scan[:3, 3]
    pts = np.array(scan.points)
    pts[:, :3] = pts[:, :3] @ R.T + t
    return replace(scan, points=pts, origin=R @ scan.origin + t)


def moved_frame(frame: LidarFrame, ego_from_scan: np.ndarray) -> LidarFrame:
    """``frame`` with its scan moved rigidly by ``ego_from_scan`` (4, 4) (:func:`moved_scan`).

    A rigid motion keeps which points share a scan line and where along it the range jumps,
    so the ring edges move with the points rather than being found again (finding the lines
    is most of a frame's cost on a scan without a ring index), and the intensity ranks and
    masks carry over.
    """
    rings = frame.ring_edges
    if rings is not None:
        R, t = ego_from_scan[:3, :3], ego_from_scan[:3, 3]
        rings = replace(rings, points=rings.points @ R.T + t)
    return replace(frame, scan=moved_scan(frame.scan, ego_from_scan), ring_edges=rings)
