"""Image edge attraction maps: how near each pixel is to an image edge, at a few scales.

An image edge is a pixel whose gradient magnitude (Sobel on the grey image after a
``EDGE_BLUR_PX`` Gaussian blur) is among the top ``100 - EDGE_PERCENTILE`` % of the image:
a threshold relative to the image, so exposure and texture density do not matter. The
attraction at scale ``s`` is ``exp(-d / s)`` with ``d`` the Euclidean distance (pixels) to
the nearest edge pixel: 1 on an edge, falling off over ``s`` pixels, never flat far from
edges (unlike a blurred edge image), and bounded so that a single far-off point cannot
dominate a sum (unlike a raw distance). Coarse scales give a wide basin, fine ones a sharp
optimum.

Convention:
    Maps are (H, W) float32 indexed ``[v, u]`` with integer (u, v) at pixel centres, as the
    image. See docs/conventions.md.
"""

from __future__ import annotations

import cv2
import numpy as np

from bevviz.checks import check_shape, field_error

__all__ = [
    "ATTRACTION_SCALES_PX",
    "ATTRACTION_SCALES_RAD",
    "EDGE_BLUR_PX",
    "EDGE_PERCENTILE",
    "LOCAL_MEAN_RAD",
    "attraction_maps",
    "edge_mask",
    "edge_strength",
    "oriented_attraction_maps",
]

#: Percentile of the gradient magnitude above which a pixel is an edge.
EDGE_PERCENTILE = 85.0
#: Gaussian blur (pixels) before the Sobel gradient: suppresses sensor noise and JPEG blocks.
EDGE_BLUR_PX = 1.0
#: Attraction scales (pixels at 1600 px image width), coarse to fine.
ATTRACTION_SCALES_PX = (16.0, 8.0)
#: The same scales as angles (radians: pixels / focal length), for images of any focal
#: length: 16 and 8 px at a 1266 px focal length (a 1600 px wide image of about 64 deg).
ATTRACTION_SCALES_RAD = (0.0126, 0.0063)
#: Side (radians: pixels / focal length) of the square whose mean attraction is taken off
#: each oriented map: about 63 px at a 1266 px focal length. A point in foliage, where every
#: pixel is near an edge, then scores about 0, and only a point nearer an edge than its
#: surroundings scores above 0 (without it, a TRI camera's score rose steadily with pitch as
#: its points moved into a tree line: its best pitch 8-10 deg off the truth; with it, the
#: truth on 17 of 18 axis lines of the TRI frame, docs/calibration.md).
LOCAL_MEAN_RAD = 0.05


def _grey(image: np.ndarray, field: str) -> np.ndarray:
    arr = np.asarray(image)
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise field_error(field, f"shape {arr.shape}", "must be an RGB image (H, W, 3) or a grey image (H, W)")
    if arr.dtype != np.uint8:
        raise field_error(field, f"dtype {arr.dtype}", "must be uint8")
    if arr.ndim == 3:
        arr = cv2.cvtColor(np.ascontiguousarray(arr), cv2.COLOR_RGB2GRAY)
    return arr.astype(np.float32) / 255.0


def _gradients(image: np.ndarray, blur_px: float, field: str) -> tuple[np.ndarray, np.ndarray]:
    """Sobel gradients (gx, gy) of the blurred grey image, each (H, W) float32 in grey levels per pixel."""
    g = _grey(image, field)
    if blur_px > 0:
        g = cv2.GaussianBlur(g, (0, 0), blur_px)
    return cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3) / 8.0, cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3) / 8.0


def _attraction(mask: np.ndarray, scales: tuple[float, ...]) -> list[np.ndarray]:
    """``exp(-distance to the nearest True pixel / s)`` for each scale ``s`` (pixels), (H, W) float32 each."""
    dist = cv2.distanceTransform((~mask).astype(np.uint8), cv2.DIST_L2, 5)
    return [np.exp(-dist / s).astype(np.float32) for s in scales]


def edge_strength(image: np.ndarray, blur_px: float = EDGE_BLUR_PX, field: str = "image") -> np.ndarray:
    """Gradient magnitude of the grey image.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W).
        blur_px: Gaussian sigma (pixels) before the Sobel operator; 0 for none.
        field: Name for errors.

    Returns:
        (H, W) float32, in grey levels (0..1) per pixel.
    """
    gx, gy = _gradients(image, blur_px, field)
    return np.sqrt(gx * gx + gy * gy)


def edge_mask(strength: np.ndarray, percentile: float = EDGE_PERCENTILE) -> np.ndarray:
    """Edge pixels: gradient magnitude above the image's ``percentile``, (H, W) bool."""
    check_shape(strength, (None, None), "strength")
    return strength > np.percentile(strength, percentile)


def attraction_maps(image: np.ndarray, scales_px: tuple[float, ...] = ATTRACTION_SCALES_PX,
                    percentile: float = EDGE_PERCENTILE, field: str = "image") -> list[np.ndarray]:
    """Edge attraction ``exp(-distance / s)`` for each scale ``s``, coarse to fine.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W).
        scales_px: Scales in pixels of a 1600 px wide image; scaled with the image width.
        percentile: Edge threshold (see :func:`edge_mask`).
        field: Name for errors.

    Returns:
        One (H, W) float32 map in (0, 1] per scale.
    """
    mask = edge_mask(edge_strength(image, field=field), percentile)
    scale = mask.shape[1] / 1600.0
    return _attraction(mask, tuple(s * scale for s in scales_px))


def _less_local_mean(att: np.ndarray, side_px: float) -> np.ndarray:
    """``att`` less its mean over a ``side_px`` square around each pixel (odd, >= 3), (H, W) float32."""
    k = max(3, int(round(side_px)) | 1)
    return att - cv2.blur(att, (k, k), borderType=cv2.BORDER_REFLECT)


def oriented_attraction_maps(image: np.ndarray, focal_px: float, scales_rad: tuple[float, ...] | None = None,
                             percentile: float | None = None, field: str = "image",
                             local_mean_rad: float | None = None) -> list[np.ndarray]:
    """Edge attraction per gradient orientation, for each scale, coarse to fine.

    Channel 0 is built from the horizontal gradient ``|gx|`` alone (edges that cross an
    image row: a pole's silhouette), channel 1 from the vertical one ``|gy|`` (edges that
    cross a column: a car's roof line). A LiDAR edge found between two points along a row
    is scored on channel 0, one found along a column on channel 1: an edge is attracted
    only by image edges that cross its own link, so a horizontal kerb cannot pull a pole's
    silhouette sideways. Each channel's threshold is its own ``percentile``. Each map is
    then taken less its local mean (over a ``local_mean_rad`` square): what scores is being
    nearer an edge than the surroundings are, not being in a textured region.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W).
        focal_px: The camera's focal length in pixels *of this image* (scales are angles).
        scales_rad: Attraction scales in radians (``s_px = s_rad * focal_px``).
        percentile: Edge threshold per channel (see :func:`edge_mask`).
        field: Name for errors.
        local_mean_rad: Side (radians) of the square whose mean is taken off each map;
            None keeps the raw attraction.

    Returns:
        One (2, H, W) float32 array per scale: in (-1, 1) (in (0, 1] with
        ``local_mean_rad`` None).

    Convention:
        Maps indexed ``[channel, v, u]``, pixels at centres. See docs/conventions.md.
    """
    if not (np.isfinite(focal_px) and focal_px > 0):
        raise field_error("focal_px", focal_px, "must be a finite focal length in pixels > 0")
    percentile = EDGE_PERCENTILE if percentile is None else percentile
    scales = tuple(s * focal_px for s in (ATTRACTION_SCALES_RAD if scales_rad is None else scales_rad))
    gx, gy = _gradients(image, EDGE_BLUR_PX, field)
    per = [_attraction(edge_mask(np.abs(g), percentile), scales) for g in (gx, gy)]
    if local_mean_rad is not None:
        per = [[_less_local_mean(m, local_mean_rad * focal_px) for m in maps] for maps in per]
    return [np.stack([per[0][k], per[1][k]]) for k in range(len(scales))]

