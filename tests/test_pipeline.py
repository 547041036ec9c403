"""Tests for bevviz.pipeline: every sampler equals the reference, hit counts, overlap policies,
edge cases and errors (the formula itself: tests/test_aggregation.py)."""

import math

import numpy as np
import pytest
import torch

from bevviz import synthetic
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.errors import InputError
from bevviz.features import rgb_features
from bevviz.pipeline import (
    SAMPLERS,
    bev_features,
    bev_geometry,
    ground_truth_bev,
    ground_visibility,
    point_weights,
    reconstruction_error,
    resolve_image_size,
)
from bevviz.projection import PointValidity
from bevviz.samplers.deformable import DeformableConfig, deformable_bev_reference
from bevviz.samplers.lut import build_lut

TOL = 1e-5


@pytest.fixture(scope="module")
def feats():
    # Rough features on purpose (unit-variance noise): a half-pixel or rounding slip shows.
    return torch.randn(6, 16, 28, 50, generator=torch.Generator().manual_seed(0))


def _run(feats, rig, grid, sampler, **kw):
    if sampler == "deformable":
        kw.setdefault("deformable", DeformableConfig(kernel_size=1))
    return bev_features(feats, rig, grid, sampler=sampler, **kw)


@pytest.mark.parametrize("overlap", ["mean", "first_hit", "last_write"])
@pytest.mark.parametrize("sampler", ["gather_scatter", "deformable", "lut"])
def test_every_sampler_equals_reference(feats, rig, grid, sampler, overlap):
    ref = bev_features(feats, rig, grid, "grid_sample", overlap=overlap)
    out = _run(feats, rig, grid, sampler, overlap=overlap)
    assert out.features.shape == (16, 50, 50) and out.features.dtype == torch.float32
    assert float((out.features - ref.features).abs().max()) < TOL
    assert torch.equal(out.hits, ref.hits) and torch.equal(out.valid, ref.valid)
    assert float(ref.features.abs().max()) > 0.5  # not trivially zero


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_per_camera_pillar_means_agree(feats, rig, grid, sampler):
    ref = bev_features(feats, rig, grid, "grid_sample", return_per_camera=True)
    out = _run(feats, rig, grid, sampler, return_per_camera=True)
    assert out.per_camera.shape == (6, 16, 50, 50)
    assert float((out.per_camera - ref.per_camera).abs().max()) < TOL
    # "mean" is the per-camera means averaged over the cameras that see the cell.
    mean = out.per_camera.sum(0) / out.hits.clamp(min=1)
    assert float((mean - out.features).abs().max()) < TOL
    assert float(out.per_camera[~out.valid.unsqueeze(1).expand_as(out.per_camera)].abs().max()) == 0


def test_deformable_3x3_with_offsets_matches_its_grid_sample_reference(feats, rig):
    grid = BEVGrid(resolution=4.096)  # 25 x 25: nine taps per point are costly
    cfg = DeformableConfig(kernel_size=3, offsets="random", offset_scale=1.0, modulated=True, seed=4)
    out = bev_features(feats, rig, grid, "deformable", deformable=cfg)
    geom = bev_geometry(rig, grid)
    w, _, _ = point_weights(geom.valid)
    ref = deformable_bev_reference(feats, geom.grid, w, cfg)
    assert float((out.features - ref).abs().max()) < TOL
    floor = bev_features(feats, rig, grid, "deformable", deformable=dict(kernel_size=3, rounding="floor"))
    assert float((floor.features - out.features).abs().max()) > 1e-2  # floor really differs


def test_hits_and_valid_masks(feats, rig, grid):
    res = bev_features(feats, rig, grid)
    assert res.hits.shape == (50, 50) and res.hits.dtype == torch.int64
    assert res.valid.shape == (6, 50, 50) and res.valid.dtype == torch.bool
    assert res.point_valid.shape == (6, 4, 50, 50)
    assert torch.equal(res.hits, res.valid.sum(0))
    assert torch.equal(res.valid, res.point_valid.any(1))
    ahead, behind = grid.cell_of(40.0, 0.0), grid.cell_of(-40.0, 0.0)
    assert res.valid[:, ahead[0], ahead[1]].tolist() == [True, False, False, False, False, False]
    assert res.valid[:, behind[0], behind[1]].tolist() == [False, False, False, True, False, False]
    assert int(res.hits.max()) == 2 and int((res.hits == 2).sum()) > 50
    # Uncovered cells are exactly zero.
    assert float(res.features[:, res.hits == 0].abs().max()) == 0.0


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_overlap_policies_differ_only_on_overlap_cells(feats, rig, grid, sampler):
    res = {o: _run(feats, rig, grid, sampler, overlap=o, return_per_camera=True)
           for o in ("mean", "first_hit", "last_write")}
    hits = res["mean"].hits
    single = hits <= 1
    for o in ("first_hit", "last_write"):
        assert float((res[o].features - res["mean"].features)[:, single].abs().max()) < TOL
        assert float((res[o].features - res["mean"].features)[:, ~single].abs().max()) > 0.1
    assert float((res["first_hit"].features - res["last_write"].features)[:, ~single].abs().amax(0).min()) > 0
    # first_hit takes the first camera in rig order that sees the cell, last_write the last.
    valid = res["mean"].valid
    order = torch.arange(6).view(6, 1, 1)
    first = torch.where(valid, order, 99).amin(0)
    last = torch.where(valid, order, -1).amax(0)
    per = res["mean"].per_camera
    i, j = torch.nonzero(hits == 2)[0].tolist()
    torch.testing.assert_close(res["first_hit"].features[:, i, j], per[first[i, j], :, i, j], atol=TOL, rtol=0)
    torch.testing.assert_close(res["last_write"].features[:, i, j], per[last[i, j], :, i, j], atol=TOL, rtol=0)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_no_valid_points_gives_zeros(feats, rig, sampler):
    high = BEVGrid(z_values=(100.0,), resolution=4.096)  # 100 m above the rig: no camera sees it
    res = _run(feats, rig, high, sampler)
    assert res.features.shape == (16, 25, 25)
    assert int(res.hits.sum()) == 0 and float(res.features.abs().max()) == 0.0
    assert not bool(res.valid.any())


def test_single_camera_rig_and_float64(rig):
    one = Rig([rig["CAM_FRONT"]])
    grid = BEVGrid((0.0, 40.0), (-20.0, 20.0), (0.0,), 1.0)
    f = torch.randn(1, 4, 18, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = bev_features(f, one, grid)
    assert int(ref.hits.max()) == 1 and ref.features.dtype == torch.float64
    for s in ("gather_scatter", "deformable", "lut"):
        out = _run(f, one, grid, s)
        assert float((out.features - ref.features).abs().max()) < 1e-12


def test_image_size_default_explicit_and_wrong(feats, rig, grid):
    ref = bev_features(feats, rig, grid)
    same = bev_features(feats, rig, grid, image_size=(1600, 900))
    assert torch.equal(same.features, ref.features)
    per_cam = bev_features(feats, rig, grid, image_size=[[1600, 900]] * 6)
    assert torch.equal(per_cam.features, ref.features)
    # Intrinsics for 1600 x 900 but "images" claimed at 800 x 450: points normalise wrongly.
    wrong = bev_features(feats, rig, grid, image_size=(800, 450))
    assert float((wrong.features - ref.features).abs().max()) > 0.5
    assert int(wrong.hits.sum()) < int(ref.hits.sum())
    sizes = resolve_image_size(rig, (800, 450))
    assert sizes.shape == (6, 2) and sizes.dtype == torch.int64


@pytest.mark.parametrize("sampler", ["grid_sample", "gather_scatter", "deformable", "lut"])
def test_gradients_reach_features(feats, rig, grid, sampler):
    f = feats.clone().requires_grad_(True)
    _run(f, rig, grid, sampler).features.sum().backward()
    assert f.grad is not None and float(f.grad.abs().sum()) > 0


def test_timings_and_labels(feats, rig, grid):
    res = bev_features(feats, rig, grid, "gather_scatter", overlap="first_hit")
    assert {"geometry", "weights", "sample", "total"} <= set(res.timings)
    assert all(v >= 0 for v in res.timings.values())
    assert res.sampler == "gather_scatter" and res.overlap == "first_hit"
    lut = bev_features(feats, rig, grid, "lut")
    assert {"lut", "sample", "total"} <= set(lut.timings)


def test_bad_inputs_raise_named_errors(feats, rig, grid):
    with pytest.raises(ValueError, match="features"):
        bev_features(feats[:5], rig, grid)
    with pytest.raises(ValueError, match="features"):
        bev_features(feats[0], rig, grid)
    with pytest.raises(ValueError, match="features dtype"):
        bev_features(feats.to(torch.int32), rig, grid)
    with pytest.raises(ValueError, match="features"):
        bev_features(feats.numpy(), rig, grid)
    with pytest.raises(ValueError, match="sampler"):
        bev_features(feats, rig, grid, sampler="bilinear")
    with pytest.raises(ValueError, match="overlap"):
        bev_features(feats, rig, grid, overlap="max")
    with pytest.raises(ValueError, match="bounds"):
        bev_features(feats, rig, grid, validity=PointValidity(bounds="strict"))
    with pytest.raises(ValueError, match="image_size"):
        bev_features(feats, rig, grid, image_size=(1600, 900, 3))
    with pytest.raises(ValueError, match="image_size"):
        bev_features(feats, rig, grid, image_size=(0, 900))
    with pytest.raises(ValueError, match="image_size"):
        bev_features(feats, rig, grid, image_size=[[1600, 900]] * 5)
    with pytest.raises(ValueError, match="grid"):
        bev_features(feats, rig, (50, 50))
    with pytest.raises(ValueError, match="rounding"):
        bev_features(feats, rig, grid, "deformable", deformable=dict(rounding="round"))
    with pytest.raises(InputError, match=r"field 'deformable': not DeformableConfig fields \('kernel'\)"):
        bev_features(feats, rig, grid, "deformable", deformable=dict(kernel=3))
    with pytest.raises(InputError, match=r"field 'deformable': must be a DeformableConfig or a dict of its fields"):
        bev_features(feats, rig, grid, "deformable", deformable=["ab"])
    other = build_lut(rig, grid, (28, 50), overlap="first_hit")
    with pytest.raises(ValueError, match="lut.*overlap"):
        bev_features(feats, rig, grid, "lut", lut=other)
    with pytest.raises(ValueError, match="lut"):
        bev_features(feats, rig, grid, "lut", lut="table")


@pytest.fixture(scope="module")
def rendered():
    rig = synthetic.nuscenes_like_rig().resized(0.25)  # 400 x 225 images keep the test fast
    images = synthetic.render(rig, supersample=1, exposure=False)
    return rig, rgb_features(images, rig, 1)


def _yawed(cam, degrees):
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    return cam.replace(cam_from_ego=cam.cam_from_ego @ T)


def test_ground_reconstruction_matches_texture(rendered):
    rig, feats = rendered
    grid = BEVGrid((-15.2, 15.2), (-15.2, 15.2), (0.0,), 0.4)
    truth = ground_truth_bev(grid)
    vis = ground_visibility(rig, grid)
    res = bev_features(feats, rig, grid)
    # Score cells every seeing camera sees unoccluded (boxes hide the ground behind them).
    mask = (res.valid & vis).any(0) & ~(res.valid & ~vis).any(0)
    # Some cells are hidden (the poles beside the ego), so the occlusion mask matters.
    assert int(mask.sum()) > 3000 and int((res.valid & ~vis).any(0).sum()) > 50
    good = reconstruction_error(res.features, truth, mask)
    assert good["mae"] < 10.0 and good["psnr"] > 22.0, good
    # A 1 degree yaw error on every camera, or a half-pixel row shift, is clearly worse.
    bad = bev_features(feats, rig.map(lambda c: _yawed(c, 1.0)), grid)
    worse = reconstruction_error(bad.features, truth, mask & (bad.hits > 0))
    assert worse["mae"] > 1.5 * good["mae"], (good, worse)

    def shifted(c):
        K = c.K.copy()
        K[1, 2] += 0.5
        return c.replace(K=K)

    half = bev_features(feats, rig.map(shifted), grid)
    assert reconstruction_error(half.features, truth, mask & (half.hits > 0))["mae"] > 1.1 * good["mae"]
    # The other samplers reconstruct the same picture.
    lut = bev_features(feats, rig, grid, "lut")
    assert float((lut.features - res.features).abs().max()) < TOL


@pytest.mark.parametrize("sampler", ["grid_sample", "gather_scatter"])
def test_point_validity_reaches_the_geometry(feats, rig, grid, sampler):
    validity = PointValidity(bounds="bevformer", eps=2.0)
    out = bev_features(feats, rig, grid, sampler=sampler, validity=validity)
    geom = bev_geometry(rig, grid, eps=2.0, bounds="bevformer")
    assert torch.equal(out.point_valid, geom.valid)
    assert not torch.equal(out.point_valid, bev_features(feats, rig, grid, sampler=sampler).point_valid)
