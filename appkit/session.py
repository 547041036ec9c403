"""What a page reads from the session: the current scene (rig + images), BEV grid and doctor.

Above the rig sources: the first read loads the default scene (the embedded sample, else
the rendered fallback) from :mod:`appkit.sources`; after that the sidebar replaces it.
:func:`current_doctor` is the use-case layer's :class:`bevviz.session.Doctor` of the current
scene, kept per scene and settings, so a page asks it and every page (and ``bevviz check``
on the same frame) reads the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import streamlit as st

from appkit.sources import SAMPLE_NUSCENES, default_scene
from appkit.state import GRID, SCENE, Scene
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.session import CheckSettings, Doctor
from bevviz.session.loaders import dataset_frames

__all__ = ["adopt_rig", "current", "current_doctor", "current_grid", "current_scene", "doctor", "embedded_frames"]

_HASH = {Scene: lambda s: s.cache_key, CheckSettings: lambda c: repr(c),
         BEVGrid: lambda g: repr(sorted(g.to_dict().items())), Rig: lambda r: r.fingerprint}


def current_scene() -> Scene:
    """The scene the sidebar loaded (loads the default sample on first use)."""
    if SCENE not in st.session_state:
        st.session_state[SCENE] = default_scene()
    return st.session_state[SCENE]


def current_grid() -> BEVGrid:
    """The BEV grid from the sidebar (BEVFormer's default until changed)."""
    if GRID not in st.session_state:
        st.session_state[GRID] = BEVGrid()
    return st.session_state[GRID]


def current() -> tuple[Scene, BEVGrid]:
    """``(scene, grid)`` for a page."""
    return current_scene(), current_grid()


@st.cache_resource(show_spinner=False)
def embedded_frames() -> list:
    """Images of every sample of the embedded nuScenes-format dataset (one physical rig), loaded once."""
    return dataset_frames(str(SAMPLE_NUSCENES))


@st.cache_resource(show_spinner=False, max_entries=16)
def _evidence_store(lidar_key: str) -> dict:
    """Where the doctors of one set of images and scan keep their LiDAR evidence (per camera)."""
    return {}


@st.cache_resource(show_spinner=False, max_entries=8, hash_funcs=_HASH)
def doctor(scene: Scene, settings: CheckSettings, grid: BEVGrid | None = None, all_frames: bool = False) -> Doctor:
    """The doctor of ``scene`` with ``settings``, one per scene (its key and rig), settings,
    seam grid and frames: what it computed (conventions, diagnosis, LiDAR evidence) is kept
    with it. ``all_frames``: the thorough seam witness and the seam refinement use every
    embedded sample (the embedded scene only)."""
    store = _evidence_store(scene.lidar_key) if scene.lidar_key else None
    return Doctor(scene, settings, grid, embedded_frames() if all_frames else None, store)


@st.cache_resource(show_spinner=False, max_entries=16, hash_funcs=_HASH)
def _perturbed(scene: Scene, settings: CheckSettings, grid: BEVGrid | None, all_frames: bool, rig: Rig,
               _perturbations: Mapping) -> Doctor:
    return doctor(scene, settings, grid, all_frames).perturbed(_perturbations)


def current_doctor(settings: CheckSettings | None = None, *, grid: BEVGrid | None = None,
                   perturbations: Mapping[str, Mapping[str, float]] | None = None, all_frames: bool = False) -> Doctor:
    """The doctor of the current scene (default settings: those of ``bevviz check``).

    Args:
        settings: What the checks run.
        grid: The seam grid (None: the library's, as ``bevviz check``).
        perturbations: Camera name -> perturbation (:data:`bevviz.calibration.PERTURBATION_KEYS`):
            the doctor of the rig with these cameras moved (kept per moved rig; cameras
            that did not move share their LiDAR evidence with the loaded rig's doctor).
        all_frames: Every embedded sample as frames of the seam witnesses.

    Raises:
        InputError: for a perturbation out of range.
    """
    scene, settings = current_scene(), CheckSettings() if settings is None else settings
    base = doctor(scene, settings, grid, all_frames)
    if not perturbations:
        return base
    moved = base.perturbed(perturbations)  # cheap; its results are kept in the cached one below
    if moved is base:
        return base
    return _perturbed(scene, settings, grid, all_frames, moved.rig, perturbations)


def adopt_rig(rig: Rig, camera: str) -> None:
    """Make ``rig`` (``camera`` refined) the loaded rig of every page, until another source is loaded."""
    scene = current_scene()
    st.session_state[SCENE] = dataclasses.replace(scene, rig=rig,
                                                  key=f"{scene.key}|refined:{rig.fingerprint[:12]}",
                                                  label=f"{scene.label} (refined {camera})")
