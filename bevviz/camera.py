"""Cameras and rigs: intrinsics, extrinsics and how image operations change them.

Convention:
    Ego frame: x forward, y left, z up (metres, nuScenes). Camera frame: OpenCV RDF
    (x right, y down, z forward). A Camera stores ``cam_from_ego`` (4x4, column vectors):
    ``p_cam = cam_from_ego @ p_ego``. Pixels (u, v) = (column, row) with integer values at
    pixel centres, so an image of width W spans u in [-0.5, W - 0.5]. Under that convention a
    resize by (sx, sy) maps u -> sx * (u + 0.5) - 0.5, a crop at (x0, y0) maps u -> u - x0,
    and a feature map at stride s maps u -> (u + 0.5) / s - 0.5.
    See docs/conventions.md.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field

import numpy as np
import torch

from bevviz.checks import (
    MAX_CAMERAS,
    MAX_IMAGE_SIDE,
    as_float_array,
    as_int,
    check_at_most,
    check_camera_name,
    check_image_size,
    check_shape,
    field_error,
    image_side,
    limit_error,
    positive_int,
)
from bevviz.rotations import ROTATION_TOL, invert_transform, make_transform, validate_rotation
from bevviz.storage import Convention, RawCamera

__all__ = [
    "DISPLAY_ROWS", "NUSCENES_CAMERAS", "ROTATION_TOL", "SAME_CALIBRATION_RTOL", "Camera", "Rig",
    "calibration_difference", "camera_from_raw", "invert_transform", "make_transform", "measured_from_ground",
    "raw_from_camera", "same_calibration", "validate_intrinsics", "validate_rotation",
]

#: nuScenes camera names in ring order (clockwise from the front as seen from above).
NUSCENES_CAMERAS = (
    "CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT",
)
#: Display layout: two rows as a driver would picture them.
DISPLAY_ROWS = (
    ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT"),
    ("CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT"),
)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


def _rounded(size: float) -> float:
    """A resized image side rounded to whole pixels (at least 1); inf stays inf, for the
    camera's own check to name."""
    return max(1, round(size)) if math.isfinite(size) else size


def _camera_list(items: object, field_name: str) -> list:
    """The entries of ``items`` as a list of at most :data:`~bevviz.checks.MAX_CAMERAS`,
    read no further than one past the limit; a mapping or a string is a named error."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise field_error(field_name, type(items).__name__,
                          "must be a list of cameras in rig order (for a dict, pass list(d.values()))")
    out = list(itertools.islice(items, MAX_CAMERAS + 1))
    if len(out) > MAX_CAMERAS:
        count = f"{len(items)} cameras" if isinstance(items, Sized) else f"more than {MAX_CAMERAS} cameras"
        raise limit_error(field_name, count, "MAX_CAMERAS", MAX_CAMERAS)
    return out


def validate_intrinsics(K: object, camera: str | None = None) -> np.ndarray:
    """Check an intrinsic matrix and return it as float64.

    Args:
        K: Intrinsics, shape (3, 3): [[fx, s, cx], [0, fy, cy], [0, 0, 1]].
        camera: Camera name for errors.

    Returns:
        K, shape (3, 3), float64.

    Raises:
        InputError: non-finite, fx or fy not positive, or last row not (0, 0, 1).
    """
    k = as_float_array(K, "K", camera)
    check_shape(k, (3, 3), "K", camera)
    if not np.all(np.isfinite(k)):
        raise field_error("K", k, "must be finite (no NaN or inf)", camera)
    if k[0, 0] <= 0 or k[1, 1] <= 0:
        raise field_error("K", k, f"fx and fy must be > 0 (fx={k[0, 0]}, fy={k[1, 1]})", camera)
    if not np.allclose(k[2], [0.0, 0.0, 1.0], atol=1e-9) or abs(k[1, 0]) > 1e-9:
        raise field_error("K", k, "must be upper triangular with last row (0, 0, 1)", camera)
    return k


@dataclass(frozen=True, eq=False)
class Camera:
    """A pinhole camera: name, intrinsics, extrinsics and image size.

    Args:
        name: Camera name, e.g. ``"CAM_FRONT"``, following the rule of
            :func:`bevviz.checks.check_camera_name` (1 to 64 letters, digits, ``_-.`` and
            spaces).
        K: Intrinsics, shape (3, 3).
        cam_from_ego: Rigid transform ego -> camera (RDF), shape (4, 4).
        width: Image width W in pixels, at most :data:`bevviz.checks.MAX_IMAGE_SIDE`.
        height: Image height H in pixels, at most ``MAX_IMAGE_SIDE``; W x H at most
            :data:`bevviz.checks.MAX_IMAGE_PIXELS`.

    Raises:
        InputError: naming the camera, the field and the value (and the limit, for a size).

    Convention:
        See the module docstring: ego FLU-style (x fwd, y left, z up), camera RDF, pixel
        centres at integers.
    """

    name: str
    K: np.ndarray
    cam_from_ego: np.ndarray
    width: int
    height: int
    _hash: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        cam = check_camera_name(self.name)
        K = validate_intrinsics(self.K, cam)
        T = as_float_array(self.cam_from_ego, "cam_from_ego", cam)
        check_shape(T, (4, 4), "cam_from_ego", cam)
        if not np.all(np.isfinite(T)):
            raise field_error("cam_from_ego", T, "must be finite (no NaN or inf)", cam)
        if not np.allclose(T[3], [0, 0, 0, 1], atol=1e-9):
            raise field_error("cam_from_ego", T, "last row must be (0, 0, 0, 1)", cam)
        validate_rotation(T[:3, :3], "cam_from_ego rotation", cam)
        object.__setattr__(self, "K", _readonly(K))
        object.__setattr__(self, "cam_from_ego", _readonly(T))
        width, height = image_side(self.width, "width", cam), image_side(self.height, "height", cam)
        check_image_size(width, height, "width x height", cam)
        object.__setattr__(self, "width", width)
        object.__setattr__(self, "height", height)
        digest = hashlib.sha1(
            self.name.encode() + self.K.tobytes() + self.cam_from_ego.tobytes()
            + np.array([self.width, self.height]).tobytes()
        ).hexdigest()
        object.__setattr__(self, "_hash", digest)

    # --- equality and hashing by value (so caches can key on cameras) ---
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Camera) and self._hash == other._hash

    def __hash__(self) -> int:
        return hash(self._hash)

    @property
    def fingerprint(self) -> str:
        """Hex digest of every field; equal cameras have equal fingerprints."""
        return self._hash

    @property
    def ego_from_cam(self) -> np.ndarray:
        """Rigid transform camera (RDF) -> ego, shape (4, 4)."""
        return invert_transform(self.cam_from_ego)

    @property
    def position(self) -> np.ndarray:
        """Optical centre in the ego frame, shape (3,)."""
        return self.ego_from_cam[:3, 3]

    @property
    def size(self) -> tuple[int, int]:
        """Image size as (W, H)."""
        return self.width, self.height

    def replace(self, **changes: object) -> Camera:
        """A copy with some fields changed (validated again)."""
        values = dict(name=self.name, K=self.K, cam_from_ego=self.cam_from_ego,
                      width=self.width, height=self.height)
        values.update(changes)
        return Camera(**values)

    # --- image operations ---
    def resized(self, sx: float, sy: float | None = None) -> Camera:
        """The camera after resizing its image by (sx, sy).

        New size is ``round(W * sx), round(H * sy)``.

        Convention:
            Pixel centres: u' = sx * (u + 0.5) - 0.5, so fx' = sx fx and
            cx' = sx (cx + 0.5) - 0.5 (and likewise for v with sy).
        """
        sy = sx if sy is None else sy
        if not (np.isfinite(sx) and sx > 0):
            raise field_error("sx", sx, "resize factor must be finite and > 0", self.name)
        if not (np.isfinite(sy) and sy > 0):
            raise field_error("sy", sy, "resize factor must be finite and > 0", self.name)
        width = image_side(_rounded(self.width * sx), "width", self.name)  # before K: a huge factor overflows it
        height = image_side(_rounded(self.height * sy), "height", self.name)
        S = np.array([[sx, 0.0, 0.5 * (sx - 1.0)], [0.0, sy, 0.5 * (sy - 1.0)], [0.0, 0.0, 1.0]])
        return self.replace(K=S @ self.K, width=width, height=height)

    def resized_to(self, width: int, height: int) -> Camera:
        """The camera after resizing its image to exactly (width, height) pixels."""
        width = image_side(width, "width", self.name)
        height = image_side(height, "height", self.name)
        cam = self.resized(width / self.width, height / self.height)
        return cam.replace(width=width, height=height)

    def cropped(self, x0: int, y0: int, width: int, height: int) -> Camera:
        """The camera after cropping (x0, y0, width, height) out of its image.

        Args:
            x0, y0: Top-left pixel of the crop, whole pixels (negative: the crop reaches
                past the image's left / top edge, as after padding).
            width, height: Crop size in pixels (> 0).

        Raises:
            InputError: naming the argument that is not a whole pixel count.

        Convention:
            u' = u - x0, v' = v - y0, so cx' = cx - x0 and cy' = cy - y0.
        """
        x0 = as_int(x0, "x0", self.name)
        y0 = as_int(y0, "y0", self.name)
        check_at_most(abs(x0), MAX_IMAGE_SIDE, "MAX_IMAGE_SIDE", "x0", self.name)
        check_at_most(abs(y0), MAX_IMAGE_SIDE, "MAX_IMAGE_SIDE", "y0", self.name)
        width = image_side(width, "width", self.name)
        height = image_side(height, "height", self.name)
        S = np.array([[1.0, 0.0, -float(x0)], [0.0, 1.0, -float(y0)], [0.0, 0.0, 1.0]])
        return self.replace(K=S @ self.K, width=width, height=height)

    def rot90(self, k: int = 1) -> Camera:
        """The camera whose images are ``np.rot90(image, k)``: turned ``k`` quarter turns
        counter-clockwise on its mount (k = 1 or 3: portrait images; 2: upside down).

        Raises:
            InputError: naming ``k`` when it is not a whole number, or ``K`` when the camera
                has skew and ``k`` is odd (its turned intrinsics would not be upper triangular).

        Convention:
            Pixel centres at integers. One quarter turn: u' = v, v' = W - 1 - u; camera axes
            x' = y, y' = -x, z' = z (RDF stays RDF), so K' = [[fy, 0, cy], [0, fx, W - 1 - cx]]
            and cam'_from_ego = turn @ cam_from_ego.
        """
        quarters = as_int(k, "k", self.name) % 4
        if quarters % 2 and self.K[0, 1] != 0.0:
            raise field_error("K", self.K, "has skew: a quarter turn of its images is no pinhole camera of this form",
                              self.name)
        cam, K, w, h = self, self.K, self.width, self.height
        if quarters >= 2:  # half turn: u' = W - 1 - u, v' = H - 1 - v; x' = -x, y' = -y
            half = np.diag([-1.0, -1.0, 1.0, 1.0])
            K2 = np.array([[K[0, 0], K[0, 1], w - 1 - K[0, 2]], [0.0, K[1, 1], h - 1 - K[1, 2]], [0.0, 0.0, 1.0]])
            cam = cam.replace(K=K2, cam_from_ego=half @ cam.cam_from_ego)
        if quarters % 2:
            K, w = cam.K, cam.width
            turn = np.eye(4)
            turn[:3, :3] = [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
            K2 = np.array([[K[1, 1], 0.0, K[1, 2]], [0.0, K[0, 0], w - 1 - K[0, 2]], [0.0, 0.0, 1.0]])
            cam = cam.replace(K=K2, cam_from_ego=turn @ cam.cam_from_ego, width=cam.height, height=w)
        return cam

    def at_stride(self, stride: int) -> Camera:
        """The camera as seen by a feature map at ``stride`` (size ``W // s, H // s``).

        Convention:
            u_feat = (u + 0.5) / s - 0.5 (a resize by 1/s with pixel centres kept).
        """
        s = positive_int(stride, "stride", self.name)
        check_at_most(s, MAX_IMAGE_SIDE, "MAX_IMAGE_SIDE", "stride", self.name)
        cam = self.resized(1.0 / s)
        return cam.replace(width=max(1, self.width // s), height=max(1, self.height // s))


class Rig:
    """An ordered set of cameras with unique names.

    Args:
        cameras: Cameras in rig order, at most :data:`bevviz.checks.MAX_CAMERAS`.

    Raises:
        InputError: not a list of cameras, empty, more than ``MAX_CAMERAS`` (found without
            reading past the limit), or duplicate camera names.
    """

    def __init__(self, cameras: Iterable[Camera]) -> None:
        cams = _camera_list(cameras, "cameras")
        if not cams:
            raise field_error("cameras", cams, "a rig needs at least one camera")
        seen: set[str] = set()
        for cam in cams:
            if not isinstance(cam, Camera):
                raise field_error("cameras", type(cam).__name__, "every entry must be a Camera")
            if cam.name in seen:
                raise field_error("name", cam.name, "duplicate camera name", cam.name)
            seen.add(cam.name)
        self._cameras: tuple[Camera, ...] = tuple(cams)
        self._index = {c.name: i for i, c in enumerate(cams)}

    # --- container protocol ---
    @property
    def names(self) -> list[str]:
        """Camera names in rig order."""
        return [c.name for c in self._cameras]

    @property
    def cameras(self) -> tuple[Camera, ...]:
        """Cameras in rig order."""
        return self._cameras

    def __len__(self) -> int:
        return len(self._cameras)

    def __iter__(self) -> Iterator[Camera]:
        return iter(self._cameras)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, key: str | int) -> Camera:
        if isinstance(key, (int, np.integer)):
            return self._cameras[int(key)]
        if key not in self._index:
            raise field_error("camera", key, f"unknown camera name; the rig has {self.names}")
        return self._cameras[self._index[key]]

    def index(self, name: str) -> int:
        """Position of camera ``name`` in rig order."""
        self[name]
        return self._index[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rig) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"Rig({self.names})"

    @property
    def fingerprint(self) -> str:
        """Hex digest of all cameras, for cache keys."""
        return hashlib.sha1("".join(c.fingerprint for c in self._cameras).encode()).hexdigest()

    # --- batched tensors ---
    def intrinsics(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Stacked intrinsics, shape (N_cam, 3, 3)."""
        return torch.as_tensor(np.stack([c.K for c in self._cameras]), dtype=dtype)

    def cam_from_ego(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Stacked ``cam_from_ego`` transforms, shape (N_cam, 4, 4)."""
        return torch.as_tensor(np.stack([c.cam_from_ego for c in self._cameras]), dtype=dtype)

    def image_sizes(self) -> torch.Tensor:
        """Image sizes as (W, H) per camera, shape (N_cam, 2), int64."""
        return torch.tensor([[c.width, c.height] for c in self._cameras], dtype=torch.int64)

    # --- derived rigs ---
    def replace(self, camera: Camera) -> Rig:
        """A new rig with the camera of the same name replaced by ``camera``."""
        i = self.index(camera.name)
        cams = list(self._cameras)
        cams[i] = camera
        return Rig(cams)

    def map(self, fn) -> Rig:
        """A new rig with ``fn(camera)`` applied to every camera."""
        return Rig(fn(c) for c in self._cameras)

    def resized(self, sx: float, sy: float | None = None) -> Rig:
        """Every camera resized by (sx, sy); see :meth:`Camera.resized`."""
        return self.map(lambda c: c.resized(sx, sy))

    def at_stride(self, stride: int) -> Rig:
        """Every camera at a feature stride; see :meth:`Camera.at_stride`."""
        return self.map(lambda c: c.at_stride(stride))

    def subset(self, names: Sequence[str]) -> Rig:
        """A rig of the named cameras, in the given order."""
        return Rig(self[n] for n in names)

    def display_grid(self) -> list[list[str | None]]:
        """Camera names laid out for display: nuScenes cameras in two rows
        (FRONT_LEFT, FRONT, FRONT_RIGHT over BACK_LEFT, BACK, BACK_RIGHT); other rigs in rig
        order, three per row. Missing slots are ``None``."""
        if set(self.names) <= set(NUSCENES_CAMERAS):
            return [[n if n in self else None for n in row] for row in DISPLAY_ROWS]
        names = self.names
        return [list(names[i:i + 3]) + [None] * (3 - len(names[i:i + 3])) for i in range(0, len(names), 3)]

    @classmethod
    def from_raw(cls, raw_cameras: Iterable[RawCamera], convention: Convention) -> Rig:
        """Build a rig from raw stored calibration and the convention it was stored in.

        Args:
            raw_cameras: Stored calibration, one :class:`bevviz.storage.RawCamera` per camera,
                in rig order (a list; a dict is refused, pass its ``values()``).
            convention: How it was stored (:class:`bevviz.storage.Convention`).

        Raises:
            InputError: ``raw_cameras`` not a list of ``RawCamera`` (or more than
                ``MAX_CAMERAS``), ``convention`` not a ``Convention``, or anything
                :func:`camera_from_raw` and :class:`Rig` refuse.

        Convention:
            See :func:`camera_from_raw` and docs/conventions.md.
        """
        return cls([camera_from_raw(r, convention) for r in _camera_list(raw_cameras, "raw_cameras")])

    def to_raw(self, convention: Convention) -> list[RawCamera]:
        """The rig stored in ``convention``: one :class:`bevviz.storage.RawCamera` per camera."""
        return [raw_from_camera(c, convention) for c in self._cameras]


def camera_from_raw(raw: RawCamera, convention: Convention) -> Camera:
    """Convert stored calibration to a :class:`Camera` (``cam_from_ego``, RDF axes).

    Args:
        raw: Stored calibration.
        convention: How it was stored.

    Returns:
        The camera.

    Raises:
        InputError: ``raw`` not a ``RawCamera``, ``convention`` not a ``Convention``, a name
            outside the rule, or a field the camera refuses (a non-unit quaternion among them).

    Convention:
        ``sensor_to_ego``: stored (R, t) is ``ego_from_sensor``;
        ``ego_to_sensor``: stored (R, t) is ``sensor_from_ego``. The sensor frame has the
        stored axes; ``cam_from_ego = rdf_from_stored @ stored_from_ego``. See
        docs/conventions.md.
    """
    if not isinstance(raw, RawCamera):
        raise field_error("raw_cameras", type(raw).__name__, "every entry must be a bevviz.storage.RawCamera")
    if not isinstance(convention, Convention):
        raise field_error("convention", type(convention).__name__, "must be a bevviz.storage.Convention")
    check_camera_name(raw.name)  # before the name prefixes any other message
    return Camera(raw.name, raw.K, raw.cam_from_ego(convention), raw.width, raw.height)


def raw_from_camera(camera: Camera, convention: Convention, rotation_as: str = "quaternion") -> RawCamera:
    """Store a camera in ``convention``; the inverse of :func:`camera_from_raw`.

    Args:
        camera: The camera.
        convention: Target convention.
        rotation_as: ``"quaternion"`` (in the convention's order) or ``"matrix"``.

    Returns:
        The stored calibration.
    """
    return RawCamera.storing(camera.name, camera.K, camera.cam_from_ego, camera.width, camera.height,
                             convention, rotation_as)


#: Two calibrations whose ``K`` and ``cam_from_ego`` agree within this relative tolerance (and
#: 1e-9 absolute) are one: what a file round trip (float32 included) changes, not a re-calibration.
SAME_CALIBRATION_RTOL = 1e-6


def calibration_difference(a: Camera, b: Camera) -> str:
    """Which calibration fields of two cameras differ, and by how much, in words.

    The one test of "the same calibration" (several frames of one rig, grouping frames into
    rigs): image size exactly, ``K`` and ``cam_from_ego`` within :data:`SAME_CALIBRATION_RTOL`.
    The names are not compared.

    Args:
        a: One camera.
        b: The other (e.g. the same camera in another frame).

    Returns:
        ``""`` when the calibrations are the same; else e.g. ``"cam_from_ego differs by up to
        0.0175"`` or ``"image size 1600 x 900 vs 800 x 450"`` (parts joined by ``"; "``).
    """
    parts = []
    if a.size != b.size:
        parts.append(f"image size {a.size[0]} x {a.size[1]} vs {b.size[0]} x {b.size[1]}")
    for field_name, x, y in (("K", a.K, b.K), ("cam_from_ego", a.cam_from_ego, b.cam_from_ego)):
        if not np.allclose(x, y, rtol=SAME_CALIBRATION_RTOL, atol=1e-9):
            parts.append(f"{field_name} differs by up to {float(np.abs(x - y).max()):.4g}")
    return "; ".join(parts)


def same_calibration(a: Rig, b: Rig) -> bool:
    """Whether two rigs are one rig with one calibration: the same cameras in the same order,
    each with no :func:`calibration_difference`."""
    return a.names == b.names and not any(calibration_difference(a[n], b[n]) for n in a.names)


def measured_from_ground(rig: Rig, ground_z: float) -> Rig:
    """The rig in a frame whose z = 0 is the ground at ego z = ``ground_z`` (a rig stored in a
    sensor's frame, whose LiDAR sees the road at ``ground_z``; see
    :func:`bevviz.lidar.ground_height`): the same cameras, heights measured from the road.

    Args:
        rig: The rig (N_cam cameras).
        ground_z: Ego z of the ground, metres; 0 returns ``rig`` itself.

    Returns:
        The rig with every ``cam_from_ego`` taking ground-level points (z' = z - ground_z).

    Convention:
        ``cam_from_ground = cam_from_ego @ ego_from_ground``, ``ego_from_ground`` a
        translation by ``(0, 0, ground_z)``.
    """
    if not ground_z:
        return rig
    ego_from_ground = make_transform(np.eye(3), np.array([0.0, 0.0, float(ground_z)]))
    return Rig([c.replace(cam_from_ego=c.cam_from_ego @ ego_from_ground) for c in rig])
