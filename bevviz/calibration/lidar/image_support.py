"""Whether an image can support a LiDAR verdict at all: the null test against structureless images.

The doctor's search always finds an optimum, on a real image and on uniform noise alike,
and on noise its bootstrap can still agree on one. A verdict needs the image to show the
LiDAR's edges where the optimum puts them: the mean *lift* (edge attraction less its local
mean, :func:`image_lift`) of the edge points at the optimum must reach ``MIN_IMAGE_LIFT``
(chosen on: docs/calibration.md, the tuning table).

A blurred image still lifts the edges, but it cannot tell a pose within the tolerance from
one beyond it: its lift barely changes when the edges move by the tolerance. A verdict also
needs the *sharpness* (:func:`image_support`) to reach ``MIN_IMAGE_SHARPNESS``: the share of
the lift lost when the edge points move by the tolerance in the image.

Convention:
    Pixels at centres of the calibrated image; the image may be any size (``(u + 0.5) * s -
    0.5``). See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from bevviz.calibration.lidar.edge_maps import attraction_maps
from bevviz.camera import Camera

__all__ = ["LOCAL_RAD", "MIN_IMAGE_LIFT", "MIN_IMAGE_SHARPNESS", "ImageSupport", "image_lift", "image_support",
           "local_mean"]

#: Least mean lift at the optimum for a verdict (structureless images: at most 0.022).
MIN_IMAGE_LIFT = 0.05
#: Least share of that lift lost when the edges move by the tolerance (sharp real images:
#: at least 0.12; a Gaussian blur of 25 px: at most 0.08; docs/calibration.md).
MIN_IMAGE_SHARPNESS = 0.1
#: The neighbourhood (radians, a Gaussian's sigma) a point's attraction is measured against.
LOCAL_RAD = 0.05


def local_mean(a: np.ndarray, sigma: float) -> np.ndarray:
    """A Gaussian mean of ``a`` (H, W) over ``sigma`` pixels, on a copy shrunk to a few pixels per sigma."""
    k = max(1, int(sigma // 4))
    h, w = a.shape
    small = cv2.resize(a, (max(1, w // k), max(1, h // k)), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / k, borderType=cv2.BORDER_REFLECT)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def _lift_map(image: np.ndarray, camera: Camera) -> tuple[np.ndarray, float]:
    """The image's lift (its fine attraction less the local mean), (h, w), and its scale to
    the calibrated image (image width over calibrated width)."""
    att = attraction_maps(image, field=f"images[{camera.name!r}]")[-1]
    s = image.shape[1] / camera.width
    return att - local_mean(att, LOCAL_RAD * 0.5 * (camera.K[0, 0] + camera.K[1, 1]) * s), s


def _mean_at(lift: np.ndarray, s: float, uv: np.ndarray) -> float:
    """Mean of ``lift`` (h, w) at pixels ``uv`` (M, 2) of the calibrated image (0 outside)."""
    u = ((uv[:, 0] + 0.5) * s - 0.5).astype(np.float32)
    v = ((uv[:, 1] + 0.5) * s - 0.5).astype(np.float32)
    vals = cv2.remap(lift, u[None], v[None], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return float(vals.mean())


def image_lift(image: np.ndarray, camera: Camera, uv: np.ndarray) -> float:
    """Mean lift of an image's edge attraction at some pixels.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W) of ``camera`` (any size).
        camera: The camera (its calibrated size and focal length).
        uv: Pixels of the calibrated image, (M, 2).

    Returns:
        The mean over the M points of the fine attraction (:func:`attraction_maps`) less its
        Gaussian mean over ``LOCAL_RAD``; 0.0 for no points.
    """
    if len(uv) == 0:
        return 0.0
    return _mean_at(*_lift_map(image, camera), uv)


@dataclass(frozen=True)
class ImageSupport:
    """How well an image supports a LiDAR verdict at the optimum's edge points.

    Attributes:
        lift: The mean lift at the points (:func:`image_lift`).
        sharpness: The share of that lift lost when the points move by the tolerance along
            the image's rows or columns (the mean of the four moves); 0.0 when the lift is not
            positive.
    """

    lift: float
    sharpness: float


def image_support(image: np.ndarray, camera: Camera, uv: np.ndarray, tolerance_deg: float) -> ImageSupport:
    """The lift of an image at some pixels and how sharply it falls off them.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W) of ``camera`` (any size).
        camera: The camera (its calibrated size and focal length).
        uv: Pixels of the calibrated image, (M, 2).
        tolerance_deg: The verdict's tolerance; the points are moved by it (at the camera's
            mean focal length) right, left, down and up.

    Returns:
        :class:`ImageSupport` (both 0.0 for no points).

    Convention:
        A turn by ``tolerance_deg`` moves a point near the image centre by
        ``tan(tolerance) * f`` pixels; the move is that, along u or v.
    """
    if len(uv) == 0:
        return ImageSupport(0.0, 0.0)
    lift, s = _lift_map(image, camera)
    at = _mean_at(lift, s, uv)
    px = float(np.tan(np.radians(tolerance_deg)) * 0.5 * (camera.K[0, 0] + camera.K[1, 1]))
    moved = np.mean([_mean_at(lift, s, uv + d) for d in ((px, 0.0), (-px, 0.0), (0.0, px), (0.0, -px))])
    return ImageSupport(at, float((at - moved) / at) if at > 0 else 0.0)
