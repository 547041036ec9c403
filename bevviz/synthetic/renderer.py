"""The renderer: camera images and LiDAR sweeps of the world, by vectorised ray casting.

One ray per sub-pixel through any :class:`~bevviz.camera.Rig` (numpy, no per-pixel Python
loops): ground plane and oriented boxes (slab method), nearest hit wins, sky gradient above
the horizon, trilinear mip-mapped texture lookups plus 2x2 supersampling against moire,
distance haze, and a mild per-camera exposure gain and vignetting (so seam metrics must be
exposure-robust).

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres; at the
    identity ego pose the ego frame (x forward, y left, z up) coincides with it. See
    docs/conventions.md.
    Cameras are RDF; pixels have integer coordinates at their centres, so a pixel's ray is
    ``K^-1 [u, v, 1]``.
"""

from __future__ import annotations

import math

import numpy as np

from bevviz.camera import Camera, Rig
from bevviz.checks import as_float_array, check_shape, field_error
from bevviz.projection import rays_of
from bevviz.rotations import make_transform
from bevviz.synthetic.layout import SKY_HORIZON, SKY_ZENITH, SUN
from bevviz.synthetic.world import BOX, GROUND, SKY, World, cast_rays, default_world, sample_ground

__all__ = [
    "LIDAR_MOUNT", "camera_rays", "exposure_map", "lidar_scan", "render", "render_camera"
]


def _shade(world: World, origin: np.ndarray, dirs: np.ndarray, sample_angle: float) -> np.ndarray:
    """Colour of unit rays from one origin, RGB float32 (N, 3), before exposure.

    ``sample_angle`` is the angle (radians) one ray stands for, used for the mip level.
    """
    hits = cast_rays(world, origin, dirs)
    color = np.empty((len(dirs), 3), np.float32)
    # Sky: horizon -> zenith gradient by elevation.
    sky = hits.kind == SKY
    if sky.any():
        elev = np.clip(dirs[sky, 2], 0.0, 1.0)
        w = (np.clip(elev / 0.5, 0.0, 1.0) ** 0.6)[:, None]
        color[sky] = (np.float32(SKY_HORIZON) * (1 - w) + np.float32(SKY_ZENITH) * w)
    ground = np.nonzero(hits.kind == GROUND)[0]
    if ground.size:
        t = hits.t[ground]
        cos_inc = np.maximum(np.abs(dirs[ground, 2]), 1e-3)
        footprint = t * sample_angle / np.sqrt(cos_inc)  # geometric mean of the footprint axes
        color[ground] = sample_ground(hits.point[ground], world, footprint)
    boxes = np.nonzero(hits.kind == BOX)[0]
    for i, box in enumerate(world.boxes):
        sel = boxes[hits.box[boxes] == i]
        if not sel.size:
            continue
        f = hits.face[sel].astype(np.int64)
        base = np.asarray(box.face_colors, np.float32)[f]
        normals_box = np.zeros((len(sel), 3))
        normals_box[np.arange(len(sel)), f // 2] = np.where(f % 2 == 0, 1.0, -1.0)
        lambert = np.clip((normals_box @ box.rotation.T) @ SUN, 0.0, 1.0)
        shade = 0.78 + 0.22 * lambert
        # Dark outline along every box edge (within 4 cm of two faces' bounds).
        local = (hits.point[sel] - box.center3) @ box.rotation
        near_edge = (np.abs(np.abs(local) - np.array(box.size) / 2) < 0.04).sum(axis=1) >= 2
        shade = np.where(near_edge, 0.35, shade)
        color[sel] = base * shade[:, None].astype(np.float32)
    # Distance haze towards the horizon colour (none within 30 m).
    if ground.size or boxes.size:
        solid = np.nonzero(hits.kind != SKY)[0]
        h = 1.0 - np.exp(-np.maximum(hits.t[solid] - 30.0, 0.0) / 300.0)
        h = h.astype(np.float32)[:, None]
        color[solid] = color[solid] * (1 - h) + np.float32(SKY_HORIZON) * h
    return color


def camera_rays(camera: Camera, world_from_ego: np.ndarray | None = None,
                uv=None) -> tuple[np.ndarray, np.ndarray]:
    """Rays through pixels of a camera, in the world frame.

    Args:
        camera: The camera.
        world_from_ego: Ego pose (4, 4); identity when None.
        uv: Pixel coordinates (u, v), shape (N, 2); None: every pixel centre in row-major
            order (N = H * W).

    Returns:
        ``(origin, dirs)``: camera centre in the world, shape (3,); unit directions,
        shape (N, 3).

    Convention:
        Pixel centres at integer (u, v); ray direction ``R_world_from_cam K^-1 [u, v, 1]``.
    """
    T = np.eye(4) if world_from_ego is None else as_float_array(world_from_ego, "world_from_ego")
    check_shape(T, (4, 4), "world_from_ego")
    world_from_cam = T @ camera.ego_from_cam
    if uv is None:
        vv, uu = np.mgrid[0:camera.height, 0:camera.width]
        uv = np.stack([uu.ravel(), vv.ravel()], axis=1).astype(float)
    uv = as_float_array(uv, "uv")
    check_shape(uv, (None, 2), "uv")
    d = rays_of(uv, camera.K) @ world_from_cam[:3, :3].T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return world_from_cam[:3, 3].copy(), d


def exposure_map(camera: Camera, world: World | None = None) -> np.ndarray:
    """Per-pixel brightness factor the renderer applies: exposure gain times vignetting.

    Args:
        camera: The camera (its name selects the gain).
        world: The world (default :func:`default_world`).

    Returns:
        Factor per pixel, float32, shape (H, W): ``gain * (1 - vignette * r^2)`` with r the
        distance from the principal point, normalised to 1 at the farthest image corner.
    """
    world = world or default_world()
    W, H = camera.width, camera.height
    cx, cy = camera.K[0, 2], camera.K[1, 2]
    rmax2 = max(cx + 0.5, W - 0.5 - cx) ** 2 + max(cy + 0.5, H - 0.5 - cy) ** 2
    v = np.arange(H)[:, None] - cy
    u = np.arange(W)[None, :] - cx
    gain = world.exposure_gains.get(camera.name, 1.0)
    return (gain * (1.0 - world.vignette * (u * u + v * v) / rmax2)).astype(np.float32)


def render_camera(camera: Camera, world: World | None = None, world_from_ego: np.ndarray | None = None,
                  supersample: int = 2, exposure: bool = True, rows_per_chunk: int = 64) -> np.ndarray:
    """Render one camera's image of the world.

    Args:
        camera: The camera (cam_from_ego, K, size).
        world: The world (default :func:`default_world`).
        world_from_ego: Ego pose in the world, shape (4, 4); identity when None.
        supersample: s x s rays per pixel, at sub-pixel offsets ``(k + 0.5) / s - 0.5``.
        exposure: Apply the camera's exposure gain and vignetting.
        rows_per_chunk: Image rows processed at once (bounds memory).

    Returns:
        RGB uint8 image, shape (H, W, 3).

    Convention:
        Pixel centres at integer coordinates: pixel (u, v)'s rays pass through
        ``(u + du, v + dv)`` for the supersampling offsets du, dv, symmetric about 0.
    """
    world = world or default_world()
    s = int(supersample)
    if s < 1:
        raise field_error("supersample", supersample, "must be >= 1", camera.name)
    T = np.eye(4) if world_from_ego is None else as_float_array(world_from_ego, "world_from_ego")
    W, H = camera.width, camera.height
    off = (np.arange(s) + 0.5) / s - 0.5
    focal = math.sqrt(camera.K[0, 0] * camera.K[1, 1])
    sample_angle = 1.0 / (focal * s)
    factor = exposure_map(camera, world) if exposure else None
    out = np.empty((H, W, 3), np.uint8)
    us = (np.arange(W)[:, None] + off[None, :]).ravel()  # (W * s,)
    for r0 in range(0, H, rows_per_chunk):
        r1 = min(H, r0 + rows_per_chunk)
        vs = (np.arange(r0, r1)[:, None] + off[None, :]).ravel()  # (rows * s,)
        vv, uu = np.meshgrid(vs, us, indexing="ij")
        origin, dirs = camera_rays(camera, T, np.stack([uu.ravel(), vv.ravel()], axis=1))
        color = _shade(world, origin, dirs, sample_angle)
        color = color.reshape(r1 - r0, s, W, s, 3).mean(axis=(1, 3))
        if factor is not None:
            color = color * factor[r0:r1, :, None]
        out[r0:r1] = np.clip(np.rint(color), 0, 255).astype(np.uint8)
    return out


def render(rig: Rig, world: World | None = None, world_from_ego: np.ndarray | None = None,
           supersample: int = 2, exposure: bool = True) -> dict[str, np.ndarray]:
    """Render every camera of a rig.

    Args:
        rig: The rig (true calibration).
        world: The world (default :func:`default_world`).
        world_from_ego: Ego pose in the world, shape (4, 4) (nuScenes ``ego_pose``:
            ego -> global); identity when None.
        supersample: Rays per pixel along each axis.
        exposure: Apply per-camera exposure gain and vignetting.

    Returns:
        Camera name -> RGB uint8 image, shape (H, W, 3), in rig order.
    """
    return {cam.name: render_camera(cam, world, world_from_ego, supersample, exposure) for cam in rig}


LIDAR_MOUNT = (0.943, 0.0, 1.841)


def lidar_scan(world: World, world_from_ego: np.ndarray, beams: int = 16,
               azimuths: int = 360, max_range: float = 70.0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic LIDAR_TOP sweep by ray casting (identity mount rotation).

    Returns:
        ``(points, box_ids)``: nuScenes .pcd.bin rows (x, y, z, intensity, ring) in the
        lidar frame, float32, shape (N, 5); the box index each point hit (-1 for ground),
        shape (N,).
    """
    el = np.radians(np.linspace(-25.0, -2.0, beams))
    az = np.radians(np.arange(azimuths) * 360.0 / azimuths)
    E, A = np.meshgrid(el, az, indexing="ij")
    d_l = np.stack([np.cos(E) * np.cos(A), np.cos(E) * np.sin(A), np.sin(E)], -1).reshape(-1, 3)
    ring = np.repeat(np.arange(beams), azimuths)
    world_from_lidar = world_from_ego @ make_transform(np.eye(3), np.array(LIDAR_MOUNT))
    o = world_from_lidar[:3, 3]
    d_w = d_l @ world_from_lidar[:3, :3].T
    hits = cast_rays(world, o, d_w)
    keep = (hits.kind != SKY) & (hits.t < max_range)
    lum = np.zeros(len(d_l))
    g = keep & (hits.kind == GROUND)
    lum[g] = sample_ground(hits.point[g], world).mean(axis=1)
    lum[keep & (hits.kind == BOX)] = 60.0
    pts = np.concatenate([d_l * hits.t[:, None], (lum / 255.0 * 100.0)[:, None], ring[:, None]], 1)
    return pts[keep].astype(np.float32), hits.box[keep].astype(np.int64)
