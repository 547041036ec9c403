"""Rank the 12 storage conventions of a raw calibration by physical plausibility.

Given calibration exactly as a file stores it (:class:`bevviz.storage.RawCamera`), every
candidate :class:`bevviz.storage.Convention` (extrinsic direction x quaternion order x
camera axes) is turned into a rig and scored on evidence any real vehicle rig shows:

1. **height** - every camera sits above the ground at a plausible mounting height
   (0.5 to 3 m).
2. **level axis** - optical axes are near horizontal (elevation within 20 degrees).
3. **outward** - optical axes point away from the rig centre (the mean camera position),
   as surround-view cameras do.
4. **ground below horizon** - the ground 10 m ahead of a camera projects into the lower half
   of its image, in front of it, and the image's "down" points down (no flipped or rolled
   image). The classic y/z swap and the OpenGL (RUB) axes fail exactly this.
5. **overlap** - neighbouring cameras share ground (their footprints on z = 0 overlap).
6. **seams** (only with images) - where footprints overlap, the cameras agree on what the
   ground looks like (see :mod:`bevviz.calibration`).

Each check gives a soft score in [0, 1] per camera (1 = plainly plausible, decaying with the
size of the violation, so that even two bad candidates are ordered by how bad they are); a
candidate's score is the mean over the checks. Candidates that give *identical* cameras (for
example any quaternion order when rotations are stored as matrices) are reported as ties in
their evidence rather than silently ordered.

Convention:
    Ego frame x forward, y left, z up; the ground is the plane z = 0 (nuScenes ego frames sit
    on the rear axle at road level). Camera frame RDF. See :mod:`bevviz.storage` and
    docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bevviz.calibration import rig_seam_cost
from bevviz.camera import Rig, camera_from_raw, measured_from_ground
from bevviz.checks import field_error
from bevviz.errors import InputError
from bevviz.projection import project_points
from bevviz.storage import Convention, RawCamera
from bevviz.threads import single_threaded

#: Plausible camera mounting heights above the ground (metres).
HEIGHT_RANGE = (0.5, 3.0)
#: Largest optical-axis elevation (degrees) still counted as "near horizontal".
MAX_ELEVATION_DEG = 20.0
#: Distance (metres) of the ground point used for the "below the horizon" check.
GROUND_AHEAD_M = 10.0
#: Ground ring (metres from the rig centre) on which footprints are compared.
OVERLAP_RING = (3.0, 30.0)

CHECKS = ("height", "level axis", "outward", "ground below horizon", "overlap")
#: With images, seams are compared only for readings within this score of the best geometry.
SEAM_MARGIN = 0.3


@dataclass
class ConventionScore:
    """One candidate convention and how plausible the rig it gives is.

    Attributes:
        convention: The candidate.
        score: Mean of the per-check scores, in [0, 1]; higher is more plausible. ``-inf``
            when the raw numbers cannot even be read this way (e.g. an invalid rotation).
        evidence: Readable sentences, one per check (plus ties and errors).
        checks: Per-check scores in [0, 1], keyed by check name.
        rig: The rig this candidate gives, or ``None`` when it could not be built.
        ties: Labels of other candidates giving identical cameras.
    """

    convention: Convention
    score: float
    evidence: list[str] = field(default_factory=list)
    checks: dict[str, float] = field(default_factory=dict)
    rig: Rig | None = None
    ties: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The convention's short label."""
        return self.convention.label


def _soft(excess: np.ndarray, scale: float) -> np.ndarray:
    """1 where ``excess <= 0``, decaying as ``exp(-excess / scale)`` beyond."""
    return np.exp(-np.clip(excess, 0.0, None) / scale)


def _names(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _geometry(rig: Rig) -> dict[str, np.ndarray]:
    """Per-camera geometry in the ego frame.

    Returns:
        position (N, 3), optical axis (N, 3), down axis (N, 3), right axis (N, 3), centre (3,).
    """
    E = np.stack([c.ego_from_cam for c in rig])  # (N, 4, 4)
    pos = E[:, :3, 3]
    return {"position": pos, "axis": E[:, :3, 2], "down": E[:, :3, 1], "right": E[:, :3, 0],
            "centre": pos.mean(axis=0)}


def _check_height(rig: Rig, g: dict) -> tuple[float, str]:
    z = g["position"][:, 2]
    lo, hi = HEIGHT_RANGE
    excess = np.maximum(lo - z, z - hi)
    s = _soft(excess, 0.5)
    bad = [n for n, e in zip(rig.names, excess) if e > 0]
    if not bad:
        text = (f"All {len(rig)} cameras sit {z.min():.2f}-{z.max():.2f} m above the ground "
                f"(plausible: {lo}-{hi} m).")
    else:
        worst = int(np.argmax(excess))
        below = int(np.sum(z < 0))
        text = (f"{len(bad)} of {len(rig)} cameras at an implausible height "
                f"({_names(bad)}; {rig.names[worst]} at {z[worst]:+.2f} m"
                + (f", {below} below the ground" if below else "") + ").")
    return float(s.mean()), text


def _check_level(rig: Rig, g: dict) -> tuple[float, str]:
    el = np.degrees(np.arcsin(np.clip(g["axis"][:, 2], -1.0, 1.0)))
    s = _soft(np.abs(el) - MAX_ELEVATION_DEG, 15.0)
    bad = [n for n, e in zip(rig.names, el) if abs(e) > MAX_ELEVATION_DEG]
    if not bad:
        text = (f"All optical axes are near horizontal (elevation {el.min():+.1f} to "
                f"{el.max():+.1f} deg).")
    else:
        worst = int(np.argmax(np.abs(el)))
        text = (f"{len(bad)} of {len(rig)} optical axes are far from horizontal ({_names(bad)}; "
                f"{rig.names[worst]} looks {'up' if el[worst] > 0 else 'down'} at "
                f"{abs(el[worst]):.0f} deg).")
    return float(s.mean()), text


def _check_outward(rig: Rig, g: dict) -> tuple[float, str]:
    if len(rig) < 2:
        return 1.0, "Single camera: outward pointing cannot be judged (neutral)."
    off = (g["position"] - g["centre"])[:, :2]
    ax = g["axis"][:, :2]
    n_off = np.linalg.norm(off, axis=1)
    n_ax = np.linalg.norm(ax, axis=1)
    ok = (n_off > 0.05) & (n_ax > 1e-3)
    cos = np.where(ok, (off * ax).sum(1) / np.maximum(n_off * n_ax, 1e-12), 1.0)
    ang = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    # Surround cameras point within ~90 deg of their offset from the centre; allow 100.
    s = _soft(ang - 100.0, 30.0)
    bad = [n for n, a in zip(rig.names, ang) if a > 100.0]
    if not bad:
        text = "Every optical axis points outward from the rig centre (away from the vehicle)."
    else:
        text = (f"{len(bad)} of {len(rig)} cameras point inward, towards the vehicle "
                f"({_names(bad)}; up to {ang.max():.0f} deg from outward).")
    return float(s.mean()), text


def _check_ground(rig: Rig, g: dict) -> tuple[float, str]:
    scores, bad, reasons = [], [], []
    for i, cam in enumerate(rig):
        axis_h = g["axis"][i].copy()
        axis_h[2] = 0.0
        norm = np.linalg.norm(axis_h)
        if norm < 1e-6:
            scores.append(0.0)
            bad.append(cam.name)
            reasons.append(f"{cam.name} looks straight {'up' if g['axis'][i, 2] > 0 else 'down'}")
            continue
        target = g["position"][i] + GROUND_AHEAD_M * axis_h / norm
        target[2] = 0.0
        p = cam.cam_from_ego @ np.append(target, 1.0)
        down_z = g["down"][i, 2]  # -1 when the image's "down" points at the ground
        tilt = float(np.degrees(np.arccos(np.clip(-down_z, -1.0, 1.0))))
        s_down = float(_soft(np.array(tilt - 20.0), 20.0))
        if p[2] <= 1e-6:
            s_cam, why = 0.0, f"{cam.name} has the ground ahead behind it"
        else:
            v = cam.K[1] @ (p[:3] / p[2])
            below = (v - cam.K[1, 2]) / cam.height  # > 0: lower half
            s_cam = float(np.clip(0.5 + 4.0 * below, 0.0, 1.0)) * s_down
            if tilt > 60.0:
                why = (f"{cam.name}'s image 'down' is {tilt:.0f} deg away from the ground "
                       f"({'upside down' if tilt > 135 else 'rolled sideways'})")
            else:
                why = (f"{cam.name} sees the ground ahead at v = {v:.0f} px "
                       f"({'below' if below > 0 else 'above'} the principal point "
                       f"{cam.K[1, 2]:.0f})")
        scores.append(s_cam)
        if s_cam < 0.5:
            bad.append(cam.name)
            reasons.append(why)
    s = float(np.mean(scores))
    if not bad:
        text = (f"The ground {GROUND_AHEAD_M:.0f} m ahead of every camera projects into the lower "
                "half of its image, and image 'down' points at the ground.")
    else:
        text = (f"{len(bad)} of {len(rig)} cameras see the ground above their horizon or rolled "
                f"(the y/z swap or flipped-axes signature): {'; '.join(reasons[:2])}.")
    return s, text


def ground_footprints(rig: Rig, ring: tuple[float, float] = OVERLAP_RING,
                      n_radii: int = 28, n_angles: int = 360) -> np.ndarray:
    """Which ground points of a polar ring around the rig centre each camera sees.

    Args:
        rig: The rig (N_cam cameras).
        ring: (r_min, r_max) metres around the mean camera position.
        n_radii: Radial samples.
        n_angles: Angular samples.

    Returns:
        Visibility, shape (N_cam, n_radii, n_angles), bool.

    Convention:
        Ground is z = 0 in the ego frame; a point counts if it projects inside the image
        (pixel-centre bounds) in front of the camera.
    """
    centre = np.stack([c.position for c in rig]).mean(axis=0)
    r = np.linspace(ring[0], ring[1], n_radii)
    a = np.linspace(-np.pi, np.pi, n_angles, endpoint=False)
    rr, aa = np.meshgrid(r, a, indexing="ij")
    pts = np.stack([centre[0] + rr * np.cos(aa), centre[1] + rr * np.sin(aa), np.zeros_like(rr)], -1)
    return project_points(pts, rig).valid.numpy()


def _check_overlap(rig: Rig, g: dict) -> tuple[float, str]:
    if len(rig) < 2:
        return 1.0, "Single camera: no neighbours to overlap with (neutral)."
    vis = ground_footprints(rig)
    n = len(rig)
    flat = vis.reshape(n, -1)
    share = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j and flat[i].any():
                share[i, j] = (flat[i] & flat[j]).sum() / flat[i].sum()
    sees = flat.any(axis=1)
    has_neighbour = share.max(axis=1) > 0.005
    s_cam = np.where(sees, np.where(has_neighbour, 1.0, 0.5), 0.0)
    pairs = [f"{rig.names[i]}-{rig.names[j]}" for i in range(n) for j in range(i + 1, n)
             if share[i, j] > 0.005 or share[j, i] > 0.005]
    blind = [nm for nm, sv in zip(rig.names, sees) if not sv]
    lonely = [nm for nm, sv, hn in zip(rig.names, sees, has_neighbour) if sv and not hn]
    if not blind and not lonely:
        text = (f"Every camera shares ground with a neighbour ({len(pairs)} overlapping pairs, "
                f"e.g. {_names(pairs, 2)}).")
    else:
        parts = []
        if blind:
            parts.append(f"{_names(blind)} see{'s' if len(blind) == 1 else ''} no ground within "
                         f"{OVERLAP_RING[1]:.0f} m")
        if lonely:
            parts.append(f"{_names(lonely)} overlap{'s' if len(lonely) == 1 else ''} no other camera")
        text = "; ".join(parts) + "."
    return float(s_cam.mean()), text


_CHECK_FNS = {
    "height": _check_height,
    "level axis": _check_level,
    "outward": _check_outward,
    "ground below horizon": _check_ground,
    "overlap": _check_overlap,
}


def _same_cameras(a: Rig, b: Rig, tol: float = 1e-9) -> bool:
    return all(np.allclose(ca.cam_from_ego, cb.cam_from_ego, atol=tol, rtol=0) for ca, cb in zip(a, b))


def score_rig(rig: Rig) -> tuple[float, dict[str, float], list[str]]:
    """Score one rig on the physical checks (no images).

    Args:
        rig: The rig to judge.

    Returns:
        (mean score in [0, 1], per-check scores, evidence sentences).
    """
    g = _geometry(rig)
    checks, evidence = {}, []
    for name, fn in _CHECK_FNS.items():
        s, text = fn(rig, g)
        checks[name] = s
        evidence.append(text)
    return float(np.mean(list(checks.values()))), checks, evidence


def rank_conventions(raw_cameras: Sequence[RawCamera], images: dict | None = None,
                     candidates: Sequence[Convention] | None = None,
                     ground_z: float = 0.0) -> list[ConventionScore]:
    """Score every storage convention of a raw calibration; best first.

    Args:
        raw_cameras: Stored calibration, one :class:`RawCamera` per camera.
        images: Optional dict camera name -> uint8 RGB image, shape (H, W, 3). When given,
            candidates are also scored on seam consistency (cameras agreeing on the ground
            where their footprints overlap).
        candidates: Conventions to try; default :meth:`Convention.all` (12).
        ground_z: Ego z of the ground (0 in bevviz's convention; the road a LiDAR sees for a
            rig stored in a sensor's frame): the physical checks (heights, ground below the
            horizon, footprints) measure from it (:func:`measured_from_ground`); each
            result's ``rig`` stays in the stored frame.

    Returns:
        One :class:`ConventionScore` per candidate, sorted by score (highest first; ties
        keep :meth:`Convention.all` order and are named in the evidence).

    Raises:
        InputError: no raw cameras.

    Convention:
        See the module docstring for the checks; scores are means of soft per-camera
        scores, so a candidate with one rolled camera ranks above one with six.
    """
    raws = list(raw_cameras)
    if not raws:
        raise field_error("raw_cameras", raws, "need at least one camera")
    with single_threaded():  # many small projections: threads only add overhead
        return _rank(raws, images, candidates, ground_z)


def _rank(raws: list[RawCamera], images: dict | None, candidates, ground_z: float = 0.0) -> list[ConventionScore]:
    cands = list(candidates) if candidates is not None else Convention.all()
    results: list[ConventionScore] = []
    for conv in cands:
        try:
            rig = Rig(camera_from_raw(r, conv) for r in raws)
        except InputError as err:  # this reading gives no valid camera; a bug is not evidence
            results.append(ConventionScore(conv, float("-inf"),
                                           [f"The numbers cannot be read this way: {err}"]))
            continue
        score, checks, evidence = score_rig(measured_from_ground(rig, ground_z))
        results.append(ConventionScore(conv, score, evidence, checks, rig))

    if images is not None:
        _add_seam_evidence(results, images)

    # Ties: identical cameras (e.g. matrices stored: quaternion order is irrelevant).
    for i, a in enumerate(results):
        for b in results[i + 1:]:
            if a.rig is not None and b.rig is not None and _same_cameras(a.rig, b.rig):
                a.ties.append(b.label)
                b.ties.append(a.label)
    for res in results:
        if res.ties:
            res.evidence.append(
                f"Tie: gives exactly the same cameras as {', '.join(res.ties)}; the stored numbers "
                "cannot tell these conventions apart (for matrices the quaternion order does "
                "not matter), so either is right.")
    order = sorted(range(len(results)), key=lambda k: (-results[k].score, k))
    ranked = [results[k] for k in order]
    # Near-ties between different rigs: say so instead of pretending to certainty.
    if len(ranked) > 1 and np.isfinite(ranked[0].score):
        best, second = ranked[0], ranked[1]
        if second.label not in best.ties and best.score - second.score < 1e-6:
            best.evidence.append(f"Warning: {second.label} scores the same ({second.score:.3f}) "
                                 "with different cameras; the evidence cannot decide between them.")
    return ranked


def _add_seam_evidence(results: list[ConventionScore], images: dict) -> None:
    """Fold seam consistency into the plausible candidates' scores (weight of one check).

    Candidates whose geometry scores more than :data:`SEAM_MARGIN` below the best are not
    compared (they are out of the running, and projecting images costs seconds).
    """
    finite = [r.score for r in results if r.rig is not None and np.isfinite(r.score)]
    best = max(finite) if finite else float("-inf")
    for res in results:
        if res.rig is None:
            continue
        if res.score < best - SEAM_MARGIN:
            res.evidence.append("Seams not compared: the geometry alone already rules this reading out.")
            continue
        try:
            cost, n_pairs = rig_seam_cost(res.rig, images)
        except InputError as err:
            res.evidence.append(f"Seams could not be compared: {err}")
            continue
        if n_pairs == 0:
            s, text = 0.0, "No two cameras overlap on the ground, so seams cannot be compared."
        else:
            # cost is 1 - NCC in [0, 2]; a good rig has well under 0.5.
            s = float(np.clip(1.0 - cost, 0.0, 1.0))
            text = (f"Seams: the {n_pairs} overlapping camera pairs agree with a mean normalised "
                    f"cross-correlation of {1.0 - cost:.2f} (1 = identical ground).")
        res.checks["seams"] = s
        res.evidence.append(text)
        res.score = float(np.mean(list(res.checks.values())))


# --------------------------------------------------------------------------------------
# Image-operation checks: what an unscaled K or a half-pixel mismatch does to a projection
# --------------------------------------------------------------------------------------

@dataclass
class ImageOpCheck:
    """The effect of one image-operation bug on the projection of ground points.

    Attributes:
        name: Short name, e.g. ``"resize x0.5, K not rescaled"``.
        description: What the bug is and what the correct rule is.
        rows: Per camera: ``camera``, ``mean shift (px)``, ``max shift (px)``,
            ``validity flips`` (points valid under one rule and not the other), ``points``.
        uv_correct: Camera name -> projected points under the correct rule, (P, 2), pixels
            of the image the check is about (resized / cropped / feature map scaled back to
            image pixels).
        uv_wrong: Camera name -> the same points under the bug, (P, 2).
        size: Camera name -> (W, H) of that image.
        crop: Camera name -> (x0, y0, w, h) for the crop check (to cut the picture), else None.
    """

    name: str
    description: str
    rows: list[dict]
    uv_correct: dict[str, np.ndarray]
    uv_wrong: dict[str, np.ndarray]
    size: dict[str, tuple[int, int]]
    crop: dict[str, tuple[int, int, int, int]] | None = None

    @property
    def max_shift_px(self) -> float:
        """Largest shift over all cameras (pixels)."""
        return max((r["max shift (px)"] for r in self.rows), default=0.0)


def _op_rows(names, uv_a, uv_b, valid_a, valid_b) -> list[dict]:
    rows = []
    for i, name in enumerate(names):
        both = valid_a[i] | valid_b[i]
        d = np.linalg.norm(uv_a[i] - uv_b[i], axis=-1)[both] if both.any() else np.zeros(0)
        rows.append({"camera": name, "mean shift (px)": float(d.mean()) if d.size else 0.0,
                     "max shift (px)": float(d.max()) if d.size else 0.0,
                     "validity flips": int((valid_a[i] != valid_b[i]).sum()), "points": int(both.sum())})
    return rows


def _check_from_rigs(name: str, description: str, good: Rig, bad: Rig, points: np.ndarray,
                     max_points: int) -> ImageOpCheck:
    pa, pb = project_points(points, good), project_points(points, bad)
    uv_a, uv_b = pa.uv.numpy(), pb.uv.numpy()
    va, vb = pa.valid.numpy(), pb.valid.numpy()
    rows = _op_rows(good.names, uv_a, uv_b, va, vb)
    keep = {}
    for i, n in enumerate(good.names):
        idx = np.nonzero(va[i] | vb[i])[0]
        keep[n] = idx[:: max(1, len(idx) // max_points)][:max_points]
    return ImageOpCheck(name, description, rows, {n: uv_a[i][keep[n]] for i, n in enumerate(good.names)},
                        {n: uv_b[i][keep[n]] for i, n in enumerate(good.names)},
                        {c.name: c.size for c in good})


def image_operation_checks(rig: Rig, points: np.ndarray, resize: float = 0.5,
                           crop: tuple[int, int, int, int] | None = None, stride: int = 16,
                           max_points: int = 400) -> list[ImageOpCheck]:
    """What common image-operation bugs do to the projection of ``points`` on this rig.

    Checks, each against the correct pixel-centre rule of :mod:`bevviz.camera`:

    1. resize by ``resize`` with K left unscaled;
    2. resize with K scaled as ``fx s, cx s`` (forgetting the half-pixel term of
       ``cx' = s (cx + 0.5) - 0.5``);
    3. crop ``(x0, y0, w, h)`` without moving the principal point;
    4. a feature map at ``stride`` addressed as ``u / s`` instead of ``(u + 0.5) / s - 0.5``;
    5. a grid normalised with the ``align_corners=True`` formula ``2u / (W - 1) - 1`` but
       sampled with ``align_corners=False`` (on the feature map at ``stride``).

    Args:
        rig: The rig.
        points: Ego points to project, shape (P, 3) (e.g. the BEV grid's ground cells).
        resize: Resize factor for checks 1-2.
        crop: (x0, y0, width, height) for check 3; default the middle half of the image.
        stride: Feature stride for checks 4-5.
        max_points: Points kept per camera for display.

    Returns:
        One :class:`ImageOpCheck` per bug. Shifts are in pixels of the image the bug is
        about (the resized or cropped image; image pixels for the feature-map checks).
    """
    with single_threaded():
        return _image_operation_checks(rig, np.asarray(points, dtype=np.float64).reshape(-1, 3), resize, crop,
                                       stride, max_points)


def _image_operation_checks(rig: Rig, pts: np.ndarray, resize: float, crop, stride: int,
                            max_points: int) -> list[ImageOpCheck]:
    checks = []
    good = rig.resized(resize)
    bad = Rig(c.replace(width=g.width, height=g.height) for c, g in zip(rig, good))
    checks.append(_check_from_rigs(
        f"resize x{resize:g}, K not rescaled",
        f"The images were resized by {resize:g} but K was kept: fx, fy, cx, cy must all scale "
        f"(cx' = s (cx + 0.5) - 0.5).", good, bad, pts, max_points))

    def naive_scale(c):
        K = c.K.copy()
        K[:2] *= resize
        return c.replace(K=K, width=max(1, round(c.width * resize)), height=max(1, round(c.height * resize)))

    checks.append(_check_from_rigs(
        f"resize x{resize:g}, K scaled without the half-pixel term",
        "K scaled as fx s, cx s: with pixel centres at integers the principal point must move by "
        "s (cx + 0.5) - 0.5, a constant (s - 1) / 2 px difference.", good, rig.map(naive_scale), pts, max_points))

    crops = {}
    for c in rig:
        x0, y0, w, h = crop if crop is not None else (c.width // 4, c.height // 4, c.width // 2, c.height // 2)
        crops[c.name] = (x0, y0, w, h)
    good_c = rig.map(lambda c: c.cropped(*crops[c.name]))
    bad_c = Rig(c.replace(width=g.width, height=g.height) for c, g in zip(rig, good_c))
    x0, y0, w, h = next(iter(crops.values()))
    crop_check = _check_from_rigs(
        f"crop at ({x0}, {y0}) size {w} x {h}, principal point not moved",
        "After a crop at (x0, y0) the principal point must become (cx - x0, cy - y0); kept as is, "
        "every point shifts by exactly (x0, y0).", good_c, bad_c, pts, max_points)
    crop_check.crop = crops
    checks.append(crop_check)

    proj = project_points(pts, rig)
    uv, valid = proj.uv.numpy(), proj.valid.numpy()
    s = float(stride)
    # 4: u_feat = u / s instead of (u + 0.5) / s - 0.5 -> in image pixels the sample lands at
    # s * (u / s + 0.5) - 0.5 = u + (s - 1) / 2.
    uv_naive = uv + (s - 1.0) / 2.0
    rows = _op_rows(rig.names, uv, uv_naive, valid, valid)
    checks.append(_feature_check(
        f"feature stride {stride}: u / s instead of (u + 0.5) / s - 0.5",
        f"Feature pixel centres sit at image pixel s u_f + (s - 1) / 2; dropping the half-pixel terms "
        f"samples {(s - 1) / 2:g} image px off in u and v.", rig, uv, uv_naive, valid, rows, max_points))
    # 5: g computed with align_corners=True over the feature width, read with False.
    uv_ac = np.empty_like(uv)
    for i, c in enumerate(rig):
        for k, full in ((0, c.width), (1, c.height)):
            n_f = max(1, full // stride)
            u_f = (uv[i, ..., k] + 0.5) * n_f / full - 0.5
            g = 2.0 * u_f / max(n_f - 1, 1) - 1.0
            u_read = ((g + 1.0) * n_f - 1.0) / 2.0
            uv_ac[i, ..., k] = (u_read + 0.5) * full / n_f - 0.5
    rows = _op_rows(rig.names, uv, uv_ac, valid, valid)
    checks.append(_feature_check(
        f"align_corners mismatch on the stride-{stride} feature map",
        "Grid normalised with the align_corners=True formula 2u / (W - 1) - 1 but sampled with "
        "align_corners=False: the error grows from -0.5 to +0.5 feature px across the map "
        f"(x{stride} in image px), zero in the middle.", rig, uv, uv_ac, valid, rows, max_points))
    return checks


def _feature_check(name, description, rig, uv, uv_bad, valid, rows, max_points) -> ImageOpCheck:
    keep = {}
    for i, n in enumerate(rig.names):
        idx = np.nonzero(valid[i])[0]
        keep[n] = idx[:: max(1, len(idx) // max_points)][:max_points]
    return ImageOpCheck(name, description, rows, {n: uv[i][keep[n]] for i, n in enumerate(rig.names)},
                        {n: uv_bad[i][keep[n]] for i, n in enumerate(rig.names)}, {c.name: c.size for c in rig})


def raw_rows(raw_cameras: Sequence[RawCamera]) -> list[dict]:
    """The stored numbers, one row per camera, for a table (rotation as stored).

    Args:
        raw_cameras: Stored calibration.

    Returns:
        Rows with camera, rotation (4 or 9 numbers as stored), translation, fx, fy, cx, cy, size.
    """
    rows = []
    for r in raw_cameras:
        rot = np.asarray(r.rotation, dtype=float)
        K = np.asarray(r.K, dtype=float)
        rows.append({"camera": r.name,
                     "rotation (as stored)": "[" + ", ".join(f"{v:+.4f}" for v in rot.reshape(-1)) + "]",
                     "translation (m)": "[" + ", ".join(f"{v:+.3f}" for v in np.asarray(r.translation, float)) + "]",
                     "fx": round(float(K[0, 0]), 2), "fy": round(float(K[1, 1]), 2),
                     "cx": round(float(K[0, 2]), 2), "cy": round(float(K[1, 2]), 2),
                     "size": f"{r.width} x {r.height}"})
    return rows
