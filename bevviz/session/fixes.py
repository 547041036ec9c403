"""The corrected rig a check offers: written as a rig JSON, never over an input.

``bevviz check ... --write-fixed PATH`` and the app's download take the rig the gross-error
screen corrected (:meth:`bevviz.session.Doctor.fixed_rig`) here.

Convention:
    The rig JSON is bevviz's own (:mod:`bevviz.io.rig_json`: sensor_to_ego, quaternion
    w, x, y, z, RDF camera axes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bevviz.camera import Rig
from bevviz.io.outputs import Reads, refuse_input_as_output
from bevviz.io.rig_json import rig_to_dict, save_rig
from bevviz.storage import NUSCENES

__all__ = ["fixed_rig_json", "write_fixed_rig"]


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
