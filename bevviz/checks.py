"""The one validation module: shape checks, named errors and every bound bevviz puts on its input.

Every check raises :class:`bevviz.errors.InputError` (a ``ValueError``) whose message names
the field (and the camera, when there is one) and the offending value, and which carries
them as ``.field``, ``.value`` and ``.camera``, so an app can show it verbatim with
``st.error`` and a command can exit 2 for it alone.

Shapes: :func:`check_shape` is the one helper for tensor and array shapes; :func:`field_error`
builds the standard message. Limits: each bound is a named constant with its reason above it,
checked where the input enters (a file header, a JSON text, a constructor) before anything
of the limit's size is allocated; a limit hit names the field, the value and the limit:
``camera CAM_FRONT: field 'width': more than MAX_IMAGE_SIDE = 8192 (got 9223372036854775808)``.
docs/limits.md lists them all.

This is a core module: it imports numpy, torch and :mod:`bevviz.errors` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from bevviz.errors import InputError

__all__ = [
    # shapes and named errors
    "ArrayLike", "as_float_array", "as_int", "check_choice", "check_finite", "check_polygons", "check_shape",
    "field_error", "positive_int", "to_numpy",
    # limits
    "CAMERA_NAME_MAX_CHARS", "CAMERA_NAME_PUNCTUATION", "CAMERA_NAME_RULE", "MAX_BEV_POINTS", "MAX_BEV_SIDE",
    "MAX_CAMERA_LIDAR_POINTS", "MAX_CAMERAS", "MAX_DOCTOR_LIDAR_POINTS", "MAX_IMAGE_FILE_BYTES",
    "MAX_IMAGE_PIXELS", "MAX_IMAGE_SIDE", "MAX_JSON_DEPTH", "MAX_LIDAR_POINTS", "MAX_POLYGONS",
    "MAX_POLYGON_COORD", "MAX_POLYGON_VERTICES", "MAX_RIG_JSON_BYTES", "MIN_BEV_RESOLUTION",
    "QUATERNION_NORM_TOL", "MiB",
    "check_at_most", "check_camera_name", "check_image_size", "check_json_like", "escape_markdown",
    "image_side", "limit_error",
]

ArrayLike = "np.ndarray | torch.Tensor | Sequence[float]"

# --- shapes, numbers and named errors ---------------------------------------------------------


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


# --- limits: every bound on input, each with its reason -----------------------------------

MiB = 1 << 20

# --- rigs -------------------------------------------------------------------------------------

#: Most cameras in one rig. Public rigs have 5 (Waymo) to 9 (Argoverse 2) cameras; the pages'
#: cost grows with every camera (500 took 46 s and 6.5 GB), so 32 leaves room and stays usable.
MAX_CAMERAS = 32
#: Largest camera width or height, and image side, in pixels: twice 4K UHD's width (8K UHD,
#: 7680, fits); every automotive camera bevviz has met is under 4096.
MAX_IMAGE_SIDE = 8192
#: Most pixels in one image (2**25, 32 Mi px): 8K UHD (7680 x 4320) fits; decoded as RGB it is
#: 96 MiB, and a 16-bit RGBA file decodes through 256 MiB on the way.
MAX_IMAGE_PIXELS = 1 << 25
#: Largest encoded image file read: a 32-bit BMP of MAX_IMAGE_PIXELS (the largest lossless
#: encoding of an image within the limits) is 128 MiB.
MAX_IMAGE_FILE_BYTES = 128 * MiB
#: Largest rig JSON text: a 32-camera rig is about 10 KB; 2 MiB is the app's upload limit too.
MAX_RIG_JSON_BYTES = 2 * MiB
#: Deepest nesting of arrays and objects in a rig JSON: the format nests 5 deep (rig,
#: cameras, camera, K, row); deeper text is refused before the decoder recurses through it.
MAX_JSON_DEPTH = 16
#: Most polygons in one camera's ignore mask: a car's body needs a handful.
MAX_POLYGONS = 64
#: Most vertices in one ignore polygon: a hand-drawn outline has a few dozen.
MAX_POLYGON_VERTICES = 4096
#: Largest |u| or |v| of a polygon vertex, in pixels: 128 times MAX_IMAGE_SIDE (8192). A vertex
#: may lie outside its image (the polygon is clipped), but 1e300 cannot be rasterised.
MAX_POLYGON_COORD = 1 << 20

# --- BEV grid ---------------------------------------------------------------------------------

#: Most cells along one side of a BEV grid: 4096 cells of 0.1 m is 410 m.
MAX_BEV_SIDE = 4096
#: Most reference points (cells x pillar heights) in a BEV grid, 2**22: a float64 projection
#: of 6 cameras onto it takes about 0.7 GB; BEVFormer's 200 x 200 x 4 is 160,000 and the
#: synthetic ground texture's 1200 x 1200 x 1 grid fits.
MAX_BEV_POINTS = 1 << 22
#: Smallest BEV cell size in metres: 10 times finer than the finest published BEV grids
#: (about 0.1 m), about one pixel's footprint 10 m in front of a nuScenes camera.
MIN_BEV_RESOLUTION = 0.01

# --- LiDAR ------------------------------------------------------------------------------------

#: Most points in one LiDAR scan. A nuScenes LIDAR_TOP sweep has about 35,000 points, ten
#: motion-compensated sweeps about 350,000; 5 million float32 x 4 is 80 MB. Readers check the
#: count from the file size or header before they allocate.
MAX_LIDAR_POINTS = 5_000_000
#: Most LiDAR points one camera's view keeps; more are thinned to an even, seeded sample
#: (:func:`bevviz.depth_buffer.thin_indices`). The depth buffer has 200 columns of cells
#: (CELL_PX at 1600 px), so at most 200 x 200 = 40,000 cells for any image shape: 2**17 is
#: over three points a cell, more than ten nuScenes sweeps put in one view (about 60,000),
#: while a 2-million-point cloud puts 200,000 and more in each.
MAX_CAMERA_LIDAR_POINTS = 1 << 17
#: Most points of one scan the Calibration Doctor scores (ten nuScenes sweeps, ~350,000, fit);
#: a denser cloud is thinned to an even, seeded sample of this many and then read without its
#: ring index (thinning breaks the rings' neighbours). Keeps one diagnose in seconds, not
#: minutes, for a 2-million-point upload.
MAX_DOCTOR_LIDAR_POINTS = 400_000

# --- validation tolerances and rules ----------------------------------------------------------

#: Largest relative deviation of a stored quaternion's norm from 1. nuScenes stores unit
#: quaternions to about 1e-9 and float32-rounded files to about 1e-7; a norm off by more than
#: 1e-3 is a wrong field (a vector, a scaled or a truncated quaternion), not rounding.
QUATERNION_NORM_TOL = 1e-3
#: Longest camera name: nuScenes' longest is 15 characters; names label every figure.
CAMERA_NAME_MAX_CHARS = 64
#: Characters a camera name may hold besides letters and digits (of any script).
CAMERA_NAME_PUNCTUATION = "_-. "
#: The camera-name rule in words, as error messages state it.
CAMERA_NAME_RULE = (f"a camera name is 1 to {CAMERA_NAME_MAX_CHARS} characters: letters, digits, '_', '-', '.' "
                    "and spaces, starting with a letter, a digit or '_' and not ending in a space")


def limit_error(field: str, value: object, name: str, limit: float, camera: str | None = None) -> InputError:
    """The error of a limit hit: ``field 'width': more than MAX_IMAGE_SIDE = 8192 (got ...)``.

    Args:
        field: The offending field.
        value: Its value.
        name: The limit's constant name, e.g. ``"MAX_IMAGE_SIDE"``.
        limit: The limit's value.
        camera: Camera name, when the field belongs to one.

    Returns:
        An :class:`~bevviz.errors.InputError` ready to raise.
    """
    return field_error(field, value, f"more than {name} = {limit}", camera)


def check_at_most(value: float, limit: float, name: str, field: str, camera: str | None = None,
                  shown: object = None) -> None:
    """Raise :func:`limit_error` unless ``value <= limit`` (NaN fails too).

    Python ints are compared exactly, never converted to float, so ``2**63`` or ``10**400``
    fail here without an ``OverflowError``.

    Args:
        value: The number to check.
        limit: The largest value allowed.
        name: The limit's constant name for the message.
        field: Field name for the message.
        camera: Camera name for the message.
        shown: What the message shows as the value (default ``value``).
    """
    if not value <= limit:
        raise limit_error(field, value if shown is None else shown, name, limit, camera)


def image_side(value: object, field: str, camera: str | None = None) -> int:
    """A camera or image width / height: a positive int of at most :data:`MAX_IMAGE_SIDE`.

    Args:
        value: The size (int, or a float holding a whole number).
        field: ``"width"`` or ``"height"``, for the message.
        camera: Camera name for the message.

    Returns:
        The size as an ``int``.

    Raises:
        InputError: not a positive whole number, or more than ``MAX_IMAGE_SIDE`` (huge ints
            such as ``2**63`` included: neither check converts an int to float).
    """
    side = positive_int(value, field, camera)
    check_at_most(side, MAX_IMAGE_SIDE, "MAX_IMAGE_SIDE", field, camera)
    return side


def check_image_size(width: int, height: int, field: str, camera: str | None = None, label: str | None = None) -> None:
    """Check an image size (W, H) against :data:`MAX_IMAGE_SIDE` and :data:`MAX_IMAGE_PIXELS`.

    Args:
        width: W in pixels (an int).
        height: H in pixels (an int).
        field: Field name for the message (``"image"``, ``"width x height"``).
        camera: Camera name for the message.
        label: Shown before the size in the message (e.g. the file name).

    Raises:
        InputError: naming the field, ``"<label>: W x H px"`` and the limit hit.
    """
    shown = f"{label + ': ' if label else ''}{width} x {height} px"
    check_at_most(max(width, height), MAX_IMAGE_SIDE, "MAX_IMAGE_SIDE", field, camera, shown)
    check_at_most(width * height, MAX_IMAGE_PIXELS, "MAX_IMAGE_PIXELS", field, camera, shown)


def check_camera_name(name: object, camera: str | None = None) -> str:
    """Check a camera name against the rule (:data:`CAMERA_NAME_RULE`); return it.

    Args:
        name: The name.
        camera: Where the camera is (e.g. ``"#3"``) for the message, before its name is known
            to be good.

    Returns:
        The name.

    Raises:
        InputError: field ``name``: not a non-empty string, longer than
            :data:`CAMERA_NAME_MAX_CHARS`, a character outside the rule (control characters,
            markdown or HTML punctuation, slashes), or a bad first or last character.
    """
    if not isinstance(name, str) or not name.strip():
        raise field_error("name", name, "must be a non-empty string", camera)
    if len(name) > CAMERA_NAME_MAX_CHARS:
        raise field_error("name", name, f"has {len(name)} characters, more than CAMERA_NAME_MAX_CHARS = "
                                        f"{CAMERA_NAME_MAX_CHARS}; {CAMERA_NAME_RULE}", camera)
    bad = next((c for c in name if not (c.isalnum() or c in CAMERA_NAME_PUNCTUATION)), None)
    if bad is not None:
        raise field_error("name", name, f"character {bad!r} is not allowed; {CAMERA_NAME_RULE}", camera)
    if not (name[0].isalnum() or name[0] == "_") or name[-1] == " ":
        raise field_error("name", name, f"bad first or last character; {CAMERA_NAME_RULE}", camera)
    return name


def check_json_like(obj: object, field: str = "json", limit: int | None = None) -> None:
    """Refuse a JSON-like object nested deeper than ``limit`` (default :data:`MAX_JSON_DEPTH`)
    or with a mapping key that is not a string.

    The walk is iterative and stops at the first container past the limit, so any depth
    fails fast, without recursion. Mappings, lists and tuples are containers; anything else
    is a leaf.

    Args:
        obj: The object (built in Python; ``json.loads`` output is checked on its text).
        field: Field name for the message.
        limit: Deepest nesting allowed; the top-level container is depth 1.

    Raises:
        InputError: naming the field and the depth reached with ``MAX_JSON_DEPTH``, or the
            first key that is not a string.
    """
    limit = MAX_JSON_DEPTH if limit is None else limit
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            bad = next((key for key in item if not isinstance(key, str)), None)
            if bad is not None:
                raise field_error(field, bad, "object keys must be strings")
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        check_at_most(depth, limit, "MAX_JSON_DEPTH", field, shown=f"nested at least {depth} deep")
        stack.extend((child, depth + 1) for child in children)


#: Characters that Streamlit's markdown (CommonMark, emoji and colour shortcodes, LaTeX,
#: HTML) gives a meaning; each is shown literally after a backslash.
_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()#+-.!|<>~$:&=^\"'")


def escape_markdown(text: object) -> str:
    """``text`` made safe to show in markdown: every special character backslash-escaped, and
    control characters (newlines included) written as ``\\xNN`` escapes.

    Args:
        text: Any user-provided string (a file name, a camera name, an error message).

    Returns:
        Text that markdown renders exactly as ``text`` reads, on one line.
    """
    out = []
    for c in str(text):
        if c in _MARKDOWN_SPECIAL:
            out.append("\\" + c)
        elif not c.isprintable() and c != " ":
            out.append(ascii(c)[1:-1].replace("\\", "\\\\"))
        else:
            out.append(c)
    return "".join(out)
