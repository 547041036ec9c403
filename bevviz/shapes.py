"""Kept for import compatibility: the shape checks and named errors live in :mod:`bevviz.checks`."""

from bevviz.checks import (  # noqa: F401
    MAX_POLYGON_VERTICES,
    MAX_POLYGONS,
    ArrayLike,
    _fmt_value,
    as_float_array,
    as_int,
    check_choice,
    check_finite,
    check_polygons,
    check_shape,
    field_error,
    positive_int,
    to_numpy,
)
