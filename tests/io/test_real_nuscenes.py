"""The embedded real nuScenes keyframe (sample_data/real_nuscenes) through nuscenes-devkit and bevviz.io.nuscenes.

Only the committed dataset is read. The devkit is the reference: its tables, its transforms
(``transform_matrix``, ``Box``, ``view_points``) and its point clouds (``LidarPointCloud``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from nuscenes.nuscenes import NuScenes
from nuscenes.utils.data_classes import LidarPointCloud
from nuscenes.utils.geometry_utils import BoxVisibility, transform_matrix, view_points
from pyquaternion import Quaternion

from bevviz.camera import NUSCENES_CAMERAS
from bevviz.io import nuscenes as nu
from bevviz.lidar import LidarScan
from bevviz.projection import project_points

REPO = Path(__file__).resolve().parents[2]
DATAROOT = REPO / "sample_data" / "real_nuscenes"
SYNTHETIC = REPO / "sample_data" / "nuscenes"
SAMPLE = "ca9a282c9e77460f8360f564131a8af5"
LIDAR_TS = 1532402927647951


@pytest.fixture(scope="module")
def nusc():
    return nu.open_dataset(DATAROOT, "v1.0-mini")


@pytest.fixture(scope="module")
def scan(nusc) -> LidarScan:
    return nu.load_lidar_from(nusc, SAMPLE)


def _pose(record: dict) -> np.ndarray:
    return transform_matrix(record["translation"], Quaternion(record["rotation"]))


# --- the dataset ----------------------------------------------------------------------------

def test_devkit_opens_the_real_keyframe():
    ds = NuScenes(version="v1.0-mini", dataroot=str(DATAROOT), verbose=False)
    assert len(ds.scene) == 1 and len(ds.sample) == 1 and ds.sample[0]["token"] == SAMPLE
    sample = ds.sample[0]
    assert set(sample["data"]) == set(NUSCENES_CAMERAS) | {"LIDAR_TOP"}
    assert sample["timestamp"] == LIDAR_TS and len(sample["anns"]) == 69 == len(ds.sample_annotation)
    assert ds.get("sample_data", sample["data"]["CAM_FRONT"])["token"] == "e3d495d4ac534d54b321f50006683844"
    path, boxes, K = ds.get_sample_data(sample["data"]["CAM_FRONT"])
    assert Path(path).is_file() and K.shape == (3, 3) and len(boxes) > 10
    for sd in ds.sample_data:  # integer microseconds, also in the file name
        assert isinstance(sd["timestamp"], int) and f"__{sd['timestamp']}." in sd["filename"]
        assert sd["ego_pose_token"] == sd["token"]
    cats = {ds.get("instance", a["instance_token"])["category_token"] for a in ds.sample_annotation}
    assert {c["name"] for c in ds.category if c["token"] in cats} >= {"vehicle.car", "human.pedestrian.adult"}
    assert all(c["name"] in ds.colormap for c in ds.category)  # the devkit can render every box


def test_readme_carries_the_attribution_and_licence():
    text = (DATAROOT / "README.md").read_text()
    for needle in ("nuScenes", "Motional", "CC BY-NC-SA 4.0", "https://creativecommons.org/licenses/by-nc-sa/4.0/",
                   "Non-commercial", "open-mmlab/mmdetection3d", "fe25f7a51d36e3702f961e198894580d83c4387b",
                   "n015-2018-07-24-11-22-45+0800", "scripts/build_real_nuscenes.py"):
        assert needle in text, needle


def test_load_sample_gives_six_cameras_equal_to_the_tables(nusc):
    rig, images = nu.load_sample(DATAROOT)
    assert rig.names == list(NUSCENES_CAMERAS) and list(images) == list(NUSCENES_CAMERAS)
    s = nusc.get("sample", SAMPLE)
    for cam in rig:
        assert images[cam.name].shape == (900, 1600, 3) and images[cam.name].dtype == np.uint8
        assert (cam.width, cam.height) == (1600, 900)
        cs = nusc.get("calibrated_sensor", nusc.get("sample_data", s["data"][cam.name])["calibrated_sensor_token"])
        np.testing.assert_allclose(cam.K, cs["camera_intrinsic"], atol=1e-12)
        np.testing.assert_allclose(cam.ego_from_cam, _pose(cs), atol=1e-12)


# --- boxes: bevviz rig + ego motion == the devkit's chain ------------------------------------

def test_box_centres_project_like_the_devkit(nusc, scan):
    """Annotation centres (global) -> ego(t_keyframe) -> exposure_from_keyframe -> bevviz rig
    equal the devkit's Box -> ego(t_cam) -> camera -> view_points, to 1e-6 px."""
    rig, _ = nu.load_sample_from(nusc, SAMPLE, with_images=False)
    s = nusc.get("sample", SAMPLE)
    lidar_sd = nusc.get("sample_data", s["data"]["LIDAR_TOP"])
    ego_kf_from_global = np.linalg.inv(_pose(nusc.get("ego_pose", lidar_sd["ego_pose_token"])))
    tokens = s["anns"]
    centers_g = np.array([nusc.get("sample_annotation", t)["translation"] for t in tokens])
    centers_kf = centers_g @ ego_kf_from_global[:3, :3].T + ego_kf_from_global[:3, 3]
    moved = {}
    checked = 0
    for ch in rig.names:
        _, boxes, K = nusc.get_sample_data(s["data"][ch], box_vis_level=BoxVisibility.NONE)
        exposure = scan.exposure_from_keyframe[ch]
        pts = centers_kf @ exposure[:3, :3].T + exposure[:3, 3]
        uv = project_points(pts, rig.subset([ch])).uv[0].numpy()
        ours = dict(zip(tokens, uv))
        for box in boxes:
            if box.center[2] < 0.5:
                continue
            ref = view_points(box.center[:, None], K, normalize=True)[:2, 0]
            np.testing.assert_allclose(ours[box.token], ref, atol=1e-6, rtol=0)
            checked += 1
        # Without the motion, the same centres miss by up to several pixels on the front cameras.
        still = project_points(centers_kf, rig.subset([ch])).uv[0].numpy()
        front = np.array([b.center[2] > 0.5 for b in sorted(boxes, key=lambda b: tokens.index(b.token))])
        moved[ch] = float(np.abs(still - uv)[front].max()) if front.any() else 0.0
    assert checked >= 69
    assert moved["CAM_FRONT"] > 1.0 and moved["CAM_BACK_LEFT"] < moved["CAM_FRONT"]


def test_exposure_motion_matches_the_timestamps(nusc, scan):
    s = nusc.get("sample", SAMPLE)
    assert set(scan.exposure_from_keyframe) == set(NUSCENES_CAMERAS)
    for ch in NUSCENES_CAMERAS:
        dt = (nusc.get("sample_data", s["data"][ch])["timestamp"] - LIDAR_TS) * 1e-6
        shift = scan.exposure_from_keyframe[ch][:3, 3]
        # ego(t_cam) from ego(t_lidar): the car drives forward ~9.2 m/s, cameras fire earlier,
        # so a point sits further ahead (x larger) in the earlier ego frame.
        assert -43.2e-3 < dt < 0
        assert shift[0] == pytest.approx(-9.24 * dt, rel=0.03)
    assert np.linalg.norm(scan.exposure_from_keyframe["CAM_FRONT"][:3, 3]) == pytest.approx(0.328, abs=1e-3)


# --- lidar ----------------------------------------------------------------------------------

def test_load_lidar_equals_the_devkit_cloud_moved_to_ego(nusc, scan):
    s = nusc.get("sample", SAMPLE)
    sd = nusc.get("sample_data", s["data"]["LIDAR_TOP"])
    cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
    path = DATAROOT / sd["filename"]
    pc = LidarPointCloud.from_file(str(path))
    pc.transform(_pose(cs))
    assert len(scan) == 34688 == pc.nbr_points()
    np.testing.assert_array_equal(scan.points, pc.points.T)
    np.testing.assert_array_equal(scan.ring, np.fromfile(path, np.float32).reshape(-1, 5)[:, 4].astype(np.int16))
    assert scan.sweep.tolist() == [0] * len(scan)
    np.testing.assert_allclose(scan.origin, cs["translation"], atol=1e-12)
    assert scan.timestamp_us == LIDAR_TS
    # load_lidar (the one-call form) reads the same.
    np.testing.assert_array_equal(nu.load_lidar(DATAROOT).points, scan.points)


def test_min_distance_matches_from_file_multisweep(nusc):
    s = nusc.get("sample", SAMPLE)
    sd = nusc.get("sample_data", s["data"]["LIDAR_TOP"])
    ego_from_lidar = _pose(nusc.get("calibrated_sensor", sd["calibrated_sensor_token"]))
    ref, _ = LidarPointCloud.from_file_multisweep(nusc, s, "LIDAR_TOP", "LIDAR_TOP", nsweeps=1, min_distance=1.0)
    ref_ego = ref.points[:3].T.astype(np.float64) @ ego_from_lidar[:3, :3].T + ego_from_lidar[:3, 3]
    ours = nu.load_lidar_from(nusc, SAMPLE, sweeps=1, min_distance=1.0)
    assert len(ours) == ref.nbr_points() == 34688 - 8274  # the car's own returns go
    np.testing.assert_allclose(ours.xyz, ref_ego, atol=1e-4)
    # There are no earlier sweeps in this dataset: sweeps=3 is the keyframe sweep alone.
    assert len(nu.load_lidar_from(nusc, SAMPLE, sweeps=3)) == 34688


def _ground_tilt_deg(points: np.ndarray) -> tuple[float, float]:
    """RANSAC plane (5 cm inliers) refined by PCA on its inliers: (tilt from z = 0 in deg, offset in m)."""
    rng = np.random.default_rng(0)
    best, best_count = None, -1
    for _ in range(500):
        p0, p1, p2 = points[rng.choice(len(points), 3, replace=False)]
        n = np.cross(p1 - p0, p2 - p0)
        if np.linalg.norm(n) < 1e-9:
            continue
        n /= np.linalg.norm(n)
        count = int((np.abs((points - p0) @ n) < 0.05).sum())
        if count > best_count:
            best, best_count = (n, p0), count
    n, p0 = best
    for _ in range(5):
        inliers = points[np.abs((points - p0) @ n) < 0.05]
        p0 = inliers.mean(0)
        n = np.linalg.svd(inliers - p0)[2][2]
        n = n * np.sign(n[2])
    return float(np.degrees(np.arccos(n[2]))), float(n @ p0)


def test_ground_points_fit_z_zero(scan):
    p = scan.xyz
    r = np.hypot(p[:, 0], p[:, 1])
    tilt, offset = _ground_tilt_deg(p[(r > 4) & (r < 20) & (np.abs(p[:, 2]) < 0.5)])
    # Measured: 0.217 deg, offset -0.6 mm (0.216-0.230 deg over fit thresholds and range
    # definitions). The 0.2 deg quoted with the source data is not reproduced; the ego
    # frame's z = 0 is the ground to a few millimetres.
    assert tilt < 0.25 and abs(offset) < 0.01


def test_missing_lidar_and_bad_arguments_are_named_errors(tmp_path, nusc):
    root = tmp_path / "real"
    shutil.copytree(DATAROOT / "v1.0-mini", root / "v1.0-mini")
    shutil.copytree(DATAROOT / "maps", root / "maps")
    sd = json.loads((root / "v1.0-mini" / "sample_data.json").read_text())
    kept = [r for r in sd if "LIDAR_TOP" not in r["filename"]]
    (root / "v1.0-mini" / "sample_data.json").write_text(json.dumps(kept))
    with pytest.raises(ValueError, match=rf"field 'sample_token': sample has no LIDAR_TOP sample_data.*{SAMPLE}"):
        nu.load_lidar(root)
    with pytest.raises(ValueError, match=r"field 'sample_token': no such sample.*deadbeef"):
        nu.load_lidar(DATAROOT, sample_token="deadbeef")
    with pytest.raises(ValueError, match=r"field 'sweeps': must be a positive integer \(got 0\)"):
        nu.load_lidar_from(nusc, SAMPLE, sweeps=0)
    with pytest.raises(ValueError, match=r"field 'min_distance': must be a finite number >= 0.*-1\.0"):
        nu.load_lidar_from(nusc, SAMPLE, min_distance=-1.0)
    with pytest.raises(ValueError, match=r"field 'dataroot'.*no_such_folder"):
        nu.load_lidar(tmp_path / "no_such_folder")
    # Tables without the sensor file: the lidar file is named.
    shutil.copy(DATAROOT / "v1.0-mini" / "sample_data.json", root / "v1.0-mini" / "sample_data.json")
    with pytest.raises(ValueError, match=r"field 'lidar': file listed in sample_data .* does not exist.*LIDAR_TOP"):
        nu.load_lidar(root)


# --- earlier sweeps (the synthetic dataset links its keyframe sweeps) ------------------------

def test_sweeps_are_motion_compensated_like_the_devkit():
    ds = nu.open_dataset(SYNTHETIC)
    sample = ds.get("sample", ds.scene[0]["first_sample_token"])
    sample = ds.get("sample", sample["next"])  # ego at x = 5 m; its previous sweep at x = 0
    sd = ds.get("sample_data", sample["data"]["LIDAR_TOP"])
    ego_from_lidar = _pose(ds.get("calibrated_sensor", sd["calibrated_sensor_token"]))
    ref, times = LidarPointCloud.from_file_multisweep(ds, sample, "LIDAR_TOP", "LIDAR_TOP", nsweeps=2,
                                                      min_distance=1.0)
    ref_ego = ref.points[:3].T.astype(np.float64) @ ego_from_lidar[:3, :3].T + ego_from_lidar[:3, 3]
    ours = nu.load_lidar_from(ds, sample["token"], sweeps=2, min_distance=1.0)
    np.testing.assert_allclose(ours.xyz, ref_ego, atol=1e-4)
    np.testing.assert_array_equal(ours.sweep, (times[0] > 0).astype(np.int16))
    assert set(ours.sweep.tolist()) == {0, 1}
    # The world does not move: the earlier sweep's ground points sit 5 m further back.
    first = nu.load_lidar_from(ds, sample["prev"], sweeps=1, min_distance=1.0)
    np.testing.assert_allclose(ours.xyz[ours.sweep == 1], first.xyz - [5.0, 0.0, 0.0], atol=1e-4)
