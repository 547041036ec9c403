"""The shared sidebar: rig source, BEV grid and validity settings, kept in session state.

Loading follows one rule: the sidebar builds a *request* (a hashable description of what
it asks for); when the request changes, the matching loader (:mod:`appkit.sources`, over
:mod:`bevviz.session`) runs once. Success replaces the scene; an
:class:`~bevviz.errors.InputError` is remembered and shown as the user's to fix, any other
exception as a bug in bevviz (:func:`bevviz.errors.bug_message`), and the previous scene
stays.

Every user-provided string it shows (file names, dataroots, scene names and descriptions,
error messages quoting values, the scene's label, notes and warnings) goes through
:func:`bevviz.checks.escape_markdown` first: markdown renders it exactly as it reads.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from appkit import sources
from appkit.session import current_grid, current_scene
from appkit.state import GRID, GRID_ERROR, SCENE, SCENE_ERROR, SCENE_REQUEST
from bevviz.bev_grid import BEVGrid, pillar_heights
from bevviz.checks import escape_markdown, field_error
from bevviz.errors import InputError, bug_message
from bevviz.io.nuscenes import SceneInfo
from bevviz.session import DEFAULT_FRAMES, MAX_FRAMES, embedded

SOURCE_SAMPLE = "Embedded sample"
SOURCE_NUSCENES = "nuScenes dataroot"
SOURCE_FRAMES = "Frame folders"
SOURCE_UPLOAD = "JSON rig upload"
SOURCES = (SOURCE_SAMPLE, SOURCE_NUSCENES, SOURCE_FRAMES, SOURCE_UPLOAD)

SAMPLE_RIG_OPTION = "Sample rig (rig.json)"
REAL_SAMPLE_OPTION = "Real nuScenes keyframe (scene-0061, with LiDAR and boxes)"
REAL_TRI_OPTION = "Real TRI frame (6 cameras, merged LiDAR, the car body in view)"
REAL_KITTI_OPTION = "Real KITTI frame (1 camera and its LiDAR)"
REAL_TRI_DRIVE_OPTION = "Real TRI drive (3 consecutive frames of the 6 cameras, judged together)"
#: The embedded drives (folders of frame folders of one rig) offered beside the samples: option -> path.
REAL_DRIVE_OPTIONS = {REAL_TRI_DRIVE_OPTION: sources.REAL_TRI_DRIVE}
#: The embedded real frame folders offered beside the samples: option -> path.
REAL_FRAME_OPTIONS = {REAL_TRI_OPTION: sources.REAL_TRI, REAL_KITTI_OPTION: sources.REAL_KITTI}
#: Session-state key through which bytes can be handed to the upload path without a
#: browser (AppTest cannot drive st.file_uploader): a dict with ``json_name``,
#: ``json_bytes``, ``images`` (file name -> bytes) and, optionally, ``lidar_name`` and
#: ``lidar_bytes`` (a point cloud) and ``more_images`` (``(name, bytes)`` of a .zip per
#: further image set).
UPLOAD_BYTES = "upload_bytes"

Z_BEVFORMER = "BEVFormer 4 points"
Z_GROUND = "ground only (z = 0)"
Z_CUSTOM = "custom"
Z_MODES = (Z_BEVFORMER, Z_GROUND, Z_CUSTOM)
EPS_OPTIONS = (1e-5, 0.1, 0.5, 1.0)
BOUNDS_OPTIONS = ("pixel", "bevformer")

#: Defaults of the grid widgets (BEVFormer on nuScenes).
GRID_DEFAULTS = {"grid_x_min": -51.2, "grid_x_max": 51.2, "grid_y_min": -51.2, "grid_y_max": 51.2,
                 "grid_res": 0.512, "grid_z_mode": Z_BEVFORMER, "grid_z_custom": "0.0, 1.5",
                 "valid_eps": 1e-5, "valid_bounds": "pixel"}


def validity() -> tuple[float, str]:
    """(eps, bounds) chosen in the sidebar."""
    return (float(st.session_state.get("valid_eps", GRID_DEFAULTS["valid_eps"])),
            str(st.session_state.get("valid_bounds", GRID_DEFAULTS["valid_bounds"])))


def apply_request(request: tuple | None, loader: Callable[[], sources.Scene], what: str) -> None:
    """Run ``loader`` when ``request`` differs from the last one; keep the old scene on error.

    The error is stored as raw text (:func:`show_load_error` escapes it where it is shown).
    """
    if request is None or request == st.session_state.get(SCENE_REQUEST):
        return
    st.session_state[SCENE_REQUEST] = request
    try:
        with st.spinner(f"Loading {escape_markdown(what)} ..."):
            scene = loader()
    except InputError as e:
        st.session_state[SCENE_ERROR] = str(e)
        return
    except Exception as e:  # anything else is a bug: said so, never a traceback
        st.session_state[SCENE_ERROR] = bug_message(e)
        return
    st.session_state[SCENE] = scene
    st.session_state[SCENE_ERROR] = None


# --------------------------------------------------------------------------------------
# Source controls
# --------------------------------------------------------------------------------------


def _sample_controls() -> tuple[tuple | None, Callable | None, str]:
    if not sources.sample_available():
        st.caption("sample_data/ is missing: using a synthetic rig rendered on the fly.")
        return ("synthetic",), sources.synthetic_scene, "the synthetic rig"
    options = [SAMPLE_RIG_OPTION]
    scenes = {}
    for s in sources.embedded_scene_table(str(embedded.sample_path("nuscenes"))):
        label = f"nuScenes {s['name']}: {s['description']}" if s["description"] else f"nuScenes {s['name']}"
        scenes[label] = SceneInfo(s["name"], s["token"], s["description"], int(s["nbr_samples"]))
        options.append(label)
    real = sources.embedded_scene_table(str(embedded.sample_path("real-nuscenes")))
    if real:
        r = real[0]
        scenes[REAL_SAMPLE_OPTION] = SceneInfo(r["name"], r["token"], r["description"], int(r["nbr_samples"]))
        options.append(REAL_SAMPLE_OPTION)
    options += [o for o, p in {**REAL_FRAME_OPTIONS, **REAL_DRIVE_OPTIONS}.items() if p.is_dir()]
    choice = st.selectbox("Sample", options, key="sample_choice",
                          help="The embedded sample: a rendered street with a known ground truth. "
                               "Its nuScenes-format copy has a calibrated scene and a miscalibrated one. "
                               "The real keyframe: six photos, the LiDAR sweep and 69 boxes of nuScenes "
                               "(CC BY-NC-SA 4.0). The real TRI and KITTI frames: other rigs, with their own "
                               "calibration, for the Calibration Doctor; the TRI drive: three consecutive frames "
                               "of that rig, judged together (non-commercial licences: see their README).")
    if choice == SAMPLE_RIG_OPTION:
        path = str(embedded.sample_path("rig"))
        return ("rigjson", path), lambda: sources.rig_json_scene(path), "the sample rig"
    if choice in REAL_FRAME_OPTIONS:
        folder = str(REAL_FRAME_OPTIONS[choice])
        return ("frames", folder, ()), lambda: sources.frame_folder_scene(folder), choice
    if choice in REAL_DRIVE_OPTIONS:
        drive = str(REAL_DRIVE_OPTIONS[choice])
        return ("drive", drive), lambda: sources.drive_scene(drive), choice
    root = embedded.sample_path("real-nuscenes" if choice == REAL_SAMPLE_OPTION else "nuscenes")
    key = "real_sample_index" if choice == REAL_SAMPLE_OPTION else "sample_index"
    with st.spinner("Opening the embedded nuScenes sample ..."):
        return _nuscenes_sample_picker(str(root), "v1.0-mini", scenes[choice], key)


def _nuscenes_sample_picker(dataroot: str, version: str, scene, key: str):
    try:  # a scene's chain of samples that loops or dangles is a named error, not a page-wide trace
        samples = sources.nuscenes_samples(dataroot, version, scene.token)
    except InputError as e:
        st.error(escape_markdown(e))
        return None, None, ""
    if not samples:
        st.warning(f"Scene {escape_markdown(scene.name)} has no samples.")
        return None, None, ""
    idx = st.selectbox("Sample", range(len(samples)), key=key,
                       format_func=lambda i: f"#{i}  (t = {samples[i].timestamp / 1e6:.2f} s)")
    idx = min(int(idx), len(samples) - 1)
    token = samples[idx].token
    frames = 1
    if len(samples) > 1:  # a one-sample scene has no neighbours to add
        most = min(MAX_FRAMES, len(samples))
        frames = int(st.number_input(
            "Frames for the doctor", min_value=1, max_value=most, value=min(DEFAULT_FRAMES, most), step=1,
            key=f"{key}_frames",
            help="The Calibration Doctor adds up the LiDAR evidence of this sample and the ones that follow it "
                 f"in the scene (as 'bevviz check --frames N'; {DEFAULT_FRAMES} or the scene's samples by "
                 "default): one frame may be inconclusive where several decide."))
    label = f"{scene.name} #{idx}" + (f" (+{frames - 1} frames)" if frames > 1 else "")
    return (("nuscenes", dataroot, version, token, frames),
            lambda: sources.nuscenes_scene(dataroot, version, token, frames), label)


def _nuscenes_controls():
    # The default through session state, not value=: the audit page sets this key too (opening a
    # flagged sample), and a widget with both logs a 25-line warning with its stack.
    st.session_state.setdefault("ns_dataroot", str(embedded.sample_path("nuscenes")))
    dataroot = st.text_input("Dataroot", key="ns_dataroot",
                             help="Folder holding <version>/ (the tables) and samples/.").strip()
    version = st.selectbox("Version", sources.NUSCENES_VERSIONS, key="ns_version")
    if not dataroot:
        return None, None, ""
    try:
        with st.spinner("Opening the dataset ..."):
            scenes = sources.nuscenes_scenes(dataroot, version)
    except InputError as e:
        st.error(escape_markdown(e))
        return None, None, ""
    except Exception as e:  # a bug, said so
        st.error(escape_markdown(bug_message(e)))
        return None, None, ""
    if not scenes:
        st.warning("The dataset has no scenes.")
        return None, None, ""
    by_name = {s.name: s for s in scenes}
    name = st.selectbox("Scene", list(by_name), key="ns_scene",
                        format_func=lambda n: f"{n} ({by_name[n].n_samples} samples)")
    if by_name[name].description:
        st.caption(escape_markdown(by_name[name].description))
    return _nuscenes_sample_picker(dataroot, version, by_name[name], "ns_sample")


def _frame_folder_controls():
    folder = st.text_input("Frame folder", key="ff_folder",
                           help="A folder on the machine running the app holding rig.json (the JSON rig), its "
                                "images, lidar_ego.npy (the LiDAR sweep in the ego frame) and, optionally, "
                                "exposure.json (the ego motion to each camera's exposure): the format of "
                                "'bevviz check FOLDER'. A drive, a folder whose subfolders are such frame folders "
                                "of one rig (t0/, t1/, ...), is judged whole.").strip()
    more_text = st.text_area("More frame folders of the same rig (optional, one per line)", key="ff_more",
                             height=80, help=f"Consecutive frames of one drive, the same cameras, calibration and "
                                             f"ignore polygons: the Calibration Doctor adds up their LiDAR evidence "
                                             f"(at most {MAX_FRAMES} frames in all). One frame may be inconclusive "
                                             f"where several decide.")
    more = tuple(line.strip() for line in more_text.splitlines() if line.strip())
    if not folder:
        st.info("Name a frame folder; the current rig stays until then.")
        return None, None, ""
    if not more and sources.is_drive(folder):  # a folder of frame folders: all of them, judged together
        return ("drive", folder), lambda: sources.drive_scene(folder), f"the drive {folder}"
    what = f"the frame folder {folder}" + (f" and {len(more)} more" if more else "")
    return ("frames", folder, more), lambda: sources.frame_folder_scene(folder, more), what


def _upload_controls():
    st.file_uploader("Rig JSON", type=["json"], key="upload_json",
                     help="bevviz JSON rig format (see the README): per camera name, K, rotation, "
                          "translation, width, height, image file; plus a convention block.")
    st.file_uploader("Camera images", type=["jpg", "jpeg", "png"], accept_multiple_files=True,
                     key="upload_images", help="One per camera, matched by the file name in the JSON, "
                                               "the file stem, or the camera name.")
    st.file_uploader("Point cloud (optional)", type=["bin", "npy"], key="upload_lidar",
                     help="LiDAR points in the ego frame (x forward, y left, z up, metres): a nuScenes .bin "
                          "(5 x float32 per point: x, y, z, intensity, ring) or a .npy float array (N, 3) or "
                          "(N, 4) with intensity. Read as plain numbers, never unpickled.")
    st.file_uploader("More image sets (optional)", type=["zip"], accept_multiple_files=True, key="upload_more",
                     help="Other moments of the same rig, one .zip per moment with every camera's image "
                          "(matched as above) and, when a point cloud is uploaded above, that moment's own "
                          "(.npy or .bin): the seams average over them and the LiDAR witness adds them up, "
                          "as `bevviz check rig.json --images DIR --scan FILE --images DIR2 --scan FILE2` does.")
    st.caption(sources.upload_limits_text())
    handed = st.session_state.get(UPLOAD_BYTES)
    js = st.session_state.get("upload_json")
    if js is not None:
        imgs = st.session_state.get("upload_images") or []
        pc = st.session_state.get("upload_lidar")
        sets = st.session_state.get("upload_more") or []
        request = ("upload", js.file_id, tuple(f.file_id for f in imgs), pc.file_id if pc is not None else None,
                   tuple(f.file_id for f in sets))

        def load():
            return sources.uploaded_scene(js.name, js.getvalue(), {f.name: f.getvalue() for f in imgs},
                                          (pc.name, pc.getvalue()) if pc is not None else None,
                                          [(f.name, f.getvalue()) for f in sets])

        return request, load, f"the uploaded rig {js.name}"
    if handed:
        lidar = (handed["lidar_name"], handed["lidar_bytes"]) if handed.get("lidar_bytes") is not None else None
        sets = list(handed.get("more_images", ()))
        digest = sources.upload_digest(handed["json_bytes"], handed.get("images", {}), lidar)
        return (("upload-bytes", digest, tuple((name, hash(bytes(data))) for name, data in sets)),
                lambda: sources.uploaded_scene(handed["json_name"], handed["json_bytes"], handed.get("images", {}),
                                               lidar, sets),
                f"the uploaded rig {handed['json_name']}")
    st.info("Upload a rig JSON and its images; the current rig stays until then.")
    return None, None, ""


# --------------------------------------------------------------------------------------
# Grid controls
# --------------------------------------------------------------------------------------


def parse_z_values(text: str) -> tuple[float, ...]:
    """Comma-separated heights -> tuple of floats (a named InputError otherwise)."""
    try:
        vals = tuple(float(t) for t in text.replace(";", ",").split(",") if t.strip())
    except ValueError:
        raise field_error("z values", text, "must be numbers separated by commas") from None
    if not vals:
        raise field_error("z values", text, "need at least one height")
    return vals


#: Most reference points (cells x heights) the app accepts: 6 cameras x 1M points already
#: take ~100 MB per projection; BEVFormer's default grid has 160,000.
MAX_GRID_POINTS = 1_000_000


def _check_app_grid_size(x_range: tuple, y_range: tuple, num_z: int, resolution: float) -> None:
    """Refuse more than :data:`MAX_GRID_POINTS` before the grid is built: the library's own
    (larger) bound would otherwise answer first, without the app's limit in its message.
    Values it cannot count (not numbers, zero or infinite spans) are left to ``BEVGrid``,
    which names what is wrong."""
    try:
        h, w = (int(round((float(hi) - float(lo)) / float(resolution))) for lo, hi in (x_range, y_range))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return
    points = h * w * num_z
    if h > 0 and w > 0 and points > MAX_GRID_POINTS:
        raise field_error("resolution", resolution, f"{h} x {w} cells x {num_z} heights = {points:,} points, more "
                          f"than the app's {MAX_GRID_POINTS:,}")


def grid_from_state() -> BEVGrid:
    """Build the BEVGrid from the grid widgets' values (raises a named InputError)."""
    ss = st.session_state
    mode = ss.get("grid_z_mode", Z_BEVFORMER)
    if mode == Z_BEVFORMER:
        z = pillar_heights()
    elif mode == Z_GROUND:
        z = (0.0,)
    else:
        z = parse_z_values(ss.get("grid_z_custom", ""))
    x_range, y_range = (ss["grid_x_min"], ss["grid_x_max"]), (ss["grid_y_min"], ss["grid_y_max"])
    _check_app_grid_size(x_range, y_range, len(z), ss["grid_res"])
    return BEVGrid(x_range, y_range, z, ss["grid_res"])


def _grid_controls() -> None:
    ss = st.session_state
    # Re-assign every value on every run (not setdefault): a value assigned by the script is
    # sent with the widget each run, so the browser can never fall back to the widget's
    # bare default (0) — which it did when a first run was interrupted by a click, and then
    # sent 0 back on the next interaction.
    for k, v in GRID_DEFAULTS.items():
        ss[k] = ss.get(k, v)
    c1, c2 = st.columns(2)
    c1.number_input("x min (m)", step=5.0, format="%.3f", key="grid_x_min")
    c2.number_input("x max (m)", step=5.0, format="%.3f", key="grid_x_max")
    c1.number_input("y min (m)", step=5.0, format="%.3f", key="grid_y_min")
    c2.number_input("y max (m)", step=5.0, format="%.3f", key="grid_y_max")
    st.number_input("Resolution (m / cell)", min_value=0.01, step=0.128, format="%.3f", key="grid_res")
    st.radio("Pillar heights", Z_MODES, key="grid_z_mode",
             help="BEVFormer spreads 4 points over z in [-5, 3] m: (-4.5, -2.17, 0.17, 2.5).")
    if ss["grid_z_mode"] == Z_CUSTOM:
        st.text_input("z values (m, comma-separated)", key="grid_z_custom")
    try:
        grid = grid_from_state()
        ss[GRID] = grid
        ss[GRID_ERROR] = None
    except InputError as e:
        ss[GRID_ERROR] = str(e)
    g = current_grid()
    if ss.get(GRID_ERROR):
        st.error(f"{escape_markdown(ss[GRID_ERROR])} — keeping the previous grid.")
    st.caption(f"{g.height} x {g.width} cells x {g.num_z} heights = {g.height * g.width * g.num_z:,} points; "
               f"z = {', '.join(f'{z:g}' for z in g.z_values)} m")
    c1, c2 = st.columns(2)
    c1.selectbox("Depth eps (m)", EPS_OPTIONS, key="valid_eps", format_func=lambda e: f"{e:g}",
                 help="A point is valid when its depth exceeds eps (BEVFormer: 1e-5).")
    c2.selectbox("Image bounds", BOUNDS_OPTIONS, key="valid_bounds",
                 help="pixel: -0.5 <= u <= W - 0.5 (pixel-centre extent); bevformer: 0 < u/W < 1.")


def render_sidebar() -> None:
    """Draw the shared sidebar and update the scene and grid in session state."""
    with st.sidebar:
        st.markdown("### Rig source")
        source = st.radio("Rig source", SOURCES, key="rig_source", label_visibility="collapsed")
        if source == SOURCE_SAMPLE:
            request, loader, what = _sample_controls()
        elif source == SOURCE_NUSCENES:
            request, loader, what = _nuscenes_controls()
        elif source == SOURCE_FRAMES:
            request, loader, what = _frame_folder_controls()
        else:
            request, loader, what = _upload_controls()
        apply_request(request, loader, what)
        scene = current_scene()
        extras = ([f"LiDAR {len(scene.lidar):,} points"] if scene.lidar is not None else []) + \
            ([f"{len(scene.boxes)} boxes"] if scene.boxes else [])
        cameras = f"{len(scene.rig)} camera{'' if len(scene.rig) == 1 else 's'}"
        st.caption(f"Loaded: **{escape_markdown(scene.label)}** — {cameras}" + "".join(f", {e}" for e in extras))
        for warning in scene.warnings:
            st.warning(escape_markdown(warning))
        if scene.attribution:
            st.caption(scene.attribution)
        st.markdown("### BEV grid")
        _grid_controls()


def show_load_error() -> None:
    """In the main area: the last load error, if the current request failed."""
    err = st.session_state.get(SCENE_ERROR)
    if err:
        st.error(f"Could not load the rig: {escape_markdown(err)}\n\n"
                 f"Keeping the previous rig: {escape_markdown(current_scene().label)}.")
