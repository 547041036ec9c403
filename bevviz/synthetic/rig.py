"""The synthetic vehicle: a nuScenes-like ring of six cameras, mounted by position and angles.

Convention:
    Ego frame x forward, y left, z up; cameras RDF; a mount's yaw is about ego z (positive
    to the left), pitch positive looking down. See docs/conventions.md.
"""

from __future__ import annotations

import numpy as np

from bevviz.camera import Camera, Rig
from bevviz.rotations import STORED_FROM_RDF, make_transform, rpy_to_matrix

__all__ = [
    "IMAGE_SIZE", "NUSCENES_LIKE_MOUNTS", "mounted_camera", "nuscenes_like_rig"
]


IMAGE_SIZE = (1600, 900)  # (W, H)

#: A nuScenes-like rig: name, mounting position (ego, metres), yaw / pitch / roll (degrees;
#: yaw about ego z, positive to the left; pitch positive looking down), focal length (px).
#: Positions and focal lengths follow nuScenes scene-0061's calibrated_sensor records;
#: the back camera has the shorter focal length (wider view), as in nuScenes.
NUSCENES_LIKE_MOUNTS = (
    ("CAM_FRONT", (1.700, 0.016, 1.511), (0.0, 0.6, -0.3), 1266.4),
    ("CAM_FRONT_RIGHT", (1.551, -0.493, 1.496), (-55.0, 0.4, 0.5), 1260.8),
    ("CAM_BACK_RIGHT", (1.015, -0.481, 1.562), (-110.0, 0.8, -0.4), 1256.7),
    ("CAM_BACK", (0.028, 0.003, 1.579), (180.0, 0.9, 0.2), 809.2),
    ("CAM_BACK_LEFT", (1.036, 0.484, 1.591), (110.0, 0.5, 0.3), 1256.7),
    ("CAM_FRONT_LEFT", (1.523, 0.495, 1.510), (55.0, 0.7, -0.5), 1272.6),
)


def mounted_camera(name: str, position, yaw_pitch_roll_deg, focal: float,
                   size: tuple[int, int] = IMAGE_SIZE) -> Camera:
    """A camera mounted at ``position`` looking along yaw/pitch/roll.

    Args:
        name: Camera name.
        position: Optical centre in the ego frame, shape (3,).
        yaw_pitch_roll_deg: (yaw, pitch, roll) in degrees of the camera body (FLU axes:
            body x is the optical axis) relative to the ego frame.
        focal: fx = fy in pixels; the principal point is the image centre.
        size: Image size (W, H).

    Convention:
        ``ego_from_cam = [R_body @ flu_from_rdf | position]`` with
        ``R_body = Rz(yaw) Ry(pitch) Rx(roll)``; pitch > 0 tilts the optical axis down.
    """
    yaw, pitch, roll = np.radians(yaw_pitch_roll_deg)
    ego_from_body = rpy_to_matrix(roll, pitch, yaw)
    ego_from_cam = make_transform(ego_from_body @ STORED_FROM_RDF["FLU"], np.asarray(position, float))
    W, H = size
    K = np.array([[focal, 0.0, (W - 1) / 2.0], [0.0, focal, (H - 1) / 2.0], [0.0, 0.0, 1.0]])
    cam_from_ego = np.linalg.inv(ego_from_cam)
    cam_from_ego[3] = [0, 0, 0, 1]
    return Camera(name, K, cam_from_ego, W, H)


def nuscenes_like_rig(size: tuple[int, int] = IMAGE_SIZE) -> Rig:
    """The six-camera nuScenes-like rig of the embedded sample (true calibration)."""
    return Rig(mounted_camera(n, p, a, f, size) for n, p, a, f in NUSCENES_LIKE_MOUNTS)
