"""Ranking by score: one stable sort for every protocol.

Every benchmark ranks candidates by decreasing score and breaks ties by the order the
candidates were given in (collection or pool order), as a stable sort does. The CSFCube
protocol (:func:`unifar.evaluation.csfcube.rank_pools`) and the q-doc protocols
(:func:`unifar.evaluation.qdoc.rank`) both rank through :func:`rank_order`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rank_order"]


def rank_order(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Indices that sort ``scores`` in decreasing order along ``axis``; ties keep input order.

    >>> rank_order(np.array([0.1, 0.9, 0.9])).tolist()
    [1, 2, 0]
    >>> rank_order(np.array([[1.0, 2.0], [3.0, 3.0]])).tolist()
    [[1, 0], [0, 1]]
    """
    return np.argsort(-scores, axis=axis, kind="stable")
