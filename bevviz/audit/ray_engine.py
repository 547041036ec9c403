"""The Ray engine: the same per-sample function on a Ray cluster, local or remote.

Each worker is a Ray actor that opens the devkit index once (seconds on trainval) and then
checks one sample at a time; the driver keeps one task in flight per actor, so a worker
that dies is charged to its own sample only, and streams every result into the same
Parquet layout as the local engine (:class:`bevviz.audit.store.AuditStore`, written by the
driver alone).

Fault tolerance is Ray's own: actors restart when their process dies (``max_restarts``)
and the task they were running is retried (``max_task_retries``). A sample whose every
attempt kills its worker becomes an error row after ``retries + 1`` attempts; a sample
that raises is an error row at once (:func:`bevviz.audit.check.check_sample` never raises
for a bad sample), since trying it again would fail the same way.

``ray.init()`` starts a local Ray instance (``num_cpus = workers``, no dashboard) unless an
``address`` of a running cluster is given, or Ray is already initialised (then it is used
and left running). On a cluster, every node needs bevviz's requirements and the dataroot
at the same path (shared storage); the bevviz package itself is shipped with the job.

Convention:
    Rows as :func:`bevviz.audit.check.check_sample` returns them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from bevviz.audit.check import CheckSettings, check_sample, dataset, error_row
from bevviz.audit.local import EngineStats, SampleFn, peak_rss_mib
from bevviz.checks import field_error

__all__ = ["RETRIES", "SampleWorker", "run_ray"]

#: Retries of a sample whose worker died (so at most RETRIES + 1 attempts).
RETRIES = 2


class SampleWorker:
    """A Ray actor's state: the dataset opened once, and the per-sample function.

    Args:
        dataroot: Dataset root (the same path on every node).
        version: Table folder.
        fn: The per-sample function.
    """

    def __init__(self, dataroot: str, version: str, fn: SampleFn = check_sample) -> None:
        self.dataroot, self.version, self.fn = dataroot, version, fn
        self.nusc = dataset(str(dataroot), version)

    def ready(self) -> float:
        """This worker's peak RSS (MiB) once it is up (the index is open)."""
        return peak_rss_mib()

    def check(self, token: str, settings: CheckSettings) -> tuple[list, float]:
        """The rows of one sample and this worker's peak RSS (MiB) so far."""
        return self.fn(self.dataroot, self.version, token, settings, nusc=self.nusc), peak_rss_mib()


def _init(ray, workers: int, address: str | None) -> bool:
    """Connect to or start Ray; True when this call started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    quiet = dict(logging_level=logging.WARNING, log_to_driver=False)
    if address:
        ray.init(address=address, runtime_env={"py_modules": [str(Path(__file__).resolve().parents[1])]}, **quiet)
    else:
        ray.init(num_cpus=workers, include_dashboard=False, **quiet)
    return True


def run_ray(dataroot: str, version: str, tokens: Sequence[str], settings: CheckSettings,
            on_result: Callable[[str, list], None], *, workers: int = 2, address: str | None = None,
            fn: SampleFn = check_sample, retries: int = RETRIES) -> EngineStats:
    """Check ``tokens`` on Ray actors, calling ``on_result(token, rows)`` in the driver as results arrive.

    Args:
        dataroot: Dataset root (visible at the same path to every worker).
        version: Table folder.
        tokens: Sample tokens to check.
        settings: :class:`~bevviz.audit.check.CheckSettings`.
        on_result: Receives each sample's rows (in completion order).
        workers: Actors to start (one CPU each).
        address: A running cluster's address (``ray://host:10001`` or ``host:6379``);
            None: a local Ray instance.
        fn: The per-sample function (picklable; default
            :func:`~bevviz.audit.check.check_sample`).
        retries: Attempts after the first for a sample whose worker died.

    Returns:
        :class:`EngineStats` with each actor's peak RSS.

    Raises:
        ValueError: naming ``--workers``, ``--address`` or ``dataroot`` (the workers cannot
            open it) and the value.
    """
    import ray  # optional heavy dependency: 0.7 s to import, only for --engine ray

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise field_error("--workers", workers, "must be a whole number >= 1")
    if not tokens:  # nothing left to check (a resumed audit that was complete)
        return EngineStats("ray", 0)
    try:
        started = _init(ray, workers, address)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise field_error("--address", address, f"cannot connect to Ray ({type(e).__name__}: {e})") from None
    died = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)
    actor_cls = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=retries)(SampleWorker)
    actors = [actor_cls.remote(str(dataroot), version, fn) for _ in range(min(workers, len(tokens)))]
    queue, inflight, failures = deque(tokens), {}, 0
    settings_ref = ray.put(settings)

    def submit(k: int) -> None:
        if queue:
            token = queue.popleft()
            inflight[actors[k].check.remote(token, settings_ref)] = (token, k)

    try:
        t0 = time.perf_counter()
        try:
            peak = [float(m) for m in ray.get([a.ready.remote() for a in actors])]
        except ray.exceptions.RayError as e:  # e.g. a node that does not see the dataroot
            raise field_error("dataroot", str(dataroot), f"the Ray workers could not open it "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        startup = time.perf_counter() - t0
        for k in range(len(actors)):
            submit(k)
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1)
            token, k = inflight.pop(ready[0])
            try:
                rows, rss = ray.get(ready[0])
                peak[k] = max(peak[k], rss)
            except died as e:
                failures += 1
                rows = [error_row(token, f"{type(e).__name__}: the worker died on each of {retries + 1} attempts "
                                  "at this sample", 0.0)]
            on_result(token, rows)
            submit(k)
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()
    return EngineStats("ray", len(actors), peak, failures, startup)
