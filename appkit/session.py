"""What a page reads from the session: the current scene (rig + images) and BEV grid.

Above the rig sources: the first read loads the default scene (the embedded sample, else
the rendered fallback) from :mod:`appkit.sources`; after that the sidebar replaces it.
"""

from __future__ import annotations

import streamlit as st

from appkit.sources import default_scene
from appkit.state import GRID, SCENE, Scene
from bevviz.bev_grid import BEVGrid

__all__ = ["current", "current_grid", "current_scene"]


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
