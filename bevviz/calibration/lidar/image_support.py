"""Whether an image can support a LiDAR verdict at all: the null test against structureless images.

The doctor's search always finds an optimum, on a real image and on uniform noise alike,
and on noise its bootstrap can still agree on one. A verdict needs the image to show the
LiDAR's edges where the optimum puts them: the mean *lift* (edge attraction less its local
mean, :func:`image_lift`) of the edge points at the optimum must reach ``MIN_IMAGE_LIFT``
(chosen on: docs/calibration.md, the tuning table).

Convention:
    Pixels at centres of the calibrated image; the image may be any size (``(u + 0.5) * s -
    0.5``). See docs/conventions.md.
"""

from __future__ import annotations

import cv2
import numpy as np

from bevviz.calibration.lidar.edge_maps import attraction_maps
from bevviz.camera import Camera

__all__ = ["LOCAL_RAD", "MIN_IMAGE_LIFT", "image_lift", "local_mean"]

#: Least mean lift at the optimum for a verdict (structureless images: at most 0.022).
MIN_IMAGE_LIFT = 0.05
#: The neighbourhood (radians, a Gaussian's sigma) a point's attraction is measured against.
LOCAL_RAD = 0.05


def local_mean(a: np.ndarray, sigma: float) -> np.ndarray:
    """A Gaussian mean of ``a`` (H, W) over ``sigma`` pixels, on a copy shrunk to a few pixels per sigma."""
    k = max(1, int(sigma // 4))
    h, w = a.shape
    small = cv2.resize(a, (max(1, w // k), max(1, h // k)), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / k, borderType=cv2.BORDER_REFLECT)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


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
    att = attraction_maps(image, field=f"images[{camera.name!r}]")[-1]
    s = image.shape[1] / camera.width
    lift = att - local_mean(att, LOCAL_RAD * 0.5 * (camera.K[0, 0] + camera.K[1, 1]) * s)
    u = ((uv[:, 0] + 0.5) * s - 0.5).astype(np.float32)
    v = ((uv[:, 1] + 0.5) * s - 0.5).astype(np.float32)
    vals = cv2.remap(lift, u[None], v[None], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return float(vals.mean())
