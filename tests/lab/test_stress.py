"""The stress variants: inputs as other rigs deliver them accuse no correctly calibrated camera."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bevviz.calibration.diagnose import diagnose
from bevviz.calibration.lidar.masks import ignore_masks
from bevviz.errors import InputError
from bevviz.io.frame_folder import load_frame_folder
from bevviz.lab.stress import StressCase, main, stress_frames, summary
from bevviz.lab.variants import (
    BARREL_K1,
    BEAM_BAND_DEG,
    BEAM_PERIOD_DEG,
    PAIR_BREAKING,
    SHUTTER_PAN_DEG,
    UNLOCATED_SENSOR_M,
    VARIANTS,
    distorted,
)
from bevviz.lidar import MIN_RANGE_M


@pytest.fixture(scope="module")
def kitti(sample_data):
    path = sample_data / "real_kitti"
    if not (path / "rig.json").is_file():
        pytest.skip("sample_data/real_kitti is missing")
    return load_frame_folder(path)


def test_each_variant_changes_what_it_says_and_keeps_the_calibration(kitti):
    rng = np.random.default_rng(0)
    n = len(kitti.scan.points)
    rig, images, scan, _ = VARIANTS["no intensity"][1](kitti, rng)
    assert rig is kitti.rig and scan.ring is None and not scan.intensity.any()
    _, _, scan, _ = VARIANTS["4x denser cloud"][1](kitti, rng)
    assert len(scan.points) == 4 * n
    _, _, scan, _ = VARIANTS["1/4 of the points"][1](kitti, rng)
    assert len(scan.points) == n // 4
    _, _, scan, _ = VARIANTS["no-returns at the LiDAR"][1](kitti, rng)
    holes = np.all(scan.points == np.append(kitti.scan.origin, 0.0).astype(np.float32), axis=1)
    assert len(scan.points) == n + n // 3 and holes.sum() >= n // 3
    np.testing.assert_array_equal(scan.points[~holes], kitti.scan.points)  # the returns in their order
    _, _, scan, _ = VARIANTS["no-returns, sensor not located"][1](kitti, rng)
    sensor = np.append(kitti.scan.origin + np.asarray(UNLOCATED_SENSOR_M), 0.0).astype(np.float32)
    holes = np.all(scan.points == sensor, axis=1)
    assert holes.sum() == n // 3 and np.linalg.norm(UNLOCATED_SENSOR_M) > MIN_RANGE_M  # beyond the origin's reach
    assert not scan.returns()[holes].any() and scan.returns()[~holes].sum() == kitti.scan.returns().sum()
    _, _, scan, _ = VARIANTS["intensity 0..1"][1](kitti, rng)
    assert scan.intensity.max() == pytest.approx(1.0)
    rig, images, _, _ = VARIANTS["half resolution"][1](kitti, rng)
    cam, half = kitti.rig["image_2"], rig["image_2"]
    assert images["image_2"].shape[:2] == (half.height, half.width) == (round(cam.height / 2), round(cam.width / 2))
    assert np.allclose(half.cam_from_ego, cam.cam_from_ego)
    assert half.K[0, 0] == pytest.approx(cam.K[0, 0] * half.width / cam.width)
    _, _, scan, _ = VARIANTS["LiDAR turned 90 deg"][1](kitti, rng)
    assert np.allclose(scan.points[:, 0], -kitti.scan.points[:, 1], atol=1e-4)
    assert np.allclose(scan.points[:, 1], kitti.scan.points[:, 0], atol=1e-4)
    behind = np.array(kitti.scan.points)  # the cloud mirrored behind the LiDAR too
    behind[:, 0] = 2.0 * kitti.scan.origin[0] - behind[:, 0]
    both = replace(kitti, scan=replace(kitti.scan, points=np.concatenate([kitti.scan.points, behind]),
                                       sweep=np.zeros(2 * n, np.int16)))
    _, _, scan, _ = VARIANTS["front half of the cloud"][1](both, rng)
    assert len(scan) == n and np.all(scan.points[:, 0] > kitti.scan.origin[0])
    _, _, scan, _ = VARIANTS["LiDAR 1.8 m low"][1](kitti, rng)
    assert np.allclose(scan.points[:, 2], kitti.scan.points[:, 2] - 1.8, atol=1e-4)
    rig, _, scan, _ = VARIANTS["car frame at the LiDAR"][1](kitti, rng)  # the same geometry, 1.8 m up
    assert np.allclose(scan.points[:, 2], kitti.scan.points[:, 2] - 1.8, atol=1e-4)
    assert rig["image_2"].position[2] == pytest.approx(kitti.rig["image_2"].position[2] - 1.8)
    seen = [c.cam_from_ego[:3, :3] @ s.points_at(c).T + c.cam_from_ego[:3, 3:]
            for c, s in ((kitti.rig["image_2"], kitti.scan), (rig["image_2"], scan))]
    assert np.allclose(seen[0], seen[1], atol=1e-4)  # every point where the camera saw it
    _, images, _, _ = VARIANTS["dark"][1](kitti, rng)
    assert images["image_2"].mean() < 0.5 * kitti.images["image_2"].mean()
    _, images, _, _ = VARIANTS["grey"][1](kitti, rng)
    grey = images["image_2"]
    assert grey.shape == kitti.images["image_2"].shape and (grey == grey[..., :1]).all()
    _, images, _, _ = VARIANTS["black corners"][1](kitti, rng)
    img = images["image_2"]
    assert not img[0, 0].any() and not img[-1, -1].any()
    assert (img[img.shape[0] // 2] == kitti.images["image_2"][img.shape[0] // 2]).all()  # the middle row kept


def test_a_rig_stored_in_a_higher_frame_sees_every_point_where_it_did_with_its_ego_motion(sample_data):
    tri = load_frame_folder(sample_data / "real_tri")
    assert tri.scan.exposure_from_keyframe  # the TRI frame's cameras fire after the sweep
    rig, _, scan, _ = VARIANTS["car frame at the LiDAR"][1](tri, np.random.default_rng(0))
    for cam in tri.rig:
        seen = [c.cam_from_ego[:3, :3] @ s.points_at(c).T + c.cam_from_ego[:3, 3:]
                for c, s in ((cam, tri.scan), (rig[cam.name], scan))]
        assert np.allclose(seen[0], seen[1], atol=1e-4), cam.name


@pytest.mark.parametrize("variant,k", [("portrait mount", 1), ("upside-down mount", 2)])
def test_the_turned_mount_variants_turn_images_cameras_and_ignore_polygons_alike(kitti, variant, k):
    # a bonnet, say (axis-aligned: fillPoly rasterises it exactly however it is turned)
    polygon = [[0.0, 300.0], [400.0, 300.0], [400.0, 374.0], [0.0, 374.0]]
    frame = replace(kitti, ignore={"image_2": [polygon]})
    rig, images, scan, ignore = VARIANTS[variant][1](frame, np.random.default_rng(0))
    assert scan is kitti.scan
    np.testing.assert_array_equal(images["image_2"], np.rot90(kitti.images["image_2"], k))
    assert rig["image_2"] == kitti.rig["image_2"].rot90(k)
    before = ignore_masks(kitti.rig, frame.ignore)["image_2"]
    after = ignore_masks(rig, ignore)["image_2"]
    assert after.shape == images["image_2"].shape[:2]
    np.testing.assert_array_equal(after, np.rot90(before, k))


@pytest.mark.parametrize("n", [2, 3])
def test_the_smaller_rig_variants_keep_the_first_cameras_with_their_images_and_polygons(sample_data, n):
    path = sample_data / "real_tri"
    if not (path / "rig.json").is_file():
        pytest.skip("sample_data/real_tri is missing")
    tri = load_frame_folder(path)
    first, last = tri.rig.names[0], tri.rig.names[-1]
    tri = replace(tri, ignore={first: [[[0, 0], [10, 0], [0, 10]]], last: [[[0, 0], [9, 0], [0, 9]]]})
    rig, images, scan, ignore = VARIANTS[f"{n} cameras"][1](tri, np.random.default_rng(0))
    assert rig.names == tri.rig.names[:n] and sorted(images) == sorted(rig.names)
    assert all(rig[c] is tri.rig[c] and images[c] is tri.images[c] for c in rig.names)
    assert list(ignore) == [tri.rig.names[0]] and scan is tri.scan


def test_the_fewer_beams_variant_keeps_every_other_ring_or_elevation_bands(kitti):
    rng = np.random.default_rng(0)
    _, _, scan, _ = VARIANTS["16 beams"][1](kitti, rng)  # no rings: elevation bands from the origin
    d = scan.xyz - np.asarray(kitti.scan.origin)
    elevation = np.degrees(np.arctan2(d[:, 2], np.hypot(d[:, 0], d[:, 1])))
    assert 0 < len(scan) < 0.5 * len(kitti.scan)
    assert np.all(np.mod(elevation, BEAM_PERIOD_DEG) < BEAM_BAND_DEG + 1e-4)
    ring = (np.arange(len(kitti.scan)) % 32).astype(np.int16)  # with rings: the even ones stay
    ringed = replace(kitti, scan=replace(kitti.scan, ring=ring))
    _, _, scan, _ = VARIANTS["16 beams"][1](ringed, rng)
    assert len(scan) == int(np.count_nonzero(ring % 2 == 0)) and set(np.unique(scan.ring) % 2) == {0}


def test_a_rolling_shutter_on_a_turn_shifts_rows_by_the_pan_and_the_ignore_polygons_with_them(kitti):
    cam = kitti.rig["image_2"]
    img = np.zeros((cam.height, cam.width, 3), np.uint8)
    u = 600
    img[:, u] = 255  # a vertical line
    frame = replace(kitti, images={"image_2": img}, ignore={"image_2": [[[u, 0], [u, cam.height - 1], [u + 40, 0]]]})
    rig, images, scan, ignore = VARIANTS["rolling shutter on a turn"][1](frame, np.random.default_rng(0))
    assert rig is kitti.rig and scan is kitti.scan
    out = images["image_2"][..., 0].astype(np.float64)
    pan = np.radians(SHUTTER_PAN_DEG) * cam.K[0, 0]  # pixels from the top row to the bottom row
    cols = np.arange(cam.width)
    middle = (cam.height - 1) / 2
    for v in (0, round(middle), cam.height - 1):
        expected = u + pan * (v - middle) / cam.height
        assert np.average(cols, weights=out[v]) == pytest.approx(expected, abs=0.05)
    (poly,) = ignore["image_2"]
    assert poly[0] == pytest.approx([u - pan * middle / cam.height, 0.0])
    assert poly[1][0] == pytest.approx(u + pan * middle / cam.height)


@pytest.mark.parametrize("variant,k1", [("barrel distortion left in", BARREL_K1),
                                        ("pincushion distortion left in", -BARREL_K1)])
def test_lens_distortion_left_in_moves_a_pixel_and_the_ignore_polygons_radially_as_k1_says(kitti, variant, k1):
    cam = kitti.rig["image_2"]
    img = np.zeros((cam.height, cam.width, 3), np.uint8)
    u, v = 1100, 300  # lower right of the principal point
    img[v, u] = 255
    np.testing.assert_array_equal(distorted(img, cam, 0.0), img)
    x = (np.array([u, v]) - cam.K[:2, 2]) / np.diag(cam.K)[:2]
    expected = cam.K[:2, 2] + np.diag(cam.K)[:2] * x * (1.0 + k1 * float(x @ x))
    frame = replace(kitti, images={"image_2": img}, ignore={"image_2": [[[u, v], [u + 40, v], [u, v + 40]]]})
    rig, images, scan, ignore = VARIANTS[variant][1](frame, np.random.default_rng(0))
    assert rig is kitti.rig and scan is kitti.scan
    out = images["image_2"]
    vs, us = np.nonzero(out[..., 0])
    weights = out[vs, us, 0].astype(np.float64)
    assert np.average(us, weights=weights) == pytest.approx(expected[0], abs=0.3)
    assert np.average(vs, weights=weights) == pytest.approx(expected[1], abs=0.3)
    assert ignore["image_2"][0][0] == pytest.approx(list(expected), abs=1e-6)


def test_the_real_keyframe_with_lens_distortion_left_in_accuses_no_camera(real_sample):
    """Pincushion distortion (k1 = +0.05) left in the nuScenes keyframe's images, the rig
    saying pinhole: CAM_BACK_RIGHT went to roll +1.39 deg, held there by 0.4 robust z of
    landscape, and was called miscalibrated before the axis-drop doubt."""
    rig, images, scan = real_sample
    bent = {c.name: distorted(images[c.name], c, 0.05) for c in rig}
    found = diagnose(rig, bent, lidar=scan)
    assert [f.camera for f in found if f.verdict == "miscalibrated"] == []
    back_right = next(f for f in found if f.camera == "CAM_BACK_RIGHT")
    assert "flat valley" in back_right.reason


def test_the_kitti_frame_under_other_rigs_inputs_accuses_no_camera(kitti):
    chosen = {k: VARIANTS[k] for k in ("no intensity", "4x denser cloud", "half resolution", "JPEG q15")}
    rows = []
    cases = stress_frames([kitti], chosen, log=rows.append)
    assert [c.variant for c in cases] == list(chosen) and len(rows) == len(chosen)
    assert all(not c.error and c.cameras == 1 for c in cases), [c.error for c in cases]
    assert [c.named for c in cases] == [[]] * len(chosen)
    table, ok = summary(cases)
    assert ok and table[-1].startswith("PASS  0 cameras accused in 4 diagnoses")


def test_a_moved_lidar_is_skipped_on_a_one_camera_rig_and_said_so(kitti):
    """Moving the LiDAR breaks a one-camera rig's camera-LiDAR pair itself: not a false alarm
    to count, so the variant is skipped there and the summary says how many were."""
    name = next(iter(PAIR_BREAKING))
    (case,) = stress_frames([kitti], {name: VARIANTS[name]}, log=None)
    assert case.skipped and not case.named and not case.error
    rows, ok = summary([case, *stress_frames([kitti], {"blur": VARIANTS["blur"]}, log=None)])
    assert ok and rows[-1].endswith("1 skipped (one-camera rigs: the variant breaks the pair)")
    assert "accused in 1 diagnoses" in rows[-1]
    assert summary([case])[1] is False  # nothing ran


def test_a_variant_that_cannot_run_or_accuses_fails_the_summary(kitti):
    def broken(frame, rng):
        raise InputError("images: no such camera", "images", "CAM_X")
    (case,) = stress_frames([kitti], {"broken": ("raises", broken)}, log=None)
    assert case.error == "images: no such camera"

    def buggy(frame, rng):  # not bad input: a bug in the variant, which no case swallows
        raise ValueError("a bug")
    with pytest.raises(ValueError, match="a bug"):
        stress_frames([kitti], {"buggy": ("raises", buggy)}, log=None)
    rows, ok = summary([case])
    assert not ok and "1 could not run" in rows[-1]
    rows, ok = summary([StressCase("f", "v", 6, ["CAM_FRONT"])])
    assert not ok and rows[-1].startswith("FAIL  1 cameras accused")
    assert summary([])[1] is False  # nothing ran: no PASS


def test_the_command_refuses_an_unknown_variant_and_a_missing_folder(tmp_path, capsys):
    assert main(["--variants", "sunny"]) == 2
    assert "--variants: unknown ['sunny']" in capsys.readouterr().err
    assert main(["--frames", str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err


def test_the_command_passes_on_the_kitti_frame(sample_data, capsys):
    if not (sample_data / "real_kitti" / "rig.json").is_file():
        pytest.skip("sample_data/real_kitti is missing")
    assert main(["--frames", str(sample_data / "real_kitti"), "--variants", "no point order", "blur"]) == 0
    out = capsys.readouterr().out
    assert "[1/2, about" in out and "PASS  0 cameras accused in 2 diagnoses" in out


def test_faults_under_a_variant_are_counted_and_a_wrong_camera_fails_the_summary(kitti):
    (case,) = stress_frames([kitti], {"grey": VARIANTS["grey"]}, log=None, faults=2)
    assert not case.error and case.faults == 2 and 0 <= case.faults_named <= 2
    assert case.wrong == []  # a one-camera rig has no other camera to name
    rows, ok = summary([case])
    assert ok and rows[0].split()[-3:] == ["faults", "named", "wrong"]
    assert f"2 faults: {case.faults_named} named, 0 wrong cameras" in rows[-1]
    bad = StressCase("f", "v", 6, faults=1, faults_named=1, wrong=["CAM_FRONT: CAM_BACK"])
    rows, ok = summary([bad])
    assert not ok and "1 wrong cameras" in rows[-1]


def test_the_command_refuses_negative_faults(sample_data, capsys):
    assert main(["--frames", str(sample_data / "real_kitti"), "--faults", "-1"]) == 2
    assert "--faults: must be at least 0, got -1" in capsys.readouterr().err
