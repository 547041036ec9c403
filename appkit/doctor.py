"""The Calibration Doctor's tables and sentences, made from the library's findings.

Plain functions, no Streamlit calls: the page shows what they return. Numbers are only
formatted here; every verdict and offset comes from :func:`bevviz.calibration.diagnose`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bevviz.calibration import AXES, TOLERANCE_DEG, CameraFinding, RigConsensus
from bevviz.viz.calibration_lidar import VERDICT_COLORS

__all__ = ["consensus_summary", "evidence_rows", "reason_lines", "verdict_rows", "verdict_table"]


def _offset(finding: CameraFinding, axis: str) -> str:
    if finding.offset_deg is None:
        return "-"
    unc = (finding.uncertainty_deg or {}).get(axis)
    text = f"{finding.offset_deg[axis]:+.2f}"
    return text if unc is None else f"{text} ± {unc:.2f}"


def verdict_rows(findings: Sequence[CameraFinding]) -> list[dict]:
    """One row per finding (worst first, as given): camera, verdict, the camera's own offset
    per axis (degrees, ± its bootstrap spread; "-" without LiDAR), edge points, each
    witness's verdict and the reason."""
    rows = []
    for f in findings:
        row = {"camera": f.camera, "verdict": f.verdict}
        row.update({f"{a} (deg)": _offset(f, a) for a in AXES})
        row["edge points"] = int(f.edge_points)
        row["witnesses"] = ", ".join(f"{k}: {v}" for k, v in f.witnesses.items())
        row["reason"] = f.reason
        rows.append(row)
    return rows


def evidence_rows(findings: Sequence[CameraFinding]) -> list[dict]:
    """The LiDAR evidence behind each verdict, one row per camera with LiDAR evidence: edge
    points per frame, how far the best rotation stands above a typical one in the +-3 deg
    score landscape and where the stored pose stands (robust z), each image half's gain
    of the best rotation over the stored pose (robust z) and each half's own optimum."""
    rows = []
    for f in findings:
        ev = f.lidar
        if ev is None:
            continue
        per = " / ".join(str(int(n)) for n in ev.points_per_frame) or "0"
        halves = ev.halves_deg
        rows.append({
            "camera": f.camera, "verdict": f.verdict, "frames": int(ev.frames), "edge points per frame": per,
            "best (z)": f"{ev.z_best:.1f}", "stored (z)": f"{ev.z_stored:.1f}",
            "half gains (z)": f"{ev.half_gain[0]:+.1f} / {ev.half_gain[1]:+.1f}",
            "left half (deg)": " / ".join(f"{v:+.1f}" for v in halves[0]),
            "right half (deg)": " / ".join(f"{v:+.1f}" for v in halves[1]),
        })
    return rows


def reason_lines(findings: Sequence[CameraFinding]) -> list[tuple[str, str, str]]:
    """(camera, verdict, reason) per finding, in order: the whole reason of every verdict,
    "inconclusive" included, for the page to show in full (a table cell cuts it)."""
    return [(f.camera, f.verdict, f.reason) for f in findings]


def _verdict_style(verdict: str) -> str:
    color = VERDICT_COLORS.get(verdict)
    return f"background-color: {color}; color: white; font-weight: 600" if color else ""


def verdict_table(findings: Sequence[CameraFinding]):
    """:func:`verdict_rows` as a pandas Styler with the verdict cells coloured
    (:data:`bevviz.viz.calibration_lidar.VERDICT_COLORS`), for ``st.dataframe``."""
    df = pd.DataFrame(verdict_rows(findings))
    if df.empty:
        return df
    return df.style.map(_verdict_style, subset=["verdict"])


def consensus_summary(consensus: RigConsensus | None, tolerance: float = TOLERANCE_DEG) -> dict:
    """What the cameras' LiDAR offsets share, in words.

    Args:
        consensus: :attr:`bevviz.calibration.Diagnosis.consensus` (None without LiDAR).
        tolerance: Largest calibrated error (degrees); a common offset beyond it is significant.

    Returns:
        Dict with ``fitted`` (bool), ``rotation`` (the LiDAR's rotation against the cameras,
        ego x / y / z in degrees, as text), ``pitch`` (the common pitch, text), ``set_aside``
        (cameras left out of the fit as outliers), ``magnitude_deg`` (the largest common
        offset a camera sees) and ``suspect``: the sentence that the LiDAR-to-ego
        calibration is the suspect when the common offset is significant, else None.
    """
    if consensus is None or not consensus.fitted:
        n = 0 if consensus is None else len(consensus.cameras)
        return {"fitted": False, "rotation": "-", "pitch": "-", "set_aside": [], "magnitude_deg": 0.0,
                "suspect": None, "why": f"too few cameras with LiDAR evidence for a rig consensus ({n})"}
    rot = ", ".join(f"{a} {v:+.2f}" for a, v in zip("xyz", consensus.lidar_rotation_deg))
    out = {"fitted": True, "rotation": " / ".join(f"{v:+.2f}" for v in consensus.lidar_rotation_deg),
           "pitch": f"{consensus.common_pitch_deg:+.2f} deg",
           "set_aside": list(consensus.excluded), "magnitude_deg": consensus.magnitude_deg, "suspect": None,
           "why": ""}
    if consensus.magnitude_deg > tolerance:
        k = len(consensus.cameras) - len(consensus.excluded)
        out["suspect"] = (f"{k} cameras are off against the LiDAR by one common rotation (up to "
                          f"{consensus.magnitude_deg:.2f} deg per camera, more than the {tolerance:g} deg tolerance: "
                          f"LiDAR rotation {rot} deg in the ego frame, common pitch "
                          f"{consensus.common_pitch_deg:+.2f} deg). The LiDAR-to-ego calibration (or the LiDAR's "
                          "height) is the suspect, not the cameras.")
    return out
