"""Tests for bevviz.aggregation: the documented formula point by point, and its named errors."""

import pytest
import torch
import torch.nn.functional as F

from bevviz.aggregation import aggregate, bev_geometry
from bevviz.bev_grid import BEVGrid
from bevviz.pipeline import bev_features
from bevviz.synthetic import nuscenes_like_rig


def test_formula_against_naive_loop():
    # Tiny problem: evaluate the documented formula point by point with single-point grid_sample.
    rig = nuscenes_like_rig().resized(0.04)  # 64 x 36 images, intrinsics scaled
    grid = BEVGrid((10.0, 40.0), (0.0, 30.0), (-1.0, 0.5, 2.0), 3.0)  # front / front-left seam
    feats = torch.randn(6, 3, 9, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    res = bev_features(feats, rig, grid)
    geom = bev_geometry(rig, grid)
    Z, H, W = grid.num_z, *grid.shape
    expect = torch.zeros(3, H, W, dtype=torch.float64)
    for i in range(H):
        for j in range(W):
            means = []
            for n in range(6):
                vals = [F.grid_sample(feats[n:n + 1], geom.grid[n, z, i, j].view(1, 1, 1, 2),
                                      align_corners=False).view(3)
                        for z in range(Z) if geom.valid[n, z, i, j]]
                if vals:
                    means.append(torch.stack(vals).mean(0))
            assert len(means) == int(res.hits[i, j])
            if means:
                expect[:, i, j] = torch.stack(means).mean(0)
    torch.testing.assert_close(res.features, expect, atol=1e-12, rtol=0)
    assert int(res.hits.max()) >= 2  # the test covers overlap cells


def test_aggregate_rejects_mismatched_weights():
    with pytest.raises(ValueError, match="weights"):
        aggregate(torch.zeros(2, 3, 4, 5, 6), torch.zeros(2, 4, 5, 7))
