"""Facet triplets ``(query, positive, negative)_x``: FLeW's neighbourhood sampling on the facet
subgraph embeddings (section 3.1), and the substitute used offline, chapter 3's FTUs.

**Neighbourhood sampling.** FLeW says only that positives and negatives are sampled from the
query's neighbourhood in each facet's embedding space, following SciNCL (its reference [13]).
SciNCL's rule, used here: rank every other paper by L2 distance to the query in the embedding;
a positive is drawn uniformly from the ranks ``positive_ranks = [lo, hi)`` (0 = the nearest), a
negative from the farther band ``negative_ranks`` (``hi = None``: to the farthest). SciNCL's
bands on its 52M-paper graph are positives 20-24 and hard negatives 3995-3999
(:data:`SCINCL_RANKS`); the defaults here (0-4, 20 onwards) suit graphs of thousands of papers.
Ties keep graph order (a stable sort). Only papers with an edge of the facet are queries or
candidates (:mod:`unifar.flew.embedding`).

**Substitute (offline).** No citation graph with intents and the abstracts of both ends is
available offline, so :func:`triplets_from_ftus` undoes UniFAR's merge of FLeW triplets into
FTUs (UniFAR section 4.1): every (positive, negative) pair of a facet of an FTU is one triplet.
The merge kept no record of which negative came with which positive, hence all pairs.
"""

from __future__ import annotations

from itertools import product
from typing import Any, Mapping, Sequence

import numpy as np

from ..facets import FACETS
from .embedding import NodeEmbedding, embed_subgraph
from .graph import FacetGraphs

__all__ = [
    "Triplet",
    "SCINCL_RANKS",
    "hold_out_queries",
    "neighbourhood_triplets",
    "sample_facet_triplets",
    "triplets_from_ftus",
]

Triplet = tuple[str, str, str]  # (query id, positive id, negative id)

#: SciNCL's sampling bands (k+ = 25, c+ = 5; k- = 4000, c- = 5) on S2ORC's citation graph
SCINCL_RANKS = {"positive_ranks": (20, 25), "negative_ranks": (3995, 4000)}


def _band(ranks: tuple[int, int | None], n_candidates: int, name: str) -> tuple[int, int]:
    lo, hi = ranks
    hi = n_candidates if hi is None else min(int(hi), n_candidates)
    if not 0 <= lo < hi:
        raise ValueError(
            f"{name}={ranks} is empty for {n_candidates} candidates per query; "
            f"lower the band or use a larger graph"
        )
    return int(lo), hi


def neighbourhood_triplets(
    embedding: NodeEmbedding,
    queries: np.ndarray | None = None,
    per_query: int = 1,
    positive_ranks: tuple[int, int | None] = (0, 5),
    negative_ranks: tuple[int, int | None] = (20, None),
    seed: int = 0,
    chunk: int = 1024,
) -> np.ndarray:
    """``[T, 3]`` graph node indices ``(query, positive, negative)``, ``per_query`` per query.

    ``queries``: graph node indices (default: every embedded node); those without an embedding
    (no edge of this facet) are skipped. Distances are computed ``chunk`` queries at a time.
    """
    if per_query < 1:
        raise ValueError(f"per_query must be >= 1, got {per_query}")
    if positive_ranks[1] is None or positive_ranks[1] > negative_ranks[0]:
        raise ValueError(
            f"positive_ranks {positive_ranks} must end before negative_ranks {negative_ranks}"
        )
    V, nodes = embedding.vectors, embedding.nodes
    row_of = np.full(int(nodes.max()) + 1, -1, dtype=np.int64)
    row_of[nodes] = np.arange(len(nodes))
    if queries is None:
        rows = np.arange(len(nodes))
    else:
        q = np.asarray(queries, dtype=np.int64)
        rows = row_of[q[q < len(row_of)]]
        rows = rows[rows >= 0]
    p_lo, p_hi = _band(positive_ranks, len(nodes) - 1, "positive_ranks")
    n_lo, n_hi = _band(negative_ranks, len(nodes) - 1, "negative_ranks")
    rng = np.random.default_rng(seed)
    sq = (V * V).sum(axis=1)
    out = []
    for s in range(0, len(rows), chunk):
        r = rows[s : s + chunk]
        d = sq[r, None] + sq[None, :] - 2.0 * V[r] @ V.T  # squared L2 distances [q, n]
        d[np.arange(len(r)), r] = np.inf  # the query itself is never a candidate
        order = np.argsort(np.round(d, 9), axis=1, kind="stable")  # round: float noise is no rank
        pos = order[np.arange(len(r))[:, None], rng.integers(p_lo, p_hi, (len(r), per_query))]
        neg = order[np.arange(len(r))[:, None], rng.integers(n_lo, n_hi, (len(r), per_query))]
        out.append(np.stack([np.repeat(r, per_query), pos.ravel(), neg.ravel()], axis=1))
    rows_t = np.concatenate(out) if out else np.zeros((0, 3), dtype=np.int64)
    return nodes[rows_t]


def sample_facet_triplets(
    graphs: FacetGraphs,
    queries: Sequence[str] | None = None,
    dim: int = 32,
    seed: int = 0,
    **sampling: Any,
) -> dict[str, list[Triplet]]:
    """FLeW section 3.1 end to end: embed each facet subgraph (:func:`embed_subgraph`) and sample
    triplets of paper ids in it (:func:`neighbourhood_triplets`, keyword arguments ``sampling``).

    A facet whose subgraph has fewer than three papers with edges gets no triplets.
    """
    q = None if queries is None else graphs.index(list(queries))
    out: dict[str, list[Triplet]] = {}
    for k, f in enumerate(FACETS):
        W = graphs.weights[f]
        if int(((W + W.T).getnnz(axis=1) > 0).sum()) < 3:
            out[f] = []
            continue
        emb = embed_subgraph(W, dim=dim, seed=seed)
        idx = neighbourhood_triplets(emb, q, seed=seed + k, **sampling)
        ids = np.asarray(graphs.nodes, dtype=object)[idx]
        out[f] = [tuple(t) for t in ids.tolist()]
    return out


def triplets_from_ftus(
    ftus: Sequence[Any], documents: Mapping[str, Any] | None = None
) -> dict[str, list[Triplet]]:
    """Per facet, every ``(query, positive, negative)`` of chapter 3's FTUs (the offline substitute
    for FLeW's triplets; module docstring). ``documents``: when given, every id must be in it.

    >>> from unifar.datasets.ftu import FTU
    >>> u = FTU("q", positives={"method": ["a"]}, negatives={"method": ["x", "y"]})
    >>> triplets_from_ftus([u])["method"]
    [('q', 'a', 'x'), ('q', 'a', 'y')]
    """
    out: dict[str, list[Triplet]] = {f: [] for f in FACETS}
    for k, u in enumerate(ftus):
        if documents is not None:
            missing = [d for d in u.doc_ids() if d not in documents]
            if missing:
                raise KeyError(
                    f"FTU {k} (query {u.query!r}) refers to unknown documents {missing[:3]}"
                )
        for f in FACETS:
            out[f].extend(
                (u.query, p, n) for p, n in product(u.positives.get(f, []), u.negatives.get(f, []))
            )
    return out


def hold_out_queries(
    triplets_by_facet: Mapping[str, Sequence[Triplet]], n_queries: int, seed: int = 0
) -> tuple[dict[str, list[Triplet]], dict[str, list[Triplet]]]:
    """``(train, dev)``: every triplet whose query is one of ``n_queries`` query papers (a seeded
    draw among the query papers of all facets, the same papers for every facet) moves to
    ``dev``, the held-out triplets a facet encoder's dev curve is measured on. Whole query papers
    are held out, because the triplets of one query share its text and often a positive; a
    held-out paper may still be a positive or negative of a training query.

    >>> t = {"method": [("a", "p", "n"), ("a", "q", "n"), ("b", "p", "n"), ("c", "p", "n")]}
    >>> train, dev = hold_out_queries(t, 1, seed=1)
    >>> dev, train
    ({'method': [('a', 'p', 'n'), ('a', 'q', 'n')]}, {'method': [('b', 'p', 'n'), ('c', 'p', 'n')]})
    """
    queries = sorted({t[0] for ts in triplets_by_facet.values() for t in ts})
    if not 0 < n_queries < len(queries):
        raise ValueError(f"n_queries={n_queries}: choose between 1 and {len(queries) - 1} "
                         f"(the triplets have {len(queries)} query papers)")
    order = np.random.default_rng(seed).permutation(len(queries))
    held = {queries[i] for i in order[:n_queries].tolist()}
    train = {f: [t for t in ts if t[0] not in held] for f, ts in triplets_by_facet.items()}
    dev = {f: [t for t in ts if t[0] in held] for f, ts in triplets_by_facet.items()}
    for f, ts in triplets_by_facet.items():
        if ts and (len(dev[f]) < 2 or not train[f]):
            raise ValueError(f"facet {f!r}: {len(dev[f])} held-out and {len(train[f])} training "
                             f"triplets from {n_queries} held-out query papers; change n_queries")
    return train, dev
