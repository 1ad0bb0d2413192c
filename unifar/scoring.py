"""Facet-aware scoring (paper section 3.3 and the retrieval strategies of section 5.1).

The facet similarity matrix of a query q and a candidate c is ``M(i, j) = cos(e_q^(i), e_c^(j))``.
q-doc retrieval (DORIS-MAE, LitSearch) scores by the mean of its diagonal; doc-doc facet
retrieval (CSFCube) scores facet f by ``M(f, f)``. With L2-normalised facet vectors the diagonal
mean equals one dot product of the concatenated facet vectors divided by ``N_facet``, so any
exact or approximate vector index serves a large corpus (:func:`flatten_for_index`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["facet_similarity", "qdoc_scores", "docdoc_scores", "flatten_for_index", "zscore_fusion"]


def _check(q: torch.Tensor, d: torch.Tensor) -> None:
    if q.dim() != 3 or d.dim() != 3:
        raise ValueError(f"expected [N, n_facets, hidden] tensors, got shapes {tuple(q.shape)} and {tuple(d.shape)}")
    if q.shape[1:] != d.shape[1:]:
        raise ValueError(f"facet/hidden shapes differ: {tuple(q.shape[1:])} vs {tuple(d.shape[1:])}")


def facet_similarity(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Facet similarity matrices ``M[a, b, i, j] = cos(q[a, i], d[b, j])``: [Nq, Nd, F, F].

    >>> q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])          # 1 query, 2 facets
    >>> d = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])          # 1 document
    >>> M = facet_similarity(q, d); M.shape
    torch.Size([1, 1, 2, 2])
    >>> [[round(x, 4) for x in row] for row in M[0, 0].tolist()]
    [[1.0, 0.7071], [0.0, 0.7071]]
    """
    _check(q, d)
    return torch.einsum("aih,bjh->abij", F.normalize(q.float(), dim=-1), F.normalize(d.float(), dim=-1))


def qdoc_scores(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Overall relevance = mean of the diagonal of the facet similarity matrix: [Nq, Nd].

    >>> q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]); d = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])
    >>> round(qdoc_scores(q, d).item(), 4)   # (1.0 + 0.7071) / 2
    0.8536
    """
    _check(q, d)
    qn, dn = F.normalize(q.float(), dim=-1), F.normalize(d.float(), dim=-1)
    return flatten_for_index(qn) @ flatten_for_index(dn).T / q.shape[1]


def docdoc_scores(q: torch.Tensor, d: torch.Tensor, facet: int) -> torch.Tensor:
    """Facet-wise relevance ``M(f, f)`` for one facet index: [Nq, Nd].

    >>> q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]); d = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])
    >>> docdoc_scores(q, d, 0).tolist(), round(docdoc_scores(q, d, 1).item(), 4)
    ([[1.0]], 0.7071)
    """
    _check(q, d)
    return F.normalize(q[:, facet].float(), dim=-1) @ F.normalize(d[:, facet].float(), dim=-1).T


def flatten_for_index(e: torch.Tensor) -> torch.Tensor:
    """[N, F, h] -> [N, F*h]: the concatenated facet vectors (a plain inner-product index on these,
    divided by F, gives :func:`qdoc_scores` when the facet vectors are L2-normalised)."""
    return e.reshape(e.shape[0], -1)


def zscore_fusion(scores: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Weighted sum of score lists over the same candidates, each z-normalised over them:
    ``sum_k w_k (s_k - mean(s_k)) / std(s_k)`` (a constant list contributes 0).

    The fusion of dense and lexical evidence behind the ``hybrid`` mining signal
    (:mod:`unifar.construction.mining`) and its CSFCube check (:class:`unifar.evaluation.hybrid.HybridRetriever`):
    z-scores put a cosine and a BM25 score, whose scales differ, on one footing per query.

    >>> zscore_fusion([np.array([0.9, 0.8, 0.7]), np.array([0.0, 0.0, 6.0])], [1.0, 0.5]).round(4).tolist()
    [0.8712, -0.3536, -0.5176]
    """
    if len(scores) != len(weights) or not scores:
        raise ValueError(f"need one weight per score list, got {len(scores)} lists and {len(weights)} weights")
    out = np.zeros(np.asarray(scores[0]).shape, dtype=np.float64)
    for s, w in zip(scores, weights):
        s = np.asarray(s, dtype=np.float64)
        if s.shape != out.shape:
            raise ValueError(f"score lists differ in shape: {s.shape} vs {out.shape}")
        sd = s.std()
        if sd > 0:
            out += w * (s - s.mean()) / sd
    return out
