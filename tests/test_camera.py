"""Tests for bevviz.camera: validation, image operations (resize/crop/stride) and Rig."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from bevviz.camera import Camera, Rig, calibration_difference, invert_transform, make_transform, same_calibration
from bevviz.checks import MAX_CAMERAS, MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE, check_camera_name
from bevviz.projection import project_points
from bevviz.rotations import rpy_to_matrix
from bevviz.storage import NUSCENES, RawCamera

W, H = 1600, 900
K0 = np.array([[1266.417, 0.0, 816.267], [0.0, 1266.417, 491.507], [0.0, 0.0, 1.0]])
# A forward-looking camera at (1.7, 0, 1.5) m, slightly pitched down: RDF axes in ego.
RDF_IN_FLU = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])  # columns: RDF axes in ego


def front_camera(name: str = "CAM_FRONT", K: np.ndarray = K0, width: int = W, height: int = H) -> Camera:
    ego_from_cam = make_transform(rpy_to_matrix(0.01, 0.02, -0.03) @ RDF_IN_FLU, np.array([1.7, 0.02, 1.5]))
    return Camera(name, K, invert_transform(ego_from_cam), width, height)


def points_in_view(n: int = 200, seed: int = 0) -> np.ndarray:
    """Ego points 3..60 m ahead of the front camera, shape (n, 3)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.uniform(3, 60, n), rng.uniform(-10, 10, n), rng.uniform(-2, 4, n)], -1)


def uv_of(cam: Camera, pts: np.ndarray) -> np.ndarray:
    """Projected pixels (n, 2) of points (n, 3) in float64."""
    return project_points(torch.as_tensor(pts), Rig([cam])).uv[0].numpy()


# --- validation: intrinsics -----------------------------------------------------------------

def _K(**edits) -> np.ndarray:
    K = K0.copy()
    for key, val in edits.items():
        K[int(key[1]), int(key[2])] = val
    return K


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_K_must_be_finite(bad):
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'K': must be finite.*\(got \[\[.*(nan|inf)"):
        front_camera(K=_K(k02=bad))


@pytest.mark.parametrize("edit", [{"k00": 0.0}, {"k00": -5.0}, {"k11": 0.0}, {"k11": -1266.0}])
def test_K_focal_lengths_must_be_positive(edit):
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'K': fx and fy must be > 0 \(fx=.*fy=.*\) \(got "):
        front_camera(K=_K(**edit))


def test_K_message_carries_the_bad_value():
    with pytest.raises(ValueError, match=r"fx=-5\.0"):
        front_camera(K=_K(k00=-5.0))


@pytest.mark.parametrize("edit", [{"k22": 2.0}, {"k20": 0.1}, {"k21": -3.0}, {"k10": 0.5}])
def test_K_last_row_and_lower_triangle(edit):
    with pytest.raises(ValueError,
                       match=r"camera CAM_FRONT: field 'K': must be upper triangular with last row \(0, 0, 1\)"):
        front_camera(K=_K(**edit))


def test_K_skew_is_allowed():
    assert front_camera(K=_K(k01=0.5)).K[0, 1] == 0.5


def test_K_wrong_shape_and_non_numeric():
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'K': expected shape \(3, 3\), got shape \(3, 4\)"):
        front_camera(K=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'K': must be numeric"):
        front_camera(K=[["a", 0, 0], [0, 1, 0], [0, 0, 1]])


# --- validation: extrinsics -----------------------------------------------------------------

def _with_rotation(R: np.ndarray) -> np.ndarray:
    T = front_camera().cam_from_ego.copy()
    T[:3, :3] = R
    return T


def test_rotation_within_tolerance_is_accepted():
    R = front_camera().cam_from_ego[:3, :3] + 3e-5  # |R R^T - I| ~ 1e-4 borderline below
    Camera("CAM_FRONT", K0, _with_rotation(R), W, H)


def test_rotation_outside_tolerance_is_rejected():
    R = front_camera().cam_from_ego[:3, :3] * (1 + 2e-4)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'cam_from_ego rotation': rotation is not "
                                         r"orthonormal \(max \|R R\^T - I\| = 0\.0004\d*\) \(got "):
        Camera("CAM_FRONT", K0, _with_rotation(R), W, H)


def test_reflection_is_rejected():
    R = front_camera().cam_from_ego[:3, :3] @ np.diag([1.0, 1.0, -1.0])
    with pytest.raises(ValueError,
                       match=r"camera CAM_FRONT: field 'cam_from_ego rotation': rotation has det -1\.000000"):
        Camera("CAM_FRONT", K0, _with_rotation(R), W, H)


def test_extrinsics_finite_last_row_and_shape():
    T = front_camera().cam_from_ego.copy()
    T[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'cam_from_ego': must be finite"):
        Camera("CAM_FRONT", K0, T, W, H)
    T = front_camera().cam_from_ego.copy()
    T[3, 0] = 0.5
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'cam_from_ego': last row must be \(0, 0, 0, 1\)"):
        Camera("CAM_FRONT", K0, T, W, H)
    with pytest.raises(ValueError,
                       match=r"camera CAM_FRONT: field 'cam_from_ego': expected shape \(4, 4\), got shape \(3, 4\)"):
        Camera("CAM_FRONT", K0, np.eye(4)[:3], W, H)


# --- validation: sizes and name -------------------------------------------------------------

@pytest.mark.parametrize("field", ["width", "height"])
@pytest.mark.parametrize("bad", [0, -900, 12.5, "1600", None, np.nan])
def test_sizes_must_be_positive_integers(field, bad):
    kwargs = {"width": W, "height": H, field: bad}
    with pytest.raises(ValueError, match=rf"camera CAM_FRONT: field '{field}': must be a positive integer \(got "):
        front_camera(**kwargs)


def test_integral_float_sizes_become_int():
    cam = front_camera(width=1600.0, height=np.int64(900))
    assert (cam.width, cam.height) == (1600, 900) and type(cam.width) is int and type(cam.height) is int


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_name_must_be_non_empty_string(bad):
    with pytest.raises(ValueError, match=r"field 'name': must be a non-empty string"):
        Camera(bad, K0, np.eye(4), W, H)


# --- value semantics ------------------------------------------------------------------------

def test_arrays_are_read_only_float64_copies():
    K = K0.copy()
    cam = front_camera(K=K)
    K[0, 0] = 1.0
    assert cam.K[0, 0] == K0[0, 0] and cam.K.dtype == np.float64
    with pytest.raises(ValueError):
        cam.K[0, 0] = 5.0
    with pytest.raises(ValueError):
        cam.cam_from_ego[0, 3] = 5.0


def test_equality_and_hash_by_value():
    a, b = front_camera(), front_camera()
    assert a == b and hash(a) == hash(b) and a.fingerprint == b.fingerprint
    assert len({a, b}) == 1
    assert a != front_camera(name="CAM_OTHER")
    assert a != a.replace(width=1599)
    assert a != a.resized(1.0 + 1e-9)


def test_ego_from_cam_and_position():
    cam = front_camera()
    np.testing.assert_allclose(cam.ego_from_cam @ cam.cam_from_ego, np.eye(4), atol=1e-14)
    np.testing.assert_allclose(cam.position, [1.7, 0.02, 1.5], atol=1e-14)
    # The optical centre maps to the camera origin.
    np.testing.assert_allclose((cam.cam_from_ego @ np.append(cam.position, 1))[:3], 0, atol=1e-14)
    assert cam.size == (W, H)


def test_replace_validates_again():
    with pytest.raises(ValueError, match=r"field 'height'"):
        front_camera().replace(height=0)


# --- image operations: pixels move exactly as the image operation moves them ----------------

@pytest.mark.parametrize("sx, sy", [(0.5, 0.5), (0.25, 0.4), (2.0, 3.0), (704 / 1600, 256 / 900), (1.0, 1.0)])
def test_resize_moves_projections_by_pixel_centre_rule(sx, sy):
    cam = front_camera()
    pts = points_in_view()
    uv, uv2 = uv_of(cam, pts), uv_of(cam.resized(sx, sy), pts)
    np.testing.assert_allclose(uv2[:, 0], sx * (uv[:, 0] + 0.5) - 0.5, rtol=0, atol=1e-9)
    np.testing.assert_allclose(uv2[:, 1], sy * (uv[:, 1] + 0.5) - 0.5, rtol=0, atol=1e-9)


def test_resize_sizes_and_intrinsics():
    cam = front_camera().resized(0.5)
    assert (cam.width, cam.height) == (800, 450)
    assert cam.K[0, 0] == pytest.approx(K0[0, 0] / 2) and cam.K[1, 1] == pytest.approx(K0[1, 1] / 2)
    assert cam.K[0, 2] == pytest.approx(0.5 * (K0[0, 2] + 0.5) - 0.5)
    assert cam.K[1, 2] == pytest.approx(0.5 * (K0[1, 2] + 0.5) - 0.5)
    # The image extent [-0.5, W - 0.5] maps onto the new extent exactly.
    assert 0.5 * (-0.5 + 0.5) - 0.5 == -0.5 and 0.5 * (W - 0.5 + 0.5) - 0.5 == cam.width - 0.5
    np.testing.assert_array_equal(cam.cam_from_ego, front_camera().cam_from_ego)


def test_resized_to_exact_size():
    cam = front_camera().resized_to(704, 256)
    assert (cam.width, cam.height) == (704, 256)
    pts = points_in_view()
    uv, uv2 = uv_of(front_camera(), pts), uv_of(cam, pts)
    np.testing.assert_allclose(uv2[:, 0], 704 / W * (uv[:, 0] + 0.5) - 0.5, atol=1e-9)
    np.testing.assert_allclose(uv2[:, 1], 256 / H * (uv[:, 1] + 0.5) - 0.5, atol=1e-9)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'width'"):
        front_camera().resized_to(0, 256)


@pytest.mark.parametrize("bad", [0.0, -0.5, np.nan, np.inf])
def test_resize_factor_must_be_positive_and_finite(bad):
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'sx': resize factor must be finite and > 0"):
        front_camera().resized(bad, 1.0)
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'sy': resize factor must be finite and > 0"):
        front_camera().resized(1.0, bad)


@pytest.mark.parametrize("x0, y0", [(0, 0), (100, 50), (-20, 7), (333, 421)])
def test_crop_moves_projections_by_offset(x0, y0):
    cam = front_camera()
    crop = cam.cropped(x0, y0, 640, 360)
    assert (crop.width, crop.height) == (640, 360)
    pts = points_in_view()
    np.testing.assert_allclose(uv_of(crop, pts), uv_of(cam, pts) - [x0, y0], rtol=0, atol=1e-9)


@pytest.mark.parametrize("stride", [1, 2, 4, 8, 16, 32])
def test_stride_moves_projections_by_feature_rule(stride):
    cam = front_camera()
    feat = cam.at_stride(stride)
    assert (feat.width, feat.height) == (W // stride, H // stride)
    pts = points_in_view()
    np.testing.assert_allclose(uv_of(feat, pts), (uv_of(cam, pts) + 0.5) / stride - 0.5, rtol=0, atol=1e-9)


def test_stride_must_be_positive_int():
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'stride': must be a positive integer \(got 0\)"):
        front_camera().at_stride(0)


# --- image operations: checked against real image resampling --------------------------------

def _blob_image(width: int, height: int, u: float, v: float, sigma: float) -> np.ndarray:
    """Float image (height, width) with a Gaussian centred at pixel coordinates (u, v)."""
    uu, vv = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    return np.exp(-((uu - u) ** 2 + (vv - v) ** 2) / (2 * sigma**2))


def _centroid(img: np.ndarray) -> np.ndarray:
    """Intensity centroid (u, v) of an image (H, W), in pixel-centre coordinates."""
    vv, uu = np.mgrid[: img.shape[0], : img.shape[1]]
    return np.array([(uu * img).sum(), (vv * img).sum()]) / img.sum()


def _marked_point_and_pixel(cam: Camera) -> tuple[np.ndarray, np.ndarray]:
    """A 3D ego point (3,) and where it lands in the camera (u, v), away from borders."""
    pt = np.array([[25.0, 1.3, 0.4]])
    uv = uv_of(cam, pt)[0]
    assert 100 < uv[0] < cam.width - 100 and 100 < uv[1] < cam.height - 100
    return pt, uv


@pytest.mark.parametrize("factor", [2, 4, 5])
def test_area_downsampled_image_puts_marked_point_where_new_K_says(factor):
    """cv2.resize(INTER_AREA) by 1/factor and block-averaging both keep the blob where the
    resized camera projects it; the naive cx' = cx / s rule would be off by (s - 1) / (2 s)."""
    cam = front_camera()
    pt, uv = _marked_point_and_pixel(cam)
    img = _blob_image(W, H, uv[0], uv[1], sigma=12.0)
    np.testing.assert_allclose(_centroid(img), uv, atol=1e-6)

    small = cam.resized(1.0 / factor)
    expected = uv_of(small, pt)[0]
    cv_small = cv2.resize(img.astype(np.float32), (small.width, small.height), interpolation=cv2.INTER_AREA)
    block = img.reshape(H // factor, factor, W // factor, factor).mean(axis=(1, 3))
    assert cv_small.shape == block.shape == (small.height, small.width)
    np.testing.assert_allclose(_centroid(cv_small.astype(np.float64)), expected, atol=2e-3)
    np.testing.assert_allclose(_centroid(block), expected, atol=1e-6)
    # The naive rule cx' = cx / s would put it this far off: the test can tell them apart.
    assert abs(small.K[0, 2] - cam.K[0, 2] / factor) == pytest.approx((factor - 1) / (2 * factor))

    # A feature map at this stride is the same block average.
    np.testing.assert_allclose(uv_of(cam.at_stride(factor), pt)[0], _centroid(block), atol=1e-6)


def test_marked_pixel_block_lands_in_predicted_pixel():
    """A single bright s x s block maps to exactly one output pixel, at the predicted centre."""
    cam = front_camera(width=64, height=48, K=np.array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]]))
    s = 4
    img = np.zeros((48, 64), np.float32)
    img[20:24, 36:40] = 1.0  # pixels u in 36..39, v in 20..23: centre (37.5, 21.5)
    small_img = cv2.resize(img, (64 // s, 48 // s), interpolation=cv2.INTER_AREA)
    (row,), (col,) = np.nonzero(small_img)
    assert small_img[row, col] == pytest.approx(1.0)
    small = cam.resized(1.0 / s)
    # Back-project the block centre to a 3D point at 10 m depth, then project it in the small camera.
    p_cam = np.linalg.solve(cam.K, [37.5, 21.5, 1.0]) * 10.0
    p_ego = (cam.ego_from_cam @ np.append(p_cam, 1.0))[:3]
    np.testing.assert_allclose(uv_of(small, p_ego[None])[0], [col, row], atol=1e-9)


def test_upsampled_image_puts_marked_point_where_new_K_says():
    """cv2 INTER_LINEAR upscaling by 2 uses the same pixel-centre convention."""
    cam = front_camera(width=320, height=180, K=np.array([[250.0, 0, 163.2], [0, 250.0, 91.7], [0, 0, 1]]))
    pt = np.array([[25.0, 1.3, 0.4]])
    uv = uv_of(cam, pt)[0]
    img = _blob_image(320, 180, uv[0], uv[1], sigma=5.0)
    big = cam.resized(2.0)
    big_img = cv2.resize(img, (big.width, big.height), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(_centroid(big_img), uv_of(big, pt)[0], atol=1e-3)


def test_cropped_image_puts_marked_pixel_where_new_K_says():
    cam = front_camera()
    pt, uv = _marked_point_and_pixel(cam)
    ui, vi = int(round(uv[0])), int(round(uv[1]))
    img = np.zeros((H, W), np.uint8)
    img[vi, ui] = 255
    x0, y0 = 400, 300
    crop = cam.cropped(x0, y0, 800, 500)
    crop_img = img[y0:y0 + 500, x0:x0 + 800]
    (row,), (col,) = np.nonzero(crop_img)
    uv_crop = uv_of(crop, pt)[0]
    np.testing.assert_allclose(uv_crop - (uv - [ui, vi]), [col, row], atol=1e-9)


@pytest.mark.parametrize("k", [1, 2, 3, 4, -1])
def test_rot90_puts_marked_pixel_where_the_turned_camera_says(k):
    """A camera turned on its mount (portrait images, upside down) is np.rot90 of its image."""
    cam = front_camera(K=_K(k00=1200.0, k11=1180.0))
    pt, uv = _marked_point_and_pixel(cam)
    ui, vi = int(round(uv[0])), int(round(uv[1]))
    img = np.zeros((H, W), np.uint8)
    img[vi, ui] = 255
    turned = cam.rot90(k)
    turned_img = np.rot90(img, k)
    assert turned_img.shape == (turned.height, turned.width)
    (row,), (col,) = np.nonzero(turned_img)
    sub = uv - [ui, vi]  # the point's offset from the marked pixel's centre, turned alike
    for _ in range(k % 4):
        sub = np.array([sub[1], -sub[0]])
    np.testing.assert_allclose(uv_of(turned, pt)[0] - sub, [col, row], atol=1e-9)
    np.testing.assert_allclose(turned.position, cam.position)  # the same place, the same optical axis
    np.testing.assert_allclose(turned.ego_from_cam[:3, 2], cam.ego_from_cam[:3, 2], atol=1e-12)


def test_rot90_refuses_skew_and_a_fractional_turn():
    skewed = front_camera(K=np.array([[1000.0, 2.0, 800.0], [0.0, 1000.0, 450.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="'K'.*skew"):
        skewed.rot90(1)
    pt, uv = _marked_point_and_pixel(skewed)
    np.testing.assert_allclose(uv_of(skewed.rot90(2), pt)[0], [W - 1 - uv[0], H - 1 - uv[1]], atol=1e-9)
    with pytest.raises(ValueError, match="'k'"):
        front_camera().rot90(0.5)


# --- Rig ------------------------------------------------------------------------------------

def six_cameras() -> list[Camera]:
    names = ["CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT"]
    return [front_camera(name=n, K=_K(k00=1000.0 + i, k11=1000.0 + i)) for i, n in enumerate(names)]


def test_rig_container_protocol():
    cams = six_cameras()
    rig = Rig(cams)
    assert len(rig) == 6 and rig.names == [c.name for c in cams]
    assert rig["CAM_BACK"] is cams[3] and rig[3] is cams[3] and rig[np.int64(3)] is cams[3]
    assert rig.index("CAM_BACK_LEFT") == 4
    assert "CAM_FRONT" in rig and "CAM_X" not in rig
    assert list(rig) == cams and rig.cameras == tuple(cams)
    assert repr(rig).startswith("Rig(['CAM_FRONT'")


def test_rig_unknown_name_error_names_it():
    rig = Rig(six_cameras())
    with pytest.raises(ValueError, match=r"field 'camera': unknown camera name; the rig has \[.*\] \(got 'CAM_SIDE'\)"):
        rig["CAM_SIDE"]
    with pytest.raises(ValueError, match="CAM_SIDE"):
        rig.index("CAM_SIDE")


def test_rig_rejects_empty_duplicates_and_non_cameras():
    with pytest.raises(ValueError, match=r"field 'cameras': a rig needs at least one camera"):
        Rig([])
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'name': duplicate camera name \(got 'CAM_FRONT'\)"):
        Rig([front_camera(), front_camera()])
    with pytest.raises(ValueError, match=r"field 'cameras': every entry must be a Camera \(got 'dict'\)"):
        Rig([front_camera(), {}])


def test_rig_batched_tensors():
    rig = Rig(six_cameras())
    K = rig.intrinsics()
    T = rig.cam_from_ego(torch.float32)
    sizes = rig.image_sizes()
    assert K.shape == (6, 3, 3) and K.dtype == torch.float64
    assert T.shape == (6, 4, 4) and T.dtype == torch.float32
    assert sizes.shape == (6, 2) and sizes.dtype == torch.int64 and sizes[0].tolist() == [W, H]
    assert K[5, 0, 0].item() == 1005.0


def test_rig_equality_hash_and_derived_rigs():
    rig = Rig(six_cameras())
    assert rig == Rig(six_cameras()) and hash(rig) == hash(Rig(six_cameras()))
    half = rig.resized(0.5)
    assert half != rig and all(c.width == 800 for c in half)
    assert all(c.width == W // 8 for c in rig.at_stride(8))
    changed = rig.replace(rig["CAM_BACK"].replace(width=1280))
    assert changed["CAM_BACK"].width == 1280 and changed.names == rig.names and changed != rig
    sub = rig.subset(["CAM_BACK", "CAM_FRONT"])
    assert sub.names == ["CAM_BACK", "CAM_FRONT"]
    assert rig.map(lambda c: c.cropped(0, 0, 100, 100))["CAM_FRONT"].size == (100, 100)


@pytest.mark.parametrize("args,field", [((1.5, 0, 10, 10), "x0"), ((0, "1", 10, 10), "y0"),
                                        ((0, 0, 0, 10), "width"), ((0, 0, 10, 2.5), "height")])
def test_crop_needs_whole_pixels(args, field):
    cam = six_cameras()[0]
    with pytest.raises(ValueError, match=rf"camera {cam.name}: field '{field}': must be a"):
        cam.cropped(*args)
    assert cam.cropped(3.0, 2, 10, 10).K[0, 2] == cam.K[0, 2] - 3  # whole floats are fine


def test_rig_display_grid():
    rig = Rig(six_cameras())
    assert rig.display_grid() == [["CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT"],
                                  ["CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT"]]
    assert rig.subset(["CAM_FRONT", "CAM_BACK"]).display_grid() == [[None, "CAM_FRONT", None], [None, "CAM_BACK", None]]
    other = Rig([front_camera(name=f"cam{i}") for i in range(4)])
    assert other.display_grid() == [["cam0", "cam1", "cam2"], ["cam3", None, None]]


# --- limits (issue 14): sizes, the name rule, the number of cameras, raw input ------------------

@pytest.mark.parametrize("field", ["width", "height"])
@pytest.mark.parametrize("huge", [2 ** 63, 10 ** 20, 10 ** 9, 1e9, 1e20, 10 ** 400])
def test_sizes_beyond_max_image_side_are_refused_before_numpy_sees_them(field, huge, allocates_at_most):
    with allocates_at_most(1), pytest.raises(ValueError, match=rf"camera CAM_FRONT: field '{field}': more than "
                                                               r"MAX_IMAGE_SIDE = 8192 \(got "):
        front_camera(**{field: huge})


def test_image_size_limits_on_a_camera():
    assert front_camera(width=MAX_IMAGE_SIDE, height=MAX_IMAGE_PIXELS // MAX_IMAGE_SIDE).size == (8192, 4096)
    with pytest.raises(ValueError, match=r"field 'width x height': more than MAX_IMAGE_PIXELS = 33554432 "
                                         r"\(got '8192 x 8192 px'\)"):
        front_camera(width=8192, height=8192)


def test_image_operations_cannot_overflow_the_size():
    cam = front_camera()
    with pytest.raises(ValueError, match=r"field 'width': more than MAX_IMAGE_SIDE"):
        cam.resized(100.0)
    with pytest.raises(ValueError, match=r"field 'width': must be a positive integer \(got inf\)"):
        cam.resized(1e308)  # 1600 * 1e308 is inf: refused, never an OverflowError
    with pytest.raises(ValueError, match=r"field 'width': more than MAX_IMAGE_SIDE"):
        cam.resized_to(2 ** 63, 900)
    with pytest.raises(ValueError, match=r"field 'stride': more than MAX_IMAGE_SIDE"):
        cam.at_stride(10 ** 400)
    with pytest.raises(ValueError, match=r"field 'x0': more than MAX_IMAGE_SIDE"):
        cam.cropped(10 ** 400, 0, 10, 10)


@pytest.mark.parametrize("name", ["x" * 10_000, "CAM\x00FRONT", "CAM\x1b[31mFRONT", "**CAM**", "<img src=x>",
                                  "CAM_FRONT\n# heading", "[CAM](javascript:alert(1))"])
def test_camera_names_follow_the_rule(name):
    with pytest.raises(ValueError, match=r"field 'name': .*a camera name is 1 to 64 characters"):
        front_camera(name=name)


def test_every_embedded_camera_name_follows_the_rule(embedded_sample, real_sample):
    from bevviz.synthetic import nuscenes_like_rig

    for rig in (embedded_sample[0], real_sample[0], nuscenes_like_rig()):
        assert all(check_camera_name(n) == n for n in rig.names)


def test_a_rig_holds_at_most_max_cameras():
    cams = [front_camera(name=f"cam{i}") for i in range(MAX_CAMERAS)]
    assert len(Rig(cams)) == MAX_CAMERAS
    with pytest.raises(ValueError, match=r"field 'cameras': more than MAX_CAMERAS = 32 \(got '33 cameras'\)"):
        Rig(cams + [front_camera(name="one_more")])
    made = []

    def endless():
        while True:
            made.append(front_camera(name=f"cam{len(made)}"))
            yield made[-1]

    with pytest.raises(ValueError, match=r"more than MAX_CAMERAS = 32 \(got 'more than 32 cameras'\)"):
        Rig(endless())
    assert len(made) == MAX_CAMERAS + 1  # read no further than one past the limit


def _raw(name: str = "CAM_FRONT", rotation=(0.5, -0.5, 0.5, -0.5)) -> RawCamera:
    return RawCamera(name, K0, np.array(rotation, float), np.array([1.7, 0.0, 1.5]), W, H)


def test_from_raw_given_a_dict_is_a_named_error():
    raws = {"CAM_FRONT": _raw()}
    with pytest.raises(ValueError, match=r"field 'raw_cameras': must be a list of cameras in rig order \(for a dict, "
                                         r"pass list\(d.values\(\)\)\) \(got 'dict'\)"):
        Rig.from_raw(raws, NUSCENES)
    assert Rig.from_raw(list(raws.values()), NUSCENES).names == ["CAM_FRONT"]
    for bad, pattern in ((["CAM_FRONT"], r"field 'raw_cameras': every entry must be a bevviz\.storage\.RawCamera "
                                         r"\(got 'str'\)"),
                         ("CAM_FRONT", r"field 'raw_cameras': must be a list"), (5, r"field 'raw_cameras'")):
        with pytest.raises(ValueError, match=pattern):
            Rig.from_raw(bad, NUSCENES)
    with pytest.raises(ValueError, match=r"field 'convention': must be a bevviz\.storage\.Convention \(got 'str'\)"):
        Rig.from_raw([_raw()], "nuscenes")


def test_from_raw_checks_the_name_before_it_prefixes_messages():
    with pytest.raises(ValueError, match=r"^field 'name': has 10000 characters"):
        Rig.from_raw([_raw("x" * 10_000, rotation=(2, 0, 0, 0))], NUSCENES)


def test_calibration_difference_names_the_field_and_tolerates_a_file_round_trip():
    cam = front_camera()
    assert calibration_difference(cam, cam) == ""
    # float32 round trip of every number: still one calibration
    rounded = Camera(cam.name, cam.K.astype(np.float32).astype(np.float64),
                     cam.cam_from_ego.astype(np.float32).astype(np.float64), cam.width, cam.height)
    assert calibration_difference(cam, rounded) == ""
    turned = cam.cam_from_ego.copy()
    turned[:3, :3] = rpy_to_matrix(0.0, 0.0, np.radians(1.0)) @ turned[:3, :3]
    moved = Camera(cam.name, cam.K, turned, cam.width, cam.height)
    words = calibration_difference(cam, moved)
    assert words.startswith("cam_from_ego differs by up to 0.01")
    other_k = front_camera(K=_K(k00=K0[0, 0] + 1.0))
    assert calibration_difference(cam, other_k) == "K differs by up to 1"
    half = Camera(cam.name, cam.K, cam.cam_from_ego, W // 2, H)
    assert calibration_difference(cam, half) == f"image size {W} x {H} vs {W // 2} x {H}"


def test_same_calibration_needs_the_same_cameras_in_order():
    a, b = front_camera("A"), front_camera("B")
    assert same_calibration(Rig([a, b]), Rig([a, b]))
    assert not same_calibration(Rig([a, b]), Rig([b, a]))
    assert not same_calibration(Rig([a]), Rig([a, b]))
    moved = Camera("B", b.K, make_transform(np.eye(3), np.array([0.0, 0.0, 0.1])) @ b.cam_from_ego, W, H)
    assert not same_calibration(Rig([a, b]), Rig([a, moved]))
