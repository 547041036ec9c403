"""What a diagnosis says: its settings (:class:`DiagnoseSettings`), one finding per camera
(:class:`CameraFinding`: the verdict, its reason and evidence) and the list of them with the
rig-level context (:class:`Diagnosis`), worst first (:func:`order_findings`).

:mod:`bevviz.calibration.diagnose` asks the questions; this module holds its answers' shapes, so
that a reader (the session, the CLI report, the app) finds them in one place.

Convention:
    LiDAR offsets are body-frame (FLU) ``(roll, pitch, yaw)`` degrees (a finding's
    ``offset_deg``); seam costs and ratios are unitless. See docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.lidar.alignment import BOOTSTRAP
from bevviz.calibration.lidar.consensus import RigConsensus
from bevviz.calibration.lidar.evidence import CameraEvidence
from bevviz.calibration.seams.analysis import (
    MIN_SEAM_CELLS,
    SEAM_RING,
    SeamAnalysis,
    SeamPair,
    analyze_seams,
    seam_grid,
)
from bevviz.calibration.seams.ground_truth import GroundTruth
from bevviz.calibration.seams.pyramid import Sampler, as_pyramids
from bevviz.calibration.seams.refine import Level
from bevviz.calibration.verdicts import INCONCLUSIVE, RULE, VERDICTS, Doubt, VerdictRule
from bevviz.camera import Rig
from bevviz.checks import field_error

__all__ = ["DEFAULTS", "DIAGNOSE_LEVELS", "CameraFinding", "DiagnoseSettings", "Diagnosis", "Images", "order_findings"]

#: Images of one frame (camera name -> uint8 RGB (H, W, 3)), or a list of frames of one rig.
Images = Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]]

#: Quick refinement used by :func:`~bevviz.calibration.diagnose.rotate_suspects` to test each suspect.
DIAGNOSE_LEVELS = (
    Level(stride=8, blur=3.0, cell=0.4, steps=25, lr_deg=0.3),
    Level(stride=4, blur=2.0, cell=0.3, steps=15, lr_deg=0.1, cost="ngf"),
)


@dataclass(frozen=True)
class DiagnoseSettings:
    """What a diagnosis runs, in one frozen place (defaults: the shipped doctor).

    Attributes:
        thorough: Without LiDAR, :func:`~bevviz.calibration.diagnose.diagnose` tests the suspects by letting each rotate
            alone (:func:`~bevviz.calibration.diagnose.rotate_suspects`) rather than ranking the seam costs only
            (:func:`~bevviz.calibration.diagnose.rank_seams`: fast, for live views; fooled by seams that objects hide).
            None: True without LiDAR (with LiDAR the LiDAR is the stronger witness).
        suspects: How many cameras (highest quick score first) the thorough test tries;
            None = all.
        levels: Schedule of the thorough test's quick refinement.
        replicates: Bootstrap replicates of the LiDAR evidence per camera.
        rule: The LiDAR verdict's constants (:class:`~bevviz.calibration.verdicts.VerdictRule`).
        sampler: ``grid_sample``-compatible sampler; None: the two-stage gather-scatter sampler.
        stride, blur, ring, min_cells: The seam analysis (:func:`~bevviz.calibration.seams.analysis.analyze_seams`).
    """

    thorough: bool | None = None
    suspects: int | None = 3
    levels: Sequence[Level] = DIAGNOSE_LEVELS
    replicates: int = BOOTSTRAP
    rule: VerdictRule = RULE
    sampler: Sampler | None = None
    stride: int = 2
    blur: float = 1.0
    ring: tuple[float, float] = SEAM_RING
    min_cells: int = MIN_SEAM_CELLS

    def analyses(self, rig: Rig, images: Images, grid: BEVGrid | None,
                 ground_truth: GroundTruth | np.ndarray | None = None) -> list[SeamAnalysis]:
        """The seam analysis of every frame of ``images`` (``ground_truth`` on the first)."""
        grid = seam_grid() if grid is None else grid
        return [analyze_seams(rig, f, grid, stride=self.stride, blur=self.blur, ring=self.ring,
                              min_cells=self.min_cells, ground_truth=ground_truth if k == 0 else None,
                              sampler=self.sampler) for k, f in enumerate(as_pyramids(images))]


#: The shipped settings.
DEFAULTS = DiagnoseSettings()


@dataclass
class CameraFinding:
    """How suspicious one camera's calibration is, and the verdict.

    Attributes:
        camera: Camera name.
        score: Higher is worse. With LiDAR: the angle (degrees,
            :func:`~bevviz.rotations.offset_angle_deg`) of the camera's own rotation error (its
            residual after the rig consensus). Without:
            thorough diagnosis (default): by how much the seam loss of the camera's seams
            drops when the camera alone is allowed to rotate (a quick coarse-to-fine
            refinement); a misaligned camera fixes *both* of its seams, a good neighbour can
            only trade one seam against the other. Quick diagnosis: its better seam as a
            multiple of the rig's median seam cost. Ground-truth mode: its cost against the
            known texture (whole footprint) as a multiple of the rig's median.
        reason: A readable sentence: the verdict and the evidence for it.
        verdict: ``"miscalibrated"``, ``"ok"`` or ``"inconclusive"``
            (:mod:`bevviz.calibration.verdicts`).
        doubt: Why it is not surer (a :class:`~bevviz.calibration.verdicts.doubts.Doubt`;
            set for every "inconclusive"), None when the verdict is sure.
        seams: The camera's seams (costs averaged over the frames).
        quick_score: The quick score (second-worst seam / rig median), always filled.
        correction_deg: Rotation (degrees) the quick refinement applied, or None.
        gt_cost: Cost against the ground truth (ground-truth mode only).
        offset_deg: LiDAR mode: the camera's own rotation error, axis (``"roll"``,
            ``"pitch"``, ``"yaw"``) -> degrees (body frame; the stored camera is turned by
            this much away from where the evidence puts it); None without LiDAR.
        uncertainty_deg: Its bootstrap standard deviation per axis (degrees), or None.
        edge_points: LiDAR edge points supporting the offset (0 without LiDAR).
        witnesses: Witness name (``"lidar"``, ``"seams"``) -> its own verdict.
        lidar: The full LiDAR evidence (profiles, projected edge points) of the look the
            verdict rests on (the second look where it decided), or None.
        evidence: The camera's evidence as made (the first look, carrying its second look):
            what a later diagnosis or refinement of the same images and scan reuses, or None.
    """

    camera: str
    score: float
    reason: str
    seams: list[SeamPair] = field(default_factory=list)
    quick_score: float = 0.0
    correction_deg: float | None = None
    gt_cost: float | None = None
    verdict: str = INCONCLUSIVE
    doubt: Doubt | None = None
    offset_deg: dict[str, float] | None = None
    uncertainty_deg: dict[str, float] | None = None
    edge_points: int = 0
    witnesses: dict[str, str] = field(default_factory=dict)
    lidar: CameraEvidence | None = None
    evidence: CameraEvidence | None = None

    @property
    def seam_ratios(self) -> dict[str, float]:
        """Neighbour name -> that seam's cost as a multiple of the rig median."""
        return {(p.b if p.a == self.camera else p.a): p.ratio for p in self.seams}


class Diagnosis(list):
    """The findings of :func:`~bevviz.calibration.diagnose.diagnose` (a list, worst first) and the rig-level context.

    Attributes:
        consensus: The rig consensus of the LiDAR offsets (None without LiDAR).
        seam_median: The rig's median seam cost.
        timing: With LiDAR, a sentence when the cameras agree that the LiDAR is displaced
            along the car's axis (:func:`~bevviz.calibration.lidar.sync.rig_timing`: a timing
            error); "" otherwise.
        lidar_doubt: With LiDAR, a sentence when (almost) no camera lines up with the LiDAR
            where it is stored, so the LiDAR itself looks off
            (:func:`~bevviz.calibration.verdicts.rule.lidar_doubt`); "" otherwise.
    """

    def __init__(self, findings=(), consensus: RigConsensus | None = None, seam_median: float = float("nan"),
                 timing: str = "", lidar_doubt: str = ""):
        super().__init__(findings)
        self.consensus = consensus
        self.seam_median = seam_median
        self.timing = timing
        self.lidar_doubt = lidar_doubt

    def by_camera(self, name: str) -> CameraFinding:
        """The finding of camera ``name``.

        Raises:
            InputError: naming ``camera`` when no finding is about it.
        """
        for f in self:
            if f.camera == name:
                return f
        raise field_error("camera", name, f"no finding about it; cameras: {[f.camera for f in self]}")


def order_findings(findings: Sequence[CameraFinding]) -> list[CameraFinding]:
    """Worst first: miscalibrated, then inconclusive, then ok; by score within each."""
    return sorted(findings, key=lambda f: (VERDICTS.index(f.verdict), -f.score))
