"""The loaded rig source: one :class:`Scene` for the app, ``bevviz check`` and the audit.

A scene is what every use case starts from: the rig, the images, the calibration as it
was stored (for the convention ranking), the LiDAR scan and boxes when the source has
them, and where it came from. :mod:`bevviz.session.loaders` builds it from any source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration import GroundTruth
from bevviz.camera import Rig
from bevviz.conventions import NUSCENES, Convention, RawCamera
from bevviz.errors import InputError
from bevviz.io.nuscenes_boxes import AnnotationBox
from bevviz.lidar import LidarScan

__all__ = ["DEFAULT_FRAMES", "MAX_FRAMES", "Scene", "SceneFrame", "freeze"]

#: Most frames the doctor adds up (``bevviz check --frames N``, or several frame folders),
#: each a sample's images and scan.
MAX_FRAMES = 10
#: Frames a nuScenes sample is judged with when nobody says how many: the sample and up to
#: four neighbours of its scene (fewer where the scene holds fewer). One frame is often
#: "inconclusive" where several decide (docs/calibration.md, "Fault bands and frame counts").
DEFAULT_FRAMES = 5


def freeze(images: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The images as a plain dict of read-only arrays (a scene is shared, never changed)."""
    out = {}
    for name, img in images.items():
        a = np.asarray(img)
        a.setflags(write=False)
        out[name] = a
    return out


@dataclass(frozen=True, eq=False)
class SceneFrame:
    """Another frame of the scene's rig (a neighbouring sample): its images and its scan.

    Attributes:
        label: Which frame (``"sample 3 of scene-0061"``), for reports.
        images: Camera name -> RGB uint8 image (H, W, 3), read-only.
        lidar: The scan taken with them (ego frame at its keyframe time), or None.
    """

    label: str
    images: Mapping[str, np.ndarray] = field(repr=False)
    lidar: LidarScan | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class Scene:
    """A loaded rig source.

    Attributes:
        key: Unique id of what was loaded (source + content), used in cache keys.
        label: Human-readable description for captions; it holds user-provided names (file
            names, dataroots, scene names), so it is escaped
            (:func:`bevviz.checks.escape_markdown`) wherever markdown shows it.
        rig: The rig (N_cam cameras).
        images: Camera name -> RGB uint8 image (H, W, 3), read-only; a camera may lack one.
        raw_cameras: The calibration as the source stored it (for the convention ranking);
            empty: ``rig.to_raw(convention)`` (see :meth:`stored`).
        convention: The convention the source declares it stores.
        ground_truth: The true BEV ground texture (:class:`bevviz.calibration.GroundTruth`)
            when known (the embedded synthetic sample), else None.
        image_files: Camera name -> image file name (for the JSON rig download).
        notes: Facts to show (which camera of a scene is miscalibrated, why there is no
            LiDAR); raw text, escaped where shown.
        lidar: The LiDAR scan taken with the images (ego frame at the keyframe time, with the
            motion to each camera's exposure), or None.
        boxes: Annotation boxes in the same frame (:class:`bevviz.io.nuscenes_boxes.AnnotationBox`).
        lidar_key: Identity of the images and the scan, for caches of what only they and a
            camera determine (the LiDAR evidence); it stays when the rig is replaced (refined,
            adopted), unlike ``key``. Empty without a scan.
        attribution: Source and licence line to show while the scene is loaded (the real
            nuScenes keyframe), or "".
        warnings: What loading did to the user's images, one line per converted file
            (``"camera CAM_FRONT: CAM_FRONT.png: 16-bit samples cut to 8 bits"``). Raw text.
        source: Where it came from, for reports: ``kind`` (``embedded``, ``rig-json``,
            ``nuscenes``, ``upload``, ``synthetic``), ``path``, ``name`` and, for a dataset,
            ``version``, ``scene``, ``scene_token``, ``sample``, ``sample_index``, ``timestamp``.
        missing_images: Why cameras have no image (one line naming the cameras and what was
            looked for), or "" when every camera has one or none was asked for.
        ignore: Camera name -> polygons of (u, v) pixels of the calibrated image that do not
            show the world (the car's own body; a JSON rig's ``ignore`` fields): the doctor
            uses no LiDAR point there.
        more_frames: Other frames of the same rig and calibration (neighbouring samples of
            a scene, ``bevviz check --frames N``): the LiDAR witness adds their evidence up.
    """

    key: str
    label: str
    rig: Rig
    images: Mapping[str, np.ndarray] = field(repr=False)
    raw_cameras: Sequence[RawCamera] = field(default=(), repr=False)
    convention: Convention = NUSCENES
    ground_truth: GroundTruth | None = field(default=None, repr=False)
    image_files: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    lidar: LidarScan | None = field(default=None, repr=False)
    boxes: tuple[AnnotationBox, ...] = field(default=(), repr=False)
    lidar_key: str = ""
    attribution: str = ""
    warnings: tuple[str, ...] = ()
    source: Mapping = field(default_factory=dict)
    missing_images: str = ""
    ignore: Mapping[str, Sequence] = field(default_factory=dict)
    more_frames: tuple[SceneFrame, ...] = ()

    @property
    def cache_key(self) -> str:
        """Key for caches: the source and the rig's fingerprint."""
        return f"{self.key}|{self.rig.fingerprint}"

    @property
    def stored(self) -> list[RawCamera]:
        """The calibration as stored: ``raw_cameras``, or the rig written in ``convention``."""
        return list(self.raw_cameras) if self.raw_cameras else self.rig.to_raw(self.convention)

    @property
    def complete_frames(self) -> tuple[SceneFrame, ...]:
        """The :attr:`more_frames` that hold every camera's image (the others cannot be judged)."""
        return tuple(f for f in self.more_frames if all(n in f.images for n in self.rig.names))

    @property
    def has_all_images(self) -> bool:
        """Whether every camera has its image (the doctor and the seams need them all)."""
        return all(n in self.images for n in self.rig.names)

    def require_images(self, field_name: str = "images") -> None:
        """Raise unless every camera has its image.

        Args:
            field_name: The input that should have provided them (``"--images"``).

        Raises:
            InputError: naming ``field_name``, the cameras without an image and what was
                looked for.
        """
        missing = [n for n in self.rig.names if n not in self.images]
        if missing:
            why = self.missing_images or f"no image for {', '.join(missing)}"
            raise InputError(f"field '{field_name}': the doctor needs every camera's image; {why}",
                             field_name, missing)
