"""Tests for bevviz.shapes: the one validation helper and its named errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bevviz.shapes import as_float_array, as_int, check_finite, check_shape, field_error, positive_int

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
