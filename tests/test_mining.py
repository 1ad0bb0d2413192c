"""The offline FTU construction (unifar.construction.mining): signals on toy documents, the whole build on
the repository's data with a cheap hashing encoder, and the leakage guard on what it writes."""

from __future__ import annotations

import hashlib
import re

import pytest
import torch

from unifar.datasets.leakage import check_no_leakage, forbidden_from_repo_data
from unifar.construction.mining import MiningConfig, build_offline_ftus, mine_facet_triplets
from unifar.construction.mining_attribution import attribute_facets, citation_triplets
from unifar.datasets.ftu_files import load_ftus, write_ftus
from unifar.evaluation.texts import facet_text

DIM = 512


def hashing_encoder(texts):
    """Bag of hashed words, L2-normalised: a deterministic stand-in for a sentence encoder."""
    out = torch.zeros(len(texts), DIM)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % DIM] += 1.0
    return torch.nn.functional.normalize(out, dim=-1)


class CyclicLabeller:
    """Labels sentences background, method, result, background, ... (stands in for a FacetLabeller)."""

    def label_documents(self, docs):
        cycle = ["background", "method", "result"]
        return [[cycle[i % 3] for i in range(len(d["sentences"]))] for d in docs]


def _doc(i, bg, mt, rs):
    return {"id": f"d{i}", "title": "", "sentences": [bg, mt, rs], "labels": ["background", "method", "result"],
            "source": "toy", "field": "cs"}


TOY = {
    d["id"]: d
    for d in [
        _doc(0, "Graph databases store social networks at scale.", "We train a convolutional neural network with dropout.",
             "Accuracy improves by five points on ImageNet."),
        _doc(1, "Protein folding is a central problem in biology.", "We train a convolutional neural network with dropout regularisation.",
             "The folding error drops on CASP."),
        _doc(2, "Graph databases store social networks at scale today.", "We use a relational query optimiser with cost models.",
             "Latency drops by half on TPC-H."),
        _doc(3, "Music recommendation relies on listening histories.", "A matrix factorisation model with implicit feedback.",
             "Accuracy improves by five points on ImageNet benchmarks."),
        _doc(4, "Weather forecasting needs large ensembles.", "Numerical simulation with adaptive meshes.",
             "Forecast skill rises at long lead times."),
    ]
}


def test_facet_positive_is_the_closest_facet_text_and_hard_negative_a_topical_neighbour():
    cfg = MiningConfig(signal="facet-bm25", neighbourhood=2, random_negatives_per_facet=0, min_facet_words=3)
    triplets = mine_facet_triplets(TOY, list(TOY), hashing_encoder, cfg, query_ids=["d0"])
    by_facet = {t.facet: t for t in triplets}
    assert by_facet["method"].pos_id == "d1"  # same method, other topic
    assert by_facet["result"].pos_id == "d3"  # same result sentence
    assert by_facet["background"].pos_id == "d2"
    # the method hard negative is one of d0's two topical neighbours (d2: same background, d3: same
    # result), whose methods share nothing with d0's; never the far-off d4
    assert by_facet["method"].neg_id in {"d2", "d3"}
    assert all(t.query_id == "d0" and t.neg_id != t.pos_id for t in triplets)


def test_hybrid_signal_reranks_dense_neighbours_by_facet_evidence():
    others = [f"d{i}" for i in range(1, 5)]
    cos = (hashing_encoder([" ".join(TOY["d0"]["sentences"])])
           @ hashing_encoder([" ".join(TOY[d]["sentences"]) for d in others]).T)[0]
    nearest = [others[i] for i in torch.argsort(cos, descending=True).tolist()]
    kw = dict(signal="hybrid", neighbourhood=2, rerank_depth=4, random_negatives_per_facet=0, min_facet_words=3)
    # weight 0: the teacher is the plain cosine, so every facet gets d0's dense nearest neighbour
    plain = mine_facet_triplets(TOY, list(TOY), hashing_encoder, MiningConfig(hybrid_weight=0.0, **kw), query_ids=["d0"])
    assert {t.pos_id for t in plain} == {nearest[0]} and len({t.facet for t in plain}) == 3
    # a heavy facet term: each facet's positive is the document sharing that facet's sentence
    facet = mine_facet_triplets(TOY, list(TOY), hashing_encoder, MiningConfig(hybrid_weight=10.0, **kw), query_ids=["d0"])
    by_facet = {t.facet: t for t in facet}
    assert (by_facet["background"].pos_id, by_facet["method"].pos_id, by_facet["result"].pos_id) == ("d2", "d1", "d3")
    # the hard negative is one of the 2 nearest dense neighbours, never the positive
    assert all(t.neg_id in nearest[:2] and t.neg_id != t.pos_id for t in facet)
    # teacher_margin=1: the nearest dense neighbour outside the teacher's top 1 (= the positive)
    margin = mine_facet_triplets(TOY, list(TOY), hashing_encoder, MiningConfig(hybrid_weight=10.0, teacher_margin=1, **kw),
                                 query_ids=["d0"])
    assert all(t.neg_id == next(d for d in nearest if d != t.pos_id) for t in margin)


def test_hybrid_mining_stores_the_teachers_graded_scores():
    """Each mined query document keeps the teacher's scores over a candidate list: every facet's
    top candidates (the positive among them), plus candidates drawn from the rest of the rerank
    list, with the same scores the mining ranked by."""
    from unifar.construction.teacher import teacher_list

    kw = dict(signal="hybrid", neighbourhood=2, rerank_depth=4, random_negatives_per_facet=0, min_facet_words=3,
              hybrid_weight=10.0, teacher_top=1, teacher_random=1)
    teachers = {}
    triplets = mine_facet_triplets(TOY, list(TOY), hashing_encoder, MiningConfig(**kw), query_ids=["d0"], teachers=teachers)
    t = teachers["d0"]
    assert set(t.scores) == {"background", "method", "result"} and "d0" not in t.candidates
    assert all(len(v) == len(t.candidates) for v in t.scores.values())
    for trip in triplets:  # the positive is the teacher's top candidate of its facet
        scores = dict(zip(t.candidates, t.scores[trip.facet]))
        assert trip.pos_id in scores and scores[trip.pos_id] == max(scores.values())
    # 3 facet tops (d2, d1, d3) + 1 drawn from the rest of the 4-document rerank list = all 4
    assert sorted(t.candidates) == ["d1", "d2", "d3", "d4"]
    assert teacher_list(t.candidates, {}, MiningConfig(**kw), None) is None  # no facet scored: no list
    # no teacher lists asked for: none stored
    none = {}
    mine_facet_triplets(TOY, list(TOY), hashing_encoder, MiningConfig(**{**kw, "teacher_top": 0, "teacher_random": 0}),
                        query_ids=["d0"], teachers=none)
    assert none == {}


def test_mining_config_checks_the_signal():
    with pytest.raises(ValueError, match="unknown mining signal"):
        MiningConfig(signal="citation-intent")
    with pytest.raises(ValueError, match="rerank_depth"):
        MiningConfig(signal="hybrid", neighbourhood=20, rerank_depth=10)
    with pytest.raises(ValueError, match="teacher_margin"):
        MiningConfig(signal="hybrid", teacher_margin=100)
    with pytest.raises(ValueError, match="needs the hybrid signal"):
        MiningConfig(signal="facet-bm25", teacher_margin=3)


def test_attribution_and_citation_triplets():
    facets = attribute_facets(["convolutional neural network with dropout", "accuracy on ImageNet"],
                              [TOY["d0"], TOY["d0"]], hashing_encoder)
    assert facets == ["method", "result"]
    trip, skipped = citation_triplets([("d0", "d1", "d4"), ("d0", "missing", "d4")], TOY, hashing_encoder)
    assert skipped == 1 and [(t.query_id, t.pos_id, t.neg_id) for t in trip] == [("d0", "d1", "d4")]
    assert facet_text(TOY["d0"], "method").startswith("We train")


@pytest.fixture(scope="module")
def small_build():
    cfg = MiningConfig(max_query_documents=15, seed=1)
    return build_offline_ftus(hashing_encoder, CyclicLabeller(), cfg)


def test_build_uses_every_signal_and_marks_question_origins(small_build):
    out = small_build
    rep = out.report
    assert set(rep["triplets_per_signal"]) == {"hybrid", "citation", "search-clicks"}  # hybrid: the default signal
    assert rep["dropped_by_leakage_guard"]["csabstruct"] >= 20  # CSAbstruct abstracts that are CSFCube papers
    origins = rep["question_origins"]
    assert origins.get("pubmedqa", 0) > 0 and origins.get("icrop", 0) > 0 and origins.get("scirepeval-search", 0) > 0
    assert rep["teacher_lists"]["ftus"] > 0 and rep["teacher_lists"]["candidates"] > rep["teacher_lists"]["ftus"]
    for u in out.ftus:
        assert u.query in out.documents and all(d in out.documents for d in u.all_doc_ids())
        for f, q in u.questions.items():
            assert q.facet == f and q.origin
            # every question has something to be contrasted with
            assert u.negatives.get(f), (u.query, f)
    assert all(d["labels"] is not None for d in out.documents.values())


def test_written_training_files_pass_the_leakage_guard(small_build, tmp_path):
    """The leakage rule (no evaluation document or question in training data), enforced on the
    training files the pipeline writes."""
    folder = write_ftus(tmp_path / "ftus", small_build.ftus, small_build.documents, command="test")
    report = check_no_leakage(folder, forbidden_from_repo_data())
    assert report.ok and report.documents_checked == len(small_build.documents)
    back = load_ftus(folder)
    assert len(back) == len(small_build.ftus)
    # the teacher lists (and their candidates' documents) survive the round trip
    assert [u.teacher for u in back.ftus] == [u.teacher for u in small_build.ftus]
    assert all(d in back.documents for u in back.ftus for d in u.teacher_ids())


def test_leakage_guard_catches_a_planted_csfcube_paper(small_build, tmp_path):
    from unifar.datasets.leakage import LeakageError
    from unifar.datasets.csfcube import load_csfcube

    cube = load_csfcube("data/csfcube", check_texts=False)
    pid, paper = next(iter(cube.papers.items()))
    docs = dict(small_build.documents)
    victim = small_build.ftus[0].query
    docs[victim] = {**docs[victim], "title": paper["title"]}
    folder = write_ftus(tmp_path / "bad", small_build.ftus, docs, command="test")
    with pytest.raises(LeakageError, match="csfcube"):
        check_no_leakage(folder, forbidden_from_repo_data())
