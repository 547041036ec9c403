"""rank_conventions: the true storage convention wins for a nuScenes-like rig stored in any of
the 12 ways; evidence is readable; identical candidates are reported as ties."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.convention_ranking import measured_from_ground
from bevviz.conventions import Convention, ConventionScore, RawCamera, rank_conventions, raw_from_camera
from bevviz.synthetic import nuscenes_like_rig

ALL = Convention.all()


@pytest.mark.parametrize("true", ALL, ids=[c.label for c in ALL])
def test_true_convention_ranks_first_with_margin(rig, true):
    ranked = rank_conventions(rig.to_raw(true))
    assert len(ranked) == 12
    assert all(isinstance(r, ConventionScore) for r in ranked)
    assert ranked[0].convention == true
    assert ranked[0].score == pytest.approx(1.0, abs=1e-3)
    # Every wrong reading is clearly worse (not a near tie).
    assert ranked[0].score - ranked[1].score > 0.1
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    # The winner's rig is the original rig.
    for a, b in zip(ranked[0].rig, rig):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)


@pytest.mark.parametrize("true", ALL[:4], ids=[c.label for c in ALL[:4]])
def test_a_rig_stored_in_its_lidars_frame_ranks_as_on_the_ground_when_told_where_the_ground_is(rig, true):
    up = measured_from_ground(rig, 1.8)  # every camera's frame 1.8 m higher: cameras at -0.3 m
    assert up["CAM_FRONT"].position[2] == pytest.approx(rig["CAM_FRONT"].position[2] - 1.8)
    grounded = rank_conventions(up.to_raw(true), ground_z=-1.8)
    reference = rank_conventions(rig.to_raw(true))
    # the true reading scores as the rig on the ground does (the wrong readings of shifted
    # numbers are other wrong rigs), and still wins clearly
    assert grounded[0].convention == true and grounded[0].score == pytest.approx(reference[0].score, abs=1e-9)
    assert grounded[0].score - grounded[1].score > 0.1
    for a, b in zip(grounded[0].rig, up):  # the winner's rig stays in the stored frame
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
    # read from z = 0 the stored frame's cameras sit below the ground: the checks say so
    blind = rank_conventions(up.to_raw(true))
    assert blind[0].score < grounded[0].score - 0.1
    assert any("implausible height" in e for e in next(r for r in blind if r.convention == true).evidence)
    assert measured_from_ground(rig, 0.0) is rig


def test_evidence_is_readable_sentences(rig):
    true = Convention("sensor_to_ego", "wxyz", "RDF")
    ranked = rank_conventions(rig.to_raw(true))
    for res in ranked:
        assert len(res.evidence) >= 5
        assert all(isinstance(s, str) and s.endswith(".") for s in res.evidence)
    by_label = {r.label: r for r in ranked}
    # y/z-style axis mix-up: the ground ends up above the horizon / image rolled.
    rub = by_label["sensor_to_ego / wxyz / RUB"]
    assert rub.checks["ground below horizon"] < 0.5
    assert any("inward" in s for s in rub.evidence)
    # Wrong direction: cameras below the ground.
    e2s = by_label["ego_to_sensor / wxyz / RDF"]
    assert e2s.checks["height"] < 0.5
    assert any("below the ground" in s for s in e2s.evidence)


def test_quaternion_order_mixup_caught_by_side_cameras(rig):
    """wxyz/xyzw barely moves CAM_FRONT, so the front camera alone cannot decide; the full rig can."""
    true = Convention("sensor_to_ego", "wxyz", "RDF")
    wrong = Convention("sensor_to_ego", "xyzw", "RDF")
    front = rig.subset(["CAM_FRONT"])
    ranked_front = rank_conventions(front.to_raw(true), candidates=[true, wrong])
    assert abs(ranked_front[0].score - ranked_front[1].score) < 0.02
    ranked = {r.label: r for r in rank_conventions(rig.to_raw(true))}
    assert ranked[true.label].score - ranked[wrong.label].score > 0.1
    wrong_ev = " ".join(ranked[wrong.label].evidence)
    assert "CAM_FRONT_RIGHT" in wrong_ev or "CAM_BACK_RIGHT" in wrong_ev


def test_matrix_storage_gives_honest_ties(rig):
    true = Convention("ego_to_sensor", "wxyz", "FLU")
    raw = [raw_from_camera(c, true, rotation_as="matrix") for c in rig]
    ranked = rank_conventions(raw)
    top = {ranked[0].label, ranked[1].label}
    assert top == {"ego_to_sensor / wxyz / FLU", "ego_to_sensor / xyzw / FLU"}
    assert ranked[0].score == pytest.approx(ranked[1].score)
    assert ranked[1].label in ranked[0].ties
    assert any(s.startswith("Tie:") for s in ranked[0].evidence)
    assert ranked[1].score - ranked[2].score > 0.1


def test_unreadable_candidate_scores_minus_inf():
    rig = nuscenes_like_rig()
    raw = rig.to_raw(Convention())
    # A 3x3 "rotation" that is not orthonormal cannot be read in any convention.
    bad = [RawCamera(r.name, r.K, np.eye(3) * 2.0, r.translation, r.width, r.height) for r in raw]
    ranked = rank_conventions(bad)
    assert all(r.score == float("-inf") for r in ranked)
    assert all("cannot be read" in r.evidence[0] for r in ranked)


def test_empty_input_is_named_error():
    with pytest.raises(ValueError, match="raw_cameras"):
        rank_conventions([])


@pytest.mark.parametrize("true", [Convention("sensor_to_ego", "wxyz", "RDF"),
                                  Convention("ego_to_sensor", "xyzw", "RUB")], ids=lambda c: c.label)
def test_seam_evidence_with_images(true, embedded_sample):
    stored, images = embedded_sample
    ranked = rank_conventions(stored.to_raw(true), images=images)
    best = ranked[0]
    assert best.convention == true
    assert "seams" in best.checks and best.checks["seams"] > 0.3
    assert any(s.startswith("Seams: the 6 overlapping camera pairs") for s in best.evidence)
    assert best.score - ranked[1].score > 0.1
    assert any("Seams not compared" in s for r in ranked[1:] for s in r.evidence)
