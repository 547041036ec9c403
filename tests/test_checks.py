"""bevviz.checks: the one validation helper for shapes, named errors, and every limit on input as a
documented constant whose check fails fast with a named error."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from bevviz import checks, lidar
from bevviz.checks import (
    CAMERA_NAME_MAX_CHARS,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_JSON_DEPTH,
    as_float_array,
    as_int,
    check_at_most,
    check_camera_name,
    check_finite,
    check_image_size,
    check_json_like,
    check_shape,
    escape_markdown,
    field_error,
    image_side,
    positive_int,
)
from bevviz.errors import InputError
from bevviz.io import pointcloud

# --- field_error ---------------------------------------------------------------------------

def test_field_error_names_camera_field_and_value():
    err = field_error("K", 42, "must be a matrix", camera="CAM_FRONT")
    assert isinstance(err, ValueError)
    assert str(err) == "camera CAM_FRONT: field 'K': must be a matrix (got 42)"


def test_field_error_without_camera_has_no_camera_prefix():
    assert str(field_error("resolution", -1.0, "must be > 0")) == "field 'resolution': must be > 0 (got -1.0)"


def test_field_error_prints_arrays_and_tensors_compactly():
    msg = str(field_error("t", np.array([1.5, 2.0, np.nan]), "bad"))
    assert "1.5" in msg and "nan" in msg and "\n" not in msg
    msg_t = str(field_error("t", torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "bad"))
    assert "[[1., 2.], [3., 4.]]" in msg_t


def test_field_error_truncates_long_values():
    msg = str(field_error("name", "x" * 1000, "too long"))
    assert len(msg) < 200 and msg.endswith("...)")


# --- check_shape ----------------------------------------------------------------------------

def test_check_shape_accepts_exact_and_wildcard_dims():
    assert check_shape(np.zeros((3, 3)), (3, 3), "K") == {}
    assert check_shape(np.zeros((2, 5)), (None, 5), "x") == {}


def test_check_shape_rejects_wrong_size_with_names_and_shapes():
    with pytest.raises(ValueError, match=r"camera CAM_BACK: field 'K': expected shape \(3, 3\), got shape \(3, 4\)"):
        check_shape(np.zeros((3, 4)), (3, 3), "K", camera="CAM_BACK")


def test_check_shape_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"field 'K'.*got shape \(9,\)"):
        check_shape(np.zeros(9), (3, 3), "K")


def test_check_shape_leading_ellipsis():
    check_shape(torch.zeros(4, 5, 6, 3), ("...", 3), "points")
    check_shape(torch.zeros(3), ("...", 3), "points")
    with pytest.raises(ValueError, match=r"field 'points'.*got shape \(4, 2\)"):
        check_shape(torch.zeros(4, 2), ("...", 3), "points")
    with pytest.raises(ValueError, match="field 'points'"):
        check_shape(torch.zeros(()), ("...", 3), "points")


def test_check_shape_named_dims_must_agree_and_are_returned():
    assert check_shape(np.zeros((6, 3, 3)), ("N", 3, 3), "K") == {"N": 6}
    assert check_shape(np.zeros((2, 4, 4)), ("A", "B", "B"), "m") == {"A": 2, "B": 4}
    with pytest.raises(ValueError, match=r"expected shape \('A', 'B', 'B'\), got shape \(2, 4, 5\)"):
        check_shape(np.zeros((2, 4, 5)), ("A", "B", "B"), "m")


def test_check_shape_on_plain_sequences():
    check_shape([[1, 2, 3]], (1, 3), "row")
    with pytest.raises(ValueError, match="field 'row'"):
        check_shape([1, 2, 3], (1, 3), "row")


# --- check_finite / as_float_array / positive_int -------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_finite_rejects_nan_and_inf(bad):
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'translation': must be finite"):
        check_finite(np.array([0.0, bad, 1.0]), "translation", camera="CAM_FRONT")
    with pytest.raises(ValueError, match="field 'x'"):
        check_finite(torch.tensor([bad]), "x")


def test_check_finite_accepts_finite():
    check_finite(np.array([0.0, -1e300, 1e300]), "x")
    check_finite(torch.zeros(2, 2), "x")


def test_as_float_array_converts_lists_and_tensors_to_float64():
    a = as_float_array([[1, 2], [3, 4]], "K")
    assert a.dtype == np.float64 and a.shape == (2, 2)
    t = as_float_array(torch.ones(3, dtype=torch.float32, requires_grad=True), "t")
    assert t.dtype == np.float64 and np.all(t == 1.0)


@pytest.mark.parametrize("bad", ["abc", [[1, 2], [3]], {"a": 1}])
def test_as_float_array_rejects_non_numeric_with_name(bad):
    with pytest.raises(ValueError, match=r"camera C: field 'K': must be numeric"):
        as_float_array(bad, "K", camera="C")


@pytest.mark.parametrize("good, expected", [(1, 1), (1600, 1600), (np.int64(7), 7), (900.0, 900), (np.float32(3.0), 3)])
def test_positive_int_accepts(good, expected):
    out = positive_int(good, "width")
    assert out == expected and type(out) is int


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "1600", None, np.nan, np.inf, -np.inf])
def test_positive_int_rejects_with_field_and_value(bad):
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'width': must be a positive integer \(got "):
        positive_int(bad, "width", camera="CAM_FRONT")


def test_as_int_accepts_whole_numbers_of_any_sign_and_honours_minimum():
    assert as_int(-3, "x0") == -3 and as_int(4.0, "x0") == 4 and as_int(np.int64(7), "x0") == 7
    assert as_int(2, "n", minimum=2) == 2
    for bad, pattern in [(1.5, r"field 'x0': must be an integer \(got 1\.5\)"),
                         (True, r"field 'x0': must be an integer"),
                         ("3", r"field 'x0': must be an integer \(got '3'\)"),
                         (float("nan"), r"field 'x0': must be an integer")]:
        with pytest.raises(ValueError, match=pattern):
            as_int(bad, "x0")
    with pytest.raises(ValueError, match=r"field 'n': must be an integer >= 2 \(got 1\)"):
        as_int(1, "n", minimum=2)


@pytest.mark.parametrize("huge", [10 ** 400, -(10 ** 400), 10 ** 5000], ids=["1e400", "-1e400", "1e5000"])
def test_huge_ints_are_named_errors_not_overflow(huge):
    assert as_int(huge, "n") == huge
    with pytest.raises(ValueError, match=r"field 'n': must be an integer >= 0 \(got an integer of (\d+|over 4000) "
                                         r"digits\)"):
        as_int(-abs(huge), "n", minimum=0)
    with pytest.raises(ValueError, match=r"field 'K': must be numeric \(got (\[-?1000|a list holding an integer too)"):
        as_float_array([huge], "K")
    assert "digits" in str(field_error("n", huge, "bad")) and len(str(field_error("n", huge, "bad"))) < 200


# --- limits: every bound is a documented constant ---------------------------------------------
DOCS = Path(__file__).resolve().parents[1] / "docs" / "limits.md"
CONSTANTS = [name for name in checks.__all__ if name.isupper() and name != "CAMERA_NAME_RULE"]


@pytest.mark.parametrize("name", CONSTANTS)
def test_every_limit_has_a_reason_and_is_in_the_docs(name):
    source = Path(checks.__file__).read_text()
    assert re.search(rf"#: .+\n(#: .*\n)*{name} = ", source), f"{name} has no '#:' reason above it"
    assert f"`{name}`" in DOCS.read_text(), f"docs/limits.md does not list {name}"


def test_the_docs_state_every_value():
    text = DOCS.read_text()
    for name in CONSTANTS:
        value = getattr(checks, name)
        if isinstance(value, str):
            continue
        row = next(line for line in text.splitlines() if f"`{name}`" in line and line.startswith("|"))
        assert re.sub(r"[ ,_]", "", f"{value:,}") in re.sub(r"[ ,_]", "", row), (name, value, row)


def test_the_lidar_limit_is_the_one_in_checks():
    assert lidar.MAX_LIDAR_POINTS is checks.MAX_LIDAR_POINTS and pointcloud.MAX_LIDAR_POINTS is checks.MAX_LIDAR_POINTS


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


class _Tripwire(list):
    """A list that fails the test if anything walks into it."""

    def __iter__(self):
        raise AssertionError("the depth check walked past the first container beyond its limit")


def test_json_like_depth_fails_fast_without_recursion():
    # 100 000 levels (far past Python's recursion limit) with a tripwire at the bottom: the
    # walk must stop at the first container beyond the limit, without recursing
    deep: list = [_Tripwire([[1]])]
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match=rf"field 'json': more than MAX_JSON_DEPTH = {MAX_JSON_DEPTH} "
                                         rf"\(got 'nested at least {MAX_JSON_DEPTH + 1} deep'\)"):
        check_json_like({"cameras": deep})
    shallow: list = [_Tripwire([1])]  # the tripwire: the first container past the limit
    for _ in range(MAX_JSON_DEPTH - 1):
        shallow = [shallow]
    with pytest.raises(ValueError, match=rf"nested at least {MAX_JSON_DEPTH + 1} deep"):
        check_json_like(shallow)
    with pytest.raises(AssertionError, match="walked past"):  # the tripwire works
        check_json_like(shallow, limit=MAX_JSON_DEPTH + 1)
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


def test_polygons_are_validated_and_bounded():
    assert checks.check_polygons([[(0, 0), (4, 0), (4, 3)]], "ignore") == [[[0.0, 0.0], [4.0, 0.0], [4.0, 3.0]]]
    for bad, pattern in [("x", r"must be a list of polygons"), ([[(0, 0), (1, 1)]], r"polygon 0 must hold at least"),
                         ([[(0, 0), (1, float("nan")), (2, 2)]], r"polygon 0 must hold at least three finite"),
                         ([[(0, 0)] * (checks.MAX_POLYGON_VERTICES + 1)], r"polygon 0: at most MAX_POLYGON_VERTICES"),
                         ([[(0, 0), (1, 0), (0, 1)]] * (checks.MAX_POLYGONS + 1), r"at most MAX_POLYGONS = 64")]:
        with pytest.raises(InputError, match=rf"camera C: field 'ignore': {pattern}"):
            checks.check_polygons(bad, "ignore", camera="C")
