"""Derived geometry and measurements the debugger pages show.

Everything here is numbers, not figures: the horizon line of a camera, the ground grid
projected into an image, camera frustums and axes in the ego frame, the validity status of
every projected point, BEV footprints and overlap counts, and the small experiments of the
padding lab, the LiDAR points each camera sees and the annotation boxes' wireframes. Split
by what they draw: :mod:`~bevviz.overlays.status` (point status),
:mod:`~bevviz.overlays.camera_geometry`, :mod:`~bevviz.overlays.coverage` (BEV cells),
:mod:`~bevviz.overlays.padding` and :mod:`~bevviz.overlays.lidar`; every public name is
re-exported here. The plotly builders
in :mod:`bevviz.viz` draw what this package computes, and the app's pages only wire the two
together.

Convention:
    Ego frame x forward, y left, z up (metres); camera frame RDF; pixels (u, v) with
    integer values at pixel centres, so an image of width W spans u in [-0.5, W - 0.5].
    BEV arrays are (H_bev, W_bev) with row 0 at the front (largest x) and column 0 at the
    left (largest y), as :class:`bevviz.bev_grid.BEVGrid` lays them out. See docs/conventions.md.
"""

from bevviz.checks import to_numpy
from bevviz.overlays.camera_geometry import (
    GroundGridLines,
    backproject,
    camera_axes,
    clip_line_to_box,
    frustum,
    ground_grid_lines,
    horizon_line,
    image_corners,
)
from bevviz.overlays.coverage import (
    ValidityComparison,
    cell_center,
    cell_report,
    channel_view,
    compare_validity,
    disagreement,
    error_table,
    footprints,
    grid_projection,
    overlap_count,
    overlap_summary,
    subsample_indices,
)
from bevviz.overlays.lidar import (
    BOX_EDGES,
    MAX_LIDAR_POINTS,
    BoxWireframes,
    CameraLidar,
    box_corners,
    box_wireframe,
    boxes_in_cameras,
    camera_lidar,
    depth_buffer,
    lidar_in_cameras,
    unoccluded,
)
from bevviz.overlays.padding import (
    PaddingCase,
    half_pixel_mismatch,
    margin_grid,
    margin_grid_pixels,
    padding_cases,
    pixel_grid,
    test_pattern,
)
from bevviz.overlays.status import (
    STATUS_BEHIND,
    STATUS_NAMES,
    STATUS_OUTSIDE,
    STATUS_VALID,
    behind_camera_uv,
    point_status,
    status_table,
)

__all__ = [
    "STATUS_BEHIND", "STATUS_NAMES", "STATUS_OUTSIDE", "STATUS_VALID", "STATUS_VALID", "behind_camera_uv",
    "point_status", "status_table", "backproject", "camera_axes", "clip_line_to_box", "frustum", "ground_grid_lines",
    "GroundGridLines", "horizon_line", "image_corners", "cell_center", "cell_report", "channel_view",
    "compare_validity", "disagreement", "error_table", "footprints", "grid_projection", "overlap_count",
    "overlap_summary", "subsample_indices", "ValidityComparison", "half_pixel_mismatch", "margin_grid",
    "margin_grid_pixels", "padding_cases", "PaddingCase", "pixel_grid", "test_pattern", "to_numpy",
    "BOX_EDGES", "MAX_LIDAR_POINTS", "BoxWireframes", "CameraLidar", "box_corners", "box_wireframe", "boxes_in_cameras",
    "camera_lidar", "depth_buffer", "lidar_in_cameras", "unoccluded",
]
