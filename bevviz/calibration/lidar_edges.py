"""LiDAR edge points: depth discontinuities and reflectivity jumps along each laser ring.

A spinning LiDAR scans each ring (one laser) in azimuth order. Along a ring, two kinds of
jumps mark places where a camera sees an edge too:

* *depth edges*: a point is nearer than its ring neighbour by more than
  ``max(DEPTH_JUMP_M, DEPTH_JUMP_REL * range)``: the silhouette of a pole, a car, a
  building corner. Only the *foreground* point is kept (the background next to it may be
  hidden from the camera, which sits elsewhere), moved half an azimuth step towards the
  background point: the silhouette lies between the two returns.
* *reflectivity edges*: the log intensity changes by more than ``REFLECTIVITY_LOG_JUMP``
  between two neighbours on one surface (no depth jump): lane markings, kerbs, signs. The
  edge point is the midpoint of the pair.

Neighbours further apart than ``MAX_GAP_DEG`` in azimuth are not compared. Points nearer
than ``MIN_RANGE_M`` to the sensor (the car's own roof, no-returns stored as zeros) are
dropped first.

Rings come from the scan (nuScenes ``.bin`` column 5). A scan without them whose points are
in firing order (a plain array read from a ``.bin``: the lasers fire in turn, so a point's
ring neighbour is ``P`` points further on) gets them from that order: :func:`firing_period`
finds ``P`` as the lag at which consecutive points keep their elevation. Failing that (any
order, origin unknown), each camera scans the points in its own view (:func:`view_edges`):
the visible points are linked to their nearest neighbour to the right along the image row (a
scan line of a spinning LiDAR is a gently sloping curve in the image), and the same two
jumps are looked for with the camera's depth. Inferring rings from elevation angles does not
work there: the ego frame's origin is not the LiDAR's, and the ground, seen from z = 0,
collapses onto one false "ring".

Convention:
    Ego frame x forward, y left, z up, metres, at the scan's keyframe time; ranges and
    angles are measured from ``scan.origin``. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from bevviz.camera import Camera
from bevviz.lidar import MIN_RANGE_M, LidarScan
from bevviz.shapes import field_error

__all__ = [
    "DEPTH",
    "DEPTH_JUMP_M",
    "DEPTH_JUMP_REL",
    "MAX_GAP_DEG",
    "MIN_RANGE_M",
    "REFLECTIVITY",
    "REFLECTIVITY_LOG_JUMP",
    "LidarEdges",
    "firing_period",
    "lidar_edges",
    "view_edges",
    "with_rings",
]

#: Edge kinds.
DEPTH, REFLECTIVITY = 0, 1
#: Smallest depth jump (metres) that makes an edge ...
DEPTH_JUMP_M = 0.3
#: ... or, for far points, this fraction of the range, whichever is larger.
DEPTH_JUMP_REL = 0.05
#: Smallest jump of ``log(1 + intensity)`` for a reflectivity edge (a factor of ~1.65).
REFLECTIVITY_LOG_JUMP = 0.5
#: Brighter side of a reflectivity edge at least this intensity (dark noise is not an edge).
MIN_REFLECTIVITY = 10.0
#: Largest depth change (metres, or 2 % of the range) between the two points of a
#: reflectivity edge: both lie on one surface.
SAME_SURFACE_M = 0.2
#: Ring neighbours further apart than this in azimuth are not compared.
MAX_GAP_DEG = 1.0
#: View edges: cell (pixels at 1600 px width) of the neighbour search, and how far (pixels)
#: a right-hand neighbour may lie: at most ``MAX_STEP_PX`` along the row, and within
#: ``ROW_SLOPE * du + ROW_TOL_PX`` of it vertically.
VIEW_CELL_PX = 24.0
MAX_STEP_PX = 24.0
ROW_SLOPE = 0.35
ROW_TOL_PX = 1.5
#: Most candidates looked at per cell.
_PER_CELL = 24
#: Firing period search: lags tried, and how well a lag must keep the elevation (median
#: change in degrees, and the share of points within ``PERIOD_MATCH_DEG``).
MAX_PERIOD = 256
PERIOD_MEDIAN_DEG = 0.1
PERIOD_MATCH_DEG = 0.2
PERIOD_SHARE = 0.8


@dataclass(frozen=True)
class LidarEdges:
    """Edge points of one scan.

    Attributes:
        points: Edge positions in the ego frame at the scan's keyframe time, (M, 3) float64.
        kind: :data:`DEPTH` or :data:`REFLECTIVITY` per point, (M,) int8.
        camera: The camera whose view found them (:func:`view_edges`), or None (rings).
    """

    points: np.ndarray
    kind: np.ndarray
    camera: str | None = None

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


def _ring_edges(p: np.ndarray, r: np.ndarray, log_i: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Edges of one ring given in scan order: positions relative to the origin and kinds."""
    az = np.arctan2(p[:, 1], p[:, 0])
    step = (np.diff(az) + np.pi) % (2 * np.pi) - np.pi  # signed azimuth step to the next point
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


def lidar_edges(scan: LidarScan) -> LidarEdges:
    """Depth and reflectivity edge points of a scan, ring by ring (see the module docstring).

    Args:
        scan: The scan (:class:`bevviz.lidar.LidarScan`) with its ``ring``; each (sweep, ring)
            is one scan line, its points in the scan's stored order (the firing order of a
            nuScenes ``.bin``).

    Returns:
        :class:`LidarEdges` in the ego frame at the scan's keyframe time.

    Raises:
        ValueError: naming ``ring`` when the scan has none (use :func:`view_edges`).

    Convention:
        Ranges and azimuths from ``scan.origin`` in the ego frame. See docs/conventions.md.
    """
    if scan.ring is None:
        raise field_error("ring", None, "the scan has no ring index; scan it per camera with view_edges")
    xyz = scan.xyz.astype(np.float64) - scan.origin
    r = np.linalg.norm(xyz, axis=1)
    keep = r > MIN_RANGE_M
    ring = scan.ring[keep].astype(np.int64)
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
        a, b = _ring_edges(xyz[idx], r[idx], log_i[idx])
        pos += a
        kinds += b
    if not pos:
        return LidarEdges(np.zeros((0, 3)), np.zeros(0, dtype=np.int8))
    return LidarEdges(np.concatenate(pos) + scan.origin, np.concatenate(kinds))


def firing_period(xyz: np.ndarray, origin: np.ndarray | None = None) -> int | None:
    """The number of lasers of a spinning LiDAR whose points are stored in firing order, or None.

    Args:
        xyz: Points in storage order, (N, 3), in a frame whose z axis is roughly the LiDAR's.
        origin: Roughly the LiDAR's position in that frame, (3,); default (0, 0, 0) (only
            the elevation *changes* matter, which a wrong origin barely moves for points
            beyond a few metres).

    Returns:
        The smallest lag ``P`` (2..``MAX_PERIOD``) at which the elevation of points farther
        than 3 m changes by less than ``PERIOD_MEDIAN_DEG`` (median) with at least
        ``PERIOD_SHARE`` of them within ``PERIOD_MATCH_DEG``; None when no lag does (the
        points are not in firing order).
    """
    d = xyz.astype(np.float64) - (np.zeros(3) if origin is None else origin)
    if len(d) < 4 * MAX_PERIOD:
        return None
    elev = np.degrees(np.arctan2(d[:, 2], np.hypot(d[:, 0], d[:, 1])))
    far = np.linalg.norm(d, axis=1) > 3.0
    for lag in range(2, MAX_PERIOD + 1):
        both = far[:-lag] & far[lag:]
        if both.sum() < 100:
            continue
        change = np.abs(elev[lag:] - elev[:-lag])[both]
        if np.median(change) < PERIOD_MEDIAN_DEG and np.mean(change < PERIOD_MATCH_DEG) >= PERIOD_SHARE:
            return lag
    return None


def with_rings(scan: LidarScan) -> LidarScan:
    """The scan with rings from its firing order when it has none (see :func:`firing_period`).

    Returns the scan unchanged when it has rings or its points are not in firing order.
    """
    if scan.ring is not None or len(scan) == 0:
        return scan
    period = firing_period(scan.xyz, scan.origin)
    if period is None:
        return scan
    return dataclasses.replace(scan, ring=(np.arange(len(scan)) % period).astype(np.int16))


def _log_intensity(intensity: np.ndarray) -> np.ndarray:
    return np.log1p(np.maximum(intensity.astype(np.float64), 0.0))


def _right_neighbours(uv: np.ndarray, scale: float) -> np.ndarray:
    """Index of each point's nearest neighbour to the right along its image row, or -1, (M,)."""
    m = len(uv)
    out = np.full(m, -1, dtype=np.int64)
    if m < 2:
        return out
    cell = VIEW_CELL_PX * scale
    cx = np.floor(uv[:, 0] / cell).astype(np.int64)
    cy = np.floor(uv[:, 1] / cell).astype(np.int64)
    cy0, cx0 = cy.min() - 1, cx.min() - 1
    ncx = int(cx.max() - cx0) + 3
    key = (cy - cy0) * ncx + (cx - cx0)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    best_du = np.full(m, np.inf)
    for dcx in (0, 1):
        for dcy in (-1, 0, 1):
            target = key + dcy * ncx + dcx
            start = np.searchsorted(sk, target, side="left")
            stop = np.searchsorted(sk, target, side="right")
            for k in range(_PER_CELL):
                idx = start + k
                has = idx < stop
                if not has.any():
                    break
                j = np.where(has, order[np.minimum(idx, m - 1)], 0)
                du = uv[j, 0] - uv[:, 0]
                dv = np.abs(uv[j, 1] - uv[:, 1])
                ok = has & (du > 0) & (du <= MAX_STEP_PX * scale) & (dv <= ROW_SLOPE * du + ROW_TOL_PX * scale)
                better = ok & (du < best_du)
                best_du[better] = du[better]
                out[better] = j[better]
    return out


def view_edges(scan: LidarScan, camera: Camera) -> LidarEdges:
    """Depth and reflectivity edges of a scan as one camera sees it (no rings needed).

    The scan's points, moved to the camera's exposure (:meth:`~bevviz.lidar.LidarScan.points_at`),
    are projected and each is linked to its nearest neighbour to the right within
    ``MAX_STEP_PX`` along its row (vertically within ``ROW_SLOPE * du + ROW_TOL_PX``). A
    link is a depth edge when the camera depth jumps by ``max(DEPTH_JUMP_M, DEPTH_JUMP_REL
    * depth)`` (the nearer point's silhouette, placed half way along the link at its
    depth), a reflectivity edge under the same rules as along a ring.

    Args:
        scan: The scan (rings not needed, any point order).
        camera: The camera.

    Returns:
        :class:`LidarEdges` in the ego frame at the scan's keyframe time, with ``camera``
        set to this camera's name.

    Convention:
        Camera depth along the optical axis; pixels at centres. See docs/conventions.md.
    """
    exposure = scan.exposure(camera.name)
    R, t = camera.cam_from_ego[:3, :3], camera.cam_from_ego[:3, 3]
    xyz = scan.xyz.astype(np.float64)
    near = scan.far_from_origin()
    pe = xyz[near] @ exposure[:3, :3].T + exposure[:3, 3]
    pc = pe @ R.T + t
    z = pc[:, 2]
    uv = (pc @ camera.K.T)[:, :2] / np.maximum(z, 1e-6)[:, None]
    inside = ((z > 1.0) & (uv[:, 0] >= -0.5) & (uv[:, 0] <= camera.width - 0.5)
              & (uv[:, 1] >= -0.5) & (uv[:, 1] <= camera.height - 0.5))
    # No depth buffer before linking: it would hide the background right next to a
    # silhouette and move the link's midpoint off the edge; edges the camera cannot see are
    # dropped later, as ring edges are (bevviz.calibration.lidar.EdgeAlignment).
    idx = np.flatnonzero(inside)
    uv, z, pc = uv[idx], z[idx], pc[idx]
    log_i = _log_intensity(scan.intensity[near][idx])
    j = _right_neighbours(uv, camera.width / 1600.0)
    a = np.flatnonzero(j >= 0)
    b = j[a]
    dz = z[b] - z[a]
    pos, kinds = [], []
    for fg, sign in ((a, 1.0), (b, -1.0)):
        m = sign * dz > np.maximum(DEPTH_JUMP_M, DEPTH_JUMP_REL * z[fg])
        u_mid = 0.5 * (uv[a[m], 0] + uv[b[m], 0])
        v_fg, z_fg = uv[fg[m], 1], z[fg[m]]
        rays = np.stack([u_mid, v_fg, np.ones_like(u_mid)], axis=1) @ np.linalg.inv(camera.K).T
        pos.append(rays * z_fg[:, None])
        kinds.append(np.full(int(m.sum()), DEPTH, dtype=np.int8))
    di = log_i[b] - log_i[a]
    brighter = np.maximum(log_i[a], log_i[b])
    m = ((np.abs(di) > REFLECTIVITY_LOG_JUMP) & (brighter > np.log1p(MIN_REFLECTIVITY))
         & (np.abs(dz) < np.maximum(SAME_SURFACE_M, 0.02 * z[b])))
    pos.append(0.5 * (pc[a[m]] + pc[b[m]]))
    kinds.append(np.full(int(m.sum()), REFLECTIVITY, dtype=np.int8))
    cam_pts = np.concatenate(pos)
    # back to the ego frame at the keyframe time
    ego_exp = (cam_pts - t) @ R
    ego_kf = (ego_exp - exposure[:3, 3]) @ exposure[:3, :3]
    return LidarEdges(ego_kf, np.concatenate(kinds), camera.name)
