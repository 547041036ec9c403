"""The sampler registry: one object per sampler, carrying what it does; names agree everywhere."""

from __future__ import annotations

import pytest
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.pipeline import PIPELINE_SAMPLERS, BEVSampler, bev_features
from bevviz.samplers import BEV_VARIANTS, SAMPLERS
from bevviz.samplers.lut import build_lut


def test_every_name_has_one_sampler_object_in_the_registry_order():
    assert tuple(PIPELINE_SAMPLERS) == SAMPLERS
    assert all(isinstance(s, BEVSampler) and s.name == name for name, s in PIPELINE_SAMPLERS.items())
    assert {v.sampler for v in BEV_VARIANTS} == set(SAMPLERS)


def test_variant_options_run_each_variant_like_the_reference(rig):
    small = rig.resized(0.05)
    grid = BEVGrid(resolution=4.096)
    feats = torch.rand(len(small), 3, *small[0].size[::-1], generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64)
    table = build_lut(small, grid, tuple(feats.shape[-2:]), dtype=torch.float64)
    ref = bev_features(feats, small, grid, "grid_sample").features
    for v in BEV_VARIANTS:
        kw = v.options(kernel_size=1, lut=table)
        assert ("lut" in kw) == v.table and ("deformable" in kw) == (v.rounding is not None)
        out = bev_features(feats, small, grid, v.sampler, **kw)
        assert out.sampler == v.sampler
        if v.rounding != "floor":  # floor rounding reads other taps by design
            torch.testing.assert_close(out.features, ref, atol=1e-5, rtol=0)


def test_an_unknown_sampler_is_named():
    with pytest.raises(ValueError, match="field 'sampler'"):
        bev_features(torch.zeros(1, 1, 2, 2), None, BEVGrid(), "bicubic")
