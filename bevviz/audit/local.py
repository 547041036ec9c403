"""The single-machine engine (the default): every sample in this process, one after another.

Convention:
    Rows as :func:`bevviz.audit.check.check_sample` returns them.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bevviz.audit.check import CheckSettings, check_sample, dataset

__all__ = ["EngineStats", "SampleFn", "peak_rss_mib", "run_local"]

#: The per-sample function an engine runs: ``fn(dataroot, version, token, settings, nusc=handle) -> rows``.
SampleFn = Callable[..., list]


@dataclass
class EngineStats:
    """What an engine reports about its run.

    Attributes:
        engine: ``"local"`` or ``"ray"``.
        workers: Worker processes used.
        peak_rss_mib: Peak resident memory of each worker process (MiB), in worker order.
        given_up: Samples whose worker died on every attempt (Ray), recorded as error rows.
        startup_s: Seconds until every worker was ready (started, devkit index opened).
    """

    engine: str
    workers: int
    peak_rss_mib: list[float] = field(default_factory=list)
    given_up: int = 0
    startup_s: float = 0.0


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (``getrusage``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_local(dataroot: str, version: str, tokens: Sequence[str], settings: CheckSettings,
              on_result: Callable[[str, list], None], fn: SampleFn = check_sample) -> EngineStats:
    """Check ``tokens`` in this process, calling ``on_result(token, rows)`` after each.

    Args:
        dataroot: Dataset root.
        version: Table folder.
        tokens: Sample tokens to check, in order.
        settings: :class:`~bevviz.audit.check.CheckSettings`.
        on_result: Receives each sample's rows as soon as they are ready.
        fn: The per-sample function (default :func:`~bevviz.audit.check.check_sample`).

    Returns:
        :class:`EngineStats` (one worker: this process).
    """
    t0 = time.perf_counter()
    nusc = dataset(str(dataroot), version)
    startup = time.perf_counter() - t0
    for token in tokens:
        on_result(token, fn(dataroot, version, token, settings, nusc=nusc))
    return EngineStats("local", 1, [peak_rss_mib()], startup_s=startup)
