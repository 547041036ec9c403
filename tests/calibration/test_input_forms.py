"""The same points in any form give the same verdicts, on every embedded development frame
(nuScenes keyframe, TRI, KITTI): the loader's LidarScan, that scan without its ego motion, and
plain arrays (N, 3) and (N, 4) with intensity 0..1 or 0..255, float32 or float64, shuffled.

The verdict rests on what the scan carries, not on its container: a form that carries what the
LidarScan carries gets its very verdicts; a form lacking its stated ego motion (on a rig of
several cameras) or its intensity may only be "inconclusive" where the scan is sure, and says
which of the two it lacks (Doubt.SCAN_WITHOUT_MOTION, SCAN_WITHOUT_INTENSITY_OR_MOTION)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration import INCONCLUSIVE, MISCALIBRATED, DiagnoseSettings, Doubt, diagnose
from bevviz.calibration.lidar.edges import _log_intensity

pytestmark = pytest.mark.slow

#: The doubts that name what a poorer form of the scan lacks.
LACKS = (Doubt.SCAN_WITHOUT_MOTION, Doubt.SCAN_WITHOUT_INTENSITY_OR_MOTION)


def _forms(scan) -> dict[str, tuple[object, bool]]:
    """Form -> (the scan in that form, whether it carries all the LidarScan carries)."""
    p = np.asarray(scan.points)
    i = p[:, 3].astype(np.float64)
    other = i / 255.0 if i.max() > 1.5 else i * 255.0  # the other unit of the same intensities
    shuffled = p[np.random.default_rng(0).permutation(len(p))]
    full = not scan.exposure_from_keyframe and scan.ring is None and not np.any(scan.origin)  # all an array holds
    return {"no motion": (dataclasses.replace(scan, exposure_from_keyframe={}), not scan.exposure_from_keyframe),
            "N4 float32": (p.copy(), full), "N4 float64": (p.astype(np.float64), full),
            "N4 other unit": (np.c_[p[:, :3], other].astype(np.float32), full), "N3": (p[:, :3].copy(), False),
            "N4 shuffled": (shuffled, full)}


def test_the_intensitys_unit_reads_alike(real_sample):
    i = real_sample[2].points[:, 3]  # 0..255, integer-valued
    ref = _log_intensity(i)
    for other in (i / np.float32(255.0), i.astype(np.float64) / 255.0, i.astype(np.float64)):
        assert np.array_equal(_log_intensity(other), ref)


@pytest.mark.parametrize("frame", ["real-nuscenes", "real_tri", "real_kitti"])
def test_every_form_of_the_scan_gives_the_scans_verdicts(dev_frames, frame):
    rig, images, scan = dev_frames[frame]
    settings = DiagnoseSettings(replicates=8)
    ref = {f.camera: f.verdict for f in diagnose(rig, images, lidar=scan, settings=settings)}
    assert MISCALIBRATED not in ref.values()
    for form, (lidar, same_information) in _forms(scan).items():
        for f in diagnose(rig, images, lidar=lidar, settings=settings):
            if f.verdict == ref[f.camera]:
                continue
            assert not same_information, (form, f.camera, ref[f.camera], f.reason)
            assert f.verdict == INCONCLUSIVE and f.doubt in LACKS, (form, f.camera, ref[f.camera], f.reason)
