"""Question -> document benchmark protocols: rank, then score with ``ranx``.

Every protocol ranks each question's candidates by a retriever's scores (the whole collection,
or the question's pool when the benchmark has one), breaks ties by collection (pool) order
(:func:`unifar.evaluation.ranking.rank_order`), and hands the ranking to ``ranx``, which
computes every metric (standard TREC definitions:
``recall@k`` = relevant retrieved in the top k / all relevant judged, ``map`` divides by all
relevant judged, ``ndcg@k`` has linear gain ``rel`` and ``1/log2(rank+1)`` discount with the
ideal from the qrels). Only the dataset quirks below are written here. Per-query values and
aggregates are in percent.

* **Cranfield** (:data:`CRANFIELD`): the 225 questions against all 1,400 abstracts, ranked in
  full. MAP, nDCG@10 (graded, 4 = complete answer ... 1 = minimal interest, see
  :data:`unifar.datasets.cranfield.CRANFIELD_GRADES`; the undocumented -1 judgements are dropped by
  the loader), R@5, R@20. Binary metrics: relevant = grade >= 1, i.e. every judged document
  (the loader's ``relevance_threshold``), as ``trec_eval`` counts any positive grade.
* **PubMedQA** (:data:`PUBMEDQA`): the 500 official test questions (``test_ground_truth.json``)
  against all 1,000 PQA-L abstracts; each question's only relevant document is its own
  abstract, which (as the loader gives it) includes the conclusion (``LONG_ANSWER``, often
  the answer's wording). MRR@10, R@1, R@5, R@20 on the top 20.
* **SciRepEval search** (:data:`SCIREPEVAL_SEARCH`): each question reranks its 10 candidates
  (click grades 0/1/2); nDCG@10 (graded) over the test half of
  :func:`unifar.datasets.scirepeval.split_scirepeval_search` (``all`` on request).
* **DORIS-MAE** (:data:`DORIS_MAE`): ranking within each query's candidate pool (the four
  over-long abstracts left out of the pools, kept in the qrels, as the official code);
  relevant = normalised score >= 1.0; R@5, R-Precision, MAP; averaged over the queries with at
  least one relevant candidate (official). Levels query, aspect, subquery_2.
* **LitSearch** (:data:`LITSEARCH`): retrieval over the whole corpus (title + abstract);
  Recall, MRR, MAP, nDCG at 5, 10, 20 (UniFAR appendix E, table 8), also per specificity
  (0 = broad, 1 = specific). A relevant paper absent from the corpus still counts in the
  denominators (as the official ``calculate_recall``).

A question without any relevant judged document is left out of the averages (counted in
``skipped_no_relevant``); this matters only for DORIS-MAE here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..datasets.schema import QDocBenchmark
from .metrics import ranx_per_query
from .ranking import rank_change, rank_order

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

    from .retrievers import Retriever

__all__ = [
    "QDocProtocol",
    "QDocResult",
    "CRANFIELD",
    "PUBMEDQA",
    "SCIREPEVAL_SEARCH",
    "DORIS_MAE",
    "LITSEARCH",
    "PROTOCOLS",
    "rank",
    "ranx_qrels",
    "evaluate_ranking",
    "evaluate_qdoc",
    "mean_metrics",
    "pool_rank_changes",
    "rank_change_summary",
    "rank_change_style",
]

Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class QDocProtocol:
    """How one q-doc benchmark is scored.

    ``metrics`` are ranx metric names on binary relevance (grade >= the benchmark's
    threshold); ``graded_metrics`` on the graded qrels (integer grades > 0). ``depth``: how
    many ranked documents per question are scored (``None`` = all; enough for every cut-off).
    ``breakdown``: a question column whose values define sub-averages (LitSearch specificity).
    """

    name: str
    metrics: tuple[str, ...] = ()
    graded_metrics: tuple[str, ...] = ()
    depth: int | None = None
    breakdown: str | None = None
    description: str = ""

    @property
    def all_metrics(self) -> tuple[str, ...]:
        return (*self.graded_metrics, *self.metrics)


CRANFIELD = QDocProtocol(
    "cranfield", metrics=("map", "recall@5", "recall@20"), graded_metrics=("ndcg@10",), depth=None,
    description="225 questions x all 1,400 abstracts, full ranking; nDCG@10 graded (4..1), "
    "binary metrics: relevant = any judged grade (>= 1); -1 judgements dropped",
)
PUBMEDQA = QDocProtocol(
    "pubmedqa", metrics=("mrr@10", "recall@1", "recall@5", "recall@20"), depth=20,
    description="500 official test questions x all 1,000 PQA-L abstracts (conclusion included); "
    "one relevant abstract per question",
)
SCIREPEVAL_SEARCH = QDocProtocol(
    "scirepeval_search", graded_metrics=("ndcg@10",), depth=None,
    description="rerank each query's 10 candidates; click grades 0/1/2, nDCG@10 with linear gain",
)
DORIS_MAE = QDocProtocol(
    "doris_mae", metrics=("recall@5", "r-precision", "map"), depth=None,
    description="rank each query's candidate pool; relevant = normalised aspect score >= 1.0; "
    "queries without a relevant candidate left out (official)",
)
LITSEARCH = QDocProtocol(
    "litsearch",
    metrics=tuple(f"{m}@{k}" for m in ("recall", "mrr", "map", "ndcg") for k in (5, 10, 20)),
    depth=20, breakdown="specificity",
    description="questions x the whole corpus (title + abstract); binary relevance; also per specificity",
)
PROTOCOLS: dict[str, QDocProtocol] = {
    p.name: p for p in (CRANFIELD, PUBMEDQA, SCIREPEVAL_SEARCH, DORIS_MAE, LITSEARCH)
}


@dataclass
class QDocResult:
    """Per-query values and means (percent) of one system on one q-doc benchmark."""

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]  # {metric: {qid: value}}
    subsets: dict[str, dict[str, Any]] = field(default_factory=dict)  # {"specificity=1": {"qids": [...], "metrics": {...}}}
    n_queries: int = 0
    skipped_no_relevant: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def rank(scores: np.ndarray, doc_ids: Sequence[str], qids: Sequence[str],
         candidates: Mapping[str, Sequence[str]] | None = None, depth: int | None = None) -> Run:
    """Rankings as a ranx run ``{qid: {doc_id: rank score}}`` (rank score = depth - position).

    ``scores`` ``[n_questions, n_documents]`` in ``doc_ids`` order. With ``candidates`` each
    question ranks only its pool (in pool order before sorting). Sorting is stable: ties keep
    the collection (pool) order. The run's values are strictly decreasing with the rank, so
    ``ranx`` sees exactly this order.

    >>> rank(np.array([[0.1, 0.9, 0.9]]), ["a", "b", "c"], ["q"])
    {'q': {'b': 3.0, 'c': 2.0, 'a': 1.0}}
    >>> rank(np.array([[0.1, 0.9, 0.5]]), ["a", "b", "c"], ["q"], candidates={"q": ["c", "a"]}, depth=1)
    {'q': {'c': 1.0}}
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (len(qids), len(doc_ids)):
        raise ValueError(f"scores have shape {scores.shape}, expected ({len(qids)}, {len(doc_ids)})")
    if not np.isfinite(scores).all():
        raise ValueError("scores contain non-finite values")
    run: Run = {}
    if candidates is None:
        order = rank_order(scores, axis=1)
        if depth is not None:
            order = order[:, :depth]
        ids = np.asarray(doc_ids, dtype=object)
        for i, q in enumerate(qids):
            ranked = ids[order[i]]
            n = len(ranked)
            run[q] = {d: float(n - r) for r, d in enumerate(ranked)}
        return run
    index_of = {d: i for i, d in enumerate(doc_ids)}
    for i, q in enumerate(qids):
        pool = list(candidates[q])
        try:
            cols = np.fromiter((index_of[d] for d in pool), dtype=np.int64, count=len(pool))
        except KeyError as err:
            raise KeyError(f"question {q!r}: candidate {err.args[0]!r} is not among the documents") from None
        order = rank_order(scores[i, cols])
        if depth is not None:
            order = order[:depth]
        n = len(order)
        run[q] = {pool[j]: float(n - r) for r, j in enumerate(order)}
    return run


def ranx_qrels(qrels: Mapping[str, Mapping[str, float]], threshold: float, graded: bool = False) -> dict[str, dict[str, int]]:
    """Qrels for ranx: binary (1 where grade >= ``threshold``) or graded (integer grades > 0).

    ranx casts grades to integers, so graded qrels must hold integers (they do for Cranfield
    and SciRepEval); DORIS-MAE's fractional scores are only used through the threshold.

    >>> ranx_qrels({"q": {"a": 2, "b": 0, "c": 1}}, threshold=2)
    {'q': {'a': 1}}
    >>> ranx_qrels({"q": {"a": 2, "b": 0, "c": 1}}, threshold=2, graded=True)
    {'q': {'a': 2, 'c': 1}}
    """
    out: dict[str, dict[str, int]] = {}
    for q, judged in qrels.items():
        if graded:
            bad = [g for g in judged.values() if float(g) != int(g)]
            if bad:
                raise ValueError(f"graded metrics need integer grades; question {q!r} has {bad[:3]}")
            out[q] = {d: int(g) for d, g in judged.items() if g > 0}
        else:
            out[q] = {d: 1 for d, g in judged.items() if g >= threshold}
    return out


def _ranx_scores(qrels: Mapping[str, Mapping[str, int]], run: Run, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    if not metrics:
        return {}
    per_query = ranx_per_query(qrels, run, metrics)
    return {m: {q: 100.0 * v for q, v in per_query[m].items()} for m in metrics}


def evaluate_ranking(run: Run, bench: QDocBenchmark, protocol: QDocProtocol) -> QDocResult:
    """Score a run with the protocol's metrics (ranx), per query and on average (percent).

    Questions without a relevant judged document (grade >= threshold) are left out.
    """
    binary = ranx_qrels(bench.qrels, bench.relevance_threshold)
    qids = [q for q in run if binary.get(q)]
    skipped = len(run) - len(qids)
    if not qids:
        raise ValueError(f"{bench.name}: no question of the run has a relevant judged document")
    sub_run = {q: run[q] for q in qids}
    per_query: dict[str, dict[str, float]] = {}
    if protocol.graded_metrics:
        graded = ranx_qrels({q: bench.qrels[q] for q in qids}, bench.relevance_threshold, graded=True)
        per_query.update(_ranx_scores(graded, sub_run, protocol.graded_metrics))
    per_query.update(_ranx_scores({q: binary[q] for q in qids}, sub_run, protocol.metrics))
    per_query = {m: {q: per_query[m][q] for q in qids} for m in protocol.all_metrics}
    result = QDocResult(metrics=mean_metrics(per_query), per_query=per_query, n_queries=len(qids), skipped_no_relevant=skipped)
    if protocol.breakdown is not None:
        column = protocol.breakdown
        if column not in bench.questions.column_names:
            raise ValueError(f"{bench.name}: no question column {column!r} for the breakdown")
        value_of = dict(zip(bench.questions["qid"], bench.questions[column]))
        for value in sorted({value_of[q] for q in qids}, key=str):
            members = [q for q in qids if value_of[q] == value]
            result.subsets[f"{column}={value}"] = {
                "qids": members,
                "metrics": mean_metrics({m: {q: v[q] for q in members} for m, v in per_query.items()}),
            }
    return result


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean over queries of each metric.

    >>> mean_metrics({"map": {"a": 50.0, "b": 100.0}})
    {'map': 75.0}
    """
    return {m: float(np.mean(list(v.values()))) for m, v in per_query.items()}


def evaluate_qdoc(retriever, bench: QDocBenchmark, protocol: QDocProtocol, doc_index: Any | None = None) -> QDocResult:
    """Run one retriever on one q-doc benchmark: index (unless ``doc_index`` is given), score
    every question against the collection in one call, rank, and score with the protocol.

    ``doc_index`` must come from ``retriever.index`` on ``bench.documents`` in the same order.
    ``seconds`` records ``index``, ``score`` (question encoding + scoring), ``rank_eval``.
    """
    t0 = time.perf_counter()
    if doc_index is None:
        doc_index = retriever.index(bench.documents.select_columns(["id", "title", "sentences"]).to_list())
    t1 = time.perf_counter()
    qids = list(bench.questions["qid"])
    scores = retriever.score(list(bench.questions["text"]), doc_index)
    t2 = time.perf_counter()
    run = rank(scores, list(bench.documents["id"]), qids, bench.candidates, protocol.depth)
    result = evaluate_ranking(run, bench, protocol)
    t3 = time.perf_counter()
    result.seconds = {"index": t1 - t0, "score": t2 - t1, "rank_eval": t3 - t2}
    return result


def pool_rank_changes(bench: QDocBenchmark, reference: Retriever, others: Sequence[Retriever],
                      index_cache: dict[Any, Any] | None = None, collection: str | None = None) -> pd.DataFrame:
    """For a benchmark whose questions rerank a pool (SciRepEval search): how each of ``others``
    reorders every pool relative to ``reference`` (:func:`unifar.evaluation.ranking.rank_change`
    per question), one row per (system, question), the system under its ``name``.

    It says why two systems score the same to every digit: no pair of differently judged
    candidates swapped, because the score changes (``max_shift``) stay below the gaps between
    such candidates (``min_judged_gap``). ``index_cache`` and ``collection``: the encoded
    collections an :func:`~unifar.evaluation.runner.evaluate_all` run kept (its ``index_cache``)
    and the benchmark's collection name there; systems found in it are not encoded again.
    """
    import pandas as pd

    if bench.candidates is None:
        raise ValueError(f"{bench.name}: pool_rank_changes needs a benchmark whose questions rerank candidate pools")
    docs = bench.documents.select_columns(["id", "title", "sentences"]).to_list()
    column = {d["id"]: i for i, d in enumerate(docs)}
    qids, texts = list(bench.questions["qid"]), list(bench.questions["text"])

    ids = [d["id"] for d in docs]

    def index_of(retriever: Retriever) -> Any:
        key = (retriever.index_key, collection or bench.name)
        hit = index_cache.get(key) if index_cache is not None else None
        if hit is not None and hit[0] == ids:  # the same documents in the same order
            return hit[1]
        index = retriever.index(docs)
        if index_cache is not None:
            index_cache[key] = (ids, index)
        return index

    def pools(retriever: Retriever) -> list[np.ndarray]:
        scores = np.asarray(retriever.score(texts, index_of(retriever)), dtype=np.float64)
        return [scores[i, [column[d] for d in bench.candidates[q]]] for i, q in enumerate(qids)]

    ref = pools(reference)
    grades = [np.array([bench.qrels.get(q, {}).get(d, 0) for d in bench.candidates[q]]) for q in qids]
    rows = []
    for system in others:
        for q, r, s, g in zip(qids, ref, pools(system), grades):
            rows.append({"system": system.name, "qid": q, **rank_change(r, s, g)})
    return pd.DataFrame(rows)


def rank_change_summary(changes: pd.DataFrame) -> pd.DataFrame:
    """:func:`pool_rank_changes`' rows summed up per system: ``reordered (%)``, the share of
    questions whose pool was reordered at all; ``judged pair swapped (%)``, the share in which two
    differently judged candidates swapped; ``largest shift, median``, the median over questions of
    ``max_shift``; ``smallest judged gap, median``, the median of ``min_judged_gap`` (questions
    whose candidates all have one grade left out); ``one-grade questions``, their number."""
    g = changes.groupby("system", sort=False)
    return g.agg(**{
        "questions": ("qid", "size"),
        "reordered (%)": ("reordered", lambda s: 100.0 * s.mean()),
        "judged pair swapped (%)": ("discordant_judged", lambda s: 100.0 * (s > 0).mean()),
        "largest shift, median": ("max_shift", "median"),
        "smallest judged gap, median": ("min_judged_gap", "median"),
        "one-grade questions": ("min_judged_gap", lambda s: int(s.isna().sum())),
    })


def rank_change_style(summary: pd.DataFrame) -> Styler:
    """:func:`rank_change_summary` for display: shares as whole percents, score changes and gaps
    to four digits (cosines: two digits would print them all as 0.00)."""
    return (summary.style.format("{:.4f}", subset=["largest shift, median", "smallest judged gap, median"])
            .format("{:.0f}", subset=["questions", "reordered (%)", "judged pair swapped (%)", "one-grade questions"]))
