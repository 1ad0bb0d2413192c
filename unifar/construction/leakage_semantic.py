"""Semantic overlap between training and evaluation documents: for every training document, the
evaluation document whose embedding is closest (cosine).

It looks for what the exact leakage guard (:mod:`unifar.datasets.leakage`) cannot see:
paraphrases, re-worded or translated abstracts and same-topic papers; a high cosine is a reason
to read the pair, not proof of leakage (two abstracts on one topic can be very close).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["SemanticOverlap", "semantic_overlap"]


@dataclass
class SemanticOverlap:
    """What :func:`semantic_overlap` found: for each training document (``train_ids``, input
    order) its nearest evaluation document (``nearest_ids``) and their cosine (``cosines``,
    float64 array), and ``counts[t]``: how many training documents have a nearest evaluation
    document at cosine ``>= t`` for each threshold ``t``."""

    train_ids: list[str]
    nearest_ids: list[str]
    cosines: Any  # numpy array [n_train]
    counts: dict[float, int]

    def top(self, k: int = 10) -> list[tuple[str, str, float]]:
        """The ``k`` closest ``(train id, evaluation id, cosine)`` pairs, closest first (ties in
        training order)."""
        import numpy as np

        order = np.argsort(-self.cosines, kind="stable")[: max(k, 0)]
        return [(self.train_ids[i], self.nearest_ids[i], float(self.cosines[i])) for i in order]

    def summary(self, k: int = 10) -> dict[str, Any]:
        """A JSON-able summary: sizes, counts above each threshold, quantiles of the cosine and
        the ``k`` closest pairs."""
        import numpy as np

        c = self.cosines
        quantiles = ({f"q{int(q * 100)}": float(np.quantile(c, q)) for q in (0.5, 0.9, 0.99)}
                     if c.size else {})
        return {
            "training_documents": len(self.train_ids),
            "above": {f"{t:g}": n for t, n in self.counts.items()},
            "max": float(c.max()) if c.size else None,
            "mean": float(c.mean()) if c.size else None,
            **quantiles,
            "top_pairs": [{"train": a, "eval": b, "cosine": round(s, 4)}
                          for a, b, s in self.top(k)],
        }


def semantic_overlap(
    train_vectors: np.ndarray | torch.Tensor,
    train_ids: Sequence[str],
    eval_vectors: np.ndarray | torch.Tensor,
    eval_ids: Sequence[str],
    thresholds: float | Sequence[float] = (0.9, 0.95),
    chunk_size: int = 2048,
) -> SemanticOverlap:
    """For every training document, the most similar evaluation document by cosine.

    ``train_vectors`` ``[n, h]`` and ``eval_vectors`` ``[m, h]`` (numpy arrays or CPU tensors,
    e.g. :meth:`unifar.evaluation.mean_pooling.MeanPoolingEncoder.encode`) are L2-normalised here, so any
    embedding works; rows of zeros get cosine 0 with everything. The similarity matrix is
    computed ``chunk_size`` training rows at a time (one matrix product and one arg-max per
    chunk; memory ``chunk_size x m``). Ties go to the first evaluation document.

    It complements the exact guard (:func:`find_leaks`), which catches identical ids, titles,
    texts and shared sentences: this catches paraphrases and papers on the same topic. It cannot
    tell a re-worded copy from an independent paper on the same question, and it sees only what
    the embedding sees (a text truncated by the encoder is compared by its first tokens).

    >>> import numpy as np
    >>> train = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 3.0]])
    >>> ev = np.array([[2.0, 0.0], [0.0, 1.0]])
    >>> o = semantic_overlap(train, ["a", "b", "c"], ev, ["x", "y"], thresholds=(0.95, 0.5))
    >>> o.nearest_ids, o.cosines.round(2).tolist(), o.counts
    (['x', 'y', 'y'], [1.0, 0.8, 1.0], {0.95: 2, 0.5: 3})
    >>> o.top(2)
    [('a', 'x', 1.0), ('c', 'y', 1.0)]
    """
    import numpy as np

    def unit(v: np.ndarray | torch.Tensor, ids: Sequence[str], what: str) -> np.ndarray:
        a = np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != len(ids):
            raise ValueError(f"{what}: expected a [{len(ids)}, h] matrix (one row per id), "
                             f"got shape {a.shape}")
        norms = np.linalg.norm(a, axis=1, keepdims=True)
        return np.divide(a, norms, out=np.zeros_like(a), where=norms > 0)

    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    T = unit(train_vectors, train_ids, "train_vectors")
    E = unit(eval_vectors, eval_ids, "eval_vectors")
    if T.shape[1] != E.shape[1]:
        raise ValueError(f"train and eval vectors differ in width: {T.shape[1]} vs "
                         f"{E.shape[1]}")
    if len(eval_ids) == 0:
        raise ValueError("no evaluation vectors to compare with")
    thresholds = (thresholds,) if isinstance(thresholds, (int, float)) else tuple(thresholds)
    best = np.zeros(len(train_ids), dtype=np.int64)
    cos = np.zeros(len(train_ids), dtype=np.float64)
    for start in range(0, len(train_ids), chunk_size):
        S = T[start : start + chunk_size] @ E.T  # [chunk, m]
        idx = S.argmax(axis=1)
        best[start : start + chunk_size] = idx
        cos[start : start + chunk_size] = S[np.arange(len(idx)), idx]
    cos = np.clip(cos, -1.0, 1.0)
    return SemanticOverlap(
        train_ids=[str(i) for i in train_ids],
        nearest_ids=[str(eval_ids[i]) for i in best],
        cosines=cos,
        counts={float(t): int((cos >= t).sum()) for t in thresholds},
    )
