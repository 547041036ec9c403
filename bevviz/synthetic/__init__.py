"""Procedural world with known ground truth and a renderer that makes ``sample_data``.

The world is a flat ground plane (z = 0) carrying a painted BEV texture (a road with white
dashed and solid lane lines, a yellow centre line, stop line and crosswalks, a paved
sidewalk, coloured tiles, a 1 m metric checker and labelled 10 m rings) plus a few
boxes standing on it (cars, a truck, poles), each face in its own colour. Every feature is
defined in metres, so tests can project known ground points with the true calibration
and check that they land on pixels of the right colour.

The renderer casts one ray per sub-pixel through any :class:`~bevviz.camera.Rig`
(vectorised numpy, no per-pixel Python loops): ground plane and oriented boxes (slab
method), nearest hit wins, sky gradient above the horizon, trilinear mip-mapped texture
lookups plus 2x2 supersampling against moire, distance haze, and a mild per-camera
exposure gain and vignetting (so seam metrics must be exposure-robust).

The package: :mod:`~bevviz.synthetic.layout` (the street in metres),
:mod:`~bevviz.synthetic.texture` (the painted ground), :mod:`~bevviz.synthetic.world` (the
world and ray casting), :mod:`~bevviz.synthetic.rig` (the nuScenes-like rig),
:mod:`~bevviz.synthetic.renderer` (camera images, LiDAR sweeps) and
:mod:`~bevviz.synthetic.dataset` (the writer). Every public name is re-exported here.

Run ``python -m bevviz.synthetic --out sample_data`` to regenerate the embedded sample
bit for bit: a nuScenes-format mini dataset (three scenes: calibrated, one with a known
miscalibrated camera, one whose stored calibration drifts), a bevviz JSON rig with its images,
and the ground texture.

Convention:
    World frame = nuScenes "global" frame: x, y on the ground, z up, metres. The ego
    frame (x forward, y left, z up) sits on the ground; at the identity ego pose the ego
    and world frames coincide (scene A, first sample, and ``sample_data/rig.json``).
    Cameras are RDF; pixels have integer coordinates at their centres, so a pixel's ray
    is ``K^-1 [u, v, 1]``. The ground texture is stored as BEV is displayed: row 0 is the
    front (max x), column 0 the left (max y); texel (i, j) has its centre at
    ``x = x_max - (i + 0.5) * res``, ``y = y_max - (j + 0.5) * res`` (as :class:`BEVGrid`). See docs/conventions.md.
"""

from bevviz.synthetic.dataset import (
    BASE_TIMESTAMP,
    JPEG_QUALITY,
    README,
    SCENES,
    axis_angle_matrix,
    generate,
    main,
    write_nuscenes,
)
from bevviz.synthetic.layout import (
    ASPHALT,
    BOXES,
    CHECKER,
    CROSSWALK_Y,
    CROSSWALKS_X,
    DASH_LENGTH,
    DASH_PERIOD,
    EXPOSURE_GAINS,
    FAR_GROUND,
    LABEL,
    LABEL_PLATE,
    LEFT_SIDEWALK_Y,
    RIGHT_SIDEWALK_Y,
    RING,
    ROAD_Y,
    SIDEWALK,
    SIDEWALK_JOINT,
    SKY_HORIZON,
    SKY_ZENITH,
    STOP_LINE,
    SUN,
    TEXTURE_EXTENT,
    TEXTURE_RESOLUTION,
    TILE_PALETTE,
    VIGNETTE,
    WHITE,
    YELLOW,
    Box,
    Marking,
    road_markings,
)
from bevviz.synthetic.renderer import LIDAR_MOUNT, camera_rays, exposure_map, lidar_scan, render, render_camera
from bevviz.synthetic.rig import IMAGE_SIZE, NUSCENES_LIKE_MOUNTS, mounted_camera, nuscenes_like_rig
from bevviz.synthetic.texture import build_ground_texture, ground_texture, lane_marking_points, texture_grid
from bevviz.synthetic.world import BOX, GROUND, SKY, Hits, World, cast_rays, default_world, sample_ground

__all__ = [
    "ASPHALT", "BOXES", "CHECKER", "CROSSWALK_Y", "CROSSWALKS_X", "DASH_LENGTH", "DASH_PERIOD", "EXPOSURE_GAINS",
    "FAR_GROUND", "LABEL", "LABEL_PLATE", "LEFT_SIDEWALK_Y", "RIGHT_SIDEWALK_Y", "RING", "ROAD_Y", "SIDEWALK",
    "SIDEWALK_JOINT", "SKY_HORIZON", "SKY_ZENITH", "STOP_LINE", "SUN", "TEXTURE_EXTENT", "TEXTURE_RESOLUTION",
    "TILE_PALETTE", "VIGNETTE", "WHITE", "YELLOW", "Box", "Marking", "road_markings", "build_ground_texture",
    "ground_texture", "lane_marking_points", "texture_grid", "BOX", "GROUND", "SKY", "cast_rays", "default_world",
    "Hits", "sample_ground", "World", "IMAGE_SIZE", "NUSCENES_LIKE_MOUNTS", "mounted_camera", "nuscenes_like_rig",
    "LIDAR_MOUNT", "camera_rays", "exposure_map", "lidar_scan", "render", "render_camera", "BASE_TIMESTAMP",
    "JPEG_QUALITY", "README", "SCENES", "axis_angle_matrix", "generate", "main", "write_nuscenes"
]
