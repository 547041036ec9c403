"""Tests for the BEV lookup table: equality with the reference, layout, cache keys, errors."""

import pytest
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.pipeline import bev_features
from bevviz.samplers import lut as lut_mod
from bevviz.samplers.lut import build_lut, cached_lut, lut_key

TOL = 1e-5


@pytest.fixture(scope="module")
def grid():
    """Smaller than the shared grid: every test here builds a table."""
    return BEVGrid(resolution=4.096)  # 25 x 25 cells, 4 pillar points


@pytest.fixture(scope="module")
def feats():
    return torch.randn(6, 8, 28, 50, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("overlap", ["mean", "first_hit", "last_write"])
@pytest.mark.parametrize("method", ["sparse", "gather"])
def test_apply_equals_reference(rig, grid, feats, overlap, method):
    table = build_lut(rig, grid, (28, 50), overlap=overlap)
    ref = bev_features(feats, rig, grid, "grid_sample", overlap=overlap)
    out = table.apply(feats, method=method)
    assert out.shape == (8, 25, 25)
    assert float((out - ref.features).abs().max()) < TOL
    assert torch.equal(table.hits, ref.hits) and torch.equal(table.seen, ref.valid)
    assert torch.equal(table.point_valid, ref.point_valid)


def test_float64_table_is_exact(rig, grid):
    f = torch.randn(6, 3, 28, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    table = build_lut(rig, grid, (28, 50), dtype=torch.float64)
    ref = bev_features(f, rig, grid)
    assert float((table.apply(f) - ref.features).abs().max()) < 1e-12


def test_layout_int32_coalesced_and_timed(rig, grid):
    table = build_lut(rig, grid, (28, 50))
    assert table.cols.dtype == torch.int32
    assert table.matrix.layout == torch.sparse_csr and table.matrix.shape == (625, 6 * 28 * 50)
    assert table.matrix.col_indices().dtype == torch.int32
    key = table.rows.to(torch.int64) * (6 * 28 * 50) + table.cols.to(torch.int64)
    assert bool((key[1:] > key[:-1]).all())  # sorted, no duplicates
    assert 0 < table.nnz <= 4 * int(table.point_valid.sum())
    assert table.build_seconds > 0
    # Each seen cell's row sums to 1 where all taps are inside (a partition of unity) and
    # never exceeds 1 (zero padding only removes weight).
    row_sum = torch.zeros(625).index_add_(0, table.rows, table.values)
    assert float(row_sum.max()) <= 1 + 1e-6
    assert float((row_sum[table.hits.reshape(-1) > 0] > 0.999).double().mean()) > 0.9
    idx, wts = table.ell
    assert idx.shape[0] == 625 and idx.dtype == torch.int32
    assert int((idx == 6 * 28 * 50).sum()) == idx.numel() - table.nnz  # padding -> sentinel


def test_per_camera_matches_pipeline(rig, grid, feats):
    table = build_lut(rig, grid, (28, 50))
    ref = bev_features(feats, rig, grid, return_per_camera=True)
    assert float((table.apply_per_camera(feats) - ref.per_camera).abs().max()) < TOL


def test_cache_key_and_cache(rig, grid):
    lut_mod.clear_cache()
    k = lut_key(rig, grid, (28, 50))
    assert hash(k) == hash(lut_key(rig, grid, (28, 50)))
    assert k == lut_key(rig, grid, (28, 50), image_size=(1600, 900))  # the default spelled out
    changed = [
        lut_key(rig.resized(0.5), grid, (28, 50)),
        lut_key(rig, BEVGrid(resolution=2.048), (28, 50)),
        lut_key(rig, grid, (56, 100)),
        lut_key(rig, grid, (28, 50), overlap="first_hit"),
        lut_key(rig, grid, (28, 50), bounds="bevformer"),
        lut_key(rig, grid, (28, 50), image_size=(800, 450)),
        lut_key(rig, grid, (28, 50), dtype=torch.float64),
    ]
    assert len({k, *changed}) == len(changed) + 1
    a = cached_lut(rig, grid, (28, 50))
    assert cached_lut(rig, grid, (28, 50)) is a
    assert cached_lut(rig, grid, (28, 50), overlap="last_write") is not a
    lut_mod.clear_cache()
    assert cached_lut(rig, grid, (28, 50)) is not a


def test_errors(rig, grid, feats):
    table = build_lut(rig, grid, (28, 50))
    with pytest.raises(ValueError, match="features"):
        table.apply(feats[:, :, :27])
    with pytest.raises(ValueError, match="features dtype"):
        table.apply(feats.double())
    with pytest.raises(ValueError, match="method"):
        table.apply(feats, method="dense")
    with pytest.raises(ValueError, match="lut.*feature_size"):
        table.check_compatible(rig, grid, (56, 100))
    with pytest.raises(ValueError, match="lut.*rig"):
        table.check_compatible(rig.resized(0.5), grid, (28, 50))
    with pytest.raises(ValueError, match="feature_size"):
        build_lut(rig, grid, (28,))
    with pytest.raises(ValueError, match="dtype"):
        build_lut(rig, grid, (28, 50), dtype=torch.float16)
    with pytest.raises(ValueError, match="method"):
        build_lut(rig, grid, (28, 50), method="csr")


def test_gradient_through_sparse_apply(rig, grid, feats):
    table = build_lut(rig, grid, (28, 50))
    f = feats.clone().requires_grad_(True)
    table.apply(f).sum().backward()
    # d(sum)/d(feature pixel) = the column sums of A, the same for every channel.
    col_sum = torch.zeros(6 * 28 * 50).index_add_(0, table.cols.long(), table.values)
    expect = col_sum.view(6, 1, 28, 50).expand(6, 8, 28, 50)
    torch.testing.assert_close(f.grad, expect, atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", lut_mod.METHODS)
def test_every_method_reads_nchw_and_channels_last_features_alike(rig, grid, feats, method):
    table = build_lut(rig, grid, (28, 50))
    ref = bev_features(feats, rig, grid, "grid_sample").features
    for f in (feats, feats.contiguous(memory_format=torch.channels_last)):
        out = table.apply(f, method=method)
        assert out.shape == (8, 25, 25)
        assert float((out - ref).abs().max()) < TOL


def test_bag_is_the_default_and_matches_the_sparse_product(rig, grid, feats):
    table = build_lut(rig, grid, (28, 50))
    assert table.method == "bag"
    torch.testing.assert_close(table.apply(feats, method="bag"), table.apply(feats, method="sparse"),
                               rtol=0, atol=1e-6)
    f64 = feats.double()
    t64 = build_lut(rig, grid, (28, 50), dtype=torch.float64)
    torch.testing.assert_close(t64.apply(f64, method="bag"), t64.apply(f64, method="sparse"), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", lut_mod.METHODS)
def test_gradient_of_every_method(rig, grid, feats, method):
    table = build_lut(rig, grid, (28, 50))
    grad_out = torch.randn(8, 25, 25, generator=torch.Generator().manual_seed(3))
    grads = []
    for m in ("sparse", method):
        f = feats.clone().requires_grad_(True)
        table.apply(f, method=m).backward(grad_out)
        grads.append(f.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-5)


def test_bag_of_a_grid_no_camera_sees(rig, feats):
    far = BEVGrid((-20.0, 20.0), (-20.0, 20.0), (500.0,), 4.0)  # 500 m up: above every camera's view
    table = build_lut(rig, far, (28, 50))
    assert table.nnz == 0
    out = table.apply(feats, method="bag")
    ref = bev_features(feats, rig, far, "grid_sample").features
    assert out.shape == ref.shape and float((out - ref).abs().max()) < TOL
