"""What the Calibration Doctor hands back for a refinement: a camera refined and the seams drawn.

:class:`SeamView` is one rig's seams on one frame with what a view draws of them;
:class:`Refinement` is one camera refined (by LiDAR or by its seams) with the rig before and
after; :func:`refinement_overlays` draws a LiDAR correction on every frame it pooled.
:class:`bevviz.session.doctor.Doctor` makes them; they are importable from
:mod:`bevviz.session.doctor` as well.

Convention:
    Rotations between cameras are body-frame (FLU) degrees. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bevviz.calibration import (
    CameraEvidence,
    EdgeOverlay,
    RefineHistory,
    SeamAnalysis,
    as_lidar_frames,
    camera_delta,
    deltas_json,
    edge_overlays,
)
from bevviz.camera import Rig

__all__ = ["FrameOverlay", "Refinement", "SeamView", "refinement_overlays"]


@dataclass(frozen=True)
class SeamView:
    """The seams of one rig on one frame, with what a view draws of them.

    Attributes:
        analysis: The :class:`bevviz.calibration.SeamAnalysis` (with the ground-truth costs
            when the scene has a known ground texture).
        mosaic: BEV mosaic, RGB uint8 (H_bev, W_bev, 3).
        error: Seam error map (H_bev, W_bev), NaN off the seams.
        table: One row per seam (:meth:`SeamAnalysis.table`).
    """

    analysis: SeamAnalysis
    mosaic: np.ndarray
    error: np.ndarray
    table: list[dict]

    @classmethod
    def of(cls, analysis: SeamAnalysis) -> SeamView:
        """The view of ``analysis``."""
        return cls(analysis, analysis.mosaic(), analysis.seam_error_map(), analysis.table())


@dataclass(frozen=True)
class FrameOverlay:
    """A correction on one frame: the camera's image there and the LiDAR's edges in it.

    Attributes:
        image: The camera's image in that frame, RGB uint8 (H, W, 3).
        edges: :class:`bevviz.calibration.EdgeOverlay`: the frame's index among the frames
            pooled (0: the scene's own), its edge pixels at the pose before and after the
            applied or proposed correction, (M, 2) each.
    """

    image: np.ndarray
    edges: EdgeOverlay


@dataclass(frozen=True)
class Refinement:
    """One camera refined.

    Attributes:
        camera: The camera refined.
        rig_in: The rig it was refined in.
        rig: The rig after (``rig_in`` itself when ``history.accepted`` is False).
        history: The :class:`bevviz.calibration.RefineHistory`.
        from_loaded_deg: Rotation (degrees) between the refined camera and the camera as
            the scene was loaded (before any perturbation).
        after: The seams of the refined rig (seam refinements), else None.
        overlays: A LiDAR refinement's applied or proposed correction drawn on every frame it
            pooled (:func:`refinement_overlays`); empty otherwise.
    """

    camera: str
    rig_in: Rig
    rig: Rig
    history: RefineHistory
    from_loaded_deg: float
    after: SeamView | None = None
    overlays: tuple[FrameOverlay, ...] = ()

    def deltas_json(self) -> str:
        """The correction of every camera as JSON (:func:`bevviz.calibration.deltas_json`)."""
        return deltas_json(self.rig_in, self.rig)

    def to_dict(self) -> dict:
        """JSON-ready: ``camera``, ``applied``, ``proposed``, ``check`` (why, in words) and
        ``correction_deg`` (body-frame roll, pitch, yaw from the camera as given to the
        applied or proposed one; null when neither)."""
        after = self.rig if self.history.accepted else self.proposed_rig
        delta = None if after is None else camera_delta(self.rig_in[self.camera], after[self.camera])
        return {"camera": self.camera, "applied": bool(self.history.accepted),
                "proposed": self.history.proposal is not None, "check": self.history.check,
                "correction_deg": None if delta is None else {"roll": delta.roll_deg, "pitch": delta.pitch_deg,
                                                              "yaw": delta.yaw_deg}}

    @property
    def proposed_rig(self) -> Rig | None:
        """``rig_in`` with the correction the refinement proposed but did not apply
        (``history.proposal``), else None."""
        proposal = self.history.proposal
        return None if proposal is None else self.rig_in.replace(proposal)


def refinement_overlays(res: Refinement, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]],
                        lidar: object, ignore: Mapping[str, np.ndarray] | None = None,
                        evidence: CameraEvidence | None = None) -> list[FrameOverlay]:
    """A LiDAR refinement drawn on every frame of its evidence (:func:`bevviz.calibration.edge_overlays`).

    Args:
        res: The refinement; its applied rig, else its proposal, is the pose after.
        images: The frames' images (one frame, or a list), as the refinement was given them.
        lidar: Their scans (one, or a list of one per frame).
        ignore: Optional camera -> (H, W) mask of pixels that do not show the world.
        evidence: The camera's evidence from these frames: only the frames it pooled are
            drawn (:meth:`~bevviz.calibration.lidar.evidence.CameraEvidence.used`: not a frame
            set aside, a repeated view or one where the camera's image froze); every frame without.

    Returns:
        One :class:`FrameOverlay` per frame drawn, in order, each with its index among the
        frames given; ``[]`` when the refinement moved nothing (refused, no proposal).

    Convention:
        Camera RDF; pixels at centres at the calibrated size (docs/conventions.md).
    """
    after = res.rig if res.history.accepted else res.proposed_rig
    if after is None:
        return []
    frames = as_lidar_frames(images, lidar, ignore)
    used = list(range(len(frames))) if evidence is None else evidence.used(len(frames))
    overlays = edge_overlays(res.rig_in[res.camera], after[res.camera], [frames[k] for k in used])
    return [FrameOverlay(frames[used[o.frame]].images[res.camera], dataclasses.replace(o, frame=used[o.frame]))
            for o in overlays]
