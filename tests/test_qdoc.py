"""q-doc protocols: ranking, ranx metrics on hand-computed cases, retrievers, the SciRepEval split."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from unifar.datasets import external
from unifar.datasets.scirepeval import load_scirepeval_search, split_scirepeval_search
from unifar.datasets.schema import QDocBenchmark, questions_to_dataset, to_dataset
from unifar.evaluation.qdoc import (
    CRANFIELD,
    DORIS_MAE,
    LITSEARCH,
    PUBMEDQA,
    QDocProtocol,
    evaluate_qdoc,
    evaluate_ranking,
    pool_rank_changes,
    rank_change_style,
    rank_change_summary,
    rank,
    ranx_qrels,
)
from unifar.evaluation.dense import MeanPoolingRetriever, UniFARRetriever
from unifar.evaluation.retrievers import BM25Retriever, Retriever

FIXTURES = Path(__file__).parent / "fixtures"


class FixedRetriever(Retriever):
    """Scores given per question text: ``{question text: {doc_id: score}}`` (0 elsewhere)."""

    name = label = "fixed"

    def __init__(self, table):
        self.table = table

    @property
    def index_key(self):
        return "fixed"

    def index(self, documents):
        return [d["id"] for d in documents]

    def score(self, questions, index):
        return np.array([[self.table.get(q, {}).get(d, 0.0) for d in index] for q in questions])

    def csfcube_score_fn(self, data, cache=None):  # pragma: no cover - not used here
        raise NotImplementedError


def _bench(qrels, n_docs=4, candidates=None, threshold=1, questions=None):
    docs = to_dataset([{"id": f"d{i}", "title": f"doc {i}", "sentences": [f"text {i}."], "source": "t"} for i in range(1, n_docs + 1)])
    qs = questions or [{"qid": q, "text": f"question {q}", "source": "t"} for q in qrels]
    return QDocBenchmark("toy", docs, questions_to_dataset(qs), qrels, candidates=candidates, relevance_threshold=threshold)


# ----------------------------------------------------------------------------- ranking + metrics
def test_rank_orders_by_score_ties_by_collection_and_respects_pools():
    scores = np.array([[0.2, 0.9, 0.9, 0.1], [0.0, 0.0, 0.0, 0.0]])
    run = rank(scores, ["a", "b", "c", "d"], ["q1", "q2"])
    assert list(run["q1"]) == ["b", "c", "a", "d"] and list(run["q2"]) == ["a", "b", "c", "d"]
    assert list(run["q1"].values()) == [4.0, 3.0, 2.0, 1.0]
    pooled = rank(scores, ["a", "b", "c", "d"], ["q1", "q2"], candidates={"q1": ["d", "a"], "q2": ["c"]})
    assert pooled == {"q1": {"a": 2.0, "d": 1.0}, "q2": {"c": 1.0}}
    assert list(rank(scores, ["a", "b", "c", "d"], ["q1", "q2"], depth=2)["q1"]) == ["b", "c"]
    with pytest.raises(ValueError, match="shape"):
        rank(scores, ["a", "b"], ["q1", "q2"])
    with pytest.raises(KeyError, match="not among the documents"):
        rank(scores, ["a", "b", "c", "d"], ["q1", "q2"], candidates={"q1": ["x"], "q2": []})


def test_metrics_match_hand_computed_values():
    # q1 ranks d1 d2 d3 d4 with d2 (grade 2) and d4 (grade 1) relevant; q2 ranks d3 first (its only relevant)
    bench = _bench({"q1": {"d2": 2, "d4": 1, "d1": 0}, "q2": {"d3": 1}})
    scores = np.array([[4.0, 3.0, 2.0, 1.0], [3.0, 2.0, 4.0, 1.0]])
    run = rank(scores, ["d1", "d2", "d3", "d4"], ["q1", "q2"])
    proto = QDocProtocol("toy", metrics=("map", "recall@2", "mrr@10", "r-precision", "recall@1"), graded_metrics=("ndcg@3",))
    res = evaluate_ranking(run, bench, proto)
    ndcg_q1 = (2 / math.log2(3)) / (2 + 1 / math.log2(3))  # linear gain, 1/log2(rank+1)
    expected_q1 = {"map": (1 / 2 + 2 / 4) / 2, "recall@2": 0.5, "mrr@10": 0.5, "r-precision": 0.5, "recall@1": 0.0, "ndcg@3": ndcg_q1}
    for metric, value in expected_q1.items():
        assert res.per_query[metric]["q1"] == pytest.approx(100 * value), metric
        assert res.per_query[metric]["q2"] == pytest.approx(100.0), metric
        assert res.metrics[metric] == pytest.approx(100 * (value + 1) / 2), metric
    assert res.n_queries == 2 and res.skipped_no_relevant == 0
    # a stricter threshold: only d2 counts for the binary metrics, the graded ones are unchanged
    strict = evaluate_ranking(run, _bench({"q1": {"d2": 2, "d4": 1}, "q2": {"d3": 2}}, threshold=2), proto)
    assert strict.per_query["map"]["q1"] == pytest.approx(50.0)
    assert strict.per_query["recall@2"]["q1"] == pytest.approx(100.0)
    assert strict.per_query["ndcg@3"]["q1"] == pytest.approx(100 * ndcg_q1)


def test_questions_without_relevant_documents_are_left_out():
    bench = _bench({"q1": {"d1": 1}, "q2": {"d2": 0}})
    run = rank(np.array([[1.0, 0, 0, 0], [1.0, 0, 0, 0]]), ["d1", "d2", "d3", "d4"], ["q1", "q2"])
    res = evaluate_ranking(run, bench, QDocProtocol("toy", metrics=("map",)))
    assert res.per_query == {"map": {"q1": 100.0}} and res.skipped_no_relevant == 1


def test_ranx_qrels_rejects_fractional_grades_for_graded_metrics():
    assert ranx_qrels({"q": {"a": 1.5, "b": 0.5}}, threshold=1.0) == {"q": {"a": 1}}
    with pytest.raises(ValueError, match="integer grades"):
        ranx_qrels({"q": {"a": 1.5}}, threshold=1.0, graded=True)


def test_protocol_definitions():
    assert CRANFIELD.depth is None and CRANFIELD.graded_metrics == ("ndcg@10",)
    assert set(CRANFIELD.metrics) == {"map", "recall@5", "recall@20"}
    assert PUBMEDQA.metrics == ("mrr@10", "recall@1", "recall@5", "recall@20") and PUBMEDQA.depth == 20
    assert DORIS_MAE.metrics == ("recall@5", "r-precision", "map")
    assert len(LITSEARCH.metrics) == 12 and LITSEARCH.breakdown == "specificity"


# ----------------------------------------------------------------------------- DORIS-MAE, LitSearch
def test_doris_mae_protocol_on_fixture(monkeypatch):
    # query 0: pool 0 1 2 3, relevant {0, 2}; query 1: pool 2 3 4 5, relevant {2, 4, 5}
    b = external.load_doris_mae(FIXTURES / "doris_mae_mini.json")
    q0, q1 = b.questions["text"]
    table = {q0: {"1": 4, "0": 3, "3": 2, "2": 1}, q1: {"5": 4, "3": 3, "2": 2, "4": 1}}
    res = evaluate_qdoc(FixedRetriever(table), b, DORIS_MAE)
    assert res.per_query["r-precision"] == pytest.approx({"0": 50.0, "1": 200 / 3})
    assert res.per_query["map"] == pytest.approx({"0": 50.0, "1": 100 * (1 + 2 / 3 + 3 / 4) / 3})
    assert res.per_query["recall@5"] == pytest.approx({"0": 100.0, "1": 100.0})
    # an abstract left out of the pool (official: over-long) still counts as relevant
    monkeypatch.setattr(external, "DORIS_MAE_EXCLUDED", frozenset({2}))
    b2 = external.load_doris_mae(FIXTURES / "doris_mae_mini.json")
    res2 = evaluate_qdoc(FixedRetriever(table), b2, DORIS_MAE)
    assert res2.per_query["recall@5"] == pytest.approx({"0": 50.0, "1": 200 / 3})


def test_litsearch_breakdown_by_specificity():
    b = external.load_litsearch(FIXTURES / "litsearch")
    res = evaluate_qdoc(BM25Retriever(), b, LITSEARCH)
    assert set(res.metrics) == set(LITSEARCH.metrics)
    assert {k: len(v["qids"]) for k, v in res.subsets.items()} == {"specificity=0": 1, "specificity=1": 2}
    sub = res.subsets["specificity=1"]
    assert sub["metrics"]["recall@5"] == pytest.approx(np.mean([res.per_query["recall@5"][q] for q in sub["qids"]]))


# ----------------------------------------------------------------------------- retrievers
def test_bm25_retriever_finds_the_lexical_match():
    bench = _bench({"q1": {"d3": 1}}, questions=[{"qid": "q1", "text": "text 3", "source": "t"}])
    docs = bench.documents.select_columns(["title", "sentences"]).to_list()
    docs[2]["sentences"] = ["supersonic boundary layer transition"]
    r = BM25Retriever()
    scores = r.score(["supersonic transition"], r.index(docs))
    assert scores.shape == (1, 4) and scores[0].argmax() == 2 and scores[0, 0] == 0.0


def test_unifar_retriever_scores_the_diagonal_mean(make_model, docs):
    model = make_model()
    r = UniFARRetriever(model, batch_size=2)
    index = r.index(docs)
    questions = ["Which model uses facet anchors?", "How are results improved?"]
    scores = r.score(questions, index)
    q = model.encode_questions(questions).embeddings
    expected = torch.einsum("aih,bih->abi", q, index).mean(-1)  # (1/F) sum_f cos(e_q^f, e_d^f)
    assert scores.shape == (2, 3)
    np.testing.assert_allclose(scores, expected.double().numpy(), rtol=1e-5, atol=1e-6)


def test_facet_query_is_doc_doc_only():
    class Enc:
        name, max_length, sep_token = "x", 8, "[SEP]"

    with pytest.raises(ValueError, match="CSFCube"):
        MeanPoolingRetriever(Enc(), facet_query=True).score(["q"], torch.zeros(1, 2))


# ----------------------------------------------------------------------------- SciRepEval split
def test_scirepeval_split_is_deterministic_disjoint_and_covering():
    full = load_scirepeval_search()
    train, test = (split_scirepeval_search(full, p) for p in ("train", "test"))
    tr, te = set(train.questions["qid"]), set(test.questions["qid"])
    assert not tr & te and tr | te == set(full.questions["qid"])
    assert len(tr) == len(te) == 50  # on the 100-query sample
    assert list(split_scirepeval_search(full, "test").questions["qid"]) == list(test.questions["qid"])
    for q in te:  # the rule: odd first byte of sha256(qid) -> test
        assert hashlib.sha256(q.encode()).digest()[0] % 2 == 1
    assert set(test.qrels) == te and set(test.candidates) == te
    pooled = {d for pool in test.candidates.values() for d in pool}
    assert set(test.documents["id"]) == pooled and test.stats["part"] == "test"
    with pytest.raises(ValueError, match="part must be"):
        split_scirepeval_search(full, "dev")


# ----------------------------------------------------------------------------- rank changes
def test_pool_rank_changes_finds_swaps_only_where_grades_differ():
    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 0}, "q2": {"d1": 1, "d2": 1}}
    bench = _bench(qrels, n_docs=3, candidates={"q1": ["d1", "d2", "d3"], "q2": ["d1", "d2"]})
    ref = FixedRetriever({"question q1": {"d1": 0.9, "d2": 0.5, "d3": 0.4}, "question q2": {"d1": 0.6, "d2": 0.5}})
    # swaps d2/d3 (same grade) in q1 and d1/d2 (same grade) in q2: no metric can move
    same = FixedRetriever({"question q1": {"d1": 0.9, "d2": 0.41, "d3": 0.5}, "question q2": {"d1": 0.5, "d2": 0.6}})
    same.name = "same grades"
    # lifts d3 above d1 in q1: a differently judged pair swaps
    moved = FixedRetriever({"question q1": {"d1": 0.9, "d2": 0.5, "d3": 0.95}, "question q2": {"d1": 0.6, "d2": 0.5}})
    moved.name = "moved"
    t = pool_rank_changes(bench, ref, [same, moved]).set_index(["system", "qid"])
    assert t.loc[("same grades", "q1"), "reordered"] == 1 and t.loc[("same grades", "q1"), "discordant_judged"] == 0
    assert t.loc[("same grades", "q2"), "discordant"] == 1 and np.isnan(t.loc[("same grades", "q2"), "min_judged_gap"])
    # d3 passes d1 (grades 0 and 2: counts) and d2 (both grade 0: does not)
    assert t.loc[("moved", "q1"), ["discordant", "discordant_judged"]].tolist() == [2, 1]
    assert t.loc[("moved", "q2"), "reordered"] == 0 and t.loc[("moved", "q2"), "max_shift"] == 0
    assert t.loc[("moved", "q1"), "min_judged_gap"] == pytest.approx(0.4)
    summary = rank_change_summary(t.reset_index())
    assert summary.loc["same grades", "reordered (%)"] == 100 and summary.loc["same grades", "judged pair swapped (%)"] == 0
    assert summary.loc["moved", "judged pair swapped (%)"] == 50 and summary.loc["moved", "one-grade questions"] == 1
    assert ">0.2750<" in rank_change_style(summary).to_html()  # median of 0.55 and 0: four digits
    with pytest.raises(ValueError, match="pools"):
        pool_rank_changes(_bench(qrels, n_docs=3), ref, [moved])


def test_pool_rank_changes_reads_the_encoded_collections_an_evaluation_kept():
    """With ``index_cache`` a system whose collection is already encoded (same key, same
    documents in the same order) is not indexed again; other documents are indexed anew."""
    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 0}}
    bench = _bench(qrels, n_docs=3, candidates={"q1": ["d1", "d2", "d3"]})
    built = []

    class Counting(FixedRetriever):
        def index(self, documents):
            built.append(len(documents))
            return super().index(documents)

    ref = Counting({"question q1": {"d1": 0.9, "d2": 0.5, "d3": 0.4}})
    kept: dict = {}
    first = pool_rank_changes(bench, ref, [ref], index_cache=kept, collection="toy")
    assert built == [3] and list(kept) == [("fixed", "toy")]
    again = pool_rank_changes(bench, ref, [ref], index_cache=kept, collection="toy")
    assert built == [3] and again.equals(first)
    kept[("fixed", "toy")] = (["d3", "d2", "d1"], ["d3", "d2", "d1"])  # another order: rebuilt
    pool_rank_changes(bench, ref, [ref], index_cache=kept, collection="toy")
    assert built == [3, 3]


def test_evaluate_all_keeps_every_encoded_collection_in_index_cache(monkeypatch):
    """evaluate_all fills ``index_cache`` under ``(index_key, collection)`` and keeps it after the
    run (without it, collections no later benchmark needs are freed)."""
    from unifar.evaluation.benchmarks import LoadedBenchmark
    from unifar.evaluation import runner

    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 0}}
    bench = _bench(qrels, n_docs=3, candidates={"q1": ["d1", "d2", "d3"]})
    lb = LoadedBenchmark("toy", "qdoc", bench, QDocProtocol("toy", metrics=("map",), graded_metrics=("ndcg@1",)),
                         "toy", {})
    ref = FixedRetriever({"question q1": {"d1": 0.9, "d2": 0.5, "d3": 0.4}})
    kept: dict = {}
    monkeypatch.setattr(runner, "_load_benchmarks", lambda benchmarks, opts: ([lb], {"toy": 0.0}))
    runner.evaluate_all(retrievers=[ref], benchmarks=["toy"], n_resamples=10, log=None, index_cache=kept)
    assert kept[("fixed", "toy")] == (["d1", "d2", "d3"], ["d1", "d2", "d3"])
