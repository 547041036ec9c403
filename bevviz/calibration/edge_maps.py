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

from bevviz.shapes import check_shape, field_error

__all__ = ["ATTRACTION_SCALES_PX", "EDGE_BLUR_PX", "EDGE_PERCENTILE", "attraction_maps", "edge_mask", "edge_strength"]

#: Percentile of the gradient magnitude above which a pixel is an edge.
EDGE_PERCENTILE = 85.0
#: Gaussian blur (pixels) before the Sobel gradient: suppresses sensor noise and JPEG blocks.
EDGE_BLUR_PX = 1.0
#: Attraction scales (pixels at 1600 px image width), coarse to fine.
ATTRACTION_SCALES_PX = (16.0, 8.0)


def _grey(image: np.ndarray, field: str) -> np.ndarray:
    arr = np.asarray(image)
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise field_error(field, f"shape {arr.shape}", "must be an RGB image (H, W, 3) or a grey image (H, W)")
    if arr.dtype != np.uint8:
        raise field_error(field, f"dtype {arr.dtype}", "must be uint8")
    if arr.ndim == 3:
        arr = cv2.cvtColor(np.ascontiguousarray(arr), cv2.COLOR_RGB2GRAY)
    return arr.astype(np.float32) / 255.0


def edge_strength(image: np.ndarray, blur_px: float = EDGE_BLUR_PX, field: str = "image") -> np.ndarray:
    """Gradient magnitude of the grey image.

    Args:
        image: uint8 RGB (H, W, 3) or grey (H, W).
        blur_px: Gaussian sigma (pixels) before the Sobel operator; 0 for none.
        field: Name for errors.

    Returns:
        (H, W) float32, in grey levels (0..1) per pixel.
    """
    g = _grey(image, field)
    if blur_px > 0:
        g = cv2.GaussianBlur(g, (0, 0), blur_px)
    gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3) / 8.0
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
    dist = cv2.distanceTransform((~mask).astype(np.uint8), cv2.DIST_L2, 5)
    scale = mask.shape[1] / 1600.0
    return [np.exp(-dist / (s * scale)).astype(np.float32) for s in scales_px]
