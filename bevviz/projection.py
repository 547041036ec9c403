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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.camera import Rig
from bevviz.shapes import check_choice, check_shape, field_error

BOUNDS = ("pixel", "bevformer")


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
        in_image = (u >= -0.5) & (u <= W - 0.5) & (v >= -0.5) & (v <= H - 0.5)
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
