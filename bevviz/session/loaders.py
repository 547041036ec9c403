"""One loader for every rig source: a JSON rig with its images, a nuScenes sample, the embedded samples.

Every road to a :class:`~bevviz.session.scene.Scene` runs through here: ``bevviz check``
(:func:`load_scene` resolves its SOURCE), the audit (:func:`nuscenes_scene` per sample) and
the app (its sidebar calls these same loaders, with Streamlit caches around them). So the
LiDAR rule (:func:`sample_lidar`), the image lookup (:func:`find_images`) and the embedded
sample's ground truth are written once, and one frame gives the same numbers everywhere.
Uploaded bytes are :mod:`bevviz.session.uploads`.

Image lookup for a JSON rig and an images folder DIR, per camera, first found wins:
    1. the path the JSON names for it, under DIR;
    2. that path's file name, in DIR;
    3. the camera's name with an image extension (``CAM_FRONT.jpg``, ``.jpeg``, ``.png``,
       ``.bmp``, ``.tif``, ``.tiff``), in DIR.
    Without ``--images``, DIR is the JSON file's folder.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path, PurePath

import numpy as np

from bevviz.calibration import GroundTruth
from bevviz.camera import same_calibration
from bevviz.checks import field_error
from bevviz.conventions import NUSCENES
from bevviz.errors import InputError
from bevviz.io.json_reader import read_json
from bevviz.io.nuscenes import (
    LIDAR_CHANNEL,
    ego_pose,
    first_sample,
    has_lidar,
    is_dataroot,
    list_samples,
    list_scenes,
    load_lidar_from,
    load_sample_from,
    neighbour_samples,
    open_dataset,
    sample_meta,
)
from bevviz.io.nuscenes_boxes import load_boxes_from
from bevviz.io.pointcloud import read_pointcloud
from bevviz.io.rig_json import RigFile, RigImages, load_rig_file, load_rig_images
from bevviz.lidar import LidarScan
from bevviz.session import embedded
from bevviz.session.frame_folders import drive_frames, drive_scene, frame_folder_scene, is_frame_folder
from bevviz.session.scene import DEFAULT_FRAMES, MAX_FRAMES, Scene, SceneFrame, freeze
from bevviz.synthetic import ground_texture, nuscenes_like_rig, render

__all__ = [
    "DEFAULT_FRAMES", "IMAGE_EXTENSIONS", "MAX_FRAMES", "NUSCENES_VERSIONS", "SYNTHETIC_SCALE", "dataset",
    "dataset_frames", "drive_frames", "drive_scene", "find_images", "frame_folder_scene", "freeze", "is_frame_folder",
    "load_scene", "loaded_images", "nuscenes_scene", "rig_json_scene", "sample_lidar", "synthetic_scene",
]

NUSCENES_VERSIONS = ("v1.0-mini", "v1.0-trainval", "v1.0-test")
#: Extensions tried, in order, for an image named after its camera (step 3 of the lookup).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")
SYNTHETIC_SCALE = 0.4  # 640 x 360: rendering full-size images takes half a minute


def loaded_images(images: RigImages) -> dict:
    """The Scene fields of what a loader read: ``images`` (read-only) and ``warnings``, the
    conversions made (one line per converted file)."""
    warnings = tuple(images.warnings)
    return {"images": freeze(images), "warnings": warnings}


# --------------------------------------------------------------------------------------
# JSON rig
# --------------------------------------------------------------------------------------


def find_images(rig_file: RigFile, folder: str | Path) -> tuple[RigFile, str]:
    """Where each camera's image is in ``folder``, by the lookup order of the module docstring.

    Args:
        rig_file: The parsed rig.
        folder: The images folder (``--images DIR``, or the JSON file's folder).

    Returns:
        ``(rig_file with image_files pointing at what was found, relative to folder;
        why cameras have no image, or "")``.
    """
    folder = Path(folder)
    by_stem: dict[str, str] | None = None
    found: dict[str, str | None] = {}
    missing = []
    for cam in rig_file.rig.names:
        named = rig_file.image_files.get(cam)
        choice = None
        if named and (folder / named).is_file():
            choice = named
        elif named and (folder / PurePath(named).name).is_file():
            choice = PurePath(named).name
        else:
            if by_stem is None:  # listed once, only when a camera needs step 3
                by_stem = {}
                for p in sorted(folder.iterdir()) if folder.is_dir() else ():
                    if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file():
                        by_stem.setdefault(p.stem, p.name)
            choice = by_stem.get(cam)
        found[cam] = choice
        if choice is None:
            missing.append(cam)
    why = ""
    if missing:
        why = (f"no image found for {', '.join(missing)} in {folder} (looked for, in order: the path the JSON "
               f"names under the folder, its file name in the folder, the camera's name with "
               f"{'/'.join(IMAGE_EXTENSIONS)})")
    return dataclasses.replace(rig_file, image_files=found), why


def rig_json_scene(path: str | Path, images: str | Path | None = None, name: str | None = None,
                   texture=None, more_images: Sequence[str | Path] = (), scans: Sequence[str | Path] = ()) -> Scene:
    """A JSON rig file with its images.

    Args:
        path: The rig JSON (bevviz format).
        images: Folder of its images (default: the JSON file's folder); each camera's image
            is found as the module docstring says.
        name: What the user called it (``"rig"`` for the embedded sample), for the report.
        texture: The embedded sample's texture (:func:`bevviz.session.embedded.sample_texture`)
            if the caller caches it.
        more_images: Folders of further image sets of the same rig (other moments of a
            drive, ``bevviz check rig.json --images DIR --images DIR2 ...``), each found as
            ``images`` is: the scene's :attr:`Scene.more_frames` (no scan), which the seams
            average over.
        scans: A LiDAR point cloud per image set, in the ego frame (``--scan FILE``, in the
            order of the image sets; a nuScenes ``.bin`` or a ``.npy`` (N, 3) / (N, 4),
            :func:`bevviz.io.pointcloud.read_pointcloud`): the LiDAR witness adds their
            evidence up. A scan carries no ego motion to the exposures, so on a rig of
            several cameras the LiDAR witness stays "inconclusive" (a frame folder's
            ``exposure.json`` gives it).

    Returns:
        The scene; cameras whose image was not found have none, and
        :attr:`Scene.missing_images` says which and what was looked for.

    Raises:
        InputError: naming ``--images`` (not a folder; a further set that lacks a camera's
            image), ``--scan`` (not one per image set; a file the point-cloud reader
            rejects, with its field), or anything :mod:`bevviz.io.rig_json` rejects (camera,
            field, value).
    """
    p = Path(path)
    if images is not None and not Path(images).is_dir():
        raise field_error("--images", str(images), "is not an existing folder")
    folder = Path(images) if images is not None else p.parent
    rig_file = load_rig_file(p)
    located, missing = find_images(rig_file, folder)
    first = load_rig_images(located, folder)
    is_sample = embedded.is_embedded(p, "rig")
    digest = hashlib.sha1(p.read_bytes()).hexdigest()[:12]
    label = "Embedded sample rig (sample_data/rig.json)" if is_sample else f"JSON rig {p.name}"
    kind = "embedded" if is_sample and name == "rig" else "rig-json"
    more = tuple(_image_set(rig_file, Path(d)) for d in more_images)
    if scans and len(scans) != 1 + len(more):
        raise field_error("--scan", f"{len(scans)} scans", f"give one per image set ({1 + len(more)}: --images "
                          "DIR --scan FILE, in the same order)")
    read = [_scan_file(s) for s in scans]
    if read:
        more = tuple(dataclasses.replace(m, lidar=s) for m, s in zip(more, read[1:]))
    extra: dict = {}
    if more:
        label += (f" + {len(more)} more frame{'s' if len(more) > 1 else ''} for the LiDAR witness" if read else
                  f" + {len(more)} more image set{'s' if len(more) > 1 else ''} for the seams")
        extra = {"frames": 1 + len(more), "more": [str(d) for d in more_images]}
    if read:
        label += f" with point cloud{'s' if len(read) > 1 else ''} {', '.join(Path(s).name for s in scans)}"
        extra["scans"] = [str(s) for s in scans]
    key = ":".join([f"rigjson:{p.resolve()}:{folder.resolve()}:{digest}",
                    *(str(Path(d).resolve()) for d in more_images), *(f"scan:{Path(s).resolve()}" for s in scans)])
    return Scene(key=key, label=label, rig=rig_file.rig, more_frames=more, lidar=read[0] if read else None,
                 lidar_key=key if read else "",
                 **loaded_images(first), raw_cameras=tuple(rig_file.raw_cameras), convention=rig_file.convention,
                 ground_truth=embedded.ground_truth(texture) if is_sample else None,
                 image_files={k: v for k, v in rig_file.image_files.items() if v},
                 source={"kind": kind, "path": str(p), "name": name or str(p), **extra}, missing_images=missing,
                 ignore=dict(rig_file.ignore))


def _scan_file(path: str | Path) -> LidarScan:
    """A ``--scan`` point cloud (ego frame); its errors name ``--scan`` and the file."""
    try:
        return read_pointcloud(Path(path))
    except InputError as e:
        raise InputError(f"--scan {str(path)!r}: {e}", "--scan", str(path)) from e


def _image_set(rig_file: RigFile, folder: Path) -> SceneFrame:
    """A further image set of a JSON rig (``--images DIR`` after the first): every camera's
    image (each of the calibrated size, as :func:`load_rig_images` checks for the first).

    Raises:
        InputError: naming ``--images``, the folder and the cameras it lacks (or what
            :func:`load_rig_images` rejects: the camera, its image file and why).
    """
    if not folder.is_dir():
        raise field_error("--images", str(folder), "is not an existing folder")
    located, missing = find_images(rig_file, folder)
    if missing:
        raise field_error("--images", str(folder), f"a further image set must hold every camera's image: {missing}")
    return SceneFrame(f"images {folder}", loaded_images(load_rig_images(located, folder))["images"])




# --------------------------------------------------------------------------------------
# nuScenes
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def dataset(dataroot: str, version: str):
    """The devkit handle of ``dataroot``/``version``, opened once per process (an LRU of 4).

    Raises:
        InputError: as :func:`bevviz.io.nuscenes.open_dataset`.
    """
    return open_dataset(dataroot, version)


def sample_lidar(nusc, token: str, lidar: bool = True, sweeps: int = 1) -> tuple[LidarScan | None, tuple, tuple]:
    """The LiDAR rule, for every caller: a sample's scan and boxes, or why there are none.

    Args:
        nusc: Open devkit handle.
        token: Sample token.
        lidar: Read the scan at all (False: the LiDAR witness is off).
        sweeps: Sweeps to accumulate (1 = the keyframe sweep).

    Returns:
        ``(scan or None, boxes, notes)``: without a LIDAR_TOP sweep, or when the scan cannot
        be read (an :class:`~bevviz.errors.InputError` of the data), the cameras still load
        and a note says why there is no LiDAR.
    """
    if not lidar:
        return None, (), ("LiDAR witness off (settings)",)
    if not has_lidar(nusc, token):
        return None, (), (f"the sample has no {LIDAR_CHANNEL}: seams only",)
    try:
        return load_lidar_from(nusc, token, sweeps), tuple(load_boxes_from(nusc, token)), ()
    except InputError as e:
        return None, (), (f"LiDAR and boxes not loaded: {e}",)


def _miscalibration_note(dataroot: str | Path, scene_name: str) -> tuple[str, ...]:
    """The embedded dataset's record of the camera it stores miscalibrated, as a note (none
    without the record; a note saying so when it cannot be read)."""
    path = Path(dataroot) / "miscalibration.json"
    if not path.exists():
        return ()
    try:
        rec = read_json(path)  # bounded: a dataroot's file is data
    except InputError as exc:  # unreadable, too large, too deep, malformed: said, not fatal
        return (f"{path.name} not read ({exc}): no known miscalibration shown",)
    if not isinstance(rec, dict) or rec.get("scene") != scene_name:
        return ()
    err = rec.get("rotation_error", {})
    return (f"Known miscalibration: {rec.get('camera')} stored with a {err.get('degrees')} deg rotation "
            f"error ({err.get('description', '')}); its images use the true calibration.",)


def _more_frames(nusc, token: str, rig, frames: int, lidar: bool, sweeps: int, asked: bool = True
                 ) -> tuple[tuple[SceneFrame, ...], tuple]:
    """The neighbouring samples of ``token`` as :class:`SceneFrame` objects, and notes on
    what could not be used (a neighbour without a scan, another calibration, too few;
    ``asked``: the user named ``frames``, else it is :data:`DEFAULT_FRAMES`)."""
    if frames <= 1:
        return (), ()
    out, notes = [], []
    tokens = neighbour_samples(nusc, token, frames)
    for tok in tokens:
        meta = sample_meta(nusc, tok)
        label = f"sample {meta['sample_index']} of {meta['scene']}"
        other_rig, images = load_sample_from(nusc, tok)
        if not same_calibration(other_rig, rig):
            notes.append(f"{label} not used: its calibration differs from this sample's")
            continue
        scan, _, why = sample_lidar(nusc, tok, lidar, sweeps)
        if scan is None:
            notes.append(f"{label} not used: {'; '.join(why)}")
            continue
        out.append(SceneFrame(label, freeze(images), scan))
    if len(out) + 1 < frames:
        asked_for = f"--frames {frames}" if asked else f"up to {frames} frames (the default)"
        notes.append(f"{asked_for}: {len(out) + 1} frame(s) of the scene used (the scene has "
                     f"{len(tokens) + 1} within reach)")
    return tuple(out), tuple(notes)


def nuscenes_scene(nusc, dataroot: str | Path, version: str, token: str, *, lidar: bool = True, sweeps: int = 1,
                   name: str | None = None, texture=None, frames: int | None = None) -> Scene:
    """One sample of a nuScenes-format dataset: rig from calibrated_sensor, the camera images,
    and the LiDAR scan and boxes by :func:`sample_lidar`.

    Args:
        nusc: Open devkit handle of ``dataroot``/``version``.
        dataroot: Dataset root.
        version: Table folder.
        token: Sample token.
        lidar: Read the LiDAR scan (see :func:`sample_lidar`).
        sweeps: LiDAR sweeps to accumulate.
        name: What the user called the source (``"nuscenes"`` for an embedded one).
        texture: The embedded sample's texture (:func:`bevviz.session.embedded.sample_texture`)
            if the caller caches it.
        frames: Frames the LiDAR witness adds up: this sample and ``frames - 1`` neighbouring
            samples of its scene (:func:`bevviz.io.nuscenes.neighbour_samples`; at most ``MAX_FRAMES``), each
            with its scan; a note says when fewer could be used. None: :data:`DEFAULT_FRAMES`.

    Raises:
        InputError: naming the sample token, the table or the field that is wrong, or
            ``--frames`` out of range.
    """
    asked = frames is not None
    frames = DEFAULT_FRAMES if frames is None else frames
    if isinstance(frames, bool) or not isinstance(frames, int) or not 1 <= frames <= MAX_FRAMES:
        raise field_error("--frames", frames, f"must be an integer from 1 to MAX_FRAMES = {MAX_FRAMES}")
    meta = sample_meta(nusc, token, "sample")
    rig, images = load_sample_from(nusc, token)
    scan, boxes, lidar_notes = sample_lidar(nusc, token, lidar, sweeps)
    more, frame_notes = (_more_frames(nusc, token, rig, frames, lidar, sweeps, asked) if scan is not None
                         else ((), ()))
    if frames > 1 and scan is None and asked:
        frame_notes = (f"--frames {frames}: one frame used (this sample has no LiDAR scan to add up)",)
    synthetic = embedded.is_embedded(dataroot, "nuscenes")
    real = embedded.is_embedded(dataroot, "real-nuscenes")
    gt = embedded.ground_truth(texture, ego_pose(nusc, token)) if synthetic else None
    where = "embedded sample" if synthetic else "embedded real keyframe" if real else str(dataroot)
    label = f"nuScenes {meta['scene']} sample {meta['sample_index']} ({where})"
    if more:
        label += f" + {len(more)} neighbouring sample{'s' if len(more) > 1 else ''} for the LiDAR witness"
    key = f"nuscenes:{Path(dataroot).resolve()}:{version}:{token}" + (f":frames{len(more) + 1}" if more else "")
    kind = "embedded" if name in embedded.NAMES and (synthetic or real) else "nuscenes"
    return Scene(key=key, label=label, rig=rig, **loaded_images(images), raw_cameras=tuple(rig.to_raw(NUSCENES)),
                 convention=NUSCENES, ground_truth=gt,
                 notes=_miscalibration_note(dataroot, meta["scene"]) + lidar_notes + frame_notes, lidar=scan,
                 boxes=boxes, more_frames=more,
                 lidar_key=key if scan is not None else "", attribution=embedded.attribution(dataroot),
                 source={"kind": kind, "path": str(dataroot), "name": name or str(dataroot), "version": version,
                         **meta, **({"frames": len(more) + 1} if frames > 1 else {})})


# --------------------------------------------------------------------------------------
# Any source by name or path (bevviz check SOURCE)
# --------------------------------------------------------------------------------------


def load_scene(source: str, *, images: str | Path | Sequence[str | Path] | None = None, version: str = "v1.0-mini",
               sample: str | None = None, lidar: bool = True, sweeps: int = 1, frames: int | None = None,
               more: Sequence[str] = (), scans: Sequence[str | Path] = ()) -> Scene:
    """Load what ``bevviz check SOURCE`` names.

    Args:
        source: A JSON rig file, a frame folder, a drive (a folder of frame folders of one rig:
            :func:`drive_scene`), a nuScenes dataroot, or the name of an embedded sample
            (:data:`bevviz.session.embedded.NAMES`); a path that exists is always the
            path, never the sample of the same name.
        images: JSON rig: the images folder (lookup order: module docstring), or several:
            the first is the scene's, each further one another image set of the same rig
            (:func:`rig_json_scene`'s ``more_images``).
        version: nuScenes: the table folder.
        sample: nuScenes: the sample token (default: the first sample of the first scene).
        lidar: nuScenes: read the sample's LIDAR_TOP sweep when it has one.
        sweeps: LiDAR sweeps to accumulate.
        frames: nuScenes: frames (this sample and its neighbours in the scene) whose LiDAR
            evidence the doctor adds up; None: :data:`DEFAULT_FRAMES` (fewer where the scene
            holds fewer). Any other source takes None or 1 (it holds its own frames).
        more: Further frame folders of the same rig when ``source`` is a frame folder
            (:func:`frame_folder_scene`); any other source takes none.
        scans: JSON rig: a point cloud per image set (:func:`rig_json_scene`'s ``scans``);
            any other source takes none (it brings its own).

    Returns:
        The :class:`Scene`.

    Raises:
        InputError: naming ``SOURCE``, ``--images``, ``--scan``, ``--sample``, ``--version``
            or the data's own field and the value.
    """
    name = str(source)
    path = embedded.embedded_path(name) or Path(name)
    sets = [images] if isinstance(images, (str, Path)) else list(images or ())
    images = sets[0] if sets else None
    if more and not is_frame_folder(path):  # the further folders: frame_folder_scene checks them
        raise field_error("SOURCE", name, "is not a frame folder (rig.json, lidar_ego.npy): only several frame "
                          "folders of one rig can be checked together (a nuScenes dataroot: --frames N)")
    if path.is_file():
        if sample is not None:
            raise field_error("--sample", sample, "applies to a nuScenes dataroot only")
        if frames not in (None, 1):
            raise field_error("--frames", frames, "applies to a nuScenes dataroot only (a JSON rig holds one frame)")
        return rig_json_scene(path, images, name, more_images=sets[1:], scans=scans)
    if images is not None:
        raise field_error("--images", str(images), "applies to a JSON rig only")
    if scans:
        raise field_error("--scan", str(scans[0]), "applies to a JSON rig only (a frame folder or a dataset "
                          "brings its own LiDAR)")
    if is_frame_folder(path):
        if sample is not None or frames not in (None, 1):
            raise field_error("--sample" if sample is not None else "--frames", sample or frames,
                              "applies to a nuScenes dataroot only (a frame folder holds one frame: name several frame "
                              "folders of the rig to add them up)")
        return frame_folder_scene(path, name, more)
    if drive_frames(path) and not is_dataroot(path):
        if sample is not None or frames not in (None, 1):
            raise field_error("--sample" if sample is not None else "--frames", sample or frames,
                              "applies to a nuScenes dataroot only (a drive judges all its frame folders)")
        return drive_scene(path, name)
    if is_dataroot(path):
        nusc = dataset(str(path), version)
        if sample is None:
            sample = first_sample(nusc, "SOURCE", name)
        else:
            sample_meta(nusc, sample, "--sample")  # an unknown token is named as the option
        return nuscenes_scene(nusc, path, version, sample, lidar=lidar, sweeps=sweeps, name=name, frames=frames)
    raise field_error("SOURCE", name, "is neither a JSON rig file, a frame folder (rig.json, lidar_ego.npy), a drive "
                      "(a folder of frame folders), a "
                      "nuScenes dataroot (a folder holding <version>/sample.json) nor an embedded sample "
                      f"({', '.join(embedded.NAMES)})")


# --------------------------------------------------------------------------------------
# The fallback without sample_data
# --------------------------------------------------------------------------------------


def synthetic_scene() -> Scene:
    """The nuScenes-like rig with rendered images (used when sample_data is missing).

    Its ground truth is the procedural texture the images were rendered from (the same one
    sample_data/ground_texture.png stores), at the identity ego pose.
    """
    rig = nuscenes_like_rig().resized(SYNTHETIC_SCALE)
    images = render(rig, supersample=1)
    texture, grid = ground_texture()
    w, h = rig[0].size
    return Scene(key="synthetic", label=f"Synthetic nuScenes-like rig ({w} x {h}, rendered: sample_data is missing)",
                 rig=rig, images=freeze(images),
                 ground_truth=GroundTruth(texture, tuple(grid.x_range), tuple(grid.y_range), None),
                 source={"kind": "synthetic", "path": "", "name": "synthetic"})


def dataset_frames(dataroot: str, version: str = "v1.0-mini") -> list[dict[str, np.ndarray]]:
    """The images of every sample of a nuScenes-format dataset (one physical rig): the
    ``frames`` of a :class:`Doctor` whose seams one frame's objects hide.

    Raises:
        InputError: as :func:`bevviz.io.nuscenes.open_dataset`.
    """
    nusc = dataset(str(dataroot), version)
    return [load_sample_from(nusc, s.token)[1] for sc in list_scenes(nusc) for s in list_samples(nusc, sc.token)]
