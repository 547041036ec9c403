"""Edge alignment: how well a camera's LiDAR edge points fall on its image edges, per rotation.

Idea (after Levinson & Thrun, RSS 2013): where a camera's extrinsics are right, the LiDAR's
edge points (:mod:`~bevviz.calibration.lidar.edges`: depth silhouettes and reflectivity
jumps, found in each camera's own view, or along the rings of a scan that has them where
the view holds too few, ``MIN_VERDICT_POINTS``) project onto image edges across their link.
The *alignment score* of a hypothesis is the mean edge attraction
(:mod:`~bevviz.calibration.lidar.edge_maps`, one channel per gradient orientation) at the
projected edge points. :class:`EdgeAlignment` holds one camera's edge points and maps and
scores, searches, bootstraps and profiles rotations of it;
:mod:`~bevviz.calibration.lidar.evidence` turns that into a :class:`~bevviz.calibration.lidar.evidence.CameraEvidence`.

What it does, per camera:

1. Edge points are found in the camera's view of the scan moved to the ego frame at the
   camera's exposure (:meth:`bevviz.lidar.LidarScan.points_at`: a moving car's cameras fire
   tens of ms before the lidar timestamp) and kept where the camera can see them: in the
   image and not behind nearer LiDAR points (a coarse depth buffer, because the LiDAR and
   the camera look from different places).
2. Search (:meth:`EdgeAlignment.search`): the score on a grid of rotations
   (+-``SEARCH_RADIUS_DEG`` in roll, pitch and yaw, ``GRID_STEP_DEG`` apart, coarse
   attraction): the *score landscape*; the best ``N_STARTS`` separated peaks plus the stored
   calibration are refined by a pattern search through the attraction scales
   (:meth:`EdgeAlignment.refine_many` runs several side by side). Where the best optimum
   lies within ``EDGE_MARGIN_DEG`` of the searched region's edge the search widens, uphill
   and coarse to fine: a grid of +-``WALK_RADIUS_DEG`` around that optimum
   (``GRID_STEP_DEG`` apart, coarse attraction), its best peaks refined the same way, again
   from the new best while it lies at the edge, out to ``MAX_RADIUS_DEG`` (a turn of 2-5
   degrees is found, not left at the edge; beyond 5 degrees on some axis it still is). It
   widens towards the rising score only: a grid over the whole +-8 degree cube finds optima
   of chance far from any fault (on a TRI frame, pitch +11 deg scored above the true 4 deg
   turn). The landscape's statistics stay those of the +-``SEARCH_RADIUS_DEG`` grid.
3. Uncertainty (:meth:`EdgeAlignment.bootstrap`): a cluster bootstrap. Edge points are
   grouped in image cells (points of one object are not independent); each replicate
   redraws the cells and lets the best ``BOOTSTRAP_CANDIDATES`` optima compete again.
4. Per-axis profiles (:meth:`EdgeAlignment.profiles`): the score along each axis through the
   optimum (+-3 degrees), for display.

Convention:
    Rotations are body-frame (FLU: roll about the optical axis, pitch positive looking down,
    yaw positive to the left) ``(roll, pitch, yaw)`` in degrees composed
    ``Rz(yaw) Ry(pitch) Rx(roll)``, as :func:`bevviz.calibration.perturbations.perturb_camera`.
    A *hypothesis* ``d`` is the rotation applied to the stored camera; the *offset* is
    ``-d`` at the optimum. Pixels at centres; images may be any size (coordinates scale as
    ``(u + 0.5) * s - 0.5``). See docs/conventions.md.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import replace

import cv2
import numpy as np

from bevviz.calibration.lidar.edge_maps import oriented_attraction_maps
from bevviz.calibration.lidar.edges import (
    view_axes,
    view_edges,
)
from bevviz.calibration.lidar.frames import LidarFrame
from bevviz.calibration.lidar.masks import in_mask
from bevviz.camera import Camera
from bevviz.checks import check_shape, field_error
from bevviz.depth_buffer import thin_indices, visible
from bevviz.projection import inside_image
from bevviz.rotations import FLU_FROM_RDF, rpy_to_matrices

__all__ = [
    "AXES",
    "BOOTSTRAP",
    "BOOTSTRAP_CANDIDATES",
    "MAX_EDGE_POINTS",
    "MIN_VERDICT_POINTS",
    "SEARCH_RADIUS_DEG",
    "EDGE_MARGIN_DEG",
    "MAX_RADIUS_DEG",
    "WALK_RADIUS_DEG",
    "EdgeAlignment",
    "hypothesis_matrices",
    "hypothesis_matrix",
    "image_sides",
]

AXES = ("roll", "pitch", "yaw")
#: Half-width (degrees) of the rotation search (an optimum near its edge is no optimum;
#: measured: +-4.5 deg at 0.75 deg steps found more far-off optima on the real frames).
SEARCH_RADIUS_DEG = 3.0
#: Half-width (degrees) of the per-axis profiles.
PROFILE_RADIUS_DEG = 3.0
#: Grid spacing (degrees) of the coarse search.
GRID_STEP_DEG = 0.5
#: An optimum within this (degrees, on some axis) of the searched radius lies at its edge:
#: the search widens, and past the widest radius the verdict doubts it.
EDGE_MARGIN_DEG = 0.5
#: Half-width (degrees) of each grid the widening search lays around an optimum at the edge.
WALK_RADIUS_DEG = 1.5
#: The widening stops at this radius (degrees, any axis), so an optimum more than 5 degrees off
#: on some axis stays at the edge and is doubted: the issue's faults reach 5 degrees, and a
#: clean rear TRI camera (t0, CAMERA_08: a tree line and a lawn) rises on to an optimum of
#: chance 5.6-6.1 deg away, which convicted it with the LiDAR displaced 0.3 m (radius 8).
MAX_RADIUS_DEG = 5.5
#: Coarse peaks of a widening grid refined.
WALK_STARTS = 3
#: Coarse-grid peaks refined (besides the stored calibration).
N_STARTS = 10
#: Coarse peaks closer than this (degrees, on every axis) count as one.
PEAK_SEPARATION_DEG = 0.75
#: Bootstrap replicates, and how many optima compete in each.
BOOTSTRAP = 24
BOOTSTRAP_CANDIDATES = 3
#: Cluster cells across the image width for the bootstrap (120 px cells at 1600 px).
CLUSTER_COLUMNS = 13
#: Depth-buffer cell (radians; pixels = angle * focal length) of the visibility test.
DEPTH_CELL_RAD = 0.0063
#: Images are scored at a focal length of at most this many pixels (larger ones are
#: shrunk first: the attraction scales are angles, the finest 0.0063 rad = 6 px here).
MAP_FOCAL_PX = 1000.0
#: Most edge points a camera keeps per frame (a fixed random subset beyond: the scores are
#: means, so a dense cloud costs no more than this).
MAX_EDGE_POINTS = 2000
#: Fewest visible edge points per frame for a "miscalibrated" verdict (fewer: inconclusive). A
#: sparse cloud's edges are placed coarsely and its landscape is rough, and neither the
#: bootstrap nor the halves see a bias; more frames of a sparse cloud do not place its edges
#: better (docs/calibration.md, tuning table).
MIN_VERDICT_POINTS = 300
# MIN_VERDICT_POINTS also picks the edges a camera is scored on: its own view's
# (view_edges), unless they are fewer and the scan has rings, then the rings' (lidar_edges):
# a sparse LiDAR's rings are the stronger witness.
#: Nearest depth (metres) of an edge point in front of the camera.
MIN_DEPTH_M = 1.0
#: Step (degrees) of the per-axis profiles.
PROFILE_STEP_DEG = 0.1
#: Hypotheses scored in one batch, and the widest remap call (OpenCV's limit is 32767).
_BATCH = 64
_REMAP_COLS = 32000


def hypothesis_matrix(d_deg: np.ndarray) -> np.ndarray:
    """``cam'_from_cam`` for the body rotation ``d`` applied to a camera's mounting.

    Args:
        d_deg: (roll, pitch, yaw) in degrees, shape (3,).

    Returns:
        (3, 3) rotation taking points in the stored camera's RDF frame to the rotated one's.

    Convention:
        ``ego_from_cam' = ego_from_cam @ FLU_FROM_RDF.T @ Rb @ FLU_FROM_RDF`` (as
        :func:`~bevviz.calibration.perturbations.perturb_camera`), hence
        ``cam'_from_cam = FLU_FROM_RDF.T @ Rb.T @ FLU_FROM_RDF``.
    """
    return hypothesis_matrices(np.asarray(d_deg, dtype=np.float64)[None])[0]


def hypothesis_matrices(ds_deg: np.ndarray) -> np.ndarray:
    """:func:`hypothesis_matrix` for K hypotheses at once.

    Args:
        ds_deg: (roll, pitch, yaw) in degrees, shape (K, 3).

    Returns:
        (K, 3, 3) ``cam'_from_cam`` rotations.

    Convention:
        As :func:`hypothesis_matrix`.
    """
    rb = rpy_to_matrices(np.radians(np.asarray(ds_deg, dtype=np.float64).reshape(-1, 3)))
    return FLU_FROM_RDF.T @ rb.transpose(0, 2, 1) @ FLU_FROM_RDF


def _project(pc: np.ndarray, K: np.ndarray) -> np.ndarray:
    z = np.maximum(pc[:, 2:3], 1e-6)
    return (pc @ K.T)[:, :2] / z


def image_sides(camera: Camera, uv: np.ndarray) -> np.ndarray:
    """Which half of the view each pixel lies in: 0 left, 1 right of the image's centre line
    nearest the world's vertical, (M,) int64.

    For an upright camera that is the column through the image centre; for a camera mounted
    a quarter turn on its side (portrait images) the row, so both halves still see the ground
    and the horizon.

    Args:
        camera: The camera (its ``cam_from_ego`` says where the world's up is).
        uv: Pixels, (M, 2).

    Convention:
        Pixel centres at integers (the centre line at (W - 1) / 2 or (H - 1) / 2); world up is
        ego +z.
    """
    centre = 0.5 * np.array([camera.width - 1.0, camera.height - 1.0])
    return ((uv - centre) @ view_axes(camera)[0] >= 0).astype(np.int64)


def _cube(radius: float, step: float) -> np.ndarray:
    """Every (roll, pitch, yaw) ``step`` apart within +-``radius`` degrees, (G, 3)."""
    g = np.arange(-radius, radius + 1e-9, step)
    return np.array(list(itertools.product(g, g, g)))


def _peaks(grid: np.ndarray, scores: np.ndarray, separation: float, n: int = N_STARTS) -> list[int]:
    """Indices of the best ``n`` grid points (``grid`` (G, 3), ``scores`` (G,)) more
    than ``separation`` degrees apart on some axis, best first."""
    peaks: list[int] = []
    for i in np.argsort(-scores):
        if all(np.max(np.abs(grid[i] - grid[j])) > separation for j in peaks):
            peaks.append(int(i))
        if len(peaks) >= n:
            break
    return peaks


class EdgeAlignment:
    """The alignment score of one camera over one or more frames.

    Attributes:
        camera: The camera (stored calibration).
        points: Visible edge points in the stored camera's frame, (M, 3) float64 (at most
            ``MAX_EDGE_POINTS`` per frame).
        kind: Edge kind per point, (M,) int8.
        orient: Link orientation per point (0 row, 1 column: the attraction channel), (M,) int8.
        frame: Frame index per point, (M,) int64.
        cluster: Bootstrap cluster per point, (M,) int64.
        parity: Checkerboard colour (0 or 1) of each point's cell, (M,): two halves that
            both cover the image, for held-out checks.
        side: 0 for points in the left half of the view, 1 for the right half, (M,) (at
            the stored calibration, :func:`image_sides`): two halves of the evidence that a
            rotation error moves differently (roll turns them opposite ways).
        scales: Image width / calibrated width per frame.
    """

    def __init__(self, camera: Camera, frames: Sequence[LidarFrame], maps: bool = True,
                 local_mean_rad: float | None = None) -> None:
        """Gather the camera's edge points of every frame and its images' attraction maps.

        Args:
            camera: The camera (stored calibration).
            frames: The frames; one without this camera's image is skipped.
            maps: False to gather the edge points only (no attraction maps: no
                :meth:`scores`; for a caller that already holds the images' maps, as the
                gross-error screen does when it tries the scan turned).
            local_mean_rad: Side (radians) of the square whose mean attraction is taken off
                each map (:func:`~bevviz.calibration.lidar.edge_maps.oriented_attraction_maps`);
                None for the raw attraction (the gross-error screen takes its own lift).
        """
        self.camera = camera
        pts, kinds, orients, frame_ids, clusters, parities = [], [], [], [], [], []
        self.maps, self.scales = [], []
        R, t = camera.cam_from_ego[:3, :3], camera.cam_from_ego[:3, 3]
        focal = 0.5 * (camera.K[0, 0] + camera.K[1, 1])
        sideways = view_axes(camera)[0, 0] == 0
        for fr in frames:
            img = fr.images.get(camera.name)
            if img is None:
                continue
            scale = img.shape[1] / camera.width
            exposure = fr.scan.exposure(camera.name)
            # cam_from_ego(t_cam) @ ego(t_cam)_from_ego(t_keyframe), as (3, 3) and (3,)
            Rx, tx = R @ exposure[:3, :3], R @ exposure[:3, 3] + t
            mask = fr.ignore.get(camera.name)
            edges = view_edges(fr.scan, camera, mask, fr.ranks)
            if fr.ring_edges is not None and len(edges) < MIN_VERDICT_POINTS:
                edges = fr.ring_edges
                if sideways:  # ring links run along the view's rows: image columns here
                    edges = replace(edges, orient=1 - edges.orient)
            pc = edges.points @ Rx.T + tx
            uv = _project(pc, camera.K)
            inside = (pc[:, 2] > MIN_DEPTH_M) & inside_image(uv[:, 0], uv[:, 1], camera.width, camera.height)
            if edges is fr.ring_edges and mask is not None and inside.any():  # view edges drop these themselves
                inside[inside] = ~in_mask(mask, uv[inside])
            near = fr.scan.returns()
            occ = fr.scan.xyz[near] @ Rx.T + tx
            keep = inside & visible(uv, pc[:, 2], _project(occ, camera.K), occ[:, 2], camera.size,
                                    DEPTH_CELL_RAD * focal)
            thin = thin_indices(int(keep.sum()), MAX_EDGE_POINTS)  # a dense cloud: a fixed subset
            if thin is not None:
                chosen = np.flatnonzero(keep)[thin]
                keep = np.zeros_like(keep)
                keep[chosen] = True
            cell = max(camera.width, camera.height) / CLUSTER_COLUMNS  # the long side: any mounting alike
            cols = int(np.ceil(camera.width / cell)) + 1
            row = np.floor((uv[keep, 1] + 0.5) / cell).astype(np.int64)
            col = np.floor((uv[keep, 0] + 0.5) / cell).astype(np.int64)
            parities.append((row + col) % 2)
            pts.append(pc[keep])
            kinds.append(edges.kind[keep])
            orients.append(edges.orient[keep])
            frame_ids.append(np.full(int(keep.sum()), len(pts) - 1, dtype=np.int64))
            clusters.append(row * cols + col + 100_000 * (len(pts) - 1))
            if not maps:
                continue
            shrink = min(1.0, MAP_FOCAL_PX / (focal * scale))
            if shrink < 1.0:  # maps at a focal length of MAP_FOCAL_PX: the scales are angles anyway
                size = (max(1, round(img.shape[1] * shrink)), max(1, round(img.shape[0] * shrink)))
                img = cv2.resize(np.ascontiguousarray(img), size, interpolation=cv2.INTER_AREA)
                scale = img.shape[1] / camera.width
            self.maps.append(oriented_attraction_maps(img, focal * scale, field=f"images[{camera.name!r}]",
                                                      local_mean_rad=local_mean_rad))
            self.scales.append(scale)
        empty = np.zeros((0, 3))
        self.points = np.concatenate(pts) if pts else empty
        self.kind = np.concatenate(kinds) if kinds else np.zeros(0, dtype=np.int8)
        self.orient = np.concatenate(orients) if orients else np.zeros(0, dtype=np.int8)
        self.frame = np.concatenate(frame_ids) if frame_ids else np.zeros(0, dtype=np.int64)
        self.cluster = np.concatenate(clusters) if clusters else np.zeros(0, dtype=np.int64)
        self.parity = np.concatenate(parities) if parities else np.zeros(0, dtype=np.int64)
        self.levels = len(self.maps[0]) if self.maps else 0
        self.side = image_sides(camera, self.uv(np.zeros(3))) if len(self) else np.zeros(0, dtype=np.int64)
        # points grouped by (frame, channel): one remap each
        self._groups = [(f, c, np.flatnonzero((self.frame == f) & (self.orient == c)))
                        for f in range(len(self.maps)) for c in (0, 1)]
        self._groups = [g for g in self._groups if len(g[2])]
        self._points32 = self.points.astype(np.float32)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    def only(self, frames: Sequence[int]) -> EdgeAlignment:
        """The same alignment on some of its frames: their edge points and maps (shared, not
        copied), renumbered ``0 .. len(frames) - 1`` in ascending order.

        Args:
            frames: Frame indices of this alignment (its :attr:`frame` values), each once.
        """
        kept = sorted({int(f) for f in frames})
        if not kept or kept[0] < 0 or kept[-1] >= len(self.scales):
            raise field_error("frames", list(frames), f"must be frame indices from 0 to {len(self.scales) - 1}")
        out = copy.copy(self)
        mask = np.isin(self.frame, kept)
        renumber = np.full(len(self.scales), -1, dtype=np.int64)
        renumber[kept] = np.arange(len(kept))
        for name in ("points", "kind", "orient", "cluster", "parity", "side"):
            setattr(out, name, getattr(self, name)[mask])
        out.frame = renumber[self.frame[mask]]
        out.maps = [self.maps[f] for f in kept] if self.maps else []
        out.scales = [self.scales[f] for f in kept]
        out._groups = [(f, c, np.flatnonzero((out.frame == f) & (out.orient == c)))
                       for f in range(len(kept)) for c in (0, 1)]
        out._groups = [g for g in out._groups if len(g[2])]
        out._points32 = out.points.astype(np.float32)
        return out

    def uv(self, d_deg: np.ndarray) -> np.ndarray:
        """Pixels (calibrated size) of the edge points under hypothesis ``d``, (M, 2)."""
        return _project(self.points @ hypothesis_matrix(d_deg).T, self.camera.K)

    def scores(self, ds_deg: np.ndarray, level: int, weights: np.ndarray | None = None,
               shift_m: np.ndarray | None = None) -> np.ndarray:
        """Mean attraction at the projected edge points under each of K hypotheses.

        Args:
            ds_deg: Hypotheses (roll, pitch, yaw) in degrees, (K, 3).
            level: Attraction scale index (0 coarse).
            weights: Optional per-point weights, (M,) for every hypothesis or (K, M), one
                row per hypothesis (e.g. bootstrap replicates scored together).
            shift_m: Optional translation of every edge point before the rotation, (3,)
                metres in the stored camera's frame (a LiDAR displaced relative to the
                camera, e.g. by a timing error of a moving car).

        Returns:
            (K,) scores.
        """
        ds = np.atleast_2d(np.asarray(ds_deg, dtype=np.float64))
        if len(self) == 0:
            return np.zeros(len(ds))
        points32 = self._points32 if shift_m is None else \
            (self.points + np.asarray(shift_m, dtype=np.float64)).astype(np.float32)
        out = np.empty(len(ds))
        w = np.ones(len(self)) if weights is None else np.asarray(weights, dtype=np.float64)
        per_row = w.ndim == 2
        if per_row:
            check_shape(w, (len(ds), len(self)), "weights")
        total = np.maximum(w.sum(axis=-1), 1e-12)  # () or (K,)
        K = self.camera.K
        for k0 in range(0, len(ds), _BATCH):
            # pixels of a 1x1-scaled image per hypothesis: (K @ R_d) applied to the points
            mats = (K @ hypothesis_matrices(ds[k0:k0 + _BATCH])).astype(np.float32)  # (B, 3, 3)
            acc = np.zeros(len(mats))
            for f, c, m in self._groups:
                h = mats @ points32[m].T  # (B, 3, m)
                z = np.maximum(h[:, 2], 1e-6)
                sc = np.float32(self.scales[f])
                u = (h[:, 0] / z + 0.5) * sc - 0.5
                v = (h[:, 1] / z + 0.5) * sc - 0.5
                vals = np.empty(u.shape, dtype=np.float32)
                for c0 in range(0, u.shape[1], _REMAP_COLS):
                    sl = slice(c0, c0 + _REMAP_COLS)
                    vals[:, sl] = cv2.remap(self.maps[f][level][c], np.ascontiguousarray(u[:, sl]),
                                            np.ascontiguousarray(v[:, sl]), cv2.INTER_LINEAR,
                                            borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                if per_row:
                    acc += np.einsum("bm,bm->b", vals.astype(np.float64), w[k0:k0 + len(mats)][:, m])
                else:
                    acc += vals.astype(np.float64) @ w[m]
            out[k0:k0 + len(mats)] = acc / (total[k0:k0 + len(mats)] if per_row else total)
        return out

    def score(self, d_deg: np.ndarray, level: int, weights: np.ndarray | None = None,
              shift_m: np.ndarray | None = None) -> float:
        """Mean attraction at the projected edge points under hypothesis ``d`` (degrees, (3,));
        ``shift_m`` as :meth:`scores`."""
        return float(self.scores(np.asarray(d_deg, dtype=np.float64)[None], level, weights, shift_m)[0])

    def refine(self, d_deg: np.ndarray, level: int, weights: np.ndarray | None = None, step: float = 0.25,
               stop: float = 0.01, shift_m: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Pattern search (axis steps, halved when none helps) from ``d``; returns (d, score);
        ``shift_m`` as :meth:`scores` (held fixed)."""
        w = None if weights is None else np.asarray(weights, dtype=np.float64)[None]
        ds, ss = self.refine_many(np.asarray(d_deg, dtype=np.float64)[None], level, w, step, stop, shift_m)
        return ds[0], float(ss[0])

    def refine_many(self, starts_deg: np.ndarray, level: int, weights: np.ndarray | None = None,
                    step: float = 0.25, stop: float = 0.01,
                    shift_m: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """R independent pattern searches (as :meth:`refine`) run side by side: each keeps its
        own point and step, and the trials of all searches still running are scored in one
        call (the bootstrap's replicates, the search's starts).

        Args:
            starts_deg: Starting hypotheses, (R, 3) degrees.
            level: Attraction scale index.
            weights: None, per-point weights shared by every search (M,), or one row of
                weights per search (R, M).
            step: First step (degrees); halved when no axis step helps.
            stop: A search ends when its step falls to this (degrees).
            shift_m: As :meth:`scores`, shared by every search.

        Returns:
            (hypotheses (R, 3), their scores (R,)).
        """
        d = np.array(np.atleast_2d(starts_deg), dtype=np.float64)
        n = len(d)
        w = None if weights is None else np.asarray(weights, dtype=np.float64)
        per_row = w is not None and w.ndim == 2
        if per_row:
            check_shape(w, (n, len(self)), "weights")
        best = self.scores(d, level, w, shift_m)
        steps = np.full(n, float(step))
        moves = np.concatenate([np.eye(3), -np.eye(3)])  # (6, 3)
        while True:
            live = np.flatnonzero(steps > stop)
            if not len(live):
                return d, best
            trials = d[live, None, :] + steps[live, None, None] * moves  # (L, 6, 3)
            s = self.scores(trials.reshape(-1, 3), level, np.repeat(w[live], 6, axis=0) if per_row else w,
                            shift_m).reshape(len(live), 6)
            k = np.argmax(s, axis=1)
            top = s[np.arange(len(live)), k]
            better = top > best[live]
            moved = live[better]
            best[moved] = top[better]
            d[moved] = trials[better, k[better]]
            steps[live[~better]] /= 2

    def _optima(self, starts: np.ndarray, found: list[tuple[np.ndarray, float]]) -> list[tuple[np.ndarray, float]]:
        """``found`` with the optima refined from ``starts`` ((S, 3) degrees, side by side
        through the attraction scales) merged in, best first."""
        ds, ss = np.asarray(starts, dtype=np.float64), np.zeros(len(starts))
        for level in range(self.levels):
            ds, ss = self.refine_many(ds, level, step=0.25 if level == 0 else 0.1)
        found = list(found)
        for d, s in zip(ds, ss):
            if not any(np.max(np.abs(d - o)) < 0.2 for o, _ in found):
                found.append((d, float(s)))
        found.sort(key=lambda x: -x[1])
        return found

    def search(self, walks: int = 1) -> tuple[list[tuple[np.ndarray, float]], np.ndarray, float]:
        """Optima (hypotheses, best first, each with its finest-level score), the coarse
        scores of the +-``SEARCH_RADIUS_DEG`` grid (the score landscape), (G,), and the
        radius (degrees) searched in the end: ``SEARCH_RADIUS_DEG``, or the widened radius
        where an optimum lay at the edge (module docstring, step 2).

        Args:
            walks: The widening walks on from each of the best ``walks`` optima that lies at
                the edge (1: from the best alone). A fault beyond the first grid on one side
                and an optimum of chance beyond it on the other both lie at its edge, and
                the walk from the best may take the wrong one.
        """
        grid = _cube(SEARCH_RADIUS_DEG, GRID_STEP_DEG)
        scores = self.scores(grid, 0)
        peaks = _peaks(grid, scores, PEAK_SEPARATION_DEG)
        found = self._optima(np.array([np.zeros(3)] + [grid[i] for i in peaks]), [])
        radius = SEARCH_RADIUS_DEG
        local = _cube(WALK_RADIUS_DEG, GRID_STEP_DEG)
        walked: list[np.ndarray] = []
        while radius < MAX_RADIUS_DEG:
            centres = [d for d, _ in found[:walks] if float(np.max(np.abs(d))) > radius - EDGE_MARGIN_DEG
                       and not any(np.max(np.abs(d - w)) < GRID_STEP_DEG for w in walked)]
            if not centres:
                break
            for centre in centres:
                walked.append(centre)
                cube = centre + local
                coarse = self.scores(cube, 0)
                found = self._optima(np.array([cube[i] for i in _peaks(cube, coarse, PEAK_SEPARATION_DEG,
                                                                       WALK_STARTS)]), found)
            reach = max(float(np.max(np.abs(c))) for c in centres) + WALK_RADIUS_DEG
            radius = min(MAX_RADIUS_DEG, max(radius, reach))
        return found, scores, radius

    def bootstrap(self, candidates: Sequence[np.ndarray], replicates: int = BOOTSTRAP,
                  seed: int = 0) -> np.ndarray:
        """Hypotheses of ``replicates`` cluster-bootstrap replicates, (replicates, 3)."""
        ids, inverse = np.unique(self.cluster, return_inverse=True)
        rng = np.random.default_rng(seed)
        last = self.levels - 1
        cands = np.asarray(candidates, dtype=np.float64).reshape(-1, 3)  # (C, 3)
        if replicates <= 0 or not len(cands):
            return np.zeros((0, 3))
        draws = [np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids)) for _ in range(replicates)]
        w = np.stack([d[inverse] for d in draws]).astype(np.float64)  # (R, M)
        # every replicate from every candidate, side by side: (R * C) searches
        ds, ss = self.refine_many(np.tile(cands, (replicates, 1)), last, np.repeat(w, len(cands), axis=0), step=0.1)
        pick = np.argmax(ss.reshape(replicates, len(cands)), axis=1)
        return ds.reshape(replicates, len(cands), 3)[np.arange(replicates), pick]

    def profiles(self, d_deg: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Finest-level score along each axis through ``d``: axis -> (offsets (K,), scores (K,))."""
        offs = np.round(np.arange(-PROFILE_RADIUS_DEG, PROFILE_RADIUS_DEG + 1e-9, PROFILE_STEP_DEG), 6)
        out = {}
        for ax, name in enumerate(AXES):
            ds = np.repeat(np.asarray(d_deg, dtype=np.float64)[None], len(offs), axis=0)
            ds[:, ax] = -offs
            out[name] = (offs, self.scores(ds, self.levels - 1))
        return out
