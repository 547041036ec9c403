"""nuScenes annotation boxes, in the ego frame at the keyframe time (the frame of
:func:`bevviz.io.nuscenes.load_lidar_from`'s points).

Convention:
    Ego frame x forward, y left, z up; see docs/conventions.md.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bevviz.checks import field_error
from bevviz.io.nuscenes import LIDAR_CHANNEL
from bevviz.io.nuscenes_walk import sample_record
from bevviz.rotations import invert_transform, make_transform, matrix_to_quaternion, unit_quaternion_to_matrix

__all__ = ["AnnotationBox", "load_boxes_from"]


class AnnotationBox(NamedTuple):
    """One 3-D box annotation of a sample, in the ego frame at the keyframe time.

    Attributes:
        category: nuScenes category name, e.g. ``"vehicle.car"``.
        center: The box's geometric centre (x, y, z), shape (3,), metres.
        size: ``(w, l, h)`` (width along the box's y, length along its x, height), shape
            (3,), metres, nuScenes' order.
        rotation: ``ego_from_box`` as a (w, x, y, z) quaternion, shape (4,).

    Convention:
        Ego frame x forward, y left, z up; the box frame has x along its length (forward
        for a vehicle), y to its left, z up, origin at the centre. See docs/conventions.md.
    """

    category: str
    center: np.ndarray
    size: np.ndarray
    rotation: np.ndarray


def load_boxes_from(nusc, sample_token: str) -> list[AnnotationBox]:
    """The annotation boxes of one sample of an open dataset, in the ego frame at the keyframe time.

    Args:
        nusc: Handle from :func:`open_dataset`.
        sample_token: Sample token.

    Returns:
        One :class:`AnnotationBox` per ``sample_annotation`` of the sample, in table order
        (empty when the sample has none).

    Raises:
        InputError: naming ``sample_token`` (unknown, or no LIDAR_TOP sample_data to take
            the keyframe's ego pose from), ``ego_pose.rotation`` or ``sample_annotation``
            (a record with a malformed size or rotation; a quaternion whose norm is off 1 by
            more than :data:`bevviz.checks.QUATERNION_NORM_TOL`), and the value.

    Convention:
        nuScenes stores boxes in the global frame; the keyframe's ego frame is the ego pose
        of the sample's LIDAR_TOP sample_data (the sample's timestamp), the frame
        :func:`load_lidar_from` returns points in: ``p_ego = inv(global_from_ego) @
        p_global`` and ``ego_from_box = inv(R_global_from_ego) @ global_from_box``.
        Project into a camera with that camera's ``exposure_from_keyframe`` first (see
        :mod:`bevviz.lidar`).
    """
    s = sample_record(nusc, sample_token)
    if LIDAR_CHANNEL not in s["data"]:
        raise field_error("sample_token", sample_token,
                          f"sample has no {LIDAR_CHANNEL} sample_data to place its boxes at the keyframe time")
    key_sd = nusc.get("sample_data", s["data"][LIDAR_CHANNEL])
    pose = nusc.get("ego_pose", key_sd["ego_pose_token"])
    R_global_from_ego = unit_quaternion_to_matrix(pose["rotation"], "wxyz", "ego_pose.rotation")
    ego_from_global = invert_transform(make_transform(R_global_from_ego, np.asarray(pose["translation"], float)))
    boxes = []
    for token in s.get("anns", []):
        ann = nusc.get("sample_annotation", token)
        size = np.asarray(ann["size"], dtype=np.float64)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size < 0):
            raise field_error("sample_annotation", ann["size"], f"size of {token} must be three lengths >= 0 (w, l, h)")
        R_box = unit_quaternion_to_matrix(ann["rotation"], "wxyz", f"sample_annotation {token} rotation")
        center = ego_from_global[:3, :3] @ np.asarray(ann["translation"], float) + ego_from_global[:3, 3]
        category = ann.get("category_name")  # the devkit's reverse index adds it
        if category is None:
            category = nusc.get("category", nusc.get("instance", ann["instance_token"])["category_token"])["name"]
        boxes.append(AnnotationBox(category, center, size,
                                   matrix_to_quaternion(ego_from_global[:3, :3] @ R_box, "wxyz")))
    return boxes
