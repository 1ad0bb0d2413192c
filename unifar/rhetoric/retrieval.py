r"""How well sentence vectors group by rhetorical label: P@1 and MAP@R of leave-one-out
retrieval (paper 002, section 4.1, after Musgrave et al. 2020, "A metric learning reality
check"), and their expected values under a random ranking -- the floor that a set's label
proportions put under both.

Retrieval uses L2-normalised vectors and cosine similarity (section 4.1, footnote 6).
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .sampling import encode_labels

__all__ = ["retrieval_scores", "chance_retrieval_scores"]


def retrieval_scores(
    embeddings: torch.Tensor | np.ndarray,
    labels: Sequence[Hashable],
    device: str | torch.device | None = "cpu",
    chunk_size: int = 2048,
) -> dict[str, float]:
    r"""P@1 and MAP@R of leave-one-out retrieval by cosine similarity (paper 002, section 4.1;
    Musgrave et al., 2020), computed by ``pytorch-metric-learning``'s ``AccuracyCalculator``.

    Every item is a query once; the references are all *other* items (the query itself is
    excluded). For a query with ``R`` same-label references, ranked by cosine similarity,

    .. math::
        \mathrm{P@1} = [\,y_{(1)} = y_q\,], \qquad
        \mathrm{MAP@R} = \frac{1}{R}\sum_{i=1}^{R} P(i)\,[\,y_{(i)} = y_q\,],

    with ``P(i)`` the precision at ``i``; both are averaged over the queries. Queries whose label
    occurs once (``R = 0``) are skipped, as in ``pytorch-metric-learning``. Ties in similarity are
    broken by ``torch.topk`` (unspecified order).
    """
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    emb = torch.as_tensor(np.asarray(embeddings) if not isinstance(embeddings, torch.Tensor) else embeddings)
    emb = F.normalize(emb.detach().float(), dim=-1)
    y, _ = encode_labels(labels)
    if len(y) != len(emb):
        raise ValueError(f"{len(emb)} embeddings but {len(y)} labels")
    dev = torch.device(device) if device is not None else emb.device
    emb, y = emb.to(dev), y.to(dev)
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r"),
        k="max_bin_count",
        device=dev,
        knn_func=CustomKNN(CosineSimilarity(), batch_size=chunk_size),
    )
    res = calc.get_accuracy(emb, y, emb, y, ref_includes_query=True)
    return {"p@1": float(res["precision_at_1"]), "map@r": float(res["mean_average_precision_at_r"])}


def chance_retrieval_scores(labels: Sequence[Hashable]) -> dict[str, float]:
    r"""Expected P@1 and MAP@R of :func:`retrieval_scores` when the references are ranked in a
    uniformly random order: the chance level that a set's label proportions give both metrics.

    A query whose label has ``n_c`` items has ``R = n_c - 1`` relevant among ``M = N - 1``
    references. With :math:`H_R = \sum_{i \le R} 1/i`, the expectations over random rankings are

    .. math::
        \mathbb{E}[\mathrm{P@1}] = \frac{R}{M}, \qquad
        \mathbb{E}[\mathrm{MAP@R}] = \frac{H_R}{M} + \frac{(R - 1)(R - H_R)}{M (M - 1)},

    (from :math:`\mathbb{E}[r_i] = R/M` and :math:`\mathbb{E}[r_i r_j] = R(R-1)/(M(M-1))` for the
    relevance indicators of ranks ``i != j``), averaged over the queries as
    :func:`retrieval_scores` does, skipping labels with one item. For large sets they approach
    :math:`\sum_c p_c^2` and :math:`\sum_c p_c^3` (``p_c`` the label proportions).

    >>> chance_retrieval_scores(["a", "a", "b", "b"])  # R = 1, M = 3 for every query
    {'p@1': 0.3333333333333333, 'map@r': 0.3333333333333333}
    >>> chance_retrieval_scores(["a"] * 3)["map@r"]  # every reference relevant
    1.0
    >>> s = chance_retrieval_scores(["a"] * 600 + ["b"] * 400)
    >>> round(s["p@1"], 3), round(s["map@r"], 2)  # near 0.6^2 + 0.4^2 and 0.6^3 + 0.4^3
    (0.52, 0.28)
    """
    ids, _ = encode_labels(labels)
    counts = torch.bincount(ids).double()
    n = float(counts.sum())
    counts = counts[counts >= 2]  # queries with R = 0 are skipped
    if n < 2 or len(counts) == 0:
        raise ValueError("need at least one label with two items")
    R, M = counts - 1, n - 1
    harmonic = torch.tensor([sum(1.0 / i for i in range(1, int(r) + 1)) for r in R.tolist()],
                            dtype=torch.float64)
    p1 = R / M
    mapr = harmonic / M + ((R - 1) * (R - harmonic) / (M * (M - 1)) if M > 1 else 0.0)
    weight = counts / counts.sum()
    return {"p@1": float((weight * p1).sum()), "map@r": float((weight * mapr).sum())}
