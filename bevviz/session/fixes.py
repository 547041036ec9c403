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
from collections.abc import Sequence
from pathlib import Path

from bevviz.camera import Rig
from bevviz.errors import InputError
from bevviz.io.rig_json import rig_to_dict, save_rig
from bevviz.storage import NUSCENES

__all__ = ["fixed_rig_json", "write_fixed_rig"]


def _over_input(target: Path, inputs: Sequence[str | os.PathLike]) -> str | None:
    """The input ``target`` would overwrite (the input itself, or a file under an input folder), or None."""
    for given in inputs:
        src = Path(given).resolve()
        if target == src or (src.is_dir() and target.exists() and src in target.parents):
            return str(given)
    return None


def write_fixed_rig(rig: Rig, path: str | os.PathLike, inputs: Sequence[str | os.PathLike],
                    field: str = "--write-fixed") -> Path:
    """Write ``rig`` as a rig JSON at ``path``, refusing to write over any of ``inputs``.

    Args:
        rig: The corrected rig.
        path: Where to write it.
        inputs: The check's inputs (files and folders): ``path`` may be none of them nor an
            existing file inside one of the folders.
        field: The option's name for the error.

    Returns:
        The path written.

    Raises:
        InputError: naming ``field`` and the path when it would overwrite an input.
    """
    target = Path(path).resolve()
    hit = _over_input(target, inputs)
    if hit is not None:
        raise InputError(f"field {field!r}: {path} would overwrite the input {hit}; write the fixed rig elsewhere",
                         field, str(path))
    return save_rig(rig, target)


def fixed_rig_json(rig: Rig) -> str:
    """The corrected rig as rig JSON text (the app's download)."""
    return json.dumps(rig_to_dict(rig, NUSCENES), indent=2, allow_nan=False) + "\n"
