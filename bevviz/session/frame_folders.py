"""Frame folders and drives as sources: a rig with its images and the LiDAR sweep of one moment
on disk (:mod:`bevviz.io.frame_folder`), several of one rig judged together, and a folder of
them (a drive). Frames whose ``exposure.json`` gives times but no ego motion get it from their
sweeps (:func:`bevviz.calibration.exposure_motions`).

Convention:
    Ego frame x forward, y left, z up, metres. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path

from bevviz.calibration import exposure_motions
from bevviz.camera import calibration_difference
from bevviz.checks import field_error
from bevviz.io.frame_folder import RealFrame, load_frame_folder
from bevviz.io.rig_json import load_rig_file
from bevviz.lidar import LidarScan
from bevviz.session import embedded
from bevviz.session.scene import MAX_FRAMES, Scene, SceneFrame, freeze

__all__ = ["drive_frames", "drive_scene", "frame_folder_scene", "is_frame_folder"]


def is_frame_folder(path: Path) -> bool:
    """Whether ``path`` is a frame folder (``rig.json`` and ``lidar_ego.npy``,
    :mod:`bevviz.io.frame_folder`)."""
    return path.is_dir() and (path / "rig.json").is_file() and (path / "lidar_ego.npy").is_file()


def frame_folder_scene(path: str | Path, name: str | None = None, more: Sequence[str | Path] = (), *,
                       field: str = "SOURCE", more_field: str = "SOURCE") -> Scene:
    """A frame folder: a JSON rig with its images, the LiDAR sweep taken with them (any
    point order, intensity in any scale or none), the ego motion to each camera's exposure
    and the cameras' ignore polygons (:func:`bevviz.calibration.load_frame_folder`).

    Args:
        path: The folder.
        name: What the user called it.
        more: Further frame folders of the same rig (``bevviz check DIR DIR ...``: consecutive
            frames of one drive): the LiDAR witness adds their evidence up. Each must hold
            the same cameras with the same calibration and ignore polygons; at most
            ``MAX_FRAMES`` frames in all.
        field: What the caller calls ``path`` in its errors (``bevviz check``: its SOURCE;
            the app: its "Frame folder" box).
        more_field: What it calls the further folders.

    Raises:
        InputError: naming the file and what is wrong with it, or the folder (``field`` /
            ``more_field``) that is none, or whose rig differs and how.
    """
    folder = Path(path).expanduser()  # the app's boxes get what a user pastes: "~/drive/t0"
    more = [Path(m).expanduser() for m in more]
    for f, p in [(field, folder), *((more_field, m) for m in more)]:
        if not is_frame_folder(p):
            raise field_error(f, str(p), "is not a frame folder (a folder holding rig.json and lidar_ego.npy)")
    frame = load_frame_folder(folder)
    rig_file = load_rig_file(folder / "rig.json")
    if 1 + len(more) > MAX_FRAMES:
        raise field_error(more_field, f"{1 + len(more)} frame folders", f"at most MAX_FRAMES = {MAX_FRAMES}")
    others = []
    seen = {folder.resolve()}
    for extra in more:
        if extra.resolve() in seen:  # the same frame twice would count its evidence twice
            raise field_error(more_field, str(extra), "is named twice: each frame folder counts once")
        seen.add(extra.resolve())
        other = load_frame_folder(extra)
        if other.rig.names != frame.rig.names:
            raise field_error(more_field, str(extra), f"holds cameras {list(other.rig.names)}, not those of {folder} "
                              f"({list(frame.rig.names)}): several frame folders must be one rig")
        changed = [n for n in frame.rig.names if calibration_difference(frame.rig[n], other.rig[n])]
        if changed:
            cam = changed[0]
            raise field_error(more_field, str(extra), f"calibrates {', '.join(changed)} differently from {folder} "
                              f"({cam}: {calibration_difference(frame.rig[cam], other.rig[cam])}): several frame "
                              "folders must be one rig with one calibration", camera=cam)
        if dict(other.ignore) != dict(frame.ignore):
            raise field_error(more_field, str(extra), f"has other ignore polygons than {folder}: several frame folders "
                              "must be one rig, its body in the same place")
        others.append(other)
    scans, motion_notes = _exposure_motions([frame, *others])
    others = [SceneFrame(f"frame folder {o.name}", freeze(o.images), s) for o, s in zip(others, scans[1:])]
    digest = hashlib.sha1((folder / "rig.json").read_bytes()).hexdigest()[:12]
    key = ":".join([f"frames:{folder.resolve()}:{digest}", *(str(m.resolve()) for m in more)])
    label = f"Frame folder {folder.name}"
    if others:
        label += f" + {len(others)} more frame folder{'s' if len(others) > 1 else ''} for the LiDAR witness"
    return Scene(key=key, label=label, rig=frame.rig, images=freeze(frame.images),
                 raw_cameras=tuple(rig_file.raw_cameras), convention=rig_file.convention,
                 image_files={k: v for k, v in rig_file.image_files.items() if v}, lidar=scans[0], lidar_key=key,
                 notes=motion_notes,
                 source={"kind": "frame-folder", "path": str(folder), "name": name or str(folder),
                         **({"frames": 1 + len(others), "more": [str(m) for m in more]} if others else {})},
                 ignore=dict(frame.ignore), more_frames=tuple(others), attribution=embedded.attribution(folder))


def _exposure_motions(frames: Sequence[RealFrame]) -> tuple[list[LidarScan], tuple[str, ...]]:
    """The frames' scans, those without the ego motion to their cameras' exposures given it
    from the sweeps themselves (:func:`bevviz.calibration.exposure_motions`) where every
    frame carries its sweep's and its cameras' times; and a note of what was done.

    A frame folder without ``exposure_from_keyframe`` leaves the LiDAR witness
    "inconclusive" on a rig of several cameras (Doubt.SCAN_WITHOUT_MOTION): on the TRI drive
    with its motion taken out no 1.5 deg fault of 18 was named, with the motion estimated
    here 8 (with the dataset's own 10; docs/calibration.md, "Ego motion from the sweeps").
    """
    scans = [f.scan for f in frames]
    lacking = [k for k, f in enumerate(frames) if set(f.rig.names) - set(f.scan.exposure_from_keyframe)]
    if len(frames) < 2 or not lacking:
        return scans, ()
    if any(f.lidar_time_s is None or set(f.rig.names) - set(f.camera_times_s) for f in frames):
        return scans, ()
    est = exposure_motions(scans, [f.lidar_time_s for f in frames], [f.camera_times_s for f in frames])
    which = ", ".join(frames[k].name for k in lacking)
    if est.reason:
        return scans, (f"no ego motion to the cameras' exposures for {which}, and none could be estimated from "
                       f"the sweeps: {est.reason}",)
    for k in lacking:
        scans[k] = dataclasses.replace(scans[k], exposure_from_keyframe={**est.motions[k],
                                                                         **scans[k].exposure_from_keyframe})
    moved = ", ".join(f"{e.translation_m:.2f} m" for e in est.estimates)
    return scans, (f"ego motion to the cameras' exposures estimated from the sweeps for {which} (consecutive sweeps "
                   f"registered: {moved}; the exposures placed by the frames' time stamps)",)


def drive_frames(path: Path) -> list[Path]:
    """The frame folders of a drive folder, in name order (its subfolders; hidden ones skipped),
    or [] when ``path`` is no drive (a frame folder itself, or no subfolder is a frame folder)."""
    if not path.is_dir() or is_frame_folder(path):
        return []
    subs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return subs if any(is_frame_folder(p) for p in subs) else []


def drive_scene(path: str | Path, name: str | None = None, *, field: str = "SOURCE") -> Scene:
    """A drive: a folder whose subfolders are frame folders of one rig (consecutive frames),
    judged together as :func:`frame_folder_scene` judges several folders, in name order.

    Args:
        path: The drive folder (e.g. ``sample_data/real_tri_drive`` with ``t0/``, ``t1/``, ``t2/``).
        name: What the user called it.
        field: What the caller calls ``path`` in its errors.

    Returns:
        The scene of its first frame, the others as :attr:`Scene.more_frames`; with more than
        ``MAX_FRAMES`` frames the first ``MAX_FRAMES`` and a note that says so.

    Raises:
        InputError: naming ``field`` and the subfolder that is no frame folder, or whose
            cameras, calibration (the camera and the calibration field) or ignore polygons
            differ from the first frame's.
    """
    folder = Path(path).expanduser()
    subs = drive_frames(folder)
    if not subs:
        raise field_error(field, str(folder), "is not a drive (a folder whose subfolders are frame folders)")
    for sub in subs:
        if not is_frame_folder(sub):
            raise field_error(field, str(sub), "is a subfolder of a drive but not a frame folder (rig.json, "
                              "lidar_ego.npy): every subfolder of a drive must be a frame of its rig")
    used = subs[:MAX_FRAMES]
    scene = frame_folder_scene(used[0], name, used[1:], field=field, more_field=field)
    notes = () if len(used) == len(subs) else (
        f"the drive {folder.name} holds {len(subs)} frames: the first MAX_FRAMES = {MAX_FRAMES} are judged together",)
    label = (f"Drive {folder.name}: {len(used)} frame{'s' if len(used) > 1 else ''} "
             f"({', '.join(p.name for p in used)}) judged together")
    source = {**scene.source, "kind": "drive", "path": str(folder), "name": name or str(folder),
              "frames": len(used), "frame_folders": [p.name for p in used]}
    source.pop("more", None)
    return dataclasses.replace(scene, label=label, notes=scene.notes + notes, source=source,
                               key=f"drive:{folder.resolve()}:{scene.key}")
