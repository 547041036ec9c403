"""Tests for bevviz.projection, including agreement with nuscenes-devkit's own functions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nuscenes.utils.geometry_utils import transform_matrix, view_points
from pyquaternion import Quaternion

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Camera, Rig
from bevviz.conventions import NUSCENES, Convention, RawCamera
from bevviz.projection import project_points, project_with
from bevviz.rotations import rotation_angle_deg

#: Real nuScenes v1.0-mini calibrated_sensor records of scene-0061 (log n015-2018-07-24-11-22-45+0800):
#: translation (ego, m), rotation quaternion (w, x, y, z) of ego_from_sensor, and (f, cx, cy) in px.
#: Images are 1600 x 900.
NUSCENES_MINI = {
    "CAM_FRONT": ([1.70079118954, 0.0159456324149, 1.51095763913],
                  [0.4998015430569128, -0.5030316162024876, 0.4997798114386805, -0.49737083824542755],
                  (1266.417203046554, 816.2670197447984, 491.50706579294757)),
    "CAM_FRONT_RIGHT": ([1.5508477543, -0.493404796419, 1.49574800619],
                        [0.2060347966337182, -0.2026940577919598, 0.6824507824531167, -0.6713610884174485],
                        (1260.8474446004698, 807.968244525554, 495.3344268742088)),
    "CAM_BACK_RIGHT": ([1.0148780988, -0.480568219723, 1.56239545128],
                       [0.12280980120078765, -0.132400842670559, -0.7004305821388234, 0.690496031265798],
                       (1259.5137405846733, 807.2529053838625, 501.19579884916527)),
    "CAM_BACK": ([0.0283260309358, 0.00345136761476, 1.57910346144],
                 [0.5037872666382278, -0.49740249788611096, -0.4941850223835201, 0.5045496097725578],
                 (809.2209905677063, 829.2196003259838, 481.77842384512485)),
    "CAM_BACK_LEFT": ([1.03569100218, 0.484795032713, 1.59097014818],
                      [0.6924185592174665, -0.7031619420114925, -0.11648342771943819, 0.11203317912370753],
                      (1256.7414812095406, 792.1125740759628, 492.7757465151356)),
    "CAM_FRONT_LEFT": ([1.52387798135, 0.494631336551, 1.50932822144],
                       [0.6757265034669446, -0.6736266522251881, 0.21214015046209478, -0.21122827103904068],
                       (1272.5979470598488, 826.6154927353808, 479.75165386361925)),
}
NAMES = list(NUSCENES_MINI)
SIDE_CAMERAS = ["CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK_LEFT", "CAM_FRONT_LEFT"]


def intrinsic(name: str) -> np.ndarray:
    f, cx, cy = NUSCENES_MINI[name][2]
    return np.array([[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]])


def raw_cameras(names=NAMES) -> list[RawCamera]:
    return [RawCamera(n, intrinsic(n), NUSCENES_MINI[n][1], NUSCENES_MINI[n][0], 1600, 900) for n in names]


@pytest.fixture(scope="module")
def rig() -> Rig:
    return Rig.from_raw(raw_cameras(), NUSCENES)


@pytest.fixture(scope="module")
def grid_points() -> np.ndarray:
    """BEVFormer's default reference points flattened, shape (160000, 3), plus a near ring."""
    pts = BEVGrid().points().reshape(-1, 3).numpy()
    rng = np.random.default_rng(1)
    near = np.stack([rng.uniform(-6, 8, 20000), rng.uniform(-6, 6, 20000), rng.uniform(-1, 3, 20000)], -1)
    return np.concatenate([pts, near])


def devkit_project(name: str, points_ego: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nuscenes-devkit's own projection: pixels (n, 2) and depths (n,) for ego points (n, 3)."""
    translation, rotation, _ = NUSCENES_MINI[name]
    cam_from_ego = transform_matrix(translation, Quaternion(rotation), inverse=True)
    p_cam = (cam_from_ego @ np.vstack([points_ego.T, np.ones(len(points_ego))]))[:3]
    uv = view_points(p_cam, intrinsic(name), normalize=True)[:2].T
    return uv, p_cam[2]


# --- agreement with nuscenes-devkit ---------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_matches_devkit_in_float64(name, rig, grid_points):
    i = rig.index(name)
    proj = project_points(grid_points, rig)
    uv_ref, depth_ref = devkit_project(name, grid_points)
    uv, depth = proj.uv[i].numpy(), proj.depth[i].numpy()
    np.testing.assert_allclose(depth, depth_ref, rtol=0, atol=1e-12)
    in_front = depth_ref > 0.1
    assert in_front.sum() > 70000
    err = np.abs(uv[in_front] - uv_ref[in_front]).max()
    assert err < 1e-6, f"{name}: max |uv - devkit| = {err:.3g} px over points at depth > 0.1 m"
    inside = proj.valid[i].numpy()
    assert inside.sum() > 20000
    assert np.abs(uv[inside] - uv_ref[inside]).max() < 1e-9
    # Validity agrees with the devkit's own rule (depth > 0, then inside [-0.5, W - 0.5] x [-0.5, H - 0.5]).
    ref_inside = (depth_ref > 1e-5) & np.all((uv_ref >= -0.5) & (uv_ref <= np.array([1599.5, 899.5])), axis=1)
    np.testing.assert_array_equal(inside, ref_inside)


def test_every_camera_sees_part_of_the_grid(rig, grid_points):
    proj = project_points(grid_points, rig)
    seen = proj.valid.any(0).numpy()
    assert proj.valid.sum(1).min().item() > 20000
    # Around the car, almost every BEV cell at road height is seen by some camera.
    ground = BEVGrid().with_z([0.0]).points()
    assert project_points(ground, rig).valid.any(0).float().mean().item() > 0.95
    assert seen.mean() > 0.5


def test_quaternion_order_mixup_barely_moves_front_but_turns_side_cameras(rig):
    """Reading the nuScenes quaternions as (x, y, z, w): CAM_FRONT's (w, x, y, z) are all ~0.5
    in magnitude, so the mix-up hides there; the side cameras turn by tens of degrees."""
    wrong = Rig.from_raw(raw_cameras(), Convention("sensor_to_ego", "xyzw", "RDF"))
    angles = {n: rotation_angle_deg(rig[n].cam_from_ego[:3, :3], wrong[n].cam_from_ego[:3, :3]) for n in NAMES}
    assert angles["CAM_FRONT"] < 1.0
    for n in SIDE_CAMERAS:
        assert angles[n] > 30.0, angles
    # The position is unaffected; only where the camera looks changes.
    for n in NAMES:
        np.testing.assert_allclose(wrong[n].position, rig[n].position, atol=1e-12)
    # Projected: the front view shifts by a few pixels-to-tens of pixels, a side view is ruined.
    point = np.array([[20.0, 0.5, 0.0]])
    front_shift = np.linalg.norm(
        project_points(point, rig.subset(["CAM_FRONT"])).uv[0, 0].numpy()
        - project_points(point, wrong.subset(["CAM_FRONT"])).uv[0, 0].numpy())
    assert 1.0 < front_shift < 25.0
    # A point 8 m to the right of the car is in CAM_FRONT_RIGHT's view, and lost after the mix-up.
    side_point = np.array([[3.0, -8.0, 0.0]])
    assert project_points(side_point, rig.subset(["CAM_FRONT_RIGHT"])).valid.item()
    assert not project_points(side_point, wrong.subset(["CAM_FRONT_RIGHT"])).valid.item()


# --- shapes, dtypes, batching --------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3,), (7, 3), (2, 5, 3), (4, 3, 2, 3)])
def test_batched_shapes(rig, shape):
    pts = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 10
    proj = project_points(pts, rig)
    P = shape[:-1]
    assert proj.uv.shape == (6, *P, 2)
    for t in (proj.depth, proj.valid, proj.in_front, proj.in_image):
        assert t.shape == (6, *P)
    assert proj.valid.dtype == torch.bool
    # Batched equals one-by-one.
    flat = project_points(pts.reshape(-1, 3), rig)
    np.testing.assert_array_equal(proj.uv.reshape(6, -1, 2).numpy(), flat.uv.numpy())


def test_grid_points_shape(rig):
    proj = project_points(BEVGrid().points(), rig)
    assert proj.uv.shape == (6, 4, 200, 200, 2) and proj.valid.shape == (6, 4, 200, 200)


def test_float32_agrees_with_float64(rig, grid_points):
    p64 = project_points(torch.as_tensor(grid_points), rig)
    p32 = project_points(torch.as_tensor(grid_points, dtype=torch.float32), rig)
    assert p32.uv.dtype == torch.float32 and p32.depth.dtype == torch.float32
    valid = p64.valid
    assert torch.equal(p32.valid, valid)
    err = (p32.uv.double() - p64.uv)[valid].abs().max().item()
    assert err < 2e-3, err
    assert (p32.depth.double() - p64.depth).abs().max().item() < 1e-4
    # The dtype argument overrides the points' dtype.
    assert project_points(torch.as_tensor(grid_points), rig, dtype=torch.float32).uv.dtype == torch.float32


def test_numpy_and_integer_points(rig):
    pts = np.array([[10, 0, 1], [0, 10, 1]])
    proj = project_points(pts, rig)
    assert proj.uv.dtype == torch.float64
    np.testing.assert_array_equal(proj.uv.numpy(), project_points(pts.astype(float), rig).uv.numpy())


# --- hand-built cameras: exact bounds ------------------------------------------------------

def unit_camera(width: int = 8, height: int = 6, K: np.ndarray | None = None) -> Rig:
    """K = I and cam_from_ego = I: ego point (u, v, 1) projects to exactly (u, v)."""
    return Rig([Camera("CAM", np.eye(3) if K is None else K, np.eye(4), width, height)])


def at_pixels(uv: list[tuple[float, float]], depth: float = 1.0) -> torch.Tensor:
    return torch.tensor([[u * depth, v * depth, depth] for u, v in uv], dtype=torch.float64)


U_CASES = [  # (u, pixel-valid, bevformer-valid) with v = 2 inside, W = 8
    (-0.5 - 1e-9, False, False),
    (-0.5, True, False),
    (-0.25, True, False),
    (0.0, True, False),
    (1e-9, True, True),
    (3.0, True, True),
    (7.0, True, True),  # W - 1
    (7.5, True, True),  # W - 0.5: last pixel's right edge
    (7.5 + 1e-9, False, True),
    (8.0 - 1e-9, False, True),
    (8.0, False, False),  # W
]
V_CASES = [  # (v, pixel-valid, bevformer-valid) with u = 3 inside, H = 6
    (-0.5 - 1e-9, False, False),
    (-0.5, True, False),
    (0.0, True, False),
    (5.0, True, True),
    (5.5, True, True),
    (5.5 + 1e-9, False, True),
    (6.0, False, False),
]


def test_projection_is_exact_on_unit_camera():
    uv = [(u, 2.0) for u, _, _ in U_CASES]
    proj = project_points(at_pixels(uv, depth=4.0), unit_camera())
    np.testing.assert_allclose(proj.uv[0].numpy(), uv, rtol=0, atol=1e-15)


@pytest.mark.parametrize("bounds, column", [("pixel", 1), ("bevformer", 2)])
def test_bounds_in_u(bounds, column):
    pts = at_pixels([(case[0], 2.0) for case in U_CASES])
    proj = project_points(pts, unit_camera(), bounds=bounds)
    assert proj.valid[0].tolist() == [case[column] for case in U_CASES]
    assert proj.in_image[0].tolist() == [case[column] for case in U_CASES]


@pytest.mark.parametrize("bounds, column", [("pixel", 1), ("bevformer", 2)])
def test_bounds_in_v(bounds, column):
    pts = at_pixels([(3.0, case[0]) for case in V_CASES])
    proj = project_points(pts, unit_camera(), bounds=bounds)
    assert proj.valid[0].tolist() == [case[column] for case in V_CASES]


def test_pixel_bounds_are_grid_sample_extent():
    """With align_corners=False, g = (2u + 1) / W - 1 maps u = -0.5 and W - 0.5 to -1 and +1."""
    W = 8
    for u, valid, _ in U_CASES:
        g = (2 * u + 1) / W - 1
        assert (-1 <= g <= 1) == valid


def test_behind_camera_is_invalid_even_when_it_lands_in_the_image():
    # Principal point (0, 0): the point straight behind projects to (0, 0) after clamping.
    rig = unit_camera()
    proj = project_points(torch.tensor([[0.0, 0.0, -3.0], [0.0, 0.0, 3.0]], dtype=torch.float64), rig)
    assert proj.in_image[0].tolist() == [True, True]
    assert proj.in_front[0].tolist() == [False, True]
    assert proj.valid[0].tolist() == [False, True]
    assert proj.depth[0, 0].item() == -3.0


def test_behind_camera_uses_eps_clamp_like_bevformer(rig, grid_points):
    proj = project_points(grid_points, rig)
    depth = proj.depth.numpy()
    behind = depth <= 1e-5
    assert behind.sum() > 0 and not proj.valid.numpy()[behind].any()
    assert np.isfinite(proj.uv.numpy()).all()
    # uv = (K p_cam)[:2] / eps exactly: recompute for one behind point of CAM_BACK.
    i = rig.index("CAM_BACK")
    j = int(np.argmax(behind[i]))
    p_cam = rig["CAM_BACK"].cam_from_ego @ np.append(grid_points[j], 1.0)
    expected = (rig["CAM_BACK"].K @ p_cam[:3])[:2] / 1e-5
    np.testing.assert_allclose(proj.uv[i, j].numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("eps, valid", [(1e-5, [False, False, True]), (1e-7, [False, True, True]),
                                        (0.0, [False, True, True])])
def test_eps_option(eps, valid):
    pts = at_pixels([(3.0, 2.0)] * 3)
    pts[:, 2] = torch.tensor([0.0, 1e-6, 1e-3], dtype=torch.float64)
    pts[:, :2] = torch.tensor([3.0, 2.0], dtype=torch.float64) * pts[:, 2:3]
    proj = project_points(pts, unit_camera(), eps=eps)
    assert proj.in_front[0].tolist() == valid
    assert proj.valid[0].tolist() == valid


def test_eps_clamps_the_division():
    pts = torch.tensor([[3e-7, 2e-7, 1e-7]], dtype=torch.float64)  # depth 1e-7, below eps 1e-5
    proj = project_points(pts, unit_camera(), eps=1e-5)
    np.testing.assert_allclose(proj.uv[0, 0].numpy(), [3e-7 / 1e-5, 2e-7 / 1e-5], rtol=1e-12)


# --- project_with: gradients and errors -----------------------------------------------------

def test_gradients_flow_to_extrinsics_through_project_with(rig):
    pts = torch.tensor([[15.0, 2.0, 0.5], [8.0, -1.0, 1.0]], dtype=torch.float64)
    T = rig.cam_from_ego()[:1].clone().requires_grad_(True)
    K = rig.intrinsics()[:1]
    sizes = rig.image_sizes()[:1]
    proj = project_with(pts, K, T, sizes)
    proj.uv.sum().backward()
    assert T.grad is not None and T.grad.shape == (1, 4, 4)
    assert T.grad[0, :3, :].abs().sum() > 0
    assert torch.all(T.grad[0, 3] == 0)  # the constant last row does not matter

    def uv_of(T_):
        return project_with(pts, K, T_, sizes).uv

    assert torch.autograd.gradcheck(uv_of, (rig.cam_from_ego()[:1].clone().requires_grad_(True),))


def test_gradients_flow_to_intrinsics_and_points(rig):
    pts = torch.tensor([[15.0, 2.0, 0.5]], dtype=torch.float64, requires_grad=True)
    K = rig.intrinsics()[:1].clone().requires_grad_(True)
    proj = project_with(pts, K, rig.cam_from_ego()[:1], rig.image_sizes()[:1])
    (proj.uv.sum() + proj.depth.sum()).backward()
    assert pts.grad.abs().sum() > 0
    # d u / d cx = 1 and d v / d cy = 1.
    assert K.grad[0, 0, 2].item() == pytest.approx(1.0) and K.grad[0, 1, 2].item() == pytest.approx(1.0)


def test_project_with_argument_errors(rig):
    K, T, sizes = rig.intrinsics(), rig.cam_from_ego(), rig.image_sizes()
    pts = torch.zeros(5, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"field 'bounds': must be one of \('pixel', 'bevformer'\) \(got 'strict'\)"):
        project_with(pts, K, T, sizes, bounds="strict")
    with pytest.raises(ValueError, match=r"field 'eps': must be >= 0 \(got -1\.0\)"):
        project_with(pts, K, T, sizes, eps=-1.0)
    with pytest.raises(ValueError, match=r"field 'eps'"):
        project_with(pts, K, T, sizes, eps=float("nan"))
    with pytest.raises(ValueError, match=r"field 'points_ego': expected shape \('\.\.\.', 3\), got shape \(5, 2\)"):
        project_with(pts[:, :2], K, T, sizes)
    with pytest.raises(ValueError, match=r"field 'cam_from_ego': expected shape \(6, 4, 4\), got shape \(5, 4, 4\)"):
        project_with(pts, K, T[:5], sizes)
    with pytest.raises(ValueError, match=r"field 'sizes': expected shape \(6, 2\)"):
        project_with(pts, K, T, sizes[:3])
    with pytest.raises(ValueError, match=r"field 'bounds'"):
        project_points(pts, rig, bounds="BEVFormer")
