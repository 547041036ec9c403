"""bevviz: an interactive geometry debugger for multi-camera BEV perception.

Run ``bevviz app`` (or ``streamlit run app.py`` in a checkout): it opens on the embedded
sample rig with no set-up; an installed package carries this script and its pages. The
sidebar (rig source, BEV grid, validity settings) is shared by every page; adding a page
is one line in ``PAGES``.
"""

import streamlit as st

st.set_page_config(page_title="bevviz", page_icon="🚗", layout="wide")

PAGES = [
    st.Page("pages/rig.py", title="Rig & Projection", icon=":material/photo_camera:", default=True),
    st.Page("pages/coverage.py", title="Valid masks & coverage", icon=":material/grid_on:"),
    st.Page("pages/padding.py", title="Padding lab", icon=":material/border_outer:"),
    st.Page("pages/bev_features.py", title="BEV features", icon=":material/layers:"),
    st.Page("pages/npu_export.py", title="NPU export", icon=":material/memory:"),
    st.Page("pages/calibration_doctor.py", title="Calibration Doctor", icon=":material/healing:"),
    st.Page("pages/conventions.py", title="Conventions", icon=":material/explore:"),
    st.Page("pages/audit.py", title="Calibration audit", icon=":material/fact_check:"),
]

page = st.navigation(PAGES)
# Imported after st.navigation on purpose: until the first run reaches st.navigation,
# Streamlit shows its legacy listing of pages/ (raw file names, no shared sidebar), and
# appkit pulls in torch (seconds). Registered first, that window is a fraction of a second.
# A page URL opened as the very first request runs its page file alone, without this
# script; the page's first call (appkit.navigation.require_app) reruns it through here.
from appkit.guards import shown_errors  # noqa: E402
from appkit.sidebar import render_sidebar, show_load_error  # noqa: E402

render_sidebar()
show_load_error()
# Bad input a page did not catch is shown as such; anything else as a bug in bevviz (what,
# where, where to report it), never as a traceback that reads like the user's fault.
with shown_errors(page.title):
    page.run()
