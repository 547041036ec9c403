"""Storage conventions: how a calibration source stores a camera, and the raw numbers it stores.

A calibration file stores, per camera, a rotation (quaternion or matrix) and a translation.
What they mean depends on three choices this module names explicitly:

- ``extrinsic``: ``"sensor_to_ego"`` stores ``ego_from_sensor`` (nuScenes
  ``calibrated_sensor``: the sensor pose in the ego frame); ``"ego_to_sensor"`` stores
  ``sensor_from_ego`` (the extrinsic matrix of multiple-view geometry, OpenCV's rvec/tvec).
- ``quaternion``: ``"wxyz"`` (nuScenes, pyquaternion) or ``"xyzw"`` (SciPy, ROS).
- ``camera_axes``: the axes of the stored sensor frame: ``"RDF"`` (OpenCV: x right, y down,
  z forward), ``"RUB"`` (OpenGL/Blender: x right, y up, z backward) or ``"FLU"`` (ROS body:
  x forward, y left, z up).

This is core geometry: it knows matrices, not cameras. :func:`bevviz.camera.camera_from_raw`
and :func:`bevviz.camera.raw_from_camera` turn its transforms into cameras and back;
:mod:`bevviz.conventions` is the public face that also ranks conventions.

Convention:
    bevviz works in ego (x forward, y left, z up) and RDF camera frames; this module is the
    only place where other conventions are converted, at load time. See
    docs/conventions.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bevviz.checks import as_float_array, check_choice, check_shape, field_error
from bevviz.rotations import (
    QUATERNION_ORDERS,
    STORED_FROM_RDF,
    invert_transform,
    make_transform,
    matrix_to_quaternion,
    unit_quaternion_to_matrix,
    validate_rotation,
)

EXTRINSICS = ("sensor_to_ego", "ego_to_sensor")
CAMERA_AXES = tuple(STORED_FROM_RDF)


@dataclass(frozen=True)
class Convention:
    """How a calibration source stores extrinsics.

    Args:
        extrinsic: ``"sensor_to_ego"`` or ``"ego_to_sensor"``.
        quaternion: ``"wxyz"`` or ``"xyzw"``.
        camera_axes: ``"RDF"``, ``"RUB"`` or ``"FLU"``.

    Convention:
        nuScenes is ``Convention("sensor_to_ego", "wxyz", "RDF")`` (the default).
    """

    extrinsic: str = "sensor_to_ego"
    quaternion: str = "wxyz"
    camera_axes: str = "RDF"

    def __post_init__(self) -> None:
        check_choice(self.extrinsic, EXTRINSICS, "extrinsic")
        check_choice(self.quaternion, QUATERNION_ORDERS, "quaternion")
        check_choice(self.camera_axes, CAMERA_AXES, "camera_axes")

    @classmethod
    def all(cls) -> list[Convention]:
        """Every combination (2 x 2 x 3 = 12), nuScenes' first."""
        return [cls(e, q, a) for e, q, a in itertools.product(EXTRINSICS, QUATERNION_ORDERS, CAMERA_AXES)]

    @property
    def label(self) -> str:
        """Short readable label, e.g. ``"sensor_to_ego / wxyz / RDF"``."""
        return f"{self.extrinsic} / {self.quaternion} / {self.camera_axes}"

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"extrinsic": self.extrinsic, "quaternion": self.quaternion, "camera_axes": self.camera_axes}


NUSCENES = Convention("sensor_to_ego", "wxyz", "RDF")


@dataclass(frozen=True, eq=False)
class RawCamera:
    """Calibration exactly as stored by a source, before any convention is applied.

    Args:
        name: Camera name.
        K: Intrinsics, shape (3, 3).
        rotation: Quaternion, shape (4,), in the convention's order, or matrix, shape (3, 3).
        translation: Translation, shape (3,), metres.
        width: Image width in pixels.
        height: Image height in pixels.
    """

    name: str
    K: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    width: int
    height: int

    def rotation_matrix(self, quaternion_order: str) -> np.ndarray:
        """The stored rotation as a (3, 3) matrix (a quaternion is read in ``quaternion_order``).

        Raises:
            InputError: field ``rotation``: not a (4,) quaternion or a (3, 3) rotation, not
                finite, a zero quaternion, or one whose norm is off 1 by more than
                :data:`bevviz.checks.QUATERNION_NORM_TOL` (the message names the norm).
        """
        rot = as_float_array(self.rotation, "rotation", self.name)
        if rot.shape == (4,):
            return unit_quaternion_to_matrix(rot, quaternion_order, "rotation", self.name)
        check_shape(rot, (3, 3), "rotation", self.name)
        return validate_rotation(rot, "rotation", self.name)

    def cam_from_ego(self, convention: Convention) -> np.ndarray:
        """The stored extrinsics read in ``convention``, as ``cam_from_ego`` (RDF), shape (4, 4).

        Convention:
            ``sensor_to_ego``: stored (R, t) is ``ego_from_sensor``;
            ``ego_to_sensor``: stored (R, t) is ``sensor_from_ego``. The sensor frame has
            the stored axes; ``cam_from_ego = rdf_from_stored @ stored_from_ego``. See
            docs/conventions.md.
        """
        R = self.rotation_matrix(convention.quaternion)
        t = as_float_array(self.translation, "translation", self.name)
        check_shape(t, (3,), "translation", self.name)
        if not np.all(np.isfinite(t)):
            raise field_error("translation", t, "must be finite (no NaN or inf)", self.name)
        stored_T = make_transform(R, t)
        stored_from_ego = invert_transform(stored_T) if convention.extrinsic == "sensor_to_ego" else stored_T
        rdf_from_stored = make_transform(STORED_FROM_RDF[convention.camera_axes].T, np.zeros(3))
        return rdf_from_stored @ stored_from_ego

    @classmethod
    def storing(cls, name: str, K: np.ndarray, cam_from_ego: np.ndarray, width: int, height: int,
                convention: Convention, rotation_as: str = "quaternion") -> RawCamera:
        """The numbers ``convention`` stores for a camera; the inverse of :meth:`cam_from_ego`.

        Args:
            name: Camera name.
            K: Intrinsics, shape (3, 3).
            cam_from_ego: Extrinsics (RDF camera), shape (4, 4).
            width: Image width in pixels.
            height: Image height in pixels.
            convention: Target convention.
            rotation_as: ``"quaternion"`` (in the convention's order) or ``"matrix"``.

        Convention:
            See :meth:`cam_from_ego` and docs/conventions.md.
        """
        stored_from_rdf = make_transform(STORED_FROM_RDF[convention.camera_axes], np.zeros(3))
        stored_from_ego = stored_from_rdf @ cam_from_ego
        T = invert_transform(stored_from_ego) if convention.extrinsic == "sensor_to_ego" else stored_from_ego
        R = T[:3, :3]
        if rotation_as == "quaternion":
            rotation = matrix_to_quaternion(R, convention.quaternion)
        elif rotation_as == "matrix":
            rotation = R.copy()
        else:
            raise field_error("rotation_as", rotation_as, "must be 'quaternion' or 'matrix'", name)
        return cls(name, np.array(K, copy=True), rotation, T[:3, 3].copy(), width, height)
