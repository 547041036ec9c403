"""The scan lines of a LiDAR scan that carries no ring index: from its firing order, or from
the elevations its lasers keep.

A spinning LiDAR's lasers each sweep a cone of one elevation about the sensor's spin axis, one
scan line (*ring*) a laser. The doctor reads depth and reflectivity jumps along those lines
where a camera's own view holds too few edges (a sparse LiDAR:
:func:`~bevviz.calibration.lidar.edges.lidar_edges`), so a scan that lost its ring index (a
driver's plain (N, 4) array, a cloud re-sorted, voxel-shuffled or written in any order) would
lose that witness. :func:`scan_lines` gives every scan its lines back where its points say
them:

1. the scan's own ring index;
2. its storage order, where that is one firing order (:func:`firing_period`: all lasers of one
   firing stored together, ``P`` points apart);
3. its elevations (:func:`elevation_rings`): the spin axis found as the tilt that makes the
   far points' elevations most concentrated, the lasers as the clusters of those
   elevations, and each point given the laser whose elevation it keeps (within
   ``RING_TOLERANCE`` of the spacing to the next laser; points between lasers, and points
   too near the sensor to say, are on no line: -1). Clusters too close for their widths (a
   merged multi-LiDAR cloud, a non-spinning sensor, a laser pattern finer than the scan's
   noise) give no lines at all: a wrong line would make every step across it an edge.

Whichever way they come, the points of a line are read in azimuth order where their stored
order is none (:func:`~bevviz.calibration.lidar.edges.in_scan_order`), so a scan's ring edges,
and so its verdicts, do not depend on the order its points are stored in.

Convention:
    Ego frame x forward, y left, z up, metres; elevations and azimuths about ``scan.origin``
    (the LiDAR's optical origin in the ego frame); the spin axis a unit vector in the ego
    frame. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bevviz.lidar import LidarScan

__all__ = [
    "MAX_PERIOD",
    "PERIOD_CHUNKS",
    "PERIOD_HEAD_POINTS",
    "PERIOD_MATCH_DEG",
    "PERIOD_MEDIAN_DEG",
    "PERIOD_SHARE",
    "RING_AXIS_POINTS",
    "RING_BIN_DEG",
    "RING_FAR_M",
    "RING_GAP_DEG",
    "RING_MAX_LASERS",
    "RING_MIN_LASERS",
    "RING_NEAR_M",
    "RING_SEARCH_POINTS",
    "RING_SEPARATION",
    "RING_SHARE",
    "RING_TILT_REACH",
    "RING_TILT_STEPS_DEG",
    "RING_TOLERANCE",
    "elevation_rings",
    "firing_period",
    "scan_lines",
    "spin_axis",
    "with_rings",
]

#: A firing order: the lag (number of lasers, at most ``MAX_PERIOD``) at which the elevation
#: of points farther than 3 m changes by less than ``PERIOD_MEDIAN_DEG`` (median, degrees)
#: with at least ``PERIOD_SHARE`` of them within ``PERIOD_MATCH_DEG``, in the first
#: ``PERIOD_HEAD_POINTS`` points and in each of ``PERIOD_CHUNKS`` consecutive parts.
MAX_PERIOD = 256
PERIOD_MEDIAN_DEG = 0.1
PERIOD_MATCH_DEG = 0.2
PERIOD_SHARE = 0.8
PERIOD_CHUNKS = 16
PERIOD_HEAD_POINTS = 32768

#: The spin axis is found on the returns farther than this (metres) from the LiDAR: a
#: laser's own few centimetres of offset from the optical origin change a near point's
#: elevation by tenths of a degree, a far one's by hundredths. With fewer than
#: ``RING_AXIS_POINTS`` of them, on the farther half of the returns.
RING_FAR_M = 15.0
RING_AXIS_POINTS = 2000
#: The lasers are found, and points given one, from this far (metres): a spinning LiDAR's
#: lower lasers meet the road within a few metres, so none of their returns is far.
RING_NEAR_M = 2.0
#: The spin axis is searched as a tilt of the ego z axis about x and y: grids of these steps
#: (degrees) and half-widths (in steps), each about the best of the one before (+-4 deg in
#: all), on at most ``RING_SEARCH_POINTS`` far points (an even sample).
RING_TILT_STEPS_DEG = (0.5, 0.1, 0.02)
RING_TILT_REACH = (8, 4, 4)
RING_SEARCH_POINTS = 8000
#: Elevations are binned this finely (degrees) to measure how concentrated they are.
RING_BIN_DEG = 0.05
#: Sorted elevations (of the returns beyond ``RING_NEAR_M``) more than this apart (degrees)
#: lie on different lasers.
RING_GAP_DEG = 0.1
#: A cut of those elevations is a laser only when it holds at least this share of the points
#: of the median of the larger cuts (fewer: stray returns between lasers).
RING_MIN_SHARE_OF_MEDIAN = 0.1
#: A cut of the elevations is a laser where the spacing to its nearest neighbour is at least
#: ``RING_SEPARATION`` times its spread (median absolute deviation); the lasers are used only
#: when they number ``RING_MIN_LASERS`` to ``RING_MAX_LASERS`` and hold at least ``RING_SHARE``
#: of the points beyond ``RING_NEAR_M``.
RING_SHARE = 0.3
RING_MIN_LASERS = 4
RING_MAX_LASERS = 256
RING_SEPARATION = 8.0
#: A point is on a laser's line when its elevation lies within this share of the spacing to
#: the nearest other laser (or the lasers' median spacing, if less) from that laser's elevation.
RING_TOLERANCE = 0.3


def _keeps_elevation(elev: np.ndarray, far: np.ndarray, lag: int) -> bool | None:
    """Whether points ``lag`` apart in storage order keep their elevation (the
    ``PERIOD_*`` test); None when fewer than 100 pairs of far points say."""
    both = far[:-lag] & far[lag:]
    if both.sum() < 100:
        return None
    change = np.abs(elev[lag:] - elev[:-lag])[both]
    return bool(np.median(change) < PERIOD_MEDIAN_DEG and np.mean(change < PERIOD_MATCH_DEG) >= PERIOD_SHARE)


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
        ``PERIOD_SHARE`` of them within ``PERIOD_MATCH_DEG``, in the first
        ``PERIOD_HEAD_POINTS`` points and in each of the cloud's ``PERIOD_CHUNKS``
        consecutive parts (a cloud merged from two sensors, or with a differently stored
        tail, has no one period); None when no lag does, or when neighbours in storage
        order already keep their elevation (lag 1: the points are stored ring after ring,
        as KITTI's are, not interleaved by firing).
    """
    d = xyz.astype(np.float64) - (np.zeros(3) if origin is None else origin)
    if len(d) < 4 * MAX_PERIOD:
        return None
    elev = np.degrees(np.arctan2(d[:, 2], np.hypot(d[:, 0], d[:, 1])))
    far = np.linalg.norm(d, axis=1) > 3.0
    head = slice(0, PERIOD_HEAD_POINTS)  # the lag is searched on the first points, checked on all
    if _keeps_elevation(elev[head], far[head], 1):
        return None
    for lag in range(2, MAX_PERIOD + 1):
        if not _keeps_elevation(elev[head], far[head], lag):
            continue
        parts = [_keeps_elevation(elev[c], far[c], lag)
                 for c in np.array_split(np.arange(len(d)), PERIOD_CHUNKS)]
        return lag if all(p is not False for p in parts) else None
    return None


def with_rings(scan: LidarScan) -> LidarScan:
    """The scan with rings from its firing order when it has none (see :func:`firing_period`).

    Returns the scan unchanged when it has rings or its points are not in firing order.
    """
    if scan.ring is not None:
        return scan
    lines = _firing_lines(scan)
    return scan if lines is None else dataclasses.replace(scan, ring=lines.astype(np.int16))


def _firing_lines(scan: LidarScan) -> np.ndarray | None:
    """Each point's laser from the scan's firing order (:func:`firing_period`), (N,) int64, or None."""
    period = firing_period(scan.xyz, scan.origin) if len(scan) else None
    return None if period is None else np.arange(len(scan), dtype=np.int64) % period


def _tilted(tilt_deg: np.ndarray) -> np.ndarray:
    """The ego z axis tilted by ``tilt_deg`` (2,: about x, then about y, degrees): unit (3,)."""
    ax, ay = np.radians(tilt_deg)
    return np.array([np.cos(ax) * np.sin(ay), -np.sin(ax), np.cos(ax) * np.cos(ay)])


def _concentration(directions: np.ndarray, axis: np.ndarray) -> float:
    """How concentrated the elevations of unit ``directions`` (M, 3) about ``axis`` (3,) are:
    the chance that two of them share a bin of ``RING_BIN_DEG`` (1 / the number of bins when
    spread evenly, 1 when all in one)."""
    elev = np.degrees(np.arcsin(np.clip(directions @ axis, -1.0, 1.0)))
    counts = np.bincount(np.floor((elev + 90.0) / RING_BIN_DEG).astype(np.int64))
    return float(np.sum(counts.astype(np.float64) ** 2) / len(elev) ** 2)


def spin_axis(directions: np.ndarray) -> np.ndarray:
    """The spin axis that makes the elevations of unit ``directions`` (M, 3) most
    concentrated (:func:`_concentration`): a tilt of the ego z axis searched coarse to fine
    (``RING_TILT_STEPS_DEG``, ``RING_TILT_REACH``), unit (3,).

    Convention:
        Directions and the axis in the ego frame; a tilt about x, then about y.
    """
    best = np.zeros(2)
    score = _concentration(directions, _tilted(best))
    for step, reach in zip(RING_TILT_STEPS_DEG, RING_TILT_REACH, strict=True):
        centre = best.copy()
        for dx in np.arange(-reach, reach + 1) * step:
            for dy in np.arange(-reach, reach + 1) * step:
                tilt = centre + (dx, dy)
                s = _concentration(directions, _tilted(tilt))
                if s > score:
                    score, best = s, tilt
    return _tilted(best)


def _lasers(elev: np.ndarray) -> np.ndarray | None:
    """The elevations (degrees, sorted) of the lasers in the elevations ``elev`` (M,) of the
    points beyond ``RING_NEAR_M``, or None when they show no spinning LiDAR's lasers (the
    ``RING_*`` tests).

    The sorted elevations are cut where they leave a gap of ``RING_GAP_DEG``; a cut holding
    ``RING_MIN_SHARE_OF_MEDIAN`` of the median cut's points is a laser when its spread (median
    absolute deviation) is at most the spacing to its nearest neighbour (or the cuts' median
    spacing, if less) over ``RING_SEPARATION``, and so are its neighbours'. A wider cut is
    lasers merged (a low laser's near returns scatter by degrees with the road's and the car's
    shape; on the nuScenes keyframe the lowest 15 of 32): its points, and a narrow cut's beside
    it, which would take in their strays, stay on no line."""
    e = np.sort(elev)
    cuts = np.split(e, np.flatnonzero(np.diff(e) > RING_GAP_DEG) + 1)
    sizes = np.array([len(c) for c in cuts])
    cuts = [c for c in cuts if len(c) >= RING_MIN_SHARE_OF_MEDIAN * np.median(sizes[sizes >= np.median(sizes)])]
    if len(cuts) < RING_MIN_LASERS:
        return None
    centre = np.array([np.median(c) for c in cuts])
    spread = np.array([np.median(np.abs(c - m)) for c, m in zip(cuts, centre, strict=True)])
    gaps = np.diff(centre)  # a cut beside merged lasers is judged by the lasers' usual spacing too
    spacing = np.minimum(np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf]), np.median(gaps))
    narrow = spread * RING_SEPARATION <= spacing
    # beside merged lasers a narrow cut takes in their scattered returns too: not a laser either
    laser = narrow & np.r_[True, narrow[:-1]] & np.r_[narrow[1:], True]
    held = sum(len(c) for c, k in zip(cuts, laser, strict=True) if k)
    if not RING_MIN_LASERS <= laser.sum() <= RING_MAX_LASERS or held < RING_SHARE * len(e):
        return None
    return centre[laser]


def elevation_rings(xyz: np.ndarray, origin: np.ndarray | None = None) -> np.ndarray | None:
    """Each point's laser, from the elevations a spinning LiDAR's lasers keep (module
    docstring, step 3), or None when the points do not show separate lasers.

    Args:
        xyz: Points in any order, (N, 3), ego frame.
        origin: The LiDAR's optical origin in the ego frame, (3,); default (0, 0, 0).

    Returns:
        (N,) int64: the laser, numbered upwards from 0, of each point, -1 where a point is on
        none (between two lasers' elevations, or nearer the LiDAR than ``RING_NEAR_M``); or None.

    Convention:
        Elevation about the spin axis (:func:`spin_axis`) through ``origin``.
    """
    d = np.asarray(xyz, dtype=np.float64) - (np.zeros(3) if origin is None else np.asarray(origin, np.float64))
    r = np.linalg.norm(d, axis=1)
    near = r > RING_NEAR_M
    far = r > RING_FAR_M
    if far.sum() < RING_AXIS_POINTS and near.any():  # a scan in a narrow street: its farther half
        far = r > max(RING_NEAR_M, float(np.median(r[near])))
    if far.sum() < 100 * RING_MIN_LASERS:
        return None
    sample = np.flatnonzero(far)[:: max(1, int(far.sum()) // RING_SEARCH_POINTS)]
    axis = spin_axis(d[sample] / r[sample, None])
    elev = np.degrees(np.arcsin(np.clip((d @ axis) / np.maximum(r, 1e-9), -1.0, 1.0)))
    centre = _lasers(elev[near])
    if centre is None:
        return None
    spacing = np.diff(centre)  # a laser beside merged ones: its usual spacing bounds its reach too
    half = RING_TOLERANCE * np.minimum(np.minimum(np.r_[np.inf, spacing], np.r_[spacing, np.inf]), np.median(spacing))
    nearest = np.clip(np.searchsorted(centre, elev), 1, len(centre) - 1)
    nearest -= (elev - centre[nearest - 1]) < (centre[nearest] - elev)
    on = (np.abs(elev - centre[nearest]) <= half[nearest]) & near
    return np.where(on, nearest, -1).astype(np.int64)


def scan_lines(scan: LidarScan) -> np.ndarray | None:
    """Each point's scan line (module docstring): the scan's ring index, else its firing
    order's, else its elevations'; (N,) int64, -1 for a point on no line; None when the scan
    shows no lines."""
    if scan.ring is not None:
        return scan.ring.astype(np.int64)
    if len(scan) == 0:
        return None
    lines = _firing_lines(scan)
    return lines if lines is not None else elevation_rings(scan.xyz, scan.origin)
