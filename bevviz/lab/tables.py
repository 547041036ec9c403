"""The evaluation's tables: per frame (window), and per fault band and number of frames judged together.

A case is anything with the attributes of :class:`bevviz.lab.evaluate.Case`: ``camera``
(None for the unperturbed rig), ``axis`` (``"timing"`` for the unperturbed rig with its
LiDAR displaced), ``frame`` (its window's name), ``frames`` (how many frames were judged
together), ``band`` (the fault band's label), ``cameras``, ``lidar_named``,
``lidar_accepted``, ``lidar_end_deg``, ``start_deg``, ``lidar_proposal_end_deg``.

Convention:
    Errors are rotation angles in degrees between a camera and the dataset's camera.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bevviz.calibration.refine import TARGET_DEG

__all__ = ["WITHIN_DEG", "band_table", "counts", "frame_table", "unperturbed"]

#: The issue's target for an applied correction: it ends within this of the truth (degrees).
WITHIN_DEG = 0.2


def unperturbed(cases: Sequence[Any], timing: bool = False) -> list[Any]:
    """The unperturbed rigs' cases: as stored (``timing`` False) or with the LiDAR displaced."""
    return [c for c in cases if c.camera is None and (c.axis == "timing") == timing]


def counts(cases: Sequence[Any]) -> dict:
    """False alarms (clean and timing), faults named, wrong cameras, refinements accepted /
    within ``TARGET_DEG`` / within ``WITHIN_DEG`` / worse, proposals, over ``cases``."""
    base, timed = unperturbed(cases), unperturbed(cases, timing=True)
    faults = [c for c in cases if c.camera is not None]
    acc = [c for c in faults if c.lidar_accepted]
    return {
        "timing_cases": len(timed),
        "timing_false_alarms": sum(len(c.lidar_named) for c in timed),
        "clean_cameras": sum(c.cameras for c in base),
        "false_alarms": sum(len(c.lidar_named) for c in base),
        "faults": len(faults),
        "named": sum(c.camera in c.lidar_named for c in faults),
        "wrong": sum(len([n for n in c.lidar_named if n != c.camera]) for c in faults),
        "accepted": len(acc),
        "within": sum(c.lidar_end_deg <= TARGET_DEG for c in acc),
        "within_02": sum(c.lidar_end_deg <= WITHIN_DEG for c in acc),
        "proposed": sum(np.isfinite(c.lidar_proposal_end_deg) for c in faults),
        "worse": sum(c.lidar_end_deg > c.start_deg + 1e-6 for c in faults if np.isfinite(c.lidar_end_deg)),
    }


def frame_table(cases: Sequence[Any]) -> list[str]:
    """Per frame (window) and in total: false alarms on the unperturbed rig and with its LiDAR
    displaced (timing), faults named, wrong cameras named, refinements accepted / within 0.3 deg /
    worse, corrections proposed but not applied."""
    head = (f"{'frame':<16} {'clean cams':>10} {'false alarms':>12} {'timing FA':>9} {'faults':>6} {'named':>12} "
            f"{'wrong':>5} {'refine acc':>10} {'<=0.3 deg':>9} {'worse':>5} {'proposed':>8}")
    rows = [head, "-" * len(head)]
    frames = list(dict.fromkeys(c.frame for c in cases))
    for name in [*frames, None]:
        sel = [c for c in cases if name is None or c.frame == name]
        k = counts(sel)
        share = k["named"] / max(k["faults"], 1)
        label = "TOTAL" if name is None else name
        rows.append(f"{label:<16} {k['clean_cameras']:>10} {k['false_alarms']:>12} {k['timing_false_alarms']:>9} "
                    f"{k['faults']:>6} "
                    f"{k['named']:>4} ({share:4.0%}) {k['wrong']:>5} {k['accepted']:>10} {k['within']:>9} "
                    f"{k['worse']:>5} {k['proposed']:>8}")
    return rows


def band_table(cases: Sequence[Any], rig_of: Mapping[str, str] | None = None) -> list[str]:
    """One row per (frames judged together, fault band): the false alarms of the unperturbed
    rigs judged with that many frames (clean and timing: the same for every band), the band's
    faults named, wrong cameras, corrections applied and how many of those end within
    ``WITHIN_DEG``, corrections that end worse, and proposals.

    Args:
        cases: The cases.
        rig_of: Optional window name -> rig name: then the rows of every rig follow, each rig's
            own (``"all"``: every rig together).
    """
    head = (f"{'rig':<28} {'frames':>6} {'band deg':>8} {'clean cams':>10} {'false alarms':>12} {'timing FA':>9} "
            f"{'faults':>6} {'named':>12} {'wrong':>5} {'applied':>7} {f'<={WITHIN_DEG:g} deg':>9} {'worse':>5} "
            f"{'proposed':>8}")
    rows = [head, "-" * len(head)]
    rigs = [None] + ([] if rig_of is None else list(dict.fromkeys(rig_of[c.frame] for c in cases)))
    for rig in rigs:
        sel = [c for c in cases if rig is None or rig_of[c.frame] == rig]
        for n in sorted(dict.fromkeys(c.frames for c in sel)):
            mine = [c for c in sel if c.frames == n]
            clean = [c for c in mine if c.camera is None]
            for band in dict.fromkeys(c.band for c in mine if c.camera is not None):
                k = counts(clean + [c for c in mine if c.camera is not None and c.band == band])
                share = k["named"] / max(k["faults"], 1)
                rows.append(f"{'all' if rig is None else rig:<28} {n:>6} {band:>8} {k['clean_cameras']:>10} "
                            f"{k['false_alarms']:>12} {k['timing_false_alarms']:>9} {k['faults']:>6} "
                            f"{k['named']:>4} ({share:4.0%}) {k['wrong']:>5} {k['accepted']:>7} {k['within_02']:>9} "
                            f"{k['worse']:>5} {k['proposed']:>8}")
    return rows
