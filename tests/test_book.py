"""unifar.book: chapter set-up, profile results files, and the determinism of a full-profile record.

The book commits each chapter's ``full`` results under ``results/<chapter>/full/`` and promises
that re-running the full profile on a CPU reproduces them exactly (run facts aside). The last
test checks that promise on a small case: the same training and scoring, run twice through the
functions the chapters use, gives identical results records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from unifar import book


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    """A chapter whose repository root is a temporary folder."""
    monkeypatch.setattr(book, "REPO", tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "09_example.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)

    def make(profile="default"):
        return book.setup_chapter("ch09", profile, {"smoke": {"n": 1}, "default": {"n": 2}, "full": {"n": 3}})

    return make


def test_setup_checks_the_profile_and_returns_its_settings(chapter):
    ch = chapter("full")
    assert ch.settings == {"n": 3} and ch.notebook == "notebooks/09_example.ipynb"
    with pytest.raises(ValueError, match=r"unknown profile 'fast' for ch09; this chapter offers \['default', 'full', 'smoke'\]"):
        chapter("fast")
    with pytest.raises(ValueError, match="profile names must be among"):
        book.setup_chapter("ch09", "default", {"default": {}, "huge": {}})


def test_every_chapter_has_its_profiles_in_the_library():
    from unifar.profiles import PROFILES

    assert sorted(PROFILES) == [f"ch0{n}" for n in range(1, 9)]
    for name, profiles in PROFILES.items():
        assert {"smoke", "default", "full"} <= set(profiles) <= set(book.PROFILE_NAMES), name
        # every profile of a chapter sets the same settings, so that a cell never meets a missing key
        assert len({frozenset(s) for s in profiles.values()}) == 1, name


def test_setup_looks_up_the_chapters_profiles(monkeypatch, tmp_path):
    from unifar.profiles import PROFILES

    monkeypatch.chdir(tmp_path)
    ch = book.setup_chapter("ch04", "full")
    assert ch.settings == PROFILES["ch04"]["full"] and ch.settings["n_seeds"] == 3


def test_save_writes_results_config_and_run_facts(chapter, tmp_path):
    ch = chapter("full")
    path = ch.save("scores", {"map": 40.0, "per_facet": (1, 2)}, config={"seed": 0})
    assert path == tmp_path / "results" / "ch09" / "full" / "scores.json"
    rec = json.loads(path.read_text())
    assert rec["format"] == book.FORMAT and rec["profile"] == "full"
    assert rec["results"] == {"map": 40.0, "per_facet": [1, 2]} and rec["config"] == {"seed": 0}
    assert {"commit", "date", "machine", "duration_s", "command"} <= set(rec["run"])
    assert "-p profile full" in rec["run"]["command"]
    assert ch.full("scores")["results"]["map"] == 40.0
    assert ch.full_label("scores").startswith("measured here, full profile, ")
    # other profiles never write into results/ (re-running the default must not dirty the tree)
    assert chapter("default").results_dir == tmp_path / "artifacts" / "results" / "ch09" / "default"


def test_a_missing_full_file_says_how_to_make_it_and_smoke_stands_in(chapter):
    with pytest.raises(FileNotFoundError, match=r"results/ch09/full/scores.json is missing: run the full profile: papermill"):
        chapter("default").full("scores")
    smoke = chapter("smoke")
    smoke.save("scores", {"map": 1.0})
    assert smoke.full("scores")["results"] == {"map": 1.0}
    assert "smoke run standing in" in smoke.full_label("scores")


def test_load_record_reads_a_committed_record_and_names_a_bad_one(tmp_path):
    (tmp_path / "ch04").mkdir()
    (tmp_path / "ch04" / "study.json").write_text('{"runs": {"a": 1}}')
    assert book.load_record("ch04/study.json", tmp_path) == {"runs": {"a": 1}}
    assert book.load_record("ch04/tuning_dev.json")["runs"]  # the repository's own, from its root
    with pytest.raises(FileNotFoundError, match=r"ch04/missing.json: no such record"):
        book.load_record("ch04/missing.json", tmp_path)
    (tmp_path / "ch04" / "torn.json").write_text('{"runs": ')
    with pytest.raises(ValueError, match=r"torn.json: not valid JSON"):
        book.load_record("ch04/torn.json", tmp_path)


def test_load_results_refuses_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a chapter results file"):
        book.load_results(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        book.load_results(bad)


def test_a_full_record_is_reproduced_exactly_on_a_cpu(chapter, make_model, tmp_path):
    """The determinism the book claims for its full profiles, on a small case: train a tiny
    UniFAR and score documents with it, twice, and save both records the way a chapter does."""
    from unifar.train import train

    from .test_train import args_for, make_dataset, small

    docs = [{"title": "Facet retrieval", "sentences": ["We propose anchors.", "Results improve.", "Prior work."]},
            {"title": "Graphs", "sentences": ["Graphs help.", "We train a network.", "Accuracy rises."]}]
    records = []
    for run in range(2):
        ch = chapter("full")
        res = train(None, make_dataset(8), args_for(tmp_path / f"run{run}", max_steps=3, seed=0),
                    model=make_model(**small()))
        emb = res.model.encode_documents(docs).embeddings
        path = ch.save("tiny", {"last_terms": res.last_terms, "embeddings": emb.tolist()}, config={"seed": 0})
        records.append(book.load_results(path))
        assert torch.isfinite(emb).all()
    assert book.same_results(*records)
    assert records[0]["run"]["date"] and records[0]["results"]["last_terms"]


CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")) + [
    Path(__file__).resolve().parents[1] / "book" / "reproduction_summary.ipynb"]


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_every_parameter_is_annotated_and_its_default_fits(notebook):
    import ast
    import json

    from unifar.book import check_parameters

    cell = next("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                if "parameters" in c.get("metadata", {}).get("tags", []))
    body = ast.parse(cell).body
    plain = [ast.unparse(n.targets[0]) for n in body if isinstance(n, ast.Assign)]
    assert not plain, f"{notebook.name}: annotate these parameters (name: type = default): {plain}"
    defaults = {n.target.id: ast.literal_eval(n.value) for n in body if isinstance(n, ast.AnnAssign)}
    check_parameters(defaults, notebook)
    setup = next("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                 if "setup_chapter(" in "".join(c["source"]))
    assert "parameters=globals()" in setup, f"{notebook.name}: setup_chapter must check the parameters"


def test_a_parameter_of_the_wrong_type_is_named():
    from unifar.book import check_parameters

    ch01 = next(p for p in CHAPTERS if p.name.startswith("01_"))
    with pytest.raises(TypeError, match=r"parameter batch_size = 'abc' \(str\): expected int"):
        check_parameters({"batch_size": "abc"}, ch01)
    with pytest.raises(TypeError, match="parameter max_tokens"):
        check_parameters({"max_tokens": 1.5}, ch01)
    with pytest.raises(TypeError, match="parameter resume"):
        check_parameters({"resume": "false"}, next(p for p in CHAPTERS if p.name.startswith("04_")))
    check_parameters({"batch_size": 8, "max_tokens": None, "device": "cpu"}, ch01)
