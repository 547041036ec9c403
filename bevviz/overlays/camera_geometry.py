"""Camera geometry to draw: image corners, frustums, RDF axes, the horizon, the ground grid.

Convention:
    Ego frame x forward, y left, z up (metres); camera frame RDF; pixels at centres. See
    docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bevviz.camera import Camera, Rig
from bevviz.checks import check_shape, field_error, to_numpy
from bevviz.projection import image_extent, project_points, rays_of, transform_points

__all__ = [
    "backproject", "camera_axes", "clip_line_to_box", "frustum", "ground_grid_lines", "GroundGridLines", "horizon_line",
    "image_corners"
]


def image_corners(camera: Camera) -> np.ndarray:
    """The image's outer corners (u, v), shape (4, 2): top-left, top-right, bottom-right,
    bottom-left, at the pixel-centre convention's extent [-0.5, W - 0.5] x [-0.5, H - 0.5]."""
    W, H = camera.width, camera.height
    return np.array([[-0.5, -0.5], [W - 0.5, -0.5], [W - 0.5, H - 0.5], [-0.5, H - 0.5]])


def backproject(camera: Camera, uv: np.ndarray, depth: float | np.ndarray) -> np.ndarray:
    """Ego-frame points seen at pixels ``uv`` and depth ``depth`` (along the optical axis).

    Args:
        camera: The camera.
        uv: Pixel coordinates, shape (*P, 2).
        depth: Depth in metres, scalar or shape (*P,).

    Returns:
        Points in the ego frame, shape (*P, 3).
    """
    uv = np.asarray(uv, dtype=np.float64)
    check_shape(uv, ("...", 2), "uv", camera.name)
    rays = rays_of(uv, camera.K)
    p_cam = rays * np.asarray(depth, dtype=np.float64)[..., None]
    return transform_points(p_cam, camera.ego_from_cam)


def frustum(camera: Camera, depth: float = 3.0) -> np.ndarray:
    """A camera's viewing frustum in the ego frame.

    Args:
        camera: The camera.
        depth: Distance of the far rectangle along the optical axis (metres).

    Returns:
        Points, shape (5, 3): the optical centre, then the four image corners
        (top-left, top-right, bottom-right, bottom-left) at ``depth``.
    """
    if not (np.isfinite(depth) and depth > 0):
        raise field_error("frustum depth", depth, "must be finite and > 0", camera.name)
    corners = backproject(camera, image_corners(camera), depth)
    return np.concatenate([camera.position[None], corners], axis=0)


def camera_axes(camera: Camera, length: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The camera's RDF axes drawn in the ego frame.

    Returns:
        ``(origin, tips)``: the optical centre, shape (3,), and the tips of the x (right),
        y (down) and z (forward) axes, shape (3, 3), each ``length`` metres long.
    """
    T = camera.ego_from_cam
    return T[:3, 3].copy(), T[:3, 3] + length * T[:3, :3].T


def horizon_line(camera: Camera) -> np.ndarray | None:
    """The horizon: the vanishing line of the ground plane (z = const in ego), clipped to the image.

    Directions d with d_z = 0 in the ego frame map to pixels p ~ K R d (R = cam_from_ego
    rotation), so the line l = K^-T R n with n = (0, 0, 1) satisfies l . (u, v, 1) = 0.

    Args:
        camera: The camera.

    Returns:
        End points (u, v) of the visible segment, shape (2, 2), or ``None`` when the horizon
        does not cross the image.
    """
    R = camera.cam_from_ego[:3, :3]
    line = np.linalg.inv(camera.K).T @ (R @ np.array([0.0, 0.0, 1.0]))
    return clip_line_to_box(line, *image_extent(camera.width, camera.height))


def clip_line_to_box(line: np.ndarray, u0: float, v0: float, u1: float, v1: float) -> np.ndarray | None:
    """Clip the infinite line a u + b v + c = 0 to the box [u0, u1] x [v0, v1].

    Returns:
        The segment's end points, shape (2, 2), or ``None`` when it misses the box.
    """
    a, b, c = (float(x) for x in line)
    pts = []
    tol = 1e-9
    if abs(b) > tol:
        for u in (u0, u1):
            v = -(a * u + c) / b
            if v0 - tol <= v <= v1 + tol:
                pts.append((u, v))
    if abs(a) > tol:
        for v in (v0, v1):
            u = -(b * v + c) / a
            if u0 - tol <= u <= u1 + tol:
                pts.append((u, v))
    # Drop duplicates (a corner hit twice) and keep the two farthest apart.
    uniq = []
    for p in pts:
        if all(abs(p[0] - q[0]) > 1e-6 or abs(p[1] - q[1]) > 1e-6 for q in uniq):
            uniq.append(p)
    if len(uniq) < 2:
        return None
    uniq = np.array(uniq)
    d = ((uniq[:, None] - uniq[None]) ** 2).sum(-1)
    i, j = np.unravel_index(np.argmax(d), d.shape)
    return uniq[[i, j]]


@dataclass(frozen=True)


class GroundGridLines:
    """Metric lines on the ground plane projected into every camera.

    Attributes:
        uv: Pixel coordinates along each line, shape (N_cam, L, S, 2); NaN where the point is
            behind the camera (or too close to it to draw), so plotting a line with NaN
            gaps draws only its visible parts.
        labels: One label per line, length L, e.g. ``"x = 10 m"``.
        label_uv: Where to put each label (the line's visible point nearest the camera, a
            little inside the image), shape (N_cam, L, 2); NaN when the line misses the image.
        is_x_line: Whether each line is a line of constant x (lateral), shape (L,).
    """

    uv: np.ndarray
    labels: list[str]
    label_uv: np.ndarray
    is_x_line: np.ndarray


def ground_grid_lines(rig: Rig, x_range: tuple[float, float], y_range: tuple[float, float],
                      step: float = 10.0, z: float = 0.0, samples: int = 200,
                      min_depth: float = 0.3) -> GroundGridLines:
    """Lines every ``step`` metres on the plane z = ``z``, projected into every camera.

    Args:
        rig: The cameras.
        x_range: Extent along ego x (metres); lines of constant x at multiples of ``step``.
        y_range: Extent along ego y (metres); lines of constant y at multiples of ``step``.
        step: Line spacing in metres.
        z: Height of the plane (ego z, metres).
        samples: Points per line (lines bend nowhere, but are cut where they pass behind a
            camera, so they are sampled densely).
        min_depth: Points closer than this to the image plane are dropped (NaN).

    Returns:
        :class:`GroundGridLines`.
    """
    if not (np.isfinite(step) and step > 0):
        raise field_error("grid line step", step, "must be finite and > 0")
    xs = np.arange(np.ceil(x_range[0] / step), np.floor(x_range[1] / step) + 1) * step
    ys = np.arange(np.ceil(y_range[0] / step), np.floor(y_range[1] / step) + 1) * step
    t = np.linspace(0.0, 1.0, samples)
    lines, labels, is_x = [], [], []
    for x in xs:  # lateral lines: constant x, y sweeps the range
        ly = y_range[0] + t * (y_range[1] - y_range[0])
        lines.append(np.stack([np.full_like(t, x), ly, np.full_like(t, z)], -1))
        labels.append(f"x = {x:g} m")
        is_x.append(True)
    for y in ys:  # longitudinal lines: constant y, x sweeps the range
        lx = x_range[0] + t * (x_range[1] - x_range[0])
        lines.append(np.stack([lx, np.full_like(t, y), np.full_like(t, z)], -1))
        labels.append(f"y = {y:g} m")
        is_x.append(False)
    if not lines:
        n = len(rig)
        return GroundGridLines(np.zeros((n, 0, samples, 2)), [], np.zeros((n, 0, 2)), np.zeros(0, bool))
    pts = np.stack(lines)  # (L, S, 3)
    proj = project_points(pts, rig)
    uv = to_numpy(proj.uv).astype(np.float64)
    depth = to_numpy(proj.depth)
    in_image = to_numpy(proj.in_image).astype(bool)
    uv[depth < min_depth] = np.nan
    visible = in_image & (depth >= min_depth)  # (N, L, S)
    # Label each line at its visible point nearest the camera, kept off the image border.
    W = np.array([c.width for c in rig], dtype=np.float64)[:, None, None]
    H = np.array([c.height for c in rig], dtype=np.float64)[:, None, None]
    inner = visible & (uv[..., 0] > 0.04 * W) & (uv[..., 0] < 0.96 * W) & (uv[..., 1] > 0.04 * H) \
        & (uv[..., 1] < 0.96 * H)
    pick = np.argmin(np.where(inner, depth, np.inf), axis=-1)  # (N, L)
    label_uv = np.take_along_axis(uv, pick[..., None, None].repeat(2, -1), axis=2)[:, :, 0]
    label_uv[~inner.any(-1)] = np.nan
    return GroundGridLines(uv, labels, label_uv, np.array(is_x))
