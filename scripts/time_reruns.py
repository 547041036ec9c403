"""Time warm reruns of every page after changing a display-only control (AppTest).

Usage: ``python scripts/time_reruns.py [--repeats 5] [--budget 0.5]``

For each page, on the default rig and the default BEV grid (BEVFormer's 200 x 200 x 4):
one cold run (fills the caches), one warm rerun, then ``repeats`` reruns each changing one
display-only control (colour mapping, a toggle, a slider) to a value it had not had before
on that page, so the cached arrays are reused but the page's figures are all rebuilt. Prints
the cold time and the median / max of the changed-control reruns per page, and exits with
status 1 if any median exceeds the budget.

This is a measurement, not a unit test: times depend on the machine and on what else runs.
AppTest's own overhead (script thread, recompiling the page, parsing the element tree) is
included, so a served app is a little faster.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: page -> list of (widget kind, key, values to cycle through): display-only controls only.
CONTROLS = {
    "pages/rig.py": [
        ("selectbox", "rig_color_by", ["pillar z", "BEV x", "BEV y", "depth"]),
        ("toggle", "rig_show_horizon", [False, True]),
        ("toggle", "rig_show_grid", [False, True]),
        ("select_slider", "rig_max_points", [2000, 1000]),
    ],
    "pages/coverage.py": [
        ("toggle", "cov_ring", [False, True]),
        ("toggle", "cov_show_panels", [True, False]),
    ],
    "pages/padding.py": [
        ("slider", "pad_row", [10, 30, 20]),
        ("radio", "pad_mode", ["nearest", "bilinear"]),
        ("toggle", "pad_align", [True, False]),
        ("selectbox", "pad_channel", [1, 2, 0]),
    ],
    "pages/bev_features.py": [
        ("radio", "bev_view_RGB", ["channel", "channel norm", "RGB composite"]),
        ("toggle", "bev_show_gt", [False, True]),
        ("selectbox", "bev_dl_which", ["LUT", "gather-scatter"]),
    ],
}


def _patch_navigation() -> None:
    """AppTest resets PagesManager.uses_pages_directory before each run; with a pages/
    folder next to app.py that sends reruns down Streamlit's legacy multipage path (the
    page file alone, without app.py). A served app clears the flag in st.navigation."""
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init


def _run(at) -> float:
    t = time.perf_counter()
    at.run()
    dt = time.perf_counter() - t
    if at.exception:
        raise SystemExit(f"exception: {at.exception[0].value}")
    return dt


def time_page(page: str, repeats: int) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    if page == "pages/rig.py":  # the default page: its first run also loads the sample rig
        cold = _run(at)
    else:
        at.run()
        at.switch_page(page)
        cold = _run(at)
    warm = _run(at)
    changes = []
    steps = [(kind, key, v) for kind, key, values in CONTROLS[page] for v in values]
    for kind, key, value in (steps * (1 + repeats // max(len(steps), 1)))[:max(repeats, len(steps))]:
        getattr(at, kind)(key=key).set_value(value)
        changes.append(_run(at))
    return {"cold": cold, "warm": warm, "median": statistics.median(changes), "max": max(changes),
            "n": len(changes)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8, help="reruns with a changed control per page")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds allowed for a warm rerun")
    args = parser.parse_args(argv)
    _patch_navigation()
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    print(f"{'page':<24} {'cold s':>8} {'warm s':>8} {'changed-control rerun s (median / max, n)':>44}")
    worst = 0.0
    for page in CONTROLS:
        r = time_page(page, args.repeats)
        worst = max(worst, r["median"])
        print(f"{page:<24} {r['cold']:8.2f} {r['warm']:8.3f} {r['median']:>27.3f} / {r['max']:.3f} (n={r['n']})")
    ok = worst <= args.budget
    print(f"worst median {worst:.3f} s: {'within' if ok else 'OVER'} the {args.budget} s budget")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
