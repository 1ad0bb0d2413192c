"""The training objective of UniFAR (paper section 4.2) on Facet-Aware Training Units (FTUs).

Reading order:

* :class:`FTUBatch` / :func:`build_ftu_batch` -- the documents and questions of a few FTUs as
  padded index tensors (unique documents once, every FTU's query, positives, negatives and
  questions as indices into them);
* :func:`ftu_objective` -- one forward over the documents, one over the questions, the masking
  and rescaling of the per-facet terms, then ``L_total`` by :func:`unifar.losses.total_loss`
  (the one place it is computed):
  ``L_total = 1/|F| sum_f (L_DD^(f) + L_QD^(f)) + lambda 1/|D| sum_d L_KL^(d)``;
* :func:`ftu_batch_loss` -- both steps on a list of FTUs, with ``lambda`` from the KL schedule
  :meth:`unifar.config.UniFARConfig.kl_lambda` (linear in training progress, section 4.2);
* :func:`held_out_loss` -- the mean loss terms over held-out FTUs, as training logs them.

Forwards run through the base encoder, or over a :class:`~unifar.caching.TokenStateCache` of a
frozen base's states (``TrainArgs.freeze_base``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from .caching import TokenStateCache
from .distillation import distillation_terms, teacher_tensors
from .losses import LossTerms, doc_doc_loss, kl_attention_loss, question_doc_loss, total_loss
from .model import UniFAR
from .text import Batch, EncodedInput, collate

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from .config import TrainArgs
    from .datasets.ftu import FTU

__all__ = [
    "FTUBatch",
    "build_ftu_batch",
    "unit_labels",
    "ftu_objective",
    "ftu_batch_loss",
    "held_out_loss",
    "Objective",
]


# ================================================================================ batches
@dataclass
class FTUBatch:
    """A few FTUs as tensors: unique documents once, everything else as indices into them.

    Shapes: ``B`` FTUs, ``F`` facets, ``P``/``N`` positives/negatives per facet (padded),
    ``D`` unique documents, ``M`` questions, ``n`` sentences (units) per document.
    """

    documents: Batch  # D documents (query, positives, negatives of all FTUs, deduplicated)
    doc_labels: torch.Tensor  # [D, n] facet index of each kept unit, -1: title/unlabelled/none
    questions: Batch | None  # M questions, or None when the FTUs have none
    query_idx: torch.Tensor  # [B] row of d_q in documents
    pos_idx: torch.Tensor  # [B, F, P] rows of D_pos^(f) (0 where padded)
    pos_mask: torch.Tensor  # [B, F, P] bool
    neg_idx: torch.Tensor  # [B, F, N]
    neg_mask: torch.Tensor  # [B, F, N] bool
    question_idx: torch.Tensor  # [B, F] row of q^(f) in questions (0 where missing)
    question_mask: torch.Tensor  # [B, F] bool
    facet_mask: torch.Tensor  # [B, F] bool: FTU b has a positive for facet f
    doc_ids: list[str] = field(default_factory=list)
    question_texts: list[str] = field(default_factory=list)
    # Teacher lists (distillation, beyond the paper); None when the batch carries none.
    teacher_idx: torch.Tensor | None = None  # [B, K] rows of the teacher's candidates (0 where padded)
    teacher_scores: torch.Tensor | None = None  # [B, F, K] teacher scores (0 where masked)
    teacher_mask: torch.Tensor | None = None  # [B, F, K] bool: candidate k has a facet-f teacher score

    @property
    def n_ftus(self) -> int:
        return int(self.query_idx.shape[0])

    def to(self, device: torch.device | str) -> "FTUBatch":
        moved = {
            f.name: (getattr(self, f.name).to(device) if hasattr(getattr(self, f.name), "to") else getattr(self, f.name))
            for f in fields(self)
        }
        return FTUBatch(**moved)


def _cap(ids: Sequence[str], cap: int | None, rng: np.random.Generator) -> list[str]:
    """At most ``cap`` ids, sampled without replacement (kept in their original order)."""
    if cap is None or len(ids) <= cap:
        return list(ids)
    keep = np.sort(rng.choice(len(ids), size=cap, replace=False))
    return [ids[i] for i in keep]


def unit_labels(doc: Mapping[str, Any], item: EncodedInput, facet_index: Mapping[str, int]) -> list[int] | None:
    """The facet index of each kept unit of ``doc`` (title -> -1), or None without labels.

    The units are the title (if any) then the non-empty sentences, minus sentences that
    tokenise to nothing, minus the truncated tail; labels follow the same filtering.

    >>> doc = {"title": "T", "sentences": ["A.", "B.", "C."], "labels": ["method", None, "result"]}
    >>> item = EncodedInput([], [], ["T", "A.", "B."], has_title=True, truncated=True)  # "C." cut
    >>> unit_labels(doc, item, {"background": 0, "method": 1, "result": 2})
    [-1, 1, -1]
    """
    labels = doc.get("labels")
    if labels is None:
        return None
    sents = doc.get("sentences") or []
    if len(labels) != len(sents):
        raise ValueError(f"document {doc.get('id')!r}: {len(sents)} sentences but {len(labels)} labels")
    title = " ".join((doc.get("title") or "").split())
    texts = ([title] if title else []) + [" ".join(s.split()) for s in sents]
    labs = ([-1] if title else []) + [facet_index.get(lab, -1) if lab else -1 for lab in labels]
    keep = [i for i, t in enumerate(texts) if t]
    texts, labs = [texts[i] for i in keep], [labs[i] for i in keep]
    units = item.units
    if texts[: len(units)] == units:  # the usual case: nothing dropped but the truncated tail
        return labs[: len(units)]
    # Rare: a sentence tokenised to nothing and was dropped; units are an ordered subsequence.
    out, j = [], 0
    for u in units:
        while j < len(texts) and texts[j] != u:
            j += 1
        out.append(labs[j] if j < len(texts) else -1)
        j += 1
    return out


def _pad_indices(lists: list[list[list[int]]], B: int, F_: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-FTU, per-facet row lists as ``[B, F, P]`` indices (0 where padded) and their mask."""
    width = max(1, max(len(x) for per_ftu in lists for x in per_ftu))  # P >= 1 keeps shapes valid
    idx = np.zeros((B, F_, width), dtype=np.int64)
    mask = np.zeros((B, F_, width), dtype=bool)
    for b, per_ftu in enumerate(lists):
        for f, x in enumerate(per_ftu):
            idx[b, f, : len(x)] = x
            mask[b, f, : len(x)] = True
    return torch.from_numpy(idx), torch.from_numpy(mask)


def _document_labels(docs: Sequence[Mapping[str, Any]], items: Sequence[EncodedInput], n_max: int,
                     facet_index: Mapping[str, int]) -> torch.Tensor:
    """``[D, n_max]`` facet index of each kept unit of each document (:func:`unit_labels`), -1 elsewhere."""
    labels = np.full((len(items), n_max), -1, dtype=np.int64)
    for i, (doc, item) in enumerate(zip(docs, items)):
        lab = unit_labels(doc, item, facet_index)
        if lab:
            labels[i, : len(lab)] = lab
    return torch.from_numpy(labels)


def build_ftu_batch(
    model: UniFAR,
    ftus: Sequence[FTU],
    documents: Mapping[str, Mapping[str, Any]],
    max_positives: int | None = None,
    max_negatives: int | None = None,
    rng: np.random.Generator | None = None,
    teacher: bool | None = None,
    max_teacher_candidates: int | None = None,
) -> FTUBatch:
    """Tokenise the unique documents and the questions of ``ftus`` and index them per FTU/facet.

    Per facet, at most ``max_positives`` positives and ``max_negatives`` negatives are kept,
    sampled with ``rng`` (our choice; the paper uses every one). Facets are those of
    ``model.config.facets``; an FTU facet without positives is masked out of the loss.
    ``teacher`` (default: ``model.config.distill_weight > 0``) adds the FTUs' teacher lists (at
    most ``max_teacher_candidates`` candidates each, :func:`unifar.distillation.cap_teacher`) for
    distillation.
    """
    if not ftus:
        raise ValueError("build_ftu_batch needs at least one FTU")
    rng = rng if rng is not None else np.random.default_rng(0)
    facets = model.config.facets
    fidx = {f: i for i, f in enumerate(facets)}
    B, F_ = len(ftus), len(facets)
    rows: dict[str, int] = {}

    def row(doc_id: str) -> int:
        if doc_id not in documents:
            raise KeyError(f"FTU refers to document {doc_id!r}, which is not in the documents")
        return rows.setdefault(doc_id, len(rows))

    query_idx = [row(u.query) for u in ftus]
    pos: list[list[list[int]]] = []
    neg: list[list[list[int]]] = []
    q_texts: list[str] = []
    q_idx = np.zeros((B, F_), dtype=np.int64)
    q_mask = np.zeros((B, F_), dtype=bool)
    for b, u in enumerate(ftus):
        pos.append([[row(d) for d in _cap(u.positives.get(f, []), max_positives, rng)] for f in facets])
        neg.append([[row(d) for d in _cap(u.negatives.get(f, []), max_negatives, rng)] for f in facets])
        for f, question in u.questions.items():
            if f in fidx and question is not None:
                q_idx[b, fidx[f]] = len(q_texts)
                q_mask[b, fidx[f]] = True
                q_texts.append(question.text)

    pos_idx, pos_mask = _pad_indices(pos, B, F_)
    neg_idx, neg_mask = _pad_indices(neg, B, F_)
    use_teacher = model.config.distill_weight > 0 if teacher is None else teacher
    t_idx = t_scores = t_mask = None
    if use_teacher and any(u.teacher is not None for u in ftus):
        t_idx, t_scores, t_mask = teacher_tensors(ftus, row, fidx, max_teacher_candidates, rng)
    doc_ids = list(rows)
    docs = [documents[d] for d in doc_ids]
    items = model.tokenize_documents(docs)
    pad_id = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    doc_batch = collate(items, pad_id)
    labels = _document_labels(docs, items, doc_batch.max_sentences, fidx)
    questions = collate(model.tokenize_questions(q_texts), pad_id) if q_texts else None
    return FTUBatch(
        documents=doc_batch,
        doc_labels=labels,
        questions=questions,
        query_idx=torch.tensor(query_idx, dtype=torch.long),
        pos_idx=pos_idx,
        pos_mask=pos_mask,
        neg_idx=neg_idx,
        neg_mask=neg_mask,
        question_idx=torch.from_numpy(q_idx),
        question_mask=torch.from_numpy(q_mask),
        facet_mask=pos_mask.any(dim=-1),
        doc_ids=doc_ids,
        question_texts=q_texts,
        teacher_idx=t_idx,
        teacher_scores=t_scores,
        teacher_mask=t_mask,
    )


# ================================================================================ the objective
def _encode(model: nn.Module, batch: Batch, cache: TokenStateCache | None, need_kl_attention: bool = False) -> Any:
    """``model(batch)``, or the aggregation module over cached frozen-base states."""
    if cache is None:
        return model(batch, need_kl_attention=need_kl_attention)
    core: UniFAR = model.module if hasattr(model, "module") else model  # type: ignore[assignment]
    tokens = core.upper_states(cache.token_states(core, batch), batch.attention_mask, cache.top_layers)
    return core.aggregate(tokens, batch, need_kl_attention)


def ftu_objective(model: nn.Module, fb: FTUBatch, kl_lambda: float, cache: TokenStateCache | None = None) -> LossTerms:
    r"""The training loss of section 4.2 on a prepared :class:`FTUBatch` (already on the device).

    One forward over the unique documents (with the detached-base attention for L_KL) and one
    over the questions; per-FTU tensors come from index gathering:

    * ``L_DD^(f) = L_CL(a = d_q, P = {d_+^(f)}, N = {d_-^(f)})`` (section 4.2, eq. for L_DD);
    * ``L_QD^(f) = L_CL(a = q^(f), P = {d_q} u {d_+^(f)}, N = {d_-^(f)})`` for facets with a
      question (documents detached inside :func:`unifar.losses.question_doc_loss`, figure 2);
    * ``L_KL^(d)`` for every document of the batch with at least one labelled kept sentence;
    * ``L_total = 1/|F| sum_f (L_DD + L_QD) + lambda 1/|D| sum_d L_KL`` (:func:`unifar.losses.total_loss`).

    ``model.config.use_kl_loss`` / ``use_qd_loss`` switch the table-3 ablations off. A facet with
    a question but no document positive (e.g. a real question for its own abstract) still has
    the L_QD term (its positive set is {d_q}); its L_DD term is masked out. ``cache``: see
    :class:`~unifar.caching.TokenStateCache`.
    """
    core: UniFAR = model.module if hasattr(model, "module") else model  # type: ignore[assignment]
    cfg = core.config
    out = _encode(model, fb.documents, cache, need_kl_attention=cfg.use_kl_loss)
    E = out.embeddings  # [D, F, h]
    F_ = E.shape[1]
    f_col = torch.arange(F_, device=E.device)
    dq = E[fb.query_idx]  # [B, F, h]
    # E[rows, f] picks the facet-f embedding of each indexed document: [B, F, P, h]
    pos = E[fb.pos_idx, f_col[None, :, None]]
    neg = E[fb.neg_idx, f_col[None, :, None]]
    fm = fb.facet_mask
    qm = fb.question_mask if (cfg.use_qd_loss and fb.questions is not None) else torch.zeros_like(fm)
    # total_loss averages both terms over one mask; with `union` as that mask, rescaling each
    # term makes L_DD the mean over (FTU, facet) pairs with a positive and L_QD the mean over
    # pairs with a question (both identical to the plain means when every facet has both).
    union = fm | qm
    n_union = union.sum().clamp(min=1)
    l_dd = doc_doc_loss(dq, pos, neg, cfg.temperature, fb.pos_mask, fb.neg_mask)
    l_dd = l_dd * fm * (n_union / fm.sum().clamp(min=1)).to(l_dd.dtype)

    l_qd = None
    if cfg.use_qd_loss:
        if bool(qm.any()):
            Q = _encode(model, fb.questions, cache).embeddings  # [M, F, h]
            q = Q[fb.question_idx, f_col[None, :]]  # [B, F, h]
            l_qd = question_doc_loss(q, dq, pos, neg, cfg.temperature, fb.pos_mask, fb.neg_mask)
            l_qd = l_qd * qm * (n_union / qm.sum().clamp(min=1)).to(l_qd.dtype)
        else:
            l_qd = l_dd.new_zeros(l_dd.shape)

    l_kl = kl_valid = None
    if cfg.use_kl_loss:
        l_kl, kl_valid = kl_attention_loss(out.kl_attention, fb.doc_labels, out.sentence_mask)
    l_kd, kd_mask = distillation_terms(cfg, dq, E, fb)
    return total_loss(l_dd, l_qd, l_kl, kl_lambda, facet_mask=union, kl_valid=kl_valid,
                      l_distill=l_kd, distill_weight=cfg.distill_weight, distill_mask=kd_mask)


def ftu_batch_loss(
    model: UniFAR,
    ftus: Sequence[FTU],
    documents: Mapping[str, Mapping[str, Any]],
    progress: float = 0.0,
    *,
    max_positives: int | None = None,
    max_negatives: int | None = None,
    rng: np.random.Generator | None = None,
    cache: TokenStateCache | None = None,
    teacher: bool | None = None,
    max_teacher_candidates: int | None = None,
) -> LossTerms:
    r"""``L_total`` (section 4.2) of a list of FTUs, with ``lambda = config.kl_lambda(progress)``.

    :func:`build_ftu_batch` then :func:`ftu_objective`; see those for the equations. The caller
    chooses train/eval mode and autocast. ``teacher``: see :func:`build_ftu_batch`.
    """
    fb = build_ftu_batch(model, ftus, documents, max_positives, max_negatives, rng, teacher,
                         max_teacher_candidates).to(model.device)
    return ftu_objective(model, fb, model.config.kl_lambda(progress), cache)


def held_out_loss(
    model: UniFAR, ftus: Sequence[FTU], documents: Mapping[str, Any], args: TrainArgs, progress: float,
    autocast: AbstractContextManager[Any], cache: TokenStateCache | None = None,
) -> dict[str, float]:
    """Mean loss terms over held-out FTUs (eval mode, fixed cap sample so values are comparable).

    ``args`` is the run's :class:`~unifar.train.TrainArgs` (its ``seed``, ``max_positives``,
    ``max_negatives`` and ``max_teacher_candidates``); ``progress`` sets ``lambda``; ``autocast``
    is the run's autocast context. Held-out FTUs with teacher lists also report ``l_kd``, the
    distillation loss, whatever its weight in training: the held-out curve of how closely the
    student ranks like the teacher, for runs of the paper's objective too.
    """
    was_training = model.training
    model.eval()
    bs = model.config.batch_size
    sums: dict[str, float] = {}
    rng = np.random.default_rng([args.seed, 999_983])
    with torch.no_grad():
        for k in range(0, len(ftus), bs):
            with autocast:
                t = ftu_batch_loss(model, ftus[k : k + bs], documents, progress,
                                   max_positives=args.max_positives, max_negatives=args.max_negatives, rng=rng,
                                   cache=cache, teacher=True,
                                   max_teacher_candidates=getattr(args, "max_teacher_candidates", None))
            for name, v in t.as_floats().items():
                sums[name] = sums.get(name, 0.0) + v * len(ftus[k : k + bs])
    model.train(was_training)
    return {k: v / len(ftus) for k, v in sums.items()}



class Objective(nn.Module):
    """Wraps the model so that DistributedDataParallel sees one forward (two model calls) per backward."""

    def __init__(self, model: UniFAR, cache: TokenStateCache | None = None) -> None:
        super().__init__()
        self.model = model
        self.cache = cache

    def forward(self, fb: FTUBatch, kl_lambda: float) -> LossTerms:
        # DDP's find_unused_parameters walks the autograd graph from the tensors of LossTerms.
        return ftu_objective(self.model, fb, kl_lambda, self.cache)

