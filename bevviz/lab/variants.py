"""The stress variants: a correctly calibrated frame as other rigs and other days deliver it
(:data:`VARIANTS`), each a function of a frame and a seeded generator that returns the rig,
images, scan and ignore polygons to diagnose again (:mod:`bevviz.lab.stress` runs them).

What varies: the point cloud's order, rings, intensity scale and density, the LiDAR's beams,
its frame and its motion, the rig's size, the cameras' resolution and mount, lens distortion
left in, a rolling shutter on a turn, and what capture does to images (blur, heavy JPEG, dark,
monochrome, black corners). The calibration is never touched.

Convention:
    A resized image comes with its camera resized alike (``Camera.resized_to``: the
    intrinsics scale with the pixels, pixel centres at integers) and its ignore polygons
    scaled; a camera turned on its mount as ``Camera.rot90``, its polygons turned alike. The
    LiDAR points stay in the ego frame (x forward, y left, z up, metres).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import cv2
import numpy as np

from bevviz.camera import Camera, Rig, measured_from_ground
from bevviz.errors import InputError
from bevviz.io.frame_folder import RealFrame
from bevviz.lidar import LidarScan
from bevviz.projection import pixels_of, rays_of
from bevviz.rotations import invert_transform, make_transform

__all__ = ["BARREL_K1", "BEAM_BAND_DEG", "BEAM_PERIOD_DEG", "PAIR_BREAKING", "SHUTTER_PAN_DEG", "UNLOCATED_SENSOR_M",
           "VARIANTS", "Variant", "denser", "distorted"]

Images = dict[str, np.ndarray]
Ignore = dict[str, list]
#: A variant: (what it stands for, frame + seeded generator -> (rig, images, scan, ignore)).
Variant = tuple[str, Callable[[RealFrame, np.random.Generator], tuple[Rig, Images, LidarScan, Ignore]]]


def _scan(scan: LidarScan, points: np.ndarray, ring: np.ndarray | None = None,
          motion: Mapping[str, np.ndarray] | None = None) -> LidarScan:
    motion = dict(scan.exposure_from_keyframe) if motion is None else dict(motion)
    return LidarScan(points, ring, np.zeros(len(points), np.int16), scan.origin, scan.timestamp_us, motion)


def _points(transform: Callable[[np.ndarray, np.random.Generator], np.ndarray], keep_ring: bool = False) -> Callable:
    def run(f: RealFrame, rng: np.random.Generator):
        pts = transform(np.array(f.scan.points), rng)
        ring = f.scan.ring if keep_ring else None
        return f.rig, f.images, _scan(f.scan, pts, ring), f.ignore
    return run


def _shuffled(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return p[rng.permutation(len(p))]


def _ring_order_lost(f: RealFrame, rng: np.random.Generator):
    """The points shuffled, each keeping its ring index (a cloud re-sorted or merged after the
    ring index was written): the rings must be put in azimuth order again."""
    perm = rng.permutation(len(f.scan))
    ring = None if f.scan.ring is None else f.scan.ring[perm]
    return f.rig, f.images, _scan(f.scan, np.asarray(f.scan.points)[perm], ring), f.ignore


def _no_intensity(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    p[:, 3] = 0.0
    return _shuffled(p, rng)


def _unit_intensity(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    p[:, 3] = p[:, 3] / max(float(p[:, 3].max()), 1e-12)
    return p


def _log_intensity(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    p[:, 3] = 1000.0 * np.log1p(np.maximum(p[:, 3], 0.0))
    return p


def denser(scan: LidarScan, k: int, rng: np.random.Generator) -> LidarScan:
    """The scan and ``k - 1`` copies jittered by 2 cm, shuffled, without ring or order (a
    merged multi-LiDAR cloud or a finer sensor), (k N, 4) points."""
    p = np.asarray(scan.points)
    copies = [p]
    for _ in range(k - 1):
        q = p.copy()
        q[:, :3] += rng.normal(0.0, 0.02, (len(p), 3)).astype(p.dtype)
        copies.append(q)
    return _scan(scan, _shuffled(np.concatenate(copies), rng))


def _four_times_denser(f: RealFrame, rng: np.random.Generator):
    return f.rig, f.images, denser(f.scan, 4, rng), f.ignore


def _sparser(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return p[np.sort(rng.permutation(len(p))[: len(p) // 4])]


#: A LiDAR of fewer beams from a scan without rings: one elevation band of ``BEAM_BAND_DEG``
#: (seen from the scan's origin) in every ``BEAM_PERIOD_DEG`` is kept, which thins a 64-beam
#: scan (0.4 deg apart) to about the 2 deg beam spacing of a 16-beam sensor.
BEAM_PERIOD_DEG, BEAM_BAND_DEG = 2.0, 0.45


def _fewer_beams(f: RealFrame, rng: np.random.Generator):
    """Half the rings of a scan that has them (a 32-beam scan becomes a 16-beam one), else
    elevation bands (:data:`BEAM_PERIOD_DEG`)."""
    p = np.array(f.scan.points)
    if f.scan.ring is not None:
        keep = f.scan.ring % 2 == 0
        return f.rig, f.images, _scan(f.scan, p[keep], f.scan.ring[keep]), f.ignore
    d = p[:, :3] - np.asarray(f.scan.origin, dtype=np.float64)
    elevation = np.degrees(np.arctan2(d[:, 2], np.hypot(d[:, 0], d[:, 1])))
    return f.rig, f.images, _scan(f.scan, p[np.mod(elevation, BEAM_PERIOD_DEG) < BEAM_BAND_DEG]), f.ignore


def _no_returns(offset_m: Sequence[float] = (0.0, 0.0, 0.0)) -> Callable:
    """A third more points with intensity 0 at the scan's origin plus ``offset_m`` (ego
    metres), spread through the storage order, each on the ring of the return after it (an
    organised cloud, a range image flattened, keeps its no-returns so, at its sensor; with an
    offset, a sensor the scan does not locate: a frame folder's origin is the ego origin)."""
    def run(f: RealFrame, rng: np.random.Generator):
        p = np.asarray(f.scan.points)
        at = np.sort(rng.integers(0, len(p) + 1, len(p) // 3))  # the return each hole precedes
        hole = np.zeros((len(at), p.shape[1]), p.dtype)
        hole[:, :3] = (np.asarray(f.scan.origin) + np.asarray(offset_m)).astype(p.dtype)
        pts = np.insert(p, at, hole, axis=0)
        ring = None
        if f.scan.ring is not None:
            ring = np.insert(f.scan.ring, at, f.scan.ring[np.minimum(at, len(p) - 1)])
        return f.rig, f.images, _scan(f.scan, pts, ring), f.ignore
    return run


#: Where ``no-returns, sensor not located`` stacks its no-returns, from the scan's origin
#: (ego metres): a roof LiDAR above a car frame at the rear axle on the ground.
UNLOCATED_SENSOR_M = (0.9, 0.0, 1.8)


def _moved(yaw_deg: float, dz_m: float) -> Callable:
    """The LiDAR points turned about the ego z axis and raised: a cloud in another frame than
    the car's (a sensor frame turned 90 deg, or at the sensor's height)."""
    c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def move(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p[:, :3] = p[:, :3] @ rot.T.astype(p.dtype) + np.array([0.0, 0.0, dz_m], dtype=p.dtype)
        return p
    return _points(move, keep_ring=True)


def _frame_raised(dz_m: float) -> Callable:
    """The whole rig in a car frame ``dz_m`` metres higher: cameras, cloud, LiDAR origin and
    ego motion alike (a rig stored in its LiDAR's frame, as KITTI's): the same geometry,
    which must give the same verdicts."""
    new_from_old = make_transform(np.eye(3), np.array([0.0, 0.0, -dz_m]))
    old_from_new = invert_transform(new_from_old)

    def run(f: RealFrame, rng: np.random.Generator):
        p = np.array(f.scan.points)
        p[:, 2] -= np.float32(dz_m)
        motion = {k: new_from_old @ T @ old_from_new for k, T in f.scan.exposure_from_keyframe.items()}
        scan = LidarScan(p, f.scan.ring, np.zeros(len(p), np.int16), np.asarray(f.scan.origin) - [0.0, 0.0, dz_m],
                         f.scan.timestamp_us, motion)
        return measured_from_ground(f.rig, dz_m), f.images, scan, f.ignore
    return run


def _front_half(f: RealFrame, rng: np.random.Generator):
    """Only the returns ahead of the LiDAR (within 90 deg of the car's heading), rings kept:
    a forward-looking LiDAR, which leaves the rear cameras without evidence and the rig
    consensus with the front ones."""
    d = np.asarray(f.scan.points[:, :2], dtype=np.float64) - np.asarray(f.scan.origin[:2])
    keep = d[:, 0] > 0.0
    ring = None if f.scan.ring is None else f.scan.ring[keep]
    return f.rig, f.images, _scan(f.scan, np.asarray(f.scan.points)[keep], ring), f.ignore


def _no_motion(f: RealFrame, rng: np.random.Generator):
    return f.rig, f.images, _scan(f.scan, f.scan.points, f.scan.ring, motion={}), f.ignore


def _resized(factor: float) -> Callable:
    def run(f: RealFrame, rng: np.random.Generator):
        images, cams, ignore = {}, [], {}
        for cam in f.rig:
            img = f.images[cam.name]
            w, h = max(1, round(img.shape[1] * factor)), max(1, round(img.shape[0] * factor))
            images[cam.name] = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if factor < 1 else cv2.INTER_LINEAR)
            cams.append(cam.resized_to(w, h))
            sx, sy = w / cam.width, h / cam.height
            if cam.name in f.ignore:
                ignore[cam.name] = [[[u * sx, v * sy] for u, v in poly] for poly in f.ignore[cam.name]]
        return Rig(cams), images, f.scan, ignore
    return run


def _turned_polygon(poly: Sequence, width: int, height: int, quarter_turns: int) -> list[list[float]]:
    """An ignore polygon's (u, v) vertices after ``np.rot90(image, quarter_turns)``."""
    pts = [[float(u), float(v)] for u, v in poly]
    for _ in range(quarter_turns % 4):
        pts = [[v, width - 1 - u] for u, v in pts]
        width, height = height, width
    return pts


def _turned_on_mount(quarter_turns: int) -> Callable:
    """Every camera mounted turned (portrait images for a quarter turn, upside down for two):
    nothing may hang on the image's rows being the world's horizontal."""
    def run(f: RealFrame, rng: np.random.Generator):
        images, cams, ignore = {}, [], {}
        for cam in f.rig:
            images[cam.name] = np.ascontiguousarray(np.rot90(f.images[cam.name], quarter_turns))
            cams.append(cam.rot90(quarter_turns))
            if cam.name in f.ignore:
                ignore[cam.name] = [_turned_polygon(poly, cam.width, cam.height, quarter_turns)
                                    for poly in f.ignore[cam.name]]
        return Rig(cams), images, f.scan, ignore
    return run


def _first_cameras(n: int) -> Callable:
    """The rig's first ``n`` cameras only (a smaller rig: below ``MIN_CAMERAS`` there is no
    consensus of the others to tell a LiDAR error from a camera's own)."""
    def run(f: RealFrame, rng: np.random.Generator):
        names = f.rig.names[:n]
        return (f.rig.subset(names), {k: f.images[k] for k in names}, f.scan,
                {k: v for k, v in f.ignore.items() if k in names})
    return run


def _images(transform: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def run(f: RealFrame, rng: np.random.Generator):
        return f.rig, {k: transform(v) for k, v in f.images.items()}, f.scan, f.ignore
    return run


#: Pan (degrees) across the image height of a rolling shutter on a turning car: 20 deg/s of
#: yaw during a 30 ms readout.
SHUTTER_PAN_DEG = 0.6


def _rolling_shutter(pan_deg: float) -> Callable:
    """Each image row read a little later while the car turns: the rows shift sideways by
    ``pan_deg`` (at the camera's focal length) from the top to the bottom, the middle row
    where it was (the LiDAR's time); ignore polygons shift with them."""
    def run(f: RealFrame, rng: np.random.Generator):
        images, ignore = {}, {}
        for cam in f.rig:
            img = f.images[cam.name]
            h, w = img.shape[:2]
            pan = np.radians(pan_deg) * cam.K[0, 0]  # calibrated pixels, top row to bottom row
            shift = pan * w / cam.width  # the image's pixels
            warp = np.float32([[1.0, shift / h, -shift * (h - 1) / (2 * h)], [0.0, 1.0, 0.0]])
            images[cam.name] = cv2.warpAffine(img, warp, (w, h), flags=cv2.INTER_LINEAR,
                                              borderMode=cv2.BORDER_REPLICATE)
            if cam.name in f.ignore:
                ignore[cam.name] = [[[u + pan * (v - (cam.height - 1) / 2) / cam.height, v] for u, v in poly]
                                    for poly in f.ignore[cam.name]]
        return f.rig, images, f.scan, ignore
    return run


def _blur(img: np.ndarray) -> np.ndarray:
    return cv2.GaussianBlur(img, (0, 0), 2.0)


def _jpeg(img: np.ndarray) -> np.ndarray:
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 15])
    if not ok:
        raise InputError("images: cannot be encoded as JPEG", "images", img.shape)
    return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)


def _grey(img: np.ndarray) -> np.ndarray:
    return np.repeat(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[..., None], 3, axis=2)


def _black_corners(img: np.ndarray) -> np.ndarray:
    """Black outside an ellipse reaching past the image sides: the border of an undistorted
    wide-angle image (a strong image edge no LiDAR point belongs to)."""
    h, w = img.shape[:2]
    v, u = np.mgrid[0:h, 0:w]
    outside = ((u - (w - 1) / 2) / (0.58 * w)) ** 2 + ((v - (h - 1) / 2) / (0.62 * h)) ** 2 > 1.0
    out = img.copy()
    out[outside] = 0
    return out


def distorted(img: np.ndarray, camera: Camera, k1: float) -> np.ndarray:
    """``img`` as a lens of radial distortion ``k1`` would have taken it, (H, W, C) like ``img``:
    the distortion left in an image the rig describes as a pinhole one (``camera``'s K).

    Convention:
        Normalised image coordinates ``x = K^-1 (u, v, 1)``, pixel centres at integers; a
        distorted point is ``x_d = x (1 + k1 |x|^2)`` (``k1 < 0``: barrel). A pixel whose
        undistorted source falls outside the image is black. The stress variants move the
        ignore polygons' vertices alike.
    """
    h, w = img.shape[:2]
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    xd = _normalised(camera, np.stack([u, v], axis=-1))
    x = xd.copy()
    for _ in range(DISTORTION_ITERATIONS):  # x = x_d / (1 + k1 |x|^2), a fixed point for small k1 |x|^2
        x = xd / (1.0 + k1 * np.sum(x * x, axis=-1, keepdims=True))
    src = pixels_of(_homogeneous(x), camera.K).astype(np.float32)
    return cv2.remap(img, src[..., 0], src[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)


def _homogeneous(p: np.ndarray) -> np.ndarray:
    """``(*P, 2)`` -> ``(*P, 3)`` with a last coordinate of 1."""
    return np.concatenate([p, np.ones_like(p[..., :1])], axis=-1)


def _normalised(camera: Camera, uv: np.ndarray) -> np.ndarray:
    """``K^-1 (u, v, 1)``: normalised coordinates of pixels ``uv`` (*P, 2), (*P, 2)."""
    return rays_of(uv, camera.K)[..., :2]


def _distorted_polygon(poly: Sequence, camera: Camera, k1: float) -> list[list[float]]:
    """An ignore polygon's (u, v) vertices where :func:`distorted` puts them (``x (1 + k1 |x|^2)``)."""
    x = _normalised(camera, np.asarray(poly, dtype=np.float64))
    x = x * (1.0 + k1 * np.sum(x * x, axis=-1, keepdims=True))
    return pixels_of(_homogeneous(x), camera.K).tolist()


def _distortion_left_in(k1: float) -> Callable:
    def run(f: RealFrame, rng: np.random.Generator):
        ignore = {c.name: [_distorted_polygon(poly, c, k1) for poly in f.ignore[c.name]] for c in f.rig
                  if c.name in f.ignore}
        return f.rig, {c.name: distorted(f.images[c.name], c, k1) for c in f.rig}, f.scan, ignore
    return run


def _dark(img: np.ndarray) -> np.ndarray:
    return np.clip(255.0 * 0.5 * (img / 255.0) ** 2.2, 0, 255).astype(np.uint8)


#: Radial distortion left in the images by ``barrel distortion left in`` (normalised
#: coordinates): 0.5 deg (15 px) at the side edge of a nuScenes image, the order of what an
#: undistortion with a poorly fitted lens model leaves (a raw automotive lens bends several
#: times as much).
BARREL_K1 = -0.05
DISTORTION_ITERATIONS = 6

#: Name -> (what it stands for, how it is made).
VARIANTS: dict[str, Variant] = {
    "as stored": ("the frame itself", _points(lambda p, rng: p, keep_ring=True)),
    "no point order": ("no ring, points shuffled (a merged multi-LiDAR cloud)", _points(_shuffled)),
    "no ring index": ("the points as stored, without their ring index (a plain (N, 4) array)",
                      _points(lambda p, rng: p)),
    "rings out of order": ("points shuffled, each keeping its ring index", _ring_order_lost),
    "no intensity": ("intensity all zero, no order (an (N, 3) cloud): depth edges alone", _points(_no_intensity)),
    "intensity 0..1": ("intensity divided by its maximum", _points(_unit_intensity, keep_ring=True)),
    "intensity log x1000": ("another sensor's unit: 1000 log(1 + i)", _points(_log_intensity, keep_ring=True)),
    "4x denser cloud": ("the scan and 3 copies jittered by 2 cm, no order", _four_times_denser),
    "no-returns at the LiDAR": ("a third more points at the sensor, intensity 0, through the order (an organised "
                                "cloud)", _no_returns()),
    "no-returns, sensor not located": ("the same at a roof LiDAR 2 m from the scan's origin, which the scan "
                                       "does not locate (a frame folder's origin is the ego origin)",
                                       _no_returns(UNLOCATED_SENSOR_M)),
    "1/4 of the points": ("a sparser sensor: a random quarter of the points", _points(_sparser)),
    "16 beams": ("a LiDAR of fewer beams: every other ring, or one 0.45 deg elevation band in 2 deg",
                 _fewer_beams),
    "front half of the cloud": ("only the returns ahead of the LiDAR (a forward-looking LiDAR)", _front_half),
    "no ego motion": ("the exposures taken as simultaneous with the sweep", _no_motion),
    "LiDAR turned 90 deg": ("the cloud in a frame turned 90 deg about z (a sensor frame)", _moved(90.0, 0.0)),
    "LiDAR turned 180 deg": ("the cloud turned 180 deg about z", _moved(180.0, 0.0)),
    "LiDAR 1.8 m low": ("the cloud 1.8 m below the car's frame (heights from the sensor)", _moved(0.0, -1.8)),
    "car frame at the LiDAR": ("rig and cloud stored in a frame 1.8 m up (a sensor's frame, as KITTI's)",
                               _frame_raised(1.8)),
    "3 cameras": ("the rig's first three cameras only (too few for a rig consensus)", _first_cameras(3)),
    "2 cameras": ("the rig's first two cameras only", _first_cameras(2)),
    "half resolution": ("images and intrinsics at half size", _resized(0.5)),
    "1.5x resolution": ("images and intrinsics at 1.5 times the size", _resized(1.5)),
    "portrait mount": ("every camera turned 90 deg on its mount: portrait images", _turned_on_mount(1)),
    "upside-down mount": ("every camera mounted upside down", _turned_on_mount(2)),
    "barrel distortion left in": (f"images with radial distortion k1 = {BARREL_K1:g} not removed (the rig says "
                                  "pinhole)", _distortion_left_in(BARREL_K1)),
    "pincushion distortion left in": (f"images with radial distortion k1 = {-BARREL_K1:+g} not removed",
                                      _distortion_left_in(-BARREL_K1)),
    "rolling shutter on a turn": (f"rows shifted sideways by {SHUTTER_PAN_DEG:g} deg from top to bottom (a turning "
                                  "car during the readout)", _rolling_shutter(SHUTTER_PAN_DEG)),
    "blur": ("Gaussian blur, sigma 2 px", _images(_blur)),
    "JPEG q15": ("JPEG at quality 15", _images(_jpeg)),
    "dark": ("gamma 2.2 and half the brightness", _images(_dark)),
    "grey": ("monochrome cameras: grey replicated to RGB", _images(_grey)),
    "black corners": ("black outside an ellipse: the border of an undistorted wide-angle image",
                      _images(_black_corners)),
}


#: Variants that move the LiDAR against every camera: on a one-camera rig they break the
#: camera-LiDAR pair itself (the pair *is* off then, and "miscalibrated" is no false alarm), so
#: they are skipped there, and said so.
PAIR_BREAKING = frozenset({"LiDAR turned 90 deg", "LiDAR turned 180 deg", "LiDAR 1.8 m low"})
