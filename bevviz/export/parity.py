"""Run an exported model in onnxruntime: max |diff| against torch, and both latencies."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
import torch

from bevviz.checks import field_error
from bevviz.export.exporter import ExportResult

#: Parity tolerance of issue 6 (float32, unit-scale features).
DEFAULT_TOL = 1e-5


@dataclass(frozen=True)
class ParityResult:
    """onnxruntime against torch on the same inputs.

    Attributes:
        max_abs_diff: max |ORT - torch| over the output (``inf`` on a shape mismatch,
            NaN positions compared as equal when both are NaN).
        tol: The tolerance.
        ok: ``max_abs_diff <= tol``.
        ort_ms: Median onnxruntime latency (ms) over ``runs`` runs after one warm-up.
        torch_ms: Median torch latency (ms) of the same module, same inputs.
        ort_runs_ms: Every onnxruntime run (ms).
        torch_runs_ms: Every torch run (ms).
        output_shape: Shape of the output.
        threads: Threads given to both runtimes.
        provider: onnxruntime execution provider used.
    """

    max_abs_diff: float
    tol: float
    ok: bool
    ort_ms: float
    torch_ms: float
    ort_runs_ms: tuple[float, ...]
    torch_runs_ms: tuple[float, ...]
    output_shape: tuple[int, ...]
    threads: int
    provider: str

    @property
    def speedup(self) -> float:
        """torch time / onnxruntime time (> 1: onnxruntime is faster)."""
        return self.torch_ms / self.ort_ms if self.ort_ms > 0 else float("nan")


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| of two arrays of any one shape ``S`` (``inf`` when the shapes differ; NaN
    where both are NaN counts as equal, NaN on one side as ``inf``)."""
    if a.shape != b.shape:
        return float("inf")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    d = np.abs(a64 - b64)
    d[both_nan] = 0.0
    return float(np.nanmax(np.where(np.isnan(d), np.inf, d))) if d.size else 0.0


def check_parity(result: ExportResult, runs: int = 5, tol: float = DEFAULT_TOL,
                 inputs: Mapping[str, torch.Tensor] | None = None, threads: int | None = None) -> ParityResult:
    """Run the exported model in onnxruntime (CPU) and the torch module on the same inputs.

    Args:
        result: From :func:`bevviz.export.export_sampler` (carries the module and inputs).
        runs: Timed runs per runtime (the median is reported); at least 1.
        tol: Tolerance on max |diff|.
        inputs: Input name -> tensor to use instead of the export's example inputs (e.g.
            other sizes, to exercise dynamic axes).
        threads: Intra-op threads for both runtimes; default ``torch.get_num_threads()``.

    Returns:
        A :class:`ParityResult`.

    Raises:
        ValueError: naming ``runs`` or ``inputs`` when they are unusable.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise field_error("runs", runs, "must be an int >= 1")
    if result.spec is None:
        raise field_error("result", result.path, "has no module and inputs (export it with export_sampler)")
    names = result.spec.input_names
    feed_t = dict(zip(names, result.spec.inputs))
    if inputs is not None:
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise field_error("inputs", unknown, f"unknown input names; the model takes {list(names)}")
        feed_t.update({k: v.detach().to(feed_t[k].dtype) for k, v in inputs.items()})
    args = tuple(feed_t[n] for n in names)
    feed = {n: feed_t[n].detach().cpu().numpy() for n in names}

    threads = int(threads or torch.get_num_threads())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    provider = "CPUExecutionProvider"
    session = ort.InferenceSession(result.path, sess_options=opts, providers=[provider])

    try:
        ort_out = session.run(None, feed)[0]  # warm-up
    except Exception as exc:  # onnxruntime's own errors (shapes, types) as a named ValueError
        shapes = {n: tuple(a.shape) for n, a in feed.items()}
        raise field_error("inputs", shapes, "onnxruntime refused them: "
                          + " ".join(str(exc).split())[:300]) from None
    ort_times = []
    for _ in range(runs):
        t = time.perf_counter()
        ort_out = session.run(None, feed)[0]
        ort_times.append((time.perf_counter() - t) * 1e3)

    module = result.spec.module
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            ref = module(*args)
            torch_times = []
            for _ in range(runs):
                t = time.perf_counter()
                ref = module(*args)
                torch_times.append((time.perf_counter() - t) * 1e3)
    finally:
        torch.set_num_threads(torch_threads)
    ref_np = ref.detach().cpu().numpy()
    diff = max_abs_diff(np.asarray(ort_out), ref_np)
    return ParityResult(max_abs_diff=diff, tol=float(tol), ok=bool(diff <= tol),
                        ort_ms=statistics.median(ort_times), torch_ms=statistics.median(torch_times),
                        ort_runs_ms=tuple(ort_times), torch_runs_ms=tuple(torch_times),
                        output_shape=tuple(ref_np.shape), threads=threads, provider=provider)
