"""bevviz.synthetic.renderer: the renders agree with bevviz's geometry.

The renders are checked against the projection module (not against the renderer's own
ray casting): painted markings projected with the true calibration by
``bevviz.projection.project_points`` must land on pixels of the paint's colour.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from bevviz import synthetic as syn
from bevviz.camera import NUSCENES_CAMERAS, Rig, invert_transform
from bevviz.projection import project_points
from bevviz.synthetic.dataset import axis_angle_matrix

CHECK_CAMERAS = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK", "CAM_BACK_LEFT")
MAX_RANGE = 30.0  # metres from the camera


def _paint_class(rgb: np.ndarray) -> np.ndarray:
    """'white' / 'yellow' / 'other' per pixel, robust to the exposure gains and vignetting.

    Args:
        rgb: Pixels, shape (N, 3).
    """
    p = rgb.astype(float)
    r, g, b = p[:, 0], p[:, 1], p[:, 2]
    white = (p.min(axis=1) > 170) & (p.max(axis=1) - p.min(axis=1) < 45)
    yellow = (r > 150) & (g > 110) & (b < 0.45 * r)
    return np.where(white, "white", np.where(yellow, "yellow", "other"))


def _expected_class(colors: np.ndarray) -> np.ndarray:
    return _paint_class(colors.astype(float))


@pytest.fixture(scope="module")
def half_rig() -> Rig:
    return syn.nuscenes_like_rig().resized(0.5).subset(CHECK_CAMERAS)


@pytest.fixture(scope="module")
def half_renders(half_rig) -> dict[str, np.ndarray]:
    return syn.render(half_rig)


def _inside_convex(quad: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Whether points q (M, 2) lie inside the convex polygon ``quad`` (4, 2), either winding."""
    edges = np.roll(quad, -1, axis=0) - quad  # (4, 2)
    rel = q[:, None, :] - quad[None, :, :]  # (M, 4, 2)
    cross = edges[None, :, 0] * rel[..., 1] - edges[None, :, 1] * rel[..., 0]
    return np.all(cross > 0, axis=1) | np.all(cross < 0, axis=1)


def _pure_paint_pixels(rig: Rig, uv: np.ndarray, pts: np.ndarray, margin: float = 0.05) -> np.ndarray:
    """For each point, whether the whole pixel at round(uv) lies inside its marking.

    The marking rectangle, shrunk by ``margin`` metres (bilinear and mip blur), is
    projected with ``project_points``; the pixel square round(uv) +- 0.5 must fit inside
    it. Such a pixel sees nothing but paint, so it must show the paint's colour.

    Args:
        rig: One-camera rig.
        uv: Projected points, shape (N, 2).
        pts: The points, shape (N, 3), each inside one marking.
    """
    marks = syn.road_markings()
    out = np.zeros(len(pts), bool)
    pix = np.rint(uv)
    square = np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]])
    for i, p in enumerate(pts):
        m = next(m for m in marks if m.x[0] < p[0] < m.x[1] and m.y[0] < p[1] < m.y[1])
        (x0, x1), (y0, y1) = m.x, m.y
        rect = np.array([[x0 + margin, y0 + margin, 0], [x1 - margin, y0 + margin, 0],
                         [x1 - margin, y1 - margin, 0], [x0 + margin, y1 - margin, 0]])
        proj = project_points(rect, rig)
        if proj.in_front[0].all():
            out[i] = _inside_convex(proj.uv[0].numpy(), pix[i] + square).all()
    return out


def _marking_hits(rig: Rig, images: dict[str, np.ndarray], truth: Rig | None = None
                  ) -> tuple[int, int, dict[str, int]]:
    """Project every visible marking point with ``rig`` and classify the pixel it lands on.

    A point counts when it is in the image, within MAX_RANGE of the camera, not hidden by
    a box, and its pixel (under ``truth``, default ``rig``) lies wholly inside the paint
    (see :func:`_pure_paint_pixels`); the pixel checked is the one ``rig`` projects to.

    Returns:
        (checked, matching, checked per camera).
    """
    truth = truth or rig
    pts, colors, _ = syn.lane_marking_points()
    proj = project_points(pts, rig)
    want = _expected_class(colors)
    checked = matched = 0
    per_cam = {}
    world = syn.default_world()
    for ci, cam in enumerate(rig):
        true_rig = Rig([truth[cam.name]])
        uv = proj.uv[ci].numpy()
        ok = proj.valid[ci].numpy() & (np.linalg.norm(pts - cam.position, axis=1) < MAX_RANGE)
        ok &= (uv[:, 0] > 1) & (uv[:, 0] < cam.width - 2) & (uv[:, 1] > 1) & (uv[:, 1] < cam.height - 2)
        idx = np.nonzero(ok)[0]
        true_uv = project_points(pts[idx], true_rig).uv[0].numpy()
        origin, dirs = syn.camera_rays(true_rig[0], uv=true_uv)
        idx = idx[syn.cast_rays(world, origin, dirs).kind == syn.GROUND]  # not behind a box
        idx = idx[_pure_paint_pixels(true_rig, project_points(pts[idx], true_rig).uv[0].numpy(), pts[idx])]
        pix = np.rint(uv[idx]).astype(int)
        got = _paint_class(images[cam.name][pix[:, 1], pix[:, 0]])
        per_cam[cam.name] = len(idx)
        checked += len(idx)
        matched += int((got == want[idx]).sum())
    return checked, matched, per_cam


def test_pixel_rays_agree_with_project_points():
    """The renderer's pixel-centre rays, cast to the ground, project back to their pixels."""
    rig = syn.nuscenes_like_rig().resized(0.25)
    rng = np.random.default_rng(0)
    for ci, cam in enumerate(rig):
        uv = np.stack([rng.uniform(-0.5, cam.width - 0.5, 200),
                       rng.uniform(cam.height * 0.6, cam.height - 0.5, 200)], 1)
        origin, dirs = syn.camera_rays(cam, uv=uv)
        hits = syn.cast_rays(syn.World(*syn.ground_texture(), boxes=()), origin, dirs)
        ground = hits.kind == syn.GROUND
        assert ground.mean() > 0.9
        back = project_points(hits.point[ground], rig).uv[ci].numpy()
        np.testing.assert_allclose(back, uv[ground], atol=1e-6)


def test_markings_land_on_paint_in_renders(half_rig, half_renders):
    checked, matched, per_cam = _marking_hits(half_rig, half_renders)
    print(f"marking points: {matched}/{checked} on paint of the right colour; per camera {per_cam}")
    # At half resolution the front-right camera sees the road only at grazing angles:
    # its views are covered by test_ground_cells_show_their_colour_times_exposure.
    assert sum(n >= 10 for n in per_cam.values()) >= 3 and per_cam["CAM_BACK"] >= 10
    assert checked >= 60
    assert matched == checked


def test_ground_cells_show_their_colour_times_exposure(half_rig, half_renders):
    """Checker squares (left) and tiles (right) seen by every checked camera: a pixel lying
    wholly inside a uniform cell shows the cell's texture colour times the camera's
    exposure factor (gain and vignetting), within rounding."""
    tex, grid = syn.ground_texture()
    world = syn.default_world()
    cells = []  # (x0, x1, y0, y1)
    for x0 in range(-30, 30):
        cells += [(x0, x0 + 1, y0, y0 + 1) for y0 in range(13, 31)]  # 1 m checker
    for x0 in range(-30, 30, 2):
        cells += [(x0, x0 + 2, y0, y0 + 2) for y0 in range(-30, -10, 2)]  # 2 m tiles
    uniform = []
    for x0, x1, y0, y1 in cells:
        (i0, j0), (i1, j1) = grid.cell_of(x1 - 0.05, y1 - 0.05), grid.cell_of(x0 + 0.05, y0 + 0.05)
        patch = tex[i0:i1 + 1, j0:j1 + 1].reshape(-1, 3)
        if (patch == patch[0]).all():  # no ring or label painted over it
            uniform.append((x0, x1, y0, y1, patch[0]))
    centres = np.array([[(a + b) / 2, (c + d) / 2, 0.0] for a, b, c, d, _ in uniform])
    counts, worst = {}, 0.0
    for cam in half_rig:
        one = Rig([cam])
        uv = project_points(centres, one).uv[0].numpy()
        near = np.linalg.norm(centres - cam.position, axis=1) < MAX_RANGE
        ok = project_points(centres, one).valid[0].numpy() & near
        ok &= (uv[:, 0] > 1) & (uv[:, 0] < cam.width - 2) & (uv[:, 1] > 1) & (uv[:, 1] < cam.height - 2)
        idx = np.nonzero(ok)[0]
        origin, dirs = syn.camera_rays(cam, uv=uv[idx])
        idx = idx[syn.cast_rays(world, origin, dirs).kind == syn.GROUND]
        square = np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]])
        factor = syn.exposure_map(cam)
        n = 0
        for i in idx:
            x0, x1, y0, y1, color = uniform[i]
            m = 0.05
            rect = np.array([[x0 + m, y0 + m, 0], [x1 - m, y0 + m, 0], [x1 - m, y1 - m, 0], [x0 + m, y1 - m, 0]])
            pix = np.rint(uv[i])
            if not _inside_convex(project_points(rect, one).uv[0].numpy(), pix + square).all():
                continue
            u, v = pix.astype(int)
            expected = color.astype(float) * factor[v, u]
            worst = max(worst, float(np.abs(half_renders[cam.name][v, u] - expected).max()))
            n += 1
        counts[cam.name] = n
    print(f"ground cells: per camera {counts}, worst abs colour error {worst:.2f}")
    assert min(counts.values()) >= 5 and sum(counts.values()) >= 100
    assert worst <= 1.0


def test_marking_check_catches_a_two_degree_yaw_error(half_rig, half_renders):
    """Control: the same check with the stored (wrong) rotation misses the paint often."""
    Rz = axis_angle_matrix((0.0, 0.0, 1.0), 2.0)

    def yawed(cam):
        ego_from_cam = cam.ego_from_cam.copy()
        ego_from_cam[:3, :3] = Rz @ ego_from_cam[:3, :3]
        return cam.replace(cam_from_ego=invert_transform(ego_from_cam))

    wrong = half_rig.map(yawed)
    checked, matched, _ = _marking_hits(wrong, half_renders, truth=half_rig)
    print(f"with a 2 deg yaw error: {matched}/{checked}")
    assert matched / checked < 0.8


def test_render_is_deterministic_and_shaped():
    rig = syn.nuscenes_like_rig().resized(0.15)
    a, b = syn.render(rig), syn.render(rig)
    assert list(a) == list(NUSCENES_CAMERAS)
    for name in a:
        assert a[name].shape == (135, 240, 3) and a[name].dtype == np.uint8
        assert hashlib.sha256(a[name].tobytes()).digest() == hashlib.sha256(b[name].tobytes()).digest()
    # Sky on top, ground at the bottom, exposure differs between cameras.
    front = a["CAM_FRONT"]
    assert front[0].mean(axis=0)[2] > front[0].mean(axis=0)[0]  # blue sky
    assert front[0, :, 2].mean() != a["CAM_BACK_LEFT"][0, :, 2].mean()
