"""The one output-path rule of bevviz: nothing a command writes may be something it reads.

Every command that writes (``bevviz check --json/--html``, ``bevviz audit --out``, ``bevviz
npu check --json``, ``bevviz npu rewrite``) states what it reads as :class:`Reads` (files,
and folders whose every file it may read) and passes each output path through
:func:`refuse_input_as_output` before it writes anything. An output is refused, with an
:class:`~bevviz.errors.InputError` naming the option and the path, when it is

- one of the files read, by any name: the same path, a path through ``..`` or a symbolic
  link, or another hard link to the same file (same device and inode);
- inside a folder read (the images folder of a JSON rig, a frame folder's ``images/``, a
  nuScenes dataroot), or that folder itself;
- an output folder that is an input file or lies inside a folder read.

Before any work, :func:`writable_file` also refuses an output file whose folder does not exist
or that is a folder itself: a check of minutes must not end in an error about a temporary
file it could never have written. What is refused is then never opened for writing; what is
written goes through :func:`bevviz.io.atomic.atomic_write` (a temporary file beside the
target, renamed over it), so even a path the rule cannot see (a hard link to a file deep in a
dataroot, which no command lists) has its old content replaced as a new file, never
overwritten in place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bevviz.errors import InputError

__all__ = ["Reads", "real_path", "refuse_input_as_output", "writable_file"]


def real_path(path: str | os.PathLike) -> Path:
    """``path`` with every symbolic link and ``..`` resolved, whether or not it exists
    (a missing tail is kept as written)."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing: not the same existing file
        return False


@dataclass(frozen=True)
class Reads:
    """What one command reads.

    Attributes:
        files: Files it reads (a rig JSON, a model and its external data, a LiDAR file).
        folders: Folders any file of which it may read (an images folder, a dataroot).
    """

    files: tuple[Path, ...] = ()
    folders: tuple[Path, ...] = ()

    @classmethod
    def of(cls, files: Iterable[str | os.PathLike] = (), folders: Iterable[str | os.PathLike] = ()) -> Reads:
        """Build from any paths (missing ones are kept: a file a loader looks for may not exist yet)."""
        return cls(tuple(Path(f) for f in files), tuple(Path(d) for d in folders))

    def __add__(self, other: Reads) -> Reads:
        return Reads(self.files + other.files, self.folders + other.folders)


def refuse_input_as_output(field: str, output: str | os.PathLike, reads: Reads, *, folder: bool = False) -> Path:
    """Refuse ``output`` when writing it could change what the command reads.

    Args:
        field: The option or argument that names the output (``"--json"``, ``"OUT.onnx"``).
        output: The path to be written (a file; a folder with ``folder=True``).
        reads: What the command reads.
        folder: ``output`` is a folder the command writes files into (``audit --out``).

    Returns:
        ``output`` as a Path (as given: messages and the written file keep the user's name).

    Raises:
        InputError: field ``field``, value ``output``, naming the input it would replace.
    """
    given = Path(output)
    real = real_path(given)
    for f in reads.files:
        if real == real_path(f) or _same_file(given, Path(f)):
            raise InputError(f"field '{field}': {os.fspath(given)!r} is an input of this command ({os.fspath(f)!r}); "
                             "write the output elsewhere", field, os.fspath(given))
    for d in reads.folders:
        inside = real_path(d)
        if real == inside or inside in real.parents:
            what = "folder" if folder else "file"
            raise InputError(f"field '{field}': the output {what} {os.fspath(given)!r} is inside "
                             f"{os.fspath(d)!r}, a folder this command reads; write the output elsewhere",
                             field, os.fspath(given))
    return given


def writable_file(field: str, output: str | os.PathLike) -> Path:
    """Refuse an output file that cannot be written where it is named: its folder is missing
    (or not a folder), or the path is a folder.

    Args:
        field: The option or argument that names the output (``"--json"``, ``"OUT.onnx"``).
        output: The file to be written.

    Returns:
        ``output`` as a Path (as given).

    Raises:
        InputError: field ``field``, value ``output``, saying which folder is missing.
    """
    given = Path(output)
    if given.is_dir():
        raise InputError(f"field '{field}': {os.fspath(given)!r} is a folder; name a file to write", field,
                         os.fspath(given))
    parent = given.parent if given.parent != Path("") else Path(".")
    if not parent.is_dir():
        raise InputError(f"field '{field}': the folder {os.fspath(parent)!r} of {os.fspath(given)!r} does not exist; "
                         "create it or write the output elsewhere", field, os.fspath(given))
    return given
