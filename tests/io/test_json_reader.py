"""The one bounded JSON reader: size, depth, duplicate keys, numbers, each a named error."""

from __future__ import annotations

import pytest

from bevviz.errors import InputError
from bevviz.io.json_reader import json_depth, parse_json, read_json


def test_a_valid_text_reads_as_json():
    assert parse_json('{"a": [1, 2.5, "]]]", null, true]}') == {"a": [1, 2.5, "]]]", None, True]}
    assert json_depth('{"a": [1, "[[[["]}') == 2 and json_depth("3") == 0


@pytest.mark.parametrize(("text", "named"), [
    ("[" * 100_000 + "]" * 100_000, "MAX_JSON_DEPTH"),
    ('{"k": 1, "k": 2}', "field 'k': the key appears twice"),
    ("[1e999]", "finite"),
    ("[-Infinity]", "NaN and Infinity"),
    ("[" + "1" * 400 + "]", "309 digits"),
    ("[" + "9" * 309 + "]", "fit in a float64"),
    ('{"a": ', "malformed JSON at line 1"),
    (b"\xff\xfe[]", "not UTF-8"),
])
def test_hostile_text_is_a_named_error(text, named):
    with pytest.raises(InputError, match=named):
        parse_json(text, "t.json")


def test_non_finite_numbers_are_read_for_a_caller_that_checks_them():
    values = parse_json("[NaN, 1e999]", finite=False)
    assert values[0] != values[0] and values[1] == float("inf")


def test_a_file_is_bounded_before_it_is_read_and_named(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: refused from its size
    with pytest.raises(InputError, match="field 'big.json': more than MAX_JSON_BYTES"):
        read_json(big)
    with pytest.raises(InputError, match="field 'gone.json': cannot be read"):
        read_json(tmp_path / "gone.json")
    (tmp_path / "dup.json").write_text('[{"a": 1, "a": 1}]')
    with pytest.raises(InputError, match="dup.json: field 'a': the key appears twice"):
        read_json(tmp_path / "dup.json")
