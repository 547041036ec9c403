"""Read a user's ONNX model within bounds: size, external data, structure, validity.

A model handed to bevviz (``bevviz npu check|rewrite``, the NPU export page) is data, never
code: it is parsed, checked and, at most, run by onnxruntime on random inputs. Every way a
file can be hostile ends in an :class:`~bevviz.errors.InputError` naming the field, before
anything of the claimed size is allocated:

- not ONNX, or truncated: protobuf refuses it (``field 'model'``);
- larger than :data:`MAX_ONNX_BYTES` (file size, or the external data it claims): refused
  from ``os.stat`` and the tensors' ``length`` entries, before reading;
- external data outside the model's folder (absolute paths, ``..``, links leaving it), or an
  offset / length beyond the referenced file: refused before opening it;
- a graph with a cycle, or a name produced twice: refused by a linear walk;
- anything else ``onnx.checker`` (full check) rejects.

External data inside the folder is read into the model here, with these checks, so no
other code (onnx's own loader included) ever follows a file reference.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from bevviz.checks import MiB, check_at_most, field_error

__all__ = ["MAX_ONNX_BYTES", "MAX_ONNX_NODES", "LoadedModel", "as_loaded", "check_valid", "load_model",
           "model_from_bytes", "walk_graphs"]

#: Largest model read, weights (inline or external) included: BEVFormer-base exports to about
#: 270 MB; protobuf parses a model in about twice its size in memory, so 1 GiB stays bounded.
MAX_ONNX_BYTES = 1024 * MiB
#: Most nodes over all graphs of a model: a BEVFormer export has about 10,000; the rewrite adds
#: about 100-200 per GridSample node plus 3-15 per gather chunk (at most 256 chunks each).
MAX_ONNX_NODES = 1_000_000


@dataclass
class LoadedModel:
    """A checked model and where it came from.

    Attributes:
        model: The model, external data (if any) read in.
        name: The file name (or upload name) for messages.
        folder: The model file's folder (``None`` for bytes).
        nbytes: Size of the model, external data included.
    """

    model: onnx.ModelProto
    name: str
    folder: str | None
    nbytes: int


def walk_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph nested in node attributes (If / Loop / Scan bodies)."""
    stack = [graph]
    while stack:
        g = stack.pop()
        yield g
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)


def _tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every stored tensor: initializers and tensor attributes, in all graphs and functions."""
    graphs = list(walk_graphs(model.graph))
    nodes = [n for g in graphs for n in g.node] + [n for f in model.functions for n in f.node]
    for g in graphs:
        yield from g.initializer
        yield from (sp.values for sp in g.sparse_initializer)
    for node in nodes:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors


def _inside(folder: str, location: str) -> str | None:
    """The real path of ``location`` when it lies inside ``folder``, else None."""
    if not location or os.path.isabs(location) or "\\" in location or "\x00" in location:
        return None
    if any(part == ".." for part in location.split("/")):
        return None
    base = os.path.realpath(folder)
    full = os.path.realpath(os.path.join(base, location))
    return full if os.path.commonpath([base, full]) == base else None


def _read_external(model: onnx.ModelProto, folder: str | None, name: str, budget: int) -> int:
    """Check every external-data reference, then read it into its tensor.

    Returns:
        Bytes read.
    """
    refs = [t for t in _tensors(model) if t.data_location == TensorProto.EXTERNAL]
    if not refs:
        return 0
    if folder is None:
        raise field_error("model", name, "references external data files, which an upload cannot carry; "
                                         "save the model as one file (onnx.save(..., save_as_external_data=False))")
    plans, total = [], 0
    for t in refs:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        path = _inside(folder, location)
        if path is None:
            raise field_error(f"initializer {t.name!r}.location", location,
                              "external data must be a file inside the model's folder")
        if not os.path.isfile(path):
            raise field_error(f"initializer {t.name!r}.location", location, "no such external data file")
        try:
            offset, length = int(info.get("offset", 0)), int(info.get("length", -1))
        except ValueError:
            raise field_error(f"initializer {t.name!r}.length", info.get("length"), "must be an integer") from None
        size = os.path.getsize(path)
        if length < 0:
            length = size - offset
        if offset < 0 or offset + length > size:
            raise field_error(f"initializer {t.name!r}.length", length,
                              f"offset {offset} + length runs past the end of {location!r} ({size} bytes)")
        total += length
        check_at_most(total + budget, MAX_ONNX_BYTES, "MAX_ONNX_BYTES", "model",
                      shown=f"{name}: {total + budget} bytes with external data")
        plans.append((t, path, offset, length))
    for t, path, offset, length in plans:
        with open(path, "rb") as fh:
            fh.seek(offset)
            t.raw_data = fh.read(length)
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
    return total


def _check_structure(model: onnx.ModelProto, name: str) -> None:
    """Refuse cycles, names produced twice and node counts past :data:`MAX_ONNX_NODES`."""
    count = 0
    for g in walk_graphs(model.graph):
        count += len(g.node)
        check_at_most(count, MAX_ONNX_NODES, "MAX_ONNX_NODES", "model", shown=f"{name}: {count}+ nodes")
        producer: dict[str, int] = {}
        for i, node in enumerate(g.node):
            for out in node.output:
                if out and out in producer:
                    raise field_error("graph", f"{name}: {out}", "a tensor is produced by two nodes")
                if out:
                    producer[out] = i
        # Kahn's walk over the nodes of this graph (outer-scope names count as given).
        waiting = [0] * len(g.node)
        users: dict[int, list[int]] = {}
        for i, node in enumerate(g.node):
            for src in {producer[x] for x in node.input if x in producer}:
                waiting[i] += 1
                users.setdefault(src, []).append(i)
        ready = [i for i, w in enumerate(waiting) if w == 0]
        done = 0
        while ready:
            i = ready.pop()
            done += 1
            for j in users.get(i, ()):
                waiting[j] -= 1
                if waiting[j] == 0:
                    ready.append(j)
        if done < len(g.node):
            stuck = next(g.node[i] for i, w in enumerate(waiting) if w > 0)
            raise field_error("graph", f"{name}: {stuck.name or stuck.op_type}",
                              f"has a cycle ({len(g.node) - done} nodes wait on each other)")


def check_valid(model: onnx.ModelProto, field: str, name: str) -> None:
    """``onnx.checker.check_model(full_check=True)``, as an InputError naming ``field``."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, ...
        raise field_error(field, name, "fails onnx.checker (full check): "
                                       + " ".join(str(exc).split())[:300]) from None


def _parse(data: bytes, name: str, folder: str | None, validate: bool) -> LoadedModel:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise field_error("model", name, f"not an ONNX model, or truncated ({type(exc).__name__}: "
                                         f"{' '.join(str(exc).split())[:160]})") from None
    if not model.HasField("graph") or not model.opset_import:
        raise field_error("model", name, "not an ONNX model (no graph or no opset_import)")
    extra = _read_external(model, folder, name, len(data))
    _check_structure(model, name)
    if validate:
        check_valid(model, "model", name)
    return LoadedModel(model, name, folder, len(data) + extra)


def model_from_bytes(data: bytes, name: str = "upload", *, validate: bool = True) -> LoadedModel:
    """Parse and check a model held in memory (an upload); external data is refused.

    Args:
        data: The ``.onnx`` file's bytes.
        name: Shown in messages.
        validate: Also refuse a model ``onnx.checker`` (full check) rejects.

    Raises:
        InputError: see the module docstring.
    """
    check_at_most(len(data), MAX_ONNX_BYTES, "MAX_ONNX_BYTES", "model", shown=f"{name}: {len(data)} bytes")
    return _parse(bytes(data), name, None, validate)


def load_model(path: str | os.PathLike, *, validate: bool = True) -> LoadedModel:
    """Read, bound and check an ``.onnx`` file (external data beside it allowed).

    Args:
        path: The model file.
        validate: Also refuse a model ``onnx.checker`` (full check) rejects.

    Returns:
        A :class:`LoadedModel`.

    Raises:
        InputError: see the module docstring (field ``path`` for a missing file).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise field_error("path", path, "no such ONNX file")
    size = os.path.getsize(path)
    check_at_most(size, MAX_ONNX_BYTES, "MAX_ONNX_BYTES", "model", shown=f"{path}: {size} bytes")
    with open(path, "rb") as fh:
        data = fh.read(MAX_ONNX_BYTES + 1)
    return _parse(data, os.path.basename(path), os.path.dirname(os.path.abspath(path)), validate)


def as_loaded(src: str | os.PathLike | bytes | onnx.ModelProto | LoadedModel, validate: bool = True) -> LoadedModel:
    """Any model source as a checked :class:`LoadedModel`.

    Args:
        src: A path, the file's bytes, an ``onnx.ModelProto`` or a ``LoadedModel`` (as is).
        validate: Also refuse a model that ``onnx.checker`` (full check) rejects.

    Raises:
        InputError: see the module docstring; field ``src`` for a source of another type.
    """
    if isinstance(src, LoadedModel):
        return src
    if isinstance(src, onnx.ModelProto):
        return model_from_bytes(src.SerializeToString(), src.graph.name or "model", validate=validate)
    if isinstance(src, (bytes, bytearray, memoryview)):
        return model_from_bytes(bytes(src), validate=validate)
    if isinstance(src, (str, os.PathLike)):
        return load_model(src, validate=validate)
    raise field_error("src", type(src).__name__, "must be a path, bytes or an onnx.ModelProto")
