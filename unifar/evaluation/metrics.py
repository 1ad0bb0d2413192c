"""Ranking metrics. The CSFCube quirks are written by hand; standard metrics come from ``ranx``.

CSFCube (Mysore et al., 2021; official ``eval_scripts/ranking_eval.py`` and ``rank_metrics.py``
of GitHub ``iesl/CSFCube``, the latter from B. White's ``rank_metrics`` gist) scores a ranked
list by the adjudicated grades (0-3) of its candidates, in rank order:

* AP: binary relevance ``grade >= 2``; AP = mean over the relevant ranks k of precision@k.
  The denominator is the number of relevant items *in the ranked list* (0 when there are none).
* NDCG%20: NDCG cut at ``k = int(0.2 * len(ranked list))``, linear gain (the raw grade),
  discount ``[1, 1, 1/log2(3), 1/log2(4), ...]`` (``dcg_at_k(..., method=0)``: the first two ranks
  undiscounted), the ideal DCG taken from the same list's grades sorted in decreasing order.
* Test score: mean of the per-fold means over ``fold1_test`` and ``fold2_test``; dev score: the
  mean over ``fold1_dev`` only (:func:`fold_mean`).

The official script calls ``np.asfarray``, removed in NumPy 2; these functions do not.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "RELEVANCE_THRESHOLD",
    "average_precision",
    "csfcube_query_metrics",
    "dcg_at_k",
    "fixed_width_ids",
    "fold_mean",
    "ndcg_at_k",
    "ndcg_pct",
    "ranx_per_query",
]

RELEVANCE_THRESHOLD = 2  # CSFCube: adjudicated grade >= 2 counts as relevant


def average_precision(grades: Sequence[float] | np.ndarray, threshold: float = RELEVANCE_THRESHOLD) -> float:
    """Average precision of a ranked list of grades, relevant meaning ``grade >= threshold``.

    AP = (1/R) * sum_{k : rel_k} precision@k, R = number of relevant items in the list
    (CSFCube's ``rank_metrics.average_precision``); 0.0 when the list holds no relevant item.

    >>> average_precision([3, 0, 2, 1, 0, 2])
    0.7222222222222222
    >>> average_precision([1, 1, 0])
    0.0
    >>> average_precision([1, 0, 1], threshold=1)
    0.8333333333333333
    """
    rel = np.asarray(grades, dtype=np.float64) >= threshold
    hits = np.flatnonzero(rel)
    if hits.size == 0:
        return 0.0
    precision_at_hits = np.arange(1, hits.size + 1) / (hits + 1.0)
    return float(np.mean(precision_at_hits))


def dcg_at_k(grades: Sequence[float] | np.ndarray, k: int) -> float:
    """DCG@k with linear gain and CSFCube's discount ``[1, 1, 1/log2(3), 1/log2(4), ...]``.

    DCG@k = g_1 + sum_{i=2..k} g_i / log2(i)  (``rank_metrics.dcg_at_k(r, k, method=0)``).

    >>> dcg_at_k([3, 2, 3, 0, 0, 1, 2, 2, 3, 0], 2)
    5.0
    >>> round(dcg_at_k([3, 2, 3, 0, 0, 1, 2, 2, 3, 0], 10), 6)
    9.605118
    """
    g = np.asarray(grades, dtype=np.float64)[: max(int(k), 0)]
    if g.size == 0:
        return 0.0
    return float(g[0] + np.sum(g[1:] / np.log2(np.arange(2, g.size + 1))))


def ndcg_at_k(grades: Sequence[float] | np.ndarray, k: int) -> float:
    """NDCG@k = DCG@k(list) / DCG@k(list sorted by decreasing grade); 0.0 if the ideal is 0.

    >>> ndcg_at_k([2, 1, 2, 0], 4)
    0.9203032077642922
    >>> ndcg_at_k([0, 0, 1], 0)
    0.0
    """
    ideal = dcg_at_k(np.sort(np.asarray(grades, dtype=np.float64))[::-1], k)
    if ideal == 0.0:
        return 0.0
    return dcg_at_k(grades, k) / ideal


def ndcg_pct(grades: Sequence[float] | np.ndarray, fraction: float = 0.20) -> float:
    """CSFCube's NDCG%20: NDCG cut at ``int(fraction * len(grades))`` (ranking_eval.py).

    >>> ndcg_pct([0, 2, 3, 0, 1, 0, 0, 0, 0, 0])   # k = 2: (0 + 2) / (3 + 2)
    0.4
    >>> ndcg_pct([3, 2, 1, 0])                     # k = int(0.8) = 0
    0.0
    """
    return ndcg_at_k(grades, int(fraction * len(grades)))


def csfcube_query_metrics(grades: Sequence[float] | np.ndarray) -> dict[str, float]:
    """The two CSFCube figures of one ranked list: ``{"map": AP, "ndcg%20": NDCG%20}`` (fractions).

    >>> csfcube_query_metrics([0, 2, 3, 0, 1, 0, 0, 0, 0, 0])
    {'map': 0.5833333333333333, 'ndcg%20': 0.4}
    """
    return {"map": average_precision(grades), "ndcg%20": ndcg_pct(grades)}


def fold_mean(per_query: Mapping[str, float], folds: Mapping[str, Sequence[str]], split: str = "test") -> float:
    """CSFCube's cross-validated aggregate of per-query values.

    ``split="test"``: mean( mean over fold1_test, mean over fold2_test ) (the reported number);
    ``split="dev"``: mean over fold1_dev only (for tuning; both dev folds would equal test).
    ``folds`` is one entry of ``evaluation_splits.json``; ``per_query`` is keyed by its ids.

    >>> fold_mean({"a": 1.0, "b": 0.0, "c": 0.0}, {"fold1_test": ["a"], "fold2_test": ["b", "c"]})
    0.5
    >>> fold_mean({"a": 1.0, "b": 0.0}, {"fold1_dev": ["a", "b"]}, split="dev")
    0.5
    """
    if split == "test":
        names = ("fold1_test", "fold2_test")
    elif split == "dev":
        names = ("fold1_dev",)
    else:
        raise ValueError(f"split must be 'test' or 'dev', got {split!r}")
    means = []
    for name in names:
        if name not in folds:
            raise KeyError(f"evaluation split lacks {name!r}")
        ids = list(folds[name])
        missing = [i for i in ids if i not in per_query]
        if missing:
            raise KeyError(f"{name}: no value for {len(missing)} queries, e.g. {missing[:3]}")
        means.append(float(np.mean([per_query[i] for i in ids])))
    return float(np.mean(means))


#: digits of the document ids handed to ranx (:func:`fixed_width_ids`)
ID_WIDTH = 12


def fixed_width_ids(doc_ids: Sequence[str]) -> dict[str, str]:
    """Each distinct document id mapped to a zero-padded number of :data:`ID_WIDTH` digits, in the
    ids' sorted order (so that any tie broken by id order is broken the same way).

    ranx stores a run's document ids as a numpy ``<U{longest id}`` array and its numba kernels
    are compiled per array type: every new id length cost 25-40 s of compilation in each
    process (about a minute of chapter 5, measured with py-spy). One width compiles once and
    numba's on-disk cache serves every later process.

    >>> fixed_width_ids(["b", "a10", "b"])
    {'a10': '000000000000', 'b': '000000000001'}
    """
    distinct = sorted(set(doc_ids))
    if len(distinct) >= 10**ID_WIDTH:
        raise ValueError(f"{len(distinct)} document ids: more than {ID_WIDTH} digits can number")
    return {d: f"{i:0{ID_WIDTH}d}" for i, d in enumerate(distinct)}


def ranx_per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str] = ("map-l2",),
) -> dict[str, dict[str, float]]:
    """Per-query values of standard metrics computed by ``ranx`` (``"map-l2"``: AP, relevant =
    grade >= 2; ranx divides by the relevant items in ``qrels``). Returns ``{metric: {qid: v}}``.
    """
    from ranx import Qrels, Run, evaluate  # imported lazily: numba start-up takes seconds

    # A Run object keeps the per-query scores keyed by query id (``run.scores``); a plain dict
    # with return_mean=False returns a bare array (and ranx 0.3.21 mislabels "<metric>-l<N>").
    code = fixed_width_ids([d for ranking in (*run.values(), *qrels.values()) for d in ranking])
    run_obj = Run({q: {code[d]: s for d, s in ranking.items()} for q, ranking in run.items()})
    with warnings.catch_warnings():
        # ranx's numba kernels warn about a uint64 -> int64 cast (harmless: counts, not scores)
        # when they compile, i.e. only in a fresh environment; the stray stderr line made
        # notebook outputs depend on the state of numba's cache.
        warnings.filterwarnings("ignore", message="unsafe cast from uint64 to int64")
        evaluate(Qrels({q: {code[d]: g for d, g in rel.items()} for q, rel in qrels.items()}), run_obj, list(metrics))
    return {m: {q: float(v) for q, v in run_obj.scores[m].items()} for m in metrics}
