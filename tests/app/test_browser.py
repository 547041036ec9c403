"""End-to-end: serve the app with `streamlit run`, open every page in Debian's Chromium.

Asserts that no exception box or traceback shows and that the plotly charts render; saves a
screenshot per page under artifacts/screenshots/ (gitignored).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: navigation title -> (url path, screenshot name, least number of plotly charts expected)
PAGES = {
    "Rig & Projection": ("", "rig", 3),
    "Valid masks & coverage": ("coverage", "coverage", 5),
    "Padding lab": ("padding", "padding", 8),
    "BEV features": ("bev_features", "bev_features", 3),
    "Calibration Doctor": ("calibration_doctor", "calibration_doctor", 4),
    "Conventions": ("conventions", "conventions", 5),
    # Exports run on a button click; before it the page shows its settings and no chart.
    "NPU export": ("npu_export", "npu_export", 0),
    # Likewise an audit: the page opens on its two ways to get one.
    "Calibration audit": ("audit", "audit", 0),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent: install Debian's Chromium (apt-get install -y chromium); "
                    "CI's .ci/run does")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    port = free_port()
    (ROOT / "artifacts").mkdir(exist_ok=True)
    log = open(ROOT / "artifacts" / "streamlit_browser_test.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with {proc.returncode}; see artifacts/streamlit_browser_test.log")
    else:
        proc.terminate()
        pytest.fail("streamlit did not become healthy within 90 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def tab(server):
    """One browser tab for every page: later pages are reached through the sidebar's
    navigation (client-side, as a user would), so Streamlit's and plotly's scripts load once."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = b.new_page(viewport={"width": 1600, "height": 1100})
        page.goto(server, wait_until="domcontentloaded", timeout=60_000)
        wait_until_idle(page)  # the first run; every test leaves the app idle for the next
        yield page
        b.close()


def wait_until_idle(page, timeout_s: float = 120.0) -> None:
    """Wait for the app to finish running (no 'running' status widget) and charts to settle."""
    deadline = time.time() + timeout_s
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    quiet = 0
    while time.time() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').count() > 0 or \
            page.locator('[data-testid="stSpinner"]').count() > 0
        quiet = 0 if running else quiet + 1
        if quiet >= 4:
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"the app kept running for more than {timeout_s:.0f} s")


@pytest.mark.parametrize("title", list(PAGES))
def test_page_renders_without_errors(server, tab, title):
    path, stem, min_charts = PAGES[title]
    page = tab
    page.set_viewport_size({"width": 1600, "height": 1100})
    # Wait for the app's own navigation (exact titles): before the first run registers it,
    # Streamlit lists pages/ by file name ("calibration doctor"), and those links open a
    # page without the app's sidebar.
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=\"stSidebarNav\"] a')]"
        ".some(a => a.innerText.split('\\n').some(line => line.trim() === t))", arg=title, timeout=60_000)
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()
    page.wait_for_url(f"{server}/{path}", timeout=30_000)
    page.wait_for_function("t => document.querySelector('h1') && document.querySelector('h1').innerText.includes(t)",
                           arg=title, timeout=60_000)
    wait_until_idle(page)
    if min_charts:
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        wait_until_idle(page)
    # Streamlit scrolls inside its main container: grow the viewport to the content so the
    # screenshot shows the whole page.
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1600, "height": int(min(max(height, 1100), 7000))})
    page.wait_for_timeout(2000)  # let plotly relayout and draw WebGL traces
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{stem}.png"))
    assert page.locator('[data-testid="stException"]').count() == 0, \
        page.locator('[data-testid="stException"]').first.inner_text()
    assert "Traceback" not in page.locator("body").inner_text()
    # The sidebar keeps its values across navigation, even when the first run was cut short by
    # a click (the widgets once fell back to 0 there and sent 0 back).
    assert page.locator('input[aria-label="x max (m)"]').input_value() == "51.200"
    assert page.locator('[data-testid="stAlert"]').filter(has_text="keeping the previous").count() == 0
    assert page.locator(".js-plotly-plot").count() >= min_charts
    assert page.locator(".js-plotly-plot .main-svg").count() >= min_charts
