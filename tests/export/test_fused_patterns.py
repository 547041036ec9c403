"""MatMul / Einsum weighted sums of GridSample outputs, as torch.onnx.export writes them: fused
into one gather when they are a per-point weighted sum with weights constant across channels,
rewritten node by node otherwise; parity with onnxruntime on the original either way."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bevviz.export import inspect_onnx, rewrite_grid_sample
from bevviz.export.inspection import GATHER_OPS, SCATTER_OPS
from bevviz.export.rewrite import RewriteOptions

from .bev_models import export_torchscript

TOL, CUBIC_TOL = 1e-5, 1e-4
N, C, HQ, P = 2, 32, 60, 4  # cameras / batch x heads, channels, queries, points (HQ * P > H * W)
SIZES = [(9, 11), (5, 6), (3, 3)]  # feature maps of the levels
SETTINGS = [("bilinear", "zeros", False), ("nearest", "border", True), ("bicubic", "reflection", False),
            ("bilinear", "reflection", True)]


class Summed(nn.Module):
    """GridSample of each level, then ``combine(sampled, weights)``."""

    def __init__(self, combine, mode: str, padding: str, align: bool):
        super().__init__()
        self.combine, self.mode, self.padding, self.align = combine, mode, padding, align

    def forward(self, w, *xg):
        sampled = [F.grid_sample(x, g, mode=self.mode, padding_mode=self.padding, align_corners=self.align)
                   for x, g in zip(xg[::2], xg[1::2])]
        return self.combine(sampled, w)


# name -> (combine, weight shape, levels, form); sampled values are (N, C, HQ, P) per level
FUSED = {
    "matmul(s.unsqueeze(-2), w.unsqueeze(-1))": (
        lambda s, w: torch.matmul(s[0].unsqueeze(-2), w.unsqueeze(-1)).squeeze(-1).squeeze(-1),
        (N, 1, HQ, P), 1, "fused: Unsqueeze+MatMul"),
    "matmul(s, w) per camera and point": (lambda s, w: torch.matmul(s[0], w), (N, 1, P, 1), 1, "fused: MatMul"),
    "matmul(s, w) with w a vector": (lambda s, w: torch.matmul(s[0], w), (P,), 1, "fused: MatMul"),
    "einsum nchp,nhp->nch": (lambda s, w: torch.einsum("nchp,nhp->nch", s[0], w), (N, HQ, P), 1, "fused: Einsum"),
    "einsum bhp,bchp->bch": (lambda s, w: torch.einsum("bhp,bchp->bch", w, s[0]), (N, HQ, P), 1, "fused: Einsum"),
    "einsum nchp,nph->nch (weight letters reordered)": (
        lambda s, w: torch.einsum("nchp,nph->nch", s[0], w), (N, P, HQ), 1, "fused: Einsum"),
    "einsum nchp,p->nch (one weight per point)": (
        lambda s, w: torch.einsum("nchp,p->nch", s[0], w), (P,), 1, "fused: Einsum"),
    "einsum nchp,hp->nch (weights shared by the cameras)": (
        lambda s, w: torch.einsum("nchp,hp->nch", s[0], w), (HQ, P), 1, "fused: Einsum"),
    "levels concatenated, matmul": (
        lambda s, w: torch.matmul(torch.cat(s, -1).unsqueeze(-2), w.unsqueeze(-1)).squeeze(-1).squeeze(-1),
        (N, 1, HQ, 3 * P), 3, "fused: Concat+Unsqueeze+MatMul (3 levels)"),
    "levels stacked, einsum over levels and points": (
        lambda s, w: torch.einsum("nchlp,nhlp->nch", torch.stack(s, -2), w), (N, HQ, 3, P), 3,
        "fused: Stack+Einsum (3 levels)"),
}

# look alike, are not a weighted sum of samples with weights constant across C: per node
PER_NODE = {
    "matmul weights per channel": (
        lambda s, w: torch.matmul(s[0].unsqueeze(-2), w.unsqueeze(-1)).squeeze(-1).squeeze(-1), (N, C, HQ, P),
        "MatMul weight of shape (2, 32, 60, 4, 1): varies with C"),
    "matmul two outputs per query": (lambda s, w: torch.matmul(s[0], w), (N, 1, P, 2),
                                     "not one column over the 4 points"),
    "einsum weights per channel": (lambda s, w: torch.einsum("nchp,nchp->nch", s[0], w), (N, C, HQ, P),
                                   "Einsum 'nchp,nchp->nch': the weights vary with C"),
    "einsum contracts C": (lambda s, w: torch.einsum("nchp,nc->nhp", s[0], w), (N, C),
                           "Einsum 'nchp,nc->nhp': the output is not the samples' leading axes"),
    "einsum output reordered": (lambda s, w: torch.einsum("nchp,nhp->nhc", s[0], w), (N, HQ, P),
                                "the output is not the samples' leading axes"),
    "einsum keeps the points": (lambda s, w: torch.einsum("nchp,nh->nchp", s[0], w), (N, HQ),
                                "the output is not the samples' leading axes"),
    "levels stacked, einsum over points only": (
        lambda s, w: torch.einsum("nchlp,nhlp->nchl", torch.stack(s, -2), w), (N, HQ, 3, P),
        "Einsum sums the points, not the levels"),
}


def _export(combine, weight_shape, levels: int, setting) -> tuple[onnx.ModelProto, dict]:
    g = torch.Generator().manual_seed(levels)
    args = [torch.randn(*weight_shape, generator=g)]
    names = ["w"]
    for i, (h, w) in enumerate(SIZES[:levels]):
        args += [torch.randn(N, C, h, w, generator=g), torch.rand(N, HQ, P, 2, generator=g) * 2.8 - 1.4]
        names += [f"x{i}", f"g{i}"]
    model = onnx.load_from_string(export_torchscript(Summed(combine, *setting), tuple(args), names))
    return model, {n: a.numpy() for n, a in zip(names, args)}


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(model: onnx.ModelProto, feed: dict) -> np.ndarray:
    return _session(model).run(None, feed)[0]


def _rewritten(model: onnx.ModelProto, feed: dict, setting, options: RewriteOptions | None = None):
    """The rewrite, checked: valid (full check), no GridSample, int32 indices, parity with the original."""
    report = rewrite_grid_sample(model, options=options)
    onnx.checker.check_model(report.model, full_check=True)
    inv = inspect_onnx(report.model)
    assert inv.op_counts.get("GridSample", 0) == 0 and report.grid_sample_after == 0 and not report.refused
    assert report.int32_ok and inv.index_dtypes(GATHER_OPS + SCATTER_OPS, role=None) == ["int32"]
    diff = np.abs(_run(model, feed) - _run(report.model, feed)).max()
    assert diff <= (CUBIC_TOL if setting[0] == "bicubic" else TOL), (diff, [c.form for c in report.replaced])
    return report


def _float_shapes(model: onnx.ModelProto, feed: dict) -> list[tuple[int, ...]]:
    """Shapes of the float tensors ``model`` computes, every node's outputs read back from onnxruntime."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=o) for n in probe.graph.node for o in n.output
                              if o and o not in known)
    return [a.shape for a in _session(probe).run(None, feed) if a.dtype == np.float32]


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("name", list(FUSED))
def test_matmul_and_einsum_weighted_sums_are_fused(name, setting):
    combine, weight_shape, levels, form = FUSED[name]
    model, feed = _export(combine, weight_shape, levels, setting)
    budget = RewriteOptions(max_intermediate_mib=2 * 16 * C * 4 / 2**20)  # 2 bilinear queries a chunk
    report = _rewritten(model, feed, setting, budget)
    assert {c.form for c in report.replaced} == {form} and len(report.replaced) == levels
    assert report.replaced[0].chunks > 1
    shapes = _float_shapes(report.model, feed)  # no GridSample output, not even one level's, either layout:
    assert not {(N, C, HQ, P), (N, HQ, P, C), (N, C, HQ, levels * P), (N, C, HQ, levels, P)} & set(shapes)
    assert max(np.prod(s) for s in shapes) < levels * N * C * HQ * P  # nor anything as large (table included)
    per_node = _rewritten(model, feed, setting, RewriteOptions(fuse=False))
    assert {c.form for c in per_node.replaced} == {"per-node"}


@pytest.mark.parametrize("name", list(PER_NODE))
def test_what_only_looks_like_a_weighted_sum_stays_per_node(name):
    combine, weight_shape, why = PER_NODE[name]
    levels = 3 if "levels" in name else 1
    setting = SETTINGS[0]
    model, feed = _export(combine, weight_shape, levels, setting)
    report = _rewritten(model, feed, setting)
    assert {c.form for c in report.replaced} == {"per-node"} and len(report.replaced) == levels
    said = [n for n in report.notes if "rewritten per node, not fused: " in n]
    assert len(said) == 1 and why in said[0], report.notes  # said once, for the GridSample read by the product
