"""Torch intra-op thread counts: running a stretch of small ops on one thread, safely.

``torch.set_num_threads`` does two things: it sets the *calling thread's* OpenMP thread
count, and the *process-wide* count that threads created later start with. Code that
drops to one thread for a while (many small ops, where fork/join barriers cost more than
they save) must therefore undo both, and must not confuse two threads doing it at once
(Streamlit runs each session's script on its own thread).
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["on_one_thread", "set_process_default_threads", "single_threaded"]

_LOCAL = threading.local()  # per thread: nesting depth and the count to restore
_LOCK = threading.Lock()
_ACTIVE = [0, 0]  # threads inside single_threaded(), process default when the first entered


def set_process_default_threads(count: int) -> None:
    """Set the count new threads start with, leaving every existing thread's own count.

    torch has no call for the process-wide value alone, so a short-lived thread sets it
    (its own count dies with it).
    """
    setter = threading.Thread(target=torch.set_num_threads, args=(int(count),),
                              name="bevviz-thread-default")
    setter.start()
    setter.join()


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block; nesting-safe, per thread.

    On leaving the outermost block the thread gets its own count back; when the last
    thread inside any such block leaves, the process-wide default is what it was when the
    first one entered.
    """
    depth = getattr(_LOCAL, "depth", 0)
    if depth == 0:
        with _LOCK:
            if _ACTIVE[0] == 0:
                _ACTIVE[1] = torch.get_num_threads()
            _ACTIVE[0] += 1
        _LOCAL.restore = torch.get_num_threads()
        torch.set_num_threads(1)
    _LOCAL.depth = depth + 1
    try:
        yield
    finally:
        _LOCAL.depth -= 1
        if _LOCAL.depth == 0:
            torch.set_num_threads(_LOCAL.restore)
            with _LOCK:
                _ACTIVE[0] -= 1
                if _ACTIVE[0] == 0 and _LOCAL.restore != _ACTIVE[1]:
                    set_process_default_threads(_ACTIVE[1])


def on_one_thread(fn):
    """Decorator: run ``fn`` inside :func:`single_threaded`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded():
            return fn(*args, **kwargs)

    return wrapper
