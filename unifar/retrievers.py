"""The systems compared on every benchmark, behind one interface (:class:`Retriever`).

A retriever turns a document collection into an index once (:meth:`Retriever.index`) and
scores a list of questions against the whole index at once (:meth:`Retriever.score`, a
``[n_questions, n_documents]`` array, higher = more relevant). Retrievers with the same
:attr:`Retriever.index_key` build identical indexes, so an evaluation driver can encode a
collection once and share it (mean pooling and the facet-restricted query share one).
For CSFCube (doc-doc) each retriever also provides the score function of the official protocol
(:meth:`Retriever.csfcube_score_fn`, see :mod:`unifar.evaluate`).

* :class:`BM25Retriever`: BM25 (``bm25s``, k1 = 1.5, b = 0.75, IDF over the collection given);
  document = title + abstract, query = the question.
* :class:`MeanPoolingRetriever`: the base encoder, mean pooling, cosine; document text =
  ``title + sep_token + abstract`` (only the abstract when there is no title, as in PubMedQA);
  question = its text. With ``facet_query`` (CSFCube only) the query paper is reduced to its
  title + the queried facet's sentences.
* :class:`UniFARRetriever`: facet embeddings; q-doc relevance = the mean of the diagonal of the
  facet similarity matrix, ``(1/F) sum_f cos(e_q^(f), e_d^(f))`` (paper section 5.1 for
  DORIS-MAE and appendix E for LitSearch: "averaging the diagonal entries"), one matrix product
  of the concatenated L2-normalised facet vectors; doc-doc facet f = ``M(f, f)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "Retriever",
    "BM25Retriever",
    "MeanPoolingRetriever",
    "UniFARRetriever",
    "qdoc_document_text",
]

QUESTION_CHUNK = 256  # questions scored per matrix product (bounds memory on large collections)


def qdoc_document_text(doc: Mapping[str, Any], sep: str) -> str:
    """``title + sep + abstract``, or the abstract alone when the title is empty.

    >>> qdoc_document_text({"title": "T", "sentences": ["A.", "B."]}, "[SEP]")
    'T[SEP]A. B.'
    >>> qdoc_document_text({"title": "", "sentences": ["A.", "B."]}, "[SEP]")
    'A. B.'
    """
    abstract = " ".join(doc.get("sentences") or [])
    title = doc.get("title") or ""
    return f"{title}{sep}{abstract}" if title else abstract


class Retriever(ABC):
    """A system that indexes a document collection and scores questions against it."""

    #: short key used in results (``bm25``, ``mean``, ``facet-query``, ``unifar-untrained``, ...)
    name: str = ""
    #: human-readable label for tables
    label: str = ""

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
    def csfcube_score_fn(self, data: Any, cache: dict | None = None):
        """The CSFCube score function ``(facet, qpid, cands) -> scores`` (:data:`unifar.evaluate.ScoreFn`)."""

    def describe(self) -> dict[str, Any]:
        """Facts about the system for the run's metadata."""
        return {"name": self.name, "label": self.label}


class BM25Retriever(Retriever):
    """BM25 through ``bm25s`` (:class:`unifar.baselines.BM25Scorer`)."""

    def __init__(self, stem: bool = True, name: str = "bm25") -> None:
        self.stem = stem
        self.name = name
        self.label = "BM25"

    @property
    def index_key(self) -> str:
        return f"bm25:stem={self.stem}"

    def index(self, documents: Sequence[Mapping[str, Any]]):
        from .baselines import BM25Scorer

        corpus = {str(i): qdoc_document_text(d, " ") for i, d in enumerate(documents)}
        return BM25Scorer(corpus, stem=self.stem)

    def score(self, questions: Sequence[str], index) -> np.ndarray:
        out = np.empty((len(questions), len(index.pids)), dtype=np.float64)
        for i, q in enumerate(questions):  # one vectorised pass over the collection per question
            out[i] = index.scores(q, index.pids)
        return out

    def csfcube_score_fn(self, data: Any, cache: dict | None = None):
        from .baselines import bm25_score_fn

        return bm25_score_fn(data, stem=self.stem)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "k1": 1.5, "b": 0.75, "stemming": self.stem}


class MeanPoolingRetriever(Retriever):
    """A mean-pooled base encoder (:class:`unifar.baselines.MeanPoolingEncoder`), cosine similarity."""

    def __init__(self, encoder, facet_query: bool = False, query_title: bool = True, name: str | None = None) -> None:
        self.encoder = encoder
        self.facet_query = facet_query
        self.query_title = query_title
        self.name = name or ("facet-query" if facet_query else "mean")
        what = "facet-restricted query" if facet_query else "mean pooling"
        self.label = f"{what} ({encoder.name})"

    @property
    def index_key(self) -> str:  # the facet-restricted query shares the documents' embeddings
        return f"mean:{self.encoder.name}:{self.encoder.max_length}"

    def index(self, documents: Sequence[Mapping[str, Any]]):
        sep = self.encoder.sep_token
        return self.encoder.encode([qdoc_document_text(d, sep) for d in documents])

    def score(self, questions: Sequence[str], index) -> np.ndarray:
        if self.facet_query:
            raise ValueError("the facet-restricted query applies to CSFCube (doc-doc) only")
        q = self.encoder.encode(list(questions))
        return (q @ index.T).double().numpy()

    def csfcube_score_fn(self, data: Any, cache: dict | None = None):
        from .baselines import document_text, mean_pooling_score_fn

        key = (self.index_key, "csfcube")
        docs = cache.get(key) if cache is not None else None
        if docs is None:
            sep = self.encoder.sep_token
            docs = self.encoder.encode([document_text(data.papers[p], sep) for p in data.pool_pids()])
            if cache is not None:
                cache[key] = docs
        return mean_pooling_score_fn(
            self.encoder, data, facet_query=self.facet_query, doc_embeddings=docs, query_title=self.query_title
        )

    def describe(self) -> dict[str, Any]:
        extra = {"query_title": self.query_title} if self.facet_query else {}
        return {**super().describe(), "model": self.encoder.name, "max_length": self.encoder.max_length, **extra}


class UniFARRetriever(Retriever):
    """A :class:`unifar.UniFAR` model: facet embeddings, diagonal-mean q-doc scoring."""

    def __init__(self, model, name: str = "unifar", label: str | None = None, batch_size: int = 32,
                 show_progress: bool = False, model_id: str | None = None, state_cache=None) -> None:
        self.model = model
        # shared with another UniFARRetriever on the same frozen base: one base pass per input
        self.state_cache = state_cache
        self.name = name
        self.label = label or f"UniFAR ({model.config.base_model})"
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.model_id = model_id or f"{model.config.base_model}@{id(model)}"

    @property
    def index_key(self) -> str:
        return f"unifar:{self.model_id}:{self.model.config.max_tokens}"

    def index(self, documents: Sequence[Mapping[str, Any]]):
        docs = [{"title": d.get("title") or "", "sentences": list(d.get("sentences") or [])} for d in documents]
        return self.model.encode_documents(docs, batch_size=self.batch_size, show_progress=self.show_progress,
                                           state_cache=self.state_cache).embeddings

    def score(self, questions: Sequence[str], index) -> np.ndarray:
        from .scoring import qdoc_scores

        q = self.model.encode_questions(list(questions), batch_size=self.batch_size, show_progress=self.show_progress,
                                        state_cache=self.state_cache).embeddings
        out = np.empty((q.shape[0], index.shape[0]), dtype=np.float64)
        for s in range(0, q.shape[0], QUESTION_CHUNK):
            out[s : s + QUESTION_CHUNK] = qdoc_scores(q[s : s + QUESTION_CHUNK], index).double().numpy()
        return out

    def csfcube_score_fn(self, data: Any, cache: dict | None = None):
        from .evaluate import unifar_score_fn

        return unifar_score_fn(self.model, data, batch_size=self.batch_size, show_progress=self.show_progress,
                               state_cache=self.state_cache)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "model": self.model_id,
            "base_model": self.model.config.base_model,
            "max_length": self.model.config.max_tokens,
            "qdoc_scoring": "diagonal mean of the facet similarity matrix",
        }
