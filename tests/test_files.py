"""File utilities: atomic folder and JSON writes, repository-relative display paths."""

import json

import pytest

from unifar.files import REPO, atomic_dir, display_path, write_json


def test_write_json_is_atomic_and_creates_parents(tmp_path):
    p = write_json(tmp_path / "a" / "b.json", {"x": 1.5, "p": tmp_path})
    assert json.loads(p.read_text()) == {"x": 1.5, "p": str(tmp_path)}
    assert [f.name for f in p.parent.iterdir()] == ["b.json"]  # no temporary left behind


def test_atomic_dir_keeps_the_old_folder_when_the_writer_fails(tmp_path):
    final = tmp_path / "out"
    atomic_dir(final, lambda d: (d / "f.txt").write_text("old"))

    def broken(d):
        (d / "f.txt").write_text("new")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_dir(final, broken)
    assert (final / "f.txt").read_text() == "old"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out"]


def test_display_path_is_repository_relative():
    assert display_path(REPO / "data" / "cranfield" / "qrels.tsv") == "data/cranfield/qrels.tsv"
    assert display_path("/nowhere/x.tsv") == "/nowhere/x.tsv"
