"""The training objectives of UniFAR (paper section 4.2), one function per loss.

How they are applied to a batch of FTUs (gathering, masks, lambda) is :mod:`unifar.objective`.
Shapes: ``B`` training units (FTUs), ``F`` facets, ``P``/``N`` positives/negatives per facet
(padded, with boolean masks), ``h`` hidden size, ``n`` sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "info_nce",
    "doc_doc_loss",
    "question_doc_loss",
    "kl_attention_loss",
    "listwise_distillation_loss",
    "margin_mse_loss",
    "total_loss",
    "LossTerms",
]


def info_nce(
    anchor: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    temperature: float = 0.08,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""InfoNCE with several positives (paper eq. in section 4.2), cosine similarity:

    .. math::
        \mathcal{L}_{CL} = -\frac{1}{|P|}\sum_{p_i\in P}\log
        \frac{e^{s(a,p_i)/\tau}}{\sum_{p_j\in P}e^{s(a,p_j)/\tau}+\sum_{n_m\in N}e^{s(a,n_m)/\tau}}

    Every positive sits in the denominator of every term (not only its own).

    Args:
        anchor: ``[..., h]``.
        positives: ``[..., P, h]``; negatives: ``[..., N, h]``.
        temperature: tau (0.08 in the paper).
        pos_mask, neg_mask: ``[..., P]`` / ``[..., N]`` booleans, False for padding.

    Returns:
        The loss of each anchor, ``[...]``; 0 for an anchor without any positive.

    Reference: van den Oord et al. (2018), with the multi-positive form of UniFAR section 4.2.

    >>> a = torch.tensor([1.0, 0.0]); p = torch.tensor([[1.0, 0.0]]); n = torch.tensor([[0.0, 1.0]])
    >>> round(info_nce(a, p, n, temperature=1.0).item(), 4)      # -log(e / (e + 1))
    0.3133
    """
    a = F.normalize(anchor.float(), dim=-1)
    sp = torch.einsum("...h,...ph->...p", a, F.normalize(positives.float(), dim=-1)) / temperature
    sn = torch.einsum("...h,...nh->...n", a, F.normalize(negatives.float(), dim=-1)) / temperature
    pm = torch.ones_like(sp, dtype=torch.bool) if pos_mask is None else pos_mask.bool()
    nm = torch.ones_like(sn, dtype=torch.bool) if neg_mask is None else neg_mask.bool()
    logits = torch.cat([sp, sn], dim=-1).masked_fill(~torch.cat([pm, nm], dim=-1), float("-inf"))
    log_denominator = torch.logsumexp(logits, dim=-1, keepdim=True)
    log_prob = (sp - log_denominator).masked_fill(~pm, 0.0)
    n_pos = pm.sum(dim=-1)
    return -(log_prob.sum(dim=-1) / n_pos.clamp(min=1)).masked_fill(n_pos == 0, 0.0)


def doc_doc_loss(
    query_doc: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    temperature: float = 0.08,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Document-document loss of facet f (section 4.2), :func:`info_nce` on facet-f embeddings:

    .. math::
        \mathcal{L}_{DD}^{(f)} = \mathcal{L}_{CL}\big(a = d_q,\; P = \{d_+^{(f)}\},\; N = \{d_-^{(f)}\}\big)

    Args:
        query_doc: ``[B, F, h]`` facet embeddings of the query documents d_q.
        positives: ``[B, F, P, h]``: ``positives[b, f, p]`` is the facet-f embedding of the p-th
            facet-f positive of FTU b. negatives likewise ``[B, F, N, h]``.
        temperature: tau (0.08 in the paper).
        pos_mask, neg_mask: ``[B, F, P]`` / ``[B, F, N]`` booleans, False for padding.

    Returns:
        ``[B, F]`` losses.

    One FTU, two facets, tau = 1: facet 0 has cosines 1 (positive) and 0 (negative), so
    ``log(1 + e^-1)``; facet 1 has ``1/sqrt(2)`` and 0, so ``log(1 + e^-0.7071)``:

    >>> dq = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> pos = torch.tensor([[[[1.0, 0.0]], [[1.0, 1.0]]]])
    >>> neg = torch.tensor([[[[0.0, 1.0]], [[1.0, 0.0]]]])
    >>> doc_doc_loss(dq, pos, neg, temperature=1.0).round(decimals=4)
    tensor([[0.3133, 0.4008]])
    """
    return info_nce(query_doc, positives, negatives, temperature, pos_mask, neg_mask)


def question_doc_loss(
    question: torch.Tensor,
    query_doc: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    temperature: float = 0.08,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Question-document loss of facet f (section 4.2), :func:`info_nce` on facet-f embeddings:

    .. math::
        \mathcal{L}_{QD}^{(f)} = \mathcal{L}_{CL}\big(a = q^{(f)},\; P = \{d_q\} \cup \{d_+^{(f)}\},\; N = \{d_-^{(f)}\}\big)

    Figure 2: the gradient of L_QD reaches only the question branch, so every document
    embedding is detached here.

    Args:
        question: ``[B, F, h]``: ``question[b, f]`` is the facet-f embedding of question q^(f).
        query_doc: ``[B, F, h]``; positives ``[B, F, P, h]``; negatives ``[B, F, N, h]``.
        temperature: tau (0.08 in the paper).
        pos_mask, neg_mask: ``[B, F, P]`` / ``[B, F, N]`` booleans, False for padding (d_q is
            always a positive).

    Returns:
        ``[B, F]`` losses.

    With the question equal to d_q (tau = 1), facet 0 has two positives at cosine 1 and a
    negative at 0, so ``log(2 + e^-1)``:

    >>> q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> pos = torch.tensor([[[[1.0, 0.0]], [[1.0, 1.0]]]])
    >>> neg = torch.tensor([[[[0.0, 1.0]], [[1.0, 0.0]]]])
    >>> question_doc_loss(q, q, pos, neg, temperature=1.0).round(decimals=4)
    tensor([[0.8620, 0.8950]])
    """
    pos = torch.cat([query_doc.detach().unsqueeze(2), positives.detach()], dim=2)
    if pos_mask is not None:
        pos_mask = torch.cat([torch.ones_like(pos_mask[..., :1]), pos_mask], dim=-1)
    return info_nce(question, pos, negatives.detach(), temperature, pos_mask, neg_mask)


def kl_attention_loss(
    attention: torch.Tensor,
    labels: torch.Tensor,
    sentence_mask: torch.Tensor,
    eps: float = 1e-12,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Facet-sentence attention consistency of document d (section 4.2):

    .. math::
        \mathcal{L}_{KL}^{(d)} = \frac{1}{|\mathcal{F}^{(d)}|}\sum_{f\in\mathcal{F}^{(d)}}
        \frac{1}{|\mathcal{S}^{(d)}|}\sum_{s_i\in\mathcal{S}^{(d)}}
        \tilde G_{f,s_i}\log\frac{\tilde G_{f,s_i}}{\tilde A_{f,s_i}}

    ``G[f, s] = 1`` when sentence s is labelled f; both G and the predicted attention A are
    normalised row-wise over the document's sentences; F^(d) are the facets with at least one
    labelled sentence. Sentences without a facet (e.g. the title, or "other") have label -1.

    Args:
        attention: ``[B, F, n]`` head-averaged facet->sentence attention.
        labels: ``[B, n]`` facet index per sentence, -1 for none.
        sentence_mask: ``[B, n]`` True for real sentences.

    Returns:
        ``(loss [B], valid [B])``: valid is False for documents without any labelled sentence
        (their loss is 0).

    Attention equal to the gold distribution gives 0; moving a quarter of facet 0's mass to the
    sentence labelled 1 gives ``(0.5 log 2 / 3 + 0) / 2``:

    >>> labels, mask = torch.tensor([[0, 0, 1]]), torch.tensor([[True, True, True]])
    >>> A = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    >>> loss, ok = kl_attention_loss(A, labels, mask)
    >>> loss.item(), ok.item()
    (0.0, True)
    >>> kl_attention_loss(torch.tensor([[[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]]]), labels, mask)[0].round(decimals=4)
    tensor([0.0578])
    """
    B, F_, n = attention.shape
    mask = sentence_mask.bool()
    G = (labels.unsqueeze(1) == torch.arange(F_, device=labels.device)[None, :, None]) & mask.unsqueeze(1)
    G = G.to(attention.dtype)
    g_sum = G.sum(dim=-1, keepdim=True)
    present = g_sum.squeeze(-1) > 0  # [B, F]
    G_t = G / g_sum.clamp(min=1)
    A = attention.float().masked_fill(~mask.unsqueeze(1), 0.0)
    A_t = A / A.sum(dim=-1, keepdim=True).clamp(min=eps)
    terms = torch.where(G_t > 0, G_t * (torch.log(G_t.clamp(min=eps)) - torch.log(A_t.clamp(min=eps))), torch.zeros_like(G_t))
    per_facet = terms.sum(dim=-1) / mask.sum(dim=-1, keepdim=True).clamp(min=1)  # [B, F]
    n_present = present.sum(dim=-1)
    loss = (per_facet * present).sum(dim=-1) / n_present.clamp(min=1)
    return loss, n_present > 0


def _teacher_student_logits(
    student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None,
    temperature: float, teacher_temperature: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Student logits ``s / tau``, teacher logits ``t / tau_T`` and the boolean candidate mask."""
    m = torch.ones_like(student, dtype=torch.bool) if mask is None else mask.bool()
    return student.float() / temperature, teacher.float() / teacher_temperature, m


def listwise_distillation_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 0.08,
    teacher_temperature: float = 1.0,
) -> torch.Tensor:
    r"""Listwise distillation of a teacher's graded scores over a candidate list (beyond the paper):

    .. math::
        \mathcal{L}_{KD}^{(f)} = \mathrm{KL}\big(p_T \,\|\, p_S\big)
        = \sum_{c \in C} p_T(c) \log \frac{p_T(c)}{p_S(c)},\qquad
        p_T = \mathrm{softmax}_{c \in C}\big(t_f(d_q, c) / \tau_T\big),\;
        p_S = \mathrm{softmax}_{c \in C}\big(s(e_{d_q}^{(f)}, e_c^{(f)}) / \tau\big)

    ``s`` is the student's cosine of the facet-f embeddings (the score it ranks with),
    ``t_f`` the teacher's score (chapter 3's hybrid ``z(cos) + w z(BM25_f)``), ``C`` the
    candidate list stored with the FTU. Only the ranking the teacher implies is taught: both
    sides are softmax-normalised, so a shift of either score changes nothing, while ``tau_T``
    sets how sharply the teacher's top candidates dominate. Gradients reach the student only.

    Args:
        student: ``[..., C]`` student cosines.
        teacher: ``[..., C]`` teacher scores (any scale; NaN allowed where ``mask`` is False).
        mask: ``[..., C]`` booleans, False for padding; a list with fewer than 2 candidates has
            nothing to rank and gives 0.
        temperature: the student's tau (the InfoNCE temperature, 0.08, by default).
        teacher_temperature: tau_T.

    Returns:
        ``[...]`` the KL divergence of each list.

    Reference: Hinton et al. (2015), *Distilling the knowledge in a neural network*; listwise
    over retrieval candidates as in Hofstätter et al. (2021, TAS-B) and Lin et al. (2021).

    A student that ranks like the teacher at the same sharpness gives 0; flipping the order of two
    candidates, teacher scores (1, 0) at tau_T = 1, student (0, 1) at tau = 1, gives
    ``σ(1) · 1 + σ(-1) · (-1) = tanh(1/2)``:

    >>> listwise_distillation_loss(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 1.0]), temperature=1.0).abs().item() < 1e-7
    True
    >>> round(listwise_distillation_loss(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]), temperature=1.0).item(), 4)
    0.4621
    >>> listwise_distillation_loss(torch.tensor([[0.3, 0.9, 0.0]]), torch.tensor([[0.0, 0.0, float("nan")]]),
    ...                            torch.tensor([[True, False, False]]))
    tensor([0.])
    """
    s, t, m = _teacher_student_logits(student, teacher, mask, temperature, teacher_temperature)
    # A large finite fill, not -inf: padded entries get probability 0 on both sides without the
    # NaN gradients that -inf - (-inf) would send through torch.where.
    log_pt = torch.log_softmax(t.masked_fill(~m, -1e4), dim=-1)
    log_ps = torch.log_softmax(s.masked_fill(~m, -1e4), dim=-1)
    valid = m.sum(dim=-1) >= 2
    terms = torch.where(m, log_pt.exp() * (log_pt - log_ps), torch.zeros_like(s))
    return terms.sum(dim=-1).masked_fill(~valid, 0.0)


def margin_mse_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 0.08,
    teacher_temperature: float = 1.0,
) -> torch.Tensor:
    r"""Margin-MSE distillation over a candidate list (beyond the paper), each candidate's margin
    taken against the teacher's top candidate ``c^*``:

    .. math::
        \mathcal{L}_{MM}^{(f)} = \frac{1}{|C| - 1}\sum_{c \in C \setminus c^*}
        \Big(\frac{s(d_q, c^*) - s(d_q, c)}{\tau} - \frac{t_f(d_q, c^*) - t_f(d_q, c)}{\tau_T}\Big)^2

    Unlike :func:`listwise_distillation_loss` it asks the student to match the teacher's margins,
    not only its ranking, so ``tau / tau_T`` fixes the scale the two are compared on.

    Args:
        student, teacher, mask, temperature, teacher_temperature: as
            :func:`listwise_distillation_loss`.

    Returns:
        ``[...]`` the mean squared margin error of each list (0 with fewer than 2 candidates).

    Reference: Hofstätter et al. (2020), *Improving efficient neural ranking models with
    cross-architecture knowledge distillation* (pairwise Margin-MSE).

    Teacher (2, 1, 0), student (1, 1, 0) at tau = tau_T = 1: margins (0, 1) against (1, 2):

    >>> margin_mse_loss(torch.tensor([1.0, 1.0, 0.0]), torch.tensor([2.0, 1.0, 0.0]), temperature=1.0).item()
    1.0
    """
    s, t, m = _teacher_student_logits(student, teacher, mask, temperature, teacher_temperature)
    top = t.masked_fill(~m, float("-inf")).argmax(dim=-1, keepdim=True)
    err = (s.gather(-1, top) - s) - (t.gather(-1, top) - t).nan_to_num(0.0)
    others = m & (torch.arange(m.shape[-1], device=m.device) != top)
    n = others.sum(dim=-1)
    sq = torch.where(others, err.square(), torch.zeros_like(err))
    return (sq.sum(dim=-1) / n.clamp(min=1)).masked_fill(n == 0, 0.0)


@dataclass
class LossTerms:
    """The total loss and its parts (for logging)."""

    total: torch.Tensor
    doc_doc: torch.Tensor
    question_doc: torch.Tensor
    kl: torch.Tensor
    kl_lambda: float
    # the teacher-distillation term (0 when its weight is 0: the paper's objective)
    distill: torch.Tensor | None = None

    def as_floats(self) -> dict[str, float]:
        out = {
            "loss": float(self.total.detach()),
            "l_dd": float(self.doc_doc.detach()),
            "l_qd": float(self.question_doc.detach()),
            "l_kl": float(self.kl.detach()),
            "lambda": self.kl_lambda,
        }
        if self.distill is not None:
            out["l_kd"] = float(self.distill.detach())
        return out


def total_loss(
    l_dd: torch.Tensor,
    l_qd: torch.Tensor | None,
    l_kl: torch.Tensor | None,
    kl_lambda: float,
    facet_mask: torch.Tensor | None = None,
    kl_valid: torch.Tensor | None = None,
    l_distill: torch.Tensor | None = None,
    distill_weight: float = 0.0,
    distill_mask: torch.Tensor | None = None,
) -> LossTerms:
    r"""``L_total = 1/|F| Σ_f (L_DD^(f) + L_QD^(f)) + λ · 1/|D| Σ_d L_KL^(d)`` (section 4.2),
    plus ``μ · mean_{(d_q, f)} L_KD^(f)`` when a distillation weight ``μ`` > 0 is given (beyond
    the paper; :func:`listwise_distillation_loss` or :func:`margin_mse_loss`).

    The facet terms are averaged over facets and over the FTUs of the batch; ``facet_mask``
    ``[B, F]`` drops facets an FTU has no positive for. ``l_qd=None`` is the "w/o L_QD"
    ablation, ``l_kl=None`` the "w/o L_KL" one. This is the one place ``L_total`` is computed
    (training reaches it through :func:`unifar.objective.ftu_objective`).

    Args:
        l_dd: ``[B, F]`` :func:`doc_doc_loss`; l_qd: ``[B, F]`` :func:`question_doc_loss` or None.
        l_kl: ``[D]`` :func:`kl_attention_loss` per document, or None.
        kl_lambda: lambda, the weight of L_KL (annealed 0.3 -> 0.5 in the paper).
        facet_mask: ``[B, F]`` booleans; kl_valid: ``[D]`` booleans (documents with labels).
        l_distill: ``[B, F]`` distillation loss per FTU and facet, or None; distill_weight: μ;
        distill_mask: ``[B, F]`` booleans, the (FTU, facet) pairs with a teacher list.

    Returns:
        :class:`LossTerms`: ``L_total`` and its averaged parts.

    >>> t = total_loss(torch.ones(2, 3), torch.ones(2, 3), torch.tensor([2.0, 4.0]), 0.5)
    >>> t.total.item()     # (1 + 1) + 0.5 * 3
    3.5
    >>> kd = torch.tensor([[1.0, 3.0, 9.0], [0.0, 0.0, 0.0]])
    >>> has = torch.tensor([[True, True, False], [False, False, False]])
    >>> t = total_loss(torch.ones(2, 3), None, None, 0.5, l_distill=kd, distill_weight=2.0, distill_mask=has)
    >>> t.total.item(), t.distill.item()     # 1 + 2 * mean(1, 3)
    (5.0, 2.0)
    """
    fm = torch.ones_like(l_dd, dtype=torch.bool) if facet_mask is None else facet_mask.bool()
    denom = fm.sum().clamp(min=1)
    dd = (l_dd * fm).sum() / denom
    qd = (l_qd * fm).sum() / denom if l_qd is not None else l_dd.new_zeros(())
    if l_kl is not None:
        valid = torch.ones_like(l_kl, dtype=torch.bool) if kl_valid is None else kl_valid.bool()
        kl = (l_kl * valid).sum() / valid.sum().clamp(min=1)
    else:
        kl = l_dd.new_zeros(())
    total = dd + qd + kl_lambda * kl
    kd = None
    if l_distill is not None:
        dm = torch.ones_like(l_distill, dtype=torch.bool) if distill_mask is None else distill_mask.bool()
        kd = (l_distill * dm).sum() / dm.sum().clamp(min=1)
        total = total + distill_weight * kd
    return LossTerms(total=total, doc_doc=dd, question_doc=qd, kl=kl, kl_lambda=kl_lambda, distill=kd)
