"""A LiDAR correction drawn on the frames its evidence pooled (bevviz.session.refinement)."""

from __future__ import annotations

import dataclasses

from bevviz.calibration import RefineHistory, lidar_evidence, perturb_camera
from bevviz.session.refinement import Refinement, refinement_overlays


def test_the_overlays_show_only_the_frames_the_evidence_pooled(tri_drive):
    """CAMERA_05 frozen in frames 2 and 3: its evidence rests on frame 1, and so do the
    correction's overlays; without evidence every frame given is drawn."""
    rig, cam = tri_drive[0].rig, "CAMERA_05"
    images = [dict(f.images) for f in tri_drive]
    for imgs in images[1:]:
        imgs[cam] = tri_drive[0].images[cam]
    scans = [f.scan for f in tri_drive]
    ev = lidar_evidence(rig, images, scans, cameras=[cam], replicates=0, second_look=False)[cam]
    assert ev.used(3) == [0]
    history = dataclasses.replace(RefineHistory(cam), accepted=True)
    res = Refinement(cam, rig, rig.replace(perturb_camera(rig[cam], yaw_deg=0.5)), history, 0.5)
    assert [o.edges.frame for o in refinement_overlays(res, images, scans)] == [0, 1, 2]
    (only,) = refinement_overlays(res, images, scans, evidence=ev)
    assert only.edges.frame == 0 and only.image is images[0][cam] and len(only.edges.uv_before)
