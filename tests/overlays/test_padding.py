"""bevviz.overlays.padding: the padding lab's grids and experiments."""

import numpy as np
import torch.nn.functional as F

from bevviz import overlays


def test_padding_helpers():
    x = overlays.test_pattern(8, 10)
    assert x.shape == (1, 3, 8, 10) and x.min() >= 0 and x.max() <= 1
    assert (np.diff(x[0, 0].numpy(), axis=1) > 0).all()  # a ramp along each row
    g = overlays.margin_grid(4, 6, 0.5)
    assert g.shape == (1, 4, 6, 2) and g[0, 0, 0, 0] == -1.5 and g[0, -1, -1, 1] == 1.5
    u, v = overlays.margin_grid_pixels(4, 6, 0.5, 8, 10, align_corners=False)
    np.testing.assert_allclose([u[0], u[-1]], [((-0.5) * 10 - 1) / 2, (2.5 * 10 - 1) / 2])
    cases = overlays.padding_cases(x, g, F.grid_sample, F.grid_sample)
    assert len(cases) == 12 and all(c.max_error == 0 for c in cases)
    same = overlays.half_pixel_mismatch(x, F.grid_sample, False, False)
    np.testing.assert_allclose(same, x[0].numpy(), atol=1e-6)
    off = overlays.half_pixel_mismatch(x, F.grid_sample, False, True)
    assert np.abs(off - x[0].numpy()).max() > 0.05
