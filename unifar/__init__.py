"""unifar: facet-aware retrieval for scientific documents, a reproduction of UniFAR (Dou et al., 2026).

Two walks through the library, each module visited once, in order:

* **a document becomes a score** (paper sections 3 and 5): :mod:`unifar.text` (title + sentences
  -> one unified input) -> :mod:`unifar.model` (``UniFAR.encode_documents``: facet embeddings) ->
  :mod:`unifar.scoring` (``facet_similarity``, ``docdoc_scores``) -> :mod:`unifar.evaluation.csfcube`
  (``rank_pools`` orders each pool with :func:`unifar.evaluation.ranking.rank_order`, then grades it)
  -> :mod:`unifar.evaluation.metrics` (MAP, NDCG%20). Every system (BM25, mean pooling, UniFAR ...)
  is a :class:`unifar.evaluation.retrievers.Retriever`; :mod:`unifar.evaluation.runner` runs them all.
* **one FTU trains the model** (section 4): :mod:`unifar.datasets.ftu_files` (``load_ftus``) ->
  :mod:`unifar.objective` (``build_ftu_batch``) -> :mod:`unifar.model` (``UniFAR``) ->
  :mod:`unifar.objective` (``ftu_objective``: L_total of :mod:`unifar.losses`) -> :mod:`unifar.train`
  (the loop: AdamW step of :mod:`unifar.optim`, checkpoints of :mod:`unifar.checkpoints`).

Around them: :mod:`unifar.datasets` (loaders, the FTU format, the leakage guard),
:mod:`unifar.construction` (section 4.1's training data), :mod:`unifar.rhetoric` (SciToricsBERT
sentence embeddings and the facet labellers), :mod:`unifar.paper` (the papers' reported numbers),
:mod:`unifar.book` (what the chapters share). Every encoder (UniFAR, the bi-encoder, mean pooling,
the sentence encoder) batches its inputs through one loop, :func:`unifar.batching.batched_encode`.
The model and its config load lazily, so that torch-free tools (the CSFCube command line on ranking files) start fast.

>>> from unifar import UniFAR, UniFARConfig
>>> UniFARConfig().facets
('background', 'method', 'result')
"""

from __future__ import annotations

from typing import Any

__all__ = ["UniFAR", "UniFARConfig", "FacetEncoding", "ABLATIONS"]
__version__ = "0.1.0"

_LAZY = {
    "UniFAR": "model",
    "FacetEncoding": "encoding",
    "UniFARConfig": "config",
    "ABLATIONS": "config",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'unifar' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
