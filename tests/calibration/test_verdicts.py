"""Verdict rules: each witness, and both together."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.consensus import RigConsensus
from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.calibration.verdicts import (
    ANCHOR_MAX_OFFSET_DEG,
    INCONCLUSIVE,
    MIN_ANCHORS,
    MIN_CLUSTERS,
    MIN_EDGE_POINTS,
    MIN_VERDICT_POINTS,
    MISCALIBRATED,
    OK,
    RULE,
    SEAM_TRUST_COST,
    SECOND_LOOK_CLEARS,
    SECOND_LOOK_DOUBTS,
    SECOND_LOOK_RULE,
    STANDOUT_RATIO,
    TOLERANCE_DEG,
    Basis,
    Doubt,
    Why,
    anchors,
    combine,
    lidar_doubt,
    lidar_verdict,
    rig_doubt,
    seam_verdict,
)

NONE = RigConsensus()


def _ev(offset, sd=0.05, n=400, clusters=40, flat=False, seed=0, stored=None, halves=None,
        half_gain=(2.0, 2.0)) -> CameraEvidence:
    """Evidence with a score landscape: median 0.70, robust spread 0.02, the optimum at 0.80
    (z 5; flat: z 0), the stored pose at ``stored`` (default: z 1 when the offset is beyond
    the tolerance, else at the optimum); both image halves at ``halves`` (default: the offset)."""
    rng = np.random.default_rng(seed)
    off = np.asarray(offset, dtype=np.float64)
    best = 0.70 if flat else 0.80
    if stored is None:
        stored = 0.72 if np.linalg.norm(off) > TOLERANCE_DEG else best
    return CameraEvidence("CAM_X", off, off + rng.normal(0, sd, (24, 3)), n_points=n, n_clusters=clusters,
                          score_best_coarse=best, score_median=0.70, score_spread=0.02,
                          score_stored_coarse=stored, halves_deg=np.array([off, off] if halves is None else halves),
                          half_gain=np.asarray(half_gain, dtype=np.float64))


def test_far_beyond_the_tolerance_is_miscalibrated_and_says_by_how_much():
    v = lidar_verdict(_ev([0.0, 0.0, 1.5]), NONE)
    assert v.verdict == MISCALIBRATED
    assert v.residual_deg[2] == pytest.approx(1.5, abs=0.05)
    assert v.doubt is None and v.why.kind is Basis.LOCATED and v.support[0] == 400
    assert "yaw +1.5" in v.reason  # the sentence is rendered from the numbers


def test_well_within_the_tolerance_is_ok():
    assert lidar_verdict(_ev([0.1, -0.2, 0.0]), NONE).verdict == OK


def test_at_the_tolerance_the_evidence_is_split():
    v = lidar_verdict(_ev([0.0, TOLERANCE_DEG, 0.0], sd=0.1), NONE)
    assert v.verdict == INCONCLUSIVE and 0.2 < v.beyond < 0.8 and v.doubt is Doubt.SPLIT
    assert v.why["beyond"] == v.beyond


def test_too_little_evidence_or_a_flat_score_is_inconclusive_whatever_the_offset():
    for few in (dict(n=MIN_EDGE_POINTS - 1), dict(clusters=MIN_CLUSTERS - 1)):
        v = lidar_verdict(_ev([0, 0, 2.0], **few), NONE)
        assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.TOO_FEW_EDGE_POINTS
    v = lidar_verdict(_ev([0, 0, 2.0], flat=True), NONE)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.FLAT_SCORE


def test_a_sparse_cloud_cannot_call_a_camera_miscalibrated_but_can_confirm_one():
    """Fewer than MIN_VERDICT_POINTS edge points a frame: the same strong offset is only inconclusive,
    with the count and the remedy in the reason; a camera within the tolerance stays ok."""
    assert lidar_verdict(_ev([0, 0, 2.0], n=MIN_VERDICT_POINTS), NONE).verdict == MISCALIBRATED
    v = lidar_verdict(_ev([0, 0, 2.0], n=MIN_VERDICT_POINTS - 1), NONE)
    assert v.verdict == INCONCLUSIVE and v.residual_deg[2] == pytest.approx(2.0, abs=0.05)
    assert v.doubt is Doubt.SPARSE_CLOUD and v.why["per_frame"] == MIN_VERDICT_POINTS - 1
    assert v.why["needed"] == MIN_VERDICT_POINTS
    three = _ev([0, 0, 2.0], n=3 * (MIN_VERDICT_POINTS - 1))  # three sparse frames add points, not density
    three.frames = 3
    assert lidar_verdict(three, NONE).doubt is Doubt.SPARSE_CLOUD
    assert lidar_verdict(_ev([0.1, 0.0, 0.0], n=MIN_VERDICT_POINTS - 1), NONE).verdict == OK


def test_a_camera_is_convicted_only_against_a_lidar_other_cameras_line_up_with():
    """A LiDAR in the wrong frame leaves every camera off: unless MIN_ANCHORS other cameras
    line up with the LiDAR at their stored pose (structure, stored pose within ANCHOR_MAX_DROP_Z of the
    optimum and the optimum near it), a strong offset is only inconclusive and the reason
    suspects the LiDAR."""
    lined_up, off, flat = (5.0, 4.9, 0.2), (5.0, 1.0, 2.0), (0.2, 0.1, 0.1)
    others = {"CAM_A": off, "CAM_B": off, "CAM_C": flat, "CAM_D": lined_up}
    v = lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes={"CAM_X": off, **others}))
    assert v.verdict == INCONCLUSIVE
    assert v.doubt is Doubt.LIDAR_MAY_BE_OFF and (v.why["lined"], v.why["others"]) == (1, 4)
    enough = {**others, **{f"CAM_{k}": lined_up for k in range(MIN_ANCHORS - 1)}}
    assert lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes=enough)).verdict == MISCALIBRATED
    # a rig of two: the one other camera must line up; a camera alone is a camera-LiDAR pair
    assert lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes={"CAM_A": off})).verdict == INCONCLUSIVE
    assert lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes={"CAM_A": lined_up})).verdict == MISCALIBRATED
    assert lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes={"CAM_X": off})).verdict == MISCALIBRATED


def test_the_rig_hears_once_when_no_camera_can_be_judged_against_the_lidar():
    lined_up, off = (5.0, 4.9, 0.2), (5.0, 1.0, 2.0)
    six = {f"CAM_{k}": off for k in range(6)}
    assert lidar_doubt(None) == "" and lidar_doubt(RigConsensus(landscapes={"CAM_X": off})) == ""  # one camera
    assert rig_doubt(RigConsensus(landscapes=six)) == Why(Doubt.LIDAR_LOOKS_OFF, {"lined": (), "cameras": 6})
    one = {**six, "CAM_0": lined_up}
    assert rig_doubt(RigConsensus(landscapes=one)).figures == {"lined": ("CAM_0",), "cameras": 6}
    assert lidar_doubt(RigConsensus(landscapes=one)).startswith("only 1 of 6 cameras (CAM_0) line up")
    two = {**one, "CAM_1": lined_up}  # two anchors: a third camera can be judged, no rig doubt
    assert lidar_doubt(RigConsensus(landscapes=two)) == ""
    assert anchors(two) == ["CAM_0", "CAM_1"] and anchors(two, exclude="CAM_0") == ["CAM_1"]
    assert lidar_doubt(RigConsensus(landscapes={"CAM_A": lined_up, "CAM_B": off})) == ""  # a pair with one anchor


def test_a_camera_off_only_by_what_the_whole_rig_shares_points_at_the_lidar():
    ev = _ev([0.0, -0.9, 0.0])
    con = RigConsensus(common_pitch_deg=-0.9, cameras=["CAM_X", "A", "B", "C"], fitted=True,
                       expected_deg={"CAM_X": np.array([0.0, -0.9, 0.0])})
    v = lidar_verdict(ev, con)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.RIG_OFF and v.why["common_pitch_deg"] == -0.9
    assert abs(v.residual_deg[1]) < 0.1


def test_seams_judge_only_where_they_can():
    untrusted = seam_verdict(5.0, 2, SEAM_TRUST_COST + 0.3)
    assert (untrusted.verdict, untrusted.doubt) == (INCONCLUSIVE, Doubt.SEAMS_UNTRUSTED)
    assert seam_verdict(STANDOUT_RATIO + 0.1, 2, 0.06).why.kind is Basis.STANDS_OUT
    assert seam_verdict(STANDOUT_RATIO + 0.1, 2, 0.06).verdict == MISCALIBRATED
    fine = seam_verdict(1.0, 2, 0.06)
    assert (fine.verdict, fine.doubt, fine.why.kind) == (OK, None, Basis.IN_LINE)
    one = seam_verdict(5.0, 1, 0.06)
    assert (one.verdict, one.doubt) == (INCONCLUSIVE, Doubt.TOO_FEW_SEAMS)


def test_witnesses_that_disagree_give_inconclusive():
    lidar_bad = lidar_verdict(_ev([0, 0, 2.0]), NONE)
    lidar_ok = lidar_verdict(_ev([0, 0, 0.0]), NONE)
    fine, stands_out, cannot = seam_verdict(1.0, 2, 0.06), seam_verdict(3.0, 2, 0.06), seam_verdict(1.0, 1, 0.06)
    disagree = combine(lidar_bad, fine, 1.0)
    assert (disagree.verdict, disagree.doubt) == (INCONCLUSIVE, Doubt.WITNESSES_DISAGREE)
    assert disagree.witnesses == {"lidar": MISCALIBRATED, "seams": OK}
    assert combine(lidar_ok, stands_out, 3.0).doubt is Doubt.WITNESSES_DISAGREE
    assert (combine(lidar_bad, cannot, 1.0).verdict, combine(lidar_bad, cannot, 1.0).doubt) == (MISCALIBRATED, None)
    assert combine(lidar_bad, stands_out, 3.0).verdict == MISCALIBRATED
    alone = combine(None, fine, 1.0)
    assert (alone.verdict, alone.doubt, alone.reason) == (OK, None, fine.reason)
    lidar_unsure = lidar_verdict(_ev([0, 0, 2.0], n=10), NONE)
    assert combine(lidar_unsure, stands_out, 3.0).verdict == MISCALIBRATED  # seams decide
    unsure = combine(lidar_unsure, cannot, 1.0)
    assert (unsure.verdict, unsure.doubt) == (INCONCLUSIVE, Doubt.TOO_FEW_EDGE_POINTS)  # the LiDAR's doubt


@pytest.mark.parametrize("kwargs,doubt", [
    (dict(stored=0.795), Doubt.STORED_POSE_CLOSE),  # the stored pose is near the top (z gap 0.25)
    (dict(half_gain=(3.0, 0.1)), Doubt.HALF_UNSUPPORTED),
    # a z gap of 1 (below RULE.z_reject): the offset must be located, and the halves must agree
    (dict(stored=0.78, halves=[[0.0, 0.0, 1.5], [0.0, 0.0, -0.5]]), Doubt.HALVES_APART),
    (dict(stored=0.78, sd=1.5), Doubt.NOT_PINNED),
])
def test_an_offset_the_evidence_does_not_establish_is_inconclusive_with_the_reason(kwargs, doubt):
    v = lidar_verdict(_ev([0.0, 0.0, 1.5], **kwargs), NONE)
    assert v.verdict == INCONCLUSIVE and v.doubt is doubt


def test_an_offset_with_no_direction_pinned_down_says_so():
    v = lidar_verdict(_ev([0.0, 0.0, 1.5], stored=0.78, sd=1.5), NONE)
    assert v.doubt is Doubt.NOT_PINNED and v.why["spread_deg"] > 1.0 and v.why["pinned"] == "it pins down no direction"


def test_a_located_verdict_goes_by_the_axes_the_evidence_pins_down():
    """A wide camera seldom pins its roll down: a yaw offset known to 0.05 deg convicts even
    when the roll is spread over a degree and a half (z gap 1: no rejection without locating)."""
    rng = np.random.default_rng(1)
    ev = _ev([0.0, 0.0, 1.2], stored=0.78)
    ev.replicates_deg = np.array([0.0, 0.0, 1.2]) + rng.normal(0, 1, (24, 3)) * [1.5, 0.05, 0.05]
    v = lidar_verdict(ev, NONE)
    assert v.verdict == MISCALIBRATED and v.why.kind is Basis.LOCATED, v.reason
    assert v.why["pinned"].startswith("all but roll (spread 1.")
    ev.replicates_deg[:, 2] = rng.normal(0, 0.05, 24)  # only the unpinned roll would be off
    v = lidar_verdict(ev, NONE)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.NOT_PINNED, v.reason
    assert v.why["pinned"].startswith("it pins down all but roll (spread 1.")
    assert "may be as little as 0.0" in v.why["pinned"]  # pitch and yaw: within 0.1 deg


def test_a_located_verdict_goes_by_the_directions_the_evidence_pins_down():
    """A side camera slides along a valley of roll and pitch together (TRI): no axis is known
    to 0.7 deg, but the offset across the valley is. Offset 0.8 deg across it (roll +0.57,
    pitch -0.57, plus 1.5 deg slid along it): the smallest turn that agrees with what is
    pinned down is 0.8 deg, so it convicts; 0.5 deg across it (at the tolerance) does not."""
    rng = np.random.default_rng(2)
    along, across = np.array([1.0, 1.0, 0.0]) / np.sqrt(2), np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    for offset, verdict in ((0.8, MISCALIBRATED), (0.5, INCONCLUSIVE)):
        centre = offset * across + 1.5 * along
        ev = _ev(list(centre), stored=0.78)
        ev.replicates_deg = (centre + np.outer(rng.normal(0, 2.0, 24), along)
                             + np.outer(rng.normal(0, 0.05, 24), across) + rng.normal(0, 0.05, (24, 1)) * [0, 0, 1])
        assert np.all(ev.replicates_deg[:, :2].std(axis=0) > 0.7)  # no axis pinned down
        v = lidar_verdict(ev, NONE)
        assert v.verdict == verdict, v.reason
        if verdict == MISCALIBRATED:
            free = v.why["pinned"]
            assert free.startswith("all but 0.7") and " roll + 0.7" in free and "pitch (spread " in free, free


def test_the_tolerance_bounds_the_angle_turned_not_each_axis():
    """0.4 deg in roll and 0.4 in yaw: no axis beyond 0.5, but turned 0.57 deg (a fault of
    the 0.5-1 deg band about a diagonal axis); 0.25 and 0.25 (0.35 deg) is calibrated."""
    v = lidar_verdict(_ev([0.4, 0.0, 0.4]), NONE)
    assert v.verdict == MISCALIBRATED and v.why.kind is Basis.LOCATED, v.reason
    assert "turned more than 0.5 deg" in v.reason
    assert lidar_verdict(_ev([0.25, 0.0, 0.25]), NONE).verdict == OK


def test_a_camera_off_only_against_the_rig_consensus_is_not_called_split():
    """Against the LiDAR alone the camera is turned 0.45 deg; the other cameras put the LiDAR
    0.5 deg the other way, so every replicate of its own offset is 0.95 off. Not accused (the
    LiDAR itself does not move it beyond the tolerance), and the reason says why."""
    con = RigConsensus(expected_deg={"CAM_X": np.array([0.0, -0.5, 0.0])}, fitted=True)
    v = lidar_verdict(_ev([0.0, 0.45, 0.0]), con)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.SPLIT and v.beyond == 1.0
    assert "against the LiDAR alone it is turned 0.45 deg, within the tolerance" in v.reason, v.reason
    assert "is split" in lidar_verdict(_ev([0.0, 0.45, 0.0], sd=0.3), NONE).reason


def test_an_explanation_within_the_tolerance_on_every_axis_clears_an_accusation():
    """The doubts err towards "inconclusive": where the other cameras put this one is 0.4 deg
    off on two axes (0.57 deg as an angle), yet it explains the accusation."""
    off = np.array([0.0, 1.0, 1.0])
    for others, verdict in (([0.0, 0.4, 0.4], INCONCLUSIVE), ([0.0, 0.6, 0.6], MISCALIBRATED)):
        con = RigConsensus(expected_by_others_deg={"CAM_X": [off - np.array(others)]})
        v = lidar_verdict(_ev(off), con)
        assert v.verdict == verdict, v.reason
        if verdict == INCONCLUSIVE:
            assert v.doubt is Doubt.OTHERS_EXPLAIN


def test_a_stored_pose_far_below_the_optimum_in_both_halves_is_rejected_without_locating_it():
    ev = _ev([0.0, 0.0, 1.5], sd=1.5, stored=0.72, half_gain=(2.0, 2.0))  # z gap 4
    v = lidar_verdict(ev, NONE)
    assert v.verdict == MISCALIBRATED and v.why.kind is Basis.REJECTED and v.why["gap_z"] == pytest.approx(4.0)
    weak_half = _ev([0.0, 0.0, 1.5], sd=1.5, stored=0.72, half_gain=(2.0, 0.5))
    assert lidar_verdict(weak_half, NONE).doubt is Doubt.NOT_PINNED
    small_gap = _ev([0.0, 0.0, 1.5], sd=1.5, stored=0.775, half_gain=(2.0, 2.0))  # z gap 1.25
    assert lidar_verdict(small_gap, NONE).doubt is Doubt.NOT_PINNED


def test_an_optimum_at_the_edge_of_the_search_is_no_optimum():
    v = lidar_verdict(_ev([0.0, 2.9, 0.0]), NONE)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.AT_SEARCH_EDGE


def test_the_edge_is_that_of_the_search_as_widened():
    """A 4 deg optimum inside a search widened to 5.5 deg is an optimum; one at the edge of the
    widest search is not, and the sentence names the radius searched."""
    ev = _ev([0.0, 4.0, 0.0])
    ev.radius_deg = 5.5
    assert lidar_verdict(ev, NONE).verdict == MISCALIBRATED
    edge = _ev([0.0, 7.8, 0.0])
    edge.radius_deg = 8.0
    v = lidar_verdict(edge, NONE)
    assert v.doubt is Doubt.AT_SEARCH_EDGE and "+-8 deg search" in v.reason


def _at_edge_with_second_look(look: CameraEvidence) -> CameraEvidence:
    """A first look whose optimum lies at the edge of its widest search, with ``look`` as its second."""
    edge = _ev([0.0, 5.3, 0.0])
    edge.radius_deg = 5.5
    edge.second_look = look
    return edge


def test_a_second_look_decides_where_the_first_ends_at_the_search_edge():
    """The first look rose to the edge of its search; the second (attraction less its local
    mean) locates the camera 1.5 deg off with its stored pose 4 robust z below: convicted on
    the second look, its figures in the verdict and the first look's edge in the sentence."""
    v = lidar_verdict(_at_edge_with_second_look(_ev([0.0, 1.5, 0.0])), NONE)
    assert v.verdict == MISCALIBRATED and v.second_look and v.why.kind is Basis.LOCATED
    assert v.residual_deg[1] == pytest.approx(1.5, abs=0.05)
    assert "second look" in v.reason and "pitch +5.30" in v.reason and "+-5.5 deg search" in v.reason
    ok = lidar_verdict(_at_edge_with_second_look(_ev([0.0, 0.1, 0.0])), NONE)
    assert ok.verdict == OK and ok.second_look and "second look" in ok.reason


def test_a_second_look_is_judged_by_its_own_larger_drops():
    """A stored pose 2 robust z below the optimum rejects it on a first look (``z_gap``
    0.75) but not on a second, whose landscapes stand about twice as high: then the first
    look's doubt stands, and nothing is said of a second look."""
    look = _ev([0.0, 1.5, 0.0], stored=0.76)  # z 3 against an optimum at z 5
    assert RULE.z_gap < 2.0 < SECOND_LOOK_RULE.z_gap
    assert lidar_verdict(look, NONE).verdict == MISCALIBRATED  # as a first look
    v = lidar_verdict(_at_edge_with_second_look(look), NONE)
    assert v.verdict == INCONCLUSIVE and v.doubt is Doubt.AT_SEARCH_EDGE and not v.second_look
    assert "second look" not in v.reason
    flat = _ev([0.0, 1.5, 0.0])
    flat.score_best_coarse = 0.73  # 0.03 over the median: structure on a first look, flat on a second
    assert lidar_verdict(_at_edge_with_second_look(flat), NONE).doubt is Doubt.AT_SEARCH_EDGE


def test_a_second_look_is_read_only_where_the_first_doubts_its_landscape():
    """A first look that decides, or doubts its input (too few points, a LiDAR displacement
    that explains it), is the verdict whatever a second look says."""
    for first, doubt in ((_ev([0.0, 0.1, 0.0]), None), (_ev([0.0, 1.5, 0.0], n=30), Doubt.TOO_FEW_EDGE_POINTS)):
        first.second_look = _ev([0.0, 3.0, 0.0])
        v = lidar_verdict(first, NONE)
        assert not v.second_look and v.doubt is doubt and v.residual_deg[1] < 1.6
    assert Doubt.TIMING not in SECOND_LOOK_DOUBTS and Doubt.OTHERS_EXPLAIN not in SECOND_LOOK_DOUBTS


def test_a_stored_pose_close_on_the_first_look_is_convicted_only_by_a_second_look_that_rejects_it():
    """A first look whose stored pose scores almost as well as its optimum (a flat landscape
    near the stored pose) is read past only to convict: the second look must reject the stored
    pose by its own, stricter gap (SECOND_LOOK_RULE.z_gap 3.0); a second look that does not
    leaves the first look's doubt."""
    first = _ev([0.0, 1.0, 0.0], sd=0.5, stored=0.795)
    assert lidar_verdict(first, NONE).doubt is Doubt.STORED_POSE_CLOSE
    first.second_look = _ev([0.0, 1.5, 0.0])  # stored pose far below its optimum: rejected
    v = lidar_verdict(first, NONE)
    assert v.verdict == MISCALIBRATED and v.second_look and v.residual_deg[1] == pytest.approx(1.5, abs=0.05)
    assert "the first look was unsure (the stored pose scores almost as well)" in v.reason
    first.second_look = _ev([0.0, 1.5, 0.0], stored=0.76)  # z 3 against an optimum at z 5: not rejected
    kept = lidar_verdict(first, NONE)
    assert kept.doubt is Doubt.STORED_POSE_CLOSE and not kept.second_look


def test_a_second_look_convicts_where_the_first_is_not_pinned_but_never_clears_it():
    """A first look whose replicates spread 0.8 deg (texture widens its valley) does not
    pin the camera; a second look that locates it 1.5 deg off convicts, and the sentence says
    what the first look doubted. A second look that finds it within the tolerance does not
    clear it: only a first look at the search's edge is cleared by a second look."""
    first = _ev([0.0, 0.3, 0.0], sd=0.8)
    assert lidar_verdict(first, NONE).doubt is Doubt.NOT_PINNED
    first.second_look = _ev([0.0, 1.5, 0.0])
    v = lidar_verdict(first, NONE)
    assert v.verdict == MISCALIBRATED and v.second_look and v.residual_deg[1] == pytest.approx(1.5, abs=0.05)
    assert "second look" in v.reason and "the first look was unsure (the offset is not pinned down)" in v.reason
    first.second_look = _ev([0.0, 0.1, 0.0])
    kept = lidar_verdict(first, NONE)
    assert kept.doubt is Doubt.NOT_PINNED and not kept.second_look and "second look" not in kept.reason
    assert SECOND_LOOK_CLEARS == {Doubt.AT_SEARCH_EDGE} <= SECOND_LOOK_DOUBTS


def test_a_camera_whose_optimum_lies_far_from_its_stored_pose_is_no_anchor():
    """A LiDAR in the wrong frame leaves each camera a landscape of chance: a camera may stand
    within ANCHOR_MAX_DROP_Z of an optimum degrees away. That is no camera lining up with the
    LiDAR (on the nuScenes keyframe with its cloud turned 90 deg and one camera turned, two
    such cameras let a third be convicted)."""
    near, close_in_z_but_far = (3.0, 2.6, 0.4), (3.0, 2.6, ANCHOR_MAX_OFFSET_DEG + 0.5)
    assert anchors({"CAM_A": near, "CAM_B": close_in_z_but_far}) == ["CAM_A"]
    others = {"CAM_A": close_in_z_but_far, "CAM_B": close_in_z_but_far, "CAM_C": near}
    v = lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes=others))
    assert v.doubt is Doubt.LIDAR_MAY_BE_OFF and (v.why["lined"], v.why["others"]) == (1, 3)
    assert lidar_verdict(_ev([0, 0, 2.0]), RigConsensus(landscapes={**others, "CAM_B": near})).verdict == MISCALIBRATED


def _profiles(drops, best=0.80, spread=0.02):
    """Profiles through the optimum whose score at each axis's stored value (offset 0) lies
    ``drops`` robust z below ``best``, (3,)."""
    offs = np.round(np.arange(-3.0, 3.0 + 1e-9, 0.1), 6)
    out = {}
    for name, drop in zip(("roll", "pitch", "yaw"), drops):
        scores = np.full(len(offs), best - 0.5 * spread)
        scores[np.argmin(np.abs(offs))] = best - drop * spread
        out[name] = (offs, scores)
    return out


def test_the_drop_of_each_axis_back_to_its_stored_value_is_read_off_the_profiles():
    ev = _ev([1.4, 0.0, 0.0])
    assert np.all(np.isnan(ev.axis_drop_z))  # no profiles: nothing to read
    ev.score_best, ev.profiles = 0.80, _profiles([0.4, 1.2, 0.2])
    assert ev.axis_drop_z == pytest.approx([0.4, 1.2, 0.2])


def test_an_offset_on_an_axis_the_landscape_does_not_hold_is_inconclusive():
    """Roll alone beyond the tolerance, tightly bootstrapped, but putting roll back costs the
    score 0.4 robust z (the nuScenes keyframe with pincushion distortion left in): a flat
    valley, not evidence. The same offset held by 1.2 z on roll convicts."""
    ev = _ev([1.4, -0.2, 0.0], stored=0.78)
    ev.score_best, ev.profiles = 0.80, _profiles([0.4, 1.2, 0.2])
    v = lidar_verdict(ev, NONE)
    assert v.verdict == INCONCLUSIVE
    assert v.doubt is Doubt.FLAT_VALLEY and v.why["axes"] == ("roll",) and v.why["drop_z"] == pytest.approx(0.4)
    ev.profiles = _profiles([1.2, 0.4, 0.2])
    assert lidar_verdict(ev, NONE).verdict == MISCALIBRATED
    # two axes off: one of them held is enough
    two = _ev([1.4, 0.0, -1.0], stored=0.78)
    two.score_best, two.profiles = 0.80, _profiles([0.3, 0.1, 0.9])
    assert lidar_verdict(two, NONE).verdict == MISCALIBRATED
    two.profiles = _profiles([0.3, 2.0, 0.5])  # the held axis is not one it is off on
    assert lidar_verdict(two, NONE).doubt is Doubt.FLAT_VALLEY


def test_an_offset_whose_held_part_is_within_the_tolerance_is_inconclusive():
    """Roll 1.4 deg along a flat valley, pitch 0.35 deg held by the landscape: the held part
    alone is within the tolerance, so the offset beyond it is the valley's (the nuScenes
    keyframe with pincushion distortion left in, CAM_FRONT_LEFT turned: CAM_BACK_RIGHT at roll
    +1.39, pitch -0.31 was convicted). Held by more than the tolerance, it convicts."""
    ev = _ev([1.4, -0.35, 0.0], stored=0.78)
    ev.score_best, ev.profiles = 0.80, _profiles([0.4, 1.2, 0.2])
    v = lidar_verdict(ev, NONE)
    assert (v.verdict, v.doubt) == (INCONCLUSIVE, Doubt.FLAT_VALLEY)
    assert v.why["axes"] == ("roll",) and v.why["held_axes"] == ("pitch",)
    assert v.why["held_deg"] == pytest.approx(0.35, abs=0.02)
    assert "only pitch is held by the landscape, and it carries 0.35 deg" in v.reason
    held = _ev([1.4, -0.7, 0.0], stored=0.78)
    held.score_best, held.profiles = 0.80, _profiles([0.4, 1.2, 0.2])
    assert lidar_verdict(held, NONE).verdict == MISCALIBRATED
    # an axis the landscape cannot judge (no profile) is neither held nor sliding: as before
    unjudged = _ev([1.4, -0.35, 0.0], stored=0.78)
    unjudged.score_best, unjudged.profiles = 0.80, _profiles([0.4, 1.2, 0.2])
    del unjudged.profiles["roll"]
    assert lidar_verdict(unjudged, NONE).verdict == MISCALIBRATED


def test_an_ok_with_a_few_replicates_far_off_is_not_pinned():
    """Most replicates within the tolerance, a few degrees off: the spread a heavily blurred
    image gives (1.0-1.9 deg), never a sharp clean camera's (at most 0.33 deg)."""
    ev = _ev([0.1, -0.2, 0.0])
    ev.replicates_deg[:2] = [3.0, -2.5, 2.0]  # 2 of 24: 92 % still within the tolerance
    v = lidar_verdict(ev, NONE)
    assert (v.verdict, v.doubt) == (INCONCLUSIVE, Doubt.NOT_PINNED) and v.why["spread_deg"] > RULE.max_sd_deg


def test_seams_cannot_clear_a_camera_the_lidar_puts_beyond_the_tolerance():
    fine = seam_verdict(1.0, 2, 0.06)
    moved = lidar_verdict(_ev([0.0, 0.0, 1.5], stored=0.78, sd=1.5), NONE)  # not pinned, mostly beyond
    assert moved.verdict == INCONCLUSIVE and moved.beyond >= 0.5
    judged = combine(moved, fine, 1.0)
    assert (judged.verdict, judged.doubt) == (INCONCLUSIVE, Doubt.WITNESSES_DISAGREE)
    near = lidar_verdict(_ev([0.0, 0.0, 0.0], n=10), NONE)  # too few points, within the tolerance
    assert combine(near, fine, 1.0).verdict == OK  # there the seams still decide
