"""LiDAR points and annotation boxes to draw over the cameras.

Points: each camera sees the scan at its own exposure time
(:meth:`bevviz.lidar.LidarScan.points_at`), so every camera moves the points first, then
projects them. The LiDAR looks from the roof, the camera from lower and elsewhere, so some
returns the LiDAR saw lie behind nearer surfaces from the camera's point of view; a
per-camera depth buffer (:func:`depth_buffer`, :func:`unoccluded`) hides them. What
remains is subsampled (every prefix an even sample) to keep the figure fast.

Boxes: the 8 corners of each annotation box (:func:`box_corners`, nuscenes-devkit's
order), its 12 edges (:data:`BOX_EDGES`) clipped at the near plane in the camera frame and
projected (:func:`box_wireframe`); edges entirely behind the camera or off one side of the
image are left out.

Convention:
    Ego frame x forward, y left, z up (metres), at the keyframe time; each camera's points
    and boxes are moved to its exposure with ``exposure_from_keyframe`` (column vectors,
    :mod:`bevviz.lidar`); camera frame RDF; pixels (u, v) with integer values at pixel
    centres, an image of width W spans u in [-0.5, W - 0.5]; depth = camera z. See
    docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.camera import Camera, Rig
from bevviz.checks import check_shape
from bevviz.depth_buffer import CELL_PX, MIN_DEPTH_M, SPREAD_CELLS, depth_buffer, thin_indices, unoccluded
from bevviz.lidar import MIN_RANGE_M, LidarScan
from bevviz.overlays.coverage import subsample_indices
from bevviz.projection import image_extent, pixels_of, project_camera, reference_pixels, transform_points
from bevviz.rotations import quaternion_to_matrix

__all__ = [
    "BOX_EDGES", "MAX_LIDAR_POINTS",
    "MIN_DEPTH_M", "MIN_RANGE_M", "BoxWireframes", "CameraLidar", "box_corners", "box_wireframe",
    "boxes_in_cameras", "camera_lidar", "depth_buffer", "lidar_in_cameras", "unoccluded",
]

# The depth buffer's cell (CELL_PX, pixels of a 1600 px wide image, scaled with the width),
# spread (SPREAD_CELLS: LiDAR rings are a degree or more apart, so a near surface leaves gaps
# a cell wide between its rings), depth tolerances and near plane (MIN_DEPTH_M, which also
# clips points and box edges here) are bevviz.depth_buffer's shared defaults.
#: Points per camera kept for drawing.
MAX_LIDAR_POINTS = 3000

#: The 12 edges of a box as pairs of :func:`box_corners` indices: front face, back face, sides.
BOX_EDGES = ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4), (1, 5), (2, 6), (3, 7))


def _cell(camera: Camera, cell_px: float) -> float:
    return reference_pixels(cell_px, camera.width)


@dataclass(frozen=True)
class CameraLidar:
    """The LiDAR points one camera sees.

    Attributes:
        camera: Camera name.
        uv: Pixels of the visible points, shape (P, 2), float32.
        depth: Their camera depths, shape (P,), float32, metres.
        intensity: Their intensities, shape (P,), float32 (nuScenes: 0-255).
        in_view: Points in front of the camera and inside its image (before the depth test).
        hidden: Of those (after thinning), how many nearer surfaces hide.
        thinned: Of ``in_view``, how many were left out before the depth test (a view
            holds at most :data:`bevviz.checks.MAX_CAMERA_LIDAR_POINTS`).
    """

    camera: str
    uv: np.ndarray = field(repr=False)
    depth: np.ndarray = field(repr=False)
    intensity: np.ndarray = field(repr=False)
    in_view: int = 0
    hidden: int = 0
    thinned: int = 0

    @property
    def drawn(self) -> int:
        """Points kept (``len(uv)``)."""
        return int(self.uv.shape[0])

    @property
    def visible(self) -> int:
        """Points the depth test keeps (before subsampling; after thinning a dense view)."""
        return self.in_view - self.thinned - self.hidden


def camera_lidar(camera: Camera, points: np.ndarray, intensity: np.ndarray, *, max_points: int | None = None,
                 cell_px: float = CELL_PX, spread: int = SPREAD_CELLS,
                 min_depth: float = MIN_DEPTH_M, seed: int = 0) -> CameraLidar:
    """The points of a scan one camera sees, nearer surfaces hiding farther ones.

    Args:
        camera: The camera.
        points: Points in the ego frame *at this camera's exposure*, shape (N, 3) (what
            :meth:`bevviz.lidar.LidarScan.points_at` returns).
        intensity: Intensity per point, shape (N,).
        max_points: Keep at most this many visible points (an even, seeded sample whose
            every prefix is also even); None keeps all.
        cell_px: Depth-buffer cell side, pixels of a 1600 px wide image.
        spread: Depth-buffer cells on each side that also occlude (see :func:`unoccluded`).
        min_depth: Near plane, metres.
        seed: Subsampling seed.

    Returns:
        :class:`CameraLidar`.

    Convention:
        ``p_cam = cam_from_ego @ p``, depth = ``p_cam.z``, ``(u, v) = K p_cam / depth``; pixels
        at centres; see docs/conventions.md.
    """
    pts = np.asarray(points, dtype=np.float64)
    check_shape(pts, (None, 3), "points", camera.name)
    inten = np.asarray(intensity, dtype=np.float32)
    check_shape(inten, (pts.shape[0],), "intensity", camera.name)
    uv, z, inside = project_camera(pts, camera, min_depth)
    uv_in, z_in, i_in = uv[inside], z[inside], inten[inside]
    thin = thin_indices(len(z_in), seed=seed)  # a dense cloud: what the depth buffer can use
    if thin is not None:
        uv_in, z_in, i_in = uv_in[thin], z_in[thin], i_in[thin]
    keep = unoccluded(uv_in, z_in, camera.size, _cell(camera, cell_px), spread)
    pick = np.flatnonzero(keep) if max_points is None else subsample_indices(keep, max_points, seed)
    return CameraLidar(camera.name, uv_in[pick].astype(np.float32), z_in[pick].astype(np.float32),
                       i_in[pick].astype(np.float32), in_view=int(inside.sum()), hidden=int((~keep).sum()),
                       thinned=int(inside.sum()) - len(z_in))


def lidar_in_cameras(rig: Rig, scan: LidarScan, max_points: int | None = MAX_LIDAR_POINTS,
                     min_range: float = MIN_RANGE_M, **kwargs) -> dict[str, CameraLidar]:
    """What every camera of a rig sees of a scan.

    Args:
        rig: The rig.
        scan: The scan (ego frame at the keyframe time, with the motion to each camera's
            exposure).
        max_points: Points kept per camera (see :func:`camera_lidar`); None keeps all.
        min_range: Returns nearer the scan's origin than this (metres) are dropped: the car's
            own body.
        **kwargs: Passed to :func:`camera_lidar` (``cell_px``, ``spread``, ``min_depth``).

    Returns:
        Camera name -> :class:`CameraLidar`, in rig order.

    Convention:
        Each camera takes :meth:`~bevviz.lidar.LidarScan.points_at` itself (the car moves
        between the cameras' exposures). See the module docstring.
    """
    far = scan.returns(min_range)
    return {cam.name: camera_lidar(cam, scan.points_at(cam)[far], scan.intensity[far], max_points=max_points,
                                   **kwargs) for cam in rig}


# --------------------------------------------------------------------------------------
# Boxes
# --------------------------------------------------------------------------------------


def box_corners(center: np.ndarray, size: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """The 8 corners of a box, shape (8, 3), in the frame of its centre and rotation.

    Args:
        center: Geometric centre, shape (3,).
        size: ``(w, l, h)`` (nuScenes' order: width, length, height), shape (3,), metres.
        rotation: ``frame_from_box`` as a (w, x, y, z) quaternion, shape (4,).

    Returns:
        Corners in nuscenes-devkit's ``Box.corners()`` order: 0-3 the front face (box +x),
        4-7 the back face, each face's corners left-top, right-top, right-bottom,
        left-bottom seen from the front (+y left, +z up).

    Convention:
        The box frame has x along its length, y to its left, z up (docs/conventions.md).
    """
    w, length, h = np.asarray(size, dtype=np.float64)
    x = length / 2 * np.array([1, 1, 1, 1, -1, -1, -1, -1])
    y = w / 2 * np.array([1, -1, -1, 1, 1, -1, -1, 1])
    z = h / 2 * np.array([1, 1, -1, -1, 1, 1, -1, -1])
    R = quaternion_to_matrix(rotation, "wxyz", "box rotation")
    return np.stack([x, y, z], axis=1) @ R.T + np.asarray(center, dtype=np.float64)


def box_wireframe(camera: Camera, corners: np.ndarray, ego_motion: np.ndarray | None = None,
                  min_depth: float = MIN_DEPTH_M) -> np.ndarray:
    """A box's 12 edges in one camera, clipped at the near plane.

    Args:
        camera: The camera.
        corners: Box corners in the ego frame at the keyframe time, shape (8, 3)
            (:func:`box_corners`).
        ego_motion: ``ego(t_camera) from ego(t_keyframe)``, shape (4, 4)
            (:meth:`bevviz.lidar.LidarScan.exposure`); None for no motion.
        min_depth: Near plane (metres of camera depth): an edge crossing it is cut there.

    Returns:
        (E, 2, 2) pixel end points of the E <= 12 edges that reach in front of the near plane
        and do not lie wholly off one side of the image. A box behind the camera gives
        (0, 2, 2).

    Convention:
        ``p_cam = cam_from_ego @ ego_motion @ p``; ``(u, v) = K p_cam / z``, pixels at
        centres (docs/conventions.md).
    """
    c = np.asarray(corners, dtype=np.float64)
    check_shape(c, (8, 3), "corners", camera.name)
    T = camera.cam_from_ego if ego_motion is None else camera.cam_from_ego @ np.asarray(ego_motion, np.float64)
    pc = transform_points(c, T)  # (8, 3)
    edges = np.array(BOX_EDGES)
    a, b = pc[edges[:, 0]], pc[edges[:, 1]]  # (12, 3)
    za, zb = a[:, 2:3], b[:, 2:3]
    seen = (za[:, 0] > min_depth) | (zb[:, 0] > min_depth)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.clip((min_depth - za) / (zb - za), 0.0, 1.0)  # where the edge meets the near plane
    cut = a + t * (b - a)
    a = np.where(za > min_depth, a, cut)
    b = np.where(zb > min_depth, b, cut)
    ends = np.stack([a[seen], b[seen]], axis=1)  # (E, 2, 3)
    uv = pixels_of(ends, camera.K)
    u_min, v_min, u_max, v_max = image_extent(camera.width, camera.height)
    lo, hi = np.array([u_min, v_min]), np.array([u_max, v_max])
    off = ((uv < lo).all(axis=1) | (uv > hi).all(axis=1)).any(axis=1)  # both ends past one border
    return uv[~off]


@dataclass
class BoxWireframes:
    """The annotation boxes seen by one camera.

    Attributes:
        segments: Edge end points, shape (E, 2, 2), pixels.
        box: Index (into the boxes given) of each edge's box, shape (E,).
        categories: Category of each edge's box, length E.
    """

    segments: np.ndarray = field(default_factory=lambda: np.zeros((0, 2, 2)))
    box: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    categories: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.segments.shape[0])


def boxes_in_cameras(rig: Rig, boxes: Sequence, motion: Mapping[str, np.ndarray] | LidarScan | None = None,
                     min_depth: float = MIN_DEPTH_M) -> dict[str, BoxWireframes]:
    """Every box's wireframe in every camera.

    Args:
        rig: The rig.
        boxes: Boxes in the ego frame at the keyframe time, each with ``category``,
            ``center`` (3,), ``size`` (w, l, h) and ``rotation`` (w, x, y, z)
            (:class:`bevviz.io.nuscenes_boxes.AnnotationBox`).
        motion: The ego motion to each camera's exposure: a :class:`~bevviz.lidar.LidarScan`
            (its ``exposure``), a mapping camera name -> (4, 4), or None (no motion).
        min_depth: Near plane, metres.

    Returns:
        Camera name -> :class:`BoxWireframes`, in rig order.

    Convention:
        See :func:`box_wireframe`.
    """
    corners = [box_corners(b.center, b.size, b.rotation) for b in boxes]
    out = {}
    for cam in rig:
        if isinstance(motion, LidarScan):
            m = motion.exposure(cam)
        else:
            m = None if motion is None else motion.get(cam.name)
        segs, idx = [], []
        for k, c in enumerate(corners):
            s = box_wireframe(cam, c, m, min_depth)
            segs.append(s)
            idx.append(np.full(len(s), k, dtype=np.int64))
        seg = np.concatenate(segs) if segs else np.zeros((0, 2, 2))
        box = np.concatenate(idx) if idx else np.zeros(0, dtype=np.int64)
        out[cam.name] = BoxWireframes(seg, box, [boxes[k].category for k in box])
    return out
