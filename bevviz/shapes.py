"""The one place for input validation: shapes, finiteness and named errors.

Every check raises :class:`bevviz.errors.InputError` (a ``ValueError``) whose message names
the field (and the camera, when there is one) and the offending value, and which carries
them as ``.field``, ``.value`` and ``.camera``, so an app can show it verbatim with
``st.error`` and a command can exit 2 for it alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch

from bevviz.errors import InputError

ArrayLike = "np.ndarray | torch.Tensor | Sequence[float]"


def _fmt_value(value: object, limit: int = 120) -> str:
    """Short printable form of a value for error messages."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=6, separator=", ", threshold=20)
        text = " ".join(text.split())
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        # 2**63 still shows in full; 10**400 (or past Python's 4300-digit str limit) does not
        text = f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'over 4000'} digits"
    else:
        try:
            text = repr(value)
        except ValueError:  # holds an int past Python's 4300-digit str limit
            text = f"a {type(value).__name__} holding an integer too long to print"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def field_error(field: str, value: object, problem: str, camera: str | None = None) -> InputError:
    """Build the project's standard error: ``camera CAM_FRONT: field K: <problem> (got <value>)``.

    Args:
        field: Name of the offending field (e.g. ``"K"``, ``"rotation"``).
        value: The offending value, printed in the message.
        problem: What is wrong, in words.
        camera: Camera name, when the field belongs to a camera.

    Returns:
        An :class:`~bevviz.errors.InputError` (a ``ValueError``) ready to raise.
    """
    where = f"camera {camera}: " if camera is not None else ""
    return InputError(f"{where}field '{field}': {problem} (got {_fmt_value(value)})", field, value, camera)


def check_shape(
    value: np.ndarray | torch.Tensor,
    shape: Sequence[int | None | str],
    field: str,
    camera: str | None = None,
) -> dict[str, int]:
    """Check that ``value`` has ``shape``; ``None`` matches any size, ``"..."`` any leading dims.

    Named dimensions (strings other than ``"..."``) must agree wherever they appear and are
    returned, so callers can compare sizes between arguments.

    Args:
        value: Array or tensor to check.
        shape: Expected shape, e.g. ``(3, 3)``, ``("...", 3)``, ``("N", "C", None, None)``.
        field: Field name for the error message.
        camera: Optional camera name for the error message.

    Returns:
        Mapping from named dimensions to their sizes.

    Raises:
        InputError: naming the field, the expected shape and the actual shape (``.value``
            is the actual shape).
    """
    actual = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
    spec = list(shape)
    bad = InputError(
        (f"camera {camera}: " if camera is not None else "")
        + f"field '{field}': expected shape {tuple(shape)}, got shape {tuple(actual)}",
        field, tuple(actual), camera)
    if spec and spec[0] == "...":
        tail = spec[1:]
        if len(actual) < len(tail):
            raise bad
        actual_tail = actual[len(actual) - len(tail):] if tail else ()
        spec, actual = tail, actual_tail
    elif len(spec) != len(actual):
        raise bad
    names: dict[str, int] = {}
    for want, got in zip(spec, actual):
        if want is None:
            continue
        if isinstance(want, str):
            if names.setdefault(want, got) != got:
                raise bad
        elif want != got:
            raise bad
    return names


def check_finite(value: np.ndarray | torch.Tensor, field: str, camera: str | None = None) -> None:
    """Raise a named ``InputError`` if ``value`` holds NaN or inf."""
    arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if not np.all(np.isfinite(arr)):
        raise field_error(field, value, "must be finite (no NaN or inf)", camera)


def as_float_array(value: object, field: str, camera: str | None = None) -> np.ndarray:
    """Convert ``value`` to a float64 numpy array, or raise a named ``InputError``."""
    try:
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy().astype(np.float64)
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float64
        raise field_error(field, value, "must be numeric", camera) from None


def check_choice(value: object, choices: Iterable, field: str, camera: str | None = None) -> None:
    """Raise a named ``InputError`` unless ``value`` is one of ``choices``.

    The message lists the choices: ``field 'mode': must be one of ('bilinear', ...) (got 'x')``.
    """
    options = tuple(choices)
    if value not in options:
        raise field_error(field, value, f"must be one of {options}", camera)


def as_int(value: object, field: str, camera: str | None = None, minimum: int | None = None) -> int:
    """``value`` as an ``int`` (whole floats accepted), at least ``minimum`` if given, or a
    named ``InputError``."""
    what = "an integer" if minimum is None else (
        "a positive integer" if minimum == 1 else f"an integer >= {minimum}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise field_error(field, value, f"must be {what}", camera)
    # Ints are compared as ints: float(10**400) would raise OverflowError.
    whole = isinstance(value, (int, np.integer)) or (np.isfinite(value) and float(value) == int(value))
    if not whole or (minimum is not None and int(value) < minimum):
        raise field_error(field, value, f"must be {what}", camera)
    return int(value)


def positive_int(value: object, field: str, camera: str | None = None) -> int:
    """Return ``value`` as a positive ``int`` or raise a named ``InputError``."""
    return as_int(value, field, camera, minimum=1)


#: Most polygons per camera, and vertices per polygon, of an ignore mask (a rig file is
#: small: a car's body needs a handful of polygons of a few dozen vertices).
MAX_POLYGONS = 64
MAX_POLYGON_VERTICES = 4096
#: Largest |u| or |v| of a polygon vertex, in pixels: 128 times MAX_IMAGE_SIDE (8192). A vertex
#: may lie outside its image (the polygon is clipped), but 1e300 cannot be rasterised (it was
#: dropped silently, with a numpy overflow warning).
MAX_POLYGON_COORD = 1 << 20


def check_polygons(value: object, field: str, camera: str | None = None) -> list[list[list[float]]]:
    """Polygons in pixels, validated: a list of polygons, each at least three finite (u, v).

    Args:
        value: The polygons as given (JSON lists, arrays).
        field: Field name for errors (``"ignore"``).
        camera: Camera name for errors.

    Returns:
        The polygons as plain lists of [u, v] floats.

    Raises:
        InputError: naming ``field``, the camera, the polygon's index and the value.
    """
    if not isinstance(value, (list, tuple)):
        raise field_error(field, value, "must be a list of polygons, each a list of (u, v) pixels", camera)
    if len(value) > MAX_POLYGONS:
        raise field_error(field, f"{len(value)} polygons", f"at most MAX_POLYGONS = {MAX_POLYGONS}", camera)
    out = []
    for k, poly in enumerate(value):
        if isinstance(poly, (str, bytes)) or not hasattr(poly, "__len__"):
            raise field_error(field, poly, f"polygon {k} must be a list of (u, v) pixels", camera)
        if len(poly) > MAX_POLYGON_VERTICES:
            raise field_error(field, f"{len(poly)} vertices", f"polygon {k}: at most MAX_POLYGON_VERTICES = "
                              f"{MAX_POLYGON_VERTICES}", camera)
        try:
            arr = np.asarray(poly, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise field_error(field, poly, f"polygon {k} must be a list of (u, v) pixels", camera) from None
        if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) < 3 or not np.all(np.isfinite(arr)):
            raise field_error(field, poly, f"polygon {k} must hold at least three finite (u, v) pixels", camera)
        if np.abs(arr).max() > MAX_POLYGON_COORD:
            raise field_error(field, poly, f"polygon {k}: a coordinate beyond +-MAX_POLYGON_COORD = "
                              f"{MAX_POLYGON_COORD} pixels", camera)
        out.append(arr.tolist())
    return out


def to_numpy(x: object) -> np.ndarray:
    """A tensor (detached, on the CPU) or array-like as a numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
