"""bevviz.calibration.seams.analysis: exposure-robust seam costs and the six ring seams of the sample rig."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bevviz.calibration import analyze_seams, seam_cost, seam_grid
from bevviz.calibration.seams import analysis
from bevviz.camera import NUSCENES_CAMERAS


def test_seam_cost_ignores_exposure_and_sees_misalignment():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, size=(3, 500))
    assert seam_cost(a, 1.3 * a + 0.1) == pytest.approx(0.0, abs=1e-6)  # gain and offset
    assert seam_cost(a, rng.uniform(0, 1, size=(3, 500))) == pytest.approx(1.0, abs=0.15)
    with pytest.raises(ValueError, match="'b'"):
        seam_cost(a, a[:, :10])


def test_border_weight_is_continuous():
    uv = torch.tensor([[-1.0, 50.0], [-0.5, 50.0], [15.5, 50.0], [31.5, 50.0], [100.0, 50.0]])
    w = analysis.border_weight(uv, 200, 100, 32.0)
    assert w.tolist() == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])


def test_true_rig_has_the_six_ring_seams(truth, frames):
    a = analyze_seams(truth, frames[0], seam_grid(resolution=0.4))
    pairs = {frozenset((p.a, p.b)) for p in a.pairs}
    ring = {frozenset((NUSCENES_CAMERAS[i], NUSCENES_CAMERAS[(i + 1) % 6])) for i in range(6)}
    assert pairs == ring
    H, W = a.grid.shape
    assert a.mosaic().shape == (H, W, 3) and a.bev.shape == (6, 3, H, W)
    err = a.seam_error_map()
    assert np.isfinite(err[a.overlap_count() >= 2]).all() and np.isnan(err[a.overlap_count() < 2]).all()
    # Seams the boxes leave clear agree well; the median is far from "unrelated" (1).
    assert min(p.cost for p in a.pairs) < 0.15
    assert a.median_cost < 0.8
    assert len(a.table()) == 6
