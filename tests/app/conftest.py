"""AppTest helpers: run app.py from the repository root on a small BEV grid; read markdown as shown."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `appkit` lives beside app.py, outside the bevviz package
    sys.path.insert(0, str(ROOT))

#: A 50 x 50 grid (2.048 m cells) keeps every page to a second or two under test.
SMALL_GRID = {"grid_res": 2.048}

#: CommonMark with GitHub's tables and strikethrough: what Streamlit's markdown builds on.
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def shown(markdown: str) -> str:
    """What an element's markdown source reads as once rendered: tags dropped, entities
    decoded. AppTest gives the source (``element.value``); user text escaped for markdown
    reads literally here, and unescaped markup (``**x**``, ``<b>``, ``[a](b)``) does not.
    """
    return html.unescape(re.sub(r"<[^>]*>", "", _MARKDOWN.render(markdown))).strip()


def make_app(page: str | None = None, **state):
    """An AppTest of app.py on the small grid, run once (and on ``page`` when given)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in {**SMALL_GRID, **state}.items():
        at.session_state[k] = v
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


@pytest.fixture(autouse=True)
def navigation_v2_on_every_run(monkeypatch):
    """Keep Streamlit on the st.navigation path for every AppTest run.

    AppTest resets ``PagesManager.uses_pages_directory`` before each run, and because a
    ``pages/`` folder sits beside app.py the flag comes back True: every run after the first
    then takes Streamlit's legacy multipage path and executes the page file alone (no
    app.py, so no sidebar and no navigation). A served app calls ``st.navigation`` once,
    which clears the flag for good; this fixture does the same before each run.
    """
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


@pytest.fixture
def app():
    """Factory: ``app(page=None, **session_state)`` -> a run AppTest."""
    return make_app
