"""Session state's vocabulary: its keys, the loaded :class:`Scene`, and how caches hash them.

The bottom of ``appkit``: the rig sources (:mod:`appkit.sources`) build scenes, and
:mod:`appkit.session` reads the current scene and grid out of ``st.session_state``. A
failed load (bad upload, wrong dataroot) never replaces what is loaded: the previous scene
and grid stay in ``st.session_state`` and the error is shown next to the control that
caused it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration import GroundTruth
from bevviz.camera import Camera, Rig
from bevviz.io.nuscenes import AnnotationBox
from bevviz.lidar import LidarScan

SCENE = "scene"            # the loaded Scene
SCENE_REQUEST = "scene_request"  # what the sidebar asked for when it was last loaded (or tried)
SCENE_ERROR = "scene_error"      # error message of the last failed load, or None
GRID = "grid"              # the current BEVGrid
GRID_ERROR = "grid_error"


@dataclass(frozen=True, eq=False)
class Scene:
    """A loaded rig source.

    Attributes:
        key: Unique id of what was loaded (source + content), used in cache keys.
        label: Human-readable description for the sidebar and page captions; it holds
            user-provided names (file names, dataroots, scene names), so it is escaped
            (:func:`bevviz.limits.escape_markdown`) wherever markdown shows it.
        rig: The rig.
        images: Camera name -> RGB uint8 image (H, W, 3).
        ground_truth: The true BEV ground texture (:class:`bevviz.calibration.GroundTruth`)
            when known (embedded sample), else None.
        image_files: Camera name -> image file name (for the JSON rig download).
        notes: Extra facts to show (e.g. which camera of a scene is miscalibrated); raw
            text, escaped where shown.
        lidar: The LiDAR scan taken with the images (ego frame at the keyframe time, with the
            motion to each camera's exposure), or None.
        boxes: Annotation boxes in the same frame (:class:`bevviz.io.nuscenes.AnnotationBox`).
        lidar_key: Identity of the images and the scan, for the caches of what only they and
            a camera determine (the LiDAR evidence); it stays when the rig is replaced
            (refined, adopted), unlike ``key``. Empty without a scan.
        attribution: Source and licence line the sidebar shows while the scene is loaded
            (the real nuScenes keyframe), or "".
        warnings: What loading did to the user's images, one line per converted file
            (``"camera CAM_FRONT: CAM_FRONT.png: 16-bit samples cut to 8 bits"``, from
            :attr:`bevviz.io.rig_json.RigImages.warnings`); the sidebar shows each. Raw text:
            escape it (:func:`bevviz.limits.escape_markdown`) before markdown shows it.
    """

    key: str
    label: str
    rig: Rig
    images: Mapping[str, np.ndarray] = field(repr=False)
    ground_truth: GroundTruth | None = field(default=None, repr=False)
    image_files: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    lidar: LidarScan | None = field(default=None, repr=False)
    boxes: tuple[AnnotationBox, ...] = field(default=(), repr=False)
    lidar_key: str = ""
    attribution: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def cache_key(self) -> str:
        """Key for caches: the source and the rig's fingerprint."""
        return f"{self.key}|{self.rig.fingerprint}"


#: hash_funcs for st.cache_data / st.cache_resource: hash bevviz objects by value, cheaply.
HASH_FUNCS = {
    Scene: lambda s: s.cache_key,
    Rig: lambda r: r.fingerprint,
    Camera: lambda c: c.fingerprint,
    BEVGrid: lambda g: repr(sorted(g.to_dict().items())),
}
