"""What the Calibration Doctor hands back for a refinement: a camera refined and the seams drawn.

:class:`SeamView` is one rig's seams on one frame with what a view draws of them;
:class:`Refinement` is one camera refined (by LiDAR or by its seams) with the rig before and
after. :class:`bevviz.session.doctor.Doctor` makes both; they are importable from
:mod:`bevviz.session.doctor` as well.

Convention:
    Rotations between cameras are body-frame (FLU) degrees. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bevviz.calibration import RefineHistory, SeamAnalysis, deltas_json
from bevviz.camera import Rig

__all__ = ["Refinement", "SeamView"]


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
    """

    camera: str
    rig_in: Rig
    rig: Rig
    history: RefineHistory
    from_loaded_deg: float
    after: SeamView | None = None

    def deltas_json(self) -> str:
        """The correction of every camera as JSON (:func:`bevviz.calibration.deltas_json`)."""
        return deltas_json(self.rig_in, self.rig)

    @property
    def proposed_rig(self) -> Rig | None:
        """``rig_in`` with the correction the refinement proposed but did not apply
        (``history.proposal``), else None."""
        proposal = self.history.proposal
        return None if proposal is None else self.rig_in.replace(proposal)
