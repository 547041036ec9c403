"""The bevviz command line: man-page help, check's exit codes and files, one-line errors, a parser fuzz."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bevviz.cli as cli_module
from bevviz.calibration import camera_delta, perturb_rig
from bevviz.cli import app_script, main
from bevviz.io.rig_json import load_rig_file, save_rig

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
needs_sample = pytest.mark.skipif(not (SAMPLE / "rig.json").is_file(), reason="sample_data is missing")


def test_help_reads_like_a_man_page(capsys):
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    for section in ("COMMANDS", "EXIT STATUS", "EXAMPLES", "check SOURCE", "audit DATAROOT"):
        assert section in top
    assert main(["check", "--help"]) == 0
    check = capsys.readouterr().out
    assert "SOURCE is one of" in check and "real-nuscenes" in check and "--strict" in check
    assert main(["audit", "-h"]) == 0
    audit = capsys.readouterr().out
    for word in ("ENGINES", "--resume", "--engine [local|ray]", "--address", "--workers", "--scenes", "--out"):
        assert word in audit


def test_the_command_is_installed_and_runs_as_a_module():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"bevviz": "bevviz.cli:main"}
    out = subprocess.run([sys.executable, "-m", "bevviz", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "EXIT STATUS" in out.stdout
    exe = shutil.which("bevviz")
    if exe is None:
        pytest.skip("bevviz is not on PATH here (make install puts it there)")
    bad = subprocess.run([exe, "check"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "SOURCE" in bad.stderr


@needs_sample
def test_check_of_the_embedded_rig_writes_json_and_html(tmp_path, capsys):
    j, h = tmp_path / "check.json", tmp_path / "check.html"
    assert main(["check", "rig", "--json", str(j), "--html", str(h)]) == 0
    out = capsys.readouterr().out
    assert "CAM_FRONT" in out and "flagged: none" in out
    doc = json.loads(j.read_text())
    assert doc["format"] == "bevviz-check" and doc["version"] == 1 and doc["exit_code"] == 0
    assert doc["flagged"] == [] and doc["conventions"]["ok"] and len(doc["cameras"]) == 6
    assert doc["settings"]["lidar"] is True and doc["lidar_points"] == 0
    page = h.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script src=" not in page and page.count("data:image/jpeg") == 6


@needs_sample
@pytest.mark.parametrize("option", ["--json", "--html", "--write-fixed"])
def test_check_refuses_an_output_in_a_missing_folder_before_it_checks(tmp_path, capsys, monkeypatch, option):
    ran = []
    monkeypatch.setattr("bevviz.cli.Doctor.check", lambda *a, **k: ran.append(1))
    out = tmp_path / "missing" / "report.out"
    assert main(["check", "rig", option, str(out)]) == 2
    err = capsys.readouterr().err
    assert f"field '{option}'" in err and "does not exist" in err and ".tmp" not in err and not ran


@needs_sample
def test_check_of_an_empty_scan_says_so_and_writes_strict_json(tmp_path, capsys):
    folder = tmp_path / "tri"
    shutil.copytree(SAMPLE / "real_tri", folder)
    np.save(folder / "lidar_ego.npy", np.zeros((0, 4), np.float32))
    j, h = tmp_path / "c.json", tmp_path / "c.html"
    assert main(["check", str(folder), "--no-estimate", "--json", str(j), "--html", str(h)]) == 0  # no fault
    out = capsys.readouterr().out
    assert "note: the LiDAR scan holds no points" in out and "inf" not in out
    assert "flagged: none (6 of 6 cameras inconclusive: not judged)" in out
    text = j.read_text()
    assert "Infinity" not in text and "NaN" not in text
    doc = json.loads(text)
    assert all(c["verdict"] == "inconclusive" and c["offset_deg"] is None and c["uncertainty_deg"] is None
               for c in doc["cameras"])
    assert doc["flagged"] == [] and sorted(doc["unjudged"]) == sorted(c["camera"] for c in doc["cameras"])
    assert "Nothing flagged.</b> <span class='inconclusive'>6 of 6 cameras inconclusive: not judged" in h.read_text()


@needs_sample
def test_check_json_to_stdout_is_the_json_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "rig", "--no-estimate", "--json", "-"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # nothing but the document on stdout: no table, no notes
    assert doc["format"] == "bevviz-check" and doc["flagged"] == [] and len(doc["cameras"]) == 6
    assert not (tmp_path / "-").exists()


@needs_sample
def test_check_exits_1_for_a_turned_camera_in_a_json_rig(tmp_path, capsys):
    rf = load_rig_file(SAMPLE / "rig.json")
    save_rig(perturb_rig(rf.rig, "CAM_BACK_RIGHT", roll_deg=2.0), tmp_path / "bad.json", rf.image_files)
    assert main(["check", str(tmp_path / "bad.json"), "--images", str(SAMPLE), "--no-estimate",
                 "--json", str(tmp_path / "c.json")]) == 1
    assert json.loads((tmp_path / "c.json").read_text())["flagged"] == ["CAM_BACK_RIGHT"]
    assert "flagged: CAM_BACK_RIGHT" in capsys.readouterr().out


def _second_image_set(folder: Path) -> Path:
    """The embedded rig's images half a second later (scene-0001's second sample), one file per camera."""
    folder.mkdir()
    for cam in load_rig_file(SAMPLE / "rig.json").rig.names:
        shutil.copy(next((SAMPLE / "nuscenes" / "samples" / cam).glob("scene-0001__*__1700000000500000.jpg")),
                    folder / f"{cam}.jpg")
    return folder


@needs_sample
def test_check_pools_several_image_sets_of_a_json_rig_and_says_so(tmp_path, capsys):
    later = _second_image_set(tmp_path / "later")
    j = tmp_path / "c.json"
    assert main(["check", "rig", "--images", str(SAMPLE / "images"), "--images", str(later), "--no-estimate",
                 "--json", str(j)]) == 0
    assert "2 frames" in capsys.readouterr().out
    doc = json.loads(j.read_text())
    assert doc["source"]["frames"] == 2 and doc["source"]["more"] == [str(later)]
    assert {c["frames"] for c in doc["cameras"]} == {2}
    one = tmp_path / "one.json"
    assert main(["check", "rig", "--images", str(SAMPLE / "images"), "--no-estimate", "--json", str(one)]) == 0
    single = {c["camera"]: c["score"] for c in json.loads(one.read_text())["cameras"]}
    assert {c["camera"]: c["score"] for c in doc["cameras"]} != single  # the seams saw both sets
    # a set that lacks a camera, or holds another size, is a named input error; nothing written
    (later / "CAM_BACK.jpg").unlink()
    bad = tmp_path / "bad.json"
    assert main(["check", "rig", "--images", str(SAMPLE / "images"), "--images", str(later),
                 "--json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "'--images'" in err and "CAM_BACK" in err and str(later) in err and not bad.exists()
    cv2.imwrite(str(later / "CAM_BACK.jpg"), np.zeros((90, 160, 3), np.uint8))
    assert main(["check", "rig", "--images", str(SAMPLE / "images"), "--images", str(later)]) == 2
    err = capsys.readouterr().err
    assert "camera CAM_BACK" in err and "160 x 90" in err
    # the further sets are inputs too: no report is written into one
    assert main(["check", "rig", "--images", str(SAMPLE / "images"), "--images", str(tmp_path),
                 "--json", str(tmp_path / "x.json")]) == 2


@pytest.mark.skipif(not (SAMPLE / "real_kitti" / "rig.json").is_file(), reason="sample_data/real_kitti missing")
def test_check_takes_a_scan_per_image_set_of_a_json_rig(tmp_path, capsys):
    kitti = SAMPLE / "real_kitti"
    rig, scan = kitti / "rig.json", kitti / "lidar_ego.npy"
    j = tmp_path / "k.json"
    assert main(["check", str(rig), "--scan", str(scan), "--json", str(j)]) == 0
    doc = json.loads(j.read_text())
    assert doc["cameras"][0]["offset_source"] == "lidar" and doc["source"]["scans"] == [str(scan)]
    # the same verdict as the frame folder that holds the same files
    folder = tmp_path / "f.json"
    assert main(["check", str(kitti), "--json", str(folder)]) == 0
    assert [c["verdict"] for c in doc["cameras"]] == [c["verdict"] for c in json.loads(folder.read_text())["cameras"]]
    # turned 2 deg in pitch: the scan names it, as the frame folder does
    turned = tmp_path / "turned"
    shutil.copytree(kitti, turned)
    stored = load_rig_file(rig)
    cam = stored.rig.names[0]
    save_rig(perturb_rig(stored.rig, cam, pitch_deg=2.0), turned / "rig.json", image_files=stored.image_files)
    assert main(["check", str(turned / "rig.json"), "--scan", str(scan), "--no-estimate"]) == 1
    assert f"flagged: {cam}" in capsys.readouterr().out
    assert main(["check", str(turned), "--no-estimate"]) == 1
    # one scan per image set, and a scan the reader refuses: named, exit 2, nothing written
    out = tmp_path / "x.json"
    assert main(["check", str(rig), "--scan", str(scan), "--scan", str(scan), "--json", str(out)]) == 2
    assert "'--scan'" in capsys.readouterr().err and not out.exists()
    (tmp_path / "bad.npy").write_bytes(b"not a numpy file")
    assert main(["check", str(rig), "--scan", str(tmp_path / "bad.npy")]) == 2
    err = capsys.readouterr().err
    assert "--scan" in err and "bad.npy" in err
    assert main(["check", str(kitti), "--scan", str(scan)]) == 2  # a frame folder brings its own
    assert "applies to a JSON rig only" in capsys.readouterr().err


@needs_sample
def test_check_of_a_drifted_dataset_sample(capsys):
    drift = json.loads((SAMPLE / "nuscenes" / "drift.json").read_text())
    late = drift["samples"][-1]
    assert main(["check", "nuscenes", "--sample", late["sample_token"], "--no-estimate"]) == 1
    out = capsys.readouterr().out
    assert f"flagged: {drift['camera']}" in out and "has no LIDAR_TOP" in out


@needs_sample
def test_strict_counts_inconclusive_cameras(tmp_path):
    # On the real keyframe the LiDAR witness leaves some cameras inconclusive.
    j = tmp_path / "real.json"
    assert main(["check", "real-nuscenes", "--strict", "--json", str(j)]) == 1
    doc = json.loads(j.read_text())
    inconclusive = [c["camera"] for c in doc["cameras"] if c["verdict"] == "inconclusive"]
    assert inconclusive and set(inconclusive) <= set(doc["flagged"]) and doc["strict"]
    assert all(c["uncertainty_deg"] is not None for c in doc["cameras"]) and doc["lidar_points"] > 10_000


@needs_sample
def test_check_adds_up_frames_of_a_dataset_and_reads_a_frame_folder(tmp_path, capsys):
    j = tmp_path / "two.json"
    assert main(["check", "nuscenes", "--frames", "2", "--no-estimate", "--json", str(j)]) == 0
    assert "2 frames" in capsys.readouterr().out
    assert json.loads(j.read_text())["source"]["frames"] == 2
    k = tmp_path / "kitti.json"
    rc = main(["check", str(SAMPLE / "real_kitti"), "--no-estimate", "--json", str(k)])
    doc = json.loads(k.read_text())
    assert rc == doc["exit_code"] and doc["source"]["kind"] == "frame-folder" and doc["lidar_points"] > 10_000
    assert doc["cameras"][0]["uncertainty_deg"] is not None  # the LiDAR witness ran
    # the correctly calibrated KITTI camera is not flagged: its rig is stored in the Velodyne's
    # frame, and its height is measured from the road the LiDAR sees (a note says so)
    assert rc == 0 and doc["flagged"] == [] and doc["cameras"][0]["verdict"] != "miscalibrated"
    assert any("sees the ground at z = -1.6" in n for n in doc["notes"])
    # several frame folders of one rig are checked together (here the frame and a copy of it)
    shutil.copytree(SAMPLE / "real_kitti", tmp_path / "again")
    both = tmp_path / "both.json"
    rc = main(["check", str(SAMPLE / "real_kitti"), str(tmp_path / "again"), "--no-estimate", "--json", str(both)])
    doc = json.loads(both.read_text())
    assert rc == doc["exit_code"] and doc["source"]["frames"] == 2 and "2 frames" in capsys.readouterr().out


def _check_moved_cloud(tmp_path, move) -> tuple[int, dict]:
    """``bevviz check --json`` on a copy of the TRI frame whose cloud ``move`` changed in place."""
    folder = tmp_path / "moved"
    shutil.copytree(SAMPLE / "real_tri", folder)
    points = np.load(folder / "lidar_ego.npy")
    move(points)
    np.save(folder / "lidar_ego.npy", points)
    j = tmp_path / "moved.json"
    rc = main(["check", str(folder), "--no-estimate", "--json", str(j)])
    return rc, json.loads(j.read_text())


@needs_sample
def test_check_says_when_the_lidar_looks_out_of_sync(tmp_path, capsys):
    # The TRI frame with its scan 0.4 m ahead of the images (a timing error): nothing is
    # flagged, and the report says why the cameras looked turned.
    def late(points):
        points[:, 0] += 0.4
    rc, doc = _check_moved_cloud(tmp_path, late)
    assert rc == 0 and "look out of sync" in capsys.readouterr().out
    assert doc["flagged"] == [] and any("look out of sync" in n for n in doc["notes"])


@needs_sample
def test_check_says_when_the_lidar_itself_looks_off(tmp_path, capsys):
    # The TRI frame with its scan turned 180 deg about z (a cloud left in another frame than
    # the car's): no camera is judged against it, the report says so once, and the gross-error
    # screen names the LiDAR (a named fault of a named sensor: exit 1).
    def turned(points):
        points[:, :2] *= -1.0
    rc, doc = _check_moved_cloud(tmp_path, turned)
    out = capsys.readouterr().out
    assert rc == 1 and "the LiDAR itself looks off" in out and "FAULT: the LiDAR is turned 180 deg" in out
    assert doc["flagged"] == ["LIDAR"] and any("line up with the LiDAR" in n for n in doc["notes"])


@pytest.mark.parametrize(("argv", "named"), [
    (["check"], "SOURCE"),
    (["check", "nowhere.json"], "SOURCE"),
    (["check", "rig", "--sweeps", "0"], "--sweeps"),
    (["check", "rig", "--frames", "2"], "--frames"),
    (["check", "nuscenes", "--frames", "0"], "--frames"),
    (["check", "sample_data/real_kitti", "--frames", "3"], "--frames"),
    (["check", "rig", "sample_data/real_kitti"], "SOURCE"),
    (["check", "sample_data/real_kitti", "sample_data/real_tri"], "SOURCE"),
    (["check", "rig", "--bogus"], "--bogus"),
    (["check", "nuscenes", "--sample", "nope"], "sample"),
    (["check", "nuscenes", "--version", "v2"], "version"),
    (["audit", "sample_data/nuscenes", "--engine", "spark"], "--engine"),
    (["audit", "sample_data/nuscenes", "--workers", "4"], "--workers"),
    (["audit", "sample_data/nuscenes", "--address", "x:1"], "--address"),
    (["audit", "sample_data/nuscenes", "--scenes", "scene-9"], "--scenes"),
    (["audit", "/no/such/dataroot"], "dataroot"),
    (["frobnicate"], "frobnicate"),
    ([], "command"),
])
def test_bad_input_is_one_line_naming_the_problem_and_exit_2(argv, named, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    rc = main([*argv, *(["--out", str(tmp_path / "o")] if argv[:1] == ["audit"] else [])])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("bevviz: error: ") and named in err, err
    assert "Traceback" not in err


def test_a_bad_rig_file_names_the_camera_and_field(tmp_path, capsys):
    data = json.loads((SAMPLE / "rig.json").read_text())
    data["cameras"][1]["K"] = [[1, 0], [0, 1]]
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert main(["check", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "K" in err and data["cameras"][1]["name"] in err


# --------------------------------------------------------------------------------------
# Bad input against bugs; a check that could not run; sources by name or path
# --------------------------------------------------------------------------------------


@needs_sample
@pytest.mark.parametrize("error", [ValueError("operands could not be broadcast together"), KeyError("token"),
                                   ZeroDivisionError("float division by zero")])
def test_a_bug_is_exit_3_and_says_so_never_bad_input(monkeypatch, capsys, error):
    def broken(self, progress=None):
        raise error

    monkeypatch.setattr(cli_module.Doctor, "check", broken)  # the doctor the command asks
    assert main(["check", "rig"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bevviz: error: internal error (a bug in bevviz, not in your input)")
    assert type(error).__name__ in err and "report it" in err and "Traceback" not in err


@needs_sample
def test_a_check_that_could_not_run_the_doctor_exits_2_naming_what_is_missing(tmp_path, capsys):
    rig = json.loads((SAMPLE / "rig.json").read_text())
    for cam in rig["cameras"]:
        cam.pop("image")  # no image fields, and no camera-named files in --images
    (tmp_path / "r.json").write_text(json.dumps(rig))
    (tmp_path / "pics").mkdir()
    assert main(["check", str(tmp_path / "r.json"), "--images", str(tmp_path / "pics")]) == 2
    out, err = capsys.readouterr()
    assert "flagged: none" not in out
    assert err.count("\n") == 1 and "field '--images'" in err and "CAM_FRONT" in err and "looked for" in err


@needs_sample
def test_images_named_after_their_cameras_are_found(tmp_path, capsys):
    rig = json.loads((SAMPLE / "rig.json").read_text())
    for cam in rig["cameras"]:
        cam.pop("image")
        shutil.copy(SAMPLE / "images" / f"{cam['name']}.jpg", tmp_path / f"{cam['name']}.jpg")
    (tmp_path / "r.json").write_text(json.dumps(rig))
    assert main(["check", str(tmp_path / "r.json"), "--no-estimate"]) == 0
    assert "flagged: none" in capsys.readouterr().out


def test_an_embedded_name_never_shadows_a_folder_of_that_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nuscenes").mkdir()  # the user's (empty) ./nuscenes: checked, so refused; not the sample
    assert main(["check", "nuscenes"]) == 2
    err = capsys.readouterr().err
    assert "field 'SOURCE'" in err and "neither a JSON rig file, a frame folder" in err


def test_the_app_command_finds_the_app_and_its_pages():
    script = app_script()
    assert script.name == "app.py" and (script.parent / "pages" / "rig.py").is_file()
    assert main(["app", "--port", "8502"], parse_only=True) == 0
    assert main(["app", "--port", "0"], parse_only=True) == 2


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_the_app_command_never_leaves_its_server_behind(tmp_path, sig):
    """A service manager's stop (SIGTERM), Ctrl-C (SIGINT) or even SIGKILL of `bevviz app`:
    the Streamlit server it started stops too and frees its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    app = subprocess.Popen([sys.executable, "-m", "bevviz", "app", "--port", str(port), "--address", "127.0.0.1"],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the app's server did not answer within 90 s")
        (server,) = _children(app.pid)
        app.send_signal(sig)
        app.wait(timeout=30)
        deadline = time.time() + 20
        while _alive(server) and time.time() < deadline:
            time.sleep(0.2)
        assert not _alive(server), f"the server (pid {server}) outlived bevviz app after {sig.name}"
        with socket.socket() as s:  # nothing listens on the port (SO_REUSEADDR: as a server binds it)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
    finally:
        for pid in [*_children(app.pid), app.pid]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        app.wait(timeout=10)


# --------------------------------------------------------------------------------------
# The parser under any argv
# --------------------------------------------------------------------------------------

WORDS = ["check", "audit", "rig", "nuscenes", "real-nuscenes", "sample_data/nuscenes", "--help", "-h", "--images",
         "--version", "--sample", "--json", "--html", "--strict", "--lidar", "--no-lidar", "--sweeps", "--thorough",
         "--estimate", "--no-estimate", "--scenes", "--out", "--resume", "--engine", "local", "ray", "--address",
         "--workers", "--flush-every", "--progress", "--no-progress", "0", "1", "-1", "2", "3.5", "", "-", "--",
         "--sweeps=0", "--workers=2", "--engine=ray", "v1.0-mini", "scene-0001,scene-0002", "\x00", "é", "--=x"]


@settings(max_examples=400, deadline=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12)), max_size=8))
def test_any_argv_is_a_valid_parse_or_one_line_and_exit_2(capsys, argv):
    rc = main(argv, parse_only=True)
    out, err = capsys.readouterr()
    assert rc in (0, 2), (argv, rc, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("bevviz: error: "), (argv, err)
    else:
        assert err == "", (argv, err)
    assert "Traceback" not in out + err


def test_check_names_a_camera_whose_image_froze_on_a_drive(tmp_path, capsys):
    """CAMERA_05 shows its first image in every frame of the moving TRI drive: a named fault
    (exit 1), and its verdict rests on its first frame alone."""
    if not (SAMPLE / "real_tri_drive" / "t2" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri_drive is missing")
    drive = tmp_path / "drive"
    shutil.copytree(SAMPLE / "real_tri_drive", drive)
    for t in ("t1", "t2"):
        shutil.copyfile(drive / "t0" / "images" / "CAMERA_05.jpg", drive / t / "images" / "CAMERA_05.jpg")
    assert main(["check", str(drive), "--no-estimate", "--json", str(tmp_path / "out.json")]) == 1
    out = capsys.readouterr().out
    assert "FAULT: CAMERA_05's image in frames 2, 3 is the image of the frame before" in out
    doc = json.loads((tmp_path / "out.json").read_text())
    assert "CAMERA_05" in doc["flagged"]
    assert {c["camera"]: c["frames"] for c in doc["cameras"]}["CAMERA_05"] == 1


@needs_sample
def test_check_names_an_upside_down_camera_and_writes_the_fixed_rig_never_over_an_input(tmp_path, capsys):
    folder = tmp_path / "kitti"
    shutil.copytree(SAMPLE / "real_kitti", folder)
    stored = load_rig_file(folder / "rig.json")
    cam = stored.rig.names[0]
    turned = stored.rig[cam].replace(cam_from_ego=np.diag([-1.0, -1.0, 1.0, 1.0]) @ stored.rig[cam].cam_from_ego)
    save_rig(stored.rig.replace(turned), folder / "rig.json", stored.image_files, stored.ignore)
    before = (folder / "rig.json").read_bytes()
    assert main(["check", str(folder), "--no-estimate", "--write-fixed", str(tmp_path / "fixed.json")]) == 1
    out = capsys.readouterr().out
    assert f"FAULT: {cam} is upside down: 180 deg about its optical axis" in out and f"flagged: {cam}" in out
    fixed = load_rig_file(tmp_path / "fixed.json").rig
    assert np.allclose(fixed[cam].cam_from_ego, stored.rig[cam].cam_from_ego, atol=1e-9)
    assert main(["check", str(folder), "--no-estimate", "--write-fixed", str(folder / "rig.json")]) == 2
    assert "--write-fixed" in (err := capsys.readouterr().err) and "is an input of this command" in err
    assert (folder / "rig.json").read_bytes() == before


def test_check_writes_a_checked_correction_and_a_proposal_only_when_asked(tmp_path, capsys):
    """The TRI drive with CAMERA_05 turned 1.58 deg in every frame: named (exit 1), its
    checked correction is a CORRECTION line; TRI's LiDAR floor makes it a proposal, which
    --write-fixed writes with --apply-proposals: CAMERA_05 within 0.3 deg of its calibration."""
    if not (SAMPLE / "real_tri_drive" / "t2" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri_drive is missing")
    drive = tmp_path / "drive"
    shutil.copytree(SAMPLE / "real_tri_drive", drive)
    for t in ("t0", "t1", "t2"):
        stored = load_rig_file(drive / t / "rig.json")
        bad = perturb_rig(stored.rig, "CAMERA_05", roll_deg=0.85, pitch_deg=1.04, yaw_deg=0.85)
        save_rig(bad, drive / t / "rig.json", stored.image_files, stored.ignore)
    fixed = tmp_path / "fixed.json"
    assert main(["check", str(drive), "--no-estimate", "--json", str(tmp_path / "plain.json")]) == 1
    assert "hint: --write-fixed PATH refines the cameras the LiDAR calls miscalibrated" in capsys.readouterr().out
    assert "corrections" not in json.loads((tmp_path / "plain.json").read_text())
    assert main(["check", str(drive), "--no-estimate", "--write-fixed", str(fixed), "--apply-proposals",
                 "--json", str(tmp_path / "check.json")]) == 1
    out = capsys.readouterr().out
    [correction] = json.loads((tmp_path / "check.json").read_text())["corrections"]
    assert correction["camera"] == "CAMERA_05" and correction["proposed"] and not correction["applied"]
    assert correction["check"].startswith("proposed, not applied") and set(correction["correction_deg"]) == {
        "roll", "pitch", "yaw"}
    assert "flagged: CAMERA_05" in out
    assert "CORRECTION: CAMERA_05: proposed, not applied: the LiDAR would correct roll, pitch, yaw" in out
    assert f"fixed rig written to {fixed}" in out and "--apply-proposals writes" not in out
    truth = load_rig_file(SAMPLE / "real_tri_drive" / "t0" / "rig.json").rig
    written = load_rig_file(fixed).rig
    assert camera_delta(truth["CAMERA_05"], written["CAMERA_05"]).angle_deg < 0.3
    others = [camera_delta(truth[n], written[n]).angle_deg for n in truth.names if n != "CAMERA_05"]
    assert max(others) < 1e-4, others  # as stored, up to the JSON round trip


class _RecordingBar:
    """Stands in for tqdm in ``bevviz check``: records the total and the updates."""

    made: list[_RecordingBar] = []

    def __init__(self, total, **kwargs):
        self.total, self.n, self.desc, self.closed = total, 0, kwargs.get("desc", ""), False
        _RecordingBar.made.append(self)

    def update(self, k):
        self.n += k

    def set_postfix_str(self, *args, **kwargs):
        pass

    def close(self):
        self.closed = True


@pytest.fixture(scope="module")
def drive_check(tmp_path_factory):
    """``bevviz check sample_data/real_tri_drive --json`` run once (3 TRI frames with LiDAR: tens of seconds)."""
    if not (SAMPLE / "real_tri_drive" / "t2" / "rig.json").is_file():
        pytest.skip("sample_data/real_tri_drive is missing")
    j = tmp_path_factory.mktemp("drive") / "drive.json"
    out = io.StringIO()
    _RecordingBar.made.clear()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(cli_module, "tqdm", _RecordingBar)
        rc = main(["check", str(SAMPLE / "real_tri_drive"), "--json", str(j)])
    return rc, json.loads(j.read_text()), out.getvalue(), list(_RecordingBar.made)


def test_check_judges_a_drive_of_frame_folders_together_and_says_so_per_camera(drive_check):
    rc, doc, out, bars = drive_check
    assert doc["source"]["kind"] == "drive" and doc["source"]["frames"] == 3
    assert [c["frames"] for c in doc["cameras"]] == [3] * 6  # every verdict rests on the three frames
    # the dataset's own calibration: no camera of the clean rig is accused
    assert rc == 0 and doc["flagged"] == [] and not any(c["verdict"] == "miscalibrated" for c in doc["cameras"])
    assert "3 frames" in out and " frames " in out.splitlines()[1]  # the table's frames column
    # the progress bar counted frames x cameras to the end, and was closed
    assert len(bars) == 1 and bars[0].total == 18 and bars[0].n == 18 and bars[0].closed
    assert "3 frames x 6 cameras" in bars[0].desc
