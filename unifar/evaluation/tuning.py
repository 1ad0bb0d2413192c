"""How every tuned weight is chosen: on a dev split only, never on what is reported.

* :func:`choose_weights`: the grid search, which sees only a dev score function;
* CSFCube: :func:`csfcube_dev_map`, aggregated MAP over the fold1_dev query facets alone
  (fold1_dev *is* fold2_test, so the runner also reports fold1_test, the fold no tuning saw), and
  :func:`choose_on_csfcube_dev`;
* q-doc: :func:`qdoc_dev_half`, a benchmark's dev half (SciRepEval search's train half,
  PubMedQA's 500 training questions against the same 1,000 abstracts; Cranfield, DORIS-MAE and
  LitSearch have none), and :func:`choose_on_qdoc_dev`, which ranks it under the benchmark's
  protocol and headline metric.

The hybrid systems (:class:`unifar.evaluation.hybrid.FusedRetriever`) and FLeW's retriever
(:class:`unifar.flew.retriever.FLeWRetriever`) choose their weights here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..datasets.pubmedqa import load_pubmedqa
from ..datasets.readers import resolve_dir
from ..datasets.schema import QDocBenchmark
from ..datasets.scirepeval import load_scirepeval_search, split_scirepeval_search
from ..facets import FACETS
from .csfcube import csfcube_per_query, rank_pools
from .qdoc import evaluate_ranking, rank
from .report import HEADLINE_METRICS
from .retrievers import ScoreFn

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube
    from .benchmarks import LoadedBenchmark

__all__ = [
    "choose_weights", "csfcube_dev_map", "choose_on_csfcube_dev", "qdoc_dev_half", "choose_on_qdoc_dev",
]


def choose_weights(
    dev_score: Callable[[tuple[float, ...]], float], grid: Sequence[tuple[float, ...]]
) -> tuple[tuple[float, ...], list[dict[str, Any]]]:
    """The grid search: ``dev_score(weights)`` (a dev-split metric, higher = better) for every
    weight vector of ``grid``; returns the best vector (ties: the earliest in ``grid``) and the
    curve ``[{"weights": [...], "dev": value}, ...]``. It sees only what ``dev_score`` reads,
    so the reported split can take no part in the choice.

    >>> best, curve = choose_weights(lambda w: -abs(w[1] - 0.5), [(1.0, 0.0), (1.0, 0.25), (1.0, 0.5)])
    >>> best, len(curve), curve[0]
    ((1.0, 0.5), 3, {'weights': [1.0, 0.0], 'dev': -0.5})
    """
    if not grid:
        raise ValueError("the weight grid is empty")
    curve = [{"weights": list(w), "dev": float(dev_score(w))} for w in grid]
    best = max(range(len(grid)), key=lambda i: (curve[i]["dev"], -i))
    return tuple(grid[best]), curve


def csfcube_dev_map(score_fn: ScoreFn, data: CSFCube, exclude_query: bool = False) -> float:
    """Aggregated MAP (percent) of ``score_fn`` over CSFCube's fold1_dev query facets, ranking
    only their pools: no other query's judgements are read (the tuning number)."""
    dev_ids = list(data.splits["all"]["fold1_dev"])
    wanted = set(dev_ids)
    anns = {f: {q: v for q, v in data.anns[f].items() if f"{q}_{f}" in wanted} for f in FACETS}
    sub = type(data)(data.papers, anns, data.splits, data.queries, data.root)
    per = csfcube_per_query(rank_pools(score_fn, sub, exclude_query=exclude_query), sub)
    ap = {f"{q}_{f}": m["map"] for f, per_q in per.items() for q, m in per_q.items()}
    return 100.0 * float(np.mean([ap[i] for i in dev_ids]))


def choose_on_csfcube_dev(
    with_weights: Callable[[tuple[float, ...]], ScoreFn],
    data: CSFCube,
    grid: Sequence[tuple[float, ...]],
    exclude_query: bool = False,
    record_curve: bool = True,
) -> dict[str, Any]:
    """The weights of ``grid`` whose score function ``with_weights(w)`` has the best
    :func:`csfcube_dev_map` (fold1_dev only). Returns ``{"weights", "chosen_on", "dev_curve"}``
    (the curve left empty when ``record_curve`` is False: fixed weights, nothing tuned)."""
    best, curve = choose_weights(
        lambda w: csfcube_dev_map(with_weights(w), data, exclude_query), grid
    )
    return {
        "weights": list(best),
        "chosen_on": "csfcube fold1_dev, all/map",
        "dev_curve": curve if record_curve else [],
    }


def qdoc_dev_half(name: str, options: Mapping[str, Any]) -> QDocBenchmark | None:
    """The dev half of a q-doc benchmark (a :class:`~unifar.datasets.schema.QDocBenchmark`), or
    None when it has none: ``scirepeval`` -> the train half of the search sample (when the test
    half is reported); ``pubmedqa`` -> the 500 PQA-L training questions against all 1,000
    abstracts (the test collection); ``cranfield``, DORIS-MAE, LitSearch -> None."""
    if name == "scirepeval" and options.get("scirepeval_part", "test") == "test":
        root = resolve_dir(options.get("scirepeval_dir"), "scirepeval_samples")
        return split_scirepeval_search(load_scirepeval_search(root), "train")
    if name == "pubmedqa":
        full = load_pubmedqa(resolve_dir(options.get("pubmedqa_dir"), "pubmedqa_pqal"))
        questions = full.questions.select(
            [i for i, s in enumerate(full.questions["split"]) if s == "train"]
        )
        qids = list(questions["qid"])
        return QDocBenchmark(
            name="pubmedqa-train",
            documents=full.documents,
            questions=questions,
            qrels={q: full.qrels[q] for q in qids},
            candidates=None,
            relevance_threshold=full.relevance_threshold,
            stats=dict(full.stats),
        )
    return None


def choose_on_qdoc_dev(
    dev: QDocBenchmark,
    benchmark: LoadedBenchmark,
    scores: Callable[[tuple[float, ...]], np.ndarray],
    grid: Sequence[tuple[float, ...]],
) -> dict[str, Any]:
    """The weights of ``grid`` that score best on a q-doc dev half ``dev``
    (:func:`qdoc_dev_half`), by the headline metric of ``benchmark`` (a
    :class:`~unifar.evaluation.benchmarks.LoadedBenchmark`) under its protocol. ``scores(w)``:
    the ``[n_dev_questions, n_dev_documents]`` scores of weights ``w``, in ``dev``'s question and
    document order. Returns ``{"weights", "chosen_on", "dev_curve"}`` (what
    :class:`~unifar.evaluation.hybrid.FusedRetriever` and
    :class:`~unifar.flew.retriever.FLeWRetriever` record)."""
    protocol = benchmark.protocol
    headline = HEADLINE_METRICS.get(benchmark.name, ("",))[0]
    metric = headline if headline in protocol.all_metrics else protocol.all_metrics[0]
    doc_ids, qids = list(dev.documents["id"]), list(dev.questions["qid"])

    def dev_score(w: tuple[float, ...]) -> float:
        run = rank(scores(w), doc_ids, qids, dev.candidates, protocol.depth)
        return evaluate_ranking(run, dev, protocol).metrics[metric]

    best, curve = choose_weights(dev_score, grid)
    return {
        "weights": list(best),
        "chosen_on": f"{dev.name} ({len(qids)} questions), {metric}",
        "dev_curve": curve,
    }
