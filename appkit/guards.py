"""Page-side guards: show bad input as a message (never a traceback) and stop the page; show a bug as a bug.

Messages quote user-provided values (file names, camera names, numbers as typed), so they
go through :func:`bevviz.checks.escape_markdown` before ``st.error`` / ``st.warning``
render them as markdown.
"""

from __future__ import annotations

from contextlib import contextmanager

import streamlit as st

from appkit.state import Scene
from bevviz.checks import escape_markdown
from bevviz.errors import InputError, bug_message


@contextmanager
def shown_errors(what: str):
    """Run a block; an :class:`~bevviz.errors.InputError` from bevviz (which names camera, field
    and value) becomes ``st.error`` and stops the rest of the page (the sidebar and anything
    above still show). Any other exception is a bug in bevviz: shown as one (what, where,
    where to report it), never as the user's mistake, and the page stops too.

    Args:
        what: What the block does, in the app's own words (shown unescaped, before the
            escaped message).
    """
    try:
        yield
    except InputError as e:
        st.error(f"{what}: {escape_markdown(e)}")
        st.stop()
    except Exception as e:  # not the user's fault
        st.error(f"{what}: {escape_markdown(bug_message(e))}")
        st.stop()


def require_images(scene: Scene, what: str) -> bool:
    """Whether every camera has an image; otherwise a warning saying which are missing."""
    missing = [n for n in scene.rig.names if n not in scene.images]
    if missing:
        st.warning(f"{what} needs an image for every camera; missing: {escape_markdown(', '.join(missing))}. "
                   "Upload them in the sidebar (matched by file name or camera name).")
        return False
    return True
