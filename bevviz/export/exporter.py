"""Export a sampler to ONNX with ``torch.onnx.export`` and state exactly what came out.

Exporter choice (measured with torch 2.13, onnx 1.23, onnxscript 0.7, onnxruntime 1.32):

* ``dynamo=True`` (default here and torch 2.13's default; needs onnxscript) traces with
  ``torch.export`` and keeps batch / feature-size axes symbolic. Its native opset is 18:
  a lower request is exported at 18 and then converted down; when that conversion fails
  (GridSample has no version before 16) it silently KEEPS opset 18, so this module
  compares the file's opset with the request and raises. Two translations of its default
  table hurt NPU graphs: ``index_select`` with int32 indices becomes
  ``Cast(int32 -> int64) + Gather``, and ``index_add`` with int32 indices becomes a
  ``ScatterND`` with int32 indices, which the ONNX spec forbids (ScatterND takes int64
  only) and onnxruntime refuses to load. With ``keep_int32=True`` (default) bevviz
  replaces those two translations: ``Gather`` on the int32 index as is, and
  ``ScatterElements(reduction="add")`` on the int32 index expanded to the source's shape
  (both ops accept int32 in the spec). Its ``repeat_interleave`` with a symbolic count
  builds an invalid Expand; bevviz always replaces that translation too.
* ``dynamo=False``: the legacy TorchScript tracer (deprecated, "will be removed"). Fails
  loudly for GridSample below opset 16 (``UnsupportedOperatorError``), keeps int32 in
  Gather, but its ``index_add`` becomes a ``ScatterElements`` WITHOUT ``reduction="add"``:
  duplicate indices overwrite instead of summing, a silently wrong model that only the
  parity check exposes.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import time
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import field_error
from bevviz.export.inspection import TensorInfo, inspect_onnx
from bevviz.export.models import ExportOptions, ExportSettings, ExportSpec, build_spec, default_bev_grid
from bevviz.synthetic import nuscenes_like_rig


class ExportError(ValueError):
    """An export that failed or did not produce what was asked; the message names the field."""


@dataclass
class ExportResult:
    """One exported model.

    Attributes:
        sampler: Sampler name.
        path: The ``.onnx`` file (weights inside it).
        opset: Opset of the written file (``ai.onnx`` domain).
        requested_opset: The opset asked for.
        exporter: ``"dynamo"`` or ``"torchscript"``.
        inputs: Graph inputs with their shapes (symbols for dynamic axes) and dtypes.
        outputs: Graph outputs likewise.
        seconds: Wall time of ``torch.onnx.export``.
        settings: The settings used.
        notes: What the wrapper fixed or the exporter changed, in words.
        spec: The wrapped module and its example inputs (for parity and timing).
    """

    sampler: str
    path: str
    opset: int
    requested_opset: int
    exporter: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    seconds: float
    settings: ExportSettings
    notes: list[str] = field(default_factory=list)
    spec: ExportSpec | None = field(default=None, repr=False)

    @property
    def example_inputs(self) -> dict[str, torch.Tensor]:
        """Input name -> the example tensor the model was exported with."""
        if self.spec is None:
            return {}
        return dict(zip(self.spec.input_names, self.spec.inputs))

    def facts(self) -> dict[str, Any]:
        """Settings facts plus the example sizes, for :func:`bevviz.export.rules.evaluate_rules`."""
        facts = self.settings.facts()
        facts["opset"] = self.opset
        if self.spec is not None:
            feats = self.spec.inputs[0]
            facts.update(channels=int(feats.shape[1]), feature_height=int(feats.shape[2]),
                         feature_width=int(feats.shape[3]),
                         input_numel=max(int(t.numel()) for t in self.spec.inputs if t.is_floating_point()))
            with torch.no_grad():
                facts["output_numel"] = int(_output_numel(self.spec))
        return facts


def _output_numel(spec: ExportSpec) -> int:
    out = spec.module(*spec.inputs)
    return out.numel()


# --------------------------------------------------------------------------- int32 translations

def translation_table(keep_int32: bool) -> dict:
    """bevviz's replacements for a few dynamo translations (see the module docstring).

    Always: ``repeat_interleave(Tensor, int)``, whose torch 2.13 translation builds a wrong
    Expand shape when the repeat count is symbolic (onnxruntime: "invalid expand shape").
    With ``keep_int32``: ``index_select`` and ``index_add`` keep int32 indices.
    """
    from onnxscript import opset18 as op  # optional heavy dependency: 0.6 s to import, dynamo exports only

    def repeat_interleave(self, repeats, dim=None, output_size=None):
        x = self
        if dim is None:
            x = op.Reshape(x, op.Constant(value_ints=[-1]))
            dim = 0
        else:
            dim = dim % len(self.shape)
        if isinstance(repeats, int):
            rep = op.Constant(value_ints=[repeats])
        else:
            rep = op.Reshape(op.Cast(repeats, to=7), op.Constant(value_ints=[1]))  # 7 = INT64
        tail = op.Shape(x, start=dim + 1)
        expanded = op.Expand(op.Unsqueeze(x, op.Constant(value_ints=[dim + 1])),
                             op.Concat(op.Shape(x, start=0, end=dim + 1), rep, tail, axis=0))
        return op.Reshape(expanded, op.Concat(op.Shape(x, start=0, end=dim),
                                              op.Constant(value_ints=[-1]), tail, axis=0))

    def index_select(self, dim: int, index):
        return op.Gather(self, index, axis=dim)

    def index_add(self, dim: int, index, source, alpha: float = 1.0):
        rank = len(source.shape)
        axis = dim % rank if rank else 0
        if alpha != 1.0:
            source = op.Mul(source, op.CastLike(op.Constant(value_float=alpha), source))
        if rank <= 1:
            idx = index
        else:
            shape = [1] * rank
            shape[axis] = -1
            idx = op.Expand(op.Reshape(index, op.Constant(value_ints=shape)), op.Shape(source))
        return op.ScatterElements(self, idx, source, axis=axis, reduction="add")

    table = {torch.ops.aten.repeat_interleave.self_int: repeat_interleave}
    if keep_int32:
        table.update({torch.ops.aten.index_select.default: index_select,
                      torch.ops.aten.index_add.default: index_add})
    return table


# --------------------------------------------------------------------------- export

@contextlib.contextmanager
def _quiet():
    """Silence the exporters' progress prints, warnings and logs."""
    sink = io.StringIO()
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo",
                                              "torch.fx.experimental.symbolic_shapes", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            yield sink
    finally:
        for lg, lvl in zip(loggers, levels):
            lg.setLevel(lvl)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(exc: BaseException) -> str:
    """``Type: message`` of the innermost cause (where the exporter's wrappers hide it)."""
    root, seen = exc, set()
    while id(root) not in seen and (root.__cause__ is not None or root.__context__ is not None):
        seen.add(id(root))
        root = root.__cause__ or root.__context__
    text = " ".join(_ANSI.sub("", str(root)).split())
    where = "" if root is exc else f"{type(exc).__name__} <- "
    return f"{where}{type(root).__name__}: {text[:400]}"


def _axes_text(dynamic: dict[str, dict[int, str]]) -> str:
    return ", ".join(f"{name}.{sym}" for name, axes in dynamic.items() for sym in axes.values()) or "none"


def _dynamic_fallbacks(requested: dict[str, dict[int, str]]) -> list[dict[str, dict[int, str]]]:
    """Dynamic-axis requests to try in turn: all requested, then batch (``N``) only, then none."""
    tries = [requested]
    batch_only = {k: {a: s for a, s in v.items() if s == "N"} for k, v in requested.items()}
    batch_only = {k: v for k, v in batch_only.items() if v}
    for cand in (batch_only, {}):
        if cand not in tries:
            tries.append(cand)
    return tries if requested else [{}]


def _probe_dynamic(spec: ExportSpec, path: str | os.PathLike, report) -> tuple[set[tuple[str, int]], str]:
    """Check every symbolic input axis by running onnxruntime one size smaller.

    The exporter may declare an axis symbolic although the traced code fixed its size (a
    Python loop over it, a size captured as an int); such a graph loads but fails or gives
    wrong results at any other size. Each symbol is shrunk by one on every input that
    carries it and the result compared with the torch module (atol 1e-4).

    Args:
        spec: The exported module and its example inputs.
        path: The exported ``.onnx`` file.
        report: Its :class:`bevviz.export.inspection.OpReport` (for the symbolic axes).

    Returns:
        ((input name, axis) pairs that fail, the first failure in words).
    """
    places: dict[str, list[tuple[int, int]]] = {}
    names = list(spec.input_names)
    for t in report.inputs:
        if t.name in names:
            for ax, sym in t.dynamic_axes.items():
                places.setdefault(sym, []).append((names.index(t.name), ax))
    if not places:
        return set(), ""
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    session = ort.InferenceSession(os.fspath(path), sess_options=opts, providers=["CPUExecutionProvider"])
    broken: set[tuple[str, int]] = set()
    first = ""
    for sym, where in places.items():
        size = int(spec.inputs[where[0][0]].shape[where[0][1]])
        if size < 2:
            continue
        args = list(spec.inputs)
        for i, ax in where:
            args[i] = args[i].narrow(ax, 0, size - 1).contiguous()
        try:
            with torch.no_grad():
                ref = spec.module(*args).numpy()
        except Exception:  # the module itself rejects the smaller size: nothing to compare
            continue
        try:
            out = session.run(None, {n: a.numpy() for n, a in zip(names, args)})[0]
            ok = out.shape == ref.shape and bool(np.allclose(out, ref, atol=1e-4, rtol=0, equal_nan=True))
            reason = "" if ok else f"{sym}={size - 1}: output differs from torch"
        except Exception as exc:
            ok, reason = False, f"{sym}={size - 1}: {_first_line(exc)[:160]}"
        if not ok:
            broken.update((names[i], ax) for i, ax in where)
            first = first or reason
    return broken, first


def export_module(spec: ExportSpec, path: str | os.PathLike, opset: int = 18, exporter: str = "dynamo",
                  keep_int32: bool = True) -> tuple[float, list[str]]:
    """Export any :class:`ExportSpec` to ``path`` and check the file's opset.

    Args:
        spec: Module, example inputs, names and dynamic axes.
        path: Output ``.onnx`` path (parent folders are created).
        opset: Requested opset.
        exporter: ``"dynamo"`` or ``"torchscript"``.
        keep_int32: dynamo only: use the int32-keeping translations.

    Returns:
        (seconds, notes).

    Raises:
        ExportError: the exporter failed, or wrote a different opset than requested
            (message names ``opset`` and the value).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    notes: list[str] = []
    t0 = time.perf_counter()
    try:
        with _quiet(), torch.no_grad():
            if exporter == "dynamo":
                dynamic_shapes = None
                if spec.dynamic:
                    auto = torch.export.Dim.AUTO
                    dynamic_shapes = {name: {ax: auto for ax in spec.dynamic.get(name, {})}
                                      for name in spec.input_names}
                    dynamic_shapes = {k: (v or None) for k, v in dynamic_shapes.items()}
                torch.onnx.export(
                    spec.module, spec.inputs, str(path), dynamo=True, opset_version=int(opset),
                    input_names=list(spec.input_names), output_names=list(spec.output_names),
                    dynamic_shapes=dynamic_shapes, external_data=False, verbose=False,
                    custom_translation_table=translation_table(keep_int32),
                )
            else:
                torch.onnx.export(
                    spec.module, spec.inputs, str(path), dynamo=False, opset_version=int(opset),
                    input_names=list(spec.input_names), output_names=list(spec.output_names),
                    dynamic_axes={k: dict(v) for k, v in spec.dynamic.items() if v} or None,
                )
    except Exception as exc:
        if path.exists():
            path.unlink()
        text = str(exc)
        if int(opset) < 16 and ("grid_sampler" in text or "GridSample" in text):
            raise ExportError(f"field 'opset': GridSample exists only from opset 16; torch.onnx.export "
                              f"({exporter}) failed: {_first_line(exc)} (got {opset})") from exc
        raise ExportError(f"field 'exporter': torch.onnx.export ({exporter}, opset {opset}) failed: "
                          f"{_first_line(exc)} (got {exporter!r})") from exc
    seconds = time.perf_counter() - t0
    model = onnx.load(str(path), load_external_data=False)
    graph_inputs = {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer}
    lost = [n for n in spec.input_names if n not in graph_inputs]
    if lost:
        path.unlink()
        raise ExportError(f"field 'exporter': the {exporter} exporter wrote a graph without input(s) "
                          f"{lost}: it traced the output as a constant of the example inputs "
                          f"(in-place writes it cannot follow); use the other exporter (got {exporter!r})")
    written = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 0)
    if written != int(opset):
        ops = {n.op_type for n in model.graph.node}
        why = (" GridSample exists only from opset 16, so the graph cannot be converted down"
               if "GridSample" in ops and opset < 16 else " the down-conversion failed")
        path.unlink()
        raise ExportError(f"field 'opset': requested opset {opset} but the {exporter} exporter wrote "
                          f"opset {written};{why} (got {opset})")
    if exporter == "dynamo" and int(opset) < 18:
        notes.append(f"dynamo exported at its native opset 18 and converted the graph down to {opset}")
    return seconds, notes


def export_sampler(name: str, path: str | os.PathLike, options: ExportOptions | None = None, *,
                   rig: Rig | None = None, bev_grid: BEVGrid | None = None,
                   features: torch.Tensor | None = None) -> ExportResult:
    """Export one sampler to ONNX with the shapes of the current rig, grid and features.

    Args:
        name: ``"grid_sample"`` (the reference, for contrast), ``"gather_scatter"``,
            ``"deformable"`` (floor variant) or ``"lut"``.
        path: Output ``.onnx`` path.
        options: Sampling settings, feature size and dtype, opset, exporter, dynamic axes,
            deformable kernel and seed (:class:`bevviz.export.models.ExportOptions`; which
            sampler uses which: :class:`bevviz.export.models.ExportSettings`); default
            ``ExportOptions()``.
        rig: The rig (N_cam cameras); default the nuScenes-like sample rig.
        bev_grid: The BEV grid; default :func:`bevviz.export.models.default_bev_grid`
            (32 x 32 cells, 2 pillar points: small and quick).
        features: Feature maps, shape (N_cam, C, H_f, W_f); default seeded N(0, 1) of
            ``options.channels`` x ``options.feature_size`` (given features set both).

    Returns:
        An :class:`ExportResult` (path, opset, input/output names and shapes, seconds).

    Raises:
        ValueError: a bad setting, naming the field and value (:class:`ExportError`, a
            ``ValueError``, when the export itself fails, e.g. ``grid_sample`` below opset 16).
    """
    options = ExportOptions() if options is None else options
    given = {f.name: getattr(options, f.name) for f in fields(ExportOptions)}
    if features is not None and isinstance(features, torch.Tensor) and features.dim() == 4:
        given.update(channels=int(features.shape[1]), feature_size=(int(features.shape[2]), int(features.shape[3])))
    return export_with(ExportSettings(sampler=name, **given), path, rig=rig, bev_grid=bev_grid, features=features)


def export_with(settings: ExportSettings, path: str | os.PathLike, *, rig: Rig | None = None,
                bev_grid: BEVGrid | None = None, features: torch.Tensor | None = None) -> ExportResult:
    """:func:`export_sampler` with a ready :class:`ExportSettings`."""
    if not isinstance(settings, ExportSettings):
        raise field_error("settings", type(settings).__name__, "must be an ExportSettings")
    if rig is None:
        rig = nuscenes_like_rig()
    if bev_grid is None:
        bev_grid = default_bev_grid()
    spec = build_spec(settings, rig, bev_grid, features)
    requested = {k: dict(v) for k, v in spec.dynamic.items()}
    notes: list[str] = []
    attempts = _dynamic_fallbacks(requested)
    seconds, report = 0.0, None
    while attempts:
        attempt = attempts.pop(0)
        spec.dynamic = attempt
        try:
            seconds, more = export_module(spec, path, settings.opset, settings.exporter, settings.keep_int32)
        except ExportError as exc:
            if not attempt or "field 'opset'" in str(exc):
                raise
            notes.append(f"dynamic axes {_axes_text(attempt)} rejected at export ({str(exc)[:300]}); "
                         "retried with fewer")
            continue
        report = inspect_onnx(path)
        broken, why = _probe_dynamic(spec, path, report)
        if broken:
            reduced = {k: {a: sym for a, sym in v.items() if (k, a) not in broken} for k, v in attempt.items()}
            reduced = {k: v for k, v in reduced.items() if v}
            notes.append(f"dynamic axes {', '.join(f'{k}.{attempt[k][a]}' for k, a in sorted(broken))} were "
                         f"declared by the exporter but fail in onnxruntime at another size ({why}); "
                         "re-exported with them static")
            attempts = [reduced] + [a for a in attempts
                                    if a != reduced and len(_axes_text(a)) < len(_axes_text(reduced))]
            if {} not in attempts:
                attempts.append({})
            continue
        notes.extend(more)
        break
    if requested:
        kept = {t.name: t.dynamic_axes for t in report.inputs}
        fixed = sorted({f"{name}.{sym}" for name, axes in requested.items()
                        for ax, sym in axes.items() if ax not in kept.get(name, {})})
        if fixed:
            notes.append(f"static in the graph (the sampler's code fixes them): {', '.join(fixed)}")
    return ExportResult(sampler=settings.sampler, path=os.fspath(path), opset=report.opset,
                        requested_opset=settings.opset, exporter=settings.exporter,
                        inputs=report.inputs, outputs=report.outputs, seconds=seconds,
                        settings=settings, notes=[*spec.notes, *notes], spec=spec)
