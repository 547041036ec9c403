"""The doctor with a LiDAR witness on the real keyframe: diagnosis, refinement, evaluation."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from bevviz.calibration import DiagnoseSettings, Doubt, camera_delta, diagnose, perturb_rig, refine, refine_extrinsics
from bevviz.calibration.lidar.alignment import MIN_VERDICT_POINTS, EdgeAlignment, hypothesis_matrix
from bevviz.calibration.lidar.edges import REFLECTIVITY, view_edges
from bevviz.calibration.lidar.evidence import camera_evidence, lidar_evidence
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.refine import FLOOR_MEDIAN_DEG, MIN_FLOOR_CAMERAS, placement_floor, refine_with_lidar
from bevviz.calibration.verdicts import MISCALIBRATED, VERDICTS, lidar_doubt, rig_doubt
from bevviz.lab.evaluate import QUICK_CASES, evaluate, summary
from bevviz.lidar import LidarScan


def _named(found):
    return [f.camera for f in found if f.verdict == MISCALIBRATED]


def test_the_dataset_calibration_names_no_camera(real_sample, real_evidence):
    rig, images, _ = real_sample
    found = diagnose(rig, images, evidence=real_evidence)
    assert _named(found) == []
    assert [f.verdict for f in found] == sorted((f.verdict for f in found), key=VERDICTS.index)  # worst first
    for f in found:
        assert set(f.offset_deg) == {"roll", "pitch", "yaw"} and set(f.uncertainty_deg) == set(f.offset_deg)
        assert f.edge_points > 200 and f.witnesses["seams"] == "inconclusive"  # real seams cannot judge
    assert found.consensus.fitted and found.consensus.common_pitch_deg < -0.2  # the rig-wide pitch


def test_a_two_degree_yaw_names_that_camera_and_no_other(real_sample, real_evidence):
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", yaw_deg=2.0)
    ev = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], as_lidar_frames(images, scan)))
    found = diagnose(bad, images, evidence=ev)
    assert _named(found) == ["CAM_BACK"]
    assert found[0].camera == "CAM_BACK"
    assert found[0].offset_deg["yaw"] == pytest.approx(2.0, abs=0.3)
    assert found[0].doubt is None and found[0].witnesses["lidar"] == MISCALIBRATED


def test_diagnose_takes_the_scan_itself(real_sample):
    rig, images, scan = real_sample
    found = diagnose(rig, images, lidar=scan, settings=DiagnoseSettings(replicates=8))
    assert len(found) == len(rig) and all(f.lidar is not None for f in found)


def test_second_looks_made_only_where_read_give_the_verdicts_of_every_second_look(real_sample, real_evidence):
    """A diagnosis of the scan makes a camera's second look only where its first look doubts
    its landscape, the only place a verdict reads one: every verdict and reason is that of
    the evidence with every second look (here the keyframe with CAM_BACK turned 1.3 deg, a
    turn (seed 1207 of the evaluation) its first look doubts and its second names), and so
    are those of evidence handed in without its second looks together with the scan (what a
    doctor that keeps evidence hands on)."""
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", roll_deg=-0.941, pitch_deg=0.7, yaw_deg=-0.438)
    frames = as_lidar_frames(images, scan)
    every = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], frames))
    words = [(f.camera, f.verdict, f.reason) for f in diagnose(bad, images, evidence=every)]
    lazy = diagnose(bad, images, lidar=scan)
    assert [(f.camera, f.verdict, f.reason) for f in lazy] == words
    assert [f.camera for f in lazy if f.verdict == MISCALIBRATED] == ["CAM_BACK"] and "second look" in lazy[0].reason
    made = [f.camera for f in lazy if f.evidence.second_look is not None]
    assert "CAM_BACK" in made and len(made) < len(rig)
    assert all(f.doubt is not None for f in lazy if f.camera in made and f.camera != "CAM_BACK")
    bare = lidar_evidence(bad, None, frames, second_look=False)
    assert [(f.camera, f.verdict, f.reason) for f in diagnose(bad, images, lidar=scan, evidence=bare)] == words


def test_a_lidar_in_the_wrong_frame_accuses_no_camera(real_sample):
    """The keyframe's scan turned 180 deg about z (a cloud in another frame than the car's):
    CAM_FRONT was called miscalibrated; no other camera lines up with such a LiDAR, so none is."""
    rig, images, scan = real_sample
    pts = np.array(scan.points)
    pts[:, :2] *= -1.0
    turned = LidarScan(pts, scan.ring, scan.sweep, scan.origin, scan.timestamp_us,
                       dict(scan.exposure_from_keyframe))
    found = diagnose(rig, images, lidar=turned)
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == []
    assert any(f.doubt is Doubt.LIDAR_MAY_BE_OFF for f in found), [f.doubt for f in found]
    assert rig_doubt(found.consensus).doubt is Doubt.LIDAR_LOOKS_OFF  # said once, rig-wide
    assert found.lidar_doubt == lidar_doubt(found.consensus)
    as_it_is = diagnose(rig, images, lidar=scan, settings=DiagnoseSettings(replicates=8))
    assert as_it_is.lidar_doubt == "" and rig_doubt(as_it_is.consensus) is None  # the scan as it is: no doubt


def test_on_the_keyframe_the_lidar_proposes_the_correction_but_does_not_apply_it(real_sample, real_evidence):
    """Every check passes and the proposal brings CAM_BACK back within 0.3 deg, but the LiDAR
    puts the keyframe's calibrated cameras 0.07 to 0.53 deg from the dataset's calibration
    (median 0.37): too coarse for the accuracy an applied correction promises. The rig comes
    back unchanged and the proposal says so."""
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", yaw_deg=2.0)
    ev = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], as_lidar_frames(images, scan)))
    new, hist = refine_extrinsics(bad, images, None, "CAM_BACK", scan, evidence=ev)
    assert not hist.accepted and new is bad
    assert hist.proposal is not None and camera_delta(rig["CAM_BACK"], hist.proposal).angle_deg < 0.3
    assert hist.check.startswith("proposed, not applied") and "both halves agree" in hist.check, hist.check
    floor = placement_floor(bad, ev, "CAM_BACK")
    assert set(floor) <= set(rig.names) - {"CAM_BACK"} and len(floor) >= MIN_FLOOR_CAMERAS
    assert np.median(list(floor.values())) > FLOOR_MEDIAN_DEG
    assert f"median {np.median(list(floor.values())):.2f}" in hist.check


def test_a_rig_whose_calibrated_cameras_the_lidar_places_well_gets_the_correction_applied(real_sample, real_evidence,
                                                                                         monkeypatch):
    """The same correction, on a rig where the LiDAR puts the other cameras within 0.1 deg of
    their stored poses, is applied, and only CAM_BACK changes."""
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", yaw_deg=2.0)
    ev = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], as_lidar_frames(images, scan)))
    floor = {"A": 0.05, "B": 0.1, "C": 0.3}
    monkeypatch.setattr(refine, "placement_floor", lambda rig, evidence, camera, rule: floor)
    new, hist = refine_extrinsics(bad, images, None, "CAM_BACK", scan, evidence=ev)
    assert hist.accepted and hist.proposal is None, hist.check
    assert camera_delta(rig["CAM_BACK"], new["CAM_BACK"]).angle_deg < 0.3
    assert "3 calibrated cameras of the rig sit 0.05 to 0.30 deg (median 0.10)" in hist.check, hist.check
    for name in rig.names:
        if name != "CAM_BACK":
            assert new[name] == bad[name]
    monkeypatch.setattr(refine, "placement_floor", lambda rig, evidence, camera, rule: {"A": 0.5})
    new, hist = refine_extrinsics(bad, images, None, "CAM_BACK", scan, evidence=ev)
    assert hist.accepted, hist.check  # one camera's placement is its own error as much as the LiDAR's


def test_a_correction_the_two_kinds_of_edge_do_not_share_is_refused(real_sample, real_evidence):
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", yaw_deg=2.0)
    frames = as_lidar_frames(images, scan)
    ev = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], frames))
    al = EdgeAlignment(bad["CAM_BACK"], frames)
    new, hist = refine_with_lidar(bad, None, "CAM_BACK", frames, evidence=ev, alignment=al)
    assert hist.proposal is not None and "depth and reflectivity edges agree within" in hist.check, hist.check
    # the reflectivity edges turned 1.5 deg down: the two witnesses part
    refl = al.kind == REFLECTIVITY
    al.points[refl] = al.points[refl] @ hypothesis_matrix(np.array([0.0, 1.5, 0.0])).T
    al._points32 = al.points.astype(np.float32)
    new, hist = refine_with_lidar(bad, None, "CAM_BACK", frames, evidence=ev, alignment=al)
    assert not hist.accepted and hist.proposal is None and new is bad
    assert "the depth edges and the reflectivity edges disagree" in hist.check, hist.check


def test_a_correction_the_lidar_does_not_confirm_at_the_corrected_pose_is_refused(real_sample, real_evidence,
                                                                                    monkeypatch):
    """Judged again at the corrected pose the camera must read "ok". Here its evidence there
    is made to scatter 2 deg in roll (as a TRI correction's did, which ended 1.12 deg from
    the truth after passing every other check): the same correction is then refused."""
    rig, images, scan = real_sample
    bad = perturb_rig(rig, "CAM_BACK", yaw_deg=2.0)
    frames = as_lidar_frames(images, scan)
    ev = dict(real_evidence, CAM_BACK=camera_evidence(bad["CAM_BACK"], frames))
    measured = refine.camera_evidence

    def unsettled(camera, frames, *args, **kwargs):
        e = measured(camera, frames, *args, **kwargs)
        scatter = np.random.default_rng(0).normal(0.0, 2.0, e.replicates_deg.shape) * [1.0, 0.0, 0.0]
        return dataclasses.replace(e, replicates_deg=e.replicates_deg + scatter)

    monkeypatch.setattr(refine, "camera_evidence", unsettled)
    new, hist = refine_with_lidar(bad, None, "CAM_BACK", frames, evidence=ev)
    assert not hist.accepted and new is bad
    assert hist.check.startswith("the corrected pose is not confirmed") and "roll" in hist.check, hist.check


def test_a_calibrated_camera_is_not_refined(real_sample, real_evidence):
    rig, images, scan = real_sample
    new, hist = refine_extrinsics(rig, images, None, "CAM_BACK_LEFT", scan, evidence=real_evidence)
    assert not hist.accepted and new is rig
    assert "no correction" in hist.check


def test_seams_alone_cannot_confirm_a_correction_on_a_real_frame(real_sample):
    rig, images, _ = real_sample
    bad = perturb_rig(rig, "CAM_FRONT", yaw_deg=2.0)
    new, hist = refine_extrinsics(bad, images, None, "CAM_FRONT")
    assert not hist.accepted and new is bad
    assert "seams" in hist.check


@pytest.mark.slow
def test_the_ci_subset_of_the_evaluation_meets_the_safety_targets(real_sample):
    """A subset of ``python -m bevviz.lab.evaluate`` (the full table is in the
    closing notes): the faulty camera named, never a wrong one, never worse after refine."""
    # The seam refinement is left out (it took 27 of the test's 66 s): on a real frame seams
    # alone never confirm a correction (test_seams_alone_cannot_confirm_a_correction_on_a_real_frame).
    # Three of TIMING_SHIFTS_M: the largest both ways and the smallest behind (python -m
    # bevviz.lab.evaluate runs all six; +0.3 and +0.8 m have tests of their own in lidar/test_sync.py).
    shifts = (-1.5, -0.3, 1.5)
    cases, timings = evaluate(cases=list(QUICK_CASES), seams_refine=False, log=None, timing=shifts)
    assert len(cases) == 1 + len(QUICK_CASES) + len(shifts)
    rows, _ = summary(cases, timings)
    timed, cases = cases[1 + len(QUICK_CASES):], cases[:1 + len(QUICK_CASES)]
    # the calibration untouched, the LiDAR displaced along the car's axis: no camera accused
    assert [c.axis for c in timed] == ["timing"] * len(shifts)
    assert all(c.lidar_named == [] for c in timed), [c.lidar_reason for c in timed]
    assert any(r.startswith("PASS  LiDAR on the unperturbed rigs with the LiDAR displaced") for r in rows)
    # The verdict says "inconclusive" rather than guess: a fault may go unnamed when one image
    # half barely supports it (CAM_BACK roll +2: right-half gain 1.0 robust z, 1 needed), but
    # no wrong camera is ever named and most faults are.
    named = [c for c in cases[1:] if c.camera in c.lidar_named]
    assert len(named) >= len(QUICK_CASES) - 1, [(c.camera, c.axis, c.lidar_named) for c in cases[1:]]
    for c in cases[1:]:
        assert [n for n in c.lidar_named if n != c.camera] == []
        assert [n for n in c.seams_named if n != c.camera] == []
        assert c.lidar_end_deg <= c.start_deg + 1e-6
        if c.lidar_accepted:
            # Measured against the dataset calibration, which the LiDAR itself puts 0.51 deg of
            # roll (bootstrap sd 0.06) away for CAM_FRONT: a refinement of all three axes ends
            # there (0.506 deg), so the bound is the tolerance plus that disagreement.
            assert c.lidar_end_deg < 0.6
    assert cases[0].lidar_named == [] and cases[0].seams_named == []
    assert any(r.startswith("PASS  LiDAR names a wrong camera") for r in rows)
    assert np.isfinite(timings["diagnose_lidar_s"])


def test_a_plain_array_is_read_along_the_rings_its_order_or_elevations_show(real_sample):
    """The keyframe's scan without its ring index (a driver's plain (N, 4) array) gets the
    same ring edges; shuffled, it has no firing order, and its upper lasers' lines come back
    from their elevations (tests/calibration/lidar/test_rings.py)."""
    rig, images, scan = real_sample
    frames = as_lidar_frames(images, scan)
    with_index = frames[0].ring_edges
    view = view_edges(scan, rig["CAM_FRONT"], None, frames[0].ranks)
    assert len(view) < MIN_VERDICT_POINTS < len(EdgeAlignment(rig["CAM_FRONT"], frames).points)  # scored on the rings
    plain = as_lidar_frames(images, dataclasses.replace(scan, ring=None))[0].ring_edges
    assert plain is not None
    # the same points; a multi-threaded BLAS may round them differently in the last bit (2e-14 m)
    np.testing.assert_allclose(plain.points, with_index.points, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(plain.kind, with_index.kind)
    perm = np.random.default_rng(0).permutation(len(scan))
    shuffled = dataclasses.replace(scan, points=scan.points[perm], ring=None, sweep=scan.sweep[perm])
    from_elevations = as_lidar_frames(images, shuffled)[0].ring_edges
    assert from_elevations is not None and 0.3 * len(with_index) < len(from_elevations) < len(with_index)


def test_a_second_miscalibrated_camera_does_not_count_in_the_floor(real_sample, real_evidence):
    """The floor is the LiDAR's accuracy on the rig's *calibrated* cameras: with CAM_FRONT
    turned 2 deg too, the LiDAR calls it miscalibrated and it is left out, so it cannot
    hold back CAM_BACK's correction with its own error."""
    rig, images, scan = real_sample
    frames = as_lidar_frames(images, scan)
    bad = perturb_rig(perturb_rig(rig, "CAM_BACK", yaw_deg=2.0), "CAM_FRONT", yaw_deg=2.0)
    ev = dict(real_evidence, **{n: camera_evidence(bad[n], frames) for n in ("CAM_BACK", "CAM_FRONT")})
    one = dict(real_evidence, CAM_BACK=ev["CAM_BACK"])
    floor, single = placement_floor(bad, ev, "CAM_BACK"), placement_floor(bad, one, "CAM_BACK")
    assert "CAM_FRONT" in single and "CAM_FRONT" not in floor
    assert set(floor) == set(single) - {"CAM_FRONT"} and max(floor.values()) < 1.0, floor


def test_a_drive_names_a_turn_on_a_second_look_and_its_refinement_reads_that_look(tri_drive):
    """The committed TRI drive (3 frames), CAMERA_06 (a tree line in view) turned 2.7 deg down:
    pooled over the drive, the first look still rises into the foliage, to an optimum of chance
    at the edge of its widest search; the second look (attraction less its local mean) names
    the camera, and no other, with the turn it was given. The refinement works on that look:
    its correction and bootstrap spread are the second look's (the first look's replicates
    scatter between the edge and the truth: "not pinned down"), its halves agree to tenths of
    a degree, a correction it applies or proposes lands within 0.3 deg, and the camera never
    ends worse."""
    fault = np.array([0.32, -2.71, -0.28])
    rig = tri_drive[0].rig
    bad = perturb_rig(rig, "CAMERA_06", roll_deg=fault[0], pitch_deg=fault[1], yaw_deg=fault[2])
    images, scans = [f.images for f in tri_drive], [f.scan for f in tri_drive]
    found = diagnose(bad, images, lidar=scans)
    assert [f.camera for f in found if f.verdict == MISCALIBRATED] == ["CAMERA_06"]
    f = next(f for f in found if f.camera == "CAMERA_06")
    assert "second look" in f.reason, f.reason
    assert np.max(np.abs(np.array([f.offset_deg[a] for a in ("roll", "pitch", "yaw")]) - fault)) < 0.35
    new, hist = refine_with_lidar(bad, images, "CAMERA_06", scans)
    start = camera_delta(rig["CAMERA_06"], bad["CAMERA_06"]).angle_deg
    assert camera_delta(rig["CAMERA_06"], new["CAMERA_06"]).angle_deg <= start + 1e-9
    assert "does not reject" not in hist.check and "not pinned down" not in hist.check, hist.check
    if "halves of the evidence disagree" in hist.check:  # by tenths of a degree, not degrees
        assert "by up to 0." in hist.check, hist.check
    placed = new["CAMERA_06"] if hist.accepted else hist.proposal
    if placed is not None:
        assert camera_delta(rig["CAMERA_06"], placed).angle_deg < 0.3, hist.check


def test_a_declined_correction_names_the_axes_it_does_not_know(tri_drive):
    """TRI t0 alone, CAMERA_07 turned (roll -1.03, pitch +0.27, yaw -0.15): named, but its roll
    and pitch scatter over the bootstrap while its yaw is known to a tenth of a degree. The
    declined correction names the axes whose spread is beyond the bound, not all three, so a
    user knows which direction more evidence must pin down."""
    frame = tri_drive[0]
    bad = perturb_rig(frame.rig, "CAMERA_07", roll_deg=-1.03, pitch_deg=0.27, yaw_deg=-0.15)
    new, hist = refine_with_lidar(bad, frame.images, "CAMERA_07", frame.scan)
    assert not hist.accepted and new is bad
    match = re.match(r"the correction of (.+) is not pinned down: bootstrap spread roll ([\d.]+), pitch ([\d.]+), "
                     r"yaw ([\d.]+) deg \(at most ([\d.]+)\)", hist.check)
    assert match, hist.check
    spreads, bound = [float(v) for v in match.group(2, 3, 4)], float(match.group(5))
    loose = [a for a, v in zip(("roll", "pitch", "yaw"), spreads) if v > bound]
    assert match.group(1) == ", ".join(loose) and "yaw" not in loose, hist.check
