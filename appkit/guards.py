"""Page-side guards: show bad input as a message (never a traceback) and stop the page."""

from __future__ import annotations

from contextlib import contextmanager

import streamlit as st

from appkit.state import Scene


@contextmanager
def shown_errors(what: str):
    """Run a block; a ``ValueError`` from bevviz (which names camera, field and value) becomes
    ``st.error`` and stops the rest of the page (the sidebar and anything above still show)."""
    try:
        yield
    except ValueError as e:
        st.error(f"{what}: {e}")
        st.stop()


def require_images(scene: Scene, what: str) -> bool:
    """Whether every camera has an image; otherwise a warning saying which are missing."""
    missing = [n for n in scene.rig.names if n not in scene.images]
    if missing:
        st.warning(f"{what} needs an image for every camera; missing: {', '.join(missing)}. "
                   "Upload them in the sidebar (matched by file name or camera name).")
        return False
    return True
