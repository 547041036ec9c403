"""How the benchmark measures: process set-up, one call's time and peak memory, interleaved rounds.

The machinery under :mod:`bevviz.bench`, with nothing of bevviz in it: :func:`keep_freed_memory`
and :func:`pin_threads` set the process up; :func:`peak_rss_mb` and :func:`backward_once`
measure one call; :func:`time_group` times a baseline and its candidates in interleaved
rounds and :class:`PairStats` turns two members of a group into a ratio of minima with the
spread of the rounds' ratios; :func:`machine_info` says what a ratio depends on (CPU, vector
ISA, threads, torch's kernels and libraries). Why each of these is done so: the docstring of
:mod:`bevviz.bench`.

Convention:
    Times are seconds per call (wall clock, ``time.perf_counter``); memory is MiB of
    resident-set increase; a ratio is candidate / baseline (a speedup its inverse).
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import re
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "HUGE_PAGES_ENV", "MAX_CALLS_PER_SAMPLE", "PairStats", "backward_once", "calls_per_sample",
    "forward_backward_peak_mb", "forward_backward_timers", "huge_pages_state", "keep_freed_memory", "machine_info",
    "machine_line", "peak_rss_mb", "pin_threads", "process_usage", "summary", "time_group", "ISA_FLAGS", "THREAD_ENV",
]

#: Most calls one sample of a fast entry averages over (see "Equal windows" in bevviz.bench).
MAX_CALLS_PER_SAMPLE = 64
# --------------------------------------------------------------------------- process set-up

def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # pragma: no cover - not glibc
        return None


_LIBC = _libc()
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameter numbers


def keep_freed_memory() -> bool:
    """Make glibc's ``malloc`` keep freed memory for reuse instead of unmapping it.

    ``M_MMAP_MAX = 0`` serves large blocks from the heap rather than from their own
    mappings (which ``free`` unmaps, so the next call faults in fresh zeroed pages), and a
    2 GiB ``M_TRIM_THRESHOLD`` stops ``free`` from returning the heap's top. Repeated calls
    then reuse resident pages: the page-fault storm (system time as large as user time)
    and its noise are gone. Process-wide; the bench calls it once, before measuring.

    Returns:
        Whether both settings took (False off glibc).
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_MMAP_MAX, 0)) and bool(_LIBC.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


#: PyTorch's own switch (read once, at its first allocation): CPU tensors of 2 MiB and more
#: are 2 MiB-aligned and advised to the kernel as transparent huge pages.
HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"
_THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_state() -> str:
    """Whether this process's large torch tensors sit on transparent huge pages, in words.

    ``HUGE_PAGES_ENV=1`` makes torch's CPU allocator ask for huge pages; the kernel grants
    them when its THP setting is ``always`` or ``madvise`` (``[never]`` refuses them).

    Returns:
        E.g. ``"torch THP allocations on (kernel: madvise)"``.
    """
    try:
        kernel = re.search(r"\[(\w+)\]", _THP_SETTING.read_text())
        kernel_mode = kernel.group(1) if kernel else "unknown"
    except OSError:
        kernel_mode = "unavailable"
    on = os.environ.get(HUGE_PAGES_ENV) == "1"
    return f"torch THP allocations {'on' if on else 'off'} (kernel: {kernel_mode})"


def pin_threads(count: int | None) -> int:
    """Set torch's intra-op thread count once (default: the CPUs this process may use).

    Args:
        count: Threads, or None / 0 for the CPUs in this process's affinity mask.

    Returns:
        The count set.
    """
    if not count:
        try:
            count = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            count = os.cpu_count() or 1
    torch.set_num_threads(int(count))
    return torch.get_num_threads()


def process_usage() -> dict:
    """This process's CPU seconds (user, system) and minor page faults so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": usage.ru_utime, "system_s": usage.ru_stime, "minor_faults": usage.ru_minflt,
            "involuntary_switches": usage.ru_nivcsw}


# --------------------------------------------------------------------------- measurement

def _status_kb(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:  # pragma: no cover - not Linux
        return None
    m = re.search(field + r":\s+(\d+) kB", text)
    return int(m.group(1)) if m else None


def peak_rss_mb(fn: Callable[[], object]) -> float | None:
    """Peak resident-memory increase (MiB) while ``fn()`` runs; see the module docstring."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    before = _status_kb("VmRSS")
    result = fn()
    peak = _status_kb("VmHWM")
    del result
    if before is None or peak is None:
        return None
    return max(0.0, (peak - before) / 1024.0)


def backward_once(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Wall time of the backward part of ``forward(x).sum().backward()`` (forward untimed)."""
    xr = x.detach().clone().requires_grad_(True)
    loss = forward(xr).sum()
    t = time.perf_counter()
    loss.backward()
    return time.perf_counter() - t


def forward_backward_peak_mb(forward, x):
    def run():
        xr = x.detach().clone().requires_grad_(True)
        forward(xr).sum().backward()
        return xr.grad
    return peak_rss_mb(run)


def forward_backward_timers(forward: Callable[[torch.Tensor], object],
                            x: torch.Tensor) -> dict[str, Callable[[], float]]:
    """``{"forward": ..., "backward": ...}``: one timed call each, seconds.

    Args:
        forward: The entry, features ``(N, C, H, W)`` -> its output.
        x: The features ``(N, C, H, W)``.
    """
    def fwd() -> float:
        with torch.no_grad():
            t = time.perf_counter()
            forward(x)
            return time.perf_counter() - t

    return {"forward": fwd, "backward": lambda: backward_once(forward, x)}


def _sample(timer: Callable[[], float], calls: int) -> float:
    """Mean seconds per call over ``calls`` consecutive timed calls."""
    return sum(timer() for _ in range(calls)) / calls


def calls_per_sample(seconds: float, baseline_seconds: float) -> int:
    """Calls one sample averages so that it lasts about one baseline call (at least 1)."""
    if seconds <= 0 or seconds * 2 > baseline_seconds:
        return 1
    return max(1, min(MAX_CALLS_PER_SAMPLE, round(baseline_seconds / seconds)))


def time_group(timers: dict[str, Callable[[], float]], baseline: str, rounds: int, alternations: int = 1) -> dict:
    """Interleaved samples of a baseline and its candidates (see the module docstring).

    Args:
        timers: Name -> one timed call (seconds); includes ``baseline``.
        baseline: The name every other is compared with.
        rounds: Rounds.
        alternations: Samples of every member per round.

    Returns:
        ``{"samples": name -> [seconds per call], "round_min": name -> [fastest sample of
        each round], "calls": name -> calls per sample, "faults": name -> [minor page
        faults per call of each sample]}``.
    """
    names = [baseline] + [n for n in timers if n != baseline]
    warm = {n: timers[n]() for n in names}  # second warm-up call; sizes the samples
    calls = {n: 1 if n == baseline else calls_per_sample(warm[n], warm[baseline]) for n in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    faults: dict[str, list[float]] = {n: [] for n in names}
    round_min: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for a in range(alternations):
            for n in names if (r * alternations + a) % 2 == 0 else names[::-1]:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                samples[n].append(_sample(timers[n], calls[n]))
                faults[n].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls[n])
        for n in names:
            round_min[n].append(min(samples[n][-alternations:]))
    return {"samples": samples, "round_min": round_min, "calls": calls, "faults": faults}


@dataclass(frozen=True)
class PairStats:
    """A candidate against its baseline over interleaved rounds.

    Attributes:
        ratio: Ratio of minima over all samples, candidate / baseline (the estimate).
        spread: ``(min, max)`` of the rounds' ratios (each a ratio of the round's minima).
        median: Median of the rounds' ratios.
        rounds: Rounds compared.
    """

    ratio: float
    spread: tuple[float, float]
    median: float
    rounds: int

    @staticmethod
    def of(candidate: dict, baseline: dict) -> PairStats:
        """Statistics of two members of one :func:`time_group` (its ``samples`` and
        ``round_min`` lists, per member)."""
        per_round = [c / b for c, b in zip(candidate["round_min"], baseline["round_min"])]
        return PairStats(min(candidate["samples"]) / min(baseline["samples"]), (min(per_round), max(per_round)),
                         statistics.median(per_round), len(per_round))

    def inverse(self) -> PairStats:
        """The same figures as speedups (baseline / candidate)."""
        return PairStats(1 / self.ratio, (1 / self.spread[1], 1 / self.spread[0]), 1 / self.median, self.rounds)

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {"ratio": self.ratio, "spread": list(self.spread), "median": self.median, "rounds": self.rounds}


def summary(measured: dict, prefix: str) -> dict:
    samples = measured["samples"]
    return {f"{prefix}_s": statistics.median(samples), f"{prefix}_min_s": min(samples),
            f"{prefix}_max_s": max(samples), f"{prefix}_times_s": samples,
            f"{prefix}_faults_per_call": statistics.median(measured["faults"])}


# --------------------------------------------------------------------------- the machine

#: Vector-ISA flags reported when the CPU has them (x86 ``/proc/cpuinfo`` names; ARM ``asimd``/``sve``).
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "asimd", "sve", "sve2")
#: Environment variables that set thread counts, reported as found.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def _cpuinfo() -> tuple[str, set[str]]:
    """CPU model name and feature flags from ``/proc/cpuinfo`` (Linux; else the platform's)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux
        return platform.processor() or platform.machine(), set()
    model = re.search(r"^(?:model name|Hardware|CPU part)\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
    return (model.group(1).strip() if model else platform.machine()), set(flags.group(1).split() if flags else ())


def _config_line(text: str, pattern: str) -> str | None:
    """The first match of ``pattern`` (its group 1) in torch's build/parallel description."""
    m = re.search(pattern, text, re.M)
    return m.group(1).strip() if m else None


def machine_info(default_threads: int | None = None) -> dict:
    """What a ratio of this run depends on, as found (see the module docstring).

    Args:
        default_threads: torch's intra-op thread count before the bench set its own (None:
            not known).

    Returns:
        JSON-ready dict: ``cpu_model``, ``isa`` (the :data:`ISA_FLAGS` the CPU has),
        ``cpus``, ``cpus_usable`` (affinity), ``machine``, ``cpu_capability`` (torch's
        kernel: DEFAULT/AVX2/AVX512/...), ``threads``, ``threads_default``,
        ``interop_threads``, ``thread_env``, ``torch``, ``parallel_backend``, ``openmp``,
        ``mkl``, ``mkldnn``.
    """
    model, flags = _cpuinfo()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    parallel = torch.__config__.parallel_info()
    build = torch.__config__.show()
    return {
        "cpu_model": model, "isa": [f for f in ISA_FLAGS if f in flags], "cpus": os.cpu_count(),
        "cpus_usable": usable, "machine": platform.machine(),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "threads": torch.get_num_threads(), "threads_default": default_threads,
        "interop_threads": torch.get_num_interop_threads(),
        "thread_env": {k: os.environ[k] for k in THREAD_ENV if k in os.environ},
        "torch": torch.__version__,
        "parallel_backend": _config_line(parallel, r"^ATen parallel backend:\s*(.+)$"),
        "openmp": _config_line(parallel, r"^(OpenMP [^\n]+)$"),
        "mkl": (_config_line(build, r"Math Kernel Library Version ([\w.]+)") or "available")
        if torch.backends.mkl.is_available() else None,
        "mkldnn": (_config_line(build, r"MKL-DNN (v[\w.]+)") or "available")
        if torch.backends.mkldnn.is_available() else None,
    }


def machine_line(m: dict) -> str:
    """One line of :func:`machine_info` for the report."""
    default = m.get("threads_default")
    env = ", ".join(f"{k}={v}" for k, v in m.get("thread_env", {}).items()) or "no thread variables set"
    return (f"machine: {m['cpu_model']} ({m['machine']}, {m['cpus']} CPUs, {m['cpus_usable']} usable), "
            f"ISA {' '.join(m['isa']) or 'none of ' + '/'.join(ISA_FLAGS[:3])}; torch {m['torch']} "
            f"kernels {m['cpu_capability']}; {m['threads']} intra-op threads"
            f"{'' if default is None else f' (torch default {default})'}, {m['interop_threads']} inter-op; "
            f"{env}; {m['parallel_backend']} backend, {m['openmp']}; MKL {m['mkl'] or 'none'}, "
            f"oneDNN {m['mkldnn'] or 'none'}")
