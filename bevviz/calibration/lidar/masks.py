"""Ignore masks: the parts of a camera image that do not show the world (the car's own body).

A rig may name, per camera, polygons in pixels of the calibrated image (the camera's
``ignore`` field of a JSON rig, :mod:`bevviz.io.rig_json`, or ``ignore.json`` of a frame
folder, :mod:`bevviz.io.frame_folder`); LiDAR points that project inside
them are not used as evidence (ground points behind the car's body land on its image).

Convention:
    Polygon vertices are (u, v) pixels of the calibrated image, pixel centres at integers.
    See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from bevviz.camera import Rig
from bevviz.checks import check_polygons, field_error

__all__ = ["ignore_masks", "in_mask"]


def ignore_masks(rig: Rig, polygons: Mapping[str, Sequence[Sequence[Sequence[float]]]] | None) -> dict[str, np.ndarray]:
    """Camera name -> (H, W) bool mask (True: ignored) from per-camera polygons.

    Args:
        rig: The rig (masks have each camera's calibrated size).
        polygons: Camera name -> list of polygons, each a list of at least three (u, v)
            pixels; None or empty for none.

    Returns:
        One mask per camera that has polygons.

    Raises:
        ValueError: naming ``ignore`` for an unknown camera or a malformed polygon.
    """
    out: dict[str, np.ndarray] = {}
    for name, polys in (polygons or {}).items():
        if name not in rig.names:
            raise field_error("ignore", name, f"names no camera of the rig; cameras: {rig.names}")
        cam = rig[name]
        mask = np.zeros((cam.height, cam.width), np.uint8)
        for poly in check_polygons(polys, "ignore", name):
            cv2.fillPoly(mask, [np.round(np.asarray(poly)).astype(np.int32)], 1)
        out[name] = mask.astype(bool)
    return out


def in_mask(mask: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Whether each pixel falls on a True pixel of ``mask`` (nearest pixel, clamped to the image).

    Args:
        mask: (H, W) bool mask at the camera's calibrated size.
        uv: Pixels (u, v), shape (N, 2), finite.

    Returns:
        (N,) bool.

    Convention:
        Pixels at centres: pixel (i, j) covers u in [j - 0.5, j + 0.5).
    """
    h, w = mask.shape
    iu = np.clip(np.round(uv[:, 0]).astype(np.int64), 0, w - 1)
    iv = np.clip(np.round(uv[:, 1]).astype(np.int64), 0, h - 1)
    return mask[iv, iu]
