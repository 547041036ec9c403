"""What a check says as JSON (bevviz.session.report): strict JSON, whatever the numbers."""

from __future__ import annotations

import json
import math

from bevviz.session.report import finite, json_safe


def test_non_finite_numbers_become_null_at_any_depth():
    doc = {"a": math.inf, "b": [1.0, -math.inf, {"c": math.nan, "d": (2.5, None)}], "e": "inf", "f": 3}
    safe = json_safe(doc)
    assert safe == {"a": None, "b": [1.0, None, {"c": None, "d": [2.5, None]}], "e": "inf", "f": 3}
    json.dumps(safe, allow_nan=False)  # strict JSON: no Infinity or NaN tokens
    assert finite(math.nan) is None and finite(1.5) == 1.5 and finite(None) is None
