"""The same points in any form give no conviction on a clean rig: the loader's LidarScan and
plain arrays (N, 3) and (N, 4) with intensity 0..1 or 0..255, float32 or float64, shuffled, on
every embedded development frame (nuScenes keyframe, TRI, KITTI). An array carries no ego
motion, so it convicts no camera (diagnose's NO_MOTION_NOTE); the intensity's unit reads alike."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration import MISCALIBRATED, DiagnoseSettings, diagnose
from bevviz.calibration.lidar.edges import _log_intensity

pytestmark = pytest.mark.slow


def _forms(scan) -> dict[str, object]:
    p = np.asarray(scan.points)
    i = p[:, 3].astype(np.float64)
    other = i / 255.0 if i.max() > 1.5 else i * 255.0  # the other unit of the same intensities
    shuffled = p[np.random.default_rng(0).permutation(len(p))]
    return {"scan": scan, "N4 float32": p.copy(), "N4 float64": p.astype(np.float64),
            "N4 other unit": np.c_[p[:, :3], other].astype(np.float32), "N3": p[:, :3].copy(),
            "N4 shuffled": shuffled}


def test_the_intensitys_unit_reads_alike(real_sample):
    i = real_sample[2].points[:, 3]  # 0..255, integer-valued
    ref = _log_intensity(i)
    for other in (i / np.float32(255.0), i.astype(np.float64) / 255.0, i.astype(np.float64)):
        assert np.array_equal(_log_intensity(other), ref)


@pytest.mark.parametrize("frame", ["real-nuscenes", "real_tri", "real_kitti"])
def test_no_form_of_the_scan_convicts_a_camera_of_a_clean_rig(dev_frames, frame):
    rig, images, scan = dev_frames[frame]
    for form, lidar in _forms(scan).items():
        found = diagnose(rig, images, lidar=lidar, settings=DiagnoseSettings(replicates=8))
        assert [f.camera for f in found if f.verdict == MISCALIBRATED] == [], (form, [f.reason for f in found])
