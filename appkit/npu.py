"""The NPU export page's "your model" part: the upload, its check and its rewrite, kept in the session.

A model is read from the upload (or, for tests and scripts, bytes handed in through
:data:`HANDED`), bounded by :data:`MAX_ONNX_UPLOAD_BYTES` and the checks of
:mod:`bevviz.export.onnx_file`, and never executed beyond onnxruntime on random inputs.
Results are kept per model digest, so reruns of the page do not redo them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import streamlit as st

from bevviz.checks import MiB, check_at_most
from bevviz.export.model_check import ModelCheck, check_model
from bevviz.export.model_parity import parse_dims
from bevviz.export.onnx_file import LoadedModel, model_from_bytes
from bevviz.export.rewrite import RewriteReport, rewrite_grid_sample

__all__ = ["HANDED", "MAX_ONNX_UPLOAD_BYTES", "UPLOAD", "cached_rewrite", "checked", "rewritten", "uploaded_model"]

#: Largest model the page takes: the app's upload limit (``.streamlit/config.toml``
#: ``maxUploadSize = 50``); larger models: ``bevviz npu rewrite`` (up to 1 GiB).
MAX_ONNX_UPLOAD_BYTES = 50 * MiB
#: The file uploader's key.
UPLOAD = "npu_model_upload"
#: Session key through which a model's bytes can be handed to the page without a browser
#: (AppTest cannot drive ``st.file_uploader``): ``{"name": str, "data": bytes}``.
HANDED = "npu_model_bytes"
_CHECKS = "npu_model_checks"  # digest -> (LoadedModel, ModelCheck)
_REWRITES = "npu_model_rewrites"  # (digest, settings) -> RewriteReport


def uploaded_model() -> tuple[str, bytes] | None:
    """The model to look at: (file name, bytes) from the uploader or :data:`HANDED`, else None."""
    up = st.session_state.get(UPLOAD)
    if up is not None:
        return up.name, up.getvalue()
    handed = st.session_state.get(HANDED)
    if handed:
        return str(handed["name"]), bytes(handed["data"])
    return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def checked(name: str, data: bytes) -> tuple[LoadedModel, ModelCheck]:
    """Read the model within bounds and check it against the rules (cached per content).

    Raises:
        InputError: past :data:`MAX_ONNX_UPLOAD_BYTES`, or a model that is hostile or not
            ONNX (see :mod:`bevviz.export.onnx_file`).
    """
    check_at_most(len(data), MAX_ONNX_UPLOAD_BYTES, "MAX_ONNX_UPLOAD_BYTES", "model",
                  shown=f"{name}: {len(data)} bytes")
    cache = st.session_state.setdefault(_CHECKS, {})
    key = _digest(data)
    if key not in cache:
        loaded = model_from_bytes(data, name, validate=False)
        cache.clear()  # one model at a time
        cache[key] = (loaded, check_model(loaded))
    return cache[key]


def _key(data: bytes, index_dtype: str, dims_text: str, runs: int) -> tuple:
    dims = parse_dims(dims_text.replace(";", ",").split(","), "dims")
    return _digest(data), index_dtype, tuple(sorted(dims.items())), int(runs)


def rewritten(loaded: LoadedModel, data: bytes, index_dtype: str, dims_text: str, runs: int,
              on_step: Callable[[str, float], None] | None = None) -> RewriteReport:
    """Rewrite the model and prove parity (kept for :func:`cached_rewrite`).

    Args:
        loaded: From :func:`checked`.
        data: The model's bytes (its digest keys the cache).
        index_dtype: ``"int32"`` or ``"int64"``.
        dims_text: Sizes of symbolic axes, ``"batch=2, queries=900"`` (blank: defaults).
        runs: Timed runs of each model.
        on_step: Progress callback (step, fraction).

    Raises:
        InputError: field ``dims`` when the text is not ``NAME=SIZE, ...``; the rewrite's and
            the check's own bad-input errors.
    """
    key = _key(data, index_dtype, dims_text, runs)
    cache = st.session_state.setdefault(_REWRITES, {})
    if key not in cache:
        report = rewrite_grid_sample(loaded, index_dtype=index_dtype, check=True, dims=dict(key[2]), runs=key[3],
                                     on_step=on_step)
        cache.clear()  # one rewrite at a time
        cache[key] = report
    return cache[key]


def cached_rewrite(data: bytes, index_dtype: str, dims_text: str, runs: int) -> RewriteReport | None:
    """The rewrite made with these settings, if :func:`rewritten` made it; else None.

    Raises:
        InputError: field ``dims`` (see :func:`rewritten`).
    """
    return st.session_state.get(_REWRITES, {}).get(_key(data, index_dtype, dims_text, runs))
