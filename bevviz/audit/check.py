"""One dataset sample checked as the audit's rows.

:func:`check_sample` is the audit's unit of work: a pure function of (dataroot, version,
sample token, settings) that returns one row per camera (:data:`bevviz.audit.store.SCHEMA`);
a sample that cannot be checked gives one row with its error instead of raising, so a run
over a whole dataset goes on. It loads the sample and checks it through the use cases of
:mod:`bevviz.session` (:func:`~bevviz.session.nuscenes_scene`,
:class:`~bevviz.session.Doctor`), the road ``bevviz check`` and the app take too; the devkit
index is opened once per process and dataroot (:func:`bevviz.session.dataset`).

The check of one rig (:class:`CheckReport`, :class:`CheckSettings`, :func:`check_rig`)
lives in :mod:`bevviz.session`; its names are re-exported here for the audit's modules.

Convention:
    Offsets are body-frame (FLU) degrees, the stored camera turned by this much away from
    where the evidence puts it (as :attr:`bevviz.calibration.CameraFinding.offset_deg`).
    See docs/conventions.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from bevviz.calibration import AXES
from bevviz.errors import InputError, bug_message
from bevviz.io.nuscenes import sample_meta
from bevviz.session import (
    EMBEDDED,
    CameraCheck,
    CameraSanity,
    CheckReport,
    CheckSettings,
    ConventionCheck,
    Doctor,
    check_rig,
    dataset,
    nuscenes_scene,
    projection_sanity,
)
from bevviz.session.report import finite

__all__ = [
    "EMBEDDED", "ERROR", "CameraCheck", "CameraSanity", "CheckReport", "CheckSettings", "ConventionCheck",
    "ROW_COLUMNS", "check_rig", "check_sample", "dataset", "degraded", "error_row", "projection_sanity",
    "report_rows",
]

#: The verdict of a sample that could not be checked (its row carries the error).
ERROR = "error"
#: How the doctor's note on a scene without every camera's image begins
#: (:meth:`bevviz.session.Doctor.check`).
MISSING_IMAGES_NOTE = "the doctor needs every camera's image"


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
            "score": finite(c.score), "quick_score": finite(c.quick_score),
            **{f"{a}_deg": off.get(a) for a in AXES}, **{f"{a}_unc_deg": unc.get(a) for a in AXES},
            "offset_source": c.offset_source, "offset_checked": c.offset_checked,
            "seam_verdict": c.witnesses.get("seams"), "lidar_verdict": c.witnesses.get("lidar"),
            "edge_points": c.edge_points, "seams": c.seams, "lidar_points": report.lidar_points,
            "convention_ok": report.conventions.ok, "sanity": "; ".join(c.sanity.problems),
            "reason": c.reason, "runtime_s": report.runtime_s, "error": None, "degraded": degraded(report),
        })
    return rows


def degraded(report: CheckReport) -> str | None:
    """What a check went without that its settings asked for, in words, or None.

    A sample checked without the LiDAR the settings ask for (no LIDAR_TOP, or its file
    missing or unreadable) or without every camera's image is judged on less evidence: its
    rows say so (the ``degraded`` column), and the summaries count them.

    Args:
        report: The sample's :class:`CheckReport` (its settings, LiDAR points and notes).

    Returns:
        ``"no LiDAR: <why>"`` and / or ``"no doctor: <why>"`` joined by ``"; "``, or None.
    """
    why = []
    if report.settings.lidar and not report.lidar_points:
        said = [n for n in report.notes if "lidar" in n.lower()]
        why.append("no LiDAR: " + ("; ".join(said) if said else "the sample's scan was not used"))
    if any(n.startswith(MISSING_IMAGES_NOTE) for n in report.notes):
        why.append("no doctor: " + next(n for n in report.notes if n.startswith(MISSING_IMAGES_NOTE)))
    return "; ".join(why) or None


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
        meta = sample_meta(nusc, token)  # first: an error row after it says where the sample is
        scene = nuscenes_scene(nusc, dataroot, version, token, lidar=settings.lidar, sweeps=settings.sweeps,
                               frames=1)  # every sample is a row of its own: its neighbours are rows too
        report = Doctor(scene, settings).check()
        rows = report_rows(report)
        runtime = time.perf_counter() - t0
        for r in rows:
            r["runtime_s"] = runtime
        return rows
    except InputError as exc:  # the run goes on: the sample becomes an error row
        return [error_row(token, f"{type(exc).__name__}: {exc}".splitlines()[0], time.perf_counter() - t0, meta)]
    except Exception as exc:  # a bug, named as one; the run goes on all the same
        return [error_row(token, bug_message(exc), time.perf_counter() - t0, meta)]


#: The columns of one row, in order (the Parquet schema is :data:`bevviz.audit.store.SCHEMA`).
ROW_COLUMNS = (
    "scene", "scene_token", "sample", "sample_index", "timestamp", "camera", "verdict", "score", "quick_score",
    *(f"{a}_deg" for a in AXES), *(f"{a}_unc_deg" for a in AXES), "offset_source", "offset_checked",
    "seam_verdict", "lidar_verdict", "edge_points", "seams", "lidar_points", "convention_ok", "sanity", "reason",
    "runtime_s", "error", "degraded",
)
