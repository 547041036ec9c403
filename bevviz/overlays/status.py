"""Where each projected point stands: valid, behind the camera, or outside the image.

Convention:
    Pixels (u, v) with integer values at pixel centres: inside means -0.5 <= u <= W - 0.5
    (and likewise v). See docs/conventions.md.
"""

from __future__ import annotations

import numpy as np

from bevviz.checks import to_numpy
from bevviz.projection import Projection

__all__ = [
    "STATUS_BEHIND", "STATUS_NAMES", "STATUS_OUTSIDE", "STATUS_VALID", "STATUS_VALID", "behind_camera_uv",
    "point_status", "status_table"
]


STATUS_VALID, STATUS_BEHIND, STATUS_OUTSIDE = 0, 1, 2
#: Status names indexed by status code.
STATUS_NAMES = ("valid", "behind", "outside")


def point_status(proj: Projection) -> np.ndarray:
    """Why each projected point is or is not usable.

    Args:
        proj: A projection with fields of shape (N_cam, *P).

    Returns:
        Status codes, shape (N_cam, *P), uint8: ``STATUS_VALID`` (in front and inside the
        image), ``STATUS_BEHIND`` (depth <= eps; wins over outside) or ``STATUS_OUTSIDE``
        (in front but outside the image bounds).
    """
    in_front = to_numpy(proj.in_front).astype(bool)
    valid = to_numpy(proj.valid).astype(bool)
    status = np.full(in_front.shape, STATUS_OUTSIDE, dtype=np.uint8)
    status[valid] = STATUS_VALID
    status[~in_front] = STATUS_BEHIND
    return status


def status_table(proj: Projection, names: list[str]) -> list[dict]:
    """Per-camera counts and shares of points behind, outside and valid.

    Args:
        proj: Projection of P points (any batch shape) into N_cam cameras.
        names: Camera names, length N_cam.

    Returns:
        One row per camera (dicts with ``camera``, ``points``, ``valid``, ``behind``,
        ``outside`` and the shares ``valid %``, ``behind %``, ``outside %``).
    """
    status = point_status(proj).reshape(len(names), -1)
    total = status.shape[1]
    rows = []
    for name, s in zip(names, status):
        counts = np.bincount(s, minlength=3)
        row = {"camera": name, "points": int(total)}
        for code, label in enumerate(STATUS_NAMES):
            row[label] = int(counts[code])
        for code, label in enumerate(STATUS_NAMES):
            row[f"{label} %"] = round(100.0 * counts[code] / max(total, 1), 2)
        rows.append(row)
    return rows


def behind_camera_uv(proj: Projection, eps: float = 1e-5) -> np.ndarray:
    """Where points behind a camera would land if the depth test were forgotten.

    :func:`bevviz.projection.project_points` divides by ``max(depth, eps)`` (as BEVFormer
    does), which throws points behind the camera far off the image. Dividing by the true
    (negative) depth instead mirrors them through the optical centre back *into* the image
    — the classic ghost of a missing ``depth > 0`` check.

    Args:
        proj: A projection (uv (N_cam, *P, 2), depth (N_cam, *P)).
        eps: The eps the projection used.

    Returns:
        Naive pixel coordinates ``K p_cam / depth``, shape (N_cam, *P, 2); NaN where the
        depth is zero.
    """
    uv = to_numpy(proj.uv).astype(np.float64)
    depth = to_numpy(proj.depth).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        naive = uv * (np.maximum(depth, eps) / depth)[..., None]
    naive[depth == 0] = np.nan
    return naive
