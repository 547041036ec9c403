"""The Audit page's glue: open an audit folder, run one on an embedded dataset, open a sample in the doctor.

An audit's rows are read once per folder state (the part files' names and sizes key the
cache). Opening a flagged sample in the Calibration Doctor sets the session-state keys of
the sidebar's nuScenes source (:data:`DOCTOR_KEYS`) in a button callback, before the
sidebar's widgets exist in the next run, and marks a page switch that the page performs
after the sidebar has loaded the sample.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import streamlit as st

from appkit.sidebar import SOURCE_NUSCENES
from appkit.sources import embedded_scene_table
from bevviz.audit import EMBEDDED, CheckSettings, part_files, read_manifest, read_rows, run_audit, summarize

__all__ = ["AUDIT_DIR", "DOCTOR_PAGE", "EMBEDDED_DATASETS", "PENDING_SWITCH", "audit_scenes", "load_audit",
           "open_in_doctor", "run_embedded", "switch_if_pending"]

#: Session-state key of the audit folder the page shows.
AUDIT_DIR = "audit_dir"
#: Session-state key of the folder the last audit run from the page wrote (removed by the next).
EMBEDDED_OUT = "audit_embedded_out"
#: Session-state key set when a sample is to be opened in the doctor on the next run.
PENDING_SWITCH = "audit_open_doctor"
DOCTOR_PAGE = "pages/calibration_doctor.py"
#: The keys of the sidebar's nuScenes-source widgets.
DOCTOR_KEYS = {"source": "rig_source", "dataroot": "ns_dataroot", "version": "ns_version", "scene": "ns_scene",
               "sample": "ns_sample"}
#: Embedded datasets an audit can run on from the page.
EMBEDDED_DATASETS = {
    "Synthetic nuScenes (3 scenes, a drifting camera)": EMBEDDED["nuscenes"],
    "Real nuScenes keyframe (with LiDAR)": EMBEDDED["real-nuscenes"],
}


def _fingerprint(out: str) -> tuple:
    return tuple((p.name, p.stat().st_size) for p in part_files(out))


@st.cache_data(show_spinner=False, max_entries=8)
def _load(out: str, fingerprint: tuple) -> tuple[list[dict], list[dict]]:
    rows = read_rows(out).to_pylist()
    return rows, summarize(rows)


def load_audit(out: str | os.PathLike) -> tuple[list[dict], list[dict], dict]:
    """(rows, summary, manifest) of an audit folder (a ValueError naming ``--out`` if it is none)."""
    out = str(Path(out).expanduser())
    manifest = read_manifest(out)  # the named error for a folder that holds no audit
    rows, summary = _load(out, _fingerprint(out))
    return rows, summary, manifest


def audit_scenes(dataroot: str) -> list[str]:
    """Scene names of an embedded dataset (read from its scene table, without opening the devkit)."""
    return [s["name"] for s in embedded_scene_table(dataroot)]


def run_embedded(dataroot: str | os.PathLike, scenes: list[str] | None, settings: CheckSettings,
                 on_progress: Callable[[int, int], None]) -> str:
    """Audit an embedded dataset into a new temporary folder; returns the folder.

    The folder the session's previous run wrote is removed once this one succeeded (each holds
    a report of a few MiB); a run that fails removes its own folder and keeps the previous one.
    """
    out = tempfile.mkdtemp(prefix="bevviz-audit-")
    try:
        run_audit(dataroot, out, scenes=scenes, settings=settings, progress=False, on_progress=on_progress)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    previous = st.session_state.get(EMBEDDED_OUT)
    if previous and previous != out:
        shutil.rmtree(previous, ignore_errors=True)
    st.session_state[EMBEDDED_OUT] = out
    return out


def open_in_doctor(row: Mapping, manifest: Mapping) -> None:
    """Button callback: point the sidebar's nuScenes source at ``row``'s sample, then switch pages."""
    ss = st.session_state
    ss[DOCTOR_KEYS["source"]] = SOURCE_NUSCENES
    ss[DOCTOR_KEYS["dataroot"]] = str(manifest["dataroot"])
    ss[DOCTOR_KEYS["version"]] = str(manifest["version"])
    ss[DOCTOR_KEYS["scene"]] = str(row["scene"])
    ss[DOCTOR_KEYS["sample"]] = int(row["sample_index"])
    ss[PENDING_SWITCH] = True


def switch_if_pending() -> None:
    """Switch to the doctor when :func:`open_in_doctor` asked for it (call after the sidebar ran)."""
    if st.session_state.pop(PENDING_SWITCH, False):
        st.switch_page(DOCTOR_PAGE)
