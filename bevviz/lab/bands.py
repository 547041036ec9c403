"""What the evaluation injects and what it judges together: fault bands and frame windows.

* A *fault band* ``LO-HI`` (degrees, e.g. ``0.5-1``, ``1-2``, ``2-5``): each fault turns one
  camera by an angle drawn uniformly from the band about a uniformly random axis
  (:func:`random_faults`; the seed mixes the frame's and the camera's names, so the same
  seed turns a camera about the same axis in every band, by a size of that band).
* A *frame window*: frames of one rig (same cameras and calibration, :func:`sequences`)
  judged together, their evidence pooled. :func:`windows` cuts each rig's frames into
  consecutive windows of ``k`` frames for each requested frame count ``k``; every window
  of a rig is given the same faults (those drawn for the rig's first frame), so a frame
  count's row and another's differ by the frames judged, not by the faults.

Convention:
    Faults are body-frame (FLU) rotations ``(roll, pitch, yaw)`` in degrees, as
    :func:`bevviz.calibration.perturbations.perturb_rig` takes them (docs/conventions.md).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from bevviz.camera import same_calibration
from bevviz.errors import InputError
from bevviz.io.frame_folder import RealFrame

__all__ = ["BANDS", "FAULTS_PER_CAMERA", "FAULT_RANGE_DEG", "MAX_BAND_DEG", "band_faults", "band_label",
           "group_name", "parse_band", "parse_frame_counts", "random_faults", "sequences", "windows"]

#: Random faults: magnitude range (degrees) and faults per camera (the default band).
FAULT_RANGE_DEG = (1.0, 2.0)
FAULTS_PER_CAMERA = 2
#: The issue's fault bands (degrees).
BANDS = ((0.5, 1.0), (1.0, 2.0), (2.0, 5.0))
#: Largest fault (degrees) a band may reach.
MAX_BAND_DEG = 10.0


def parse_band(text: str) -> tuple[float, float]:
    """A band ``"LO-HI"`` in degrees, ``0 < LO < HI <= MAX_BAND_DEG``, as ``(LO, HI)``.

    Raises:
        InputError: naming ``band`` and the text when it is not such a band.
    """
    parts = str(text).strip().split("-")
    shape = f"band: {text!r} is not LO-HI in degrees (e.g. 0.5-1, 1-2, 2-5)"
    if len(parts) != 2:
        raise InputError(shape, "band", text)
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise InputError(shape, "band", text) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 < lo < hi <= MAX_BAND_DEG):
        raise InputError(f"band: {text!r} must have 0 < LO < HI <= {MAX_BAND_DEG:g} degrees", "band", text)
    return lo, hi


def parse_frame_counts(counts: Sequence[int]) -> list[int]:
    """Frame counts (each >= 1), duplicates dropped, in the order given.

    Raises:
        InputError: naming ``frame-counts`` and the first count below 1.
    """
    for k in counts:
        if k < 1:
            raise InputError(f"frame-counts: {k} frames cannot be judged together (at least 1)", "frame-counts", k)
    return list(dict.fromkeys(int(k) for k in counts))


def band_label(band: tuple[float, float]) -> str:
    """``"LO-HI"`` as the tables write a band."""
    return f"{band[0]:g}-{band[1]:g}"


def random_faults(frame: RealFrame, per_camera: int = FAULTS_PER_CAMERA, seed: int = 0,
                  range_deg: tuple[float, float] = FAULT_RANGE_DEG) -> list[tuple[str, np.ndarray]]:
    """Seeded faults: per camera, ``per_camera`` body rotations of ``range_deg`` degrees about
    uniformly random axes; (camera, (roll, pitch, yaw) degrees (3,)) each.

    The seed mixes the frame's and the camera's names, so a case does not change when other
    frames or cameras are added.
    """
    out = []
    for cam in frame.rig.names:
        rng = np.random.default_rng([seed, zlib.crc32(frame.name.encode()), zlib.crc32(cam.encode())])
        for _ in range(per_camera):
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            out.append((cam, axis * rng.uniform(*range_deg)))
    return out


def band_faults(frame: RealFrame, bands: Sequence[tuple[float, float]] = (FAULT_RANGE_DEG,),
                per_camera: int = FAULTS_PER_CAMERA, seed: int = 0) -> list[tuple[str, np.ndarray, str]]:
    """:func:`random_faults` of every band in turn: (camera, (roll, pitch, yaw) degrees (3,),
    band label) each."""
    return [(cam, fault, band_label(band)) for band in bands
            for cam, fault in random_faults(frame, per_camera, seed, band)]


def sequences(frames: Sequence[RealFrame]) -> list[list[RealFrame]]:
    """Frames grouped into sequences of one rig (same cameras, same calibration), in order."""
    groups: list[list[RealFrame]] = []
    for f in frames:
        for g in groups:
            if same_calibration(g[0].rig, f.rig):
                g.append(f)
                break
        else:
            groups.append([f])
    return groups


def group_name(group: Sequence[RealFrame]) -> str:
    """A window's name: its first frame's, with ``+N`` for N more frames."""
    if len(group) == 1:
        return group[0].name
    return f"{group[0].name}+{len(group) - 1}"


def windows(frames: Sequence[RealFrame], counts: Sequence[int] | None = None,
            sequence: bool = False) -> list[tuple[RealFrame, list[RealFrame]]]:
    """What is judged together: (the frame whose faults are drawn, the frames judged together).

    Args:
        frames: The frames.
        counts: Frame counts: for each rig (:func:`sequences`) and each count ``k`` (at
            most the rig's frames), its consecutive windows of ``k`` frames, all with the
            faults of the rig's first frame. None: as ``sequence`` says.
        sequence: With ``counts`` None, each rig's frames all together (else each frame
            alone, with its own faults).

    Returns:
        One (fault frame, window) per window, rig by rig, counts in the order given.
    """
    if counts is None:
        groups = sequences(frames) if sequence else [[f] for f in frames]
        return [(g[0], g) for g in groups]
    return [(g[0], g[i:i + k]) for g in sequences(frames) for k in counts for i in range(0, len(g) - k + 1, k)]
