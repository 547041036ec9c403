"""The one output-path rule: an output is never something the command reads, by any name."""

from __future__ import annotations

import os

import pytest

from bevviz.errors import InputError
from bevviz.io.outputs import Reads, refuse_input_as_output, writable_file


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "data" / "images").mkdir(parents=True)
    (tmp_path / "data" / "rig.json").write_text("{}")
    (tmp_path / "data" / "images" / "a.jpg").write_bytes(b"jpg")
    os.symlink(tmp_path / "data" / "rig.json", tmp_path / "soft.json")
    os.link(tmp_path / "data" / "rig.json", tmp_path / "hard.json")
    return tmp_path


@pytest.mark.parametrize("output", ["data/rig.json", "data/images/../rig.json", "soft.json", "hard.json",
                                    "data/images/a.jpg", "data/images/new.json", "data/images"])
def test_an_input_or_a_path_in_a_folder_read_is_refused_naming_the_field(tree, monkeypatch, output):
    monkeypatch.chdir(tree)
    reads = Reads.of(files=[tree / "data" / "rig.json"], folders=[tree / "data" / "images"])
    with pytest.raises(InputError, match="field '--json'") as info:
        refuse_input_as_output("--json", output, reads)
    assert info.value.field == "--json" and info.value.value == output


@pytest.mark.parametrize("output", ["data/report.json", "report.json", "data/rig.json.bak"])
def test_anything_else_is_written_where_asked(tree, monkeypatch, output):
    monkeypatch.chdir(tree)
    reads = Reads.of(files=[tree / "data" / "rig.json"], folders=[tree / "data" / "images"])
    assert str(refuse_input_as_output("--json", output, reads)) == output


def test_an_output_folder_inside_a_folder_read_is_refused(tmp_path):
    reads = Reads.of(folders=[tmp_path / "dataroot"])
    with pytest.raises(InputError, match="output folder .* inside"):
        refuse_input_as_output("--out", tmp_path / "dataroot" / "audit", reads, folder=True)
    assert refuse_input_as_output("--out", tmp_path / "audit", reads, folder=True) == tmp_path / "audit"


@pytest.mark.parametrize(("output", "says"), [("missing/report.json", "the folder 'missing' of 'missing/report.json' "
                                                                    "does not exist"),
                                               ("data/rig.json/report.json", "the folder 'data/rig.json'"),
                                               ("data", "'data' is a folder")])
def test_an_output_that_cannot_be_written_where_named_is_refused_naming_the_field(tree, monkeypatch, output, says):
    monkeypatch.chdir(tree)
    with pytest.raises(InputError, match="field '--json'") as info:
        writable_file("--json", output)
    assert says in str(info.value) and info.value.value == output


@pytest.mark.parametrize("output", ["report.json", "data/report.json", "data/rig.json"])
def test_a_file_in_an_existing_folder_is_writable(tree, monkeypatch, output):
    monkeypatch.chdir(tree)
    assert str(writable_file("--json", output)) == output
