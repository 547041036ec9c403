"""The use cases: one road from a rig source to a verdict, shared by the app, ``bevviz check`` and the audit.

:mod:`~bevviz.session.embedded` says where the embedded samples are (package data, found
with importlib.resources); :mod:`~bevviz.session.scene` is the one :class:`Scene` every
source becomes; :mod:`~bevviz.session.loaders` loads any source (an embedded sample by
name, a nuScenes dataroot, a JSON rig with an images folder) and
:mod:`~bevviz.session.uploads` one given as bytes (the app's upload);
:mod:`~bevviz.session.report` holds what a check says and :mod:`~bevviz.session.doctor`
the :class:`Doctor` that says it, each piece of evidence computed once;
:mod:`~bevviz.session.ground` says where the ground is (a rig in a sensor's frame, a LiDAR
whose height is off);
:mod:`~bevviz.session.fixes` makes and writes the corrected rig a check offers.

Streamlit-free; above the analysis (calibration, conventions), below the audit, the command
line and the app, which all call it, so one frame gives the same numbers everywhere.
Every public name is re-exported here.
"""

from bevviz.io.nuscenes import neighbour_samples  # kept here for callers of bevviz.session.neighbour_samples
from bevviz.session.doctor import Doctor, check_rig
from bevviz.session.embedded import EMBEDDED, NAMES, embedded_path, sample_data_dir, sample_path
from bevviz.session.fixes import corrected_rig, corrections, fixed_rig_json, to_correct, write_fixed_rig
from bevviz.session.ground import ground_shift
from bevviz.session.loaders import (
    DEFAULT_FRAMES,
    MAX_FRAMES,
    dataset,
    drive_scene,
    find_images,
    frame_folder_scene,
    load_scene,
    nuscenes_scene,
    rig_json_scene,
    synthetic_scene,
)
from bevviz.session.report import (
    CameraCheck,
    CameraSanity,
    CheckReport,
    CheckSettings,
    ConventionCheck,
    SensorFault,
    projection_sanity,
)
from bevviz.session.scene import Scene, SceneFrame
from bevviz.session.uploads import uploaded_scene

__all__ = [
    "DEFAULT_FRAMES", "EMBEDDED", "MAX_FRAMES", "NAMES", "CameraCheck", "CameraSanity", "CheckReport", "CheckSettings",
    "ConventionCheck", "Doctor", "SensorFault", "corrected_rig", "corrections", "fixed_rig_json", "to_correct",
    "write_fixed_rig",
    "Scene", "SceneFrame", "check_rig", "dataset", "drive_scene", "embedded_path", "find_images", "frame_folder_scene",
    "ground_shift",
    "load_scene",
    "neighbour_samples", "nuscenes_scene",
    "projection_sanity", "rig_json_scene", "sample_data_dir", "sample_path", "synthetic_scene", "uploaded_scene",
]
