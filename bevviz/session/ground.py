"""Where the ground is: the ego z the physical checks measure heights from, and whom to blame.

A rig is expected in an ego frame whose z = 0 is the road. Two stored rigs break that:

* a rig stored in a sensor's frame (KITTI: the Velodyne's, 1.7 m above the road): the LiDAR
  sees the road far below z = 0 and the cameras sit near z = 0; the projection sanity and the
  convention ranking then measure mounting heights from the road the LiDAR sees;
* a LiDAR whose own height is wrong (1-2 m off): the LiDAR sees the road away from z = 0,
  but every camera sits at a plausible height above z = 0 (:func:`cameras_grounded`); the
  cameras say where the ground is and the LiDAR is the suspect.

:class:`bevviz.session.doctor.Doctor` reads the numbers from here; Streamlit-free.

Convention:
    Ego frame z up, metres; bevviz's ground is z = 0 (docs/conventions.md). A camera's height
    is the ego z of its optical centre.
"""

from __future__ import annotations

from bevviz.camera import Rig
from bevviz.convention_ranking import HEIGHT_RANGE
from bevviz.lidar import LidarScan, ground_height

__all__ = ["GROUND_SHIFT_M", "cameras_grounded", "ground_note", "ground_shift", "shift_of"]

#: A LiDAR that sees the ground further than this (metres) from the ego frame's z = 0 shows
#: the rig is stored in a sensor's frame (KITTI: the Velodyne's, 1.7 m up): the projection
#: sanity then measures mounting heights from that ground (the development frames: nuScenes
#: 0.00, TRI 0.09-0.11, KITTI -1.66 to -1.70 m).
GROUND_SHIFT_M = 0.5


def ground_shift(scan: LidarScan | None) -> float:
    """Where the physical checks (projection sanity, convention ranking) put the ground: the
    ego z of the road ``scan`` sees (:func:`bevviz.lidar.ground_height`) when it lies more
    than :data:`GROUND_SHIFT_M` from z = 0 (a rig stored in a sensor's frame), else 0.

    Convention:
        Ego frame z up, metres; bevviz's ground is z = 0 (docs/conventions.md).
    """
    return shift_of(None if scan is None else ground_height(scan))


def shift_of(ground_z: float | None) -> float:
    """``ground_z`` (ego z of a seen road, metres) when it lies more than :data:`GROUND_SHIFT_M`
    from z = 0, else 0 (also for None: no road seen).

    Convention:
        Ego frame z up, metres.
    """
    return float(ground_z) if ground_z is not None and abs(ground_z) > GROUND_SHIFT_M else 0.0


def cameras_grounded(rig: Rig, lidar_ground_z: float) -> bool:
    """Whether the cameras, not the LiDAR, say where the ground is: every camera sits at a
    plausible mounting height (``HEIGHT_RANGE``) above the frame's z = 0 and some does not
    above the ground the LiDAR sees at ego z = ``lidar_ground_z``. Then the LiDAR's height is
    the suspect (a LiDAR 1-2 m off flags no camera); a rig stored in a sensor's frame (KITTI:
    cameras near z = 0, the road 1.7 m below) is not grounded.

    Convention:
        Ego frame z up, metres; a camera's height is the ego z of its optical centre.
    """
    lo, hi = HEIGHT_RANGE
    z = [float(c.position[2]) for c in rig]
    return all(lo <= h <= hi for h in z) and not all(lo <= h - lidar_ground_z <= hi for h in z)


def ground_note(rig: Rig, lidar_shift: float, shift: float) -> str:
    """What a check says about the ground, or "" when the road is at z = 0.

    Args:
        rig: The rig (its cameras' heights).
        lidar_shift: :func:`shift_of` the road the LiDAR sees (0: within
            :data:`GROUND_SHIFT_M` of z = 0).
        shift: The shift the physical checks use: ``lidar_shift``, or 0 when the cameras
            say where the ground is (:func:`cameras_grounded`).

    Convention:
        Ego frame z up, metres.
    """
    if lidar_shift and not shift:
        z = [float(c.position[2]) for c in rig]
        return (f"the LiDAR sees the ground at z = {lidar_shift:+.2f} m of the ego frame while every camera sits at a "
                f"plausible height above z = 0 ({min(z):.2f}-{max(z):.2f} m): the LiDAR's points look "
                f"{abs(lidar_shift):.2f} m too {'high' if lidar_shift > 0 else 'low'} (its height in its calibration), "
                "not the cameras; the projection sanity judges the cameras' heights from z = 0")
    if not shift:
        return ""
    return (f"the LiDAR sees the ground at z = {shift:+.2f} m of the ego frame, not at z = 0: the rig is stored in a "
            "sensor's frame (e.g. the LiDAR's); the projection sanity and the convention ranking's physical "
            "checks measure from that ground, while BEV heights (pillars, the seams' ground plane) stay "
            "measured from the frame's z = 0")
