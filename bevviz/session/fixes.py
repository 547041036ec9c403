"""The corrected rig a check offers, and how it is written: a rig JSON, never over an input.

Where the gross-error screen names a fault, the corrected rig is its fix
(:meth:`bevviz.session.Doctor.fixed_rig`); else each camera the LiDAR calls miscalibrated is
refined against it (:func:`corrections`: applied, proposed or declined, and why) and the
corrected rig holds what passed (:func:`corrected_rig`). ``bevviz check ... --write-fixed
PATH`` writes it; the app offers the gross fix as a download.

Convention:
    The rig JSON is bevviz's own (:mod:`bevviz.io.rig_json`: sensor_to_ego, quaternion
    w, x, y, z, RDF camera axes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bevviz.calibration import MISCALIBRATED
from bevviz.camera import Rig
from bevviz.io.outputs import Reads, refuse_input_as_output
from bevviz.io.rig_json import rig_to_dict, save_rig
from bevviz.session.doctor import Doctor, Progress
from bevviz.session.refinement import Refinement
from bevviz.storage import NUSCENES

__all__ = ["corrected_rig", "corrections", "fixed_rig_json", "to_correct", "write_fixed_rig"]


def write_fixed_rig(rig: Rig, path: str | os.PathLike, reads: Reads, field: str = "--write-fixed") -> Path:
    """Write ``rig`` as a rig JSON at ``path`` (atomically), never over what the check reads.

    Args:
        rig: The corrected rig.
        path: Where to write it.
        reads: What the check reads (:class:`bevviz.io.outputs.Reads`): ``path`` may be none
            of its files (by any name) nor lie inside one of its folders.
        field: The option's name for the error.

    Returns:
        The path written.

    Raises:
        InputError: naming ``field`` and the path when it would overwrite an input
            (:func:`bevviz.io.outputs.refuse_input_as_output`, the one output-path rule).
    """
    return save_rig(rig, refuse_input_as_output(field, path, reads))


def fixed_rig_json(rig: Rig) -> str:
    """The corrected rig as rig JSON text (the app's download)."""
    return json.dumps(rig_to_dict(rig, NUSCENES), indent=2, allow_nan=False) + "\n"


def to_correct(doctor: Doctor) -> list[str]:
    """The cameras :func:`corrections` refines: those the LiDAR calls miscalibrated, worst
    first; none without a LiDAR or every image, or while the gross-error screen names a fault
    (that is fixed first, and the fine search judged again on the fixed rig)."""
    screen = doctor.gross()
    if doctor.lidar is None or not doctor.scene.has_all_images or (screen is not None and screen.errors):
        return []
    return [f.camera for f in doctor.diagnose()
            if f.verdict == MISCALIBRATED and f.witnesses.get("lidar") == MISCALIBRATED]


def corrections(doctor: Doctor, progress: Progress | None = None) -> dict[str, Refinement]:
    """The LiDAR's checked correction of every camera of :func:`to_correct`.

    Each is the doctor's refinement against the LiDAR, computed once and kept
    (:meth:`bevviz.session.Doctor.refined`), so its ``history`` says whether it was applied,
    only proposed, or declined, and why.

    Args:
        doctor: The doctor of the scene checked.
        progress: Optional ``callback(done, total, camera)``, one step a camera.

    Returns:
        Camera name -> :class:`~bevviz.session.refinement.Refinement`, worst first.
    """
    named = to_correct(doctor)
    out = {}
    for k, camera in enumerate(named):
        if progress is not None:
            progress(k, len(named), camera)
        out[camera] = doctor.refined("lidar", camera) or doctor.refine_lidar(camera, draw=False)
    if progress is not None and named:
        progress(len(named), len(named), "")
    return out


def corrected_rig(doctor: Doctor, apply_proposals: bool = False) -> Rig | None:
    """The rig with every correction the check makes: the gross-error screen's fixes where it
    names a fault, else each camera's LiDAR correction that passed every check
    (:func:`corrections`), and with ``apply_proposals`` those only proposed too (they passed
    every check, but the LiDAR places the rig's other cameras further from their calibration
    than a correction should land). None when there is nothing to correct."""
    fixed = doctor.fixed_rig()
    if fixed is not None:
        return fixed
    rig, moved = doctor.rig, False
    for camera, res in corrections(doctor).items():
        after = res.rig if res.history.accepted else res.proposed_rig if apply_proposals else None
        if after is not None:
            rig, moved = rig.replace(after[camera]), True
    return rig if moved else None
