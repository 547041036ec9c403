"""Fixtures shared by every test: the sample rig, the embedded sample's images, a small BEV grid,
the two embedded nuScenes-format dataroots, the real keyframe and its LiDAR evidence; and every
temporary file of the run (the app's audit folders and ONNX exports, the CLI's subprocesses,
Ray's session) in one folder that the run removes at its end.

Folders add only their own (``samplers/``: edge-rich grids; ``calibration/``: the embedded
dataset's frames; ``audit/``: recorded truths and check settings; ``app/``: the Streamlit
test harness; ``viz/``: figure validation).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from bevviz.bev_grid import BEVGrid
from bevviz.calibration.lidar import lidar_evidence
from bevviz.camera import Rig
from bevviz.io.frame_folder import load_frame_folder
from bevviz.io.nuscenes import load_lidar_from, load_sample_from, open_dataset
from bevviz.io.rig_json import load_rig_file, load_rig_images
from bevviz.synthetic import nuscenes_like_rig

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="session", autouse=True)
def temporary_files_of_the_run():
    """``tempfile`` (and, through ``TMPDIR``, every subprocess) writes into one folder of the
    run, removed at its end. Short, under the system's temporary folder: Ray puts its sockets
    in there (at most 107 bytes a path), which pytest's own ``tmp_path`` folders are too deep for.
    """
    folder = tempfile.mkdtemp(prefix="bevviz-tests-")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", folder)
        mp.setenv("TMPDIR", folder)
        yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def allocates_at_most():
    """A context manager ``allocates_at_most(mib)`` that fails when its block's peak traced
    allocation (Python objects and numpy buffers, through ``tracemalloc``) passes ``mib`` MiB.

    For refusals that must come before any large buffer exists: an allocation bound, not a
    wall-clock bound, so a loaded machine cannot fail it.
    """
    @contextlib.contextmanager
    def bound(mib: float):
        tracing = tracemalloc.is_tracing()
        if not tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        try:
            yield
        finally:
            peak = tracemalloc.get_traced_memory()[1] - base
            if not tracing:
                tracemalloc.stop()
        assert peak < mib * 2 ** 20, f"allocated {peak / 2 ** 20:.1f} MiB at the peak (bound {mib} MiB)"
    return bound


@pytest.fixture(scope="session")
def rig() -> Rig:
    """The nuScenes-like rig of the synthetic world (the embedded sample's true rig)."""
    return nuscenes_like_rig()


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """The embedded sample's folder (tests that need files in it skip when it is missing)."""
    return SAMPLE_DATA


@pytest.fixture(scope="session")
def embedded_sample(sample_data) -> tuple[Rig, dict[str, np.ndarray]]:
    """``sample_data/rig.json``: the rig as stored there and its six images, camera name ->
    RGB uint8 (900, 1600, 3). Skips when the sample is missing."""
    path = sample_data / "rig.json"
    if not path.exists():
        pytest.skip("sample_data/rig.json is missing")
    rig_file = load_rig_file(path)
    return rig_file.rig, load_rig_images(rig_file, path.parent)


@pytest.fixture(scope="session")
def grid() -> BEVGrid:
    """BEVFormer's extent and pillar heights at 2.048 m: 50 x 50 cells x 4 heights (a file
    that needs a smaller grid overrides this fixture)."""
    return BEVGrid(resolution=2.048)


def _dataroot(sample_data: Path, name: str) -> Path:
    root = sample_data / name
    if not (root / "v1.0-mini").is_dir():
        pytest.skip(f"sample_data/{name} is missing")
    return root


@pytest.fixture(scope="session")
def nuscenes_root(sample_data) -> Path:
    """``sample_data/nuscenes``: the synthetic nuScenes-format dataset (three scenes, one
    physical rig); tests that need it skip when it is missing."""
    return _dataroot(sample_data, "nuscenes")


@pytest.fixture(scope="session")
def real_root(sample_data) -> Path:
    """``sample_data/real_nuscenes``: one real keyframe with LIDAR_TOP; tests that need it
    skip when it is missing."""
    return _dataroot(sample_data, "real_nuscenes")


@pytest.fixture(scope="session")
def real_sample(real_root):
    """The embedded real nuScenes keyframe (``sample_data/real_nuscenes``): (rig, images,
    LidarScan). Skips when it is missing."""
    nusc = open_dataset(real_root, "v1.0-mini")
    token = nusc.sample[0]["token"]
    rig, images = load_sample_from(nusc, token)
    return rig, images, load_lidar_from(nusc, token)


@pytest.fixture(scope="session")
def real_evidence(real_sample):
    """LiDAR evidence of every camera of the real keyframe's dataset calibration."""
    rig, images, scan = real_sample
    return lidar_evidence(rig, images, scan)


@pytest.fixture(scope="session")
def tri_drive(sample_data):
    """The committed TRI drive: three frame folders (``RealFrame``: rig, images, scan) one
    second apart, in time order."""
    folders = [sample_data / "real_tri_drive" / t for t in ("t0", "t1", "t2")]
    if not all((f / "rig.json").is_file() for f in folders):
        pytest.skip("sample_data/real_tri_drive is missing")
    return [load_frame_folder(f) for f in folders]
