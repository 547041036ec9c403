"""Projection of ego-frame points into every camera of a rig.

Convention:
    ``p_cam = cam_from_ego @ p_ego`` (RDF camera); depth is p_cam.z; ``(u, v) = K @ p_cam /
    depth`` with integer pixel coordinates at pixel centres. As BEVFormer does, the division
    uses ``max(depth, eps)`` so points behind the camera keep finite (meaningless) pixels and
    are flagged invalid.

Validity bounds:
    ``"pixel"`` (default): depth > eps and -0.5 <= u <= W - 0.5, -0.5 <= v <= H - 0.5 (the
    image's full extent under the pixel-centre convention; the same region that
    ``grid_sample(align_corners=False)`` maps to [-1, 1]).
    ``"bevformer"``: BEVFormer's strict rule 0 < u/W < 1 and 0 < v/H < 1 on the same u, v.
    See docs/conventions.md.

The pixel rule is written once, :func:`inside_image` (numpy arrays and torch tensors
alike); :func:`project_camera` is the numpy projection of points into one camera, for the
overlays and depth buffers that draw or test single points rather than project a grid.
Pixel-sized defaults (depth-buffer cells, edge scales) are stated for a
:data:`REFERENCE_WIDTH_PX` wide image and scaled with :func:`reference_pixels`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.camera import Rig
from bevviz.checks import check_choice, check_shape, field_error

BOUNDS = ("pixel", "bevformer")


@dataclass(frozen=True)
class PointValidity:
    """Which projected points count as valid (in front of the camera and inside the image).

    Attributes:
        bounds: ``"pixel"`` (u in [-0.5, W - 0.5], v in [-0.5, H - 0.5]) or ``"bevformer"``
            (the normalised coordinates strictly inside (0, 1)); see docs/conventions.md.
        eps: Minimum depth of a valid point (metres).

    Raises:
        InputError: an unknown ``bounds``.
    """

    bounds: str = "pixel"
    eps: float = 1e-5

    def __post_init__(self) -> None:
        check_choice(self.bounds, BOUNDS, "bounds")
#: The image width (pixels; nuScenes' cameras) at which pixel-sized defaults are stated.
REFERENCE_WIDTH_PX = 1600


def reference_pixels(px: float, width: int) -> float:
    """A length of ``px`` pixels of a :data:`REFERENCE_WIDTH_PX` wide image, in pixels of an
    image ``width`` pixels wide."""
    return px * width / REFERENCE_WIDTH_PX


def image_extent(width: float, height: float) -> tuple[float, float, float, float]:
    """The image's extent under the pixel-centre convention: ``(u_min, v_min, u_max, v_max)``
    = ``(-0.5, -0.5, W - 0.5, H - 0.5)`` (the region :func:`inside_image` accepts)."""
    return -0.5, -0.5, width - 0.5, height - 0.5


def inside_image(u, v, width, height):
    """The pixel-centre bounds rule: ``-0.5 <= u <= W - 0.5`` and ``-0.5 <= v <= H - 0.5``.

    Args:
        u, v: Pixel coordinates, numpy arrays or torch tensors of one shape (*P,).
        width, height: Image size W, H (numbers, or arrays / tensors broadcasting with u, v).

    Returns:
        Boolean array or tensor of shape (*P,); NaN pixels are outside.

    Convention:
        Integer pixel coordinates at pixel centres: an image of width W spans u in
        [-0.5, W - 0.5] (docs/conventions.md).
    """
    u_min, v_min, u_max, v_max = image_extent(width, height)
    return (u >= u_min) & (u <= u_max) & (v >= v_min) & (v <= v_max)


def transform_points(points: np.ndarray, b_from_a: np.ndarray) -> np.ndarray:
    """Points of frame a in frame b: ``p_b = b_from_a @ p_a``.

    Args:
        points: Points in frame a, shape (*P, 3).
        b_from_a: The 4x4 transform.

    Returns:
        Points in frame b, shape (*P, 3), float64.
    """
    T = np.asarray(b_from_a, dtype=np.float64)
    return np.asarray(points, dtype=np.float64) @ T[:3, :3].T + T[:3, 3]


def pixels_of(p_cam: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Pixels of camera-frame points in front of the camera: ``(u, v) = (K p / z)[:2]``.

    Args:
        p_cam: Points in the camera frame (RDF), shape (*P, 3), with z > 0.
        K: Intrinsics, shape (3, 3).

    Returns:
        Pixel coordinates (u, v), shape (*P, 2).
    """
    p_img = np.asarray(p_cam, dtype=np.float64) @ np.asarray(K, dtype=np.float64).T
    return p_img[..., :2] / p_img[..., 2:3]


def rays_of(uv: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Camera-frame rays through pixels: ``K^-1 (u, v, 1)``, the inverse of :func:`pixels_of`.

    Args:
        uv: Pixel coordinates (u, v), shape (*P, 2).
        K: Intrinsics, shape (3, 3).

    Returns:
        Rays (x, y, 1) in the camera frame (RDF), shape (*P, 3): the point of depth ``z``
        seen at ``uv`` is ``z * ray``.

    Convention:
        Pixel centres at integer coordinates, as :func:`pixels_of`; see docs/conventions.md.
    """
    uv = np.asarray(uv, dtype=np.float64)
    return np.concatenate([uv, np.ones(uv.shape[:-1] + (1,))], axis=-1) @ np.linalg.inv(np.asarray(K, np.float64)).T


def project_camera(points_ego: np.ndarray, camera, min_depth: float = 0.0,
                   ego_motion: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project ego-frame points into one camera (numpy).

    Args:
        points_ego: Points in the ego frame, shape (N, 3).
        camera: The :class:`bevviz.camera.Camera`.
        min_depth: Near plane (metres): points not beyond it get NaN pixels.
        ego_motion: ``ego(t_camera) from ego(t_points)``, shape (4, 4), or None.

    Returns:
        ``(uv (N, 2) with NaN behind the near plane, depth (N,), inside (N,) bool)``: inside
        is beyond the near plane and within :func:`inside_image`.

    Convention:
        ``p_cam = cam_from_ego @ ego_motion @ p``; depth = ``p_cam.z``; pixels at centres.
    """
    T = camera.cam_from_ego if ego_motion is None else camera.cam_from_ego @ np.asarray(ego_motion, np.float64)
    pc = transform_points(points_ego, T)
    depth = pc[:, 2]
    front = depth > min_depth
    uv = np.full((len(pc), 2), np.nan)
    uv[front] = pixels_of(pc[front], camera.K)
    return uv, depth, front & inside_image(uv[:, 0], uv[:, 1], camera.width, camera.height)


@dataclass(frozen=True)
class Projection:
    """Projected points.

    Attributes:
        uv: Pixel coordinates (u, v), shape (N_cam, *P, 2).
        depth: Depth along the optical axis (metres), shape (N_cam, *P).
        valid: In front of the camera and inside its image, shape (N_cam, *P), bool.
        in_front: depth > eps, shape (N_cam, *P), bool.
        in_image: inside the image bounds (regardless of depth), shape (N_cam, *P), bool.
    """

    uv: torch.Tensor
    depth: torch.Tensor
    valid: torch.Tensor
    in_front: torch.Tensor
    in_image: torch.Tensor


def project_with(points_ego: torch.Tensor, K: torch.Tensor, cam_from_ego: torch.Tensor,
                 sizes: torch.Tensor, eps: float = 1e-5, bounds: str = "pixel") -> Projection:
    """Project with explicit (possibly differentiable) camera tensors.

    Args:
        points_ego: Points in the ego frame, shape (*P, 3).
        K: Intrinsics, shape (N_cam, 3, 3).
        cam_from_ego: Extrinsics, shape (N_cam, 4, 4).
        sizes: Image sizes (W, H), shape (N_cam, 2).
        eps: Minimum depth for a valid point.
        bounds: ``"pixel"`` or ``"bevformer"`` (see the module docstring).

    Returns:
        :class:`Projection` with shapes (N_cam, *P, ...). Gradients flow to points, K and
        cam_from_ego through ``uv`` and ``depth``.

    Convention:
        See the module docstring.
    """
    check_choice(bounds, BOUNDS, "bounds")
    if not (eps >= 0):
        raise field_error("eps", eps, "must be >= 0")
    check_shape(points_ego, ("...", 3), "points_ego")
    n = check_shape(K, ("N", 3, 3), "K")["N"]
    check_shape(cam_from_ego, (n, 4, 4), "cam_from_ego")
    check_shape(sizes, (n, 2), "sizes")
    batch_shape = points_ego.shape[:-1]
    pts = points_ego.reshape(-1, 3).to(K.dtype)  # (P, 3)
    R = cam_from_ego[:, :3, :3].to(K.dtype)  # (N, 3, 3)
    t = cam_from_ego[:, :3, 3].to(K.dtype)  # (N, 3)
    # (N, P, 3) = pts @ R^T + t, then pixel homogeneous coordinates (N, P, 3) = p_cam @ K^T.
    p_cam = torch.matmul(pts.unsqueeze(0), R.transpose(1, 2)) + t.unsqueeze(1)
    p_img = torch.matmul(p_cam, K.transpose(1, 2))
    depth = p_cam[..., 2]
    uv = p_img[..., :2] / torch.clamp(depth, min=eps).unsqueeze(-1)
    W = sizes[:, 0].to(K.dtype).view(n, 1)
    H = sizes[:, 1].to(K.dtype).view(n, 1)
    u, v = uv[..., 0].detach(), uv[..., 1].detach()
    if bounds == "pixel":
        in_image = inside_image(u, v, W, H)
    else:
        in_image = (u / W > 0) & (u / W < 1) & (v / H > 0) & (v / H < 1)
    in_front = depth.detach() > eps
    out = (n, *batch_shape)
    return Projection(
        uv=uv.reshape(*out, 2), depth=depth.reshape(out), valid=(in_front & in_image).reshape(out),
        in_front=in_front.reshape(out), in_image=in_image.reshape(out),
    )


def project_points(points_ego, rig: Rig, eps: float = 1e-5, bounds: str = "pixel",
                   dtype: torch.dtype | None = None) -> Projection:
    """Project ego-frame points into every camera of ``rig``.

    Args:
        points_ego: Points in the ego frame, shape (*P, 3); torch tensor or numpy array.
        rig: The camera rig (N_cam cameras).
        eps: Minimum depth (metres) for a valid point; default 1e-5 as in BEVFormer.
        bounds: ``"pixel"`` (pixel-centre image extent) or ``"bevformer"`` (strict
            0 < u/W < 1, 0 < v/H < 1).
        dtype: Computation dtype; defaults to the points' floating dtype (float64 for
            numpy input).

    Returns:
        :class:`Projection`: uv (N_cam, *P, 2), depth (N_cam, *P), valid (N_cam, *P).

    Convention:
        See the module docstring.
    """
    pts = torch.as_tensor(np.asarray(points_ego) if not isinstance(points_ego, torch.Tensor) else points_ego)
    if not pts.is_floating_point():
        pts = pts.to(torch.float64)
    dtype = dtype or pts.dtype
    return project_with(pts.to(dtype), rig.intrinsics(dtype), rig.cam_from_ego(dtype),
                        rig.image_sizes(), eps=eps, bounds=bounds)
