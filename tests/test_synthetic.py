"""The synthetic world and renderer agree with bevviz's geometry, and sample_data is theirs.

The renders are checked against the projection module (not against the renderer's own
ray casting): painted markings projected with the true calibration by
``bevviz.projection.project_points`` must land on pixels of the paint's colour.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from bevviz import synthetic as syn
from bevviz.camera import NUSCENES_CAMERAS, Rig, invert_transform
from bevviz.conventions import Convention, RawCamera
from bevviz.projection import project_points
from bevviz.synthetic.dataset import axis_angle_matrix

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"
CHECK_CAMERAS = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK", "CAM_BACK_LEFT")
MAX_RANGE = 30.0  # metres from the camera


def _read_rgb(path: Path) -> np.ndarray:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert bgr is not None, f"cannot read {path}"
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


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


def test_marking_points_are_painted_in_the_texture():
    pts, colors, kinds = syn.lane_marking_points()
    assert len(pts) == len(colors) == len(kinds) > 100
    assert {"solid", "dash", "centre", "stop", "crosswalk"} <= set(kinds)
    got = syn.sample_ground(pts[:, :2])
    np.testing.assert_allclose(got, colors.astype(np.float32), atol=1e-3)


def test_texture_orientation_matches_bev_grid():
    tex, grid = syn.ground_texture()
    assert tex.shape == (grid.height, grid.width, 3) == (1200, 1200, 3) and tex.dtype == np.uint8
    assert grid.x_range == (-60.0, 60.0) and grid.y_range == (-60.0, 60.0) and grid.resolution == 0.1
    # Yellow centre line (y = 1.85, left of the ego) and the front stop line (x = 11.1, right).
    i, j = grid.cell_of(5.0, 1.85)
    assert tuple(tex[i, j]) == syn.YELLOW
    i, j = grid.cell_of(11.1, -3.0)
    assert tuple(tex[i, j]) == syn.WHITE
    # Front is up (row 0 = max x), left is left (column 0 = max y).
    assert grid.cell_of(14.0, 0.0)[0] < grid.cell_of(-18.0, 0.0)[0]
    assert grid.cell_of(0.0, 30.0)[1] < grid.cell_of(0.0, -30.0)[1]
    assert tuple(tex[grid.cell_of(0.5, 30.5)]) in (syn.CHECKER[0], syn.CHECKER[1])  # checker on the left


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


def test_box_occludes_the_ground_behind_it():
    rig = syn.nuscenes_like_rig().resized(0.25).subset(["CAM_FRONT"])
    cam = rig["CAM_FRONT"]
    world = syn.default_world()
    car = next(i for i, b in enumerate(world.boxes) if b.name == "car_1")
    without = syn.World(world.texture, world.grid, tuple(b for i, b in enumerate(world.boxes) if i != car))
    with_img = syn.render_camera(cam, world)
    without_img = syn.render_camera(cam, without)
    # Pixels change only inside the car's projected outline, and they do change there.
    corners = project_points(world.boxes[car].corners(), rig).uv[0].numpy()
    (u0, v0), (u1, v1) = corners.min(0), corners.max(0)
    changed = np.any(with_img != without_img, axis=-1)
    vv, uu = np.nonzero(changed)
    assert changed.sum() > 20
    assert uu.min() >= np.floor(u0) - 1 and uu.max() <= np.ceil(u1) + 1
    assert vv.min() >= np.floor(v0) - 1 and vv.max() <= np.ceil(v1) + 1
    # The ray through the back face's centre hits the car before the ground it hides.
    back = np.array([[world.boxes[car].center[0] - 2.25, 0.0, 0.8]])
    uv = project_points(back, rig).uv[0].numpy()
    origin, d = syn.camera_rays(cam, uv=uv)
    hit = syn.cast_rays(world, origin, d)
    assert hit.kind[0] == syn.BOX and hit.box[0] == car and hit.face[0] == 1  # -x face
    assert -origin[2] / d[0, 2] > hit.t[0]  # the ground lies behind
    u, v = np.rint(uv[0]).astype(int)
    face = np.asarray(world.boxes[car].face_colors[1], float)
    ground = syn.sample_ground(origin[None, :2] - origin[2] / d[:, 2:] * d[:, :2])[0]
    assert np.linalg.norm(with_img[v, u] - face * 0.9) < 30
    assert np.linalg.norm(without_img[v, u] - ground) < 30


def test_no_box_stands_in_a_camera_seam_in_any_sample():
    # The calibration doctor compares neighbouring cameras on the ground they share; a box
    # there would look like a miscalibration on the true rig. For every sample's ego pose
    # and every pair of neighbours, the shared ground 3-30 m out must be visible to both.
    rig = syn.nuscenes_like_rig()
    world = syn.default_world()
    ring = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT",
            "CAM_FRONT_LEFT")
    r, th = np.meshgrid(np.linspace(3, 30, 28), np.radians(np.arange(-180, 180, 0.5)))
    ground = np.stack([r.ravel() * np.cos(th.ravel()), r.ravel() * np.sin(th.ravel()),
                       np.zeros(r.size)], 1)  # ego frame
    in_image = project_points(ground, rig).valid.numpy()  # (6, M)
    ego_xs = sorted({x for scene in syn.SCENES for x in scene["ego_x"]})
    assert len(ego_xs) == 4
    for ego_x in ego_xs:
        world_pts = ground + [ego_x, 0.0, 0.0]
        visible = {}
        for ci, cam in enumerate(rig):
            origin = cam.position + [ego_x, 0.0, 0.0]
            hits = syn.cast_rays(world, origin, world_pts - origin)
            visible[cam.name] = in_image[ci] & (hits.kind == syn.GROUND) & (np.abs(hits.t - 1) < 1e-6)
        for a, b in zip(ring, ring[1:] + ring[:1]):
            shared = in_image[rig.names.index(a)] & in_image[rig.names.index(b)]
            assert shared.sum() > 100, (a, b)
            seen = (visible[a] & visible[b])[shared].mean()
            assert seen == 1.0, f"ego x {ego_x}: {a}/{b} see {100 * seen:.0f}% of their shared ground"
    # The check does catch a box: the old layout's car beside the ego blocks a seam.
    blocker = syn.Box("car_x", "car", (3.0, 11.1), (4.5, 1.9, 1.6), 0.0, ((0, 0, 0),) * 6)
    hits = syn.cast_rays(syn.World(world.texture, world.grid, world.boxes + (blocker,)),
                         rig["CAM_FRONT_LEFT"].position, ground - rig["CAM_FRONT_LEFT"].position)
    fl, bl = rig.names.index("CAM_FRONT_LEFT"), rig.names.index("CAM_BACK_LEFT")
    shared = in_image[fl] & in_image[bl]
    assert (hits.kind[shared] == syn.BOX).mean() > 0.5


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


def test_sample_ground_fades_outside_the_texture():
    far = syn.sample_ground(np.array([[200.0, 0.0], [0.0, -500.0]]))
    np.testing.assert_allclose(far, np.float32([syn.FAR_GROUND] * 2))


# --- the committed sample_data is what this code generates ---

def test_committed_ground_texture_matches():
    tex, grid = syn.ground_texture()
    np.testing.assert_array_equal(_read_rgb(SAMPLE_DATA / "ground_texture.png"), tex)
    meta = json.loads((SAMPLE_DATA / "ground_texture.json").read_text())
    assert meta["x_range"] == list(grid.x_range) and meta["y_range"] == list(grid.y_range)
    assert meta["resolution"] == grid.resolution and meta["shape"] == [1200, 1200, 3]


def test_committed_image_matches_a_fresh_render():
    """A window of the committed CAM_BACK image equals a fresh render of that window.

    The window is rendered through the cropped camera (same rays, pixel-centre
    convention), without exposure; the full camera's exposure map is applied after.
    """
    cam = syn.nuscenes_like_rig()["CAM_BACK"]
    committed = _read_rgb(SAMPLE_DATA / "images" / "CAM_BACK.jpg")
    assert committed.shape == (900, 1600, 3)
    x0, y0, w, h = 500, 300, 480, 320  # horizon, road, a car and the rear crosswalk
    window = syn.render_camera(cam.cropped(x0, y0, w, h), exposure=False).astype(float)
    fresh = np.clip(np.rint(window * syn.exposure_map(cam)[y0:y0 + h, x0:x0 + w, None]), 0, 255)
    diff = np.abs(committed[y0:y0 + h, x0:x0 + w].astype(float) - fresh)
    print(f"CAM_BACK committed vs fresh window: mean abs diff {diff.mean():.3f}")
    assert diff.mean() < 3.0


def test_committed_rig_json_is_the_true_rig():
    data = json.loads((SAMPLE_DATA / "rig.json").read_text())
    assert data["format"] == "bevviz-rig" and data["version"] == 1
    conv = Convention(**data["convention"])
    raws = [RawCamera(c["name"], np.array(c["K"]), np.array(c["rotation"]), np.array(c["translation"]),
                      c["width"], c["height"]) for c in data["cameras"]]
    rig = Rig.from_raw(raws, conv)
    truth = syn.nuscenes_like_rig()
    assert rig.names == truth.names == list(NUSCENES_CAMERAS)
    for a, b in zip(rig, truth):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
        np.testing.assert_allclose(a.K, b.K, atol=1e-9)
    for c in data["cameras"]:
        assert (SAMPLE_DATA / c["image"]).is_file()
    # The rig's images are scene-0001's first sample (ego pose = identity).
    first = sorted((SAMPLE_DATA / "nuscenes" / "samples" / "CAM_FRONT").glob("scene-0001__*.jpg"))[0]
    assert first.read_bytes() == (SAMPLE_DATA / "images" / "CAM_FRONT.jpg").read_bytes()


def test_committed_rig_json_loads_with_rig_json():
    rig_json = pytest.importorskip("bevviz.io.rig_json")
    rig = rig_json.load_rig(SAMPLE_DATA / "rig.json")
    truth = syn.nuscenes_like_rig()
    assert rig.names == truth.names
    for a, b in zip(rig, truth):
        np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, atol=1e-9)
