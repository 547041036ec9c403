"""Summaries and self-contained HTML pages: the audit's report and ``bevviz check --html``.

:func:`summarize` counts verdicts per scene x camera; :func:`write_report` writes the
audit's page (verdict matrix, offsets along each scene's timeline, the flagged samples, the
summary table); :func:`check_html` is the page of one check (verdicts, conventions, offsets,
the camera images). Pages carry plotly.js inline: one file, viewable offline.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pyarrow as pa

from bevviz.audit.check import ERROR, CheckReport, report_rows
from bevviz.audit.store import atomic_write
from bevviz.calibration import INCONCLUSIVE, MISCALIBRATED, OK
from bevviz.camera import NUSCENES_CAMERAS
from bevviz.viz.audit import camera_offsets_figure, offset_size, offset_timeline_figure, verdict_matrix_figure
from bevviz.viz.calibration import ranking_figure
from bevviz.viz.common import data_uri, downsample
from bevviz.viz.conventions import candidate_scores_figure

__all__ = ["SAMPLE_ROW", "check_html", "degraded_samples", "flagged_rows", "report_html", "summarize", "write_report"]

#: The camera label of a failed sample's row in the summary (its camera is null).
SAMPLE_ROW = "(sample)"
COUNTED = (MISCALIBRATED, INCONCLUSIVE, OK, ERROR)

_CSS = """body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:13px;width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td:last-child{min-width:240px}
.miscalibrated{color:#c62828;font-weight:600}.inconclusive{color:#8d6e00}.ok{color:#2e7d32}.error{color:#6a1b9a}
.muted{color:#666;font-size:13px}.cams{display:flex;flex-wrap:wrap;gap:10px}.cams figure{margin:0}
.cams figcaption{font-size:12px}"""


def _camera_order(names: Sequence[str]) -> list[str]:
    ring = [c for c in NUSCENES_CAMERAS if c in names]
    return ring + sorted(n for n in names if n not in ring)


def summarize(rows: pa.Table | Sequence[Mapping]) -> list[dict]:
    """Verdict counts per scene x camera.

    Args:
        rows: Audit rows (``pyarrow.Table`` or dicts).

    Returns:
        One dict per (scene, camera) in scene order then rig order: ``scene``, ``camera``
        (:data:`SAMPLE_ROW` for failed samples), ``samples``, a count per verdict
        (``miscalibrated``, ``inconclusive``, ``ok``, ``error``), ``sanity`` (rows with a
        sanity problem), ``degraded`` (rows judged without evidence the settings asked for,
        e.g. no LiDAR: :func:`bevviz.audit.check.degraded`), ``first_flagged`` (sample index of
        the first miscalibrated sample or None) and ``max_offset_deg`` (largest estimated offset size or None).
    """
    rows = rows.to_pylist() if isinstance(rows, pa.Table) else list(rows)
    scenes = list(dict.fromkeys(r["scene"] or "" for r in rows))
    cams = _camera_order(list({r["camera"] for r in rows if r["camera"] is not None}))
    groups: dict[tuple[str, str], list[Mapping]] = {}  # one pass over the rows, not one per scene x camera
    for r in rows:
        groups.setdefault((r["scene"] or "", r["camera"] or SAMPLE_ROW), []).append(r)
    out = []
    for sc in scenes:
        for cam in [*cams, SAMPLE_ROW]:
            sel = groups.get((sc, cam))
            if not sel:
                continue
            entry = {"scene": sc, "camera": cam, "samples": len(sel)}
            entry.update({v: sum(r["verdict"] == v for r in sel) for v in COUNTED})
            entry["sanity"] = sum(bool(r["sanity"]) for r in sel)
            entry["degraded"] = sum(bool(r.get("degraded")) for r in sel)
            flagged = sorted(r["sample_index"] for r in sel if r["verdict"] == MISCALIBRATED
                             and r["sample_index"] is not None)
            entry["first_flagged"] = flagged[0] if flagged else None
            sizes = [size for size, _ in map(offset_size, sel) if size is not None]
            entry["max_offset_deg"] = max(sizes) if sizes else None
            out.append(entry)
    return out


def degraded_samples(rows: pa.Table | Sequence[Mapping]) -> dict[str, str]:
    """Samples checked on less evidence than the settings asked for, and why.

    Args:
        rows: Audit rows.

    Returns:
        Sample token -> the ``degraded`` text of its rows, in row order.
    """
    rows = rows.to_pylist() if isinstance(rows, pa.Table) else list(rows)
    return {r["sample"]: r["degraded"] for r in rows if r.get("degraded") and r["sample"] is not None}


def flagged_rows(rows: pa.Table | Sequence[Mapping], strict: bool = False) -> list[dict]:
    """Rows that need a look: miscalibrated, failed, with a sanity problem (or, strict, inconclusive)."""
    rows = rows.to_pylist() if isinstance(rows, pa.Table) else list(rows)
    bad = {MISCALIBRATED, ERROR} | ({INCONCLUSIVE} if strict else set())
    return [r for r in rows if r["verdict"] in bad or r["sanity"]]


#: Columns whose cells are verdicts (coloured as such).
_VERDICT_COLUMNS = ("verdict", "seam_verdict", "lidar_verdict")
#: Header text of columns whose name does not read well.
_HEADERS = {"seam_verdict": "seam witness", "lidar_verdict": "LiDAR witness"}


def _table(records: Sequence[Mapping], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(_HEADERS.get(c, c.replace('_', ' ')))}</th>" for c in columns)
    body = []
    for r in records:
        cells = []
        for c in columns:
            v = r.get(c)
            text = f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))
            cls = f' class="{html.escape(v)}"' if c in _VERDICT_COLUMNS and isinstance(v, str) else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _page(title: str, sections: Sequence[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>\n")


def _figures(figs: Sequence[go.Figure]) -> list[str]:
    """Plotly figures as HTML divs; plotly.js inline once, in the first."""
    return [f.to_html(full_html=False, include_plotlyjs=(k == 0), config={"displaylogo": False})
            for k, f in enumerate(figs)]


def report_html(rows: pa.Table | Sequence[Mapping], summary: Sequence[Mapping], manifest: Mapping) -> str:
    """The audit's self-contained HTML report.

    Args:
        rows: Every audit row.
        summary: :func:`summarize` of them.
        manifest: The audit's manifest (dataroot, version, settings).

    Returns:
        The page.
    """
    rows = rows.to_pylist() if isinstance(rows, pa.Table) else list(rows)
    cams = _camera_order(list({r["camera"] for r in rows if r["camera"] is not None}))
    n_samples = len({r["sample"] for r in rows if r["sample"] is not None and r.get("error_table") is None})
    bad = flagged_rows(rows)
    where = f"{manifest.get('dataroot')} · {manifest.get('version')}"
    problems = sum(1 for r in rows if r.get("error_table") is not None)
    degraded = degraded_samples(rows)
    intro = (f"<p class='muted'>{html.escape(where)} · {n_samples} of {manifest.get('samples', n_samples)} "
             f"samples checked · {problems} table problem{'s' if problems != 1 else ''} · settings "
             f"{html.escape(json.dumps(manifest.get('settings', {})))}</p>")
    if degraded:
        first = next(iter(degraded.items()))
        intro += (f"<p class='error'>{len(degraded)} sample{'s' if len(degraded) != 1 else ''} judged on less "
                  f"evidence than the settings ask for (column degraded), e.g. {html.escape(' '.join(first))}</p>")
    figs = _figures([verdict_matrix_figure(summary, cams), offset_timeline_figure(rows, cams)])
    cols = ["scene", "sample_index", "camera", "verdict", "score", "roll_deg", "pitch_deg", "yaw_deg",
            "offset_source", "sanity", "error", "degraded", "sample"]
    sections = [intro, *figs, f"<h2>Needs a look ({len(bad)} rows)</h2>",
                _table(bad, cols) if bad else "<p>Nothing.</p>", "<h2>Per scene and camera</h2>",
                _table(summary, ["scene", "camera", "samples", *COUNTED, "sanity", "degraded", "first_flagged",
                                 "max_offset_deg"])]
    return _page("bevviz calibration audit", sections)


def write_report(path: str | os.PathLike, rows: pa.Table | Sequence[Mapping], summary: Sequence[Mapping],
                 manifest: Mapping) -> Path:
    """Write the audit's self-contained HTML report (:func:`report_html`) atomically.

    Args:
        path: The HTML file to write.
        rows: Every audit row.
        summary: :func:`summarize` of them.
        manifest: The audit's manifest (dataroot, version, settings).

    Returns:
        The path written.
    """
    text = report_html(rows, summary, manifest)
    return atomic_write(path, lambda p: p.write_text(text))


def check_html(report: CheckReport, images: Mapping[str, np.ndarray] | None = None, strict: bool = False) -> str:
    """The self-contained HTML page of one check (``bevviz check --html``).

    Args:
        report: The :class:`~bevviz.audit.check.CheckReport`.
        images: Camera name -> RGB uint8 (H, W, 3), shown as thumbnails.
        strict: Count inconclusive cameras as flagged.

    Returns:
        The page.
    """
    cams = [c.camera for c in report.cameras]
    flagged = report.flagged(strict)
    src = report.source
    where = " · ".join(str(src[k]) for k in ("path", "version", "scene", "sample") if src.get(k) is not None)
    unjudged = report.unjudged(strict)
    tail = (f" <span class='inconclusive'>{len(unjudged)} of {len(report.cameras)} cameras inconclusive: not "
            f"judged ({html.escape(', '.join(unjudged))}).</span>" if unjudged else "")
    status = (f"<p><b class='miscalibrated'>Flagged: {html.escape(', '.join(flagged))}</b>{tail}</p>" if flagged
              else f"<p><b class='ok'>Nothing flagged.</b>{tail}</p>")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.notes)
    conv = report.conventions
    verdict = "consistent" if conv.ok else "<span class=miscalibrated>the stored reading is not the best</span>"
    conv_text = (f"<p>Stored convention <b>{html.escape(conv.stored)}</b>; best ranked "
                 f"<b>{html.escape(conv.best)}</b> — {verdict}</p>")
    rows = [{**r, "reason": c.reason} for r, c in zip(report_rows(report), report.cameras)]
    figs = _figures([ranking_figure(cams, [0.0 if not np.isfinite(c.score) else c.score for c in report.cameras],
                                    title="The doctor's score per camera (higher = worse)"),
                     camera_offsets_figure(rows, cams),
                     candidate_scores_figure([c for c, _ in conv.ranking], [s for _, s in conv.ranking], conv.best)])
    thumbs = ""
    if images:
        verdict = {c.camera: c.verdict for c in report.cameras}
        thumbs = "<div class='cams'>" + "".join(
            f"<figure><img src='{data_uri(downsample(images[n], 320)[0], 'jpeg')}'>"
            f"<figcaption>{html.escape(n)} · <span class='{verdict.get(n, '')}'>{verdict.get(n, '')}</span>"
            "</figcaption></figure>" for n in _camera_order(list(images))) + "</div>"
    sections = [f"<p class='muted'>{html.escape(where)} · {report.runtime_s:.1f} s</p>", status,
                f"<ul class='muted'>{notes}</ul>" if notes else "", thumbs, "<h2>Cameras</h2>",
                _table(rows, ["camera", "verdict", "score", "roll_deg", "pitch_deg", "yaw_deg", "offset_source",
                              "edge_points", "seams", "seam_verdict", "lidar_verdict", "sanity", "reason"]),
                figs[0], figs[1], "<h2>Storage conventions</h2>", conv_text, figs[2]]
    return _page(f"bevviz check: {src.get('name') or src.get('path', '')}", sections)
