"""The dense systems: mean pooling, the facet-restricted query, and UniFAR (:class:`~unifar.evaluation.retrievers.Retriever`).

* :class:`MeanPoolingRetriever`: the base encoder, mean pooling, cosine
  (:class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder`); document text =
  ``title + sep_token + abstract`` (only the abstract when there is no title, as in PubMedQA);
  question = its text. Every paper of CSFCube is encoded once (``data.pool_pids()`` order).
* With ``facet_query`` (CSFCube only; Aspire's faceted query, Mysore et al., 2022) the query
  paper is its title + only the sentences whose predicted label maps to the queried facet (or,
  with ``query_title=False``, those sentences alone); candidates by their whole abstract.
  Measured here with MiniLM-L6 (aggregated MAP / NDCG%20): 38.92 / 60.79 with the title,
  36.16 / 57.86 without it, against 39.40 / 59.66 for the whole abstract as query.
* :class:`UniFARRetriever`: facet embeddings; q-doc relevance = the mean of the diagonal of the
  facet similarity matrix, ``(1/F) sum_f cos(e_q^(f), e_d^(f))`` (paper section 5.1 for
  DORIS-MAE and appendix E for LitSearch: "averaging the diagonal entries"), one matrix product
  of the concatenated L2-normalised facet vectors; doc-doc facet f = ``M(f, f)`` (section 3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..caching import TokenStateCache
from ..facets import FACETS
from ..scoring import docdoc_scores, qdoc_scores
from .retrievers import Retriever, ScoreFn, cached
from .texts import document_text, facet_query_text

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube
    from ..model import UniFAR
    from .mean_pooling import MeanPoolingEncoder

__all__ = ["MeanPoolingRetriever", "UniFARRetriever"]

QUESTION_CHUNK = 256  # questions scored per matrix product (bounds memory on large collections)


class MeanPoolingRetriever(Retriever):
    """A mean-pooled base encoder (:class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder`), cosine similarity."""

    def __init__(self, encoder: MeanPoolingEncoder, facet_query: bool = False, query_title: bool = True, name: str | None = None) -> None:
        self.encoder = encoder
        self.facet_query = facet_query
        self.qdoc = not facet_query  # the facet-restricted query is a doc-doc baseline
        self.query_title = query_title
        self.name = name or ("facet-query" if facet_query else "mean")
        what = "facet-restricted query" if facet_query else "mean pooling"
        self.label = f"{what} ({encoder.name})"

    @property
    def index_key(self) -> str:  # the facet-restricted query shares the documents' embeddings
        return f"mean:{self.encoder.name}:{self.encoder.max_length}"

    def _encode(self, texts: list[str]) -> torch.Tensor:
        """L2-normalised embeddings of ``texts`` (a subclass may encode differently)."""
        return self.encoder.encode(texts)

    def index(self, documents: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        sep = self.encoder.sep_token
        return self._encode([document_text(d, sep) for d in documents])

    def score(self, questions: Sequence[str], index: torch.Tensor) -> np.ndarray:
        if self.facet_query:
            raise ValueError("the facet-restricted query applies to CSFCube (doc-doc) only")
        q = self._encode(list(questions))
        return (q @ index.T).double().numpy()

    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """Cosine of the query paper's embedding (whole, or title + facet sentences) and each
        candidate's; the collection's embeddings are shared through ``cache``."""
        pids = data.pool_pids()
        index_of = {p: i for i, p in enumerate(pids)}
        docs = cached(cache, (self.index_key, "csfcube"), lambda: self.index([data.papers[p] for p in pids]))
        query_vec: dict[tuple[str, str], torch.Tensor] = {}
        if self.facet_query:
            keys = [(q, f) for f in FACETS for q in data.anns[f]]
            sep = self.encoder.sep_token
            texts = [facet_query_text(data.papers[q], f, sep, title=self.query_title) for q, f in keys]
            query_vec = dict(zip(keys, self._encode(texts)))

        def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
            q = query_vec[(qpid, facet)] if self.facet_query else docs[index_of[qpid]]
            c = docs[torch.as_tensor([index_of[p] for p in cands], dtype=torch.long)]
            return (c @ q).double().numpy()

        return score

    def describe(self) -> dict[str, Any]:
        extra = {"query_title": self.query_title} if self.facet_query else {}
        return {**super().describe(), "model": self.encoder.name, "max_length": self.encoder.max_length, **extra}


class UniFARRetriever(Retriever):
    """A :class:`unifar.UniFAR` model: facet embeddings, diagonal-mean q-doc scoring, ``M(f, f)`` doc-doc.

    ``state_cache``: a :class:`~unifar.caching.TokenStateCache` shared with another UniFARRetriever
    on the same frozen base (one base pass per input). ``cache_dir`` (without ``state_cache``):
    for CSFCube, the base encoder's token states are read from and saved to a file there
    (:meth:`unifar.caching.TokenStateCache.on_disk`), so that a later evaluation of any model on the
    same frozen base skips the encoder; the embeddings are the same either way.
    """

    def __init__(self, model: UniFAR, name: str = "unifar", label: str | None = None, batch_size: int = 32,
                 show_progress: bool = False, model_id: str | None = None, state_cache: TokenStateCache | None = None,
                 cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.model = model
        self.state_cache = state_cache
        self.cache_dir = cache_dir
        self.name = name
        self.label = label or f"UniFAR ({model.config.base_model})"
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.model_id = model_id or f"{model.config.base_model}@{id(model)}"

    @property
    def index_key(self) -> str:
        return f"unifar:{self.model_id}:{self.model.config.max_tokens}"

    def index(self, documents: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        docs = [{"title": d.get("title") or "", "sentences": list(d.get("sentences") or [])} for d in documents]
        return self.model.encode_documents(docs, batch_size=self.batch_size, show_progress=self.show_progress,
                                           state_cache=self.state_cache).embeddings

    def score(self, questions: Sequence[str], index: torch.Tensor) -> np.ndarray:
        q = self.model.encode_questions(list(questions), batch_size=self.batch_size, show_progress=self.show_progress,
                                        state_cache=self.state_cache).embeddings
        out = np.empty((q.shape[0], index.shape[0]), dtype=np.float64)
        for s in range(0, q.shape[0], QUESTION_CHUNK):
            out[s : s + QUESTION_CHUNK] = qdoc_scores(q[s : s + QUESTION_CHUNK], index).double().numpy()
        return out

    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """Doc-doc relevance for facet f = M(f, f) = cos(e_q^(f), e_c^(f)); every paper of the
        collection is encoded once per run: the embeddings are kept in ``cache`` under
        ``(index_key, "csfcube")`` with the papers they encode, so the hybrid that fuses this
        system (``hybrid-unifar``) reuses them instead of running the model again."""
        pids = data.pool_pids()
        index_of = {p: i for i, p in enumerate(pids)}
        key = (self.index_key, "csfcube")
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit[0] == pids and hit[2] is self.model:
            emb = hit[1]
        else:
            emb = self._encode_collection(data, pids)
            if cache is not None:  # the model is kept with its embeddings: its id stays its own
                cache[key] = (pids, emb, self.model)
        facets = tuple(self.model.config.facets)

        def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
            if facet not in facets:
                raise ValueError(f"the model has no facet {facet!r}; its facets are {facets}")
            c = emb[[index_of[p] for p in cands]]
            return docdoc_scores(emb[[index_of[qpid]]], c, facets.index(facet))[0].double().numpy()

        return score

    def _encode_collection(self, data: CSFCube, pids: list[str]) -> torch.Tensor:
        """Facet embeddings ``[N, F, h]`` of CSFCube's papers ``pids``, through the frozen base's
        states on disk when the retriever has a ``cache_dir``."""
        docs = [{"title": data.papers[p]["title"], "sentences": data.papers[p]["sentences"]} for p in pids]
        state_cache = self.state_cache
        if state_cache is None and self.cache_dir is not None:
            state_cache = TokenStateCache.on_disk(self.model, self.cache_dir)
        kw = {"state_cache": state_cache} if state_cache is not None else {}
        emb = self.model.encode_documents(docs, batch_size=self.batch_size, show_progress=self.show_progress, **kw).embeddings
        if self.cache_dir is not None and state_cache is not None:
            state_cache.save()
        return emb

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "model": self.model_id,
            "base_model": self.model.config.base_model,
            "max_length": self.model.config.max_tokens,
            "qdoc_scoring": "diagonal mean of the facet similarity matrix",
        }
