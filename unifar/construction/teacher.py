"""The hybrid teacher's graded scores, kept for distillation (beyond the paper).

Chapter 3's mining reranks each query document's dense neighbours by the hybrid teacher
``z(cos) + w z(BM25_f)`` and keeps only its top candidate as a facet positive. The FTU also
stores the teacher's scores over a short candidate list (:func:`teacher_list`), so that training
can distil the teacher's whole ranking (:func:`unifar.losses.listwise_distillation_loss`), not
only its first choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..datasets.ftu import TeacherList
from ..evaluation.ranking import rank_order

if TYPE_CHECKING:
    from .mining import MiningConfig

__all__ = ["teacher_list"]


def teacher_list(cands: Sequence[str], scores: Mapping[str, np.ndarray], config: MiningConfig,
                 rng: np.random.Generator) -> TeacherList | None:
    """The candidate list an FTU stores for distillation, from the hybrid teacher's scores of
    every facet over the query's whole rerank list ``cands`` (dense order); ``config`` is the
    :class:`~unifar.construction.mining.MiningConfig`. The list is the union of each
    facet's teacher top ``config.teacher_top``, then ``config.teacher_random`` drawn from the
    rest, all in dense order, each with every facet's score (z over the whole rerank list, so
    the scores of a short list keep their meaning). None when nothing is asked for.

    >>> from unifar.construction.mining import MiningConfig
    >>> cfg = MiningConfig(teacher_top=1, teacher_random=1)
    >>> t = teacher_list(["a", "b", "c", "d"], {"method": np.array([0.0, 3.0, 1.0, 2.0])}, cfg,
    ...                  np.random.default_rng(0))
    >>> t.candidates[0], len(t.candidates), t.scores["method"][t.candidates.index("b")]
    ('b', 2, 3.0)
    """
    if not scores or (config.teacher_top == 0 and config.teacher_random == 0):
        return None
    head = {int(i) for v in scores.values() for i in rank_order(v)[: config.teacher_top]}
    rest = [i for i in range(len(cands)) if i not in head]
    n_rand = min(config.teacher_random, len(rest))
    extra = {rest[i] for i in rng.choice(len(rest), size=n_rand, replace=False)} if n_rand else set()
    keep = sorted(head | extra)
    return TeacherList(
        candidates=[cands[i] for i in keep],
        scores={f: [round(float(v[i]), 6) for i in keep] for f, v in scores.items()},  # as stored
        origin="hybrid",
        meta={"weight": config.hybrid_weight, "rerank_depth": len(cands), "top": config.teacher_top,
              "random": config.teacher_random, "score": "z(cos) + weight * z(facet BM25) over the rerank list"},
    )
