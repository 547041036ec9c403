"""LiDAR edge points: depth discontinuities and reflectivity jumps, where a camera sees an edge too.

The doctor finds them per camera, in the camera's own view (:func:`view_edges`), so it needs
no ring index and no point order (a merged multi-LiDAR cloud has neither) and no dataset
constant: every pixel scale is an angle times the camera's focal length, intensity is used
through its per-scan ranks (:func:`intensity_ranks`: 0..255, 0..1 or raw counts alike; an
(N, 3) array has none, then depth edges alone count). The projected points are linked to
their nearest neighbour along the image row and along the column, and two kinds of jumps
are looked for:

* *depth edges*: the inverse depth jumps by more than ``DEPTH_JUMP_INV_REL`` of the nearer
  point's beyond the straight continuation of both sides (inverse depth is affine in the
  pixel on any plane, so the ground and walls make none however steeply their depth
  changes), between two sides that are smooth themselves (``SIDE_SHARE``: foliage, where
  every step jumps, makes none). The edge lies at the image midpoint of the link (a 32-beam
  ring sits up to a ring spacing inside an object) at the nearer point's depth.
* *reflectivity edges*, along rows only (the scan direction of a spinning LiDAR; other
  directions mix rings of different gains): the per-scan intensity ranks jump by more than
  ``RANK_JUMP`` on one surface, between two steady sides: lane markings, kerbs, signs.

Each edge carries its link's orientation (row or column): it is scored on the image
gradients across that link (:func:`bevviz.calibration.lidar.edge_maps.oriented_attraction_maps`).

:func:`lidar_edges` finds the same two kinds along the rings of a scan that carries a ring
index (a spinning LiDAR's own scan lines, as a nuScenes ``.bin`` stores them; a ring whose
points are not stored in scan order is put in azimuth order, :func:`in_scan_order`). The
doctor scores a camera on them where its own view holds too few edges for a verdict
(:data:`bevviz.calibration.lidar.alignment.MIN_VERDICT_POINTS`): a sparse LiDAR, where they
are the stronger witness (docs/calibration.md, tuning table). Their intensities are read on
one reference scale (``REFERENCE_*``), so any unit is read alike. A scan without a ring index
gets its lines from its firing order or its elevations
(:func:`bevviz.calibration.lidar.rings.scan_lines`).

Convention:
    Ego frame x forward, y left, z up, metres, at the scan's keyframe time; camera RDF,
    depth along the optical axis; pixels at centres. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bevviz.calibration.lidar.masks import in_mask
from bevviz.camera import Camera
from bevviz.checks import check_shape, field_error
from bevviz.lidar import MIN_RANGE_M, LidarScan
from bevviz.projection import inside_image, rays_of

__all__ = [
    "DEPTH",
    "DEPTH_JUMP_M",
    "DEPTH_JUMP_REL",
    "MAX_GAP_DEG",
    "MIN_ORDERED_SHARE",
    "MIN_RANGE_M",
    "REFLECTIVITY",
    "REFLECTIVITY_LOG_JUMP",
    "LidarEdges",
    "in_scan_order",
    "intensity_ranks",
    "return_ranks",
    "lidar_edges",
    "view_axes",
    "view_edges",
]

#: Edge kinds.
DEPTH, REFLECTIVITY = 0, 1
#: Smallest depth jump (metres) that makes an edge ...
DEPTH_JUMP_M = 0.3
#: ... or, for far points, this fraction of the range, whichever is larger.
DEPTH_JUMP_REL = 0.05
#: Ring edges read intensities on one reference scale whatever the scan's unit
#: (:func:`_log_intensity`): a log-normal of this median and spread in ``log(1 + i)`` (a
#: 0..255 scan of the embedded real keyframe: median 12, interquartile range 1.31, i.e.
#: 0.97 as a normal's spread). A linear unit is rescaled to the median; a scan whose spread then differs
#: from the reference's by more than ``LINEAR_SPREAD_RATIO`` (a logarithmic or gamma-encoded
#: unit) has each return's per-scan rank mapped onto the reference instead.
REFERENCE_MEDIAN_INTENSITY = 12.0
REFERENCE_LOG_SPREAD = 0.97
LINEAR_SPREAD_RATIO = 1.5
#: Interquartile range of a normal distribution in units of its spread.
IQR_PER_SPREAD = 1.349
#: Smallest jump of ``log(1 + intensity)`` (rescaled) for a reflectivity edge (a factor of ~1.65).
REFLECTIVITY_LOG_JUMP = 0.5
#: Brighter side of a reflectivity edge at least this (rescaled) intensity: 0.8 x the scan's
#: median (dark noise is not an edge).
MIN_REFLECTIVITY = 10.0
#: Largest depth change (metres, or 2 % of the range) between the two points of a
#: reflectivity edge: both lie on one surface.
SAME_SURFACE_M = 0.2
#: Ring neighbours further apart than this in azimuth are not compared.
MAX_GAP_DEG = 1.0
#: A ring whose stored neighbours lie within ``MAX_GAP_DEG`` of each other for fewer than this
#: share of its points is not stored in scan order (a cloud cropped, merged or re-sorted after
#: the ring index was written): its points are put in azimuth order first.
MIN_ORDERED_SHARE = 0.5
#: View edges (:func:`view_edges`), every pixel scale an angle (radians; pixels = angle *
#: focal length): how far a neighbour along a row (``VIEW_STEP_RAD``, 1.1 deg) or a column
#: (``VIEW_STEP_V_RAD``, 2 deg: the ring spacing of a 32-beam LiDAR) may lie, and within
#: ``ROW_SLOPE * step + ROW_TOL_RAD * f`` across.
VIEW_STEP_RAD = 0.019
VIEW_STEP_V_RAD = 0.035
ROW_SLOPE = 0.35
ROW_TOL_RAD = 0.0012
#: Depth edge: the inverse depth jumps by this share of the nearer point's beyond the
#: straight continuation of either side (a 1 : 1.11 depth step off any plane).
DEPTH_JUMP_INV_REL = 0.1
#: Either side of an edge changes by less than this share of the jump to its outer
#: neighbour (foliage, where every step jumps, makes no edges).
SIDE_SHARE = 0.5
#: Reflectivity edge, on one surface (unexplained inverse-depth step below
#: ``SAME_SURFACE_INV_REL``): the per-scan intensity ranks of the two points differ by more
#: than ``RANK_JUMP``, and each side's outer neighbour changes by less than ``SIDE_SHARE`` of
#: that (paint, a sign, a number plate against their surroundings).
RANK_JUMP = 0.4
SAME_SURFACE_INV_REL = 0.03
#: Fewest distinct intensity values for reflectivity edges (fewer: depth edges alone).
MIN_INTENSITY_LEVELS = 8
#: Nearest camera depth (metres) of a point linked in a view.
MIN_VIEW_DEPTH_M = 1.0


@dataclass(frozen=True)
class LidarEdges:
    """Edge points of one scan.

    Attributes:
        points: Edge positions in the ego frame at the scan's keyframe time, (M, 3) float64.
        kind: :data:`DEPTH` or :data:`REFLECTIVITY` per point, (M,) int8.
        camera: The camera whose view found them (:func:`view_edges`), or None (rings).
        orient: (M,) int8: 0 for an edge found between two points along an image row or a
            ring (it crosses rows: scored on horizontal gradients), 1 along a column
            (vertical gradients). All 0 for ring edges (a camera mounted a quarter turn on
            its side scores them on its columns: :class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`).
    """

    points: np.ndarray
    kind: np.ndarray
    camera: str | None = None
    orient: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.orient is None:
            object.__setattr__(self, "orient", np.zeros(len(self.kind), dtype=np.int8))

    def __len__(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_depth(self) -> int:
        """Number of depth edges."""
        return int(np.count_nonzero(self.kind == DEPTH))

    @property
    def n_reflectivity(self) -> int:
        """Number of reflectivity edges."""
        return int(np.count_nonzero(self.kind == REFLECTIVITY))


def _azimuth_steps(az: np.ndarray) -> np.ndarray:
    """Signed azimuth step (radians, in [-pi, pi)) from each point of a ring to the next, (n - 1,)."""
    return (np.diff(az) + np.pi) % (2 * np.pi) - np.pi


def in_scan_order(p: np.ndarray) -> np.ndarray:
    """Indices putting one ring's points in scan order, (n,) int64: the stored order when
    consecutive points are neighbours in azimuth (``MIN_ORDERED_SHARE`` of them within
    ``MAX_GAP_DEG``: a spinning LiDAR's firing order, kept as it is), else azimuth order.

    Args:
        p: The ring's points relative to the scan's origin, (n, 3).

    Convention:
        Azimuth ``atan2(y, x)`` about the origin's z axis (ego frame).
    """
    az = np.arctan2(p[:, 1], p[:, 0])
    if len(az) < 2 or np.mean(np.abs(_azimuth_steps(az)) < np.radians(MAX_GAP_DEG)) >= MIN_ORDERED_SHARE:
        return np.arange(len(az))
    return np.argsort(az, kind="stable")


def _ring_edges(p: np.ndarray, r: np.ndarray, log_i: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Edges of one ring given in scan order: positions relative to the origin and kinds."""
    az = np.arctan2(p[:, 1], p[:, 0])
    step = _azimuth_steps(az)  # signed azimuth step to the next point
    ok = np.abs(step) < np.radians(MAX_GAP_DEG)
    dr = np.diff(r)
    out, kinds = [], []
    rho = np.hypot(p[:, 0], p[:, 1])
    # Depth edges: point i in front of i + 1 (dr > 0) or in front of i - 1 (dr < 0).
    for fg_off, sign in ((0, 1.0), (1, -1.0)):
        jump = sign * dr
        fg = np.arange(len(dr)) + fg_off
        m = ok & (jump > np.maximum(DEPTH_JUMP_M, DEPTH_JUMP_REL * r[fg]))
        f = fg[m]
        a = az[f] + 0.5 * sign * step[m]  # half a step towards the background point
        pos = np.stack([rho[f] * np.cos(a), rho[f] * np.sin(a), p[f, 2]], axis=1)
        out.append(pos)
        kinds.append(np.full(len(f), DEPTH, dtype=np.int8))
    di = np.diff(log_i)
    brighter = np.maximum(log_i[1:], log_i[:-1])
    m = (ok & (np.abs(di) > REFLECTIVITY_LOG_JUMP) & (brighter > np.log1p(MIN_REFLECTIVITY))
         & (np.abs(dr) < np.maximum(SAME_SURFACE_M, 0.02 * r[1:])))
    k = np.flatnonzero(m)
    out.append(0.5 * (p[k] + p[k + 1]))
    kinds.append(np.full(len(k), REFLECTIVITY, dtype=np.int8))
    return out, kinds


def lidar_edges(scan: LidarScan, lines: np.ndarray | None = None) -> LidarEdges:
    """Depth and reflectivity edge points of a scan, ring by ring (see the module docstring).

    Args:
        scan: The scan (:class:`bevviz.lidar.LidarScan`); each (sweep, ring) is one scan line,
            its points in the scan's stored order (the firing order of a nuScenes ``.bin``),
            or in azimuth order where the stored order is none (:func:`in_scan_order`).
        lines: Each point's ring, (N,) integers, -1 for a point on none
            (:func:`bevviz.calibration.lidar.rings.scan_lines`); default the scan's ``ring``.

    Returns:
        :class:`LidarEdges` in the ego frame at the scan's keyframe time.

    Raises:
        ValueError: naming ``ring`` when the scan has none and no ``lines`` are given (use
            :func:`view_edges`), or ``lines`` when they are not one integer per point.

    Convention:
        Ranges and azimuths from ``scan.origin`` in the ego frame. See docs/conventions.md.
    """
    if lines is None:
        if scan.ring is None:
            raise field_error("ring", None, "the scan has no ring index; scan it per camera with view_edges")
        lines = scan.ring
    lines = np.asarray(lines)
    check_shape(lines, (len(scan),), "lines")
    if lines.dtype.kind not in "iu":
        raise field_error("lines", lines.dtype, "must be integers (a point's ring, -1 for none)")
    xyz = scan.xyz.astype(np.float64) - scan.origin
    r = np.linalg.norm(xyz, axis=1)
    keep = scan.returns(MIN_RANGE_M) & (lines >= 0)
    ring = lines[keep].astype(np.int64)
    xyz, r = xyz[keep], r[keep]
    log_i = _log_intensity(scan.intensity[keep])
    sweep = scan.sweep[keep].astype(np.int64)
    line = sweep * (int(ring.max()) + 1 if len(ring) else 1) + ring
    order = np.argsort(line, kind="stable")
    pos: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    bounds = np.flatnonzero(np.diff(line[order])) + 1
    for idx in np.split(order, bounds):
        if len(idx) < 3:
            continue
        idx = idx[in_scan_order(xyz[idx])]
        a, b = _ring_edges(xyz[idx], r[idx], log_i[idx])
        pos += a
        kinds += b
    if not pos:
        return LidarEdges(np.zeros((0, 3)), np.zeros(0, dtype=np.int8))
    return LidarEdges(np.concatenate(pos) + scan.origin, np.concatenate(kinds))


def _log_intensity(intensity: np.ndarray) -> np.ndarray:
    """The intensities on the reference scale (``REFERENCE_MEDIAN_INTENSITY``,
    ``REFERENCE_LOG_SPREAD``) as ``log(1 + i)``, (N,) float64.

    A linear unit (0..255, 0..1, raw counts) is rescaled to the reference median: its spread
    in ``log(1 + i)`` is then the reference's within ``LINEAR_SPREAD_RATIO`` (the reference
    scan reads exactly as it is). Any other unit (logarithmic, gamma-encoded) is read
    through its per-scan ranks: the reference's ``log(1 + i)`` at each return's rank. All
    zeros when the scan carries no usable intensity (an (N, 3) array): then no reflectivity
    edge is found.
    """
    ranks = intensity_ranks(intensity)
    if ranks is None:
        return np.zeros(len(intensity))
    vals = np.maximum(np.asarray(intensity, dtype=np.float64), 0.0)
    lit = vals > 0
    if lit.any():
        # rounded to 1e-4 of the reference scale (float32 0..1 values are off by 1e-5 of it): an
        # integer-quantised unit read as 0..1 lands on the thresholds' integers as 0..255 does
        linear = np.log1p(np.round(vals * (REFERENCE_MEDIAN_INTENSITY / float(np.median(vals[lit]))), 4))
        q1, q3 = np.percentile(linear[lit], [25, 75])
        if abs(np.log((q3 - q1) / IQR_PER_SPREAD / REFERENCE_LOG_SPREAD)) < np.log(LINEAR_SPREAD_RATIO):
            return linear
    n = len(ranks)
    p = torch.from_numpy(ranks * ((n - 1) / n) + 0.5 / n)  # strictly inside (0, 1)
    return np.log1p(REFERENCE_MEDIAN_INTENSITY) + REFERENCE_LOG_SPREAD * torch.special.ndtri(p).numpy()


def intensity_ranks(intensity: np.ndarray) -> np.ndarray | None:
    """Per-scan ranks of the intensities in [0, 1], (N,) float64; None when the scan carries
    no usable intensity (fewer than ``MIN_INTENSITY_LEVELS`` distinct values, e.g. an (N, 3)
    array stored as zeros): then depth edges alone are used.

    Ranks make any scale the same (0..255, 0..1, raw counts): a lane marking is among the
    brightest few percent of a scan whatever the unit.
    """
    vals = np.asarray(intensity, dtype=np.float64)
    if len(vals) == 0 or len(np.unique(vals[: min(len(vals), 20000)])) < MIN_INTENSITY_LEVELS:
        return None
    order = np.argsort(vals, kind="stable")
    ranks = np.empty(len(vals))
    ranks[order] = np.arange(len(vals)) / max(len(vals) - 1, 1)
    # equal values share their mean rank (a scan quantised to a few levels has no fake steps)
    uniq, inverse = np.unique(vals, return_inverse=True)
    return (np.bincount(inverse, ranks) / np.bincount(inverse))[inverse]


def return_ranks(scan: LidarScan) -> np.ndarray | None:
    """:func:`intensity_ranks` among the scan's returns only (:meth:`LidarScan.returns`), (N,)
    float64 (NaN for the points within ``MIN_RANGE_M`` of the LiDAR or on a stack of
    no-returns, which no edge uses); None when the returns carry no usable intensity.

    An organised cloud (a range image flattened: Ouster, Waymo) stores its no-returns as
    points at the sensor with intensity 0. Ranked with the returns, a third of the scan at
    the bottom squeezes every real return's rank into the top two thirds, and the rank jumps
    of lane markings and signs fall under ``RANK_JUMP`` (docs/calibration.md, tuning
    table: half the faults went unnamed). Where the scan does not know where its
    sensor is (a frame folder's origin is the ego origin), the no-returns still sit on one
    position, a stack, and are left out as well.
    """
    far = scan.returns(MIN_RANGE_M)
    ranks = intensity_ranks(scan.intensity[far])
    if ranks is None:
        return None
    out = np.full(len(far), np.nan)
    out[far] = ranks
    return out


def _next_neighbours(along: np.ndarray, across: np.ndarray, max_step: float, tol: float) -> np.ndarray:
    """Index of each point's nearest neighbour further along one image axis, or -1, (M,).

    A neighbour lies ``0 < d_along <= max_step`` further and within ``ROW_SLOPE * d_along +
    tol`` across (a scan line is a gently sloping curve in the image), in the point's own band
    of ``max_step`` across or a band either side.

    The points are sorted by (band, along); each point walks its three bands forward from its
    own position and stops at the first candidate inside the cone (the nearest one in that
    band): the work grows with the points, not with how densely they crowd (a merged or
    high-resolution cloud).
    """
    m = len(along)
    out = np.full(m, -1, dtype=np.int64)
    if m < 2:
        return out
    along = np.asarray(along, dtype=np.float64)
    across = np.asarray(across, dtype=np.float64)
    band = np.floor(across / max_step)
    base = along - along.min()
    span = float(base.max()) + 2.0 * max_step + 1.0  # one band's stretch of the sort key
    order = np.lexsort((along, band))
    key = (band * span + base)[order]
    best = np.full(m, np.inf)
    for dband in (-1.0, 0.0, 1.0):
        target = (band + dband) * span
        start = np.searchsorted(key, target + base, side="right")  # first one strictly further
        stop = np.searchsorted(key, target + base + max_step, side="right")
        src = np.flatnonzero(stop > start)
        k = 0
        while len(src):
            j = order[start[src] + k]
            da = along[j] - along[src]
            found = (da > 0) & (da <= max_step) & (np.abs(across[j] - across[src]) <= ROW_SLOPE * da + tol)
            better = found & (da < best[src])
            best[src[better]] = da[better]
            out[src[better]] = j[better]
            k += 1
            src = src[~found & (start[src] + k < stop[src])]
    return out


def _unexplained_jump(w: np.ndarray, along: np.ndarray, a: np.ndarray, b: np.ndarray,
                      prev: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse-depth jump from ``a`` to ``b`` that no plane through either side explains.

    Inverse depth is an affine function of the pixel on any plane (the ground, a wall), so
    the jump is compared with the straight continuation of the point before ``a`` and of the
    point after ``b``; the smaller residual counts (an edge must surprise both sides).

    Returns:
        ``(rel, clean)``: (L,) relative residual ``|residual| / max(w_a, w_b)`` (about the
        depth ratio step), and (L,) bool: both sides exist and each changes by less than
        ``SIDE_SHARE`` of the jump from its outer neighbour (a silhouette between two
        smooth surfaces, not foliage where every step jumps).
    """
    jump = w[b] - w[a]
    da = along[b] - along[a]
    res, clean = [], np.ones(len(a), dtype=bool)
    for near, far in ((a, prev[a]), (b, nxt[b])):
        has = far >= 0
        f = np.where(has, far, near)
        step = along[near] - along[f]
        slope = np.where(has & (np.abs(step) > 1e-9), (w[near] - w[f]) / np.where(np.abs(step) > 1e-9, step, 1.0), 0.0)
        res.append(np.abs(jump - slope * da))
        clean &= has & (np.abs(w[near] - w[f]) < SIDE_SHARE * np.abs(jump))
    return np.minimum(res[0], res[1]) / np.maximum(np.maximum(w[a], w[b]), 1e-12), clean


def view_axes(camera: Camera) -> np.ndarray:
    """The image directions of the view's right and down (the world's horizontal and vertical),
    snapped to the image axes, (2, 2) float64: rows ``right``, ``down``.

    For a camera mounted upright they are the image's own axes, ``[[1, 0], [0, 1]]``; upside
    down ``[[-1, 0], [0, -1]]``; turned a quarter on its mount (portrait images,
    ``np.rot90``) ``[[0, -1], [1, 0]]``. Everything that needs the LiDAR's scan direction
    (its rows run along the world's horizontal) asks here instead of assuming image rows.

    Convention:
        Camera RDF, pixel axes (u right, v down); world up is ego +z, whose image direction
        is ``cam_from_ego[:2, 2]``.
    """
    up_x, up_y = camera.cam_from_ego[0, 2], camera.cam_from_ego[1, 2]
    if abs(up_y) >= abs(up_x):
        down = (0.0, 1.0 if up_y <= 0 else -1.0)
    else:
        down = (1.0 if up_x < 0 else -1.0, 0.0)
    return np.array([[down[1], -down[0]], down])


def view_edges(scan: LidarScan, camera: Camera, ignore: np.ndarray | None = None,
               ranks: np.ndarray | None = None) -> LidarEdges:
    """Depth and reflectivity edges of a scan as one camera sees it (no rings or point order needed).

    The scan's points, moved to the camera's exposure (:meth:`~bevviz.lidar.LidarScan.points_at`),
    are projected; each is linked to its nearest neighbour to the right along its row (within
    ``VIEW_STEP_RAD``) and to its nearest neighbour below along its column (within
    ``VIEW_STEP_V_RAD``). Rows and columns are the *view's* (:func:`view_axes`: the world's
    horizontal and vertical), so a camera mounted on its side or upside down is read as an
    upright one. All pixel scales are angles times the focal length, so any image size and
    lens is treated alike.

    * *Depth edge* (both link directions): the inverse depth jumps by more than
      ``DEPTH_JUMP_INV_REL`` of the nearer point's, beyond what the straight continuation of
      either side predicts (:func:`_unexplained_jump`): the ground and walls, whose inverse
      depth is affine in the pixel, make no edges however steeply their depth changes. The
      edge is placed at the image midpoint of the link (the silhouette lies between the two
      returns; a ring sits up to a ring spacing inside the object) at the nearer point's depth.
    * *Reflectivity edge* (along the view's rows only, the scan direction of a spinning LiDAR; other
      directions mix rings of different gains): the per-scan intensity ranks
      (:func:`intensity_ranks`) jump by more than ``RANK_JUMP`` between two steady sides
      (``SIDE_SHARE``), on one surface (no unexplained depth step above
      ``SAME_SURFACE_INV_REL``); the edge is the link's midpoint.

    Args:
        scan: The scan (any point order).
        camera: The camera.
        ignore: Optional (H, W) bool mask at the camera's calibrated size, True where the
            image does not show the world (the car's own body): points projecting there are
            dropped.
        ranks: Precomputed :func:`return_ranks` of the scan, (N,); computed when None.

    Returns:
        :class:`LidarEdges` in the ego frame at the scan's keyframe time, with ``camera``
        set and ``orient`` the link's *image* direction: 0 (image row links) or 1 (image
        column links; the view's row links of a camera mounted a quarter turn on its side).

    Convention:
        Camera depth along the optical axis; pixels at centres. See docs/conventions.md.
    """
    exposure = scan.exposure(camera.name)
    R, t = camera.cam_from_ego[:3, :3], camera.cam_from_ego[:3, 3]
    near = scan.returns()
    pe = scan.xyz[near] @ exposure[:3, :3].T + exposure[:3, 3]
    pc = pe @ R.T + t
    z = pc[:, 2]
    uv = (pc @ camera.K.T)[:, :2] / np.maximum(z, 1e-6)[:, None]
    inside = (z > MIN_VIEW_DEPTH_M) & inside_image(uv[:, 0], uv[:, 1], camera.width, camera.height)
    if ignore is not None and inside.any():
        check_shape(ignore, (camera.height, camera.width), "ignore", camera.name)
        inside[inside] = ~in_mask(ignore, uv[inside])
    # No depth buffer before linking: it would hide the background right next to a
    # silhouette and move the link's midpoint off the edge; edges the camera cannot see are
    # dropped later (bevviz.calibration.lidar.alignment.EdgeAlignment).
    if ranks is None:
        ranks = return_ranks(scan)
    seen_ranks = None if ranks is None else ranks[near]
    idx = np.flatnonzero(inside)
    axes = view_axes(camera)
    level = uv @ axes.T  # (right, down) of the view: its rows run along the scan direction
    sideways = int(axes[0, 0] == 0)  # 1: the view's rows are image columns
    # One order whatever the storage order (a merged cloud's points tie where the sensors'
    # returns coincide, and which of two tied neighbours is linked must not depend on it).
    keys = [z[idx], level[idx, 1], level[idx, 0]]
    idx = idx[np.lexsort(keys if seen_ranks is None else [seen_ranks[idx], *keys])]
    uv, z, pc, level = uv[idx], z[idx], pc[idx], level[idx]
    w = 1.0 / z
    rank = None if seen_ranks is None else seen_ranks[idx]
    focal = 0.5 * (camera.K[0, 0] + camera.K[1, 1])
    tol = ROW_TOL_RAD * focal
    pos, kinds, orients = [], [], []
    for orient, (ax, step) in enumerate(((0, VIEW_STEP_RAD), (1, VIEW_STEP_V_RAD))):
        along, across = level[:, ax], level[:, 1 - ax]
        nxt = _next_neighbours(along, across, step * focal, tol)
        a = np.flatnonzero(nxt >= 0)
        b = nxt[a]
        prev = np.full(len(nxt), -1, dtype=np.int64)
        prev[b] = a
        rel, clean = _unexplained_jump(w, along, a, b, prev, nxt)
        m = (rel > DEPTH_JUMP_INV_REL) & clean
        fg = np.where(w[a] > w[b], a, b)[m]
        mid = 0.5 * (uv[a[m]] + uv[b[m]])
        rays = rays_of(mid, camera.K)
        pos.append(rays * z[fg, None])
        kinds.append(np.full(len(fg), DEPTH, dtype=np.int8))
        orients.append(np.full(len(fg), orient ^ sideways, dtype=np.int8))
        if orient == 0 and rank is not None:
            pa, nb = np.maximum(prev[a], 0), np.maximum(nxt[b], 0)
            step = np.abs(rank[b] - rank[a])
            steady = ((prev[a] >= 0) & (nxt[b] >= 0) & (np.abs(rank[a] - rank[pa]) < SIDE_SHARE * step)
                      & (np.abs(rank[nb] - rank[b]) < SIDE_SHARE * step))
            r = (step > RANK_JUMP) & steady & (rel < SAME_SURFACE_INV_REL)
            pos.append(0.5 * (pc[a[r]] + pc[b[r]]))
            kinds.append(np.full(int(r.sum()), REFLECTIVITY, dtype=np.int8))
            orients.append(np.full(int(r.sum()), sideways, dtype=np.int8))
    cam_pts = np.concatenate(pos)
    # back to the ego frame at the keyframe time
    ego_exp = (cam_pts - t) @ R
    ego_kf = (ego_exp - exposure[:3, 3]) @ exposure[:3, :3]
    return LidarEdges(ego_kf, np.concatenate(kinds), camera.name, np.concatenate(orients))
