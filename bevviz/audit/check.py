"""The check of one rig, and of one dataset sample as the audit's rows.

:func:`check_rig` runs the three checks bevviz knows on one rig with its images: the
storage conventions ranked (:func:`bevviz.conventions.rank_conventions`), a projection
sanity check per camera (:func:`projection_sanity`), and the Calibration Doctor
(:func:`bevviz.calibration.diagnose`, with the LiDAR witness when a scan is given). For a
camera the seams flag without LiDAR, its offset is estimated by refining it alone
(:func:`bevviz.calibration.refine_camera`). The result is a :class:`CheckReport`, which
``bevviz check`` prints and writes as JSON (schema in docs/audit.md).

:func:`check_sample` is the audit's unit of work: a pure function of (dataroot, version,
sample token, settings) that returns one row per camera (:data:`bevviz.audit.store.SCHEMA`);
a sample that cannot be checked gives one row with its error instead of raising, so a run
over a whole dataset goes on. The devkit index is opened once per process and dataroot
(:func:`dataset`).

Convention:
    Ego frame x forward, y left, z up; ground z = 0; offsets are body-frame (FLU) degrees,
    the stored camera turned by this much away from where the evidence puts it (as
    :attr:`bevviz.calibration.CameraFinding.offset_deg`). See docs/conventions.md.
"""

from __future__ import annotations

import functools
import math
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from bevviz.calibration import (
    AXES,
    BOOTSTRAP,
    INCONCLUSIVE,
    MISCALIBRATED,
    OK,
    camera_delta,
    diagnose,
    refine_camera,
)
from bevviz.camera import Rig
from bevviz.convention_ranking import HEIGHT_RANGE, OVERLAP_RING, ground_footprints
from bevviz.conventions import NUSCENES, Convention, RawCamera, rank_conventions
from bevviz.io.nuscenes import LIDAR_CHANNEL, has_lidar, load_lidar_from, load_sample_from, open_dataset
from bevviz.io.rig_json import load_rig_file, load_rig_images
from bevviz.lidar import LidarScan
from bevviz.shapes import field_error

__all__ = [
    "EMBEDDED", "ERROR", "CameraCheck", "CameraSanity", "CheckReport", "CheckSettings", "ConventionCheck",
    "LoadedSource", "ROW_COLUMNS", "check_rig", "check_sample", "dataset", "error_row", "load_source",
    "projection_sanity", "report_rows",
]

#: The verdict of a sample that could not be checked (its row carries the error).
ERROR = "error"
SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
#: Names of the embedded samples ``bevviz check`` accepts as SOURCE.
EMBEDDED = {
    "rig": SAMPLE_DATA / "rig.json",
    "nuscenes": SAMPLE_DATA / "nuscenes",
    "real-nuscenes": SAMPLE_DATA / "real_nuscenes",
}


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
        height_m: Mounting height above the ground (ego z of the optical centre).
        ground_points: Points of the ground ring (``OVERLAP_RING``) that land in the image.
        principal_point_inside: Whether (cx, cy) lies inside the image.
        neighbours: Other cameras that see some of the same ground-ring points.
        problems: Readable sentences; empty when the camera passes.
    """

    height_m: float
    ground_points: int
    principal_point_inside: bool
    neighbours: int
    problems: tuple[str, ...] = ()


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
    """

    source: dict
    settings: CheckSettings
    cameras: tuple[CameraCheck, ...]
    conventions: ConventionCheck
    lidar_points: int = 0
    notes: tuple[str, ...] = ()
    runtime_s: float = 0.0

    def flagged(self, strict: bool = False) -> list[str]:
        """Names of the flagged cameras (every camera when the stored convention is not the best)."""
        if not self.conventions.ok:
            return [c.camera for c in self.cameras]
        return [c.camera for c in self.cameras if c.flagged(strict)]

    def exit_code(self, strict: bool = False) -> int:
        """0 when nothing is flagged, else 1 (``bevviz check``'s exit status)."""
        return 1 if self.flagged(strict) else 0

    def to_dict(self, strict: bool = False) -> dict:
        """The JSON document ``bevviz check --json`` writes (docs/audit.md)."""
        return {
            "format": "bevviz-check", "version": 1,
            "source": dict(self.source), "settings": self.settings.to_dict(),
            "flagged": self.flagged(strict), "strict": strict, "exit_code": self.exit_code(strict),
            "lidar_points": self.lidar_points, "notes": list(self.notes), "runtime_s": self.runtime_s,
            "conventions": {"stored": self.conventions.stored, "best": self.conventions.best,
                            "ok": self.conventions.ok, "evidence": list(self.conventions.evidence),
                            "ranking": [{"convention": c, "score": _finite(s)} for c, s in self.conventions.ranking]},
            "cameras": [{**{k: v for k, v in asdict(c).items() if k != "sanity"},
                         "score": _finite(c.score), "quick_score": _finite(c.quick_score),
                         "sanity": {**asdict(c.sanity), "problems": list(c.sanity.problems)}}
                        for c in self.cameras],
        }


def _finite(x: float) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return float(x) if x is not None and math.isfinite(x) else None


# --------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------


def projection_sanity(rig: Rig) -> dict[str, CameraSanity]:
    """Per camera: does its projection make physical sense?

    Ground points on a ring around the rig centre (the convention ranking's
    :func:`~bevviz.convention_ranking.ground_footprints`: ``OVERLAP_RING``, 1 m by 1 degree)
    are projected into every camera. A camera fails when it sees
    none of them, when its principal point lies outside its image, when it sits outside the
    plausible mounting heights (``HEIGHT_RANGE``), or (rigs of several cameras) when no
    other camera shares any of its ground.

    Args:
        rig: The rig (N_cam cameras).

    Returns:
        Camera name -> :class:`CameraSanity`, in rig order.

    Convention:
        Ground z = 0 of the ego frame; pixel bounds as :func:`bevviz.projection.project_points`
        (``bounds="pixel"``).
    """
    valid = ground_footprints(rig).reshape(len(rig), -1)  # (N_cam, M)
    out = {}
    lo, hi = HEIGHT_RANGE
    for i, cam in enumerate(rig):
        problems = []
        n = int(valid[i].sum())
        if n == 0:
            problems.append(f"sees no ground {OVERLAP_RING[0]:g}-{OVERLAP_RING[1]:g} m around the rig")
        cx, cy = float(cam.K[0, 2]), float(cam.K[1, 2])
        inside = -0.5 <= cx <= cam.width - 0.5 and -0.5 <= cy <= cam.height - 0.5
        if not inside:
            problems.append(f"principal point ({cx:.1f}, {cy:.1f}) lies outside its {cam.width} x {cam.height} image")
        z = float(cam.position[2])
        if not lo <= z <= hi:
            problems.append(f"mounted {z:.2f} m above the ground (plausible: {lo:g}-{hi:g} m)")
        others = [j for j in range(len(rig)) if j != i and (valid[i] & valid[j]).any()]
        if len(rig) > 1 and n > 0 and not others:
            problems.append("shares no ground with any other camera")
        out[cam.name] = CameraSanity(z, n, inside, len(others), tuple(problems))
    return out


def _conventions(raw: Sequence[RawCamera], stored: Convention, images: Mapping | None) -> ConventionCheck:
    ranked = rank_conventions(raw, images or None)
    best = ranked[0]
    ok = best.convention == stored or stored.label in best.ties
    return ConventionCheck(stored.label, best.label, ok, tuple((r.label, float(r.score)) for r in ranked),
                           tuple(best.evidence))


def _seam_offset(rig: Rig, images: Mapping[str, np.ndarray], camera: str) -> tuple[dict[str, float] | None, bool]:
    """Offset of ``camera`` by refining it alone on its seams: (offset, passed its check)."""
    try:
        refined, hist = refine_camera(rig, images, None, camera)
    except ValueError:  # no seam to refine against
        return None, False
    d = camera_delta(refined[camera], rig[camera])  # evidence -> stored
    return {"roll": d.roll_deg, "pitch": d.pitch_deg, "yaw": d.yaw_deg}, bool(hist.accepted)


def check_rig(rig: Rig, images: Mapping[str, np.ndarray], *, raw_cameras: Sequence[RawCamera] | None = None,
              convention: Convention = NUSCENES, lidar: LidarScan | np.ndarray | None = None,
              settings: CheckSettings | None = None, source: Mapping | None = None,
              notes: Sequence[str] = ()) -> CheckReport:
    """Check one rig: conventions, projection sanity, and the doctor.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> RGB uint8 image (H, W, 3). The doctor runs only when every
            camera has one (else every camera is inconclusive and a note says why).
        raw_cameras: The calibration as stored; default ``rig.to_raw(convention)``.
        convention: The convention the source declares it stores.
        lidar: Optional LiDAR scan (a :class:`bevviz.lidar.LidarScan` or points (N, 3|4)
            in the ego frame); used when ``settings.lidar``.
        settings: :class:`CheckSettings`; default ``CheckSettings()``.
        source: Where the rig came from (copied into the report).
        notes: Rig-level remarks to carry (e.g. why no LiDAR).

    Returns:
        :class:`CheckReport`.

    Convention:
        See the module docstring.
    """
    t0 = time.perf_counter()
    settings = CheckSettings() if settings is None else settings
    notes = list(notes)
    raw = list(raw_cameras) if raw_cameras is not None else rig.to_raw(convention)
    have_images = all(n in images for n in rig.names)
    conv = _conventions(raw, convention, images if have_images else None)
    sanity = projection_sanity(rig)
    scan = lidar if settings.lidar else None
    n_points = 0 if scan is None else int(len(scan.points if isinstance(scan, LidarScan) else scan))
    cams: list[CameraCheck] = []
    if not have_images:
        missing = [n for n in rig.names if n not in images]
        notes.append(f"the doctor needs every camera's image; missing: {', '.join(missing)}")
        for name in rig.names:
            cams.append(CameraCheck(name, INCONCLUSIVE, float("nan"), float("nan"), f"{name}: no doctor without images",
                                    {}, None, None, None, None, 0, 0, sanity[name]))
    else:
        found = diagnose(rig, images, lidar=scan, thorough=settings.thorough, replicates=settings.replicates)
        for f in found:
            offset, unc, src, checked = f.offset_deg, f.uncertainty_deg, None, None
            if offset is not None:
                src, checked = "lidar", True
            elif f.verdict == MISCALIBRATED and settings.estimate:
                offset, checked = _seam_offset(rig, images, f.camera)
                src = "seams" if offset is not None else None
            cams.append(CameraCheck(
                f.camera, f.verdict, float(f.score), float(f.quick_score), f.reason, dict(f.witnesses),
                None if offset is None else {a: float(offset[a]) for a in AXES},
                None if unc is None else {a: float(unc[a]) for a in AXES},
                src, checked, int(f.edge_points), len(f.seams), sanity[f.camera]))
    return CheckReport(dict(source or {}), settings, tuple(cams), conv, n_points, tuple(notes),
                       time.perf_counter() - t0)


# --------------------------------------------------------------------------------------
# Sources for `bevviz check`
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoadedSource:
    """A rig to check, with what :func:`check_rig` needs.

    Attributes:
        rig: The rig.
        images: Camera name -> RGB uint8 (H, W, 3).
        raw_cameras: The calibration as stored.
        convention: The convention the source declares.
        lidar: The LiDAR scan, or None.
        source: Where it came from (the report's ``source``).
        notes: Remarks (why there is no LiDAR).
    """

    rig: Rig
    images: Mapping[str, np.ndarray] = field(repr=False)
    raw_cameras: Sequence[RawCamera] = field(repr=False)
    convention: Convention = NUSCENES
    lidar: LidarScan | None = field(default=None, repr=False)
    source: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _is_dataroot(path: Path) -> bool:
    return path.is_dir() and any((p / "sample.json").is_file() for p in path.iterdir() if p.is_dir())


def load_source(source: str, *, images: str | os.PathLike | None = None, version: str = "v1.0-mini",
                sample: str | None = None, lidar: bool = True, sweeps: int = 1) -> LoadedSource:
    """Load what ``bevviz check SOURCE`` names.

    Args:
        source: A JSON rig file, a nuScenes dataroot, or the name of an embedded sample
            (:data:`EMBEDDED`: ``rig``, ``nuscenes``, ``real-nuscenes``).
        images: JSON rig: folder of its images (default: the JSON file's folder).
        version: nuScenes: the table folder.
        sample: nuScenes: the sample token (default: the first sample of the first scene).
        lidar: nuScenes: read the sample's LIDAR_TOP sweep when it has one.
        sweeps: LiDAR sweeps to accumulate.

    Returns:
        :class:`LoadedSource`.

    Raises:
        ValueError: naming ``SOURCE``, ``--images``, ``--sample``, ``--version`` or the
            data's own field and the value.
    """
    name = str(source)
    path = EMBEDDED.get(name, Path(name))
    kind = "embedded" if name in EMBEDDED else None
    if name in EMBEDDED and not path.exists():
        raise field_error("SOURCE", name, f"the embedded sample {path} is missing from this installation")
    if path.is_file():
        if sample is not None:
            raise field_error("--sample", sample, "applies to a nuScenes dataroot only")
        if images is not None and not Path(images).is_dir():
            raise field_error("--images", str(images), "is not an existing folder")
        rf = load_rig_file(path)
        imgs = load_rig_images(rf, images if images is not None else path.parent)
        src = {"kind": kind or "rig-json", "path": str(path), "name": name}
        return LoadedSource(rf.rig, imgs, rf.raw_cameras, rf.convention, None, src)
    if images is not None:
        raise field_error("--images", str(images), "applies to a JSON rig only")
    if _is_dataroot(path):
        nusc = dataset(str(path), version)
        if sample is None:
            if not nusc.scene:
                raise field_error("SOURCE", name, "the dataset has no scenes")
            sample = nusc.scene[0]["first_sample_token"]
        meta = _sample_meta(nusc, sample, "--sample")
        rig, imgs = load_sample_from(nusc, sample)
        scan, notes = _lidar(nusc, sample, lidar, sweeps)
        src = {"kind": kind or "nuscenes", "path": str(path), "name": name, "version": version, **meta}
        return LoadedSource(rig, imgs, rig.to_raw(NUSCENES), NUSCENES, scan, src, notes)
    raise field_error("SOURCE", name, "is neither a JSON rig file, a nuScenes dataroot (a folder holding "
                      f"<version>/sample.json) nor an embedded sample ({', '.join(EMBEDDED)})")


# --------------------------------------------------------------------------------------
# One dataset sample: the audit's unit of work
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def dataset(dataroot: str, version: str):
    """The devkit handle of ``dataroot``/``version``, opened once per process (an LRU of 4).

    Raises:
        ValueError: as :func:`bevviz.io.nuscenes.open_dataset`.
    """
    return open_dataset(dataroot, version)


def _sample_meta(nusc, token: str, field_name: str = "sample") -> dict:
    try:
        s = nusc.get("sample", token)
    except (KeyError, TypeError):
        raise field_error(field_name, token, "no such sample in the dataset") from None
    scene = nusc.get("scene", s["scene_token"])
    index, prev = 0, s["prev"]
    while prev:
        index += 1
        prev = nusc.get("sample", prev)["prev"]
    return {"scene": scene["name"], "scene_token": scene["token"], "sample": token, "sample_index": index,
            "timestamp": int(s["timestamp"])}


def _lidar(nusc, token: str, use: bool, sweeps: int) -> tuple[LidarScan | None, tuple[str, ...]]:
    if not use:
        return None, ("LiDAR witness off (settings)",)
    if not has_lidar(nusc, token):
        return None, (f"the sample has no {LIDAR_CHANNEL}: seams only",)
    return load_lidar_from(nusc, token, sweeps), ()


def report_rows(report: CheckReport) -> list[dict]:
    """The audit's rows of one checked sample: one per camera, in rig order of the report.

    Args:
        report: A :class:`CheckReport` whose ``source`` holds the sample's ``scene``,
            ``scene_token``, ``sample``, ``sample_index`` and ``timestamp``.

    Returns:
        Dicts with the columns of :data:`bevviz.audit.store.SCHEMA`.
    """
    src = report.source
    rows = []
    for c in report.cameras:
        off, unc = c.offset_deg or {}, c.uncertainty_deg or {}
        rows.append({
            **_meta_columns(src), "camera": c.camera, "verdict": c.verdict,
            "score": _finite(c.score), "quick_score": _finite(c.quick_score),
            **{f"{a}_deg": off.get(a) for a in AXES}, **{f"{a}_unc_deg": unc.get(a) for a in AXES},
            "offset_source": c.offset_source, "offset_checked": c.offset_checked,
            "seam_verdict": c.witnesses.get("seams"), "lidar_verdict": c.witnesses.get("lidar"),
            "edge_points": c.edge_points, "seams": c.seams, "lidar_points": report.lidar_points,
            "convention_ok": report.conventions.ok, "sanity": "; ".join(c.sanity.problems),
            "reason": c.reason, "runtime_s": report.runtime_s, "error": None,
        })
    return rows


def _meta_columns(src: Mapping) -> dict:
    return {"scene": src.get("scene"), "scene_token": src.get("scene_token"), "sample": src.get("sample"),
            "sample_index": src.get("sample_index"), "timestamp": src.get("timestamp")}


def error_row(token: str, error: str, runtime_s: float, meta: Mapping | None = None) -> dict:
    """The one row of a sample that could not be checked (verdict ``"error"``).

    Args:
        token: The sample token.
        error: What went wrong, one line.
        runtime_s: Time spent on it, seconds.
        meta: Scene, sample index and timestamp when they were found.
    """
    row = {k: None for k in ROW_COLUMNS}
    row.update(_meta_columns({**(meta or {}), "sample": token}))
    row.update({"verdict": ERROR, "error": error, "runtime_s": float(runtime_s)})
    return row


def check_sample(dataroot: str, version: str, token: str, settings: CheckSettings, *, nusc=None) -> list[dict]:
    """Check one sample of a nuScenes-format dataset: the audit's rows for it.

    A pure function of its four arguments (besides ``runtime_s``): the same sample checked
    anywhere gives the same rows. Never raises for a bad sample: anything that goes wrong
    becomes one row with verdict ``"error"`` and the error's type and message.

    Args:
        dataroot: Dataset root.
        version: Table folder.
        token: Sample token.
        settings: :class:`CheckSettings`.
        nusc: An open devkit handle of that dataset to use (default: :func:`dataset`).

    Returns:
        One row per camera (or one error row), columns of :data:`bevviz.audit.store.SCHEMA`.
    """
    t0 = time.perf_counter()
    meta: dict = {}
    try:
        nusc = dataset(str(dataroot), version) if nusc is None else nusc
        meta = _sample_meta(nusc, token)
        rig, images = load_sample_from(nusc, token)
        scan, notes = _lidar(nusc, token, settings.lidar, settings.sweeps)
        report = check_rig(rig, images, convention=NUSCENES, lidar=scan, settings=settings,
                           source={"kind": "nuscenes", "path": str(dataroot), "version": version, **meta}, notes=notes)
        rows = report_rows(report)
        runtime = time.perf_counter() - t0
        for r in rows:
            r["runtime_s"] = runtime
        return rows
    except Exception as exc:  # the run goes on: the sample becomes an error row
        where = traceback.extract_tb(exc.__traceback__)[-1]
        text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, ValueError):
            text += f" (at {Path(where.filename).name}:{where.lineno})"
        return [error_row(token, text, time.perf_counter() - t0, meta)]


#: The columns of one row, in order (the Parquet schema is :data:`bevviz.audit.store.SCHEMA`).
ROW_COLUMNS = (
    "scene", "scene_token", "sample", "sample_index", "timestamp", "camera", "verdict", "score", "quick_score",
    *(f"{a}_deg" for a in AXES), *(f"{a}_unc_deg" for a in AXES), "offset_source", "offset_checked",
    "seam_verdict", "lidar_verdict", "edge_points", "seams", "lidar_points", "convention_ok", "sanity", "reason",
    "runtime_s", "error",
)
