"""``grid_sample_free()``: export an unmodified PyTorch model without GridSample.

Under the context manager, every 4-D ``F.grid_sample`` (and ``torch.grid_sampler``, which it
calls) that runs while ``torch.onnx.export`` traces -- either exporter: the TorchScript
tracer (``dynamo=False``) or ``torch.export`` (``dynamo=True``) -- is routed to
:func:`bevviz.samplers.gather_scatter.grid_sample`, so the exported graph holds the
gather-scatter sampler (int32 ``Gather`` rows, elementwise tap arithmetic) instead of a
``GridSample`` node. Eager calls under the context (no export tracing) still run PyTorch's
own kernel, and 5-D calls always do.

With ``keep_int32=True`` (default) ``torch.onnx.export(..., dynamo=True)`` also gets
bevviz's translations of ``index_select`` / ``index_add`` that keep int32 indices (see
:mod:`bevviz.export.exporter`; a ``custom_translation_table`` the caller passes wins over
them), and a model written to a path gets every remaining gather / scatter index made int32
in place (:func:`bevviz.export.index_dtypes.make_indices_int32`: the TorchScript tracer
selects taps with int64 scalar indices and emits a few int64 index tensors of its own).

The TorchScript exporter has no symbolic for ``aten::trunc`` (the reflection padding's fold
count) at any opset; under the context it gets one (``Sign(x) * Floor(|x|)``), removed on exit.

The patch is process-wide while the context is open (monkeypatching ``torch``): do not
export another model on another thread meanwhile.

Example::

    with grid_sample_free():
        torch.onnx.export(model, (feats, grid), "model.onnx", dynamo=False, opset_version=17)
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

import onnx
import torch

from bevviz.export.exporter import translation_table
from bevviz.export.index_dtypes import make_indices_int32
from bevviz.samplers import gather_scatter
from bevviz.samplers.gather_scatter.rounding import tracing

__all__ = ["grid_sample_free"]

#: ``torch.grid_sampler``'s enum arguments by name (the order of ``F.grid_sample``).
_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


#: Lowest opset the TorchScript symbolic below is registered for (GridSample's first).
_MIN_OPSET = 16


def _trunc(g, x):
    """TorchScript-exporter symbolic of ``aten::trunc``: ``Sign(x) * Floor(|x|)``."""
    return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))


def _indices_int32_in_place(path: str) -> None:
    """Make the written model's gather / scatter indices int32 (external data left as is)."""
    model = onnx.load(path, load_external_data=False)
    make_indices_int32(model, base_dir=os.path.dirname(os.path.abspath(path)))
    onnx.save_model(model, path)
    onnx.checker.check_model(path, full_check=True)


@contextlib.contextmanager
def grid_sample_free(keep_int32: bool = True) -> Iterator[None]:
    """Route ``F.grid_sample`` to the gather-scatter sampler while ``torch.onnx.export`` traces.

    Args:
        keep_int32: Also give the dynamo exporter bevviz's int32-keeping translations.

    Yields:
        Nothing; on exit ``torch.grid_sampler`` and ``torch.onnx.export`` are restored.
    """
    original_sampler = torch.grid_sampler
    original_export = torch.onnx.export

    def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
        if input.dim() == 4 and tracing():
            return gather_scatter.grid_sample(input, grid, _MODES[int(interpolation_mode)],
                                              _PADDINGS[int(padding_mode)], bool(align_corners))
        return original_sampler(input, grid, interpolation_mode, padding_mode, align_corners)

    @functools.wraps(original_export)
    def export(*args, **kwargs):
        if keep_int32 and kwargs.get("dynamo", True):
            kwargs["custom_translation_table"] = {**translation_table(True),
                                                  **(kwargs.get("custom_translation_table") or {})}
        out = original_export(*args, **kwargs)
        path = kwargs.get("f", args[2] if len(args) > 2 else None)
        if keep_int32 and isinstance(path, (str, os.PathLike)) and os.path.isfile(path):
            _indices_int32_in_place(os.fspath(path))
        return out

    torch.grid_sampler = grid_sampler
    torch.onnx.export = export
    torch.onnx.register_custom_op_symbolic("aten::trunc", _trunc, _MIN_OPSET)
    try:
        yield
    finally:
        torch.grid_sampler = original_sampler
        torch.onnx.export = original_export
        torch.onnx.unregister_custom_op_symbolic("aten::trunc", _MIN_OPSET)
