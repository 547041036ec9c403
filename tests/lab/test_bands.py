"""Fault bands, frame windows and the table per band and frame count of the evaluation."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bevviz.calibration.perturbations import perturb_rig
from bevviz.errors import InputError
from bevviz.io.frame_folder import RealFrame
from bevviz.lab.bands import band_faults, parse_band, parse_frame_counts, random_faults, windows
from bevviz.lab.evaluate import Case, main
from bevviz.lab.tables import band_table


def _frame(name: str, rig) -> RealFrame:
    return RealFrame(name, rig, {}, None)


@pytest.mark.parametrize("text", ["2", "a-b", "3-1", "0-1", "1-1", "1-20", "-1-2", "1-2-3", "nan-2"])
def test_a_bad_band_is_named_with_its_text(text):
    with pytest.raises(InputError) as err:
        parse_band(text)
    assert err.value.field == "band" and err.value.value == text
    assert repr(text) in str(err.value)


def test_bands_parse_and_a_bad_band_exits_2_before_any_frame_is_read(capsys):
    assert parse_band("0.5-1") == (0.5, 1.0) and parse_band(" 2-5 ") == (2.0, 5.0)
    assert main(["--frames", "/nonexistent", "--bands", "1-2", "5-2", "--no-refine"]) == 2
    assert "'5-2'" in capsys.readouterr().err


def test_frame_counts_below_one_are_named():
    assert parse_frame_counts([1, 3, 1]) == [1, 3]
    with pytest.raises(InputError) as err:
        parse_frame_counts([3, 0])
    assert err.value.field == "frame-counts" and err.value.value == 0


def test_faults_of_each_band_lie_in_it_about_the_same_axes(rig):
    frame = _frame("f", rig)
    drawn = band_faults(frame, [(0.5, 1.0), (2.0, 5.0)], per_camera=3, seed=7)
    assert len(drawn) == 2 * 3 * len(rig)
    small = [f for f in drawn if f[2] == "0.5-1"]
    large = [f for f in drawn if f[2] == "2-5"]
    for (cam_a, a, _), (cam_b, b, _) in zip(small, large):
        assert cam_a == cam_b
        assert 0.5 <= np.linalg.norm(a) <= 1.0 and 2.0 <= np.linalg.norm(b) <= 5.0
        np.testing.assert_allclose(a / np.linalg.norm(a), b / np.linalg.norm(b), atol=1e-12)
    # the default band draws exactly the faults it always drew
    default = band_faults(frame, per_camera=2, seed=0)
    for (cam, f, band), (cam0, f0) in zip(default, random_faults(frame, 2, 0)):
        assert band == "1-2" and cam == cam0 and np.array_equal(f, f0)


def test_windows_cut_each_rig_into_runs_of_k_frames_with_the_first_frames_faults(rig):
    other = perturb_rig(rig, rig.names[0], yaw_deg=1.0)  # another calibration: another rig
    frames = [_frame("a0", rig), _frame("a1", rig), _frame("b0", other), _frame("a2", rig)]
    got = [(src.name, [f.name for f in w]) for src, w in windows(frames, [1, 3])]
    assert got == [("a0", ["a0"]), ("a0", ["a1"]), ("a0", ["a2"]), ("a0", ["a0", "a1", "a2"]), ("b0", ["b0"])]
    assert [[f.name for f in w] for _, w in windows(frames, sequence=True)] == [["a0", "a1", "a2"], ["b0"]]
    assert [(s.name, [f.name for f in w]) for s, w in windows(frames)] == [(n, [n]) for n in ("a0", "a1", "b0", "a2")]


def test_the_band_table_has_a_row_per_frame_count_and_band():
    def fault(band: str, frames: int, named: bool, wrong: bool = False) -> Case:
        return Case("CAM", "random", 1.0, frame="f" if frames == 1 else "f+2", band=band, frames=frames,
                    lidar_named=(["CAM"] if named else []) + (["OTHER"] if wrong else []), cameras=2)

    cases = [Case(None, None, 0.0, frame="f", cameras=2, frames=1),
             Case(None, None, 0.0, frame="f+2", cameras=2, frames=3, lidar_named=["OTHER"]),
             fault("1-2", 1, False), fault("1-2", 1, True), fault("2-5", 1, True, wrong=True),
             fault("1-2", 3, True), fault("1-2", 3, True)]
    head, _, *rows = band_table(cases)
    assert head.split()[:3] == ["rig", "frames", "band"]
    cells = [re.sub(r"\(\s*\d+%\)", "", r).split() for r in rows]  # the named share left out
    # rig, frames, band, clean cams, false alarms, timing FA, faults, named, wrong
    assert [c[:9] for c in cells] == [["all", "1", "1-2", "2", "0", "0", "2", "1", "0"],
                                      ["all", "1", "2-5", "2", "0", "0", "1", "1", "1"],
                                      ["all", "3", "1-2", "2", "1", "0", "2", "2", "0"]]
    by_rig = [r.split()[:3] for r in band_table(cases, {"f": "R1", "f+2": "R2"})[2:]]
    assert by_rig == [["all", "1", "1-2"], ["all", "1", "2-5"], ["all", "3", "1-2"], ["R1", "1", "1-2"],
                      ["R1", "1", "2-5"], ["R2", "3", "1-2"]]
