"""bevviz.errors: the one bad-input error, and how a bug is worded."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from bevviz.camera import Camera
from bevviz.checks import check_shape, field_error, image_side
from bevviz.errors import InputError, bug_message


def test_field_error_is_an_input_error_carrying_field_value_and_camera():
    err = field_error("K", [[1, 2]], "must be 3 x 3", "CAM_FRONT")
    assert isinstance(err, InputError) and isinstance(err, ValueError)
    assert (err.field, err.value, err.camera) == ("K", [[1, 2]], "CAM_FRONT")
    assert str(err) == "camera CAM_FRONT: field 'K': must be 3 x 3 (got [[1, 2]])"


def test_shape_and_limit_checks_raise_input_errors():
    with pytest.raises(InputError) as info:
        check_shape(np.zeros((2, 3)), (3, 3), "K", camera="CAM_BACK")
    assert info.value.field == "K" and info.value.value == (2, 3) and info.value.camera == "CAM_BACK"
    with pytest.raises(InputError) as info:
        image_side(2**63, "width", "CAM_FRONT")
    assert info.value.field == "width" and info.value.value == 2**63 and "MAX_IMAGE_SIDE" in str(info.value)


def test_a_constructor_deep_in_the_library_raises_an_input_error_naming_the_camera():
    with pytest.raises(InputError) as info:
        Camera("CAM_X", np.full((3, 3), np.nan), np.eye(4), 1600, 900)
    assert info.value.camera == "CAM_X" and info.value.field == "K"


def test_within_prefixes_the_message_and_keeps_the_attributes():
    err = field_error("width", -1, "must be a positive integer", "CAM_FRONT").within("rig.json")
    assert str(err).startswith("rig.json: camera CAM_FRONT: field 'width'")
    assert (err.field, err.value, err.camera) == ("width", -1, "CAM_FRONT")


def test_an_input_error_survives_pickling_with_its_attributes():
    err = pickle.loads(pickle.dumps(field_error("sweeps", 0, "must be >= 1")))
    assert isinstance(err, InputError) and (err.field, err.value, err.camera) == ("sweeps", 0, None)
    assert "field 'sweeps'" in str(err)


def test_a_bug_is_worded_as_a_bug_with_where_it_happened_and_where_to_report_it():
    try:
        np.zeros(3) + np.zeros(4)
    except ValueError as exc:  # a numpy broadcasting error: a ValueError, but not the user's
        text = bug_message(exc)
    assert text.startswith("internal error (a bug in bevviz, not in your input): ValueError: operands")
    assert "[at test_errors.py:" in text and "report it" in text and "\n" not in text
