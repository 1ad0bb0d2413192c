"""Distillation of a teacher's graded scores on a batch of FTUs (beyond the paper).

* :func:`cap_teacher` / :func:`teacher_tensors` -- the teacher lists of a few FTUs as tensors
  (:class:`~unifar.objective.FTUBatch` holds them beside the paper's indices);
* :func:`distillation_terms` -- ``L_KD^(f)`` of each FTU and facet: the student's facet cosines
  of ``d_q`` and each candidate against the teacher's scores
  (:func:`unifar.losses.listwise_distillation_loss` or :func:`unifar.losses.margin_mse_loss`).

:func:`unifar.objective.ftu_objective` adds ``distill_weight * mean L_KD`` to ``L_total``
(:func:`unifar.losses.total_loss`); at ``distill_weight = 0`` (the default) batches carry no
teacher lists and the objective is the paper's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import torch

from .losses import listwise_distillation_loss, margin_mse_loss

if TYPE_CHECKING:
    from .config import UniFARConfig
    from .datasets.ftu import FTU, TeacherList
    from .objective import FTUBatch

__all__ = ["cap_teacher", "teacher_tensors", "distillation_terms"]


def cap_teacher(teacher: TeacherList, cap: int | None, rng: np.random.Generator) -> list[int]:
    """Positions of at most ``cap`` of a teacher list's candidates (kept in list order): the
    teacher's top candidates of every facet first (those decide the ranking's head, which MAP
    weighs most), then a seeded sample of the rest.

    >>> from unifar.datasets.ftu import TeacherList
    >>> t = TeacherList(list("abcdef"), {"method": [0.0, 5.0, 1.0, 4.0, 2.0, 3.0]})
    >>> cap_teacher(t, 4, np.random.default_rng(0))[:2], len(cap_teacher(t, 4, np.random.default_rng(0)))
    ([1, 3], 4)
    """
    n = len(teacher.candidates)
    if cap is None or n <= cap:
        return list(range(n))
    ranks = [np.argsort(-np.asarray(v), kind="stable") for v in teacher.scores.values()]
    head: dict[int, None] = {}
    for depth in range(n):  # round robin over the facets' rankings until half the cap is taken
        for r in ranks:
            if len(head) < max(1, cap // 2):
                head.setdefault(int(r[depth]), None)
    rest = [i for i in range(n) if i not in head]
    pick = rng.choice(len(rest), size=cap - len(head), replace=False) if cap > len(head) else []
    return sorted(list(head) + [rest[i] for i in pick])


def teacher_tensors(ftus: Sequence[FTU], row: Callable[[str], int], fidx: Mapping[str, int], cap: int | None,
                     rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The teacher lists of ``ftus`` as ``[B, K]`` document rows (``row(doc_id)``), ``[B, F, K]``
    scores and ``[B, F, K]`` mask, at most ``cap`` candidates each (:func:`cap_teacher`)."""
    B, F_ = len(ftus), len(fidx)
    kept = [cap_teacher(u.teacher, cap, rng) if u.teacher is not None else [] for u in ftus]
    K = max(1, max(len(k) for k in kept))
    idx = np.zeros((B, K), dtype=np.int64)
    scores = np.zeros((B, F_, K), dtype=np.float32)
    mask = np.zeros((B, F_, K), dtype=bool)
    for b, (u, keep) in enumerate(zip(ftus, kept)):
        for k, i in enumerate(keep):
            idx[b, k] = row(u.teacher.candidates[i])
        for f, v in (u.teacher.scores.items() if u.teacher is not None else ()):
            if f in fidx:
                scores[b, fidx[f], : len(keep)] = [v[i] for i in keep]
                mask[b, fidx[f], : len(keep)] = True
    return torch.from_numpy(idx), torch.from_numpy(scores), torch.from_numpy(mask)


def distillation_terms(cfg: UniFARConfig, dq: torch.Tensor, E: torch.Tensor, fb: "FTUBatch"
                       ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    r"""``L_KD^(f)`` of every FTU and facet with a teacher list (beyond the paper), or ``(None, None)``
    when the batch carries no teacher lists.

    The student's score of candidate ``c`` is the cosine of the facet-f embeddings of ``d_q``
    and ``c``, the score it ranks with at test time (section 3.3); the loss is
    ``cfg.distill_loss`` (:func:`unifar.losses.listwise_distillation_loss` or
    :func:`unifar.losses.margin_mse_loss`) at the student's ``tau`` and the teacher's
    ``distill_temperature``. Returns ``[B, F]`` losses and the ``[B, F]`` mask of lists with at
    least two candidates.
    """
    if fb.teacher_idx is None or fb.teacher_mask is None or fb.teacher_scores is None:
        return None, None
    cand = E[fb.teacher_idx]  # [B, K, F, h], unit norm
    student = torch.einsum("bfh,bkfh->bfk", dq, cand)  # cosines [B, F, K]
    loss = listwise_distillation_loss if cfg.distill_loss == "kl" else margin_mse_loss
    l_kd = loss(student, fb.teacher_scores, fb.teacher_mask, cfg.temperature, cfg.distill_temperature)
    return l_kd, fb.teacher_mask.sum(dim=-1) >= 2
