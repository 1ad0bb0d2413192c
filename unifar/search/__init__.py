"""Search your own papers with UniFAR: encode a corpus, index it, query it, explain a match.

* :mod:`unifar.search.corpus` -- read and check a JSONL / CSV / Parquet corpus (``datasets``);
* :mod:`unifar.search.encode` -- facet embeddings and sentence labels, in resumable chunks;
* :mod:`unifar.search.vectors` -- exact or FAISS nearest neighbours by inner product;
* :mod:`unifar.search.lexical` -- BM25 over the whole text and over each facet's sentences;
* :mod:`unifar.search.corpus_index` -- :class:`Index`: ``add``, ``build``, ``save``, ``load``,
  ``search``, ``explain``;
* :mod:`unifar.search.explain` -- the facet similarity matrix, attended sentences, BM25 terms;
* :mod:`unifar.search.folder` -- the index folder on disk: one writer, no user file touched,
  every file checked against its recorded digest;
* :mod:`unifar.search.serve` -- ``unifar serve``: a local search page (Flask);
* :mod:`unifar.search.cli` -- ``python -m unifar encode | index | search | explain | serve``.

>>> from unifar.search import Index            # doctest: +SKIP
>>> index = Index("minilm", use_labels=False).add(papers).build()   # doctest: +SKIP
>>> index.search("contrastive learning of sentence embeddings", k=5)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["Index", "Hit", "read_corpus", "encode_corpus", "load_labeller"]

_LAZY = {
    "Index": "corpus_index",
    "Hit": "corpus_index",
    "read_corpus": "corpus",
    "encode_corpus": "encode",
    "load_labeller": "encode",
}


def __getattr__(name: str) -> Any:  # lazy: the CLI's parser loads without torch
    if name not in _LAZY:
        raise AttributeError(f"module 'unifar.search' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{_LAZY[name]}", __name__), name)
