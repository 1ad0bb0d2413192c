"""The systems compared on every benchmark, behind one interface (:class:`Retriever`), and the
lexical ones: BM25 and facet-BM25 (their fusion with a dense part: :mod:`unifar.evaluation.hybrid`).

A retriever turns a document collection into an index once (:meth:`Retriever.index`) and
scores a list of questions against the whole index at once (:meth:`Retriever.score`, a
``[n_questions, n_documents]`` array, higher = more relevant): the q-doc protocols
(:mod:`unifar.evaluation.qdoc`). Retrievers with the same :attr:`Retriever.index_key` build
identical indexes, so an evaluation driver can encode a collection once and share it. For
CSFCube (doc-doc) each retriever gives the score function of the official protocol
(:meth:`Retriever.csfcube_score_fn`, ranked by :func:`unifar.evaluation.csfcube.rank_pools`,
which also takes a retriever itself). Systems that only make sense doc-doc (the
facet-restricted query, facet-BM25, the hybrid) have :attr:`Retriever.qdoc` False.

* :class:`BM25Retriever`: BM25 (Robertson & Zaragoza, 2009) through ``bm25s`` (Lucene variant,
  k1 = 1.5, b = 0.75); the index, hence the IDF, covers every document given (for CSFCube the
  4,205 papers of the test collection). Document and CSFCube query = title + abstract
  (:func:`unifar.evaluation.texts.document_text`); q-doc query = the question. Tokens:
  lower-cased words of 2+ characters, English stop words removed, Snowball English stemming.
* :class:`FacetBM25Retriever` (CSFCube only): BM25 between the queried facet's sentences of the
  query and of each candidate (IDF over the collection's facet texts); the weak, facet-specific
  signal the offline FTUs are mined with (:mod:`unifar.construction.mining`).
* The hybrid, ``z(dense) + W z(lexical)`` over each pool, the teacher of the ``hybrid`` mining
  signal: :class:`unifar.evaluation.hybrid.HybridRetriever`.
* Mean pooling, the facet-restricted query and UniFAR: :mod:`unifar.evaluation.dense`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..facets import FACETS
from .texts import document_text, facet_query_text

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube

__all__ = [
    "ScoreFn",
    "Retriever",
    "BM25Scorer",
    "BM25Retriever",
    "FacetBM25Retriever",
]

#: score_fn(facet, qpid, cand_pids) -> scores, one per candidate, higher = more relevant
ScoreFn = Callable[[str, str, list[str]], Sequence[float] | np.ndarray]


class Retriever(ABC):
    """A system that indexes a document collection and scores questions against it."""

    #: short key used in results (``bm25``, ``mean``, ``facet-query``, ``unifar-untrained``, ...)
    name: str = ""
    #: human-readable label for tables
    label: str = ""
    #: False for doc-doc-only systems, which the q-doc benchmarks skip
    qdoc: bool = True

    @property
    @abstractmethod
    def index_key(self) -> str:
        """Retrievers with equal keys build identical indexes of the same collection."""

    @abstractmethod
    def index(self, documents: Sequence[Mapping[str, Any]]) -> Any:
        """Index documents ``{"id", "title", "sentences"}`` (in the given order)."""

    @abstractmethod
    def score(self, questions: Sequence[str], index: Any) -> np.ndarray:
        """Scores ``[len(questions), n_documents]`` (float64), higher = more relevant."""

    @abstractmethod
    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """The CSFCube score function ``(facet, qpid, cands) -> scores`` (:data:`ScoreFn`).

        ``cache`` (a dict shared between retrievers of one run) keeps what a retriever built of
        the collection under ``(index_key, "csfcube")``, so that a second retriever with the
        same key (the facet-restricted query after mean pooling) reuses it."""

    def describe(self) -> dict[str, Any]:
        """Facts about the system for the run's metadata."""
        return {"name": self.name, "label": self.label}


def cached(cache: dict | None, key: Hashable, build: Callable[[], Any]) -> Any:
    """``cache[key]``, built by ``build()`` and stored on the first call (no cache: built).

    >>> c = {}; cached(c, "k", lambda: 1), cached(c, "k", lambda: 2), cached(None, "k", lambda: 3)
    (1, 1, 3)
    """
    if cache is not None and key in cache:
        return cache[key]
    value = build()
    if cache is not None:
        cache[key] = value
    return value


def _doc_doc_only(system: str) -> ValueError:
    return ValueError(f"the {system} applies to CSFCube (doc-doc) only")


class BM25Scorer:
    """BM25 over a fixed corpus ``{pid: text}``; :meth:`scores` rates chosen documents for a query."""

    def __init__(self, corpus: Mapping[str, str], k1: float = 1.5, b: float = 0.75, stem: bool = True) -> None:
        import bm25s

        self._bm25s = bm25s
        self.pids = list(corpus)
        self.index_of = {p: i for i, p in enumerate(self.pids)}
        self.stemmer = None
        if stem:
            try:
                import snowballstemmer
            except ModuleNotFoundError:
                raise ModuleNotFoundError(
                    "BM25 stemming needs the package 'snowballstemmer' (pip install snowballstemmer), "
                    "or pass stem=False"
                ) from None
            self.stemmer = snowballstemmer.stemmer("english")
        tokens = bm25s.tokenize(list(corpus.values()), stopwords="en", stemmer=self.stemmer, return_ids=True, show_progress=False)
        self._vocab = tokens.vocab
        # No indexable word in any document (e.g. no sentence of a search corpus labelled with
        # this facet): bm25s cannot index that, and every score is 0 (see :meth:`scores`).
        self.retriever: Any = None
        if self._vocab:
            self.retriever = bm25s.BM25(k1=k1, b=b)
            self.retriever.index(tokens, show_progress=False)

    def scores(self, query: str, pids: Sequence[str]) -> np.ndarray:
        """BM25 scores of ``query`` against the corpus documents ``pids`` (same order)."""
        words = self._bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, return_ids=False, show_progress=False)[0]
        words = [w for w in words if w in self._vocab]  # unseen words score 0 anyway
        all_scores = self.retriever.get_scores(words) if words else np.zeros(len(self.pids))
        try:
            idx = np.fromiter((self.index_of[p] for p in pids), dtype=np.int64, count=len(pids))
        except KeyError as err:
            raise KeyError(f"document {err.args[0]!r} is not in the BM25 corpus") from None
        return np.asarray(all_scores, dtype=np.float64)[idx]


class BM25Retriever(Retriever):
    """BM25 of the title + abstract (:class:`BM25Scorer`)."""

    def __init__(self, stem: bool = True, name: str = "bm25") -> None:
        self.stem = stem
        self.name = name
        self.label = "BM25"

    @property
    def index_key(self) -> str:
        return f"bm25:stem={self.stem}"

    def index(self, documents: Sequence[Mapping[str, Any]]) -> BM25Scorer:
        corpus = {str(i): document_text(d, " ") for i, d in enumerate(documents)}
        return BM25Scorer(corpus, stem=self.stem)

    def score(self, questions: Sequence[str], index: BM25Scorer) -> np.ndarray:
        out = np.empty((len(questions), len(index.pids)), dtype=np.float64)
        for i, q in enumerate(questions):  # one vectorised pass over the collection per question
            out[i] = index.scores(q, index.pids)
        return out

    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """The query paper's title + abstract against each candidate's; IDF over the collection."""
        def build() -> BM25Scorer:
            return BM25Scorer({p: document_text(data.papers[p], " ") for p in data.pool_pids()}, stem=self.stem)

        scorer = cached(cache, (self.index_key, "csfcube"), build)
        query_text = {q: document_text(data.papers[q], " ") for f in data.anns for q in data.anns[f]}

        def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
            return scorer.scores(query_text[qpid], cands)

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "k1": 1.5, "b": 0.75, "stemming": self.stem}


class FacetBM25Retriever(Retriever):
    """BM25 restricted to the queried facet's sentences on both sides (CSFCube only).

    Candidates without a sentence of the facet score 0; so does a query without one.
    """

    qdoc = False

    def __init__(self, stem: bool = True, name: str = "facet-bm25") -> None:
        self.stem = stem
        self.name = name
        self.label = "facet-BM25"

    @property
    def index_key(self) -> str:
        return f"facet-bm25:stem={self.stem}"

    def index(self, documents: Sequence[Mapping[str, Any]]) -> Any:
        raise _doc_doc_only("facet-BM25")

    def score(self, questions: Sequence[str], index: Any) -> np.ndarray:
        raise _doc_doc_only("facet-BM25")

    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        def build() -> dict[str, BM25Scorer]:
            pids = data.pool_pids()
            return {f: BM25Scorer({p: facet_query_text(data.papers[p], f, " ", title=False) or "" for p in pids},
                                  stem=self.stem) for f in FACETS}

        scorers = cached(cache, (self.index_key, "csfcube"), build)

        def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
            query = facet_query_text(data.papers[qpid], facet, " ", title=False)
            return scorers[facet].scores(query, cands) if query.strip() else np.zeros(len(cands))

        return score

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "k1": 1.5, "b": 0.75, "stemming": self.stem}
