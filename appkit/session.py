"""What a page reads from the session: the current scene (rig + images), BEV grid and doctor.

Above the rig sources: the first read loads the default scene (the embedded sample, else
the rendered fallback) from :mod:`appkit.sources`; after that the sidebar replaces it.
:func:`current_doctor` is the use-case layer's :class:`bevviz.session.Doctor` of the current
scene, kept per scene and settings, so a page asks it and every page (and ``bevviz check``
on the same frame) reads the same numbers.
"""

from __future__ import annotations

import streamlit as st

from appkit.sources import default_scene
from appkit.state import GRID, SCENE, Scene
from bevviz.bev_grid import BEVGrid
from bevviz.session import CheckSettings, Doctor

__all__ = ["current", "current_doctor", "current_grid", "current_scene", "doctor"]


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


@st.cache_resource(show_spinner=False, max_entries=8, hash_funcs={Scene: lambda s: s.cache_key,
                                                                  CheckSettings: lambda c: repr(c)})
def doctor(scene: Scene, settings: CheckSettings) -> Doctor:
    """The doctor of ``scene`` with ``settings``, one per scene (its key and rig) and settings:
    what it computed (conventions, diagnosis, LiDAR evidence) is kept with it."""
    return Doctor(scene, settings)


def current_doctor(settings: CheckSettings | None = None) -> Doctor:
    """The doctor of the current scene (default settings: those of ``bevviz check``)."""
    return doctor(current_scene(), CheckSettings() if settings is None else settings)
