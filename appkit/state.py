"""Session state's vocabulary: its keys, the loaded :class:`Scene`, and how caches hash them.

The bottom of ``appkit``: the scene is the use-case layer's :class:`bevviz.session.Scene`
(re-exported here), the rig sources (:mod:`appkit.sources`) load it through
:mod:`bevviz.session`, and :mod:`appkit.session` reads the current scene and grid out of
``st.session_state``. A failed load (bad upload, wrong dataroot) never replaces what is
loaded: the previous scene and grid stay in ``st.session_state`` and the error is shown
next to the control that caused it.
"""

from __future__ import annotations

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Camera, Rig
from bevviz.session import Scene

__all__ = ["GRID", "GRID_ERROR", "HASH_FUNCS", "SCENE", "SCENE_ERROR", "SCENE_REQUEST", "Scene"]

SCENE = "scene"            # the loaded Scene
SCENE_REQUEST = "scene_request"  # what the sidebar asked for when it was last loaded (or tried)
SCENE_ERROR = "scene_error"      # error message of the last failed load, or None
GRID = "grid"              # the current BEVGrid
GRID_ERROR = "grid_error"


#: hash_funcs for st.cache_data / st.cache_resource: hash bevviz objects by value, cheaply.
HASH_FUNCS = {
    Scene: lambda s: s.cache_key,
    Rig: lambda r: r.fingerprint,
    Camera: lambda c: c.fingerprint,
    BEVGrid: lambda g: repr(sorted(g.to_dict().items())),
}
