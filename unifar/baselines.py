"""Baselines measured beside UniFAR: BM25, mean-pooled base encoders, facet-restricted queries.

* BM25 (Robertson & Zaragoza, 2009) through ``bm25s`` (Lucene variant, k1 = 1.5, b = 0.75):
  the index, hence the IDF, covers every paper given (for CSFCube the 4,205 papers of the test
  collection, title + abstract); a query-facet's annotated pool is then scored out of it. The
  query is the query paper's title + abstract. Tokens: lower-cased words of 2+ characters, English
  stop words removed, Snowball English stemming when ``snowballstemmer`` is installed.
* Mean pooling: a plain ``transformers`` encoder, mean of the last hidden states over all non-pad
  tokens (special tokens included), L2-normalised, cosine similarity; document text =
  ``title + tokenizer.sep_token + " ".join(sentences)`` truncated to ``max_length`` tokens.
* Facet-restricted query (Aspire's faceted query, Mysore et al., 2022): the query paper is
  represented by its title and only the sentences whose predicted label maps to the queried facet
  (or, with ``query_title=False``, by those sentences alone); candidates by their whole abstract.
  Measured here with MiniLM-L6 (aggregated MAP / NDCG%20): 38.92 / 60.79 with the title,
  36.16 / 57.86 without it, against 39.40 / 59.66 for the whole abstract as query.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .datasets.csfcube import FACETS, LABEL_TO_FACET, CSFCube
from .files import atomic_file

__all__ = [
    "BM25Scorer",
    "MeanPoolingEncoder",
    "bm25_score_fn",
    "facet_bm25_score_fn",
    "hybrid_score_fn",
    "document_text",
    "facet_query_text",
    "mean_pooling_score_fn",
]


def document_text(paper: Mapping[str, Any], sep_token: str) -> str:
    """``title + sep_token + " ".join(sentences)`` (the whole abstract).

    >>> document_text({"title": "T", "sentences": ["A.", "B."]}, "[SEP]")
    'T[SEP]A. B.'
    """
    return f"{paper['title']}{sep_token}{' '.join(paper['sentences'])}"


def facet_query_text(paper: Mapping[str, Any], facet: str, sep_token: str, title: bool = True) -> str:
    """Title + only the sentences labelled with ``facet`` (background = background + objective);
    with ``title=False`` the facet's sentences alone.

    >>> p = {"title": "T", "sentences": ["a", "b", "c"],
    ...      "labels": ["objective_label", "method_label", "background_label"]}
    >>> facet_query_text(p, "background", "[SEP]"), facet_query_text(p, "method", "[SEP]", title=False)
    ('T[SEP]a c', 'b')
    """
    if facet not in FACETS:
        raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS}")
    kept = " ".join(s for s, lab in zip(paper["sentences"], paper["labels"]) if LABEL_TO_FACET.get(lab) == facet)
    return f"{paper['title']}{sep_token}{kept}" if title else kept


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
        self.retriever = bm25s.BM25(k1=k1, b=b)
        self.retriever.index(tokens, show_progress=False)
        self._vocab = tokens.vocab

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


def bm25_score_fn(data: CSFCube, stem: bool = True):
    """CSFCube score function: BM25 of the query paper's title + abstract, IDF over the collection."""
    pids = data.pool_pids()
    scorer = BM25Scorer({p: document_text(data.papers[p], " ") for p in pids}, stem=stem)
    query_text = {q: document_text(data.papers[q], " ") for f in data.anns for q in data.anns[f]}

    def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
        return scorer.scores(query_text[qpid], cands)

    return score


def facet_bm25_score_fn(data: CSFCube, stem: bool = True):
    """CSFCube score function: BM25 between the facet's sentences of the query and the facet's
    sentences of each candidate (both restricted; IDF over the collection's facet texts).

    This is the weak, facet-specific signal the offline FTUs are mined with
    (:mod:`unifar.construction.mining`); scoring it on CSFCube fold1_dev tells how facet-specific it is.
    Candidates without a sentence of the facet score 0.
    """
    pids = data.pool_pids()
    scorers = {f: BM25Scorer({p: facet_query_text(data.papers[p], f, " ", title=False) or "" for p in pids}, stem=stem)
               for f in FACETS}

    def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
        query = facet_query_text(data.papers[qpid], facet, " ", title=False)
        return scorers[facet].scores(query, cands) if query.strip() else np.zeros(len(cands))

    return score


def hybrid_score_fn(dense_fn, lexical_fn, weight: float):
    """CSFCube score function: ``z(dense) + weight * z(lexical)`` over each pool
    (:func:`unifar.scoring.zscore_fusion`).

    With a mean-pooling ``dense_fn`` and :func:`facet_bm25_score_fn` as ``lexical_fn`` this is the
    teacher of the ``hybrid`` mining signal (:mod:`unifar.construction.mining`), checked on fold1_dev in
    chapter 3. There the pool is the query's dense neighbourhood instead of CSFCube's annotated pool.
    """
    from .scoring import zscore_fusion

    def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
        return zscore_fusion([dense_fn(facet, qpid, cands), lexical_fn(facet, qpid, cands)], [1.0, weight])

    return score


class MeanPoolingEncoder:
    """A Hugging Face encoder with mean pooling over non-pad tokens, L2-normalised output.

    ``model`` is a short name of a shipped encoder (``"minilm"``, ``"mpnet"``), a hub name or a
    local path (resolved by :func:`unifar.base_models.resolve_base_model`).
    """

    def __init__(
        self,
        model: str,
        max_length: int = 512,
        batch_size: int = 32,
        device: str | torch.device | None = None,
        show_progress: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        from .base_models import load_encoder

        if max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.name = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        encoder, self.tokenizer = load_encoder(model)
        self.model = encoder.eval().to(self.device)

    @property
    def sep_token(self) -> str:
        """The tokenizer's separator (``[SEP]`` for BERT-style, ``</s>`` for MPNet/RoBERTa)."""
        return self.tokenizer.sep_token

    @torch.inference_mode()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Embed ``texts`` -> float32 CPU tensor ``[N, hidden]`` with unit L2 norm, input order.

        e = sum_t m_t h_t / sum_t m_t over the attention mask m; batches are formed from
        length-sorted texts to limit padding, then the original order is restored.
        With ``cache_dir`` set, every text's embedding is stored there, keyed by a digest of the
        text, in one file per encoder (:meth:`cache_key`: weights and ``max_length``;
        :class:`unifar.caching.EmbeddingCache`): a later call, in this process or in another
        chapter, encodes only the texts no call has encoded before.
        """
        texts = list(texts)
        hidden = self.model.config.hidden_size
        if not texts:
            return torch.empty(0, hidden)
        if self.cache_dir is None:
            return self._encode(texts)
        from .caching import EmbeddingCache, text_digest

        cache = EmbeddingCache(self.cache_dir / f"mean-rows-{self.cache_key()}.safetensors", hidden)
        keys = [text_digest(t) for t in texts]
        todo = cache.missing(keys)
        if todo:
            cache.put([keys[i] for i in todo], self._encode([texts[i] for i in todo]))
            cache.save()
        return cache.get(keys)

    def cache_key(self) -> str:
        """SHA-256 (hex, 24 chars) of the encoder's weights and ``max_length``: the name of its
        embedding cache file.

        The weights are hashed on every call (well under a second for MiniLM), so an encoder
        fine-tuned in memory never reads embeddings cached for its earlier weights.
        """
        h = hashlib.sha256(f"max_length={self.max_length}".encode())
        for name, tensor in self.model.state_dict().items():
            h.update(name.encode())
            h.update(tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:24]

    def _encode(self, texts: list[str]) -> torch.Tensor:
        hidden = self.model.config.hidden_size
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)
        order = np.argsort([-len(ids) for ids in enc["input_ids"]], kind="stable")
        out = torch.empty(len(texts), hidden)
        starts = range(0, len(texts), self.batch_size)
        if self.show_progress and math.ceil(len(texts) / self.batch_size) > 2:
            from tqdm import tqdm

            starts = tqdm(starts, desc=f"encoding ({self.name})", unit="batch")
        for start in starts:
            idx = order[start : start + self.batch_size]
            features = [{k: enc[k][i] for k in enc.keys()} for i in idx]
            batch = self.tokenizer.pad(features, return_tensors="pt").to(self.device)
            states = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[torch.as_tensor(idx)] = torch.nn.functional.normalize(pooled.float(), dim=-1).cpu()
        return out


def mean_pooling_score_fn(
    encoder: MeanPoolingEncoder,
    data: CSFCube,
    facet_query: bool = False,
    doc_embeddings: torch.Tensor | None = None,
    query_title: bool = True,
):
    """CSFCube score function: cosine of mean-pooled embeddings.

    Every paper of the collection (``data.pool_pids()`` order) is encoded once; pass
    ``doc_embeddings`` from an earlier call's ``.doc_embeddings`` to reuse them. With
    ``facet_query`` the query side is the title (if ``query_title``) + the queried facet's
    sentences (:func:`facet_query_text`); candidates stay whole.
    """
    pids = data.pool_pids()
    index_of = {p: i for i, p in enumerate(pids)}
    if doc_embeddings is not None and doc_embeddings.shape[0] != len(pids):
        raise ValueError(f"doc_embeddings has {doc_embeddings.shape[0]} rows, the collection {len(pids)} papers")
    docs = doc_embeddings if doc_embeddings is not None else encoder.encode([document_text(data.papers[p], encoder.sep_token) for p in pids])
    query_vec: dict[tuple[str, str], torch.Tensor] = {}
    if facet_query:
        keys = [(q, f) for f in FACETS for q in data.anns[f]]
        texts = [facet_query_text(data.papers[q], f, encoder.sep_token, title=query_title) for q, f in keys]
        query_vec = dict(zip(keys, encoder.encode(texts)))

    def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
        q = query_vec[(qpid, facet)] if facet_query else docs[index_of[qpid]]
        c = docs[torch.as_tensor([index_of[p] for p in cands], dtype=torch.long)]
        return (c @ q).double().numpy()

    score.doc_embeddings = docs  # type: ignore[attr-defined]
    return score
