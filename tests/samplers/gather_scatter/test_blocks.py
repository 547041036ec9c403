"""bevviz.samplers.gather_scatter.blocks: the blocked gather (block sizes, partial last
blocks, the two-step transposition and the identity product in use, worker threads), sparse
layouts and the blocked scatter-add backward, against F.grid_sample and plain index
arithmetic as oracles."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from bevviz import threads
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.gather_scatter import blocks, transpose
from bevviz.samplers.reference import MODES


def _features(n, c, h, w, dtype, seed=0):
    return torch.randn(n, c, h, w, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _tol(mode, dtype, tolerance):
    # nearest is a pure gather: it must be bit-exact, ties at pixel edges included.
    return 0.0 if mode == "nearest" else tolerance[dtype]


def _random_taps(rows, k, m, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, rows, (k, m), generator=gen, dtype=torch.int64)
    weights = torch.rand(k, m, generator=gen, dtype=dtype)
    return indices, weights


@pytest.mark.parametrize("mode", MODES)
def test_blocked_gather_with_partial_last_block(mode, monkeypatch, edge_grid, matches, tolerance):
    # Tiny blocks: several per image and a partial last one, in both output layouts.
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)  # -> the minimum block of 64 points
    x = _features(2, 3, 4, 6, torch.float32)
    g = edge_grid(2, 4, 6, False, torch.float32)[:, :, :-1]  # > 64 points per image,
    assert (g.shape[1] * g.shape[2]) % 64 != 0  # not a multiple of 64
    expected = F.grid_sample(x, g, mode, "zeros", False)
    matches(gs.grid_sample(x, g, mode), expected, _tol(mode, torch.float32, tolerance))
    taps = gs.compute_taps(g.reshape(2, -1, 2), 4, 6, mode)
    matches(gs.gather(x, taps), expected.flatten(2).transpose(1, 2),
            _tol(mode, torch.float32, tolerance))


@pytest.mark.parametrize("mode", MODES)
def test_worker_threads_match_and_leave_thread_count_alone(mode, monkeypatch, edge_grid, matches,
                                                           tolerance):
    # Force the threaded path (two workers, small blocks and segments) on tiny inputs.
    monkeypatch.setattr(blocks, "_PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(blocks, "_BLOCKS_PER_SEGMENT", 1)
    monkeypatch.setattr(threads, "worker_count", lambda: 2)
    monkeypatch.setattr(threads, "_POOL", None)  # a fresh pool starts inside this test
    before = torch.get_num_threads()
    x = _features(3, 5, 4, 6, torch.float64)
    g = edge_grid(3, 4, 6, True, torch.float64)
    expected = F.grid_sample(x, g, mode, "reflection", True)
    matches(gs.grid_sample(x, g, mode, "reflection", True), expected,
            _tol(mode, torch.float64, tolerance))
    taps = gs.compute_taps(g.reshape(3, -1, 2), 4, 6, mode, "reflection", True)
    matches(gs.gather(x, taps), expected.flatten(2).transpose(1, 2),
            _tol(mode, torch.float64, tolerance))
    assert torch.get_num_threads() == before
    # The workers run single-threaded; a thread created afterwards does not inherit that.
    assert threads._POOL.submit(torch.get_num_threads).result() == 1
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert seen == [before]


def test_two_step_transposition_of_whole_tiles(monkeypatch, matches, tolerance):
    # Blocks of exactly 64 points take the tiled transposing copy; a partial last block
    # takes the direct one.
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 4 * 64 * 7)  # 7 channels -> 64-point blocks
    monkeypatch.setattr(blocks, "_GATHER_SCALE", 1)  # in the forward too
    x = _features(2, 7, 5, 9, torch.float32)
    g = torch.rand(2, 13, 11, 2, generator=torch.Generator().manual_seed(1)) * 2.4 - 1.2
    expected = F.grid_sample(x, g, "bilinear", "zeros", False)
    matches(gs.grid_sample(x, g), expected, tolerance[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("sparse", [False, True])
def test_layout_gather_equals_index_arithmetic(sparse, dtype, monkeypatch):
    # (N, C, P) = sum_k w[k] * table[idx[k]] at the layout's points, zeros elsewhere; tiny
    # blocks and tiles so every branch (tiled copy, partial block, scatter into the
    # sparse output) runs.
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(blocks, "TILE", 4)
    monkeypatch.setattr(transpose, "TILE", 4)
    n, c, p, k, rows = 3, 5, 70, 4, 40
    table = torch.randn(rows, c, dtype=dtype, generator=torch.Generator().manual_seed(1))
    keep = torch.rand(n, p, generator=torch.Generator().manual_seed(2)) < 0.4
    keep[1] = False  # one image with no gathered point at all
    layout = blocks.Layout.sparse(keep) if sparse else blocks.Layout.dense(n, p)
    indices, weights = _random_taps(rows, k, layout.size, dtype)
    out = blocks.layout_gather(table, blocks.precomputed(indices, weights, layout), k, False, layout)
    flat = (table[indices] * weights[..., None]).sum(0)  # (M, C), the gathered points' values
    expected = torch.zeros(n, c, p, dtype=dtype)
    mask = keep if sparse else torch.ones(n, p, dtype=torch.bool)
    expected.permute(0, 2, 1)[mask] = flat
    torch.testing.assert_close(out, expected, rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=1e-6)
    assert out.is_contiguous()


@pytest.mark.parametrize("skip_weights", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_scatter_blocks_is_the_adjoint_of_the_gather(sparse, skip_weights, monkeypatch):
    # <gather(table), grad> == <table, scatter(grad)>, and the weights' gradient is
    # sum_c grad * table[idx[k]]: checked against autograd of plain index arithmetic.
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(blocks, "TILE", 4)
    monkeypatch.setattr(transpose, "TILE", 4)
    n, c, p, k, rows = 2, 3, 90, 4, 25
    dtype = torch.float64
    table = torch.randn(rows, c, dtype=dtype, generator=torch.Generator().manual_seed(3))
    keep = torch.rand(n, p, generator=torch.Generator().manual_seed(4)) < 0.5
    layout = blocks.Layout.sparse(keep) if sparse else blocks.Layout.dense(n, p)
    indices, weights = _random_taps(rows, k, layout.size, dtype, seed=5)
    if skip_weights:
        weights = torch.ones_like(weights)
    grad = torch.randn(n, c, p, dtype=dtype, generator=torch.Generator().manual_seed(6))
    grad_table, dots = blocks.scatter_blocks(grad, layout, blocks.precomputed(indices, weights, layout),
                                             k, skip_weights, rows, True, table)
    t = table.clone().requires_grad_()
    w = weights.clone().requires_grad_()
    flat = (t[indices] * w[..., None]).sum(0)  # (M, C)
    mask = keep if sparse else torch.ones(n, p, dtype=torch.bool)
    (flat * grad.permute(0, 2, 1)[mask]).sum().backward()
    torch.testing.assert_close(grad_table, t.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(dots, w.grad, rtol=0, atol=1e-12)


def test_scatter_blocks_without_table_gradient_or_weights_gradient():
    layout = blocks.Layout.dense(1, 8)
    indices, weights = _random_taps(6, 4, 8, torch.float64)
    grad = torch.ones(1, 2, 8, dtype=torch.float64)
    taps_of = blocks.precomputed(indices, weights, layout)
    assert blocks.scatter_blocks(grad, layout, taps_of, 4, False, 6, False, None) == (None, None)
    grad_table, dots = blocks.scatter_blocks(grad, layout, taps_of, 4, False, 6, True, None)
    assert dots is None and grad_table.shape == (6, 2)
    # every output point's gradient of 1 lands on its taps with their weights
    expected = torch.zeros(6, dtype=torch.float64).index_add_(0, indices.reshape(-1), weights.reshape(-1))
    torch.testing.assert_close(grad_table[:, 0], expected)


def test_blocks_are_whole_tiles_and_cache_sized():
    for c in (1, 7, 64, 256, 4096):
        for k in (1, 4, 16):
            block = blocks._block_points(c, k)
            assert block % blocks.TILE == 0 and block >= blocks.TILE
            if block > blocks.TILE:  # only the minimum block may exceed the cache budget
                assert block * c * k <= blocks._CHUNK_ELEMENTS


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("k", [1, 4, 16])
def test_bag_rows_is_the_weighted_sum_of_tap_rows(k, index_dtype, dtype):
    # One embedding_bag pass == the out-of-place chain of weighted_rows (the autograd path),
    # for tap-major and point-major (transposed view) taps; NaN weights give NaN rows even
    # on the zero sentinel row, as 0 * NaN in PyTorch's kernel.
    rows, c, m = 30, 6, 50
    table = torch.randn(rows, c, dtype=dtype, generator=torch.Generator().manual_seed(7))
    table[-1] = 0
    indices, weights = _random_taps(rows, k, m, dtype, seed=8)
    indices[:, 3] = rows - 1
    weights[0, 3] = float("nan")
    indices = indices.to(index_dtype)
    expected = blocks.weighted_rows(table, indices, weights, False)
    for idx, wts in [(indices, weights), (indices.t().contiguous().t(), weights.t().contiguous().t())]:
        got = blocks.bag_rows(table, idx, wts)
        assert got.shape == (m, c) and got.is_contiguous()
        assert torch.isnan(got[3]).all() and not torch.isnan(got[torch.arange(m) != 3]).any()
        torch.testing.assert_close(got[:3], expected[:3], rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)
        torch.testing.assert_close(got[4:], expected[4:], rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)
    ones = torch.ones_like(weights)
    torch.testing.assert_close(blocks.bag_rows(table, indices, None), blocks.weighted_rows(table, indices, ones, False),
                               rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_with_and_without_identity_transposition_agree_exactly(mode, monkeypatch, matches, tolerance):
    # C = 32 with whole tiles: the identity product stores the blocks; with it refused, the
    # tiled copy does. Same bits (up to zero signs); non-finite features (an inf) take the copy
    # for their blocks and spread nothing to other channels.
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)  # several 64-point blocks per image
    x = _features(2, 32, 9, 11, torch.float32, seed=11)
    x[1, 5, 4, 6] = float("inf")
    g = torch.rand(2, 16, 24, 2, generator=torch.Generator().manual_seed(12)) * 2.2 - 1.1
    taken = []
    real = transpose.transpose_by_identity

    def spy(rows, src, finite=False):
        taken.append(real(rows, src, finite))
        return taken[-1]

    monkeypatch.setattr(transpose, "transpose_by_identity", spy)
    fast = gs.grid_sample(x, g, mode)
    assert True in taken and False in taken  # finite blocks by the product, the inf's by the copy
    monkeypatch.setattr(transpose, "transpose_by_identity", lambda rows, src, finite=False: False)
    plain = gs.grid_sample(x, g, mode)
    assert torch.equal(torch.isnan(fast), torch.isnan(plain))
    assert torch.equal(fast.nan_to_num(3.0), plain.nan_to_num(3.0))
    matches(fast, F.grid_sample(x, g, mode, "zeros", False), _tol(mode, torch.float32, tolerance))
    # Finite features whose sums overflow: the table does not vouch, each block's sum sends
    # the overflowing ones to the copy; a bounded table: every block by the product, unchecked.
    for big, bounded in ((torch.finfo(torch.float32).max / 2, False), (1e30, True)):
        x = _features(2, 32, 9, 11, torch.float32, seed=15)
        x[0, :, 3:6] = big
        taken.clear()
        monkeypatch.setattr(transpose, "transpose_by_identity", spy)
        fast = gs.grid_sample(x, g, mode)
        assert transpose.table_bounded(gs.feature_table(x), 16) == bounded and True in taken
        monkeypatch.setattr(transpose, "transpose_by_identity", lambda rows, src, finite=False: False)
        plain = gs.grid_sample(x, g, mode)
        assert torch.equal(torch.isnan(fast), torch.isnan(plain))
        assert torch.equal(fast.nan_to_num(3.0), plain.nan_to_num(3.0))
