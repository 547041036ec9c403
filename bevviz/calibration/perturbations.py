"""Perturbations and deltas of a camera's mounting: body-frame roll, pitch and yaw.

:func:`perturb_camera` rotates and moves a camera the way the Calibration Doctor's sliders
do; :func:`camera_delta` measures the correction between two calibrations (its inverse);
:func:`apply_correction` applies a refinement's body-frame rotation vector.

Convention:
    Small rotations of a camera are given in its *body* frame (FLU: roll about the optical
    axis, pitch about the camera's left axis, positive looking down, yaw about its up axis,
    positive to the left), composed ``R = Rz(yaw) Ry(pitch) Rx(roll)``. See
    docs/conventions.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bevviz.camera import Camera, Rig
from bevviz.checks import check_shape, field_error
from bevviz.rotations import (
    FLU_FROM_RDF,
    axis_angle_to_matrix,
    body_rotation,
    invert_transform,
    make_transform,
    matrix_to_rpy,
)

__all__ = [
    "PERTURBATION_KEYS", "apply_correction", "apply_perturbations", "camera_delta", "CameraDelta", "deltas_json",
    "perturb_camera", "perturb_rig", "rig_deltas", "same_turn"
]


def perturb_camera(camera: Camera, roll_deg: float = 0.0, pitch_deg: float = 0.0, yaw_deg: float = 0.0,
                   translation: Sequence[float] = (0.0, 0.0, 0.0), fx_scale: float = 1.0,
                   fy_scale: float = 1.0) -> Camera:
    """The camera with its mounting rotated and moved, and its focal lengths scaled.

    Args:
        camera: The camera.
        roll_deg: Rotation about the optical axis (degrees, body x).
        pitch_deg: Rotation about the camera's left axis (degrees; positive looks down).
        yaw_deg: Rotation about the camera's up axis (degrees; positive turns left).
        translation: Shift of the optical centre in the ego frame, shape (3,), metres.
        fx_scale: Factor on fx (the principal point stays).
        fy_scale: Factor on fy.

    Returns:
        The perturbed camera (same name and image size).

    Convention:
        ``ego_from_body' = ego_from_body @ Rz(yaw) Ry(pitch) Rx(roll)`` with the body frame
        FLU (x = optical axis, y = left, z = up in the image), so the angles mean the same
        for every camera whatever its heading.
    """
    for name, val in (("fx_scale", fx_scale), ("fy_scale", fy_scale)):
        if not (np.isfinite(val) and val > 0):
            raise field_error(name, val, "must be finite and > 0", camera.name)
    t = np.asarray(translation, dtype=np.float64)
    check_shape(t, (3,), "translation", camera.name)
    ego_from_cam = camera.ego_from_cam
    R = body_rotation(ego_from_cam[:3, :3], roll_deg, pitch_deg, yaw_deg)
    new_ego_from_cam = make_transform(R, ego_from_cam[:3, 3] + t)
    K = camera.K.copy()
    K[0, 0] *= fx_scale
    K[1, 1] *= fy_scale
    return camera.replace(K=K, cam_from_ego=invert_transform(new_ego_from_cam))



def perturb_rig(rig: Rig, camera: str, **kwargs) -> Rig:
    """The rig with one camera perturbed; keyword arguments as :func:`perturb_camera`."""
    return rig.replace(perturb_camera(rig[camera], **kwargs))


#: Keys of a perturbation dict and their neutral values (translation in cm, as sliders show it).
PERTURBATION_KEYS = {"roll_deg": 0.0, "pitch_deg": 0.0, "yaw_deg": 0.0, "x_cm": 0.0, "y_cm": 0.0, "z_cm": 0.0,
                     "fx_scale": 1.0, "fy_scale": 1.0}



def apply_perturbations(rig: Rig, perturbations: Mapping[str, Mapping[str, float]]) -> Rig:
    """The rig with several cameras perturbed.

    Args:
        rig: The rig.
        perturbations: Camera name -> dict with any of :data:`PERTURBATION_KEYS`
            (degrees, cm, scale factors); missing keys are neutral.

    Returns:
        The perturbed rig (the same object when nothing changes).
    """
    out = rig
    for name, p in perturbations.items():
        v = {**PERTURBATION_KEYS, **{k: float(x) for k, x in p.items()}}
        unknown = set(p) - set(PERTURBATION_KEYS)
        if unknown:
            raise field_error("perturbation", sorted(unknown), f"unknown keys; allowed: {list(PERTURBATION_KEYS)}",
                              name)
        if all(v[k] == PERTURBATION_KEYS[k] for k in PERTURBATION_KEYS):
            continue
        out = out.replace(perturb_camera(out[name], v["roll_deg"], v["pitch_deg"], v["yaw_deg"],
                                         (v["x_cm"] / 100.0, v["y_cm"] / 100.0, v["z_cm"] / 100.0),
                                         v["fx_scale"], v["fy_scale"]))
    return out



@dataclass(frozen=True)
class CameraDelta:
    """How a camera changed between two calibrations.

    Attributes:
        camera: Camera name.
        roll_deg, pitch_deg, yaw_deg: Body-frame rotation from *before* to *after*.
        translation_m: Shift of the optical centre in the ego frame, shape (3,), metres.
        fx_scale, fy_scale: after / before focal lengths.
        angle_deg: Total rotation angle between the two orientations.
    """

    camera: str
    roll_deg: float
    pitch_deg: float
    yaw_deg: float
    translation_m: tuple[float, float, float]
    fx_scale: float
    fy_scale: float
    angle_deg: float

    def to_dict(self) -> dict:
        """JSON-ready form (translation in cm as well, as the sliders show it)."""
        return {
            "camera": self.camera, "roll_deg": self.roll_deg, "pitch_deg": self.pitch_deg,
            "yaw_deg": self.yaw_deg, "translation_m": list(self.translation_m),
            "translation_cm": [100.0 * v for v in self.translation_m],
            "fx_scale": self.fx_scale, "fy_scale": self.fy_scale, "angle_deg": self.angle_deg,
        }



def camera_delta(before: Camera, after: Camera) -> CameraDelta:
    """The body-frame correction taking ``before`` to ``after`` (inverse of :func:`perturb_camera`).

    Args:
        before: The camera as it was.
        after: The camera as it is now (same name).

    Returns:
        :class:`CameraDelta` such that ``perturb_camera(before, **delta)`` gives ``after``.
    """
    Ra = before.ego_from_cam[:3, :3] @ FLU_FROM_RDF.T  # ego_from_body
    Rb = after.ego_from_cam[:3, :3] @ FLU_FROM_RDF.T
    rel = Ra.T @ Rb
    roll, pitch, yaw = np.degrees(matrix_to_rpy(rel))
    cos = np.clip((np.trace(rel) - 1.0) / 2.0, -1.0, 1.0)
    dt = after.position - before.position
    return CameraDelta(before.name, float(roll), float(pitch), float(yaw),
                       tuple(float(v) for v in dt), float(after.K[0, 0] / before.K[0, 0]),
                       float(after.K[1, 1] / before.K[1, 1]), float(np.degrees(np.arccos(cos))))



def same_turn(camera: Camera, other: Camera, roll_deg: float, pitch_deg: float, yaw_deg: float) -> np.ndarray:
    """A turn of ``camera`` as the same turn of ``other`` in ``other``'s own body angles, (3,).

    ``perturb_camera(camera, roll, pitch, yaw)`` turns the camera about its optical centre;
    the returned ``(roll, pitch, yaw)`` turn ``other`` by the same rotation of the ego frame.
    For a camera described another way (turned on its mount, ``Camera.rot90``; resized) it is
    the same physical fault: the body axes turn with the description.

    Convention:
        Body-frame (FLU) degrees, ``R = Rz(yaw) Ry(pitch) Rx(roll)`` as :func:`perturb_camera`.
    """
    turned = perturb_camera(camera, roll_deg, pitch_deg, yaw_deg)
    turn = turned.ego_from_cam[:3, :3] @ camera.cam_from_ego[:3, :3]  # in the ego frame, about the centre
    R = (turn @ other.ego_from_cam[:3, :3]).T  # cam_from_ego of the turned ``other``
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, -R @ other.position
    d = camera_delta(other, other.replace(cam_from_ego=T))
    return np.array([d.roll_deg, d.pitch_deg, d.yaw_deg])


def rig_deltas(before: Rig, after: Rig) -> list[CameraDelta]:
    """Per-camera :class:`CameraDelta` between two rigs with the same camera names."""
    return [camera_delta(before[n], after[n]) for n in before.names]



def deltas_json(before: Rig, after: Rig) -> str:
    """The per-camera correction ``before -> after`` as a JSON document (for download)."""
    return json.dumps({"convention": "body-frame FLU roll/pitch/yaw (deg), R = Rz Ry Rx; "
                                     "translation in the ego frame",
                       "cameras": [d.to_dict() for d in rig_deltas(before, after)]}, indent=2)



def apply_correction(camera: Camera, rot_deg: np.ndarray, trans_cm: np.ndarray) -> Camera:
    """Camera with a body-frame rotation vector (deg, (3,)) and ego translation (cm, (3,)) applied."""
    omega_rdf = FLU_FROM_RDF.T @ np.radians(rot_deg)
    A = axis_angle_to_matrix(torch.as_tensor(omega_rdf, dtype=torch.float64)).numpy()
    E = camera.ego_from_cam
    new_E = make_transform(E[:3, :3] @ A, E[:3, 3] + trans_cm / 100.0)
    return camera.replace(cam_from_ego=invert_transform(new_E))
