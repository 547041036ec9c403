"""Streamlit glue for the bevviz app: session state, rig sources, cached computations, sidebar.

The only place outside ``pages/`` and ``app.py`` that imports Streamlit. The library
(``bevviz``) stays Streamlit-free; pages read what they need through :func:`current`.
"""

from appkit.session import current, current_grid, current_scene
from appkit.state import Scene

__all__ = ["Scene", "current", "current_grid", "current_scene"]
