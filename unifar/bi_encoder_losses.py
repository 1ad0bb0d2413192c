"""The two losses of a single-vector bi-encoder (multi-objective paper, section 3.1), one function
each.

Both take the pooled embeddings of a batch (``B`` anchors, their ``B`` positives, hard negatives)
and return the batch mean, the form :func:`unifar.bi_encoder.train_bi_encoder` expects of any
loss ``loss_fn(anchor, positive, negative | None)``. They mirror sentence-transformers'
``MultipleNegativesRankingLoss`` (default ``query_to_doc`` direction, cosine similarity) and
``TripletLoss`` (euclidean distance) on the same embeddings, which ``tests/test_multi_objective.py``
checks; the formulas are written out here so that importing them does not import
sentence-transformers (six seconds).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["multiple_negatives_ranking_loss", "triplet_margin_loss"]


def multiple_negatives_ranking_loss(
    q: torch.Tensor,
    d: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    scale: float = 20.0,
) -> torch.Tensor:
    r"""Multiple negatives ranking loss (MNRL; multi-objective paper eq. 1, section 3.1): every
    other positive and every hard negative of the batch is a negative of each query.

    .. math::
        \mathrm{MNRL} = -\frac{1}{B}\sum_{i=1}^{B}\log
        \frac{e^{\,s\cdot\cos(q_i, d_i)}}{\sum_{c \in D} e^{\,s\cdot\cos(q_i, c)}},
        \qquad D = \{d_1, \dots, d_B\} \cup \{n_1, \dots, n_M\}

    with scale :math:`s = 1/\tau`. This is sentence-transformers'
    ``MultipleNegativesRankingLoss`` (``scale=20``, ``cos_sim``, direction ``query_to_doc``):
    cross-entropy over the scaled cosines with the diagonal as target.

    Args:
        q: ``[B, h]`` query (anchor) embeddings, not necessarily normalised.
        d: ``[B, h]`` their positives (row ``i`` is the positive of ``q[i]``).
        hard_negatives: ``[M, h]`` extra negatives shared by the whole batch (any ``M``; e.g. the
            hard negatives of the examples that have one), or None.
        scale: :math:`s` (20, i.e. temperature 0.05, sentence-transformers' default).

    Returns:
        The scalar mean loss.

    Two orthogonal pairs, scale 1: each query has cosine 1 with its positive and 0 with the
    other, so ``log(1 + e^-1)``; a shared negative ``(1, 1)`` adds ``e^(1/sqrt(2) - 1)`` inside the
    log:

    >>> q = torch.eye(2)
    >>> round(multiple_negatives_ranking_loss(q, q, scale=1.0).item(), 4)
    0.3133
    >>> n = torch.tensor([[1.0, 1.0]])
    >>> round(multiple_negatives_ranking_loss(q, q, n, scale=1.0).item(), 4)
    0.7486
    """
    if q.ndim != 2 or d.shape != q.shape:
        raise ValueError(f"q and d must both be [B, h]; got {tuple(q.shape)} and {tuple(d.shape)}")
    docs = d if hard_negatives is None else torch.cat([d, hard_negatives.to(d.dtype)], dim=0)
    scores = (
        F.normalize(q.float(), dim=-1) @ F.normalize(docs.float(), dim=-1).T * scale
    )  # [B, B + M]
    return F.cross_entropy(scores, torch.arange(q.shape[0], device=q.device))


def triplet_margin_loss(
    anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None, margin: float = 1.0
) -> torch.Tensor:
    r"""Triplet loss with L2 distance (multi-objective paper eq. 2; FLeW eq. 5 with
    :math:`\delta = 1`; SPECTER's loss):

    .. math::
        \mathrm{TL} = \frac{1}{B}\sum_{i=1}^{B}
        \max\{\lVert a_i - p_i\rVert_2 - \lVert a_i - n_i\rVert_2 + \epsilon,\; 0\}

    The same formula as sentence-transformers' ``TripletLoss`` with
    ``TripletDistanceMetric.EUCLIDEAN`` (whose default margin is 5; pass ``triplet_margin=1``).
    The embeddings are used as given (FLeW and SPECTER: the un-normalised [CLS] state).

    Args:
        anchor, positive, negative: ``[B, h]``; row ``i`` of each forms one triplet.
        margin: :math:`\epsilon` (:math:`\delta` in FLeW), 1.

    Returns:
        The scalar mean loss.

    Distances 5 vs 10 (satisfied: 0) and 2 vs 1 (violated: 2 - 1 + 1 = 2), mean 1:

    >>> a = torch.zeros(2, 2)
    >>> p = torch.tensor([[3.0, 4.0], [0.0, 2.0]]); n = torch.tensor([[6.0, 8.0], [0.0, 1.0]])
    >>> triplet_margin_loss(a, p, n).item()
    1.0
    """
    shapes = [tuple(t.shape) if t is not None else None for t in (anchor, positive, negative)]
    if anchor.ndim != 2 or shapes[1] != shapes[0] or shapes[2] != shapes[0]:
        raise ValueError(
            f"anchor, positive and negative must all be [B, h] (one negative per anchor); "
            f"got {shapes}"
        )
    d_pos = torch.linalg.vector_norm(anchor.float() - positive.float(), dim=-1)
    assert negative is not None  # checked above
    d_neg = torch.linalg.vector_norm(anchor.float() - negative.float(), dim=-1)
    return F.relu(d_pos - d_neg + margin).mean()
