"""bevviz.limits: every limit is a documented constant, and its checks fail fast with a named error."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

import pytest

from bevviz import limits
from bevviz.limits import (
    CAMERA_NAME_MAX_CHARS,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_JSON_DEPTH,
    check_at_most,
    check_camera_name,
    check_image_size,
    check_json_like,
    escape_markdown,
    image_side,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "limits.md"
CONSTANTS = [name for name in limits.__all__ if name.isupper() and name != "CAMERA_NAME_RULE"]


@pytest.mark.parametrize("name", CONSTANTS)
def test_every_limit_has_a_reason_and_is_in_the_docs(name):
    source = Path(limits.__file__).read_text()
    assert re.search(rf"#: .+\n(#: .*\n)*{name} = ", source), f"{name} has no '#:' reason above it"
    assert f"`{name}`" in DOCS.read_text(), f"docs/limits.md does not list {name}"


def test_the_docs_state_every_value():
    text = DOCS.read_text()
    for name in CONSTANTS:
        value = getattr(limits, name)
        if isinstance(value, str):
            continue
        row = next(line for line in text.splitlines() if f"`{name}`" in line and line.startswith("|"))
        assert re.sub(r"[ ,_]", "", f"{value:,}") in re.sub(r"[ ,_]", "", row), (name, value, row)


def test_the_lidar_limit_is_the_one_in_limits():
    from bevviz import lidar
    from bevviz.io import pointcloud

    assert lidar.MAX_LIDAR_POINTS is limits.MAX_LIDAR_POINTS and pointcloud.MAX_LIDAR_POINTS is limits.MAX_LIDAR_POINTS


# --- the checks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [2 ** 63, 10 ** 20, 10 ** 400, 1e9, 1e20, float("inf"), float("nan")])
def test_image_side_refuses_huge_sides_naming_the_limit(value):
    with pytest.raises(ValueError, match=r"camera CAM_X: field 'width': (more than MAX_IMAGE_SIDE = 8192|must be a "
                                         r"positive integer) \(got "):
        image_side(value, "width", "CAM_X")


def test_image_side_keeps_good_sizes_and_the_old_messages():
    assert image_side(MAX_IMAGE_SIDE, "width") == MAX_IMAGE_SIDE and image_side(900.0, "height") == 900
    for bad in (0, -3, 2.5, "9", None, True):
        with pytest.raises(ValueError, match=r"field 'width': must be a positive integer"):
            image_side(bad, "width")


def test_huge_ints_show_as_digit_counts_not_overflow():
    with pytest.raises(ValueError, match=r"more than MAX_IMAGE_SIDE = 8192 \(got an integer of 401 digits\)"):
        image_side(10 ** 400, "width")
    with pytest.raises(ValueError, match=r"field 'n': more than L = 3 \(got 9223372036854775808\)"):
        check_at_most(2 ** 63, 3, "L", "n")
    check_at_most(3, 3, "L", "n")


def test_image_size_checks_side_and_pixel_count():
    check_image_size(MAX_IMAGE_SIDE, MAX_IMAGE_PIXELS // MAX_IMAGE_SIDE, "image")
    with pytest.raises(ValueError, match=r"field 'image': more than MAX_IMAGE_PIXELS = 33554432 "
                                         r"\(got 'a\.png: 8192 x 8192 px'\)"):
        check_image_size(8192, 8192, "image", label="a.png")
    with pytest.raises(ValueError, match=r"more than MAX_IMAGE_SIDE = 8192 \(got '30000 x 1 px'\)"):
        check_image_size(30000, 1, "image")


@pytest.mark.parametrize("name", ["CAM_FRONT", "cam 0", "Kamera-vorne.1", "前カメラ", "_x",
                                  "a" * CAMERA_NAME_MAX_CHARS])
def test_good_camera_names(name):
    assert check_camera_name(name) == name


@pytest.mark.parametrize("name, why", [
    ("", "must be a non-empty string"), ("   ", "must be a non-empty string"), (7, "must be a non-empty string"),
    ("x" * 10_000, "has 10000 characters, more than CAMERA_NAME_MAX_CHARS = 64"),
    ("CAM\x00FRONT", r"character '\\x00' is not allowed"), ("CAM\nFRONT", r"character '\\n' is not allowed"),
    ("CAM\u202eFRONT", r"character '\\u202e' is not allowed"),
    ("**bold**", r"character '\*' is not allowed"), ("[x](javascript:alert(1))", r"character '\[' is not allowed"),
    ("<b>CAM</b>", "character '<' is not allowed"), ("../CAM", "character '/' is not allowed"),
    ("-CAM", "bad first or last character"), (" CAM", "bad first or last character"),
    ("CAM ", "bad first or last character"),
])
def test_bad_camera_names_say_the_rule(name, why):
    with pytest.raises(ValueError, match=rf"camera #3: field 'name': {why}"):
        check_camera_name(name, "#3")


def test_a_long_name_is_shown_truncated():
    with pytest.raises(ValueError) as info:
        check_camera_name("x" * 10_000)
    assert len(str(info.value)) < 600


def test_json_like_depth_fails_fast_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"field 'json': more than MAX_JSON_DEPTH = {MAX_JSON_DEPTH} "
                                         rf"\(got 'nested at least {MAX_JSON_DEPTH + 1} deep'\)"):
        check_json_like({"cameras": deep})
    assert time.perf_counter() - t0 < 0.1
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="MAX_JSON_DEPTH"):
        check_json_like(loop)
    check_json_like({"a": [[1, {"b": (2,)}]]})
    with pytest.raises(ValueError, match=r"field 'json': object keys must be strings \(got 3\)"):
        check_json_like({"a": {3: 1}})


def test_escape_markdown_leaves_nothing_to_render():
    assert escape_markdown("CAM_FRONT") == r"CAM\_FRONT"
    assert escape_markdown("**x** [a](b) <b> $x$ :red[y]") == (
        r"\*\*x\*\* \[a\]\(b\) \<b\> \$x\$ \:red\[y\]")
    assert escape_markdown("a\nb\x00\u202e") == r"a\\nb\\x00\\u202e"
    assert escape_markdown(42) == "42"


def test_the_checks_do_not_allocate():
    tracemalloc.start()
    try:
        for value in (2 ** 63, 10 ** 400):
            with pytest.raises(ValueError):
                image_side(value, "width")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_the_fuzz_budgets_in_the_docs_are_the_tests_own():
    root = DOCS.parents[1]
    rows = re.findall(r"^\| .+ \| `(tests/[\w/]+\.py)::(\w+)` \| (\d+) \| (\d+) ms \|$", DOCS.read_text(), re.M)
    assert len(rows) >= 6
    for path, name, examples, deadline in rows:
        source = (root / path).read_text()
        budget = re.search(rf"@settings\(max_examples=(\d+), deadline=(\d+)[,)](?:(?!\ndef ).)*\ndef {name}\(",
                           source, re.S)
        assert budget, f"{path}::{name} has no @settings(max_examples=..., deadline=...)"
        assert budget.groups() == (examples, deadline), (name, budget.groups(), (examples, deadline))
