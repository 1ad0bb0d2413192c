"""Ranking by score: one stable sort for every protocol.

Every benchmark ranks candidates by decreasing score and breaks ties by the order the
candidates were given in (collection or pool order), as a stable sort does. The CSFCube
protocol (:func:`unifar.evaluation.csfcube.rank_pools`) and the q-doc protocols
(:func:`unifar.evaluation.qdoc.rank`) both rank through :func:`rank_order`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rank_order", "rank_change"]


def rank_order(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Indices that sort ``scores`` in decreasing order along ``axis``; ties keep input order.

    >>> rank_order(np.array([0.1, 0.9, 0.9])).tolist()
    [1, 2, 0]
    >>> rank_order(np.array([[1.0, 2.0], [3.0, 3.0]])).tolist()
    [[1, 0], [0, 1]]
    """
    return np.argsort(-scores, axis=axis, kind="stable")


def rank_change(reference: np.ndarray, other: np.ndarray, grades: np.ndarray) -> dict[str, float]:
    """How a second scoring of one query's pool reorders it, and how far it was from doing so.

    ``reference`` and ``other`` score the same candidates (1-D, pool order); ``grades`` are their
    judgements. A metric over graded relevance can change only when a pair of candidates *with
    different grades* changes order, which needs the change in that pair's score difference,
    ``|(o_i - o_j) - (r_i - r_j)|``, to exceed the reference's gap ``|r_i - r_j|``. Returns
    ``reordered`` (1.0 when the ranked order differs), ``discordant`` (pairs ordered the other
    way), ``discordant_judged`` (of them, pairs with different grades), ``max_shift`` (the
    largest change of a pair's difference) and ``min_judged_gap`` (the reference's smallest gap
    between differently judged candidates; NaN when every grade is the same, so no order of the
    pool can change a metric).

    >>> r = rank_change(np.array([0.9, 0.5, 0.4]), np.array([0.9, 0.41, 0.5]), np.array([2, 0, 0]))
    >>> {k: round(v, 2) for k, v in r.items()}
    {'reordered': 1.0, 'discordant': 1.0, 'discordant_judged': 0.0, 'max_shift': 0.19, 'min_judged_gap': 0.4}
    """
    ref, new, g = (np.asarray(x, dtype=np.float64).ravel() for x in (reference, other, grades))
    if not ref.shape == new.shape == g.shape:
        raise ValueError(f"reference, other and grades must have the same length, got {ref.size}, {new.size}, {g.size}")
    d_ref, d_new = ref[:, None] - ref[None, :], new[:, None] - new[None, :]
    upper = np.triu(np.ones((ref.size, ref.size), dtype=bool), k=1)  # each pair once
    judged = upper & (g[:, None] != g[None, :])
    discordant = upper & (d_ref * d_new < 0)
    gaps = np.abs(d_ref[judged])
    return {"reordered": float(not np.array_equal(rank_order(ref), rank_order(new))),
            "discordant": float(discordant.sum()),
            "discordant_judged": float((discordant & judged).sum()),
            "max_shift": float(np.abs(d_new - d_ref)[upper].max()) if upper.any() else 0.0,
            "min_judged_gap": float(gaps.min()) if gaps.size else float("nan")}
