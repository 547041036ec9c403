"""The shared fixtures that judge other tests must be able to fail."""

from __future__ import annotations

import numpy as np
import pytest


def test_the_allocation_bound_fails_a_block_that_allocates_past_it(allocates_at_most):
    with pytest.raises(AssertionError, match=r"allocated 8\.\d MiB at the peak \(bound 4 MiB\)"):
        with allocates_at_most(4):
            buffer = np.ones(2 ** 20)  # 8 MiB, freed before the block ends: the peak still counts
            del buffer
    with allocates_at_most(4):
        np.ones(2 ** 16)
