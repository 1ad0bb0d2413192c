"""The real (not facet-specific) signals of the offline FTU set, attached to facets: each
SciRepEval citation triplet (:func:`citation_triplets`) and search query (:func:`search_ftus`)
goes to the facet of its query document whose sentences are closest to it by dense cosine
(:func:`attribute_facets`; our rule, the data has no facet). See :mod:`unifar.construction.mining`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import torch

from ..datasets.ftu import FTU, Question
from ..evaluation.texts import facet_text
from ..facets import FACETS
from .ftu import Triplet
from .mining_sources import whole_text

if TYPE_CHECKING:
    from ..datasets.schema import QDocBenchmark

__all__ = ["Encode", "attribute_facets", "citation_triplets", "search_ftus"]

#: texts -> unit-norm float tensor [N, h] (e.g. ``MeanPoolingEncoder.encode``)
Encode = Callable[[Sequence[str]], torch.Tensor]


def attribute_facets(
    texts: Sequence[str], docs: Sequence[Mapping[str, Any]], encode: Encode
) -> list[str | None]:
    """For each ``(text, doc)`` pair, the facet whose sentences of ``doc`` are closest to ``text``
    (dense cosine); ``None`` when the document has no facet-labelled sentence."""
    if len(texts) != len(docs):
        raise ValueError(f"{len(texts)} texts but {len(docs)} documents")
    if not texts:
        return []
    T = encode(list(texts))
    facet_texts = [facet_text(d, f) for d in docs for f in FACETS]
    nonempty = [i for i, t in enumerate(facet_texts) if t]
    F = torch.zeros(len(facet_texts), T.shape[1])
    if nonempty:
        F[nonempty] = encode([facet_texts[i] for i in nonempty])
    S = torch.einsum("nh,nfh->nf", T, F.view(len(docs), len(FACETS), -1))
    S = S.masked_fill(torch.tensor([[not t for t in facet_texts[i * 3 : i * 3 + 3]] for i in range(len(docs))]), -2.0)
    best = S.argmax(dim=1).tolist()
    return [FACETS[b] if S[i, b] > -2.0 else None for i, b in enumerate(best)]


def citation_triplets(
    triplets: Sequence[tuple[str, str, str]], docs: Mapping[str, Mapping[str, Any]], encode: Encode
) -> tuple[list[Triplet], int]:
    """The ``citation`` signal: each (query, cited, not cited) triplet under the facet of the
    query closest to the cited abstract. Returns the triplets and how many were skipped."""
    keep = [t for t in triplets if all(d in docs for d in t) and len(set(t)) == 3]
    facets = attribute_facets([whole_text(docs[p]) for _, p, _ in keep], [docs[q] for q, _, _ in keep], encode)
    out = [Triplet(q, p, n, f) for (q, p, n), f in zip(keep, facets) if f is not None]
    return out, len(triplets) - len(out)


def search_ftus(bench: QDocBenchmark, docs: Mapping[str, Mapping[str, Any]], encode: Encode, max_negatives: int) -> list[FTU]:
    """The ``search-clicks`` signal: one FTU per (train-half) search query with a relevant candidate."""
    rows = []
    for q in bench.questions:
        grades = {f"s2:{d}": g for d, g in bench.qrels.get(q["qid"], {}).items() if f"s2:{d}" in docs}
        relevant = sorted((d for d, g in grades.items() if g >= bench.relevance_threshold), key=lambda d: -grades[d])
        if not relevant:
            continue
        rows.append((q, relevant, [d for d, g in grades.items() if g < bench.relevance_threshold]))
    facets = attribute_facets([q["text"] for q, _, _ in rows], [docs[r[0]] for _, r, _ in rows], encode)
    ftus = []
    for (q, relevant, non_relevant), f in zip(rows, facets):
        if f is None:
            continue
        ftu = FTU(relevant[0])
        if relevant[1:]:
            ftu.positives[f] = relevant[1:]
        if non_relevant:
            ftu.negatives[f] = non_relevant[:max_negatives]
        ftu.questions[f] = Question(q["text"], f, "scirepeval-search", relevant[0], {"qid": q["qid"], "facet_rule": "dense-attribution"})
        ftus.append(ftu)
    return ftus
