"""Build ``sample_data/real_tri``, ``sample_data/real_tri_drive`` and ``sample_data/real_kitti``.

Usage: ``python scripts/build_real_frames.py --src DIR --out sample_data``

``DIR`` holds real frame folders in the format :mod:`bevviz.io.frame_folder` reads
(``rig.json``, ``images/``, ``lidar_ego.npy``, optional ``exposure.json``): ``tri_s02_t0``,
``tri_s02_t1``, ``tri_s02_t2`` (three consecutive samples of a TRI DDAD-style 6-camera rig,
from TRI-ML/dgp's test scene) and ``kitti_000001`` (KITTI's colour camera 2 with its
Velodyne). ``real_tri`` is the first TRI frame; ``real_tri_drive`` holds all three as the
frame folders ``t0/``, ``t1/``, ``t2/`` (a drive: ``bevviz check`` judges them together), its
``t0/`` byte-identical to ``real_tri`` (git stores those files once). What is made smaller,
and how:

- TRI: images halved (968 x 608) with area averaging, JPEG quality 85; the intrinsics are
  rescaled with them (``u' = (u + 0.5) s - 0.5``), so the rig describes the images it ships
  with. The LiDAR sweep is kept whole (the cameras see all around).
- KITTI: the image is kept at its size (1242 x 375), as JPEG quality 90 instead of PNG; the
  sweep is cut to the points in front of the car within 60 degrees of straight ahead (the one
  camera sees 81 degrees), as KITTI's own ``velodyne_reduced`` files do.

Point order, intensity scale (0..1 in both), extrinsics and exposure motion are unchanged.
Each folder gets a README with the source, the licence and what was changed. A rerun writes
the same bytes. The script reads the rebuilt folders back with
:func:`bevviz.io.frame_folder.load_frame_folder` and checks that the sweeps'
projections agree with the sources' within 0.01 px (times the scale).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bevviz.io.frame_folder import load_frame_folder  # noqa: E402
from bevviz.projection import project_points  # noqa: E402

TRI_README = """# real_tri: one frame of a TRI 6-camera rig (generated: do not edit by hand)

Six camera images and the merged LiDAR sweep of one moment from a Toyota Research Institute
(TRI) surround rig (DDAD-style: one narrow front camera, five wide ones), with the dataset's
own calibration, built by `scripts/build_real_frames.py`, in the frame-folder format the Calibration Doctor reads
(`bevviz.io.frame_folder.load_frame_folder`; `rig.json`, `images/`,
`lidar_ego.npy`, `exposure.json`).

## Source and licence

The data is from **Toyota Research Institute**: the public repository TRI-ML/dgp (MIT
licence for the code), `tests/data/dgp/test_scene/scene_02`, sample 0 (commit
1e06dc9349ab63c3c73c498e1528d9522d3f4f95). The data is most likely from TRI's **DDAD**
dataset and is treated as such: **Creative Commons Attribution-NonCommercial-ShareAlike 4.0
International (CC BY-NC-SA 4.0)**, <https://creativecommons.org/licenses/by-nc-sa/4.0/>.
**Non-commercial use only**; credit Toyota Research Institute; what is built from this folder
must be shared under the same licence with this attribution. This licence covers this folder
only, not the rest of the repository.

## What was changed

- Images halved to 968 x 608 (area averaging) and stored as JPEG quality 85; the intrinsics
  in `rig.json` are rescaled with them (`u' = (u + 0.5) s - 0.5`, s = 0.5).
- `lidar_ego.npy`: float32 (N, 4) x, y, z in the ego frame (x forward, y left, z up) and
  intensity 0..1, unchanged, in the source's order (a merged multi-LiDAR cloud: no firing order,
  no ring).
- `exposure.json`: per camera the 4x4 `exposure_from_keyframe` = ego(t_camera) from
  ego(t_lidar), from the dataset's own per-sensor poses, unchanged.
- The car's own body fills the bottom of the side and rear images.
"""

KITTI_README = """# real_kitti: one KITTI frame (generated: do not edit by hand)

KITTI's rectified colour camera 2 and the Velodyne HDL-64E sweep of the same moment, with
KITTI's own calibration (the ego frame is the Velodyne's), built by
`scripts/build_real_frames.py`, in the frame-folder format the
Calibration Doctor reads (`bevviz.io.frame_folder.load_frame_folder`; `rig.json`,
`images/`, `lidar_ego.npy`). A one-camera rig: the doctor judges it as a camera-LiDAR pair.

## Source and licence

The data is from the **KITTI Vision Benchmark Suite** (object benchmark, frame 000001, as the
public repository kuixu/kitti_object_vis ships it), by Andreas Geiger, Philip Lenz, Christoph
Stiller and Raquel Urtasun: *Vision meets Robotics: The KITTI Dataset*, International Journal
of Robotics Research (IJRR), 2013. It is licensed under **Creative Commons
Attribution-NonCommercial-ShareAlike 3.0 (CC BY-NC-SA 3.0)**,
<https://creativecommons.org/licenses/by-nc-sa/3.0/>. **Non-commercial use only**; cite the
paper above; what is built from this folder must be shared under the same licence with this
attribution. This licence covers this folder only, not the rest of the repository.

## What was changed

- The image is stored as JPEG quality 90 (the source is a PNG), at its size (1242 x 375).
- `lidar_ego.npy`: float32 (N, 4) x, y, z in the Velodyne frame and intensity 0..1, cut to the
  points in front of the car within 60 degrees of straight ahead (the camera sees 81 degrees),
  in the source's order (ring after ring, no ring index).
"""


def _write_jpeg(path: Path, rgb: np.ndarray, quality: int) -> None:
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise SystemExit(f"cannot encode {path}")
    path.write_bytes(buf.tobytes())


def _scaled_rig(rig_json: dict, scale: float, images: dict[str, str]) -> dict:
    out = json.loads(json.dumps(rig_json))
    for cam in out["cameras"]:
        K = np.asarray(cam["K"], dtype=np.float64)
        K[0, 0] *= scale
        K[1, 1] *= scale
        K[0, 2] = (K[0, 2] + 0.5) * scale - 0.5
        K[1, 2] = (K[1, 2] + 0.5) * scale - 0.5
        cam["K"] = K.tolist()
        cam["width"] = round(cam["width"] * scale)
        cam["height"] = round(cam["height"] * scale)
        cam["image"] = images[cam["name"]]
    return out


def build(src: Path, out: Path, name: str, scale: float, quality: int, keep: str | None, readme: str) -> Path:
    """Write one frame folder ``out`` from ``src`` (see the module docstring); ``readme`` "": none."""
    if out.exists():
        shutil.rmtree(out)
    (out / "images").mkdir(parents=True)
    frame = load_frame_folder(src)
    rig_json = json.loads((src / "rig.json").read_text())
    files = {}
    for cam in frame.rig.names:
        img = frame.images[cam]
        if scale != 1.0:
            size = (round(img.shape[1] * scale), round(img.shape[0] * scale))
            img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
        files[cam] = f"images/{cam}.jpg"
        _write_jpeg(out / files[cam], img, quality)
    (out / "rig.json").write_text(json.dumps(_scaled_rig(rig_json, scale, files), indent=1) + "\n")
    pts = np.load(src / "lidar_ego.npy")
    if keep == "front60":
        az = np.degrees(np.arctan2(pts[:, 1], pts[:, 0]))
        pts = pts[(pts[:, 0] > 0) & (np.abs(az) <= 60.0)]
    np.save(out / "lidar_ego.npy", pts.astype(np.float32))
    if (src / "exposure.json").is_file():
        shutil.copyfile(src / "exposure.json", out / "exposure.json")
    if readme:
        (out / "README.md").write_text(readme)
    # check: the rebuilt rig projects the source's points where the source rig does, times the scale
    built = load_frame_folder(out)
    xyz = frame.scan.xyz[:2000]
    a = project_points(xyz, frame.rig)
    b = project_points(xyz, built.rig)
    both = a.valid & b.valid
    err = float(np.abs((a.uv[both] + 0.5) * scale - 0.5 - b.uv[both]).max()) if both.any() else 0.0
    print(f"{name}: {out} ({sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 1e6:.2f} MB, "
          f"{len(built.scan)} points); projection agreement {err:.2e} px")
    if err > 0.01 * scale:
        raise SystemExit(f"{name}: the rescaled rig disagrees with the source by {err} px")
    return out


TRI_DRIVE_README = """# real_tri_drive: three consecutive frames of a TRI 6-camera rig (generated: do not edit by hand)

A drive of three frame folders, `t0/`, `t1/` and `t2/`, in time order: three consecutive
samples (about 0.1 s apart, driving straight) of the Toyota Research Institute (TRI) surround
rig that `real_tri` shows one frame of (DDAD-style: one narrow front camera, five wide ones),
each with its six camera images, the merged LiDAR sweep and the dataset's own calibration
(the same in all three), built by `scripts/build_real_frames.py`. Each subfolder is a frame
folder (`rig.json`, `images/`, `lidar_ego.npy`, `exposure.json`;
`bevviz.io.frame_folder.load_frame_folder`); the folder as a whole is a drive that
`bevviz check sample_data/real_tri_drive` (or the embedded name `real-tri-drive`) and the
app's Calibration Doctor judge together, the evidence of the three frames added up.
`t0/` is byte-identical to `real_tri`.

## Source and licence

The data is from **Toyota Research Institute**: the public repository TRI-ML/dgp (MIT
licence for the code), `tests/data/dgp/test_scene/scene_02`, samples 0, 1 and 2 (commit
1e06dc9349ab63c3c73c498e1528d9522d3f4f95). The data is most likely from TRI's **DDAD**
dataset and is treated as such: **Creative Commons Attribution-NonCommercial-ShareAlike 4.0
International (CC BY-NC-SA 4.0)**, <https://creativecommons.org/licenses/by-nc-sa/4.0/>.
**Non-commercial use only**; credit Toyota Research Institute; what is built from this folder
must be shared under the same licence with this attribution. This licence covers this folder
only, not the rest of the repository.

## What was changed

The same reduction in every frame, as in `real_tri`:

- Images halved to 968 x 608 (area averaging) and stored as JPEG quality 85; the intrinsics
  in each `rig.json` are rescaled with them (`u' = (u + 0.5) s - 0.5`, s = 0.5).
- `lidar_ego.npy`: float32 (N, 4) x, y, z in the ego frame of that frame's LiDAR time
  (x forward, y left, z up) and intensity 0..1, unchanged, in the source's order (a merged
  multi-LiDAR cloud: no firing order, no ring).
- `exposure.json`: per camera the 4x4 `exposure_from_keyframe` = ego(t_camera) from
  ego(t_lidar) of that frame, from the dataset's own per-sensor poses, unchanged.
- Each frame's own README is left out (this one covers the three); nothing else differs
  from the source's frames. The car's own body fills the bottom of the side and rear images.
"""

#: The drive's frames: subfolder of ``real_tri_drive`` -> source frame folder.
TRI_DRIVE = {"t0": "tri_s02_t0", "t1": "tri_s02_t1", "t2": "tri_s02_t2"}


def build_drive(src: Path, out: Path) -> Path:
    """Write ``out`` = the frame folders of :data:`TRI_DRIVE`, reduced as ``real_tri``, and its README."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for sub, name in TRI_DRIVE.items():
        build(src / name, out / sub, f"real_tri_drive/{sub}", 0.5, 85, None, "")
    (out / "README.md").write_text(TRI_DRIVE_README)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True, type=Path,
                        help="folder holding tri_s02_t0/ .. tri_s02_t2/ and kitti_000001/")
    parser.add_argument("--out", default=ROOT / "sample_data", type=Path,
                        help="where real_tri/, real_tri_drive/ and real_kitti/ go")
    args = parser.parse_args(argv)
    build(args.src / "tri_s02_t0", args.out / "real_tri", "real_tri", 0.5, 85, None, TRI_README)
    build_drive(args.src, args.out / "real_tri_drive")
    build(args.src / "kitti_000001", args.out / "real_kitti", "real_kitti", 1.0, 90, "front60", KITTI_README)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
