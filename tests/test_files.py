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


def test_every_record_takes_its_run_facts_from_run_facts():
    """One JSON shape for the facts of a run (issue 35): no writer in the library or the
    benchmarks builds git or machine facts by hand; each calls unifar.runtime.run_facts."""
    import re

    from unifar.files import REPO

    offenders = []
    for path in sorted([*(REPO / "unifar").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")]):
        if path.name == "runtime.py" and path.parent.name == "unifar":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\b(git_commit|machine_facts)\(", text):
            offenders.append(path.relative_to(REPO).as_posix())
    assert offenders == []
