"""Point-cloud files in: nuScenes ``.bin`` and NumPy ``.npy``, read into a :class:`LidarScan`.

Two formats, told apart by the file name's extension:

- ``.bin`` (nuScenes ``.pcd.bin``): little-endian float32 records of 5 values
  (x, y, z, intensity, ring index), 20 bytes per point, no header.
- ``.npy``: a NumPy array of shape (N, 3) (x, y, z) or (N, 4) (x, y, z, intensity), any
  float dtype. Read with ``np.load(..., allow_pickle=False)``: object arrays are refused
  from the header, before anything is loaded, and are never unpickled.

The point count is checked against :data:`bevviz.checks.MAX_LIDAR_POINTS` from the byte size
(``.bin``) or the header (``.npy``) before any array is allocated.

Convention:
    The points come back in the frame the file stores them in; nothing is moved. In a
    nuScenes dataset a ``.bin`` is in the LIDAR_TOP *sensor* frame: load those with
    :func:`bevviz.io.nuscenes.load_lidar`, which moves them to the ego frame. A ``.bin`` or
    ``.npy`` uploaded next to a bevviz JSON rig is taken to be in the *ego* frame (x
    forward, y left, z up, metres) at the rig's time, which is what :class:`LidarScan`
    holds.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np

from bevviz.checks import MAX_LIDAR_POINTS, field_error
from bevviz.errors import InputError
from bevviz.lidar import LidarScan

__all__ = ["BIN_RECORD_BYTES", "EXTENSIONS", "read_pointcloud", "read_points"]

#: Values per point in a nuScenes ``.bin``: x, y, z, intensity, ring.
BIN_RECORD_FLOATS = 5
#: Bytes per point in a nuScenes ``.bin`` (5 x float32).
BIN_RECORD_BYTES = 4 * BIN_RECORD_FLOATS
#: File name endings this module reads (case-insensitive).
EXTENSIONS = (".bin", ".npy")

_INT16_MAX = int(np.iinfo(np.int16).max)
# numpy's .npy header parser, fed a damaged header, raises ValueError mostly, but also
# SyntaxError, tokenize.TokenError, EOFError, ... (found by the fuzz test): any Exception
# from it is the file's fault and becomes a named error.
_NPY_ERRORS = (Exception,)


def _file_error(name: str, field: str, value: object, problem: str) -> InputError:
    """``file 'x.bin': field 'size': <problem> (got <value>)``."""
    return field_error(field, value, problem).within(f"file {name!r}")


def _source(path_or_bytes: object, name: str | None) -> tuple[str, str, bytes | None, Path | None]:
    """(display name, lower-case extension, bytes or None, path or None)."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        if not isinstance(name, str) or not name:
            raise field_error("name", name, "a file name is needed with bytes input (its extension gives the format)")
        return name, Path(name).suffix.lower(), bytes(path_or_bytes), None
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = Path(path_or_bytes)
        label = name if isinstance(name, str) and name else str(path)
        if not path.is_file():
            raise _file_error(label, "file", str(path), "does not exist or is not a file")
        return label, path.suffix.lower(), None, path
    raise field_error("file", type(path_or_bytes).__name__, "must be a path or the file's bytes")


def _check_count(name: str, n: int, how: str) -> None:
    if n > MAX_LIDAR_POINTS:
        raise _file_error(name, "points", f"{n} points ({how})", f"more than MAX_LIDAR_POINTS = {MAX_LIDAR_POINTS}")


def _check_finite(name: str, arr: np.ndarray, columns: str) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise _file_error(name, "points", arr[rows[0]],
                          f"must be finite: {len(rows)} of {len(arr)} points ({columns}) hold NaN or inf, "
                          f"the first at row {int(rows[0])}")


def _read_bin(name: str, data: bytes | None, path: Path | None) -> tuple[np.ndarray, np.ndarray]:
    size = len(data) if data is not None else path.stat().st_size
    if size % BIN_RECORD_BYTES:
        raise _file_error(name, "size", f"{size} bytes",
                          f"a nuScenes .bin holds {BIN_RECORD_BYTES}-byte records (5 x float32: x, y, z, "
                          f"intensity, ring); {size} is not a multiple of {BIN_RECORD_BYTES}")
    n = size // BIN_RECORD_BYTES
    _check_count(name, n, f"{size} bytes / {BIN_RECORD_BYTES}")
    if data is not None:
        raw = np.frombuffer(data, dtype="<f4")
    else:
        raw = np.fromfile(path, dtype="<f4")
        if raw.size != n * BIN_RECORD_FLOATS:  # the file changed under us
            raise _file_error(name, "size", f"{raw.size * 4} bytes read", f"expected {size} bytes")
    rec = raw.reshape(n, BIN_RECORD_FLOATS).astype(np.float32)
    _check_finite(name, rec, "x, y, z, intensity, ring")
    ring = rec[:, 4]
    if ring.size:
        whole = ring == np.round(ring)
        if not whole.all():
            i = int(np.flatnonzero(~whole)[0])
            raise _file_error(name, "ring", float(ring[i]),
                              f"column 5 (ring index) must hold whole numbers; row {i} does not")
        lo, hi = float(ring.min()), float(ring.max())
        if lo < 0 or hi > _INT16_MAX:
            raise _file_error(name, "ring", (lo, hi), f"column 5 (ring index) must lie in [0, {_INT16_MAX}]")
    return np.ascontiguousarray(rec[:, :4]), ring.astype(np.int16)


def _npy_header(name: str, fp) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        with warnings.catch_warnings():  # numpy warns when it re-parses a Python 2 header
            warnings.simplefilter("ignore")
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                return np.lib.format.read_array_header_1_0(fp)
            if version == (2, 0):
                return np.lib.format.read_array_header_2_0(fp)
    except _NPY_ERRORS as exc:
        raise _file_error(name, "header", f"{type(exc).__name__}: {exc}", "not a readable .npy file") from None
    raise _file_error(name, "header", f"format version {version}", "only .npy versions 1.0 and 2.0 are read")


def _read_npy(name: str, data: bytes | None, path: Path | None) -> tuple[np.ndarray, None]:
    with (io.BytesIO(data) if data is not None else open(path, "rb")) as fp:
        shape, _fortran, dtype = _npy_header(name, fp)
        header_end = fp.tell()
    if dtype.hasobject:
        raise _file_error(name, "dtype", str(dtype), "object arrays are refused: loading them would unpickle")
    if dtype.kind != "f" or dtype.subdtype is not None:
        raise _file_error(name, "dtype", str(dtype), "must be a float array (float16, float32 or float64)")
    if len(shape) != 2 or shape[1] not in (3, 4):
        raise _file_error(name, "shape", shape, "expected (N, 3) (x, y, z) or (N, 4) (x, y, z, intensity)")
    _check_count(name, int(shape[0]), "from the .npy header")
    size = len(data) if data is not None else path.stat().st_size
    need = header_end + int(shape[0]) * int(shape[1]) * dtype.itemsize
    if size < need:
        raise _file_error(name, "size", f"{size} bytes", f"the header promises {need} bytes: the file is truncated")
    try:
        arr = np.load(io.BytesIO(data) if data is not None else path, allow_pickle=False)
    except _NPY_ERRORS as exc:
        raise _file_error(name, "header", f"{type(exc).__name__}: {exc}", "not a readable .npy file") from None
    with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf: checked next
        pts = np.zeros((arr.shape[0], 4), np.float32)
        pts[:, : arr.shape[1]] = arr
    _check_finite(name, np.asarray(arr, np.float64), "x, y, z" + (", intensity" if arr.shape[1] == 4 else ""))
    _check_finite(name, pts, "as float32")
    return pts, None


def read_points(path_or_bytes: str | os.PathLike | bytes,
                name: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Read the raw columns of a point-cloud file, as stored.

    Args:
        path_or_bytes: A file path, or the file's bytes (e.g. an upload's ``getvalue()``).
        name: File name for messages; with bytes it is required, its extension gives the
            format. Defaults to the path.

    Returns:
        ``(points, ring)``: points (N, 4) float32 (x, y, z, intensity; intensity 0 for an
        (N, 3) ``.npy``), in the frame the file stores; ring (N,) int16 for a ``.bin``,
        None for a ``.npy``.

    Raises:
        InputError: ``file '<name>': field '<field>': ... (got <value>)`` for: an unknown
            extension (``extension``), a missing file (``file``), bytes without a name
            (``name``), a ``.bin`` size that is not a multiple of 20 bytes or a truncated
            ``.npy`` (``size``), a damaged ``.npy`` header (``header``), a non-float or
            object ``.npy`` (``dtype``), a ``.npy`` not (N, 3) / (N, 4) (``shape``), NaN or
            inf or more than :data:`MAX_LIDAR_POINTS` points (``points``), ring values that
            are not whole numbers in [0, 32767] (``ring``).

    Convention:
        No frame change; see the module docstring.
    """
    label, ext, data, path = _source(path_or_bytes, name)
    if ext == ".bin":
        return _read_bin(label, data, path)
    if ext == ".npy":
        return _read_npy(label, data, path)
    raise _file_error(label, "extension", ext or "(none)",
                      f"point clouds are read from {' or '.join(EXTENSIONS)} files")


def read_pointcloud(path_or_bytes: str | os.PathLike | bytes, name: str | None = None,
                    origin: object = None, timestamp_us: int = 0) -> LidarScan:
    """Read a ``.bin`` or ``.npy`` point cloud as a single-sweep :class:`LidarScan`.

    Args:
        path_or_bytes: A file path, or the file's bytes.
        name: File name for messages (required with bytes: its extension gives the format).
        origin: The lidar origin in the file's frame, shape (3,); default (0, 0, 0).
        timestamp_us: Scan time in microseconds; default 0 (unknown).

    Returns:
        The scan: points (N, 4) float32 as stored, ring (``.bin``) or None (``.npy``),
        sweep 0 everywhere, no camera motion.

    Raises:
        InputError: as :func:`read_points`, naming the file, the field and the value.

    Convention:
        The points stay in the frame the file stores (see the module docstring): ego frame
        for an upload next to a JSON rig; sensor frame for a nuScenes dataset file, which
        :func:`bevviz.io.nuscenes.load_lidar` reads instead.
    """
    points, ring = read_points(path_or_bytes, name)
    label = name if isinstance(name, str) and name else str(path_or_bytes)
    if origin is None:
        origin = np.zeros(3)
    elif not isinstance(origin, np.ndarray):
        try:
            origin = np.asarray(origin, dtype=np.float64)
        except (TypeError, ValueError):
            raise _file_error(label, "origin", origin, "must be three numbers") from None
    try:
        return LidarScan(points, ring, np.zeros(len(points), np.int16), origin, timestamp_us, {})
    except InputError as exc:
        raise exc.within(f"file {label!r}") from None
