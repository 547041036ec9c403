"""Proof, not trust: run an original and a rewritten model in onnxruntime on the same inputs.

Random inputs of the model's own shapes (symbolic axes by name from ``dims``, else
:data:`DEFAULT_DIM`) for every graph input, those with an initializer as their default
included (a user may feed them, so the rewrite must keep their meaning); float inputs
uniform in ``[-GRID_REACH, GRID_REACH]`` so grids reach past the borders as real BEV grids do
(reference points behind or beside a camera), integer inputs 0 and booleans False. Both
sessions get the same intra-op threads and one inter-op thread; their runs alternate
(original, rewritten, original, ...) so load on the machine hits both alike, and the median
of each is reported.

Bounded: the inputs' bytes (and the outputs' where their shapes are static) are checked
against :data:`MAX_CHECK_BYTES` before anything is allocated.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
import torch

from bevviz.checks import MiB, check_at_most, field_error
from bevviz.export.inspection import dtype_name, tensor_types
from bevviz.export.onnx_file import LoadedModel, as_loaded
from bevviz.export.parity import DEFAULT_TOL, max_abs_diff

__all__ = ["DEFAULT_DIM", "GRID_REACH", "MAX_CHECK_BYTES", "ModelParity", "OutputDiff", "compare_models",
           "parse_dims", "random_feed"]

#: Size of a symbolic axis not named in ``dims``.
DEFAULT_DIM = 2
#: Float inputs are uniform in [-GRID_REACH, GRID_REACH]: grids 30 % past the borders.
GRID_REACH = 1.3
#: Most bytes of random inputs (and of statically shaped outputs) one check allocates.
MAX_CHECK_BYTES = 1024 * MiB


@dataclass(frozen=True)
class OutputDiff:
    """One output compared: name, shape, max |original - rewritten|, within the tolerance."""

    name: str
    shape: tuple[int, ...]
    max_abs_diff: float
    ok: bool


@dataclass(frozen=True)
class ModelParity:
    """Original vs rewritten model in onnxruntime.

    Attributes:
        outputs: One :class:`OutputDiff` per graph output.
        tol: Tolerance on max |diff|.
        original_ms: Median latency of the original (ms).
        rewritten_ms: Median latency of the rewritten model (ms).
        runs: Timed runs of each.
        threads: Intra-op threads of both sessions.
        inputs: Input name -> shape used.
    """

    outputs: tuple[OutputDiff, ...]
    tol: float
    original_ms: float
    rewritten_ms: float
    runs: int
    threads: int
    inputs: dict[str, tuple[int, ...]]

    @property
    def max_abs_diff(self) -> float:
        """Largest max |diff| over the outputs."""
        return max((o.max_abs_diff for o in self.outputs), default=0.0)

    @property
    def ok(self) -> bool:
        """Every output within the tolerance."""
        return all(o.ok for o in self.outputs)

    @property
    def ratio(self) -> float:
        """Rewritten latency / original latency (> 1: the rewritten model is slower)."""
        return self.rewritten_ms / self.original_ms if self.original_ms > 0 else float("nan")

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"ok": self.ok, "tol": self.tol, "max_abs_diff": self.max_abs_diff,
                "outputs": [{"name": o.name, "shape": list(o.shape), "max_abs_diff": o.max_abs_diff, "ok": o.ok}
                            for o in self.outputs],
                "latency_ms": {"original": self.original_ms, "rewritten": self.rewritten_ms, "ratio": self.ratio},
                "runs": self.runs, "threads": self.threads,
                "inputs": {k: list(v) for k, v in self.inputs.items()}}


def parse_dims(items: Sequence[str], field: str = "dims") -> dict[str, int]:
    """``["batch=2", "queries=900"]`` -> ``{"batch": 2, "queries": 900}`` (sizes of symbolic axes).

    Args:
        items: ``NAME=SIZE`` strings (blank ones are skipped).
        field: Field name for the message.

    Raises:
        InputError: naming ``field`` and the item that is not ``NAME=SIZE`` with a positive size.
    """
    out = {}
    for item in items:
        if not item.strip():
            continue
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit() or int(size) < 1:
            raise field_error(field, item, "must be NAME=SIZE with a positive integer size, e.g. batch=2")
        out[name.strip()] = int(size)
    return out


def _resolve(shape: tuple | None, dims: Mapping[str, int], field: str) -> tuple[int, ...]:
    if shape is None:
        raise field_error(field, "unknown rank", "the model does not declare this input's shape")
    out = []
    for d in shape:
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        else:
            out.append(DEFAULT_DIM if isinstance(d, str) else 1)
    return tuple(out)


def _nbytes(elem: int, shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    try:
        return n * onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize
    except (KeyError, ValueError, TypeError):
        return n * 8


def random_feed(model: onnx.ModelProto, dims: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of ``model``'s own shapes (see the module docstring).

    Args:
        model: The model.
        dims: Size of symbolic axes by name (e.g. ``{"batch": 3}``); others :data:`DEFAULT_DIM`.
        seed: Seed of the generator.

    Returns:
        Input name -> array of the input's declared shape and dtype.

    Raises:
        InputError: field ``dims`` for a size that is not a positive int, ``inputs`` when they
            would exceed :data:`MAX_CHECK_BYTES` (nothing allocated), or an input of a dtype
            that cannot be made up.
    """
    dims = dict(dims or {})
    for k, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise field_error(f"dims.{k}", v, "must be a positive int")
    rng = np.random.default_rng(seed)
    specs = []
    total = 0
    for vi in model.graph.input:
        elem = vi.type.tensor_type.elem_type
        shape = _resolve(tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                               for d in vi.type.tensor_type.shape.dim)
                         if vi.type.tensor_type.HasField("shape") else None, dims, f"input {vi.name!r}")
        total += _nbytes(elem, shape)
        check_at_most(total, MAX_CHECK_BYTES, "MAX_CHECK_BYTES", "inputs",
                      shown=f"{total} bytes so far, at input {vi.name!r} of shape {shape}")
        specs.append((vi.name, elem, shape))
    feed = {}
    for name, elem, shape in specs:
        kind = dtype_name(elem)
        if kind in ("float16", "float32", "float64"):
            feed[name] = rng.uniform(-GRID_REACH, GRID_REACH, size=shape).astype(kind)
        elif kind.startswith(("int", "uint")):
            feed[name] = np.zeros(shape, dtype=kind)
        elif kind == "bool":
            feed[name] = np.zeros(shape, dtype=bool)
        else:
            raise field_error(f"input {name!r}", kind, "random inputs of this dtype are not made up")
    return feed


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])


def _check_outputs(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> None:
    """Refuse statically shaped outputs past :data:`MAX_CHECK_BYTES` before running."""
    types = tensor_types(model)
    total = sum(a.nbytes for a in feed.values())
    for vi in model.graph.output:
        elem, shape = types.get(vi.name, (0, None))
        if shape is not None and all(isinstance(d, int) for d in shape):
            total += _nbytes(elem or 1, shape)
            check_at_most(total, MAX_CHECK_BYTES, "MAX_CHECK_BYTES", "outputs",
                          shown=f"{total} bytes of inputs and outputs, at output {vi.name!r} of shape {shape}")


def _ort_session(model: onnx.ModelProto, threads: int, field: str, name: str) -> ort.InferenceSession:
    try:
        return _session(model, threads)
    except Exception as exc:  # onnxruntime's own exception types: it refuses the model
        raise field_error(field, name, "onnxruntime refuses to load it: " + " ".join(str(exc).split())[:300]) from None


def compare_models(original: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel,
                   rewritten: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel, *,
                   dims: Mapping[str, int] | None = None,
                   runs: int = 5, threads: int | None = None, seed: int = 0, tol: float = DEFAULT_TOL,
                   feed: Mapping[str, np.ndarray] | None = None) -> ModelParity:
    """Run both models in onnxruntime (CPU) on the same inputs: max |diff| and latency.

    Args:
        original: The model as given: a path, the file's bytes, an ``onnx.ModelProto`` or a
            :class:`~bevviz.export.onnx_file.LoadedModel` (read within the bounds of
            :mod:`bevviz.export.onnx_file`, like :func:`bevviz.export.rewrite_grid_sample`).
        rewritten: The rewritten model (same inputs and outputs), in any of those forms.
        dims: Sizes of symbolic axes by name (see :func:`random_feed`).
        runs: Timed runs of each model (after one warm-up each); at least 1.
        threads: Intra-op threads of both sessions; default ``torch.get_num_threads()``.
        seed: Seed of the random inputs.
        tol: Tolerance on max |diff| per output.
        feed: Inputs to use instead of random ones.

    Returns:
        A :class:`ModelParity`.

    Raises:
        InputError: field ``runs``, ``dims`` or ``inputs`` (see :func:`random_feed`); field
            ``inputs`` also when onnxruntime refuses them (e.g. a symbolic axis needs another
            size: pass it in ``dims``); field ``original`` / ``rewritten`` for a model that
            cannot be read (:mod:`bevviz.export.onnx_file`) or that onnxruntime refuses to load.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise field_error("runs", runs, "must be an int >= 1")
    loaded = [m if isinstance(m, LoadedModel) else as_loaded(m, validate=False) for m in (original, rewritten)]
    original, rewritten = (m.model for m in loaded)
    feed = dict(feed) if feed is not None else random_feed(original, dims, seed)
    _check_outputs(original, feed)
    threads = int(threads or torch.get_num_threads())
    sessions = [_ort_session(original, threads, "original", loaded[0].name),
                _ort_session(rewritten, threads, "rewritten", loaded[1].name)]
    try:
        results = [s.run(None, feed) for s in sessions]  # warm-up, and the values compared
    except Exception as exc:  # onnxruntime's own errors (shapes, types): the inputs did not fit
        shapes = {n: tuple(a.shape) for n, a in feed.items()}
        raise field_error("inputs", shapes, "onnxruntime could not run the model on random inputs of these "
                                            "shapes (pass sizes of symbolic axes with dims): "
                                            + " ".join(str(exc).split())[:300]) from None
    times: list[list[float]] = [[], []]
    for _ in range(runs):
        for k, s in enumerate(sessions):
            t = time.perf_counter()
            s.run(None, feed)
            times[k].append((time.perf_counter() - t) * 1e3)
    names = [o.name for o in sessions[0].get_outputs()]
    diffs = []
    for name, a, b in zip(names, *results):
        d = max_abs_diff(np.asarray(a), np.asarray(b))
        diffs.append(OutputDiff(name, tuple(np.asarray(a).shape), d, bool(d <= tol)))
    return ModelParity(outputs=tuple(diffs), tol=float(tol), original_ms=statistics.median(times[0]),
                       rewritten_ms=statistics.median(times[1]), runs=runs, threads=threads,
                       inputs={n: tuple(a.shape) for n, a in feed.items()})
