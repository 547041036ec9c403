"""Derived geometry and measurements the debugger pages show.

Everything here is numbers, not figures: the horizon line of a camera, the ground grid
projected into an image, camera frustums and axes in the ego frame, the validity status of
every projected point, BEV footprints and overlap counts, and the small experiments of the
padding lab. The plotly builders in :mod:`bevviz.viz` draw what this module computes, and
the app's pages only wire the two together.

Convention:
    Ego frame x forward, y left, z up (metres); camera frame RDF; pixels (u, v) with
    integer values at pixel centres, so an image of width W spans u in [-0.5, W - 0.5].
    BEV arrays are (H_bev, W_bev) with row 0 at the front (largest x) and column 0 at the
    left (largest y), as :class:`bevviz.bev_grid.BEVGrid` lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Camera, Rig
from bevviz.projection import Projection, project_points
from bevviz.shapes import check_shape, field_error

# --------------------------------------------------------------------------------------
# Point status: valid / behind / outside
# --------------------------------------------------------------------------------------

STATUS_VALID, STATUS_BEHIND, STATUS_OUTSIDE = 0, 1, 2
#: Status names indexed by status code.
STATUS_NAMES = ("valid", "behind", "outside")


def point_status(proj: Projection) -> np.ndarray:
    """Why each projected point is or is not usable.

    Args:
        proj: A projection with fields of shape (N_cam, *P).

    Returns:
        Status codes, shape (N_cam, *P), uint8: ``STATUS_VALID`` (in front and inside the
        image), ``STATUS_BEHIND`` (depth <= eps; wins over outside) or ``STATUS_OUTSIDE``
        (in front but outside the image bounds).
    """
    in_front = to_numpy(proj.in_front).astype(bool)
    valid = to_numpy(proj.valid).astype(bool)
    status = np.full(in_front.shape, STATUS_OUTSIDE, dtype=np.uint8)
    status[valid] = STATUS_VALID
    status[~in_front] = STATUS_BEHIND
    return status


def status_table(proj: Projection, names: list[str]) -> list[dict]:
    """Per-camera counts and shares of points behind, outside and valid.

    Args:
        proj: Projection of P points (any batch shape) into N_cam cameras.
        names: Camera names, length N_cam.

    Returns:
        One row per camera (dicts with ``camera``, ``points``, ``valid``, ``behind``,
        ``outside`` and the shares ``valid %``, ``behind %``, ``outside %``).
    """
    status = point_status(proj).reshape(len(names), -1)
    total = status.shape[1]
    rows = []
    for name, s in zip(names, status):
        counts = np.bincount(s, minlength=3)
        row = {"camera": name, "points": int(total)}
        for code, label in enumerate(STATUS_NAMES):
            row[label] = int(counts[code])
        for code, label in enumerate(STATUS_NAMES):
            row[f"{label} %"] = round(100.0 * counts[code] / max(total, 1), 2)
        rows.append(row)
    return rows


def behind_camera_uv(proj: Projection, eps: float = 1e-5) -> np.ndarray:
    """Where points behind a camera would land if the depth test were forgotten.

    :func:`bevviz.projection.project_points` divides by ``max(depth, eps)`` (as BEVFormer
    does), which throws points behind the camera far off the image. Dividing by the true
    (negative) depth instead mirrors them through the optical centre back *into* the image
    — the classic ghost of a missing ``depth > 0`` check.

    Args:
        proj: A projection (uv (N_cam, *P, 2), depth (N_cam, *P)).
        eps: The eps the projection used.

    Returns:
        Naive pixel coordinates ``K p_cam / depth``, shape (N_cam, *P, 2); NaN where the
        depth is zero.
    """
    uv = to_numpy(proj.uv).astype(np.float64)
    depth = to_numpy(proj.depth).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        naive = uv * (np.maximum(depth, eps) / depth)[..., None]
    naive[depth == 0] = np.nan
    return naive


# --------------------------------------------------------------------------------------
# Camera geometry in the ego frame and in the image
# --------------------------------------------------------------------------------------


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
    rays = np.concatenate([uv, np.ones(uv.shape[:-1] + (1,))], axis=-1) @ np.linalg.inv(camera.K).T
    p_cam = rays * np.asarray(depth, dtype=np.float64)[..., None]
    T = camera.ego_from_cam
    return p_cam @ T[:3, :3].T + T[:3, 3]


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
    return clip_line_to_box(line, -0.5, -0.5, camera.width - 0.5, camera.height - 0.5)


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


# --------------------------------------------------------------------------------------
# BEV grid: points, a picked cell, footprints and overlaps
# --------------------------------------------------------------------------------------


def grid_projection(rig: Rig, grid: BEVGrid, eps: float = 1e-5, bounds: str = "pixel",
                    dtype: torch.dtype = torch.float32) -> Projection:
    """Project every reference point of ``grid`` into every camera.

    Returns:
        :class:`bevviz.projection.Projection` with fields of shape (N_cam, Z, H_bev, W_bev).
    """
    return project_points(grid.points(dtype), rig, eps=eps, bounds=bounds, dtype=dtype)


def cell_center(grid: BEVGrid, row: int, col: int) -> tuple[float, float]:
    """Ego (x, y) of the centre of cell (row, col)."""
    if not (0 <= row < grid.height and 0 <= col < grid.width):
        raise field_error("BEV cell", (row, col), f"outside the {grid.height} x {grid.width} grid")
    res = grid.resolution
    return grid.x_range[1] - (row + 0.5) * res, grid.y_range[1] - (col + 0.5) * res


def cell_report(rig: Rig, grid: BEVGrid, row: int, col: int, eps: float = 1e-5,
                bounds: str = "pixel") -> list[dict]:
    """Where every pillar point of BEV cell (row, col) lands in every camera, and why not.

    Returns:
        One dict per (camera, pillar height) in rig order: ``camera``, ``x``, ``y``, ``z``,
        ``u``, ``v``, ``depth`` and ``status`` (``"valid"``, ``"behind"`` or ``"outside"``).
    """
    x, y = cell_center(grid, row, col)
    pts = np.array([[x, y, z] for z in grid.z_values])  # (Z, 3)
    proj = project_points(pts, rig, eps=eps, bounds=bounds)
    status = point_status(proj)
    uv, depth = to_numpy(proj.uv), to_numpy(proj.depth)
    rows = []
    for c, name in enumerate(rig.names):
        for k, z in enumerate(grid.z_values):
            rows.append({
                "camera": name, "x": round(x, 3), "y": round(y, 3), "z": round(z, 3),
                "u": float(uv[c, k, 0]), "v": float(uv[c, k, 1]), "depth": float(depth[c, k]),
                "status": STATUS_NAMES[status[c, k]],
            })
    return rows


def footprints(proj: Projection) -> np.ndarray:
    """Per-camera BEV footprints: a cell is covered when any of its pillar points is valid.

    Args:
        proj: Projection of a grid's points, fields of shape (N_cam, Z, H_bev, W_bev).

    Returns:
        Shape (N_cam, H_bev, W_bev), bool.
    """
    valid = to_numpy(proj.valid).astype(bool)
    if valid.ndim != 4:
        raise field_error("projection", valid.shape, "expected valid of shape (N_cam, Z, H_bev, W_bev)")
    return valid.any(axis=1)


def overlap_count(footprint: np.ndarray) -> np.ndarray:
    """How many cameras see each BEV cell (0 = blind spot, 2+ = seam), shape (H_bev, W_bev)."""
    return np.asarray(footprint).astype(np.int32).sum(axis=0)


def overlap_summary(count: np.ndarray) -> dict[str, float]:
    """Shares (in %) of BEV cells seen by 0, exactly 1 and 2+ cameras."""
    n = max(count.size, 1)
    return {"blind %": 100.0 * float((count == 0).sum()) / n,
            "single %": 100.0 * float((count == 1).sum()) / n,
            "seam %": 100.0 * float((count >= 2).sum()) / n}


@dataclass(frozen=True)
class ValidityComparison:
    """Footprints under two validity settings (eps, bounds) and where they differ.

    Attributes:
        a, b: Footprints under settings A and B, shape (N_cam, H_bev, W_bev), bool.
        differs: Cells where any camera's validity differs for any pillar point,
            shape (H_bev, W_bev), bool.
        points_differ: Per camera, the number of reference points whose validity differs,
            shape (N_cam,).
    """

    a: np.ndarray
    b: np.ndarray
    differs: np.ndarray
    points_differ: np.ndarray

    @property
    def seen(self) -> np.ndarray:
        """Cells some camera sees under A or B, shape (H_bev, W_bev), bool."""
        return self.a.any(axis=0) | self.b.any(axis=0)

    @property
    def cells_differ(self) -> np.ndarray:
        """Per camera, the number of cells whose footprint membership differs, (N_cam,)."""
        return (self.a != self.b).reshape(self.a.shape[0], -1).sum(axis=1)


def compare_validity(rig: Rig, grid: BEVGrid, setting_a: tuple[float, str],
                     setting_b: tuple[float, str]) -> ValidityComparison:
    """Compare validity under two (eps, bounds) settings, e.g. pixel-centre bounds vs
    BEVFormer's strict 0 < u/W < 1.

    Args:
        rig: The cameras.
        grid: The BEV grid.
        setting_a: (eps, bounds) of setting A.
        setting_b: (eps, bounds) of setting B.
    """
    pa = grid_projection(rig, grid, eps=setting_a[0], bounds=setting_a[1])
    pb = grid_projection(rig, grid, eps=setting_b[0], bounds=setting_b[1])
    va, vb = to_numpy(pa.valid).astype(bool), to_numpy(pb.valid).astype(bool)
    diff = va != vb  # (N, Z, H, W)
    return ValidityComparison(a=va.any(1), b=vb.any(1), differs=diff.any(axis=(0, 1)),
                              points_differ=diff.reshape(diff.shape[0], -1).sum(1))


def disagreement(maps: dict[str, np.ndarray], reference: str | None = None) -> np.ndarray:
    """Largest absolute difference between any of several BEV maps, per cell.

    Args:
        maps: Name -> map of shape (C, H_bev, W_bev) (all the same shape).
        reference: When given, compare every map with this one only; otherwise all pairs.

    Returns:
        Shape (H_bev, W_bev): max over channels and pairs of |m_i - m_j|.
    """
    arrays = {k: to_numpy(v).astype(np.float64) for k, v in maps.items()}
    keys = list(arrays)
    if reference is not None:
        pairs = [(reference, k) for k in keys if k != reference]
    else:
        pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
    first = arrays[keys[0]]
    out = np.zeros(first.shape[-2:])
    for a, b in pairs:
        out = np.maximum(out, np.abs(arrays[a] - arrays[b]).max(axis=0))
    return out


def error_table(maps: dict[str, np.ndarray], reference: str) -> list[dict]:
    """Max and mean |map - reference| for every map (the reference's own row is zero).

    Args:
        maps: Name -> array (all the same shape).
        reference: Key of the reference map.

    Returns:
        One dict per map, in ``maps`` order: ``name``, ``max |diff|``, ``mean |diff|``.
    """
    ref = to_numpy(maps[reference]).astype(np.float64)
    rows = []
    for name, m in maps.items():
        d = np.abs(to_numpy(m).astype(np.float64) - ref)
        rows.append({"name": name, "max |diff|": float(d.max()) if d.size else 0.0,
                     "mean |diff|": float(d.mean()) if d.size else 0.0})
    return rows


def channel_view(features: np.ndarray | torch.Tensor, view: str | int) -> np.ndarray:
    """Reduce a BEV feature map to something to display.

    Args:
        features: Shape (C, H, W).
        view: ``"rgb"`` (the first three channels as an image; needs C >= 3), ``"norm"`` (the
            L2 norm over channels) or a channel index.

    Returns:
        Shape (H, W, 3) for ``"rgb"``, else (H, W); float64.
    """
    f = to_numpy(features).astype(np.float64)
    check_shape(f, (None, None, None), "features")
    if view == "rgb":
        if f.shape[0] < 3:
            raise field_error("view", view, f"an RGB view needs 3 channels, the features have {f.shape[0]}")
        return np.moveaxis(f[:3], 0, -1)
    if view == "norm":
        return np.sqrt((f ** 2).sum(0))
    c = int(view)
    if not 0 <= c < f.shape[0]:
        raise field_error("channel", view, f"must be in [0, {f.shape[0] - 1}]")
    return f[c]


def subsample_indices(mask: np.ndarray, max_points: int, seed: int = 0) -> np.ndarray:
    """Flat indices of at most ``max_points`` True entries of ``mask``, in a seeded random
    order, so that every prefix is itself an even sample (``idx[:n]`` for any ``n``).

    Deterministic for a given mask and seed, so overlays do not flicker between reruns.
    """
    idx = np.flatnonzero(np.asarray(mask))
    order = np.random.default_rng(seed).permutation(idx.size)[:max_points]
    return idx[order]


# --------------------------------------------------------------------------------------
# Padding lab
# --------------------------------------------------------------------------------------


def test_pattern(height: int = 24, width: int = 32) -> torch.Tensor:
    """A feature map whose borders are easy to read: a horizontal ramp (channel 0), a
    vertical ramp (channel 1) and a checkerboard of 4-pixel squares (channel 2).

    Along a row, zero padding drops to 0 past the border, border padding stays at the edge
    value, and reflection runs the ramp back down.

    Returns:
        Shape (1, 3, height, width), float32, values in [0, 1].
    """
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    chans = np.stack([(u + 0.5) / width, (v + 0.5) / height,
                      0.15 + 0.7 * ((u // 4 + v // 4) % 2)])
    return torch.as_tensor(chans[None], dtype=torch.float32)


def margin_grid(out_height: int, out_width: int, margin: float,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A regular sampling grid that covers the input and reaches ``margin`` past every border.

    Args:
        out_height: Rows of the output.
        out_width: Columns of the output.
        margin: How far past the borders, as a fraction of the normalised half-extent
            (0.25 reaches to +-1.25).

    Returns:
        Grid, shape (1, out_height, out_width, 2), (x, y) in normalised coordinates as
        ``grid_sample`` reads them.
    """
    if not (np.isfinite(margin) and margin >= 0):
        raise field_error("margin", margin, "must be finite and >= 0")
    lim = 1.0 + float(margin)
    gx = torch.linspace(-lim, lim, out_width, dtype=dtype)
    gy = torch.linspace(-lim, lim, out_height, dtype=dtype)
    yy, xx = torch.meshgrid(gy, gx, indexing="ij")
    return torch.stack([xx, yy], dim=-1)[None]


def margin_grid_pixels(out_height: int, out_width: int, margin: float, height: int, width: int,
                       align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """Where the columns and rows of :func:`margin_grid` sample, in input pixels.

    Returns:
        ``(u, v)``: input pixel coordinates of the output columns, shape (out_width,), and
        rows, shape (out_height,), under ``align_corners``.
    """
    from bevviz.samplers.reference import normalized_to_pixel

    g = margin_grid(out_height, out_width, margin, dtype=torch.float64)[0]  # (H_out, W_out, 2)
    uv = normalized_to_pixel(g, (width, height), align_corners=align_corners)
    return to_numpy(uv[0, :, 0]), to_numpy(uv[:, 0, 1])


def pixel_grid(height: int, width: int, align_corners: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The identity grid: every pixel centre (u, v) of a (height, width) map, normalised with
    the ``align_corners`` formula of :func:`bevviz.samplers.reference.pixel_to_normalized`.

    Returns:
        Shape (1, height, width, 2).
    """
    from bevviz.samplers.reference import pixel_to_normalized

    v, u = torch.meshgrid(torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64),
                          indexing="ij")
    return pixel_to_normalized(torch.stack([u, v], dim=-1), (width, height), align_corners)[None].to(dtype)


@dataclass(frozen=True)
class PaddingCase:
    """One (mode, padding, align_corners) combination run through two samplers.

    Attributes:
        mode, padding, align_corners: The setting.
        reference: Output of the reference sampler, shape (C, H_out, W_out).
        candidate: Output of the sampler under test, same shape.
        max_error: max |candidate - reference|.
    """

    mode: str
    padding: str
    align_corners: bool
    reference: np.ndarray
    candidate: np.ndarray
    max_error: float


def padding_cases(feature: torch.Tensor, grid: torch.Tensor, reference_fn, candidate_fn,
                  modes=("bilinear", "nearest"), paddings=("zeros", "border", "reflection"),
                  aligns=(False, True)) -> list[PaddingCase]:
    """Run both samplers over every mode x padding x align_corners combination.

    Args:
        feature: Input, shape (1, C, H, W).
        grid: Sampling grid, shape (1, H_out, W_out, 2).
        reference_fn: ``grid_sample``-like callable (the reference).
        candidate_fn: ``grid_sample``-like callable under test (e.g. gather-scatter).

    Returns:
        One :class:`PaddingCase` per combination.
    """
    check_shape(feature, (1, None, None, None), "feature")
    check_shape(grid, (1, None, None, 2), "grid")
    cases = []
    for mode in modes:
        for padding in paddings:
            for ac in aligns:
                kw = dict(mode=mode, padding_mode=padding, align_corners=ac)
                ref = to_numpy(reference_fn(feature, grid, **kw))[0]
                cand = to_numpy(candidate_fn(feature, grid, **kw))[0]
                cases.append(PaddingCase(mode, padding, ac, ref, cand,
                                         float(np.abs(cand.astype(np.float64) - ref).max())))
    return cases


def half_pixel_mismatch(feature: torch.Tensor, sample_fn, normalise_align: bool,
                        sample_align: bool) -> np.ndarray:
    """Sample a map at its own pixel centres, normalised with one formula and sampled with another.

    With matching settings the output equals the input; with a mismatch every sample
    lands up to half a pixel off (shifted towards the centre or away from it), which
    blurs and shrinks or grows the image.

    Args:
        feature: Shape (1, C, H, W).
        sample_fn: ``grid_sample``-like callable.
        normalise_align: ``align_corners`` of the formula used to build the grid.
        sample_align: ``align_corners`` the sampler is called with.

    Returns:
        Shape (C, H, W).
    """
    check_shape(feature, (1, None, None, None), "feature")
    H, W = feature.shape[-2:]
    grid = pixel_grid(H, W, normalise_align, dtype=feature.dtype)
    return to_numpy(sample_fn(feature, grid, mode="bilinear", padding_mode="zeros", align_corners=sample_align))[0]


# --------------------------------------------------------------------------------------


def to_numpy(x) -> np.ndarray:
    """A tensor (detached, on the CPU) or array-like as a numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
