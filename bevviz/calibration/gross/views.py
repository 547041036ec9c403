"""The evidence the gross-error screen scores poses with: each camera's LiDAR edges and its
image's *lift* map (:class:`EdgeView`), built from the doctor's own edge alignment, over one
frame or several frames of one rig (a drive: their edges pooled).

A pose's score is the lift at each edge it brings into the image: the attraction less its
local mean (:data:`bevviz.calibration.lidar.image_support.LOCAL_RAD`), so that a textured
region does not attract any pose; two poses are compared edge by edge (:meth:`EdgeView.compare`).

Convention:
    Ego frame x forward, y left, z up, metres; camera RDF; pixels at centres. A pose is given
    relative to the stored camera frame, ``alt_from_cam`` (4, 4). See docs/conventions.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from bevviz.calibration.lidar.alignment import EdgeAlignment, hypothesis_matrices, hypothesis_matrix
from bevviz.calibration.lidar.edges import view_axes
from bevviz.calibration.lidar.frames import LidarFrame, as_lidar_frames
from bevviz.calibration.lidar.image_support import LOCAL_RAD, local_mean
from bevviz.calibration.lidar.repeats import frozen_images, repeated_views
from bevviz.camera import Camera, Rig
from bevviz.lidar import LidarScan, as_lidar_scan
from bevviz.projection import inside_image

__all__ = ["MIN_SCREEN_EDGES", "MIN_SHARE_OF_STORED", "SHARPNESS_TURN_DEG", "EdgeView", "clustered_se", "edge_views",
           "frame_views", "identical_images", "pooled_views", "relative_pose", "rotated_best", "seen_from",
           "walked_many"]

#: Fewest edges an alternative must bring into view to be scored (and the fewest a camera
#: needs to be screened at all).
MIN_SCREEN_EDGES = 60
#: ... and at least this share of the edges the stored pose brings in.
MIN_SHARE_OF_STORED = 0.2
#: The turn (deg, pitch or yaw) :meth:`EdgeView.sharpness` compares a pose with.
SHARPNESS_TURN_DEG = 2.0

#: An alternative wins when its edges' lift beats the stored pose's by this many standard
#: errors (paired, edge by edge; see the module docstring for the margins measured) ...
GROSS_T = 1.5
#: ... its own mean lift shows an alignment at all (structureless images give none) ...
MIN_LIFT = 0.06
#: ... and it gains this much lift on the stored pose (two near-identical maps differ by
#: tiny amounts with a tiny spread: many standard errors, no evidence).
MIN_GAIN = 0.03


def wins(t: float, lift: float, gain: float, min_lift: float = MIN_LIFT) -> bool:
    """Whether an alternative's :meth:`EdgeView.compare` beats the stored pose (``GROSS_T``,
    ``min_lift``, ``MIN_GAIN``)."""
    return t >= GROSS_T and lift >= min_lift and gain >= MIN_GAIN


def in_camera(camera: Camera, M: np.ndarray) -> np.ndarray:
    """A LiDAR correction ``M`` (4, 4; ``p_ego = M @ p_scan``) in ``camera``'s frame, (4, 4):
    the pose relative to the stored camera frame that :meth:`EdgeView.values` takes."""
    return camera.cam_from_ego @ M @ camera.ego_from_cam


def relative_pose(camera: Camera, alt: Camera) -> np.ndarray:
    """``alt_from_cam`` (4, 4): from the stored camera's frame to an alternative pose's."""
    return alt.cam_from_ego @ camera.ego_from_cam


@dataclass
class EdgeView:
    """One camera's evidence over one or more frames: its LiDAR edges (stored camera frame at
    its exposure in each frame) and each frame's image map.

    Attributes:
        camera: The camera as stored.
        points: Edge points of every frame, (M, 3), stored camera frame.
        orient: Each edge's orientation channel (0 or 1), (M,).
        channels: Per frame, the image's lift channels (2, h, w).
        sideways: Whether the stored pose's view rows are image columns (:func:`view_axes`).
        frame: Each edge's frame (an index into ``channels``), (M,).
    """

    camera: Camera
    points: np.ndarray
    orient: np.ndarray
    channels: tuple[np.ndarray, ...]
    sideways: bool
    frame: np.ndarray

    def values(self, alt_from_cam: np.ndarray, K: np.ndarray, size: tuple[int, int],
               channels: tuple[np.ndarray, ...], sideways: bool) -> np.ndarray:
        """Attraction at each edge under a pose relative to the stored one, (M,), NaN outside the image.

        Args:
            alt_from_cam: (4, 4) from the stored camera frame to the pose's.
            K: The pose's intrinsics, (3, 3).
            size: The calibrated (W, H) the image is stretched to.
            channels: Per frame, an image's attraction (2, h, w) (this camera's own, or
                another camera's images of the same frames).
            sideways: Whether the pose's view rows are image columns (:func:`view_axes`).
        """
        return self.values_many(alt_from_cam[None], K, size, channels, sideways)[0]

    def values_many(self, alt_from_cam: np.ndarray, K: np.ndarray, size: tuple[int, int],
                    channels: tuple[np.ndarray, ...], sideways: bool) -> np.ndarray:
        """:meth:`values` of P poses at once, (P, M): ``alt_from_cam`` (P, 4, 4), ``K`` (3, 3)
        or one per pose (P, 3, 3), the rest as :meth:`values` takes them. Each pose's values
        are those :meth:`values` gives it alone (the image maps are sampled once for all
        poses)."""
        P, M = len(alt_from_cam), len(self.points)
        pc = self.points[None] @ alt_from_cam[:, :3, :3].transpose(0, 2, 1) + alt_from_cam[:, None, :3, 3]
        z = pc[..., 2]
        uv = (pc @ (K.transpose(0, 2, 1) if K.ndim == 3 else K.T))[..., :2] / np.maximum(z, 1e-6)[..., None]
        u_all, v_all = uv[..., 0], uv[..., 1]
        keep = (z > 1.0) & inside_image(u_all, v_all, size[0], size[1])
        out = np.full((P, M), np.nan)
        channel = self.orient ^ int(sideways != self.sideways)
        for f, maps in enumerate(channels):
            sx, sy = maps.shape[2] / size[0], maps.shape[1] / size[1]
            u = ((u_all + 0.5) * sx - 0.5).astype(np.float32)
            v = ((v_all + 0.5) * sy - 0.5).astype(np.float32)
            in_frame = keep & (self.frame == f)[None]
            for c in (0, 1):
                m = in_frame & (channel == c)[None]
                if m.any():
                    out[m] = _sample(maps[c], u[m], v[m])
        return out

    def sharpness(self, pre: np.ndarray, channels: np.ndarray, v: np.ndarray) -> float:
        """How much an image fits the stored pose better than the same pose turned
        ``SHARPNESS_TURN_DEG`` in pitch or in yaw: the least of the four :meth:`compare` t
        values. An image that belongs to the pose fits it and not beside it; a textured image
        of another camera lifts the edges about as much anywhere.

        Args:
            pre: (4, 4) the pose relative to the stored camera frame (the LiDAR's correction).
            channels: Per frame, the image's attraction (2, h, w).
            v: :meth:`values` of the pose with this image, (M,).
        """
        cam = self.camera
        out = float("inf")
        for d in ((0.0, 1.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0)):
            turn = np.eye(4)
            turn[:3, :3] = hypothesis_matrix(np.array(d) * SHARPNESS_TURN_DEG)
            out = min(out, self.compare(self.values(turn @ pre, cam.K, cam.size, channels, self.sideways), v)[0])
        return out

    def compare(self, v0: np.ndarray, va: np.ndarray, cells: int | None = None) -> tuple[float, float, float]:
        """How much better a pose's values ``va`` are than the stored pose's ``v0``, edge by edge.

        Args:
            v0: :meth:`values` of the stored pose, (M,).
            va: :meth:`values` of the alternative, (M,).
            cells: None: each edge's difference counts as independent evidence (the standard
                error of a plain mean). Else the image is cut into ``cells`` x ``cells`` cells
                and the edges of one cell (where the view's camera sees them, every frame
                alike) count as one cluster (:func:`clustered_se`): the same wall seen in
                three frames of a drive, or along one silhouette, is one piece of evidence,
                not three.

        Returns:
            ``(t, lift, gain)`` on the edges both bring into view: the mean paired difference
            in standard errors, the alternative's mean lift, and the mean difference itself;
            ``(-inf, 0.0, 0.0)`` when fewer than ``MIN_SCREEN_EDGES`` or
            ``MIN_SHARE_OF_STORED`` of the stored pose's do.
        """
        both = ~np.isnan(va) & ~np.isnan(v0)
        n = int(both.sum())
        if n < max(MIN_SCREEN_EDGES, MIN_SHARE_OF_STORED * np.count_nonzero(~np.isnan(v0))):
            return float("-inf"), 0.0, 0.0
        d = va[both] - v0[both]
        se = d.std() / np.sqrt(n) if cells is None else clustered_se(d, self.cells(cells)[both])
        return float(d.mean() / max(se, 1e-9)), float(va[both].mean()), float(d.mean())

    def cells(self, cells: int) -> np.ndarray:
        """Each edge's image cell where the view's camera sees it, (M,) int: the image cut
        into ``cells`` x ``cells`` (edges outside it in a border cell of their side)."""
        cam = self.camera
        uv = (self.points @ cam.K.T)[:, :2] / np.maximum(self.points[:, 2:3], 1e-6)
        col = np.clip(np.floor(uv[:, 0] / cam.size[0] * cells), -1, cells).astype(np.int64) + 1
        row = np.clip(np.floor(uv[:, 1] / cam.size[1] * cells), -1, cells).astype(np.int64) + 1
        return row * (cells + 2) + col


#: ``cv2.remap`` takes maps narrower than 32767 columns: points are sampled in rows this long.
_REMAP_ROW = 16384


def _sample(image: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Bilinear samples of ``image`` (h, w) float32 at pixel (``u``, ``v``) (n,) float32, 0
    outside: ``cv2.remap`` with a constant border, in rows of ``_REMAP_ROW``."""
    n = len(u)
    if n <= _REMAP_ROW:
        return cv2.remap(image, u[None], v[None], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)[0]
    rows = -(-n // _REMAP_ROW)
    pad = rows * _REMAP_ROW - n
    mu = np.concatenate([u, np.full(pad, -1e4, np.float32)]).reshape(rows, _REMAP_ROW)
    mv = np.concatenate([v, np.full(pad, -1e4, np.float32)]).reshape(rows, _REMAP_ROW)
    return cv2.remap(image, mu, mv, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0).reshape(-1)[:n]


def clustered_se(d: np.ndarray, cluster: np.ndarray) -> float:
    """The standard error of the mean of ``d`` (n,) with the values of one ``cluster`` (n,)
    correlated (a cluster-robust, "sandwich" estimate): the spread of the clusters' summed
    deviations, with the small-sample factor G / (G - 1) of G clusters. With one value per
    cluster it is the usual s / sqrt(n) (s with n - 1)."""
    n = len(d)
    _, idx = np.unique(cluster, return_inverse=True)
    sums = np.bincount(idx, weights=d - d.mean())
    g = len(sums)
    return float(np.sqrt((sums ** 2).sum() * g / max(g - 1, 1)) / n)


def edge_views(rig: Rig, images: Mapping[str, np.ndarray], scan: LidarScan,
               lifts: Mapping[str, tuple[np.ndarray, ...]] | None = None,
               ignore: Mapping[str, np.ndarray] | None = None) -> dict[str, EdgeView]:
    """Each camera's :class:`EdgeView` of one frame, from the doctor's own edge alignment (its
    edges, their visibility and its finest attraction map, less its local mean: the *lift*);
    :func:`pooled_views` joins several frames' views.

    ``lifts`` (camera -> its image's lift channels as :attr:`EdgeView.channels` holds them,
    from an earlier call on the same images) spares making the images' maps again: only the
    scan's edges are new. ``ignore``: camera -> (H, W) bool mask, calibrated size, of the
    pixels that do not show the world (:func:`~bevviz.calibration.lidar.masks.ignore_masks`):
    no edge is chosen or scored there."""
    return frame_views(rig, as_lidar_frames(images, scan, ignore)[0], lifts)


def frame_views(rig: Rig, frame: LidarFrame, lifts: Mapping[str, tuple[np.ndarray, ...]] | None = None
                ) -> dict[str, EdgeView]:
    """:func:`edge_views` of a frame already paired with its scan
    (:func:`~bevviz.calibration.lidar.frames.as_lidar_frames`: the scan's rings, ring edges
    and intensity ranks made once, whichever camera looks at it)."""
    out = {}
    for n in rig.names:
        if n not in frame.images:
            continue
        known = lifts.get(n) if lifts is not None else None
        ea = EdgeAlignment(rig[n], [frame], maps=known is None)
        if not len(ea):
            continue
        if known is None:
            att = ea.maps[0][ea.levels - 1]
            sigma = LOCAL_RAD * 0.5 * (rig[n].K[0, 0] + rig[n].K[1, 1]) * ea.scales[0]
            known = (_hide(np.stack([c - local_mean(c, sigma) for c in att]), frame.ignore.get(n)),)
        out[n] = EdgeView(rig[n], ea.points, ea.orient.astype(np.int64), known, bool(view_axes(rig[n])[0, 0] == 0),
                          np.zeros(len(ea.points), dtype=np.int64))
    return out


def _hide(channels: np.ndarray, ignore: np.ndarray | None) -> np.ndarray:
    """Lift ``channels`` (2, h, w) with the pixels ``ignore`` (H, W) bool, calibrated size,
    marks (the car's own body) set to NaN: an edge that lands on or next to them under any
    pose, the stored one or an alternative, is out of view (:meth:`EdgeView.values`)."""
    if ignore is None or not ignore.any():
        return channels
    h, w = channels.shape[1:]
    hidden = cv2.resize(ignore.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)
    out = channels.astype(np.float32, copy=True)
    out[:, hidden] = np.nan
    return out


def identical_images(images: Mapping[str, np.ndarray], views: Mapping[str, EdgeView]) -> list[tuple[str, str, float]]:
    """Cameras given the very image of another: (the camera whose view it fits worse, the
    other, by how much mean lift), one per pair of identical images."""
    out = []
    names = [n for n in views if n in images]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if images[a].shape == images[b].shape and np.array_equal(images[a], images[b]):
                lift = {n: float(np.nanmean(views[n].values(np.eye(4), views[n].camera.K, views[n].camera.size,
                                                            views[n].channels, views[n].sideways)))
                        for n in (a, b)}
                worse, better = (a, b) if lift[a] < lift[b] else (b, a)
                out.append((worse, better, lift[better] - lift[worse]))
    return out


#: The stored pose's best small rotation (:func:`rotated_best`) starts from the best of a grid
#: of pitch and yaw turns within +-``ROTATION_GRID_DEG`` (``ROTATION_GRID_STEP_DEG`` apart; a
#: pattern search from zero stopped 2 deg short of a nuScenes camera turned 2 deg in yaw, whose
#: edges lie outside the attraction at every 1 deg step), then the roll line through it (the
#: walk alone left TRI CAMERA_01 turned 2 deg in roll short: a position fitted it better) ...
ROTATION_GRID_DEG = 3.0
ROTATION_GRID_STEP_DEG = 0.5
#: ... and a pattern search on every axis then walks from this step down to the last.
ROTATION_STEPS_DEG = (0.25, 0.0625)


def _turns(ds_deg: np.ndarray) -> np.ndarray:
    """(P, 4, 4) the turns of :func:`hypothesis_matrices` for (roll, pitch, yaw) ``ds_deg`` (P, 3) deg."""
    out = np.stack([np.eye(4)] * len(ds_deg))
    out[:, :3, :3] = hypothesis_matrices(ds_deg)
    return out


def rotated_best(view: EdgeView, pre: np.ndarray, K: np.ndarray | None = None, size: tuple[int, int] | None = None,
                 grid: bool = True) -> np.ndarray:
    """The values (:meth:`EdgeView.values`, (M,)) of a pose at its best small rotation.

    Args:
        view: The camera's evidence.
        pre: (4, 4) the pose relative to the stored camera frame before the rotation: the
            LiDAR's correction in the camera's frame, times an alternative's ``alt_from_cam``.
        K: The pose's intrinsics (3, 3); the stored camera's when None.
        size: The pose's calibrated (W, H); the stored camera's when None.
        grid: Start from the best of the pitch-yaw grid (``ROTATION_GRID_DEG``; the stored
            pose's rotation, free to walk a few degrees), or from the pose itself (an
            alternative's rotation, which only the small walk of ``ROTATION_STEPS_DEG`` adjusts).

    Convention:
        The rotation ``d`` = (roll, pitch, yaw) deg of :func:`hypothesis_matrix` turns the
        pose's camera frame: the values are taken at ``turn(d) @ pre``.
    """
    cam = view.camera
    K = cam.K if K is None else K
    size = cam.size if size is None else size

    def values(d: np.ndarray) -> np.ndarray:
        return view.values(_turns(d[None])[0] @ pre, K, size, view.channels, view.sideways)

    d, best_v = np.zeros(3), values(np.zeros(3))
    seen = int(np.count_nonzero(~np.isnan(best_v)))
    enough = max(MIN_SCREEN_EDGES, 0.8 * seen)
    best = float(np.nanmean(best_v)) if seen else float("-inf")

    def better(trial: np.ndarray, v: np.ndarray | None = None) -> bool:
        nonlocal d, best, best_v
        v = values(trial) if v is None else v
        if int(np.count_nonzero(~np.isnan(v))) >= enough and float(np.nanmean(v)) > best:
            d, best, best_v = trial, float(np.nanmean(v)), v
            return True
        return False

    def in_turn(trials: list[np.ndarray]) -> None:  # each trial in turn, their values taken at once
        for t, v in zip(trials, view.values_many(_turns(np.stack(trials)) @ pre, K, size, view.channels,
                                                 view.sideways), strict=True):
            better(t, v)

    if grid:
        g = np.arange(-ROTATION_GRID_DEG, ROTATION_GRID_DEG + 1e-9, ROTATION_GRID_STEP_DEG)
        in_turn([np.array([0.0, pitch, yaw]) for pitch, yaw in itertools.product(g, g)])
        at = d.copy()
        in_turn([np.array([roll, at[1], at[2]]) for roll in g])  # then the roll line through the best of them
    step, last = ROTATION_STEPS_DEG
    while step >= last:
        moved = False
        for ax, sign in itertools.product(range(3), (1.0, -1.0)):
            trial = d.copy()
            trial[ax] += sign * step
            moved |= better(trial)
        if not moved:
            step /= 2
    return best_v


def walked_many(view: EdgeView, pres: np.ndarray, K: np.ndarray, size: tuple[int, int], start: np.ndarray,
                stop: Callable[[np.ndarray], bool] | None = None) -> np.ndarray:
    """Each of A poses at its best small rotation, walked side by side: at every step each pose
    moves to the best of its six neighbours (``ROTATION_STEPS_DEG`` apart on each axis, the
    step halved where none is better, down to the last), all poses' neighbours taken at once
    (:meth:`EdgeView.values_many`). The walk of :func:`rotated_best` without its grid, steepest
    first instead of axis by axis, so its optimum may differ a little.

    Args:
        view: The camera's evidence.
        pres: (A, 4, 4) each pose relative to the stored camera frame before the rotation.
        K: (A, 3, 3) each pose's intrinsics.
        size: The poses' calibrated (W, H).
        start: (A, M) each pose's values unturned (:meth:`EdgeView.values`).
        stop: Given a pose's values (M,), whether its walk may end there (it is good enough).

    Returns:
        (A, M) the values at each pose's best rotation (or where ``stop`` ended its walk).

    Convention:
        As :func:`rotated_best`: a pose's values at ``turn(d) @ pre``.
    """
    A = len(pres)
    d = np.zeros((A, 3))
    best_v = start.copy()
    seen = np.count_nonzero(~np.isnan(start), axis=1)
    enough = np.maximum(MIN_SCREEN_EDGES, 0.8 * seen)
    best = np.array([float(np.nanmean(v)) if n else float("-inf") for v, n in zip(start, seen, strict=True)])
    step = np.full(A, ROTATION_STEPS_DEG[0])
    active = np.array([stop is None or not stop(v) for v in best_v])
    moves = np.concatenate([np.eye(3), -np.eye(3)])
    while True:
        active &= step >= ROTATION_STEPS_DEG[1]
        idx = np.flatnonzero(active)
        if not len(idx):
            return best_v
        trials = (d[idx, None, :] + step[idx, None, None] * moves[None]).reshape(-1, 3)
        vals = view.values_many(_turns(trials) @ np.repeat(pres[idx], 6, axis=0), np.repeat(K[idx], 6, axis=0), size,
                                view.channels, view.sideways).reshape(len(idx), 6, -1)
        counts = np.count_nonzero(~np.isnan(vals), axis=2)  # (len(idx), 6)
        means = np.where(counts >= np.maximum(enough[idx, None], 1),
                         np.nansum(vals, axis=2) / np.maximum(counts, 1), float("-inf"))
        for j, a in enumerate(idx):
            k = int(np.argmax(means[j]))
            if means[j, k] > best[a]:
                d[a], best[a], best_v[a] = trials[6 * j + k], means[j, k], vals[j, k]
                if stop is not None and stop(best_v[a]):
                    active[a] = False
            else:
                step[a] /= 2


def pooled_views(rig: Rig, more_frames: Sequence[tuple[Mapping[str, np.ndarray], object]],
                 views: Mapping[str, EdgeView], first: tuple[Mapping[str, np.ndarray], LidarScan],
                 ignore: Mapping[str, np.ndarray] | None = None
                 ) -> tuple[dict[str, EdgeView], list[LidarFrame], list[str], dict[str, tuple[int, ...]]]:
    """The screened cameras' ``views`` (one frame's: ``first``, its images and scan) extended by
    ``more_frames`` ((images, scan) pairs of the same rig), the frames of ``more_frames`` they
    hold (in order, each paired with its scan), notes on the frames left out, and the cameras
    whose image froze (camera -> indices of the frames, ``first`` 0:
    :func:`~bevviz.calibration.lidar.repeats.frozen_images`). Left out: a frame without every
    screened camera's image (only their edges and maps are made), one that repeats an earlier
    frame's view (:func:`~bevviz.calibration.lidar.repeats.repeated_views`), and one where a
    screened camera's image froze. ``views`` and no frame when no other frame can be added or a
    screened camera sees no edge in one. ``ignore``: as :func:`edge_views` takes it, for every
    frame."""
    screened = Rig([rig[n] for n in views])  # the others' views would be dropped
    scans = [as_lidar_scan(f_scan, "more_frames") for _, f_scan in more_frames]
    repeats = repeated_views([first[1], *scans])
    frozen = frozen_images([first[0], *(f_images for f_images, _ in more_frames)], repeats)
    stalled = {k for n, ks in frozen.items() if n in views for k in ks}
    used = [as_lidar_frames(f_images, f_scan, ignore)[0]
            for k, ((f_images, _), f_scan) in enumerate(zip(more_frames, scans), start=1)
            if k in repeats.kept and k not in stalled and all(n in f_images for n in views)]
    notes = [repeats.reason] if repeats.reason else []
    per_frame = [frame_views(screened, f) for f in used]
    if not per_frame or not all(n in v for v in per_frame for n in views):
        return dict(views), [], notes, frozen
    return {n: _joined([views[n], *(v[n] for v in per_frame)]) for n in views}, used, notes, frozen


def seen_from(view: EdgeView, camera: Camera, frames: Sequence[LidarFrame]) -> EdgeView | None:
    """``view``'s evidence with its edges chosen from ``camera``'s place instead (an
    alternative pose of ``view.camera``, same name): the scans' edges that camera sees, in its
    frame, scored on ``view``'s image maps (``frames``: the frames ``view`` holds, in its
    order). None where a frame shows that camera no edge.

    Which edges a camera sees (the silhouettes between near and far, what hides what)
    depends on where it stands, so edges chosen from one place favour that place (see
    ``pose.POSE_T``)."""
    parts = []
    for f, frame in enumerate(frames):
        v = frame_views(Rig([camera]), frame, {camera.name: (view.channels[f],)})
        if camera.name not in v:
            return None
        parts.append(v[camera.name])
    return _joined(parts)


def _joined(parts: Sequence[EdgeView]) -> EdgeView:
    """One camera's views of several frames as one view over all of them (frames in order)."""
    offsets = np.cumsum([0] + [len(p.channels) for p in parts[:-1]])
    return EdgeView(parts[0].camera, np.concatenate([p.points for p in parts]),
                    np.concatenate([p.orient for p in parts]), tuple(c for p in parts for c in p.channels),
                    parts[0].sideways, np.concatenate([p.frame + o for p, o in zip(parts, offsets)]))
