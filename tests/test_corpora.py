"""Corpus loaders: counts on the shipped data (the figures of each folder's PROVENANCE.md),
the common schema, facet mappings, file:line errors, and the DORIS-MAE / LitSearch fixtures."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import datasets
import pytest

from unifar.datasets import citation_intents as ci
from unifar.facets import CSABSTRUCT_TO_FACET, MULTICITE_TO_FACET
from unifar.datasets import cranfield, external, labelled_abstracts, scirepeval
from unifar.datasets.pubmedqa import SECTION_TO_FACET, load_pubmedqa, section_facet
from unifar.datasets.readers import SPLITS, data_root
from unifar.datasets.schema import (
    DOCUMENT_FEATURES,
    INTENT_FEATURES,
    QUESTION_FEATURES,
    make_document,
    to_dataset,
    validate_qrels,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _facets(ds: datasets.Dataset) -> Counter:
    return Counter(x for labels in ds["labels"] for x in labels)


def _check_documents(ds: datasets.Dataset) -> None:
    assert list(ds.features)[: len(DOCUMENT_FEATURES)] == list(DOCUMENT_FEATURES)
    for name, feat in DOCUMENT_FEATURES.items():
        assert ds.features[name] == feat
    assert len(set(ds["id"])) == len(ds)


# ----------------------------------------------------------------------------- shipped data


@pytest.fixture(scope="module")
def csabstruct():
    return labelled_abstracts.load_csabstruct()


def test_csfcube_documents():
    ds = labelled_abstracts.load_csfcube_documents()
    _check_documents(ds)
    assert len(ds) == 4205 and sum(ds["is_query"]) == 34
    assert sum(len(s) for s in ds["sentences"]) == 29197
    assert _facets(ds) == {"background": 9767 + 2225, "method": 10727, "result": 6051, None: 427}


def test_csabstruct_counts_and_mapping(csabstruct):
    _check_documents(csabstruct)
    assert Counter(csabstruct["split"]) == {"train": 1668, "dev": 295, "test": 226}
    train = csabstruct.filter(lambda r: r["split"] == "train")
    assert sum(len(s) for s in train["sentences"]) == 11333
    raw = Counter(x for labels in train["raw_labels"] for x in labels)
    assert raw == {"background": 3615, "objective": 1325, "method": 3621, "result": 2422, "other": 350}
    assert _facets(train) == {"background": 3615 + 1325, "method": 3621, "result": 2422, None: 350}
    for rec in csabstruct.select(range(50)):
        assert [CSABSTRUCT_TO_FACET[x] for x in rec["raw_labels"]] == rec["labels"]
        assert len(rec["confs"]) == len(rec["sentences"])
    assert len(labelled_abstracts.load_csabstruct(split="test")) == 226


def test_nicta_piboso_counts():
    ds = labelled_abstracts.load_nicta_piboso()
    _check_documents(ds)
    assert Counter(ds["split"]) == {"train": 720, "dev": 80, "test": 200}
    sents = Counter()
    for rec in ds:
        sents[rec["split"]] += len(rec["sentences"])
    assert sents == {"train": 6979, "dev": 801, "test": 1991}
    train = ds.filter(lambda r: r["split"] == "train")
    raw = Counter(x for labels in train["raw_labels"] for x in labels)
    assert raw == {"background": 1832, "population": 504, "intervention": 258, "outcome": 3186,
                   "study design": 85, "other": 1114}
    assert _facets(train) == {"background": 1832, "method": 504 + 258 + 85, "result": 3186, None: 1114}


def test_pubmedqa_counts_split_and_qrels():
    b = load_pubmedqa()
    _check_documents(b.documents)
    assert len(b.documents) == len(b.questions) == 1000
    assert list(b.questions.features)[:3] == list(QUESTION_FEATURES)
    test_ids = set(json.loads((data_root() / "pubmedqa_pqal" / "test_ground_truth.json").read_text()))
    assert {q["qid"] for q in b.questions if q["split"] == "test"} == test_ids
    assert Counter(b.questions["split"]) == {"train": 500, "test": 500}
    assert Counter(b.questions["final_decision"]) == {"yes": 552, "no": 338, "maybe": 110}
    assert all(b.qrels[q] == {q: 1} for q in b.questions["qid"])
    validate_qrels(b.qrels, b.questions, b.documents)
    assert set(b.documents["title"]) == {""}  # no titles: the question rephrases the title
    assert b.stats["unknown_section_names"] == 0
    doc = b.documents[0]
    assert doc["raw_labels"][-1] == "LONG_ANSWER" and doc["labels"][-1] == "result"
    assert len(load_pubmedqa(split="test").documents) == 500


def test_pubmedqa_section_mapping_covers_every_name():
    raw = json.loads((data_root() / "pubmedqa_pqal" / "ori_pqal.json").read_text())
    names = {label for rec in raw.values() for label in rec["LABELS"]}
    assert len(names) == 140
    assert names <= set(SECTION_TO_FACET), sorted(names - set(SECTION_TO_FACET))
    assert set(SECTION_TO_FACET.values()) == {"background", "method", "result", None}
    assert section_facet("Methods and Results") == (None, True)
    assert section_facet("AIMS AND SCOPE") == ("background", False)  # unseen: keyword fallback


def test_cranfield_grades_and_counts():
    b = cranfield.load_cranfield()
    _check_documents(b.documents)
    assert len(b.documents) == 1400 and len(b.questions) == 225
    assert b.stats["dropped_minus_one"] == 225 and b.stats["judgements"] == 1837 - 225
    grades = Counter(g for judged in b.qrels.values() for g in judged.values())
    assert grades == {4: 128, 3: 387, 2: 734, 1: 363}  # Cleverdon 1 (complete answer) -> 4
    validate_qrels(b.qrels, b.questions, b.documents)
    empty = {d["id"] for d in b.documents if not d["sentences"]}
    assert empty == {"471", "995"}
    first = b.documents[0]
    assert not first["sentences"][0].startswith(first["title"])  # the title copy is removed
    kept = cranfield.load_cranfield(keep_minus_one=5)
    assert sum(map(len, kept.qrels.values())) == 1837


def test_cranfield_smart_format(tmp_path):
    (tmp_path / "cran.all.1400").write_text(
        ".I 1\n.T\nwing flutter .\n.A\ndoe,j.\n.B\nj. ae. 1, 1958.\n.W\nwing flutter .\nwe test wings .\nthey flutter .\n"
        ".I 2\n.T\nshock waves .\n.A\n.B\n.W\n"
    )
    (tmp_path / "cran.qry").write_text(".I 001\n.W\nwhat makes wings flutter .\n.I 004\n.W\nshock ?\n")
    (tmp_path / "cranqrel").write_text("1 1 1\n1 2 -1\n2 2 4\n")
    b = cranfield.load_cranfield(tmp_path)
    assert b.documents[0]["sentences"] == ["we test wings .", "they flutter ."]
    assert b.questions["orig_qid"] == ["001", "004"] and b.questions["qid"] == ["1", "2"]
    assert b.qrels == {"1": {"1": 4}, "2": {"2": 1}} and b.stats["dropped_minus_one"] == 1
    (tmp_path / "cranqrel").write_text("1 1 1\n1 2 7\n")
    with pytest.raises(ValueError, match=r"cranqrel:2: grade 7"):
        cranfield.load_cranfield(tmp_path)


def test_scirepeval_samples():
    t = scirepeval.load_scirepeval_triplets()
    _check_documents(t.documents)
    assert len(t.triplets) == 200 and len(t.documents) == 596
    assert t.stats["empty_abstracts"] == 14 and t.stats["conflicting_copies"] == 0
    ids = set(t.documents["id"])
    assert all(r["query_id"] in ids and r["pos_id"] in ids and r["neg_id"] in ids for r in t.triplets)
    assert len(set(t.triplets["query_id"])) == 200

    s = scirepeval.load_scirepeval_search()
    _check_documents(s.documents)
    assert len(s.questions) == 100 and sum(map(len, s.candidates.values())) == 1000
    assert Counter(g for j in s.qrels.values() for g in j.values()) == {0: 885, 1: 114, 2: 1}
    assert all(s.relevant(q) for q in s.questions["qid"])
    validate_qrels(s.qrels, s.questions, s.documents)


@pytest.mark.parametrize(
    "loader, counts, intents",
    [
        (ci.load_scicite, {"train": 7320, "dev": 916, "test": 1861}, {"background": 5832, "method": 2898, "result": 1367}),
        (ci.load_acl_arc, {"train": 1688, "dev": 114, "test": 139},
         {"background": 867 + 59 + 71 + 76 + 5 + 7 + 60 + 4 + 5, "method": 317 + 21 + 26 + 63 + 4 + 5,
          "result": 305 + 21 + 25}),
        (ci.load_multicite, {"train": 5491, "dev": 2447, "test": 3313}, None),
    ],
)
def test_citation_intents(loader, counts, intents):
    ds = loader()
    assert list(ds.features)[: len(INTENT_FEATURES)] == list(INTENT_FEATURES)
    assert Counter(ds["split"]) == counts
    if intents is not None:
        assert Counter(ds["intent"]) == intents
    assert set(ds["intent"]) <= {"background", "method", "result", None}


def test_multicite_multilabel_mapping():
    ds = ci.load_multicite(split="dev", remove_cite_tags=True)
    assert not any("<cite>" in t for t in ds["text"])
    for rec in ds.select(range(300)):
        facets = {MULTICITE_TO_FACET[x] for x in rec["raw_label"].split()}
        assert rec["intent"] == (facets.pop() if len(facets) == 1 else None)


# ----------------------------------------------------------------------------- schema and errors


def test_make_document_validation():
    with pytest.raises(ValueError, match="2 sentences but 1 labels"):
        make_document("d1", "T", ["a", "b"], ["method"], source="x")
    with pytest.raises(ValueError, match="unknown facet 'objective'"):
        make_document("d1", "T", ["a"], ["objective"], source="x")
    with pytest.raises(ValueError, match="'id' must not be empty"):
        make_document("", "T", ["a"], None, source="x")
    with pytest.raises(TypeError, match=r"sentences\[1\]"):
        make_document("d1", "T", ["a", 3], None, source="x")


def test_to_dataset_types_and_duplicates():
    recs = [
        make_document("a", "T", ["s1", "s2"], ["background", None], source="demo", field="cs", split="train"),
        make_document("b", "", [], None, source="demo", split="test"),
    ]
    ds = to_dataset(recs)
    assert ds.features["split"] == datasets.Value("string")
    assert ds[0]["labels"] == ["background", None] and ds[1]["labels"] is None
    with pytest.raises(ValueError, match="duplicate id 'a'"):
        to_dataset([recs[0], recs[0]])
    with pytest.raises(ValueError, match="unknown facet"):
        to_dataset([{**recs[0], "labels": ["bg", None]}])


def test_malformed_line_names_file_and_line(tmp_path):
    good = json.dumps({"abstract_id": 0, "sentences": ["A."], "labels": ["method"], "confs": [1.0]})
    for sp in SPLITS:
        (tmp_path / f"{sp}.jsonl").write_text(good + "\n")
    bad = tmp_path / "dev.jsonl"
    bad.write_text(good + "\n{not json\n")
    with pytest.raises(ValueError, match=rf"{bad}:2: malformed JSON"):
        labelled_abstracts.load_csabstruct(tmp_path)
    bad.write_text(good + "\n" + json.dumps({"abstract_id": 1, "sentences": ["A.", "B."], "labels": ["method"]}) + "\n")
    with pytest.raises(ValueError, match=rf"{bad}:2: 2 sentences but 1 labels"):
        labelled_abstracts.load_csabstruct(tmp_path)
    bad.write_text(json.dumps({"abstract_id": 1, "sentences": ["A."], "labels": ["claim"]}) + "\n")
    with pytest.raises(ValueError, match=rf"{bad}:1: unknown labels \['claim'\]"):
        labelled_abstracts.load_csabstruct(tmp_path)


def test_malformed_nicta_and_intent_lines(tmp_path):
    for sp in SPLITS:
        (tmp_path / f"{sp}_clean.txt").write_text("###1\nbackground\tA sentence .\n\n")
    bad = tmp_path / "test_clean.txt"
    bad.write_text("###1\nbackground\tA sentence .\noutcome without a tab\n")
    with pytest.raises(ValueError, match=rf"{bad}:3: expected 'label<TAB>sentence'"):
        labelled_abstracts.load_nicta_piboso(tmp_path)
    for sp in SPLITS:
        (tmp_path / f"{sp}.txt").write_text(json.dumps({"text": "As in [1].", "label": "method", "metadata": {}}) + "\n")
    (tmp_path / "dev.txt").write_text(json.dumps({"text": "As in [1].", "label": "claim"}) + "\n")
    with pytest.raises(ValueError, match=r"dev.txt:1: unknown label 'claim'"):
        ci.load_scicite(tmp_path)


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        labelled_abstracts.load_csabstruct(tmp_path / "nowhere")


# ----------------------------------------------------------------------------- DORIS-MAE and LitSearch fixtures


def test_doris_mae_query_level():
    b = external.load_doris_mae(FIXTURES / "doris_mae_mini.json")
    _check_documents(b.documents)
    assert b.questions["qid"] == ["0", "1"]
    # query 0 has aspects 0, 1, 2 and sub-aspects 3, 4: score sum / 5
    assert b.qrels["0"] == pytest.approx({"0": 8 / 5, "1": 3 / 5, "2": 1.0, "3": 0.0})
    assert b.qrels["1"] == pytest.approx({"2": 1.0, "3": 0.0, "4": 1.0, "5": 1.5})
    assert b.relevant("0") == {"0", "2"} and b.relevant("1") == {"2", "4", "5"}
    assert b.candidates == {"0": ["0", "1", "2", "3"], "1": ["2", "3", "4", "5"]}
    assert sorted(b.documents["id"]) == ["0", "1", "2", "3", "4", "5"]  # abstract 6 is in no pool
    assert len(external.load_doris_mae(FIXTURES, pool_only=False).documents) == 7


def test_doris_mae_aspect_and_subquery_levels(monkeypatch):
    a = external.load_doris_mae(FIXTURES / "doris_mae_mini.json", level="aspect")
    assert a.questions[0]["text"].startswith("The system should detect anomalies")
    s = external.load_doris_mae(FIXTURES / "doris_mae_mini.json", level="subquery_2")
    # query 0: combinations (0,1), (0,2) kept; (1,2) skipped since its sentences also cover aspect 0
    assert s.questions["qid"] == ["0-0", "0-1", "1-0"]
    assert s.qrels["0-0"]["0"] == pytest.approx(6 / 3) and s.qrels["0-1"]["1"] == pytest.approx(3 / 4)
    monkeypatch.setattr(external, "DORIS_MAE_EXCLUDED", frozenset({3}))
    d = external.load_doris_mae(FIXTURES / "doris_mae_mini.json")
    assert d.candidates["0"] == ["0", "1", "2"] and "3" in d.qrels["0"]  # ranked without it, judged with it
    with pytest.raises(ValueError, match="level must be"):
        external.load_doris_mae(FIXTURES / "doris_mae_mini.json", level="sentence")


def test_doris_mae_rejects_other_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"Query": []}))
    with pytest.raises(ValueError, match="not a DORIS-MAE dataset"):
        external.load_doris_mae(bad)


def test_litsearch_fixture():
    b = external.load_litsearch(FIXTURES / "litsearch")
    _check_documents(b.documents)
    assert len(b.questions) == 3 and len(b.documents) == 5
    assert b.qrels == {"0": {"101": 1}, "1": {"102": 1, "103": 1}, "2": {"104": 1}}
    assert b.questions["specificity"] == [1, 0, 1]
    assert b.documents[0]["sentences"][0] == "We collect questions from citation contexts."
    only = external.load_litsearch(FIXTURES / "litsearch", query_set="manual_iclr")
    assert only.questions["qid"] == ["1"]


def test_litsearch_hub_offline_error(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(external.datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match="could not load 'princeton-nlp/LitSearch'.*pass the local folder"):
        external.load_litsearch()
