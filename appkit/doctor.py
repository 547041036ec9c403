"""The Calibration Doctor's tables and sentences, made from the library's findings.

Plain functions, no Streamlit calls: the page shows what they return. Numbers are only
formatted here; every verdict and offset comes from :func:`bevviz.calibration.diagnose`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bevviz.bev_grid import BEVGrid
from bevviz.calibration import (
    AXES,
    CONFIDENCE,
    INCONCLUSIVE,
    MISCALIBRATED,
    PERTURBATION_KEYS,
    TOLERANCE_DEG,
    CameraFinding,
    RefineHistory,
    RigConsensus,
    seam_grid,
)
from bevviz.checks import escape_markdown
from bevviz.viz.calibration import loss_curve_figure, ranking_figure
from bevviz.viz.calibration_lidar import VERDICT_COLORS

__all__ = ["HELP", "INTRO_TEXT", "LIDAR_TEXT", "OFFSETS_TEXT", "OVERLAYS_TEXT", "PROFILES_TEXT", "SEAM_COST_TEXT",
           "SLIDERS", "Z_TEXT",
           "active_perturbations", "consensus_summary", "evidence_rows", "loss_figure", "named_markdown",
           "perturbations", "ranking", "reason_lines", "reasons_markdown", "seam_grid_of", "slider_defaults",
           "slider_key", "verdict_rows", "verdict_table"]

#: The perturbation sliders: (key of :data:`bevviz.calibration.PERTURBATION_KEYS`, label, min, max, step).
SLIDERS = (("roll_deg", "roll (deg)", -5.0, 5.0, 0.1), ("pitch_deg", "pitch (deg)", -5.0, 5.0, 0.1),
           ("yaw_deg", "yaw (deg)", -5.0, 5.0, 0.1), ("x_cm", "x (cm)", -50.0, 50.0, 1.0),
           ("y_cm", "y (cm)", -50.0, 50.0, 1.0), ("z_cm", "z (cm)", -50.0, 50.0, 1.0),
           ("fx_scale", "fx scale", 0.9, 1.1, 0.005), ("fy_scale", "fy scale", 0.9, 1.1, 0.005))


# The page's explanations, next to the tables they explain.
INTRO_TEXT = ("every camera's image is projected onto the ground (z = 0); where two footprints overlap (a seam) "
              "both must show the same ground. A misaligned camera breaks the seams with both of its neighbours.")
#: Help of the page's widgets, by widget key ("adopt": both adopt buttons).
HELP = {
    "cd_radius": "Ground cells up to this distance from the rig centre are compared.",
    "cd_cell": "The side seams of a nuScenes-like rig are ~10 degree wedges: small cells keep enough of them. "
               "30 m and 0.2 m are the grid of `bevviz check` (the same numbers).",
    "cd_frames": "Objects standing in a seam hide the ground there; other samples of the same rig see those seams "
                 "clear. Only for the embedded sample (same physical rig).",
    "cd_diagnose": "Lets each suspect rotate alone for a moment and measures how much that repairs its seams: a "
                   "misaligned camera repairs both, a good neighbour only trades one seam for the other.",
    "cd_quality": "accurate: 3 levels down to 0.2 m cells and half-size images; fast: 2 coarser levels.",
    "cd_translation": "Seams constrain translation only weakly (a few cm move the ground by a few cm).",
    "adopt": "Replace the loaded rig for every page (until another source is loaded).",
    "adopt_proposal": ("Replace the loaded rig for every page with the proposed correction: every check passed, but "
                       "the LiDAR places this rig's calibrated cameras less accurately than an applied correction "
                       "promises, so expect the camera about that far from its true pose."),
    "from_loaded": "Rotation between the refined camera and the camera as loaded (before your perturbation).",
}
SEAM_COST_TEXT = ("Seam cost = 1 - correlation of the normalised gradient fields of the two cameras' ground "
                  "projections (0 = the same edges; exposure does not matter; objects standing in a seam raise it "
                  "whatever the calibration). NCC = the same on colours.")
LIDAR_TEXT = ("Each camera looks at the scan from its own exposure time and finds its edges: depth jumps no plane "
              "explains (silhouettes) and jumps of the per-scan intensity ranks (paint, signs), each scored on the "
              "image gradients across it. The rotation is searched over +-3 deg, widened up to +-5.5 deg when the best "
              "sits at the edge; a camera is called miscalibrated only when the stored pose is rejected: below the "
              "best and supported by both image halves, with the "
              "offset pinned down by a bootstrap along the directions it can pin (a wide camera seldom pins its roll, "
              "a side camera often only a mix of roll and pitch), or so "
              "far below the best that where the camera really points may stay uncertain; otherwise "
              "\"inconclusive\", with the reason (so is any camera with fewer than 300 edge points a frame: a "
              "sparse cloud places its edges too coarsely; and so is every camera when fewer than two others line "
              "up with the LiDAR, their best rotation within 1 degree of where they are stored: then the LiDAR "
              "itself may be off). What all cameras share (the "
              "LiDAR's own error) is taken out by a rig consensus. A LiDAR out of sync with the images (a timing "
              "error on a moving car) looks like turned cameras: each rotation is also fitted with the LiDAR "
              "displaced along the car's axis, and a camera that is fine once displaced is not accused. About a "
              "second per camera; each camera is aligned once per scan.")
OFFSETS_TEXT = ("Offsets: each camera's own rotation error (body frame: roll about the optical axis, pitch positive "
                "looking down, yaw positive to the left) after the rig consensus, +- its bootstrap spread.")
Z_TEXT = ("z: robust z within the +-3 deg score landscape (score minus its median, over 1.48 x its median absolute "
          "deviation). A stored pose well below the best, with both image halves gaining from the best rotation and "
          "agreeing on it, is what convicts a camera.")
PROFILES_TEXT = ("Red: the edge points with the stored calibration; green: at the optimum. Each curve turns one axis "
                 "through the optimum (offset 0 = the stored calibration), the others held there.")
#: Caption of a LiDAR correction's overlays, one figure a frame.
OVERLAYS_TEXT = ("The LiDAR's edge points in this camera's image at its pose before the correction and "
                 "after it, on each frame whose evidence was pooled (frame 1: the one loaded). An "
                 "edge that lands on its image edge in one frame and beside it in another says the "
                 "frames disagree (the car turning, a sweep out of sync).")

def frames_text(n_frames: int) -> str:
    """What the page says about the frames the LiDAR witness judges: "" for one frame,
    "3 frames judged together: ..." for several (a drive, several frame folders, --frames N)."""
    if n_frames <= 1:
        return ""
    return (f"{n_frames} frames judged together: every camera's LiDAR evidence is added up over the {n_frames} "
            "frames of the same rig (each frame's points moved to each camera's exposure) before any verdict; "
            "a frame that repeats an earlier one's view (a parked car) is counted once.")


def slider_key(camera: str, key: str) -> str:
    """Session-state key of one camera's perturbation slider."""
    return f"cd_p_{camera}_{key}"


def slider_defaults(cameras: Sequence[str]) -> dict[str, float]:
    """Every perturbation slider of ``cameras`` at its default (no perturbation), by session-state key."""
    return {slider_key(c, k): PERTURBATION_KEYS[k] for c in cameras for k, *_ in SLIDERS}


def perturbations(state: Mapping, cameras: Sequence[str]) -> dict[str, dict[str, float]]:
    """Camera -> every perturbation as the sliders in ``state`` hold it (defaults where unset)."""
    return {c: {k: state.get(slider_key(c, k), PERTURBATION_KEYS[k]) for k, *_ in SLIDERS} for c in cameras}


def active_perturbations(perturbed: Mapping[str, Mapping[str, float]]) -> str:
    """The perturbations away from their defaults, in words ("" when none)."""
    active = {c: {k: v for k, v in p.items() if v != PERTURBATION_KEYS[k]} for c, p in perturbed.items()}
    return "; ".join(f"{c}: " + ", ".join(f"{k} {v:g}" if k.endswith("scale") else f"{k} {v:+g}"
                                          for k, v in p.items()) for c, p in active.items() if p)


def correction_metric(delta) -> tuple[str, str]:
    """A correction's (value, help) for a metric: its angle, and each axis in the help."""
    return (f"{delta.angle_deg:.2f} deg",
            f"roll {delta.roll_deg:+.2f}, pitch {delta.pitch_deg:+.2f}, yaw {delta.yaw_deg:+.2f} deg")


def seam_grid_of(radius: float, cell: float) -> BEVGrid | None:
    """The seam grid of ``radius`` and ``cell`` metres; None when it is the library's default
    (the doctor is then the one ``bevviz check`` makes, with the same numbers)."""
    grid = seam_grid(radius=float(radius), resolution=float(cell))
    return None if grid == seam_grid() else grid


def ranking(found: Sequence[CameraFinding], names: Sequence[str], title: str, x_title: str = "x median"):
    """A diagnosis's ranking as a figure (:func:`bevviz.viz.calibration.ranking_figure`): every camera's score."""
    return ranking_figure([f.camera for f in found], [f.score for f in found], list(names), title=title,
                          x_title=x_title)


def named_markdown(found: Sequence[CameraFinding]) -> str:
    """The cameras a LiDAR diagnosis convicts, in one markdown sentence (tolerance and confidence
    included); when it convicts none, how many it could not judge, so that "no camera" never
    reads as a clean bill for a rig the witness could not judge."""
    named = ", ".join(f.camera for f in found if f.verdict == MISCALIBRATED)
    head = (f"Miscalibrated: **{escape_markdown(named) or 'no camera'}** (turned more than {TOLERANCE_DEG:g} deg, "
            f"in {CONFIDENCE:.0%} of the bootstrap replicates).")
    unsure = sum(f.verdict == INCONCLUSIVE for f in found)
    if named or not unsure:
        return head
    if unsure == len(found):
        return f"{head} But none is judged ok either: all {unsure} are inconclusive (why: below)."
    return f"{head} {len(found) - unsure} judged ok, {unsure} inconclusive (why: below)."


def loss_figure(hist: RefineHistory):
    """A refinement's loss and rotation per step (:func:`bevviz.viz.calibration.loss_curve_figure`)."""
    rows = hist.rows()
    return loss_curve_figure([r["loss"] for r in rows], [r["level"] for r in rows],
                             [(r["roll_deg"], r["pitch_deg"], r["yaw_deg"]) for r in rows],
                             title=f"Refining {hist.camera} against {', '.join(hist.neighbours)} "
                                   f"({hist.seconds:.1f} s)")


def _offset(finding: CameraFinding, axis: str) -> str:
    if finding.offset_deg is None:
        return "-"
    unc = (finding.uncertainty_deg or {}).get(axis)
    text = f"{finding.offset_deg[axis]:+.2f}"
    return text if unc is None else f"{text} ± {unc:.2f}"


def verdict_rows(findings: Sequence[CameraFinding]) -> list[dict]:
    """One row per finding (worst first, as given): camera, verdict, the camera's own offset
    per axis (degrees, ± its bootstrap spread; "-" without LiDAR), edge points, the frames
    its verdict rests on (the LiDAR witness's; 1 without), each witness's verdict and the reason."""
    rows = []
    for f in findings:
        row = {"camera": f.camera, "verdict": f.verdict}
        row.update({f"{a} (deg)": _offset(f, a) for a in AXES})
        row["edge points"] = int(f.edge_points)
        row["frames"] = int(f.lidar.frames) if f.lidar is not None else 1
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


def reasons_markdown(findings: Sequence[CameraFinding]) -> str:
    """:func:`reason_lines` as one markdown list, every reason in full, user text escaped."""
    return "\n".join(f"- **{escape_markdown(c)}** · *{v}*: {escape_markdown(r)}" for c, v, r in reason_lines(findings))


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
