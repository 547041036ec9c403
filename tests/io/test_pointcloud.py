"""bevviz.io.pointcloud: nuScenes .bin and .npy point clouds, every named error, and a fuzz on arbitrary bytes."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bevviz.io import pointcloud
from bevviz.io.pointcloud import read_pointcloud, read_points
from bevviz.lidar import LidarScan

REAL_BIN = next((Path(__file__).resolve().parents[2] / "sample_data" / "real_nuscenes" / "samples"
                 / "LIDAR_TOP").glob("*.pcd.bin"))


def _bin(rows) -> bytes:
    return np.asarray(rows, "<f4").reshape(-1, 5).tobytes()


def _npy(arr, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


# --- reading --------------------------------------------------------------------------------

def test_reads_the_real_nuscenes_bin_keeping_the_ring():
    scan = read_pointcloud(REAL_BIN)
    raw = np.fromfile(REAL_BIN, "<f4").reshape(-1, 5)
    assert isinstance(scan, LidarScan) and len(scan) == 34688 == REAL_BIN.stat().st_size // 20
    np.testing.assert_array_equal(scan.points, raw[:, :4])
    np.testing.assert_array_equal(scan.ring, raw[:, 4].astype(np.int16))
    assert scan.ring.min() == 0 and scan.ring.max() == 31
    assert scan.sweep.tolist() == [0] * len(scan) and dict(scan.exposure_from_keyframe) == {}
    # The same bytes as an upload give the same scan.
    up = read_pointcloud(REAL_BIN.read_bytes(), name=REAL_BIN.name, origin=[0.94, 0.0, 1.84], timestamp_us=7)
    np.testing.assert_array_equal(up.points, scan.points)
    assert up.origin.tolist() == [0.94, 0.0, 1.84] and up.timestamp_us == 7


@pytest.mark.parametrize("arr", [
    np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32),
    np.array([[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 6.0, 0.5]]),
    np.array([[1.0, 2.0, 3.0]], ">f4"),
    np.asfortranarray(np.arange(12, dtype=np.float16).reshape(4, 3)),
    np.zeros((0, 4)),
])
def test_reads_npy_float_arrays(arr, tmp_path):
    p = tmp_path / "cloud.NPY"
    p.write_bytes(_npy(arr))
    for scan in (read_pointcloud(p), read_pointcloud(_npy(arr), name="up.npy")):
        assert scan.points.shape == (len(arr), 4) and scan.ring is None
        np.testing.assert_array_equal(scan.points[:, : arr.shape[1]], arr.astype(np.float32))
        if arr.shape[1] == 3:
            assert not scan.points[:, 3].any()


def test_read_points_returns_raw_columns():
    pts, ring = read_points(_bin([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]), name="a.pcd.bin")
    assert pts.dtype == np.float32 and pts.tolist() == [[1, 2, 3, 4], [6, 7, 8, 9]]
    assert ring.dtype == np.int16 and ring.tolist() == [5, 10]


# --- named errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("data, name, pattern", [
    (b"\0" * 21, "up.bin", r"file 'up\.bin': field 'size':.*21 is not a multiple of 20.*got '21 bytes'"),
    (b"\0" * 19, "x.pcd.bin", r"file 'x\.pcd\.bin': field 'size'.*got '19 bytes'"),
    (_bin([[0, 0, 0, 0, 0], [0, np.nan, 0, 0, 0]]), "up.bin",
     r"file 'up\.bin': field 'points': must be finite: 1 of 2 points.*row 1.*nan"),
    (_bin([[np.inf, 0, 0, 0, 0]]), "up.bin", r"file 'up\.bin': field 'points'.*row 0.*inf"),
    (_bin([[0, 0, 0, 0, 1.5]]), "up.bin", r"file 'up\.bin': field 'ring':.*whole numbers.*got 1\.5"),
    (_bin([[0, 0, 0, 0, -1]]), "up.bin", r"file 'up\.bin': field 'ring':.*\[0, 32767\].*-1\.0"),
    (_npy(np.ones((3, 3), np.int64)), "up.npy", r"file 'up\.npy': field 'dtype': must be a float array.*int64"),
    (_npy(np.ones((3, 3), complex)), "up.npy", r"file 'up\.npy': field 'dtype'.*complex128"),
    (_npy(np.zeros(3, [("x", "f4"), ("y", "f4")])), "up.npy", r"file 'up\.npy': field 'dtype'"),
    (_npy(np.ones((3, 5))), "up.npy", r"file 'up\.npy': field 'shape': expected \(N, 3\).*got \(3, 5\)"),
    (_npy(np.ones(3)), "up.npy", r"file 'up\.npy': field 'shape'.*got \(3,\)"),
    (_npy(np.ones((2, 2, 3))), "up.npy", r"file 'up\.npy': field 'shape'.*got \(2, 2, 3\)"),
    (_npy(np.array([[0.0, np.nan, 1.0]])), "up.npy", r"file 'up\.npy': field 'points': must be finite.*row 0"),
    (_npy(np.array([[0.0, 1e300, 1.0]])), "up.npy", r"file 'up\.npy': field 'points'.*as float32.*row 0"),
    (_npy(np.ones((4, 3)))[:-8], "up.npy", r"file 'up\.npy': field 'size':.*truncated"),
    (b"not an npy file at all", "up.npy", r"file 'up\.npy': field 'header': not a readable \.npy file"),
    (b"", "up.npy", r"file 'up\.npy': field 'header'"),
    (b"\0" * 20, "cloud.pcd", r"file 'cloud\.pcd': field 'extension': .*\.bin or \.npy.*got '\.pcd'"),
    (b"\0" * 20, "cloud", r"file 'cloud': field 'extension'.*got '\(none\)'"),
])
def test_bad_files_name_the_file_the_field_and_the_value(data, name, pattern):
    with pytest.raises(ValueError, match=pattern):
        read_pointcloud(data, name=name)


def test_bytes_need_a_name_and_paths_must_exist(tmp_path):
    with pytest.raises(ValueError, match=r"field 'name': a file name is needed.*got None"):
        read_pointcloud(b"\0" * 20)
    with pytest.raises(ValueError, match=r"file '.*missing\.bin': field 'file': does not exist"):
        read_pointcloud(tmp_path / "missing.bin")
    with pytest.raises(ValueError, match=r"field 'file': must be a path or the file's bytes \(got 'int'\)"):
        read_pointcloud(42)
    with pytest.raises(ValueError, match=r"file 'a\.bin': field 'origin': expected shape \(3,\)"):
        read_pointcloud(_bin([[0, 0, 0, 0, 0]]), name="a.bin", origin=[1.0])


class _Trap:
    """Unpickling this runs _sprung: proof that a reader unpickled."""

    sprung = False

    def __reduce__(self):
        return (_spring, ())


def _spring():
    _Trap.sprung = True
    return "sprung"


def test_object_npy_is_refused_without_unpickling(tmp_path, monkeypatch):
    data = _npy(np.array([_Trap(), 1.0, 2.0], dtype=object), allow_pickle=True)
    assert b"_spring" in data
    loads = []
    monkeypatch.setattr(np, "load", lambda *a, **k: loads.append(a))
    p = tmp_path / "trap.npy"
    p.write_bytes(data)
    for src, name in ((data, "trap.npy"), (p, None)):
        with pytest.raises(ValueError, match=r"field 'dtype': object arrays are refused.*got 'object'"):
            read_pointcloud(src, name=name)
    assert not _Trap.sprung and not loads


def test_point_count_is_checked_before_allocating(tmp_path, monkeypatch):
    monkeypatch.setattr(pointcloud, "MAX_LIDAR_POINTS", 10)

    def no_alloc(*a, **k):
        raise AssertionError("allocated before checking the count")

    monkeypatch.setattr(np, "fromfile", no_alloc)
    monkeypatch.setattr(np, "load", no_alloc)
    p = tmp_path / "big.bin"
    p.write_bytes(b"\0" * (11 * 20))
    with pytest.raises(ValueError, match=r"file '.*big\.bin': field 'points': more than MAX_LIDAR_POINTS = 10 "
                                         r"\(got '11 points \(220 bytes / 20\)'\)"):
        read_pointcloud(p)
    # A .npy header may promise far more than the file holds.
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 3)})
    with pytest.raises(ValueError, match=r"file 'huge\.npy': field 'points'.*1000000000000 points"):
        read_pointcloud(buf.getvalue(), name="huge.npy")


# --- fuzz -----------------------------------------------------------------------------------

def _valid_npy(raw: bytes) -> bytes:
    """A valid (k, 3) float32 .npy made of ``raw``'s bytes."""
    return _npy(np.frombuffer(raw[: len(raw) // 12 * 12], "<f4").reshape(-1, 3))


def _flip(data: bytes, at: int, value: int) -> bytes:
    i = at % len(data)
    return data[:i] + bytes([value]) + data[i + 1:]


@settings(max_examples=200, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(
    st.binary(max_size=400),
    st.binary(max_size=300).map(lambda b: _npy(np.zeros(1))[:10] + b),  # a real magic, a damaged header
    st.builds(lambda b, k: _valid_npy(b)[: len(_valid_npy(b)) - k], st.binary(max_size=240), st.integers(0, 40)),
    st.builds(lambda b, at, v: _flip(_valid_npy(b), at, v), st.binary(max_size=120), st.integers(0, 200),
              st.integers(0, 255)),
), ext=st.sampled_from([".bin", ".npy", ".pcd.bin"]))
def test_fuzz_arbitrary_bytes_give_a_scan_or_a_named_error(data, ext):
    name = f"fuzz{ext}"
    try:
        scan = read_pointcloud(data, name=name)
    except ValueError as exc:
        assert str(exc).startswith(f"file '{name}': field '")
    else:
        assert isinstance(scan, LidarScan) and scan.points.dtype == np.float32
        assert np.isfinite(scan.points).all()


def _npy_with_header(header: dict, tail: bytes) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + tail


@settings(max_examples=150, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(0, 2 ** 62), max_size=3).map(tuple),
       descr=st.sampled_from(["<f4", ">f8", "<f2", "<i8", "|b1", "<c16", "|O", "<U3"]),
       fortran=st.booleans(), tail=st.binary(max_size=200))
def test_fuzz_npy_headers_declaring_any_shape(shape, descr, fortran, tail):
    """A header may declare any shape (10**18 points, 0 columns): the count and size checks come first."""
    data = _npy_with_header({"descr": descr, "fortran_order": fortran, "shape": shape}, tail)
    try:
        scan = read_pointcloud(data, name="fuzz.npy")
    except ValueError as exc:
        assert str(exc).startswith("file 'fuzz.npy': field '")
    else:
        assert len(scan) <= len(tail) and scan.points.dtype == np.float32 and np.isfinite(scan.points).all()
