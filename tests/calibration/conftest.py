"""Shared fixtures of the calibration tests: the embedded sample's four frames of one rig."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bevviz.calibration import ImagePyramid
from bevviz.camera import NUSCENES_CAMERAS, Rig
from bevviz.io.frame_folder import load_frame_folder
from bevviz.io.nuscenes import list_samples, list_scenes, load_sample_from, open_dataset
from bevviz.rotations import quaternion_to_matrix

AXES = ("roll_deg", "pitch_deg", "yaw_deg")


@pytest.fixture(scope="session")
def truth(rig) -> Rig:
    """The true rig of the embedded sample (the nuScenes-like rig)."""
    return rig


@pytest.fixture(scope="session")
def injected():
    """``injected(camera, axis, salt=0)``: the seeded fault for (camera, axis), magnitude
    uniform in [1, 3] deg, random sign."""

    def injected(camera: str, axis: str, salt: int = 0) -> float:
        seed = 1000 * NUSCENES_CAMERAS.index(camera) + 10 * AXES.index(axis) + salt
        rng = np.random.default_rng(seed)
        return float(rng.uniform(1.0, 3.0) * rng.choice([-1.0, 1.0]))

    return injected


#: The scenes these tests were written for; scene-0003 (the audit's drift scene: four more
#: frames of the same rig) would only make every multi-frame test slower.
FULL_SCENES = ("scene-0001", "scene-0002")


@pytest.fixture(scope="session")
def samples(nuscenes_root):
    """[(scene name, rig as stored, images)] for the four samples of scenes A and B."""
    nusc = open_dataset(nuscenes_root)
    out = []
    for sc in [s for s in list_scenes(nusc) if s.name in FULL_SCENES]:
        for s in list_samples(nusc, sc.token):
            rig, images = load_sample_from(nusc, s.token)
            out.append((sc.name, rig, images))
    return out


@pytest.fixture(scope="session")
def frames(samples):
    """All four frames as image pyramids (shared caches across tests)."""
    return [ImagePyramid(images) for _, _, images in samples]


@pytest.fixture(scope="session")
def scene_b(samples, nuscenes_root):
    """(record, rig as stored in scene B, scene B's frames, true ego_from_cam rotation)."""
    record = json.loads((nuscenes_root / "miscalibration.json").read_text())
    frames_b = [(rig, images) for name, rig, images in samples if name == record["scene"]]
    assert len(frames_b) == 2
    true_R = quaternion_to_matrix(record["true_rotation_wxyz"])  # calibrated_sensor: ego_from_cam
    return record, frames_b[0][0], [ImagePyramid(images) for _, images in frames_b], true_R


@pytest.fixture(scope="session")
def dev_frames(real_sample, sample_data):
    """name -> (rig, images, scan) of every embedded development frame (the real nuScenes
    keyframe and the embedded TRI and KITTI frame folders)."""
    rig, images, scan = real_sample
    out = {"real-nuscenes": (rig, dict(images), scan)}
    for name in ("real_tri", "real_kitti"):
        if not (sample_data / name / "rig.json").is_file():
            pytest.skip(f"sample_data/{name} is missing")
        f = load_frame_folder(sample_data / name)
        out[name] = (f.rig, f.images, f.scan)
    return out
