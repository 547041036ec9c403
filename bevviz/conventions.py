"""Storage conventions, in one place: the 12 named conventions, conversion and ranking.

The public face of two layers: the conventions and raw calibration are core geometry
(:mod:`bevviz.storage`, with the stored-axes table in :mod:`bevviz.rotations` and the
raw <-> camera conversion in :mod:`bevviz.camera`); ranking them by physical evidence is
analysis (:mod:`bevviz.convention_ranking`, which compares seams). This module imports
both, so it sits with the analysis; library code below that level imports
:mod:`bevviz.storage` itself. ``bevviz.conventions.Convention`` *is*
``bevviz.storage.Convention``.

Convention:
    bevviz works in ego (x forward, y left, z up) and RDF camera frames; other conventions
    are converted once, at load time. See docs/conventions.md.
"""

from __future__ import annotations

from bevviz.camera import camera_from_raw, raw_from_camera
from bevviz.convention_ranking import ConventionScore, rank_conventions
from bevviz.rotations import STORED_FROM_RDF
from bevviz.storage import CAMERA_AXES, EXTRINSICS, NUSCENES, Convention, RawCamera

__all__ = [
    "CAMERA_AXES", "EXTRINSICS", "NUSCENES", "STORED_FROM_RDF", "Convention", "ConventionScore", "RawCamera",
    "camera_from_raw", "rank_conventions", "raw_from_camera",
]
