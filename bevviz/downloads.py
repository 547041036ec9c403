"""Byte builders for the app's downloads: projected coordinates (CSV, NPZ), BEV heatmaps
(PNG) and the current rig (JSON). Pure: in-memory bytes, no Streamlit, no files.

Convention:
    Projected coordinates use the pixel-centre convention (integer u, v at pixel centres);
    BEV arrays keep the BEV layout (row 0 front / largest x, column 0 left / largest y), so
    a saved PNG looks like the app's BEV maps (forward up).
    See docs/conventions.md.
"""

from __future__ import annotations

import io
import json

import cv2
import numpy as np
import pandas as pd

from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import to_numpy
from bevviz.io.rig_json import rig_to_dict
from bevviz.overlays.status import STATUS_NAMES, point_status
from bevviz.projection import Projection

CSV_COLUMNS = ("camera", "z_index", "row", "col", "x", "y", "z", "u", "v", "depth", "status")


def projection_npz(proj: Projection, rig: Rig, grid: BEVGrid) -> bytes:
    """Projected grid points as a compressed ``.npz``.

    Arrays: ``cameras`` (N_cam,), ``points`` (Z, H_bev, W_bev, 3) ego metres, ``uv``
    (N_cam, Z, H_bev, W_bev, 2), ``depth`` and ``valid`` (N_cam, Z, H_bev, W_bev),
    ``status`` (same, 0 valid / 1 behind / 2 outside), ``z_values`` (Z,),
    ``x_range``, ``y_range`` (2,), ``resolution`` ().
    """
    buf = io.BytesIO()
    np.savez_compressed(
        buf, cameras=np.array(rig.names), points=grid.points().numpy().astype(np.float32),
        uv=to_numpy(proj.uv).astype(np.float32), depth=to_numpy(proj.depth).astype(np.float32),
        valid=to_numpy(proj.valid).astype(bool), status=point_status(proj),
        z_values=np.array(grid.z_values), x_range=np.array(grid.x_range), y_range=np.array(grid.y_range),
        resolution=np.array(grid.resolution))
    return buf.getvalue()


def projection_csv(proj: Projection, rig: Rig, grid: BEVGrid, valid_only: bool = True,
                   max_rows: int | None = None) -> bytes:
    """Projected grid points as CSV, one row per (camera, pillar point).

    Args:
        proj: Projection of ``grid.points()``, fields (N_cam, Z, H_bev, W_bev).
        rig: The rig (camera names).
        grid: The grid (metric coordinates).
        valid_only: Keep only valid points (the full table is N_cam x Z x H x W rows).
        max_rows: Optional cap on the number of rows (evenly strided).

    Returns:
        UTF-8 CSV with the header ``CSV_COLUMNS``.
    """
    pts = grid.points().numpy()  # (Z, H, W, 3)
    uv, depth, status = to_numpy(proj.uv), to_numpy(proj.depth), point_status(proj)
    N = uv.shape[0]
    idx = np.argwhere(status == 0) if valid_only else np.argwhere(np.ones_like(status, dtype=bool))
    if max_rows is not None and len(idx) > max_rows:
        idx = idx[np.linspace(0, len(idx) - 1, max_rows).round().astype(int)]
    c, k, i, j = idx.T if len(idx) else (np.zeros(0, int),) * 4
    p = pts[k, i, j]

    def mm(values: np.ndarray) -> np.ndarray:
        # Millimetres / thousandths of a pixel. Rounded float64 values print as their short
        # decimal (12.345, 5.0) through pandas' fast writer; a float_format would format in
        # Python (5x slower).
        return np.round(np.asarray(values, dtype=np.float64), 3)

    columns = dict(zip(CSV_COLUMNS, (
        np.array(rig.names, dtype=object)[c] if N else np.zeros(0, dtype=object), k, i, j,
        mm(p[:, 0]), mm(p[:, 1]), mm(p[:, 2]), mm(uv[c, k, i, j, 0]), mm(uv[c, k, i, j, 1]),
        mm(depth[c, k, i, j]), np.array(STATUS_NAMES, dtype=object)[status[c, k, i, j]],
    )))
    return pd.DataFrame(columns).to_csv(index=False, lineterminator="\n").encode("utf-8")


def heatmap_png(values: np.ndarray, vmin: float | None = None, vmax: float | None = None,
                colormap: int = cv2.COLORMAP_VIRIDIS) -> bytes:
    """A BEV map as PNG bytes.

    Args:
        values: Scalar map (H, W) (scaled from [vmin, vmax], joint min/max by default, and
            coloured with an OpenCV colormap), or RGB (H, W, 3): uint8 as is, floats scaled
            from [vmin, vmax].
        vmin, vmax: Value range.
        colormap: OpenCV colormap for scalar maps.

    Returns:
        PNG file bytes (RGB as stored in the array, BEV layout kept).
    """
    v = np.asarray(values)
    if v.ndim == 3 and v.dtype == np.uint8:
        rgb = v
    else:
        f = v.astype(np.float64)
        finite = f[np.isfinite(f)]
        lo = float(finite.min()) if vmin is None and finite.size else (0.0 if vmin is None else vmin)
        hi = float(finite.max()) if vmax is None and finite.size else (1.0 if vmax is None else vmax)
        scaled = np.clip((np.nan_to_num(f, nan=lo) - lo) / (hi - lo if hi > lo else 1.0), 0, 1)
        u8 = (scaled * 255).round().astype(np.uint8)
        if v.ndim == 2:
            rgb = cv2.applyColorMap(u8, colormap)[..., ::-1]
        else:
            rgb = u8
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:
        raise ValueError(f"field 'values': could not encode a PNG of shape {v.shape}")
    return buf.tobytes()


def rig_json(rig: Rig, image_files: dict[str, str] | None = None) -> bytes:
    """The rig in bevviz's JSON rig format (UTF-8), via :func:`bevviz.io.rig_json.rig_to_dict`.

    Args:
        rig: The rig.
        image_files: Optional camera name -> image file name to record.
    """
    return json.dumps(rig_to_dict(rig, image_files=image_files), indent=2).encode("utf-8")
