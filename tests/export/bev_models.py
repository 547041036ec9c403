"""Realistic BEV test models that call ``F.grid_sample``, built here, and their export.

- :class:`SpatialCrossAttention`: BEVFormer-style spatial cross-attention: BEV queries'
  pillar reference points projected into every camera, sampled with one ``grid_sample``
  over the cameras, masked by validity and averaged over the cameras that see them.
- :func:`msda_pytorch`: the multi-scale deformable attention PyTorch fallback (one
  ``grid_sample`` per feature level, attention-weighted sum over levels and points), as
  written in Deformable DETR / mmcv's ``multi_scale_deformable_attn_pytorch``.
- :class:`MixedSampling`: four ``grid_sample`` calls mixing modes, paddings and
  align_corners, plus the model's own int64 gathers (a constant and a computed index).
"""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn


class SpatialCrossAttention(nn.Module):
    """BEVFormer-style spatial cross-attention (one head, projections and the validity mask).

    forward(feats (N_cam, C, H, W), ref (N_cam, N_q, D, 2) normalised, reaching past [-1, 1])
    -> (N_q, C).
    """

    def __init__(self, channels: int):
        super().__init__()
        torch.manual_seed(0)
        self.value = nn.Conv2d(channels, channels, 1)
        self.out = nn.Linear(channels, channels)

    def forward(self, feats: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        value = self.value(feats)
        sampled = F.grid_sample(value, ref, mode="bilinear", padding_mode="zeros", align_corners=False)
        valid = (ref.abs() <= 1).all(-1).to(feats.dtype)  # (N_cam, N_q, D)
        per_cam = (sampled * valid[:, None]).sum(-1)  # (N_cam, C, N_q)
        hits = valid.sum(-1).sum(0).clamp(min=1.0)  # (N_q,)
        return self.out(per_cam.sum(0).transpose(0, 1) / hits[:, None])


def msda_pytorch(value: torch.Tensor, shapes: list[tuple[int, int]], locations: torch.Tensor,
                 weights: torch.Tensor) -> torch.Tensor:
    """Multi-scale deformable attention, PyTorch fallback.

    Args:
        value: (B, sum_l H_l * W_l, heads, C_h).
        shapes: (H_l, W_l) per level.
        locations: (B, N_q, heads, L, P, 2) in [0, 1] (may reach past it).
        weights: (B, N_q, heads, L, P), attention weights.

    Returns:
        (B, N_q, heads * C_h).
    """
    b, _, heads, ch = value.shape
    _, nq, _, levels, points, _ = locations.shape
    per_level = value.split([h * w for h, w in shapes], dim=1)
    grids = 2 * locations - 1
    sampled = []
    for lvl, (h, w) in enumerate(shapes):
        v = per_level[lvl].flatten(2).transpose(1, 2).reshape(b * heads, ch, h, w)
        g = grids[:, :, :, lvl].transpose(1, 2).flatten(0, 1)  # (B * heads, N_q, P, 2)
        sampled.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False))
    attn = weights.transpose(1, 2).reshape(b * heads, 1, nq, levels * points)
    out = (torch.stack(sampled, dim=-2).flatten(-2) * attn).sum(-1).view(b, heads * ch, nq)
    return out.transpose(1, 2).contiguous()


class MSDeformAttn(nn.Module):
    """Multi-scale deformable attention over fixed level shapes (the fallback above)."""

    def __init__(self, shapes: list[tuple[int, int]]):
        super().__init__()
        self.shapes = shapes

    def forward(self, value, locations, weights):
        return msda_pytorch(value, self.shapes, locations, weights.softmax(-1))


class MixedSampling(nn.Module):
    """Four samplings (modes x paddings x align_corners) and the model's own int64 gathers."""

    SETTINGS = (("bilinear", "zeros", False), ("nearest", "border", True),
                ("bilinear", "reflection", True), ("nearest", "reflection", False))

    def __init__(self):
        super().__init__()
        self.register_buffer("channel_order", torch.tensor([2, 0, 1], dtype=torch.int64))

    def forward(self, x, grid):
        outs = [F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a) for m, p, a in self.SETTINGS]
        mixed = torch.stack(outs).sum(0)  # (N, 3, H_out, W_out)
        mixed = mixed.index_select(1, self.channel_order)  # a constant int64 index
        rank = mixed.mean((1, 2)).argsort(-1)  # a computed int64 index, (N, W_out)
        return torch.gather(mixed, 3, rank[:, None, None, :].expand_as(mixed))


class Bicubic(nn.Module):
    """One bilinear and one bicubic sampling: the second is refused by the rewrite."""

    def forward(self, x, grid):
        return (F.grid_sample(x, grid, mode="bilinear", align_corners=False)
                + F.grid_sample(x, grid, mode="bicubic", align_corners=False))


def export_torchscript(module: nn.Module, args: tuple, names: list[str], opset: int = 17,
                       dynamic: dict | None = None) -> bytes:
    """``torch.onnx.export(dynamo=False)`` into bytes (the legacy tracer: fast, keeps GridSample)."""
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module.eval(), args, buf, dynamo=False, opset_version=opset, input_names=names,
                          output_names=["out"], dynamic_axes=dynamic)
    return buf.getvalue()


def sca_inputs(cams: int = 6, channels: int = 16, size: tuple[int, int] = (8, 12), queries: int = 50,
               depth: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(feats (N_cam, C, H, W), ref (N_cam, N_q, D, 2) uniform in [-1.3, 1.3])."""
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(cams, channels, *size, generator=g)
    ref = torch.rand(cams, queries, depth, 2, generator=g) * 2.6 - 1.3
    return feats, ref


def msda_inputs(shapes, batch: int = 2, queries: int = 30, heads: int = 2, ch: int = 4, points: int = 4,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(value, locations in [-0.15, 1.15], attention logits) of :class:`MSDeformAttn`."""
    g = torch.Generator().manual_seed(seed)
    keys = sum(h * w for h, w in shapes)
    value = torch.randn(batch, keys, heads, ch, generator=g)
    locations = torch.rand(batch, queries, heads, len(shapes), points, 2, generator=g) * 1.3 - 0.15
    logits = torch.randn(batch, queries, heads, len(shapes) * points, generator=g)
    return value, locations, logits.view(batch, queries, heads, len(shapes), points)
