"""Image edge attraction maps."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.calibration.lidar.edge_maps import (
    LOCAL_MEAN_RAD,
    attraction_maps,
    edge_mask,
    edge_strength,
    oriented_attraction_maps,
)


def _step(width=1600, height=40, column=800):
    img = np.zeros((height, width, 3), np.uint8)
    img[:, column:] = 200
    return img


def test_the_attraction_is_one_on_the_edge_and_falls_off_exponentially_with_distance():
    coarse, fine = attraction_maps(_step(), scales_px=(16.0, 8.0))
    row = fine[20]
    edge_cols = np.flatnonzero(row > 0.999)
    # the blurred step's gradient band around 799 | 800 (every pixel with a gradient is an edge here)
    assert edge_cols.min() >= 794 and edge_cols.max() <= 805
    d = 40  # pixels beyond the edge band
    far = edge_cols.max() + d
    assert row[far] == pytest.approx(np.exp(-d / 8.0), rel=0.05)
    assert coarse[20, far] == pytest.approx(np.exp(-d / 16.0), rel=0.05)
    assert (np.diff(row[edge_cols.max():]) <= 1e-6).all()  # monotone away from the edge


def test_scales_follow_the_image_width():
    (full,) = attraction_maps(_step(1600, 40, 800), scales_px=(8.0,))
    (half,) = attraction_maps(_step(800, 40, 400), scales_px=(8.0,))
    end_full = np.flatnonzero(full[20] > 0.999).max()
    end_half = np.flatnonzero(half[20] > 0.999).max()
    # 40 px beyond the edge at 1600 px wide is 20 px at 800 px wide: the same attraction
    assert half[20, end_half + 20] == pytest.approx(full[20, end_full + 40], rel=0.05)


def test_the_edge_threshold_is_relative_to_the_image():
    img = _step()
    dim = (img // 4).astype(np.uint8)
    np.testing.assert_array_equal(edge_mask(edge_strength(img)), edge_mask(edge_strength(dim)))


def test_grey_images_are_accepted_and_bad_images_are_named():
    grey = _step()[..., 0]
    np.testing.assert_allclose(attraction_maps(grey)[0], attraction_maps(np.repeat(grey[..., None], 3, 2))[0],
                               atol=0.02)
    with pytest.raises(ValueError, match="image.*dtype float64"):
        attraction_maps(np.zeros((10, 10, 3)))
    with pytest.raises(ValueError, match=r"image.*shape \(10, 10, 4\)"):
        attraction_maps(np.zeros((10, 10, 4), np.uint8))


def test_less_its_local_mean_an_edge_in_texture_scores_below_a_lone_edge():
    """Raw, an edge among dense stripes (foliage) attracts as much as a lone edge, and the
    pixels between the stripes almost as much; less the local mean (the second look's maps)
    only being nearer an edge than the surroundings scores: the lone edge stands well above
    the stripes, and a pixel between stripes scores no more than one far from any edge."""
    img = np.zeros((200, 400), dtype=np.uint8)
    img[:, 20:160:6] = 255  # dense vertical stripes: texture
    img[:, 300:] = 255  # one lone vertical edge at column 300
    focal = 300.0
    raw_c = oriented_attraction_maps(img, focal)[1][0]  # finest scale, channel 0 (|gx|: vertical edges)
    lift_c = oriented_attraction_maps(img, focal, local_mean_rad=LOCAL_MEAN_RAD)[1][0]
    row = 100
    stripe, between, lone, far = 79, 77, 299, 230  # a stripe's edge, between two stripes, the lone edge, far
    assert raw_c[row, stripe] == pytest.approx(raw_c[row, lone], abs=0.05)  # raw: an edge is an edge
    assert raw_c[row, between] > 0.3 * raw_c[row, stripe]
    assert lift_c[row, lone] > lift_c[row, stripe] + 0.15
    assert lift_c[row, between] <= lift_c[row, far] + 0.05
    assert np.all(np.abs(lift_c) < 1.0)
