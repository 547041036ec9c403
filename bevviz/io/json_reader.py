"""The one JSON reader of bevviz: every JSON text the project reads goes through it, within bounds.

A rig JSON (file or upload), a frame folder's ``ignore.json`` and ``exposure.json``, the
tables of a nuScenes dataroot and an audit's ``manifest.json`` (its settings) are data a
user brings. Each way such a text can be hostile ends in an
:class:`~bevviz.errors.InputError` that names the field (the file) and the value, never in
a ``RecursionError``, a ``MemoryError`` or a silent surprise:

- larger than the caller's byte limit: refused from ``os.stat`` (a file) or the length (a
  text), before it is read or parsed;
- nested deeper than :data:`~bevviz.checks.MAX_JSON_DEPTH` (or the caller's limit): found
  by a linear scan of the brackets (strings skipped), before the decoder recurses;
- an object with a key twice (``{"a": 1, "a": 2}``: Python's ``json`` keeps the last
  silently): refused, naming the key;
- a number that is not a finite float64: ``NaN``, ``Infinity``, ``1e999``, an integer of
  more than 309 digits (Python refuses to convert beyond 4300) or beyond float64's range;
- not UTF-8, or malformed: the line and column.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from bevviz.checks import MAX_JSON_DEPTH, MiB, check_at_most, field_error
from bevviz.errors import InputError

__all__ = ["MAX_JSON_BYTES", "MAX_NUMBER_DIGITS", "MAX_TABLE_BYTES", "json_depth", "parse_json", "read_json"]

#: Largest small JSON file read (ignore polygons, exposure, an audit manifest): each is a few
#: KB; 16 MiB holds MAX_POLYGONS polygons of MAX_POLYGON_VERTICES vertices for 32 cameras.
MAX_JSON_BYTES = 16 * MiB
#: Largest nuScenes table read: v1.0-trainval's largest (sample_data.json) is about 1.3 GB.
MAX_TABLE_BYTES = 4096 * MiB
#: Longest integer literal read: 309 digits already reach float64's largest value (1.8e308).
MAX_NUMBER_DIGITS = 309

#: A JSON string literal, or an unterminated one running to the end of the text (possessive
#: quantifiers: linear time on any text).
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")


def json_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in a JSON text (brackets in strings ignored), in
    linear time and without recursion: the depth ``json.loads`` would recurse to.

    Args:
        text: The JSON text (well-formed or not).

    Returns:
        The depth (0 for a scalar; 1 for ``[]``).
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets.encode("ascii"), np.uint8)
    steps = np.ones(codes.size, np.int32)
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    return int(np.cumsum(steps, dtype=np.int32).max())


class _Decoder:
    """The hooks ``json.loads`` calls, each refusing what the module docstring lists."""

    def __init__(self, field: str, finite: bool):
        self.field = field
        self.finite = finite

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise field_error(key, value, "the key appears twice in one JSON object")
            out[key] = value
        return out

    def integer(self, literal: str) -> int:
        digits = len(literal.lstrip("-"))
        if digits > MAX_NUMBER_DIGITS:
            raise field_error(self.field, f"an integer of {digits} digits",
                              f"numbers must fit in a float64 (at most {MAX_NUMBER_DIGITS} digits)")
        value = int(literal)
        try:
            float(value)
        except OverflowError:
            raise field_error(self.field, literal[:20] + "...", "numbers must fit in a float64") from None
        return value

    def real(self, literal: str) -> float:
        value = float(literal)
        if self.finite and not math.isfinite(value):
            raise field_error(self.field, literal[:40], "numbers must be finite float64 values")
        return value

    def constant(self, literal: str) -> float:
        if self.finite:
            raise field_error(self.field, literal, "NaN and Infinity are not JSON numbers")
        return float(literal)


def parse_json(text: str | bytes, field: str = "json", *, max_bytes: int = MAX_JSON_BYTES,
               limit_name: str = "MAX_JSON_BYTES", max_depth: int = MAX_JSON_DEPTH, finite: bool = True) -> Any:
    """Parse a JSON text within bounds (module docstring).

    Args:
        text: The text, or its UTF-8 bytes.
        field: What the errors call the text (a file name, ``"json"``).
        max_bytes: Longest text accepted, in characters (bytes for ``bytes``).
        limit_name: The constant name of ``max_bytes`` for the message.
        max_depth: Deepest nesting of arrays and objects.
        finite: Refuse ``NaN``, ``Infinity`` and floats beyond float64 here. ``False`` (the
            rig reader) reads them as float NaN / inf for a caller that checks every number
            where it can name the camera and the field.

    Returns:
        The decoded value (dicts, lists, str, int, float, bool, None).

    Raises:
        InputError: naming ``field`` (or the key given twice) and the value.
    """
    unit = "bytes" if isinstance(text, bytes | bytearray) else "characters"
    check_at_most(len(text), max_bytes, limit_name, field, shown=f"{len(text)} {unit}")
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise field_error(field, f"byte {e.start}", "is not UTF-8 text") from None
    depth = json_depth(text)
    check_at_most(depth, max_depth, "MAX_JSON_DEPTH", field, shown=f"nested {depth} deep")
    hooks = _Decoder(field, finite)
    try:
        return json.loads(text, object_pairs_hook=hooks.pairs, parse_int=hooks.integer, parse_float=hooks.real,
                          parse_constant=hooks.constant)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        line = lines[e.lineno - 1].strip()[:80] if 0 < e.lineno <= len(lines) else ""
        raise field_error(field, line, f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None


def read_json(path: str | os.PathLike, field: str | None = None, *, max_bytes: int = MAX_JSON_BYTES,
              limit_name: str = "MAX_JSON_BYTES", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Read and parse a JSON file within bounds; its size is checked before it is read.

    Args:
        path: The file.
        field: What the errors call it (default: the file name, e.g. ``"ignore.json"``).
        max_bytes: Largest file accepted, in bytes.
        limit_name: The constant name of ``max_bytes`` for the message.
        max_depth: Deepest nesting of arrays and objects.

    Returns:
        The decoded value.

    Raises:
        InputError: naming ``field``: missing or unreadable, too large, or any refusal of
            :func:`parse_json`.
    """
    p = Path(path)
    field = p.name if field is None else field
    try:
        size = p.stat().st_size
        check_at_most(size, max_bytes, limit_name, field, shown=f"{p}: {size} bytes")
        with open(p, "rb") as fh:
            data = fh.read(size + 1)  # what the stat said (a file grown since is refused below)
    except OSError as e:
        raise field_error(field, str(p), f"cannot be read ({e.strerror or e})") from None
    try:
        return parse_json(data, field, max_bytes=max_bytes, limit_name=limit_name, max_depth=max_depth)
    except InputError as e:
        if e.field == field:
            raise
        raise e.within(str(p)) from None  # a key given twice is named by the key: say in which file

