"""Every page URL works as the first request after the app starts.

``app.py`` declares the app's pages with ``st.navigation``, and the shared sidebar (rig
source, BEV grid) and the wide layout come with it. But a ``pages/`` folder sits beside
``app.py`` (the layout keeps it there), and until some run has reached ``st.navigation``
Streamlit serves that folder the legacy way: a bookmarked ``/calibration_doctor`` opened
first after ``bevviz app`` ran ``pages/calibration_doctor.py`` on its own, without
``app.py`` (raw file names in the sidebar, no shared sidebar, a narrow page).

:func:`require_app`, the first call of every page, turns that run into a run of ``app.py``
on the same page: it ends the legacy mode (as ``st.navigation`` itself does) and asks for
a rerun, which Streamlit makes with ``app.py`` and the page the URL names.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

__all__ = ["require_app"]

#: Session key: this session already reran through app.py once (never a loop).
_RERAN = "_bevviz_reran_through_app"


def legacy_pages_mode() -> bool:
    """Whether Streamlit is running the ``pages/`` folder the legacy way (no ``app.py``)."""
    return getattr(PagesManager, "uses_pages_directory", None) is True


def require_app() -> None:
    """Make sure this page runs inside ``app.py``; call it first, before anything is drawn.

    A no-op once ``app.py`` has declared its navigation (every run but a first request for
    a page URL, and every test run). Otherwise it switches Streamlit to the navigation
    ``app.py`` declares and reruns, once per session: the rerun runs ``app.py`` and shows the
    page the URL named, with the shared sidebar.
    """
    if not legacy_pages_mode() or st.session_state.get(_RERAN):
        return
    st.session_state[_RERAN] = True
    PagesManager.uses_pages_directory = False  # what st.navigation does on its first call
    st.rerun()
