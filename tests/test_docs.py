"""The README as a front door and the docs as one linked set: every relative link resolves,
every command the text names exists, the README stays short with its picture and commands
on the first screen."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
FIRST_SCREEN = 40
MAX_README_LINES = 150

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PYTHON_M = re.compile(r"python3? -m ([A-Za-z_][\w.]*)")
SCRIPT = re.compile(r"\b(scripts/[\w./-]+\.py)\b")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a markdown page (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_named_exists(page):
    """`python -m X` names a runnable module of this repository, `scripts/x.py` a file."""
    text = page.read_text()
    missing = []
    for module in set(PYTHON_M.findall(text)):
        if module.split(".")[0] not in ("bevviz", "appkit"):
            continue  # pip, pytest, ...
        base = ROOT.joinpath(*module.split("."))
        if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
            missing.append(f"python -m {module}")
    missing += [s for s in set(SCRIPT.findall(text)) if not (ROOT / s).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: {sorted(missing)}"


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"
    first = "\n".join(lines[:FIRST_SCREEN])
    for needed in ("](docs/screenshot.jpg)", "make run", "make test"):
        assert needed in first, f"README.md: {needed!r} is not within its first {FIRST_SCREEN} lines"
    assert ".ci/run" in README.read_text(), "README.md no longer says what CI runs (.ci/run)"


def test_readme_links_the_docs_index_and_each_real_sample_licence():
    targets = set(relative_links(README))
    assert "docs/README.md" in targets
    for licence in sorted(ROOT.glob("sample_data/real_*/README.md")):
        assert str(licence.relative_to(ROOT)) in targets, f"README.md does not link {licence.relative_to(ROOT)}"


def test_docs_index_lists_every_page():
    listed = set(relative_links(DOCS / "README.md"))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages <= listed, f"docs/README.md does not list {sorted(pages - listed)}"
