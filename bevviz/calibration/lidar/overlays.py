"""Before and after a correction, frame by frame: where the LiDAR's edges fall in a camera's image
at its pose before and at its pose after.

A correction pooled over several frames is judged by the user on each of them: an edge that
lands on its image edge in one frame and beside it in another says the frames disagree (a
frame taken while the car turned, a sweep out of sync). The points are the doctor's own
evidence (:class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`: the scan's edges in the
camera's view, each moved to the camera's exposure), so the picture shows what was scored.

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres, at the camera's
    calibrated size. ``after`` is the same camera (same image) at another pose: the points
    go from the camera's frame before to its frame after by
    ``after.cam_from_ego @ before.ego_from_cam``. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bevviz.calibration.lidar.alignment import EdgeAlignment
from bevviz.calibration.lidar.frames import LidarFrame
from bevviz.camera import Camera
from bevviz.checks import field_error
from bevviz.projection import inside_image, pixels_of, transform_points

__all__ = ["MIN_DEPTH_M", "EdgeOverlay", "edge_overlays"]

#: Edge points nearer than this (metres, along the optical axis) are not drawn.
MIN_DEPTH_M = 0.5


@dataclass(frozen=True)
class EdgeOverlay:
    """One frame's LiDAR edges in one camera's image, at its pose before and after.

    Attributes:
        frame: The frame's index in the frames given.
        uv_before: Pixels of the edge points in the image at the pose before, (M, 2).
        uv_after: Pixels of the same points at the pose after, (M, 2): row i is one point at
            both poses (the points in front of the camera and inside its image at both).
    """

    frame: int
    uv_before: np.ndarray
    uv_after: np.ndarray


def _pixels(p_cam: np.ndarray, camera: Camera) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (M, 2) of camera-frame points (M, 3), and whether each lies in front of
    ``camera`` and inside its image (M,)."""
    front = p_cam[:, 2] > MIN_DEPTH_M
    uv = pixels_of(np.where(front[:, None], p_cam, 1.0), camera.K)
    return uv, front & inside_image(uv[:, 0], uv[:, 1], camera.width, camera.height)


def edge_overlays(before: Camera, after: Camera, frames: Sequence[LidarFrame]) -> list[EdgeOverlay]:
    """Each frame's LiDAR edges in ``before``'s image at both poses.

    Args:
        before: The camera as it was (the pose the edges are found in).
        after: The same camera corrected (its name and image size must be ``before``'s).
        frames: The frames of evidence (:func:`~bevviz.calibration.lidar.frames.as_lidar_frames`).

    Returns:
        One :class:`EdgeOverlay` per frame, in order (a frame whose image shows no scan
        edges gives empty arrays).

    Raises:
        InputError: field ``after`` when it is another camera or another image size.
    """
    if after.name != before.name or (after.width, after.height) != (before.width, before.height):
        raise field_error("after", f"{after.name} {after.width}x{after.height}",
                          f"must be {before.name} {before.width}x{before.height} at another pose")
    al = EdgeAlignment(before, list(frames), maps=False)
    after_from_before = after.cam_from_ego @ before.ego_from_cam
    out = []
    for k in range(len(frames)):
        pts = al.points[al.frame == k] if len(al) else np.zeros((0, 3))
        uv_b, seen_b = _pixels(pts, before)
        uv_a, seen_a = _pixels(transform_points(pts, after_from_before), after)
        out.append(EdgeOverlay(k, uv_b[seen_b & seen_a], uv_a[seen_b & seen_a]))
    return out
