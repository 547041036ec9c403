"""LiDAR evidence: how far each camera's rotation is from where the LiDAR's edges put it.

Per camera, :class:`~bevviz.calibration.lidar.alignment.EdgeAlignment` (the LiDAR's edge points
against the image's edges, after Levinson & Thrun: see that module) gives the *score
landscape* on a grid of rotations, its best separated peaks refined, a cluster bootstrap of
the best ``BOOTSTRAP_CANDIDATES`` optima and the per-axis profiles. This module turns them
into a :class:`CameraEvidence`:

* the optimum and the stored pose in robust z within the landscape (its median and robust
  spread), which the verdict compares;
* the bootstrap replicates: two near-equal optima show up as a spread, not as a confident
  pick. The spread measures noise, not bias, so
* the left and the right image half are each refined on their own from the optimum, and
  what each gains over the stored pose is kept;
* the timing fit (:mod:`~bevviz.calibration.lidar.sync`): the rotation fitted together with a
  displacement of the LiDAR along the car's axis;
* a *second look*: the same evidence on attraction maps less their local mean
  (:func:`~bevviz.calibration.lidar.edge_maps.oriented_attraction_maps`, ``LOCAL_MEAN_RAD``),
  its search walking on from each of its best ``SECOND_LOOK_WALKS`` optima at the edge. On
  the raw maps a textured region (a tree line, foliage) scores for being textured, and a
  camera's score can rise steadily into it, to an optimum of chance 6-10 deg off, or spread
  the landscape's best over a wide valley; less its local mean a point scores only for lying
  nearer an edge than its surroundings do. The verdict reads it only where the first look
  doubts its own landscape (:func:`bevviz.calibration.verdicts.lidar_verdict`);
  docs/calibration.md has the figures.

:mod:`~bevviz.calibration.lidar.consensus` then compares the cameras with each other.

Convention:
    Rotations are body-frame (FLU: roll about the optical axis, pitch positive looking down,
    yaw positive to the left) ``(roll, pitch, yaw)`` in degrees composed
    ``Rz(yaw) Ry(pitch) Rx(roll)``, as :func:`bevviz.calibration.perturbations.perturb_camera`.
    A *hypothesis* ``d`` is the rotation applied to the stored camera; the *offset* is
    ``-d`` at the optimum: the stored camera is turned by ``offset`` away from where the
    evidence puts it (``perturb_rig(true, cam, *offset)`` gives the stored rig). Pixels at
    centres; images may be any size (coordinates scale as ``(u + 0.5) * s - 0.5``). See
    docs/conventions.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bevviz.calibration.lidar.alignment import (
    AXES,
    BOOTSTRAP,
    BOOTSTRAP_CANDIDATES,
    EDGE_MARGIN_DEG,
    SEARCH_RADIUS_DEG,
    EdgeAlignment,
)
from bevviz.calibration.lidar.edge_maps import LOCAL_MEAN_RAD
from bevviz.calibration.lidar.edges import DEPTH, REFLECTIVITY
from bevviz.calibration.lidar.frame_agreement import FrameAgreement, frames_to_set_aside
from bevviz.calibration.lidar.frames import LidarFrame, as_lidar_frames
from bevviz.calibration.lidar.repeats import frozen_images, frozen_words, repeated_views
from bevviz.calibration.lidar.sync import TimingFit, timing_fit
from bevviz.camera import Camera, Rig

#: The second look's search walks on from each of its best this many optima that lie at
#: the edge of its first grid (the first look: from the best alone). Measured on the TRI
#: frames (docs/calibration.md): walking from the best alone, one camera turned 3.6 deg in
#: pitch was convicted at an optimum of chance 6.6 deg from the truth, on the other side of
#: the grid; walking from three, it is left at the edge.
SECOND_LOOK_WALKS = 3

__all__ = [
    "SECOND_LOOK_WALKS",
    "CameraEvidence",
    "agreement_of",
    "camera_evidence",
    "lidar_evidence",
    "with_second_looks",
]


@dataclass
class CameraEvidence:
    """What the LiDAR says about one camera.

    Attributes:
        camera: Camera name.
        offset_deg: (roll, pitch, yaw) the stored camera is turned away from the best
            alignment, (3,) degrees (see the module's convention).
        replicates_deg: Offsets of the bootstrap replicates, (B, 3).
        n_points: Visible edge points supporting it (all frames).
        n_depth: Of which depth edges.
        n_reflectivity: Of which reflectivity edges.
        n_clusters: Image cells holding them (the bootstrap's units).
        score_stored: Alignment score of the stored calibration (finest scale).
        score_best: Alignment score at the optimum.
        score_median: Median coarse score over the search grid (the "flat" level).
        score_best_coarse: Coarse score at the optimum (compare with ``score_median``).
        candidates: Other optima: (offset (3,), score), best first.
        profiles: Axis -> (offsets (K,), scores (K,)) through the optimum.
        uv_stored: Edge points in the first frame at the stored calibration, (M0, 2) pixels.
        uv_best: The same points at the optimum, (M0, 2).
        kind_first: Their kinds, (M0,).
        seconds: Wall time.
        score_spread: Robust spread of the coarse score landscape (1.4826 x its median
            absolute deviation over the search grid): the unit of the robust z values.
        score_stored_coarse: Coarse score of the stored calibration.
        halves_deg: Offsets found by the left and the right image half alone, (2, 3)
            degrees (each refined from the full optimum; NaN where a half has no point).
        half_gain: Per half, the finest-level score gain of the full optimum over the
            stored calibration in units of ``score_spread``, (2,).
        half_points: Edge points per half, (2,).
        frames: Frames that held this camera's image.
        points_per_frame: Visible edge points in each of those frames, (frames,).
        median_depth_m: Median depth (metres, along the optical axis) of the visible edge
            points; NaN without any (a scan in millimetres puts it in the thousands).
        timing: The joint optimum of rotation and a displacement of the LiDAR along the
            car's axis (:mod:`~bevviz.calibration.lidar.sync`): whether a timing error explains
            the offset.
        radius_deg: Half-width (degrees) of the search in the end: ``SEARCH_RADIUS_DEG``, or
            wider where the optimum lay at its edge
            (:meth:`~bevviz.calibration.lidar.alignment.EdgeAlignment.search`).
        set_aside: Frames (indices of those given) left out of this evidence because they
            disagree with the others (:mod:`~bevviz.calibration.lidar.frame_agreement`);
            :attr:`frames` counts the ones kept.
        set_aside_reason: Why ("" when none was).
        repeats: Frames (indices of those given) left out because they repeat an earlier
            frame's view (:mod:`~bevviz.calibration.lidar.repeats`: a parked car);
            :attr:`frames` counts the ones kept.
        repeats_reason: Which frame each repeats, and how far the car moved ("" when none).
        frozen: Frames (indices of those given) whose image of this camera is the image of the
            frame before while the LiDAR saw the car move
            (:func:`~bevviz.calibration.lidar.repeats.frozen_images`): left out of this
            camera's evidence.
        frozen_reason: Why ("" when none was).
        second_look: The same evidence on attraction maps less their local mean (the
            module docstring), for a camera with edge points; None for a second look itself,
            without edge points, or where not asked for.
    """

    camera: str
    offset_deg: np.ndarray
    replicates_deg: np.ndarray
    n_points: int
    n_depth: int = 0
    n_reflectivity: int = 0
    n_clusters: int = 0
    score_stored: float = 0.0
    score_best: float = 0.0
    score_median: float = 0.0
    score_best_coarse: float = 0.0
    candidates: list[tuple[np.ndarray, float]] = field(default_factory=list)
    profiles: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    uv_stored: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    uv_best: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    kind_first: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    seconds: float = 0.0
    score_spread: float = 0.0
    score_stored_coarse: float = 0.0
    halves_deg: np.ndarray = field(default_factory=lambda: np.full((2, 3), np.nan))
    half_gain: np.ndarray = field(default_factory=lambda: np.zeros(2))
    half_points: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))
    frames: int = 0
    points_per_frame: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    median_depth_m: float = float("nan")
    timing: TimingFit = field(default_factory=TimingFit)
    radius_deg: float = SEARCH_RADIUS_DEG
    set_aside: tuple[int, ...] = ()
    set_aside_reason: str = ""
    repeats: tuple[int, ...] = ()
    repeats_reason: str = ""
    frozen: tuple[int, ...] = ()
    frozen_reason: str = ""
    second_look: CameraEvidence | None = None

    def used(self, n_frames: int) -> list[int]:
        """Indices of the frames (of the ``n_frames`` this evidence was made from, as given) that
        went into it: neither set aside, nor a repeated view, nor one where this camera's image froze."""
        return [k for k in range(n_frames) if k not in (*self.set_aside, *self.repeats, *self.frozen)]

    def pooled(self, frames: Sequence[LidarFrame]) -> list[LidarFrame]:
        """The frames of ``frames`` (those this evidence was made from, as given) that went into it (:meth:`used`)."""
        return [frames[k] for k in self.used(len(frames))]

    @property
    def at_search_edge(self) -> bool:
        """Whether the optimum lies within ``EDGE_MARGIN_DEG`` of the edge of the search as
        widened (:attr:`radius_deg`) on some axis: the score may go on rising beyond it."""
        return self.n_points > 0 and float(np.max(np.abs(self.offset_deg))) > self.radius_deg - EDGE_MARGIN_DEG

    @property
    def z_best(self) -> float:
        """Robust z of the optimum within the coarse score landscape: how far the best
        alignment stands above a typical rotation (no structure: near 0)."""
        return (self.score_best_coarse - self.score_median) / max(self.score_spread, 1e-9)

    @property
    def z_stored(self) -> float:
        """Robust z of the stored calibration within the coarse score landscape."""
        return (self.score_stored_coarse - self.score_median) / max(self.score_spread, 1e-9)

    @property
    def axis_drop_z(self) -> np.ndarray:
        """Per axis, how much the score drops (robust z, finest scale over ``score_spread``)
        when that axis alone is set back to its stored value, the other two kept at the
        optimum, (3,) (from :attr:`profiles`; NaN for an axis without a profile): whether the
        landscape itself prefers the offset on that axis, or the optimum slides along a flat
        valley of it."""
        out = np.full(3, np.nan)
        for k, name in enumerate(AXES):
            if name in self.profiles:
                offs, scores = self.profiles[name]
                out[k] = (self.score_best - float(scores[int(np.argmin(np.abs(offs)))])) / max(self.score_spread, 1e-9)
        return out

    @property
    def central_offset_deg(self) -> np.ndarray:
        """The offset the verdicts and the consensus go by, (3,) degrees: the median of the
        bootstrap replicates, or :attr:`offset_deg` without replicates."""
        return np.median(self.replicates_deg, axis=0) if len(self.replicates_deg) else self.offset_deg

    @property
    def sd_deg(self) -> np.ndarray:
        """Bootstrap standard deviation per axis, (3,) degrees (inf without replicates)."""
        if len(self.replicates_deg) < 2:
            return np.full(3, np.inf)
        return self.replicates_deg.std(axis=0)


def camera_evidence(camera: Camera, frames: Sequence[LidarFrame], replicates: int = BOOTSTRAP,
                    seed: int = 0, alignment: EdgeAlignment | None = None,
                    second_look: bool = True) -> CameraEvidence:
    """Align one camera with the LiDAR edges of ``frames``.

    Args:
        camera: The camera (stored calibration).
        frames: Frames with this camera's image (others are skipped); with ``alignment``,
            the frames it was built on.
        replicates: Bootstrap replicates (0: no uncertainty).
        seed: Bootstrap seed (results are deterministic for a seed).
        alignment: The camera's :class:`EdgeAlignment` on ``frames`` when already built
            (it is the costly part; a refinement of the same camera can reuse it).
        second_look: False for no :attr:`CameraEvidence.second_look` (half the cost).

    Returns:
        :class:`CameraEvidence`; with no visible edge point, offsets of 0 and ``n_points`` 0.
    """
    t0 = time.perf_counter()
    ev = _evidence(camera, EdgeAlignment(camera, frames) if alignment is None else alignment, replicates, seed, 1)
    if second_look and ev.n_points > 0:
        ev.second_look = _second_look(camera, frames, replicates, seed)
    ev.seconds = time.perf_counter() - t0
    return ev


def _second_look(camera: Camera, frames: Sequence[LidarFrame], replicates: int, seed: int) -> CameraEvidence:
    """The second look: the evidence on attraction maps less their local mean."""
    return _evidence(camera, EdgeAlignment(camera, frames, local_mean_rad=LOCAL_MEAN_RAD), replicates, seed,
                     SECOND_LOOK_WALKS)


def _evidence(camera: Camera, al: EdgeAlignment, replicates: int, seed: int, walks: int) -> CameraEvidence:
    """:func:`camera_evidence` on an alignment already built, its search walking on from
    the best ``walks`` optima at the edge (:meth:`EdgeAlignment.search`); no second look."""
    t0 = time.perf_counter()
    n = len(al)
    if n == 0:
        return CameraEvidence(camera.name, np.zeros(3), np.zeros((0, 3)), 0)
    found, landscape, radius = al.search(walks)
    median = float(np.median(landscape))
    spread = float(1.4826 * np.median(np.abs(landscape - median)))
    best = found[0][0]
    reps = np.zeros((0, 3))
    if replicates:
        reps = al.bootstrap([c for c, _ in found[:BOOTSTRAP_CANDIDATES]], replicates, seed)
    last = al.levels - 1
    halves, gains = np.full((2, 3), np.nan), np.zeros(2)
    side_w = np.stack([(al.side == h).astype(np.float64) for h in (0, 1)])  # (2, M)
    counts = side_w.sum(axis=1).astype(np.int64)
    ds = np.repeat(best[None], 2, axis=0)  # each half refined from the full optimum, side by side
    for level in range(al.levels):
        ds, _ = al.refine_many(ds, level, side_w, step=0.25 if level == 0 else 0.1)
    for h in (0, 1):
        if counts[h] == 0:
            continue
        halves[h] = -ds[h]
        gains[h] = (al.score(best, last, side_w[h]) - al.score(np.zeros(3), last, side_w[h])) / max(spread, 1e-9)
    first = al.frame == 0
    return CameraEvidence(
        camera=camera.name, offset_deg=-best, replicates_deg=-reps, n_points=n,
        n_depth=int(np.count_nonzero(al.kind == DEPTH)), n_reflectivity=int(np.count_nonzero(al.kind == REFLECTIVITY)),
        n_clusters=int(len(np.unique(al.cluster))), score_stored=al.score(np.zeros(3), last),
        score_best=found[0][1], score_median=median, score_best_coarse=al.score(best, 0),
        candidates=[(-c, s) for c, s in found[1:]],
        profiles=al.profiles(best), uv_stored=al.uv(np.zeros(3))[first], uv_best=al.uv(best)[first],
        kind_first=al.kind[first], seconds=time.perf_counter() - t0, score_spread=spread,
        score_stored_coarse=al.score(np.zeros(3), 0), halves_deg=halves, half_gain=gains, half_points=counts,
        frames=len(al.maps), points_per_frame=np.bincount(al.frame, minlength=len(al.maps)),
        median_depth_m=float(np.median(al.points[:, 2])),
        timing=timing_fit(al, best, found[0][1], camera.cam_from_ego[:3, 0], spread), radius_deg=radius)


def lidar_evidence(rig: Rig, images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]], lidar: object,
                   cameras: Sequence[str] | None = None, replicates: int = BOOTSTRAP,
                   progress: Callable[[int, int, str], None] | None = None,
                   set_aside: bool = True, agreement: FrameAgreement | None = None,
                   second_look: bool = True) -> dict[str, CameraEvidence]:
    """LiDAR evidence for every camera (or ``cameras``) of a rig.

    With three frames or more, a frame the cameras find at odds with the others
    (:func:`~bevviz.calibration.lidar.frame_agreement.frames_to_set_aside`) is left out of
    the evidence of every camera that has all the frames, and each such evidence says so
    (:attr:`CameraEvidence.set_aside`, :attr:`CameraEvidence.set_aside_reason`). Before that, a frame
    that repeats an earlier frame's view (a parked car) is left out of every camera's evidence,
    and a frame where a camera's image froze while the car moved out of that camera's
    (:mod:`~bevviz.calibration.lidar.repeats`; :attr:`CameraEvidence.repeats`,
    :attr:`CameraEvidence.frozen`).

    Args:
        rig: The rig (N_cam cameras).
        images: One frame (camera name -> uint8 RGB (H, W, 3)) or a list of frames.
        lidar: One scan per frame (see :func:`as_lidar_frames`), or already paired
            :class:`LidarFrame` objects (then ``images`` is ignored).
        cameras: Cameras to align; default all.
        replicates: Bootstrap replicates per camera.
        progress: Optional ``callback(done, total, camera)``.
        set_aside: False to pool every frame whatever it shows.
        agreement: What was decided for these frames already (e.g. from the evidence of the
            rig's other cameras, :func:`agreement_of`): then not decided again on the
            cameras asked for, which may be too few to vote.
        second_look: False for evidence without :attr:`CameraEvidence.second_look` (half
            the cost); :func:`with_second_looks` adds them where wanted, the same as here.

    Returns:
        Camera name -> :class:`CameraEvidence`, in rig order.
    """
    if isinstance(lidar, (list, tuple)) and lidar and all(isinstance(f, LidarFrame) for f in lidar):
        frames = list(lidar)
    else:
        frames = as_lidar_frames(images, lidar)
    names = list(rig.names if cameras is None else cameras)
    total = 2 * len(names)  # each camera's edges and maps first (the frames' agreement needs all), then its evidence

    def report(done: int, name: str) -> None:
        if progress is not None:
            progress(done, total, name)

    views = repeated_views([f.scan for f in frames])  # a view seen again is not more evidence
    frozen = frozen_images([f.images for f in frames], views)  # nor an image that stayed while the car moved
    distinct = [replace(frames[k], images={n: im for n, im in frames[k].images.items() if k not in frozen.get(n, ())})
                if any(k in ks for ks in frozen.values()) else frames[k] for k in views.kept]
    alignments = {}
    for k, name in enumerate(names):
        report(k, name)
        alignments[name] = EdgeAlignment(rig[name], distinct)
    if agreement is None:  # decided on the distinct views, said in the numbers of the frames given
        agreement = (frames_to_set_aside(alignments, [k + 1 for k in views.kept], len(frames)) if set_aside
                     else FrameAgreement())
    kept = [i for i, k in enumerate(views.kept) if k not in agreement.set_aside]
    out = {}
    for k, name in enumerate(names):
        report(len(names) + k, name)
        al = alignments.pop(name)  # each camera's maps are let go once its evidence is made
        if len(kept) < len(distinct) and len(al.scales) == len(distinct):
            ev = camera_evidence(rig[name], [distinct[i] for i in kept], replicates, alignment=al.only(kept),
                                 second_look=False)
            ev = replace(ev, set_aside=agreement.set_aside, set_aside_reason=agreement.reason)
        else:
            ev = camera_evidence(rig[name], distinct, replicates, alignment=al, second_look=False)
        ev = replace(ev, repeats=tuple(sorted(views.repeats)), repeats_reason=views.reason, frozen=frozen.get(name, ()),
                     frozen_reason=frozen_words(name, frozen[name]) if name in frozen else "")
        out[name] = with_second_looks(rig, {name: ev}, frames, [name])[name] if second_look else ev
    report(total, "")
    return out


def with_second_looks(rig: Rig, evidence: Mapping[str, CameraEvidence], frames: Sequence[LidarFrame],
                      cameras: Sequence[str]) -> dict[str, CameraEvidence]:
    """``evidence`` with a :attr:`CameraEvidence.second_look` for each of ``cameras`` that has
    edge points and none yet: the very look :func:`lidar_evidence` makes (the same frames,
    those set aside left out, as many replicates as the first look, the same seed), made only
    where it is wanted.

    Args:
        rig: The rig the evidence is of.
        evidence: Camera name -> :class:`CameraEvidence` made by :func:`lidar_evidence` on ``frames``.
        frames: The :class:`LidarFrame` objects it was made from.
        cameras: The cameras that want a second look.

    Returns:
        Camera name -> :class:`CameraEvidence`, every camera of ``evidence``.
    """
    out = dict(evidence)
    for name in cameras:
        ev = out[name]
        if ev.second_look is not None or ev.n_points == 0:
            continue
        look = _second_look(rig[name], ev.pooled(frames), len(ev.replicates_deg), 0)
        look = replace(look, set_aside=ev.set_aside, set_aside_reason=ev.set_aside_reason, repeats=ev.repeats,
                       repeats_reason=ev.repeats_reason, frozen=ev.frozen, frozen_reason=ev.frozen_reason)
        out[name] = replace(ev, second_look=look)
    return out


def agreement_of(evidence: Mapping[str, CameraEvidence]) -> FrameAgreement | None:
    """The frames the evidence of a rig's cameras set aside (what :func:`lidar_evidence`
    decided for them), for more cameras of the same frames; None without any evidence.

    Args:
        evidence: Camera name -> its evidence over the same frames.
    """
    for ev in evidence.values():
        return FrameAgreement(set_aside=ev.set_aside, reason=ev.set_aside_reason)
    return None
