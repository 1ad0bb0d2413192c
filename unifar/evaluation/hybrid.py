"""Facet-aware hybrid retrieval as a system of the evaluation runner: dense and lexical scores
fused per query, the fusion weights chosen on a dev split only.

A :class:`FusedRetriever` combines the scores of several retrievers over the same candidates:

* **z-score fusion** (default; :func:`unifar.scoring.zscore_fusion`, the teacher of chapter 3's
  ``hybrid`` mining signal): ``sum_k w_k z(s_k)``, each score list z-normalised over the
  candidates (a CSFCube pool, or a question's whole collection on a q-doc benchmark);
* **rank fusion** (:func:`rank_fusion`, weighted reciprocal rank fusion).

The weights are written as everywhere else in unifar (``--hybrid W``, :meth:`Index.search
<unifar.search.corpus_index.Index.search>`, :class:`HybridRetriever`,
chapter 3's mining teacher): **relative to the first (dense) part, which keeps weight 1**. Two
parts are ``z(dense) + W z(lexical)``: ``W = 0`` ranks by the dense part alone, and chapter 3's
teacher is ``W = 0.25``; n parts are ``(1, w_2, ..., w_n)``. The grid (:func:`weight_grid`)
is the simplex of mixing shares in multiples of a step, each point divided by its dense share
(:func:`relative_weights`), so ``W`` runs from 0 to ``1/step - 1``; the lexical part alone is
its own system (``bm25``, ``facet-bm25``). They are chosen on a dev split, never on what is
reported (:mod:`unifar.evaluation.tuning`):

* CSFCube: aggregated MAP over the fold1_dev query facets only; the runner then reports the
  2-fold test score, and fold1_test alone is the estimate no tuning saw (fold1_dev *is*
  fold2_test; :func:`unifar.evaluation.report.compare_systems` with ``fold=``);
* q-doc: the benchmark's headline metric (:data:`unifar.evaluation.report.HEADLINE_METRICS`) on
  its dev half: SciRepEval search's train half, PubMedQA's 500 training questions against the
  same 1,000 abstracts. Cranfield (and DORIS-MAE, LitSearch) has none: the weights are then
  :data:`DEFAULT_WEIGHTS` (every part weight 1), recorded as ``"equal (no dev half)"``.

The chosen weights and the whole dev curve of every benchmark are in :meth:`FusedRetriever.describe`
(the result's ``meta.systems``). The systems built from these parts (``hybrid-mean``,
``hybrid-mean-labeller``, ``hybrid-unifar``, ``hybrid-mean-unifar``) are named in
:mod:`unifar.evaluation.systems`; the facet-BM25 part with a labeller's sentence labels (what
a user's corpus gets, where CSFCube ships its own) is
:class:`unifar.evaluation.labelled_bm25.LabelledFacetBM25Retriever`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..scoring import zscore_fusion
from .labelled_bm25 import LabelledFacetBM25Retriever
from .ranking import rank_order
from .report import HEADLINE_METRICS, fold_strata
from .retrievers import Retriever, ScoreFn, cached
from .tuning import choose_on_csfcube_dev, choose_on_qdoc_dev, qdoc_dev_half

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube
    from ..datasets.schema import QDocBenchmark
    from .benchmarks import LoadedBenchmark

__all__ = [
    "DEFAULT_WEIGHTS",
    "FUSIONS",
    "FusedRetriever",
    "HybridRetriever",
    "fuse",
    "hybrid_study_table",
    "hybrid_system",
    "hybrid_table",
    "rank_fusion",
    "relative_weights",
    "weight_grid",
]

FUSIONS = ("zscore", "rank")
#: the weights of a benchmark without a dev half: every part counts the same (no tuning)
DEFAULT_WEIGHTS = "equal"
RRF_K = 60  # Cormack et al. (2009)'s constant


def relative_weights(weights: Sequence[float]) -> tuple[float, ...]:
    """Fusion weights written relative to the first (dense) part, which gets weight 1 (the
    convention of the module docstring); z-score and rank fusion rank the same under any positive
    multiple of a weight vector. Also reads the results of earlier versions, which wrote shares
    summing to 1: ``(0.75, 0.25)`` is ``W = 1/3``.

    >>> relative_weights((0.75, 0.25)), relative_weights((1.0, 0.25)), relative_weights((0.5, 0.1, 0.4))
    ((1.0, 0.3333333333), (1.0, 0.25), (1.0, 0.2, 0.8))
    """
    w = [float(x) for x in weights]
    if not w or not all(np.isfinite(x) and x >= 0 for x in w) or w[0] <= 0:
        raise ValueError(
            f"fusion weights need a positive first (dense) part and finite weights >= 0, got {w}"
        )
    return tuple(round(x / w[0], 10) for x in w)


def weight_grid(n_parts: int, step: float = 0.05) -> list[tuple[float, ...]]:
    """The tuning grid: every mix of ``n_parts`` shares in multiples of ``step`` whose first
    (dense) share is positive, written relative to it (:func:`relative_weights`). Ordered so that
    the first part's share falls (then the second's, ...): ties in
    :func:`~unifar.evaluation.tuning.choose_weights` go to the vector that leans most on the
    dense part.

    >>> weight_grid(2, 0.25)
    [(1.0, 0.0), (1.0, 0.3333333333), (1.0, 1.0), (1.0, 3.0)]
    >>> len(weight_grid(3, 0.05)), weight_grid(3, 0.5)[:3]
    (210, [(1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (1.0, 0.0, 1.0)])
    """
    n = round(1 / step)
    if n_parts < 1 or not np.isclose(n * step, 1.0):
        raise ValueError(f"need at least one part and a step dividing 1, got {n_parts}, {step}")
    points = [c for c in itertools.product(range(n, 0, -1), *[range(n, -1, -1)] * (n_parts - 1))
              if sum(c) == n]
    return [relative_weights(c) for c in points]


def rank_fusion(
    scores: Sequence[np.ndarray], weights: Sequence[float], k: int = RRF_K
) -> np.ndarray:
    r"""Weighted reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009) of score lists
    over the same candidates:

    .. math::
        s(d) = \sum_k \frac{w_k}{k_0 + r_k(d)}

    with :math:`r_k(d)` the 1-based rank of candidate :math:`d` under list :math:`k` (ties in input order,
    :func:`~unifar.evaluation.ranking.rank_order`) and :math:`k_0` = ``k`` (60 in the paper). Inputs:
    ``scores``, lists of shape ``[n]``; ``weights``, one per list. Output ``[n]``, float64.
    Only ranks count, so no score scale matters.

    >>> lists = [np.array([0.9, 0.8, 0.7]), np.array([0.0, 0.0, 6.0])]
    >>> rank_fusion(lists, [1.0, 1.0]).round(6).tolist()
    [0.032522, 0.032002, 0.032266]
    """
    if len(scores) != len(weights) or not scores:
        raise ValueError(
            f"need one weight per score list, got {len(scores)} lists and {len(weights)} weights"
        )
    out = np.zeros(np.asarray(scores[0]).shape, dtype=np.float64)
    for s, w in zip(scores, weights):
        ranks = np.empty(out.shape, dtype=np.float64)
        ranks[rank_order(np.asarray(s, dtype=np.float64))] = np.arange(1, out.size + 1)
        out += w / (k + ranks)
    return out


def fuse(
    scores: Sequence[np.ndarray], weights: Sequence[float], fusion: str = "zscore"
) -> np.ndarray:
    """One candidate list's fused scores (:func:`unifar.scoring.zscore_fusion` or
    :func:`rank_fusion`)."""
    if fusion == "zscore":
        return zscore_fusion(scores, weights)
    if fusion == "rank":
        return rank_fusion(scores, weights)
    raise ValueError(f"unknown fusion {fusion!r}; choose from {FUSIONS}")


class _Memo:
    """Each part's scores of one CSFCube pool, computed once for every weight vector tried."""

    def __init__(self, part_fns: Sequence[ScoreFn]) -> None:
        self.part_fns, self.rows = list(part_fns), {}

    def __call__(self, facet: str, qpid: str, cands: list[str]) -> list[np.ndarray]:
        key = (facet, qpid, tuple(cands))
        if key not in self.rows:
            self.rows[key] = [
                np.asarray(fn(facet, qpid, cands), dtype=np.float64) for fn in self.part_fns
            ]
        return self.rows[key]


class FusedRetriever(Retriever):
    """Fused scores of several retrievers (module docstring), weights chosen on a dev split.

    ``csfcube_parts``: the parts on CSFCube (e.g. mean pooling and facet-BM25); ``qdoc_parts``:
    the parts on q-doc benchmarks (e.g. mean pooling and BM25 over the whole text), or None for a
    doc-doc-only system. ``weights``: fixed weights (no tuning; relative to the first part, as
    everywhere), or None to choose them on each benchmark's dev split from :func:`weight_grid`
    (``step``). The runner calls :meth:`prepare`
    before each benchmark; used alone, CSFCube is tuned on fold1_dev when first scored, and a
    q-doc benchmark needs :meth:`prepare` (or fixed weights).
    """

    def __init__(
        self,
        name: str,
        label: str,
        csfcube_parts: Sequence[Retriever],
        qdoc_parts: Sequence[Retriever] | None = None,
        fusion: str = "zscore",
        weights: Sequence[float] | None = None,
        step: float = 0.05,
    ) -> None:
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; choose from {FUSIONS}")
        if qdoc_parts is not None and len(qdoc_parts) != len(csfcube_parts):
            raise ValueError(
                "csfcube_parts and qdoc_parts need the same number of parts (one weight each)"
            )
        if weights is not None and len(weights) != len(csfcube_parts):
            raise ValueError(f"need {len(csfcube_parts)} weights, got {list(weights)}")
        self.name, self.label, self.fusion, self.step = name, label, fusion, step
        self.csfcube_parts, self.qdoc_parts = list(csfcube_parts), qdoc_parts and list(qdoc_parts)
        self.qdoc = qdoc_parts is not None
        self.weights = tuple(weights) if weights is not None else None
        self.choices: dict[str, dict[str, Any]] = {}  # benchmark -> weights, how chosen, dev curve
        self._active: str | None = None
        self._exclude_query = False

    @property
    def parts(self) -> list[Retriever]:
        """Every distinct part (for sharing a frozen base between UniFAR models)."""
        return list({id(p): p for p in [*self.csfcube_parts, *(self.qdoc_parts or [])]}.values())

    @property
    def index_key(self) -> str:
        parts = self.qdoc_parts or self.csfcube_parts
        return f"fused:{self.fusion}:" + "+".join(p.index_key for p in parts)

    def _grid(self) -> list[tuple[float, ...]]:  # only tuned weights have a grid
        return weight_grid(len(self.csfcube_parts), self.step)

    def _fixed(self, reason: str) -> dict[str, Any]:
        w = self.weights or tuple(1.0 for _ in self.csfcube_parts)
        return {"weights": list(w), "chosen_on": reason, "dev_curve": []}

    # -- the runner's hook ------------------------------------------------------------------------
    def prepare(
        self, benchmark: LoadedBenchmark, options: Mapping[str, Any], cache: dict | None = None
    ) -> None:
        """Choose the weights for ``benchmark``
        (a :class:`~unifar.evaluation.benchmarks.LoadedBenchmark`) on its dev split, before it
        is scored."""
        self._active = benchmark.name
        if benchmark.kind == "csfcube":
            self._exclude_query = bool(options.get("exclude_self", False))
            self.choices.pop(benchmark.name, None)  # tuned when csfcube_score_fn first runs
            return
        if self.weights is not None:
            self.choices[benchmark.name] = self._fixed("fixed")
            return
        dev = qdoc_dev_half(benchmark.name, options)
        if dev is None:
            self.choices[benchmark.name] = self._fixed(f"{DEFAULT_WEIGHTS} (no dev half)")
            return
        self.choices[benchmark.name] = self._tune_qdoc(dev, benchmark)

    def _tune_qdoc(self, dev: QDocBenchmark, benchmark: LoadedBenchmark) -> dict[str, Any]:
        index = self.index(dev.documents.select_columns(["id", "title", "sentences"]).to_list())
        parts = self._part_scores(list(dev.questions["text"]), index)
        return choose_on_qdoc_dev(dev, benchmark, lambda w: self._fuse_rows(parts, w), self._grid())

    # -- q-doc ------------------------------------------------------------------------------------
    def index(self, documents: Sequence[Mapping[str, Any]]) -> list[Any]:
        if self.qdoc_parts is None:
            raise ValueError(f"the {self.name} system applies to CSFCube (doc-doc) only")
        return [p.index(documents) for p in self.qdoc_parts]

    def _part_scores(self, questions: Sequence[str], index: Sequence[Any]) -> list[np.ndarray]:
        return [
            np.asarray(p.score(questions, i), dtype=np.float64)
            for p, i in zip(self.qdoc_parts, index)
        ]

    def _fuse_rows(self, parts: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
        # one question at a time: each row is normalised over that question's collection
        return np.stack(
            [fuse([p[i] for p in parts], weights, self.fusion) for i in range(parts[0].shape[0])]
        )

    def score(self, questions: Sequence[str], index: Sequence[Any]) -> np.ndarray:
        if self.weights is None and self.choices.get(self._active or "") is None:
            raise ValueError(
                f"{self.name}: no weights chosen for this benchmark; evaluate it through "
                "evaluate_all (which calls prepare) or give fixed weights="
            )
        w = self.weights or tuple(self.choices[self._active]["weights"])
        return self._fuse_rows(self._part_scores(questions, index), w)

    # -- CSFCube ----------------------------------------------------------------------------------
    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """The fused score function; tunes the weights on fold1_dev first
        (:func:`~unifar.evaluation.tuning.csfcube_dev_map`)."""
        memo = _Memo(
            [
                cached(
                    cache,
                    (f"{p.index_key}:score-fn", "csfcube"),
                    lambda p=p: p.csfcube_score_fn(data, cache),
                )
                for p in self.csfcube_parts
            ]
        )

        def with_weights(w: Sequence[float]) -> ScoreFn:
            return lambda facet, qpid, cands: fuse(memo(facet, qpid, cands), w, self.fusion)

        if "csfcube" not in self.choices:  # fixed weights: nothing to tune, fold1_dev unread
            self.choices["csfcube"] = (
                self._fixed("fixed") if self.weights is not None
                else choose_on_csfcube_dev(with_weights, data, self._grid(), self._exclude_query)
            )
        return with_weights(tuple(self.choices["csfcube"]["weights"]))

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "fusion": self.fusion,
            "csfcube_parts": [p.describe() for p in self.csfcube_parts],
            "qdoc_parts": [p.describe() for p in self.qdoc_parts] if self.qdoc_parts else None,
            "grid_step": None if self.weights is not None else self.step,
            "weights_by_benchmark": self.choices,
        }


class HybridRetriever(FusedRetriever):
    """``z(dense) + weight * z(lexical)`` over each CSFCube pool, the weight fixed
    (:func:`unifar.scoring.zscore_fusion`): a :class:`FusedRetriever` of two parts, doc-doc only.

    With mean pooling as ``dense`` and
    :class:`~unifar.evaluation.retrievers.FacetBM25Retriever` as ``lexical`` this is the teacher
    of the ``hybrid`` mining signal (:mod:`unifar.construction.mining`), checked on fold1_dev in
    chapter 3; there the pool is the query's dense neighbourhood instead of CSFCube's annotated
    pool.
    """

    def __init__(self, dense: Retriever, lexical: Retriever, weight: float,
                 name: str | None = None) -> None:
        label = f"hybrid ({dense.label} + {weight:g} x {lexical.label})"
        super().__init__(name or f"hybrid-{weight:g}", label, [dense, lexical], weights=(1.0, weight))
        self.dense, self.lexical, self.weight = dense, lexical, weight


def hybrid_system(
    key: str,
    part: Callable[[str], Retriever],
    labeller: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    fusion: str = "zscore",
) -> FusedRetriever:
    """The hybrid system ``key`` of :mod:`unifar.evaluation.systems` (``hybrid-mean``,
    ``hybrid-mean-labeller``, ``hybrid-unifar-trained|untrained``,
    ``hybrid-mean-unifar-trained|untrained``), its parts made by ``part(name)`` for ``mean``,
    ``unifar-trained``, ``unifar-untrained``, ``bm25`` and ``facet-bm25`` (so a part is the same
    object as the system of that name). Dense parts come first, the lexical one last."""
    dense = {
        "hybrid-mean": ["mean"],
        "hybrid-mean-labeller": ["mean"],
        "hybrid-unifar-trained": ["unifar-trained"],
        "hybrid-unifar-untrained": ["unifar-untrained"],
        "hybrid-mean-unifar-trained": ["mean", "unifar-trained"],
        "hybrid-mean-unifar-untrained": ["mean", "unifar-untrained"],
    }
    if key not in dense:
        raise ValueError(f"unknown hybrid system {key!r}; choose from {', '.join(dense)}")
    parts = [part(d) for d in dense[key]]
    if key == "hybrid-mean-labeller":
        if labeller is None:
            raise ValueError(
                "system hybrid-mean-labeller needs labeller=: chapter 2's sentence labeller folder"
            )

        facet, qdoc = LabelledFacetBM25Retriever(labeller, cache_dir), None
    else:
        facet, qdoc = part("facet-bm25"), [*parts, part("bm25")]
    label = f"hybrid ({' + '.join(p.label for p in parts)} + {facet.label}" + (
        "; BM25 on q-doc)" if qdoc else ")"
    )
    return FusedRetriever(key, label, [*parts, facet], qdoc, fusion=fusion)


def hybrid_study_table(records: Mapping[str, Mapping[str, Any]]) -> Any:
    """The hybrid benchmark study's CSFCube rows (``benchmarks/studies/hybrid_eval.py``, whose
    records chapter 5 shows): one row per (base, system) with CSFCube MAP and NDCG%20 (test),
    fold1_test MAP and the fused weight ``W`` chosen on fold1_dev (relative to the dense part;
    :func:`relative_weights` also reads older records' shares). ``records``: ``{base: record}``.

    >>> rec = {"summary": {"csfcube": {"hybrid-mean": {"map": 42.8, "ndcg%20": 63.0,
    ...                                                "fold1_test map": 41.0, "weights": [0.8, 0.2]}}}}
    >>> hybrid_study_table({"minilm": rec}).loc[("minilm", "hybrid-mean")].tolist()
    [42.8, 63.0, 41.0, 0.25]
    """
    import pandas as pd

    table = {}
    for base, record in records.items():
        for run in record.get("runs", [record]):
            for system, v in run["summary"].get("csfcube", {}).items():
                table[(base, system)] = {"CSFCube MAP": v["map"], "NDCG%20": v["ndcg%20"],
                                         "fold1_test MAP": v["fold1_test map"],
                                         "W": relative_weights(v["weights"])[-1] if v.get("weights") else None}
    return pd.DataFrame(table).T


def hybrid_table(result: Mapping[str, Any]) -> Any:
    """An evaluation result's systems (:func:`unifar.evaluation.runner.evaluate_all`) as chapter 5
    shows its hybrids: CSFCube MAP (2-fold test) and fold1_test MAP, the weight ``W`` chosen on
    fold1_dev (:func:`relative_weights`), and the headline metric of each q-doc benchmark
    (:data:`unifar.evaluation.report.HEADLINE_METRICS`); one row per system."""
    import pandas as pd

    rows = {}
    cs = result["benchmarks"].get("csfcube")
    for name, described in result["meta"]["systems"].items():
        row = {}
        if cs and name in cs["systems"]:
            s, folds = cs["systems"][name], fold_strata(cs, "all/map")
            row |= {"CSFCube MAP": s["metrics"]["all/map"],
                    "fold1_test MAP": np.mean([s["per_query"]["all/map"][i] for i in folds["fold1_test"]])}
        chosen = described.get("weights_by_benchmark", {})
        if "csfcube" in chosen:
            row["W (fold1_dev)"] = relative_weights(chosen["csfcube"]["weights"])[-1]
        for b in ("scirepeval", "cranfield", "pubmedqa"):
            if b in result["benchmarks"] and name in result["benchmarks"][b]["systems"]:
                m = HEADLINE_METRICS[b][0]
                row[f"{b} {m}"] = result["benchmarks"][b]["systems"][name]["metrics"][m]
        rows[name] = row
    return pd.DataFrame(rows).T
