"""bevviz.projection's numpy helpers: one pixel rule and one projection for the overlays and depth buffers."""

from __future__ import annotations

import numpy as np
import torch

from bevviz.projection import (
    REFERENCE_WIDTH_PX,
    image_extent,
    inside_image,
    pixels_of,
    project_camera,
    project_points,
    rays_of,
    reference_pixels,
)


def test_a_ray_through_a_pixel_projects_back_onto_it(rig):
    K = rig["CAM_FRONT"].K
    uv = np.random.default_rng(0).uniform([0, 0], [1600, 900], size=(4, 5, 2))
    rays = rays_of(uv, K)
    assert rays.shape == (4, 5, 3) and np.all(rays[..., 2] == 1.0)
    np.testing.assert_allclose(pixels_of(7.5 * rays, K), uv, atol=1e-9)
    # the principal point looks along the optical axis
    np.testing.assert_allclose(rays_of(K[:2, 2], K), [0.0, 0.0, 1.0], atol=1e-12)


def test_project_camera_agrees_with_project_points(rig):
    rng = np.random.default_rng(0)
    pts = rng.uniform([-40, -40, -3], [40, 40, 5], size=(5000, 3))
    full = project_points(pts, rig)
    for i, cam in enumerate(rig):
        uv, depth, inside = project_camera(pts, cam, min_depth=1e-5)
        np.testing.assert_allclose(depth, full.depth[i].numpy(), atol=1e-9)
        front = depth > 1e-5
        np.testing.assert_allclose(uv[front], full.uv[i].numpy()[front], atol=1e-6)
        assert np.isnan(uv[~front]).all()
        np.testing.assert_array_equal(inside, full.valid[i].numpy())


def test_the_pixel_rule_is_the_same_for_arrays_and_tensors():
    u = np.array([-0.5, -0.51, 99.5, 99.51, 10.0, np.nan])
    v = np.array([0.0, 0.0, 0.0, 0.0, 49.5, 0.0])
    want = [True, False, True, False, True, False]
    assert inside_image(u, v, 100, 50).tolist() == want
    assert inside_image(torch.as_tensor(u), torch.as_tensor(v), 100, 50).tolist() == want
    assert image_extent(100, 50) == (-0.5, -0.5, 99.5, 49.5)


def test_pixel_defaults_scale_with_the_image_width():
    assert reference_pixels(8.0, REFERENCE_WIDTH_PX) == 8.0
    assert reference_pixels(8.0, REFERENCE_WIDTH_PX // 2) == 4.0
