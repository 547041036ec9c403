"""Where the embedded samples are, written once: a folder of package data found with importlib.resources.

The samples (``sample_data/`` of the repository: the synthetic rig and its nuScenes-format
copy, one real nuScenes keyframe, one real frame folder each of a TRI 6-camera rig and
of KITTI, and a drive of three consecutive TRI frames) travel inside the installed package as
``bevviz/sample_data/`` (the wheel's build copies the whole folder, every subfolder
included; see setup.py). In a source checkout (an editable install, or the repository on
``sys.path``) the package has no such folder and the repository's ``sample_data/`` beside
it is used. :func:`sample_data_dir` is the one place that decides; everything else asks it.

``bevviz check`` and the app accept the samples by name (:data:`NAMES`); a name never
shadows a path that exists (:func:`embedded_path`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bevviz.calibration import GroundTruth
from bevviz.errors import InputError
from bevviz.io.images import read_image
from bevviz.sample_location import locate

__all__ = [
    "ATTRIBUTIONS", "EMBEDDED", "NAMES", "REAL_KITTI_ATTRIBUTION", "REAL_NUSCENES_ATTRIBUTION",
    "REAL_TRI_ATTRIBUTION", "SAMPLE_DATA", "attribution", "embedded_path",
    "ground_truth", "is_embedded", "sample_data_dir", "sample_path", "sample_texture",
]

#: Names of the embedded samples -> their path under the samples' folder.
NAMES = {"rig": "rig.json", "nuscenes": "nuscenes", "real-nuscenes": "real_nuscenes",
         "real-tri": "real_tri", "real-tri-drive": "real_tri_drive", "real-kitti": "real_kitti"}
#: What to show while a real sample (or any data under it) is loaded: their licences ask for
#: the attribution (the README.md beside each).
REAL_NUSCENES_ATTRIBUTION = ("Data: nuScenes (Motional), https://www.nuscenes.org, licensed CC BY-NC-SA 4.0 "
                             "(non-commercial use only).")
REAL_TRI_ATTRIBUTION = ("Data: Toyota Research Institute (TRI-ML/dgp test scene, most likely from DDAD), "
                        "treated as CC BY-NC-SA 4.0 (non-commercial use only).")
REAL_KITTI_ATTRIBUTION = ("Data: KITTI (Geiger, Lenz, Stiller, Urtasun, IJRR 2013), "
                          "https://www.cvlibs.net/datasets/kitti, licensed CC BY-NC-SA 3.0 (non-commercial use only).")
#: Embedded sample name -> the attribution its data asks for.
ATTRIBUTIONS = {"real-nuscenes": REAL_NUSCENES_ATTRIBUTION, "real-tri": REAL_TRI_ATTRIBUTION,
                "real-tri-drive": REAL_TRI_ATTRIBUTION, "real-kitti": REAL_KITTI_ATTRIBUTION}
#: The folder of the embedded samples (it may be missing: a trimmed copy; callers check
#: what they need). Found once, at import.
SAMPLE_DATA = locate()
#: Name -> absolute path of each embedded sample, for callers that list them.
EMBEDDED = {name: SAMPLE_DATA / rel for name, rel in NAMES.items()}


def sample_data_dir() -> Path:
    """The folder of the embedded samples (:data:`SAMPLE_DATA`)."""
    return SAMPLE_DATA


def sample_path(name: str) -> Path:
    """Where the embedded sample ``name`` (a key of :data:`NAMES`) is, whether it exists or not."""
    return sample_data_dir() / NAMES[name]


def embedded_path(name: str) -> Path | None:
    """The path an embedded sample's name stands for, or None when ``name`` is not one.

    A name that is also an existing path (a user's ``./nuscenes``) is that path, never the
    sample: the caller gets None and reads the user's data.

    Args:
        name: A key of :data:`NAMES`, e.g. ``"rig"`` or ``"real-tri"`` (anything else: None).

    Returns:
        The sample's path under :func:`sample_data_dir`, or None.

    Raises:
        InputError: field ``SOURCE`` when ``name`` is an embedded sample that this
            installation lacks.
    """
    if name not in NAMES or Path(name).exists():
        return None
    path = sample_path(name)
    if not path.exists():
        raise InputError(f"field 'SOURCE': the embedded sample {path} is missing from this installation "
                         f"(got {name!r})", "SOURCE", name)
    return path


def is_embedded(path: str | Path, name: str) -> bool:
    """Whether ``path`` is the embedded sample ``name`` (same file or folder)."""
    try:
        return Path(path).resolve() == sample_path(name).resolve()
    except OSError:
        return False


def attribution(path: str | Path) -> str:
    """The licence line to show for data at or under ``path``: a real sample's, or ""."""
    root = Path(path).resolve()
    for name, line in ATTRIBUTIONS.items():
        real = sample_path(name).resolve()
        if root == real or real in root.parents:
            return line
    return ""


def sample_texture() -> tuple[np.ndarray, tuple[float, float], tuple[float, float]] | None:
    """The embedded sample's ground texture (world frame) and its extent, or None.

    Returns:
        ``(texture (H_tex, W_tex, 3) uint8 read-only, x_range, y_range)`` in metres of the
        world frame, or None without ``ground_texture.json``.
    """
    meta_path = sample_data_dir() / "ground_texture.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    tex = read_image(sample_data_dir() / meta.get("image", "ground_texture.png"))
    tex.setflags(write=False)
    return tex, tuple(meta["x_range"]), tuple(meta["y_range"])


def ground_truth(texture=None, world_from_ego: np.ndarray | None = None) -> GroundTruth | None:
    """The embedded sample's ground truth in the ego frame of a sample.

    Args:
        texture: What :func:`sample_texture` returned (a cached copy), or None to read it.
        world_from_ego: (4, 4) pose of the sample's ego frame in the world; None: identity
            (the rig JSON's frame).

    Returns:
        :class:`bevviz.calibration.GroundTruth`, or None when the texture is missing.
    """
    tex = sample_texture() if texture is None else texture
    if tex is None:
        return None
    image, xr, yr = tex
    return GroundTruth(image, xr, yr, None if world_from_ego is None else np.asarray(world_from_ego))
