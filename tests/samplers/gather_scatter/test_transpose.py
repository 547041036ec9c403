"""bevviz.samplers.gather_scatter.transpose: the identity product is bit-exact where it runs and
declines what it cannot do exactly; a bounded table vouches for its blocks and nothing else."""

from __future__ import annotations

import pytest
import torch

from bevviz.samplers.gather_scatter import transpose


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("c", [8, 24, 48])
def test_transposition_by_identity_is_bit_exact(c, dtype):
    # Into a channels-first slice (a row stride longer than the block): every value's bits,
    # subnormals and extremes included; a zero may only change its sign.
    m, p = 96, 200
    src = torch.randn(m, c, dtype=dtype, generator=torch.Generator().manual_seed(9))
    info = torch.finfo(dtype)
    src[0, :4] = torch.tensor([info.tiny / 8, -info.tiny / 3, info.max, -info.max / 7], dtype=dtype)
    src[1, :2] = torch.tensor([0.0, -0.0], dtype=dtype)
    out = torch.full((c, p), 7.0, dtype=dtype)
    assert transpose.transpose_by_identity(out[:, 50 : 50 + m], src)
    bits = torch.int32 if dtype == torch.float32 else torch.int64
    got, want = out[:, 50 : 50 + m], src.t()
    same = (got.view(bits) == want.view(bits)) | ((got == 0) & (want == 0))
    assert bool(same.all()), int((~same).sum())
    assert bool((out[:, :50] == 7).all() and (out[:, 50 + m :] == 7).all())  # nothing else written


def test_transposition_by_identity_declines_what_it_cannot_do_exactly(monkeypatch):
    rows = torch.empty(16, 64)
    src = torch.randn(64, 16, generator=torch.Generator().manual_seed(10))
    for bad in (float("inf"), float("nan")):  # 0 * inf would spread NaN across channels
        poisoned = src.clone()
        poisoned[5, 3] = bad
        assert not transpose.transpose_by_identity(rows, poisoned)
    assert not transpose.transpose_by_identity(torch.empty(12, 64), torch.randn(64, 12))  # C % 8
    assert not transpose.transpose_by_identity(rows.half(), src.half())
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "medium")  # bf16 allowed
    assert not transpose.exact_matmul(src) and transpose.exact_matmul(src.double())
    assert not transpose.transpose_by_identity(rows, src)


def test_a_bounded_table_vouches_for_its_blocks_and_nothing_else():
    # Bounded table (per call) + bounded weights (per block): the block's sums are finite
    # without reading them; anything else is checked by the block's own sum.
    table = torch.randn(40, 16, generator=torch.Generator().manual_seed(13))
    assert transpose.table_bounded(table, 16) and transpose.table_bounded(table.double(), 4)
    assert not transpose.table_bounded(table[:, :12], 4)  # no identity product at C = 12
    for bad in (float("inf"), float("nan"), torch.finfo(torch.float32).max / 10):
        poisoned = table.clone()
        poisoned[7, 2] = bad
        assert not transpose.table_bounded(poisoned, 4)
    weights = torch.rand(16, 30, generator=torch.Generator().manual_seed(14)) * 2 - 1
    assert transpose.within_bound(weights, transpose.WEIGHT_BOUND)
    weights[3, 4] = float("nan")
    assert not transpose.within_bound(weights, transpose.WEIGHT_BOUND)
    assert not transpose.within_bound(torch.tensor([0.5, -5.0]), transpose.WEIGHT_BOUND)
