"""Write a file whole or not at all: the one mechanism every writer of bevviz uses.

The content goes to a hidden temporary file beside the target (same folder, so the same file
system), is flushed to disk, and is renamed over the target with ``os.replace`` (atomic on
POSIX); the folder is then synced so the rename itself survives a crash. On any error the
temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_bytes"]


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Write ``path`` through ``write(tmp_path)`` (any writer that takes a path: text, bytes,
    a Parquet table), then fsync and rename into place.

    Args:
        path: The file to write.
        write: Writes the content to the path it is given.

    Returns:
        ``path`` as a Path.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        _fsync(tmp, os.O_RDONLY)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync(path.parent, os.O_RDONLY)
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """:func:`atomic_write` of ``data``."""
    return atomic_write(path, lambda p: p.write_bytes(data))
