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

Rings come from the scan (nuScenes ``.bin`` column 5). A scan without them (a plain
array) has its rings inferred from the elevation angle seen from ``scan.origin``
(:func:`infer_rings`); that is weaker: near points are sorted into the wrong ring when the
origin is not the lidar's.

Convention:
    Ego frame x forward, y left, z up, metres, at the scan's keyframe time; ranges and
    angles are measured from ``scan.origin``. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bevviz.lidar import LidarScan

__all__ = [
    "DEPTH",
    "DEPTH_JUMP_M",
    "DEPTH_JUMP_REL",
    "MAX_GAP_DEG",
    "MIN_RANGE_M",
    "REFLECTIVITY",
    "REFLECTIVITY_LOG_JUMP",
    "LidarEdges",
    "infer_rings",
    "lidar_edges",
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
#: Points nearer than this to the lidar are dropped (the car itself, no-returns).
MIN_RANGE_M = 1.5
#: Ring neighbours further apart than this in azimuth are not compared.
MAX_GAP_DEG = 1.0
#: Elevation histogram bin (degrees) and the smallest ring spacing when rings are inferred.
_RING_BIN_DEG = 0.05
_MIN_RING_SPACING_DEG = 0.3


@dataclass(frozen=True)
class LidarEdges:
    """Edge points of one scan.

    Attributes:
        points: Edge positions in the ego frame at the scan's keyframe time, (M, 3) float64.
        kind: :data:`DEPTH` or :data:`REFLECTIVITY` per point, (M,) int8.
        rings_inferred: True when the scan had no ring index and rings were inferred.
    """

    points: np.ndarray
    kind: np.ndarray
    rings_inferred: bool = False

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


def infer_rings(xyz: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Ring index per point from the elevation angle seen from ``origin``.

    The elevation histogram of a spinning lidar has one peak per laser; each point goes to
    the nearest peak (peaks closer than 0.3 deg merge).

    Args:
        xyz: Points, (N, 3), in any frame whose axes are the lidar's up to a small tilt.
        origin: Lidar origin in that frame, (3,).

    Returns:
        Ring index per point, (N,) int64 (0 = lowest elevation); all zeros for N = 0.
    """
    if len(xyz) == 0:
        return np.zeros(0, dtype=np.int64)
    d = xyz - origin
    elev = np.degrees(np.arctan2(d[:, 2], np.hypot(d[:, 0], d[:, 1])))
    lo, hi = float(elev.min()), float(elev.max())
    nbins = max(1, int(np.ceil((hi - lo) / _RING_BIN_DEG)) + 1)
    hist, edges = np.histogram(elev, bins=nbins, range=(lo, lo + nbins * _RING_BIN_DEG))
    radius = max(1, int(round(_MIN_RING_SPACING_DEG / _RING_BIN_DEG / 2)))
    padded = np.pad(hist, radius)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    peaks = np.flatnonzero((hist > 0) & (hist == windows.max(axis=1)))
    # Plateaus give neighbouring equal bins: keep the first of each run.
    peaks = peaks[np.concatenate([[True], np.diff(peaks) > radius])]
    centres = 0.5 * (edges[peaks] + edges[peaks + 1])
    return np.abs(elev[:, None] - centres[None, :]).argmin(axis=1)


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
        scan: The scan (:class:`bevviz.lidar.LidarScan`); each (sweep, ring) is one scan line,
            its points in the scan's stored order (the firing order of a nuScenes ``.bin``).

    Returns:
        :class:`LidarEdges` in the ego frame at the scan's keyframe time.

    Convention:
        Ranges and azimuths from ``scan.origin`` in the ego frame. See docs/conventions.md.
    """
    xyz = scan.xyz.astype(np.float64) - scan.origin
    r = np.linalg.norm(xyz, axis=1)
    keep = r > MIN_RANGE_M
    inferred = scan.ring is None
    ring = infer_rings(scan.xyz[keep], scan.origin) if inferred else scan.ring[keep].astype(np.int64)
    xyz, r = xyz[keep], r[keep]
    log_i = np.log1p(np.maximum(scan.intensity[keep].astype(np.float64), 0.0))
    sweep = scan.sweep[keep].astype(np.int64)
    line = sweep * (int(ring.max()) + 1 if len(ring) else 1) + ring
    if inferred:
        # Inferred rings have no firing order: scan each ring in azimuth order.
        order = np.lexsort((np.arctan2(xyz[:, 1], xyz[:, 0]), line))
    else:
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
        return LidarEdges(np.zeros((0, 3)), np.zeros(0, dtype=np.int8), inferred)
    return LidarEdges(np.concatenate(pos) + scan.origin, np.concatenate(kinds), inferred)
