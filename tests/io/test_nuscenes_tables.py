"""bevviz.io.nuscenes_tables and the bounded walks of bevviz.io.nuscenes: a bad record is a named
problem, a chain that loops or dangles ends, and the devkit still opens the rest (issue 22)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bevviz.io import nuscenes as nu
from bevviz.io.nuscenes_tables import RecordProblem, follow, screen_tables


@given(st.lists(st.one_of(st.integers(0, 9), st.just(""), st.just("nowhere"), st.just(None), st.just(3.5)),
                min_size=1, max_size=10), st.integers(0, 9))
@settings(max_examples=300, deadline=None)
def test_follow_visits_each_record_once_and_names_what_ended_it(links, first):
    # a link is another record (int), the end ("" or None), a token not in the table, or not a string (3.5)
    table = {f"t{i}": {"token": f"t{i}", "next": f"t{link}" if isinstance(link, int) else link}
             for i, link in enumerate(links)}

    def get(name, token):
        return table[token]

    records, problem = follow(get, "sample", f"t{first}", "next", len(table), ("scene", "sc", "first_sample_token"))
    tokens = [r["token"] for r in records]
    assert len(tokens) == len(set(tokens)) <= len(table)
    # walking by hand (with a visited set) gives the same end
    seen, token = [], f"t{first}"
    while isinstance(token, str) and token and token in table and token not in seen:
        seen.append(token)
        token = table[token]["next"]
    assert tokens == seen
    if token == "" or token is None:
        assert problem is None
    else:
        assert isinstance(problem, RecordProblem) and problem.value == token
        assert (problem.table, problem.token, problem.field) == (("sample", seen[-1], "next") if seen else
                                                                ("scene", "sc", "first_sample_token"))
        assert problem.field in str(problem) and repr(token) in str(problem)


def _tables() -> dict:
    return {
        "sensor": [{"token": "s1", "channel": "CAM_FRONT", "modality": "camera"}],
        "calibrated_sensor": [{"token": "c1", "sensor_token": "s1", "translation": [0, 0, 1],
                               "rotation": [1, 0, 0, 0], "camera_intrinsic": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}],
        "ego_pose": [{"token": "e1", "translation": [0, 0, 0], "rotation": [1, 0, 0, 0]}],
        "scene": [{"token": "sc", "name": "scene-1", "nbr_samples": 2, "first_sample_token": "a"}],
        "sample": [{"token": "a", "timestamp": 1, "scene_token": "sc", "prev": "", "next": "b"},
                   {"token": "b", "timestamp": 2, "scene_token": "sc", "prev": "a", "next": ""}],
        "sample_data": [{"token": f"d{k}", "sample_token": k, "calibrated_sensor_token": "c1", "ego_pose_token": "e1",
                         "filename": f"{k}.jpg", "is_key_frame": True, "timestamp": 1, "prev": "", "next": ""}
                        for k in "ab"],
    }


def test_a_clean_table_set_has_no_problem():
    screened = screen_tables(_tables())
    assert screened.problems == [] and screened.blocked == {}
    assert [len(t) for t in screened.tables.values()] == [len(t) for t in _tables().values()]


@pytest.mark.parametrize("table, index, field, value, blocks", [
    ("sample_data", 0, "calibrated_sensor_token", "deadbeef", "a"),  # dangling: set aside, its sample blocked
    ("sample", 1, "timestamp", 2**70, "b"),  # out of range
    ("sample", 1, "timestamp", None, "b"),  # missing key (None stands for "removed")
    ("calibrated_sensor", 0, "rotation", [1, 0, 0], "ab"),  # shared by both samples: both blocked
    ("sensor", 0, "channel", None, "ab"),  # the devkit's index needs it: set aside, and all that points to it
    ("ego_pose", 0, "translation", "far", "ab"),
    ("scene", 0, "name", 7, ""),  # a number is read as its text: no problem
    ("scene", 0, "nbr_samples", -1, ""),  # reported, nothing blocked
])
def test_each_bad_record_is_one_named_problem_and_blocks_its_samples(table, index, field, value, blocks):
    tables = _tables()
    if value is None:
        del tables[table][index][field]
    else:
        tables[table][index][field] = value
    screened = screen_tables(tables)
    if field == "name":
        assert screened.problems == []
        return
    own = [p for p in screened.problems if p.table == table]
    assert len(own) == 1 and own[0].field == field and own[0].token == tables[table][index]["token"]
    assert f"field '{table}.{field}'" in str(own[0]) and ("missing" in str(own[0]) or repr(value) in str(own[0]))
    assert sorted(screened.blocked) == sorted(blocks)


def test_records_without_a_token_and_twins_are_reported_not_indexed():
    tables = _tables()
    tables["sample_data"].append({"sample_token": "a"})
    tables["sample_data"].append(dict(tables["sample_data"][0]))
    tables["ego_pose"].append("not a record")
    screened = screen_tables(tables)
    assert {(p.table, p.token, p.field) for p in screened.problems} == {
        ("sample_data", "#2", "token"), ("sample_data", "da", "token"), ("ego_pose", "#1", "token")}
    assert len(screened.tables["sample_data"]) == 2 and len(screened.tables["ego_pose"]) == 1
    with pytest.raises(ValueError, match=r"field 'sample.json': must hold a list of records \(got 'dict'\)"):
        screen_tables({"sample": {}})


# --- on the embedded dataset, through the devkit ----------------------------------------------


@pytest.fixture
def broken(nuscenes_root, tmp_path):
    """A copy of the embedded dataset and ``edit(table, fn)`` that changes one of its tables."""
    root = tmp_path / "nuscenes"
    shutil.copytree(nuscenes_root, root, ignore=shutil.ignore_patterns("samples"))

    def edit(table, fn):
        path = root / "v1.0-mini" / f"{table}.json"
        records = json.loads(path.read_text())
        fn(records)
        path.write_text(json.dumps(records))
        return records

    return root, edit


def test_loops_in_next_prev_and_sweeps_end_with_named_errors(broken):
    root, edit = broken
    samples = edit("sample", lambda s: (s[1].update(next=s[0]["token"]), s[0].update(prev=s[1]["token"])))
    sds = edit("sample_data", lambda d: None)
    lidar = next(d for d in sds if d["filename"].startswith("samples/LIDAR_TOP") and d["sample_token"] ==
                 samples[0]["token"])
    edit("sample_data", lambda d: next(x for x in d if x["token"] == lidar["token"]).update(prev=lidar["token"]))
    nusc = nu.open_dataset(root)
    scene = samples[0]["scene_token"]
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"field 'sample.next': sample record '\w+': links back .* the chain loops"):
        nu.list_samples(nusc, scene)  # the app's scene list
    found, problem = nu.scene_samples(nusc, scene)
    assert [s.token for s in found] == [samples[0]["token"], samples[1]["token"]] and problem.scene == scene
    with pytest.raises(ValueError, match=r"field 'sample.prev'.*loops"):
        nu.sample_position(nusc, samples[1]["token"])
    with pytest.raises(ValueError, match=r"field 'sample_data.prev'.*loops"):
        nu.load_lidar_from(nusc, samples[0]["token"], sweeps=10)
    assert time.monotonic() - t0 < 5


def test_a_dangling_token_opens_the_dataset_and_names_the_record(broken):
    root, edit = broken
    sds = edit("sample_data", lambda d: d[0].update(calibrated_sensor_token="deadbeef"))
    edit("sample_annotation", lambda a: a[0].update(instance_token="deadbeef"))
    nusc = nu.open_dataset(root)  # the devkit alone stops at the first with KeyError: 'deadbeef'
    problems, blocked = nu.record_problems(nusc)
    assert {(p.table, p.field, p.value) for p in problems} == {
        ("sample_data", "calibrated_sensor_token", "deadbeef"), ("sample_annotation", "instance_token", "deadbeef")}
    assert list(blocked) == [sds[0]["sample_token"]]
    other = nusc.scene[-1]["first_sample_token"]
    assert len(nu.load_sample_from(nusc, other, with_images=False)[0]) == 6  # the rest loads
