"""Torch threads: running a stretch of small ops on one thread, and a pool of such workers.

``torch.set_num_threads`` does two things: it sets the *calling thread's* OpenMP thread
count, and the *process-wide* count that threads created later start with. Code that
drops to one thread for a while (many small ops, where fork/join barriers cost more than
they save) must therefore undo both, and must not confuse two threads doing it at once
(Streamlit runs each session's script on its own thread).

:func:`run_split` hands work to a shared pool of single-threaded worker threads (the
gather-scatter sampler's blocked gather runs on it): independent streams instead of torch's
OpenMP parallelism, whose per-op fork/join barriers stall on an oversubscribed machine.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

__all__ = ["on_one_thread", "run_split", "set_process_default_threads", "single_threaded", "worker_count"]

_LOCAL = threading.local()  # per thread: nesting depth and the count to restore
_LOCK = threading.Lock()
_ACTIVE = [0, 0]  # threads inside single_threaded(), process default when the first entered
_POOL: ThreadPoolExecutor | None = None  # the shared workers of run_split()
_POOL_LOCK = threading.Lock()


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


def worker_count() -> int:
    """Worker threads for a split run: the caller's intra-op thread count.

    A caller that restricts torch to one thread (e.g. around many small ops) therefore
    gets the work inline on its own thread.
    """
    return max(1, torch.get_num_threads())


def _single_threaded_worker() -> None:
    """Pool initializer: this worker thread runs torch ops on one intra-op thread."""
    torch.get_num_threads()  # per-thread lazy init first, so it cannot undo the next line
    torch.set_num_threads(1)


def _worker_pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool of ``>= workers`` single-threaded worker threads.

    ``torch.set_num_threads`` sets the calling thread's OpenMP count *and* the process-wide
    count that threads created later start with. The workers set theirs once, when the
    pool starts (all of them, held at a barrier), after which the process-wide count is put
    back (:func:`set_process_default_threads`); so no thread outside the pool (a Streamlit
    script thread, say) ever inherits the workers' single thread, and nothing is set per
    call.
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:  # noqa: SLF001 - size check only
            default = torch.get_num_threads()
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bevviz-gather",
                                      initializer=_single_threaded_worker)
            started = threading.Barrier(workers)
            for future in [pool.submit(started.wait) for _ in range(workers)]:
                future.result()
            set_process_default_threads(default)
            if _POOL is not None:
                _POOL.shutdown(wait=False)
            _POOL = pool
        return _POOL


def run_split(items: list, work, workers: int, shared: bool = False) -> None:
    """Run ``work(items_subset)`` on ``workers`` single-threaded worker threads.

    Why threads rather than torch's own OpenMP parallelism: a blocked gather is a long run
    of small ops, and each parallel op is a fork/join barrier; on an oversubscribed machine
    every barrier can wait a whole scheduler slice for the second thread (10-40x slowdowns
    were measured). Independent single-threaded streams never wait for each other; torch
    releases the GIL inside every op, so they run concurrently. See :func:`_worker_pool`
    for how the workers' thread count stays their own.

    Args:
        items: Work items; worker ``w`` gets ``items[w::workers]``.
        work: ``work(subset)``, called once per worker; ``subset`` is an iterable of items.
        workers: Threads to use (at most ``len(items)``; 1 runs inline, with the list).
        shared: Instead, every worker takes the next item from one shared queue as it
            finishes the last (a worker the scheduler stalls on a loaded machine leaves its
            share to the others). Only where the result does not depend on which worker did
            what.
    """
    workers = min(workers, len(items))
    if workers <= 1:
        work(items)
        return
    pool = _worker_pool(workers)
    if shared:
        queue, lock, done = iter(items), threading.Lock(), object()

        def pulled():
            while True:
                with lock:
                    item = next(queue, done)
                if item is done:
                    return
                yield item

        subsets = [pulled() for _ in range(workers)]
    else:
        subsets = [items[w::workers] for w in range(workers)]
    futures = [pool.submit(work, subset) for subset in subsets]
    for future in futures:
        future.result()
