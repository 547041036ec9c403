"""The one bad-input error of bevviz: :class:`InputError`, naming the field, the value and the camera.

Every input check of the library raises it (built by :func:`bevviz.checks.field_error`,
:func:`bevviz.checks.check_shape` and the limit checks of :mod:`bevviz.checks`). It is a
``ValueError``, so code that catches ``ValueError`` keeps working; but only an
``InputError`` is the user's fault: the ``bevviz`` command turns it (and only it) into exit
status 2 and one line, the app into ``st.error``. Any other exception is a bug in bevviz
and is shown as one (:data:`BUG_REPORT_WHERE` says where to report it).

This is the bottom of the library: it imports nothing from bevviz.
"""

from __future__ import annotations

__all__ = ["BUG_REPORT_WHERE", "InputError", "bug_message"]

#: Where a bug (any exception that is not an :class:`InputError`) is to be reported.
BUG_REPORT_WHERE = "the bevviz issue tracker, with the command or page and the input (README.md: Reporting a bug)"


class InputError(ValueError):
    """Bad input: a field whose value the library refuses.

    Attributes:
        field: Name of the offending field (``"K"``, ``"--images"``, ``"settings.sweeps"``).
        value: The offending value (as given; the message shows it shortened).
        camera: Name of the camera the field belongs to, or None.

    Example:
        ``InputError("camera CAM_FRONT: field 'K': must be finite (got nan)", "K", nan, "CAM_FRONT")``
    """

    def __init__(self, message: str, field: str = "", value: object = None, camera: str | None = None):
        super().__init__(message)
        self.field = field
        self.value = value
        self.camera = camera

    def within(self, where: str) -> InputError:
        """The same error with ``where`` (a file, an upload) put in front of its message.

        Args:
            where: Where the field was read, e.g. ``"rig.json"`` or ``"file 'scan.bin'"``.

        Returns:
            A new :class:`InputError` with the same field, value and camera.
        """
        return InputError(f"{where}: {self}", self.field, self.value, self.camera)

    def __reduce__(self):
        # Picklable with its attributes (the Ray engine sends errors between processes).
        return (type(self), (str(self), self.field, self.value, self.camera))


def bug_message(exc: BaseException) -> str:
    """One line for an exception that is not the user's fault: what happened, where, and
    where to report it.

    Args:
        exc: The exception (anything but an :class:`InputError`).

    Returns:
        ``"internal error (a bug in bevviz, not in your input): <Type>: <message>
        [at file.py:line]; please report it to <BUG_REPORT_WHERE>"``.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" [at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}]" if tb is not None else ""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return (f"internal error (a bug in bevviz, not in your input): {text}{where}; "
            f"please report it to {BUG_REPORT_WHERE}")
