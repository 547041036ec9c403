"""What a check of one rig says: its settings, and the report of conventions, sanity and the doctor.

The data of a verdict (:class:`CheckReport` and its parts) and the projection sanity
check (:func:`projection_sanity`); :class:`bevviz.session.doctor.Doctor` fills them in.
``bevviz check`` prints a report and writes it as JSON (schema in docs/audit.md); the audit
turns it into rows.

Convention:
    Ego frame x forward, y left, z up; ground z = 0; offsets are body-frame (FLU) degrees,
    the stored camera turned by this much away from where the evidence puts it (as
    :attr:`bevviz.calibration.CameraFinding.offset_deg`). See docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from bevviz.calibration import BOOTSTRAP, INCONCLUSIVE, MISCALIBRATED, OK
from bevviz.camera import Rig
from bevviz.checks import field_error
from bevviz.convention_ranking import HEIGHT_RANGE, OVERLAP_RING, ground_footprints, measured_from_ground
from bevviz.projection import inside_image

__all__ = [
    "CameraCheck", "CameraSanity", "CheckReport", "CheckSettings", "ConventionCheck", "SensorFault",
    "finite", "json_safe", "projection_sanity",
]


@dataclass(frozen=True)
class CheckSettings:
    """What a check runs; part of the audit's identity (a resumed audit must use the same).

    Attributes:
        lidar: Use the sample's LIDAR_TOP sweep as the doctor's second witness when it has one.
        sweeps: LiDAR sweeps to accumulate (1 = the keyframe sweep).
        thorough: Seams without LiDAR: test each suspect by letting it rotate alone (about
            3 s per sample) instead of ranking by the seam costs only.
        estimate: Estimate the offset of a camera the seams flag (no LiDAR offset) by
            refining it alone (2-4 s per flagged camera).
        replicates: Bootstrap replicates of the LiDAR evidence per camera.
    """

    lidar: bool = True
    sweeps: int = 1
    thorough: bool = False
    estimate: bool = True
    replicates: int = BOOTSTRAP

    def __post_init__(self) -> None:
        for name in ("lidar", "thorough", "estimate"):
            if not isinstance(getattr(self, name), bool):
                raise field_error(f"settings.{name}", getattr(self, name), "must be true or false")
        for name, lo in (("sweeps", 1), ("replicates", 2)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise field_error(f"settings.{name}", v, f"must be a whole number >= {lo}")

    def to_dict(self) -> dict:
        """JSON-ready dict (the inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> CheckSettings:
        """Settings from a dict; unknown keys are a ValueError naming them."""
        if not isinstance(data, Mapping):
            raise field_error("settings", data, "must be a JSON object")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise field_error("settings", extra, f"unknown keys (known: {sorted(known)})")
        return cls(**dict(data))


@dataclass(frozen=True)
class CameraSanity:
    """Projection sanity of one camera.

    Attributes:
        height_m: Mounting height above the ground (ego z of the optical centre, less the
            ground's ego z where a LiDAR shows the ground elsewhere than z = 0).
        ground_points: Points of the ground ring (``OVERLAP_RING``) that land in the image.
        principal_point_inside: Whether (cx, cy) lies inside the image.
        neighbours: Other cameras that see some of the same ground-ring points.
        problems: Readable sentences; empty when the camera passes.
        notes: What the check cannot judge (no ground shared with another camera): said, never
            a fault.
    """

    height_m: float
    ground_points: int
    principal_point_inside: bool
    neighbours: int
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SensorFault:
    """A named fault of a named sensor that the gross-error screen found
    (:func:`bevviz.calibration.gross.screen_gross_errors`).

    Attributes:
        sensor: The camera's name, or ``"LIDAR"``.
        kind: ``"turned"``, ``"swapped"``, ``"wrong image"``, ``"position"``, ``"focal"``, ``"lidar"`` or
            ``"frozen"`` (a camera's image stayed the same while the car moved).
        message: One sentence ("CAM_FRONT is upside down: 180 deg about its optical axis").
        others: Other sensors it involves (the camera whose image was swapped in).
        frames: Frames whose edges the screen pooled to find it (a drive's), 1 for one frame.
    """

    sensor: str
    kind: str
    message: str
    others: tuple[str, ...] = ()
    frames: int = 1


@dataclass(frozen=True)
class ConventionCheck:
    """The storage conventions ranked against the one the source says it stores.

    Attributes:
        stored: Label of the convention the source declares.
        best: Label of the best-ranked convention.
        ok: The stored convention ranks first (or gives the same cameras as the first).
        ranking: (label, score) of every candidate, best first.
        evidence: The best candidate's evidence sentences.
    """

    stored: str
    best: str
    ok: bool
    ranking: tuple[tuple[str, float], ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class CameraCheck:
    """Everything the check says about one camera.

    Attributes:
        camera: Camera name.
        verdict: The doctor's ``"miscalibrated"``, ``"ok"`` or ``"inconclusive"``.
        score: The doctor's score (higher is worse; see ``CameraFinding.score``).
        quick_score: Its better seam as a multiple of the rig median.
        reason: The doctor's sentence.
        witnesses: Witness (``"seams"``, ``"lidar"``) -> its own verdict.
        offset_deg: ``{"roll", "pitch", "yaw"}`` -> degrees, or None when not estimated.
        uncertainty_deg: Its standard deviation per axis (LiDAR bootstrap), or None.
        offset_source: ``"lidar"`` (every camera, with a scan), ``"seams"`` (a flagged camera
            refined alone), or None.
        offset_checked: Seams: whether the refinement passed its held-out check; LiDAR:
            True; None without an offset.
        edge_points: LiDAR edge points behind the offset (0 without LiDAR).
        seams: Seams (overlaps with a neighbour) the camera has.
        sanity: Its :class:`CameraSanity`.
        seam_costs: Neighbour -> the cost of their seam (NGF, 0 = the same edges, 1 =
            unrelated; :class:`bevviz.calibration.SeamPair`), averaged over the frames.
        frames: Frames whose evidence went into the verdict (the LiDAR witness: the frames
            that held this camera's image; without LiDAR the seams of the one frame judged;
            0 when the doctor did not run).
    """

    camera: str
    verdict: str
    score: float
    quick_score: float
    reason: str
    witnesses: dict[str, str]
    offset_deg: dict[str, float] | None
    uncertainty_deg: dict[str, float] | None
    offset_source: str | None
    offset_checked: bool | None
    edge_points: int
    seams: int
    sanity: CameraSanity
    seam_costs: dict[str, float] = field(default_factory=dict)
    frames: int = 1

    def flagged(self, strict: bool = False) -> bool:
        """Miscalibrated, failing a sanity check, or (``strict``) inconclusive."""
        return self.verdict == MISCALIBRATED or bool(self.sanity.problems) or (strict and self.verdict != OK)


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`check_rig`.

    Attributes:
        source: Where the rig came from (``kind``, ``path`` and, for a dataset, ``version``,
            ``scene``, ``sample``, ``timestamp``).
        settings: The settings used.
        cameras: One :class:`CameraCheck` per camera, worst first (the doctor's order).
        conventions: The :class:`ConventionCheck`.
        lidar_points: Points of the LiDAR scan the doctor used (0: none).
        notes: Rig-level remarks (why no LiDAR was used, why the doctor could not run).
        runtime_s: Wall time of the check, seconds.
        seam_median: The rig's median seam cost (NaN when the doctor did not run).
        faults: The gross errors the screen named (each a :class:`SensorFault`), before the
            doctor's verdicts: every sensor they name is flagged.
    """

    source: dict
    settings: CheckSettings
    cameras: tuple[CameraCheck, ...]
    conventions: ConventionCheck
    lidar_points: int = 0
    notes: tuple[str, ...] = ()
    runtime_s: float = 0.0
    seam_median: float = float("nan")
    faults: tuple[SensorFault, ...] = ()

    def flagged(self, strict: bool = False) -> list[str]:
        """Names of the flagged sensors: those a gross error names, then the cameras flagged
        (every camera when the stored convention is not the best)."""
        named = list(dict.fromkeys(s for f in self.faults for s in (f.sensor, *f.others)))
        if not self.conventions.ok:
            return named + [c.camera for c in self.cameras if c.camera not in named]
        return named + [c.camera for c in self.cameras if c.flagged(strict) and c.camera not in named]

    def unjudged(self, strict: bool = False) -> list[str]:
        """Cameras the doctor could not judge (inconclusive) that are not flagged: what a
        "nothing flagged" does not vouch for."""
        flagged = set(self.flagged(strict))
        return [c.camera for c in self.cameras if c.verdict == INCONCLUSIVE and c.camera not in flagged]

    def exit_code(self, strict: bool = False) -> int:
        """0 when nothing is flagged, else 1 (``bevviz check``'s exit status)."""
        return 1 if self.flagged(strict) else 0

    def to_dict(self, strict: bool = False) -> dict:
        """The JSON document ``bevviz check --json`` writes (docs/audit.md); NaN and infinity,
        which JSON does not have, as null."""
        return json_safe({
            "format": "bevviz-check", "version": 1,
            "source": dict(self.source), "settings": self.settings.to_dict(),
            "flagged": self.flagged(strict), "unjudged": self.unjudged(strict), "strict": strict,
            "exit_code": self.exit_code(strict),
            "lidar_points": self.lidar_points, "notes": list(self.notes), "runtime_s": self.runtime_s,
            "seam_median": self.seam_median, "faults": [asdict(f) for f in self.faults],
            "conventions": {"stored": self.conventions.stored, "best": self.conventions.best,
                            "ok": self.conventions.ok, "evidence": list(self.conventions.evidence),
                            "ranking": [{"convention": c, "score": s} for c, s in self.conventions.ranking]},
            "cameras": [{**{k: v for k, v in asdict(c).items() if k != "sanity"},
                         "sanity": {**asdict(c.sanity), "problems": list(c.sanity.problems),
                                    "notes": list(c.sanity.notes)}}
                        for c in self.cameras],
        })


def finite(x: float) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return float(x) if x is not None and math.isfinite(x) else None


def json_safe(value):
    """``value`` (dicts, lists, tuples, scalars) with every float as a Python float and every
    non-finite one as None: strict JSON."""
    if isinstance(value, (float, np.floating)):
        return finite(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------


#: A camera within this height (metres) of the ego frame's z = 0 sits at a sensor's origin, not
#: on a road: without a LiDAR that shows the road, its height cannot be judged (a note).
SENSOR_ORIGIN_M = 0.5


def projection_sanity(rig: Rig, ground_z: float = 0.0, ground_seen: bool = True) -> dict[str, CameraSanity]:
    """Per camera: does its projection make physical sense?

    Ground points on a ring around the rig centre (the convention ranking's
    :func:`~bevviz.convention_ranking.ground_footprints`: ``OVERLAP_RING``, 1 m by 1 degree)
    are projected into every camera. A camera fails when it sees
    none of them, when its principal point lies outside its image, when it sits outside the
    plausible mounting heights (``HEIGHT_RANGE``). A camera that shares no ground with any
    other (a front + rear rig) cannot be judged by the seams: a note, not a problem.

    Args:
        rig: The rig (N_cam cameras).
        ground_z: Ego z of the ground (metres): 0 in bevviz's convention; where a LiDAR
            shows the rig is stored in a sensor's frame, the height it sees the ground at
            (:func:`bevviz.lidar.ground_height`), so that heights and footprints are
            measured from the road.
        ground_seen: Whether a LiDAR showed that ground. Without one, a camera within
            ``SENSOR_ORIGIN_M`` of z = 0 (a rig stored in a sensor's frame, whose road lies
            unseen below) gets a note, not a problem: its height cannot be judged.

    Returns:
        Camera name -> :class:`CameraSanity` (``height_m`` above ``ground_z``), in rig order.

    Convention:
        Ground: the plane z = ``ground_z`` of the ego frame; pixel bounds as
        :func:`bevviz.projection.project_points` (``bounds="pixel"``).
    """
    rig = measured_from_ground(rig, ground_z)
    valid = ground_footprints(rig).reshape(len(rig), -1)  # (N_cam, M)
    out = {}
    lo, hi = HEIGHT_RANGE
    for i, cam in enumerate(rig):
        problems = []
        n = int(valid[i].sum())
        if n == 0:
            problems.append(f"sees no ground {OVERLAP_RING[0]:g}-{OVERLAP_RING[1]:g} m around the rig")
        cx, cy = float(cam.K[0, 2]), float(cam.K[1, 2])
        inside = bool(inside_image(cx, cy, cam.width, cam.height))
        if not inside:
            problems.append(f"principal point ({cx:.1f}, {cy:.1f}) lies outside its {cam.width} x {cam.height} image")
        z = float(cam.position[2])
        notes = []
        if not lo <= z <= hi:
            if not ground_seen and abs(z) < SENSOR_ORIGIN_M:
                notes.append(f"sits {z:+.2f} m from z = 0, at a sensor's origin: the rig looks stored in a sensor's "
                             "frame and no LiDAR shows where the road is, so its height cannot be judged")
            else:
                problems.append(f"mounted {z:.2f} m above the ground (plausible: {lo:g}-{hi:g} m)")
        others = [j for j in range(len(rig)) if j != i and (valid[i] & valid[j]).any()]
        if len(rig) > 1 and n > 0 and not others:
            notes.append("shares no ground with any other camera: its seams cannot judge it")
        out[cam.name] = CameraSanity(z, n, inside, len(others), tuple(problems), tuple(notes))
    return out
