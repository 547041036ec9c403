"""Frames that disagree are set aside, never averaged in (bevviz.calibration.lidar.frame_agreement)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bevviz.calibration import MISCALIBRATED, diagnose
from bevviz.calibration.lidar.alignment import EdgeAlignment
from bevviz.calibration.lidar.evidence import agreement_of, lidar_evidence, with_second_looks
from bevviz.calibration.lidar.frame_agreement import FrameAgreement, frames_to_set_aside
from bevviz.calibration.lidar.frames import as_lidar_frames
from bevviz.calibration.perturbations import perturb_rig
from bevviz.calibration.verdicts import Doubt, lidar_verdict
from bevviz.errors import InputError
from bevviz.rotations import rpy_to_matrix


def _sweep_turned(frame, deg: float):
    """The frame with its sweep turned ``deg`` about the vertical (a scan that does not belong)."""
    pts = np.array(frame.scan.points)
    pts[:, :3] = pts[:, :3] @ rpy_to_matrix(0.0, 0.0, np.radians(deg)).T
    return dataclasses.replace(frame, scan=dataclasses.replace(frame.scan, points=pts))


def _alignments(rig, frames):
    pairs = as_lidar_frames([f.images for f in frames], [f.scan for f in frames])
    return {n: EdgeAlignment(rig[n], pairs) for n in rig.names}


@pytest.fixture(scope="module")
def corrupted(tri_drive):
    """The drive with its second sweep turned 2 deg about the vertical."""
    return [tri_drive[0], _sweep_turned(tri_drive[1], 2.0), tri_drive[2]]


def test_only_keeps_the_frames_named_and_renumbers_them(tri_drive):
    rig = tri_drive[0].rig
    al = _alignments(rig, tri_drive)["CAMERA_05"]
    two = al.only([2, 0])
    assert two.scales == [al.scales[0], al.scales[2]] and two.maps[1] is al.maps[2]
    np.testing.assert_array_equal(two.points, al.points[al.frame != 1])
    np.testing.assert_array_equal(two.frame, np.where(al.frame[al.frame != 1] == 2, 1, 0))
    d = np.array([0.2, -0.1, 0.3])
    weights = (al.frame != 1).astype(np.float64)
    assert two.score(d, 1) == pytest.approx(al.score(d, 1, weights), rel=1e-6)
    with pytest.raises(InputError):
        al.only([3])


def test_a_clean_drive_and_a_real_fault_set_nothing_aside(tri_drive):
    """The clean frames agree (no camera votes against any frame), and so do frames that all
    show the same fault of one camera."""
    rig = tri_drive[0].rig
    for r in (rig, perturb_rig(rig, "CAMERA_05", yaw_deg=1.5)):
        agreement = frames_to_set_aside(_alignments(r, tri_drive))
        assert agreement.set_aside == () and agreement.votes == (0, 0, 0) and agreement.voters == 6


def test_a_sweep_that_does_not_belong_is_set_aside_with_a_reason(tri_drive, corrupted):
    rig = tri_drive[0].rig
    agreement = frames_to_set_aside(_alignments(rig, corrupted))
    assert agreement.set_aside == (1,)
    assert agreement.votes[1] > max(agreement.votes[0], agreement.votes[2])
    assert agreement.reason.startswith("frame 2 of 3 set aside")
    # two frames: which one is wrong cannot be told, so none is set aside
    assert frames_to_set_aside(_alignments(rig, corrupted[:2])).set_aside == ()


def test_a_repeated_view_and_a_frame_set_aside_keep_the_numbers_given(tri_drive, corrupted):
    """The first frame given twice (a parked car) and the corrupted sweep third: the repeat is
    left out, the frames agree on the three distinct views, and the frame set aside is named
    by its number among the four given."""
    frames = [corrupted[0], corrupted[0], *corrupted[1:]]
    evidence = lidar_evidence(tri_drive[0].rig, [f.images for f in frames], [f.scan for f in frames],
                              replicates=0, second_look=False)
    for ev in evidence.values():
        assert ev.repeats == (1,) and ev.set_aside == (2,) and ev.frames == 2
        assert ev.set_aside_reason.startswith("frame 3 of 4 set aside")
        assert ev.repeats_reason.startswith("frame 2 repeats frame 1's view")


def test_the_doctor_judges_on_the_frames_kept_and_accuses_no_camera(tri_drive, corrupted):
    d = diagnose(tri_drive[0].rig, [f.images for f in corrupted], lidar=[f.scan for f in corrupted])
    assert not [f.camera for f in d if f.verdict == MISCALIBRATED]
    for f in d:
        assert f.lidar.set_aside == (1,) and f.lidar.frames == 2
        assert "frame 2 of 3 set aside" in f.reason


def test_a_set_aside_frame_never_convicts(tri_drive):
    """A camera the kept frames would convict is "inconclusive": setting a frame aside may
    clear a camera, never make the doctor surer of a fault."""
    rig = perturb_rig(tri_drive[0].rig, "CAMERA_05", yaw_deg=1.5)
    d = diagnose(rig, [f.images for f in tri_drive], lidar=[f.scan for f in tri_drive])
    f = d.by_camera("CAMERA_05")
    assert f.verdict == MISCALIBRATED and f.lidar.set_aside == ()
    marked = dataclasses.replace(f.lidar, set_aside=(1,), set_aside_reason="frame 2 of 3 set aside: a test")
    lv = lidar_verdict(marked, d.consensus)
    assert lv.verdict == "inconclusive" and lv.doubt is Doubt.FRAME_SET_ASIDE
    assert "frame 2 of the drive was set aside" in lv.reason


def test_more_cameras_of_the_same_frames_keep_what_was_decided(tri_drive, corrupted):
    """The Doctor aligns a moved camera alone (the others' evidence is stored): one camera
    cannot vote, so what the rig decided is handed on (``agreement_of``)."""
    rig = tri_drive[0].rig
    pairs = as_lidar_frames([f.images for f in corrupted], [f.scan for f in corrupted])
    alone = lidar_evidence(rig, None, pairs, cameras=["CAMERA_07"], replicates=2)["CAMERA_07"]
    assert alone.set_aside == () and alone.frames == 3  # one camera alone sets nothing aside
    decided = FrameAgreement((1,), reason="frame 2 of 3 set aside: a test")
    handed = lidar_evidence(rig, None, pairs, cameras=["CAMERA_07"], replicates=2, agreement=decided)["CAMERA_07"]
    assert handed.set_aside == (1,) and handed.frames == 2 and handed.set_aside_reason == decided.reason
    look = handed.second_look  # judged in its place where the first look doubts its landscape: the same frames
    assert look.set_aside == (1,) and look.frames == 2 and look.set_aside_reason == decided.reason
    bare = lidar_evidence(rig, None, pairs, cameras=["CAMERA_07"], replicates=2, agreement=decided, second_look=False)
    later = with_second_looks(rig, bare, pairs, ["CAMERA_07"])["CAMERA_07"].second_look  # made where a verdict reads it
    assert later.set_aside == (1,) and later.frames == 2 and np.array_equal(later.replicates_deg, look.replicates_deg)
    assert agreement_of({"CAMERA_07": handed}) == FrameAgreement((1,), reason=decided.reason)
    assert agreement_of({}) is None
