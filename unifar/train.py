"""Training UniFAR on Facet-Aware Training Units (paper section 4.2 and appendix A).

Reading order:

* :func:`build_ftu_batch` -- the documents and questions of a few FTUs as padded index tensors;
* :func:`ftu_objective` / :func:`ftu_batch_loss` -- one forward over the documents, one over the
  questions, then ``L_total = 1/|F| sum_f (L_DD^(f) + L_QD^(f)) + lambda 1/|D| sum_d L_KL^(d)``;
* :class:`TrainArgs` and :func:`train` -- AdamW with the paper's three learning-rate groups,
  linear warm-up, gradient accumulation, bf16/TF32 on CUDA, checkpoints, exact resume, logs.

Launch on one device (CPU or one GPU)::

    python -m unifar train --ftus data/ftus --output runs/unifar-minilm

or on several GPUs of one machine with ``torchrun`` (PyTorch DistributedDataParallel; every rank
takes a disjoint shard of each epoch's seeded permutation, rank 0 alone writes files)::

    torchrun --nproc_per_node 4 -m unifar train --ftus data/ftus --output runs/unifar-mpnet --profile paper

On a CPU the ranks use the gloo backend, which is how ``tests/test_train_distributed.py`` runs
this path without a GPU: two ranks end with the weights of one process that sees the same global
batch (DDP averages what that process accumulates), and a two-rank run resumes bit for bit.

``config.batch_size`` FTUs form one micro-batch *per rank*; ``config.grad_accumulation``
micro-batches form one optimizer step, so one step sees ``batch_size x grad_accumulation x
world_size`` FTUs (the paper trains with batch 4 and accumulation 4 on four GPUs and does not say
whether its batch of 4 is per GPU).

Our choices where the paper is silent (each also noted where it is made): linear *decay* after
the warm-up, gradient clipping at norm 1.0, weight decay 0.01 on every matrix (not on biases or
LayerNorm weights), lambda's progress measured in optimizer steps, and per-facet caps on the
number of positives/negatives (none by default, as in the paper).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from .config import UniFARConfig
from .files import atomic_dir
from .losses import LossTerms, doc_doc_loss, kl_attention_loss, question_doc_loss, total_loss
from .model import TokenStateCache, UniFAR, pick_device
from .text import Batch, EncodedInput, collate

__all__ = [
    "FTUBatch",
    "build_ftu_batch",
    "ftu_objective",
    "ftu_batch_loss",
    "TrainArgs",
    "TrainResult",
    "TrainingDiverged",
    "train",
    "make_optimizer",
    "warmup_linear_factor",
    "epoch_shard",
    "latest_checkpoint",
    "read_log",
    "summarize_log",
    "PAPER_PROFILE",
]

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
TRAINER_STATE = "trainer_state.json"

# UniFARConfig fields that only the training loop reads; every other field shapes the model.
TRAINING_FIELDS = frozenset({
    "temperature", "kl_lambda_start", "kl_lambda_end", "lr_base", "lr_anchors", "lr_aggregation",
    "weight_decay", "warmup_ratio", "batch_size", "grad_accumulation", "epochs", "use_kl_loss",
    "use_qd_loss",
})


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


def _unit_labels(doc: Mapping[str, Any], item: EncodedInput, facet_index: Mapping[str, int]) -> list[int] | None:
    """The facet index of each kept unit of ``doc`` (title -> -1), or None without labels.

    The units are the title (if any) then the non-empty sentences, minus sentences that
    tokenise to nothing, minus the truncated tail; labels follow the same filtering.
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


def build_ftu_batch(
    model: UniFAR,
    ftus: Sequence[Any],
    documents: Mapping[str, Mapping[str, Any]],
    max_positives: int | None = None,
    max_negatives: int | None = None,
    rng: np.random.Generator | None = None,
) -> FTUBatch:
    """Tokenise the unique documents and the questions of ``ftus`` and index them per FTU/facet.

    Per facet, at most ``max_positives`` positives and ``max_negatives`` negatives are kept,
    sampled with ``rng`` (our choice; the paper uses every one). Facets are those of
    ``model.config.facets``; an FTU facet without positives is masked out of the loss.
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

    def pad(lists: list[list[list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(1, max(len(x) for per_ftu in lists for x in per_ftu))  # P >= 1 keeps shapes valid
        idx = np.zeros((B, F_, width), dtype=np.int64)
        mask = np.zeros((B, F_, width), dtype=bool)
        for b, per_ftu in enumerate(lists):
            for f, x in enumerate(per_ftu):
                idx[b, f, : len(x)] = x
                mask[b, f, : len(x)] = True
        return torch.from_numpy(idx), torch.from_numpy(mask)

    pos_idx, pos_mask = pad(pos)
    neg_idx, neg_mask = pad(neg)
    doc_ids = list(rows)
    docs = [documents[d] for d in doc_ids]
    items = model.tokenize_documents(docs)
    pad_id = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    doc_batch = collate(items, pad_id)
    labels = np.full((len(items), doc_batch.max_sentences), -1, dtype=np.int64)
    for i, (doc, item) in enumerate(zip(docs, items)):
        lab = _unit_labels(doc, item, fidx)
        if lab:
            labels[i, : len(lab)] = lab
    questions = collate(model.tokenize_questions(q_texts), pad_id) if q_texts else None
    return FTUBatch(
        documents=doc_batch,
        doc_labels=torch.from_numpy(labels),
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
    )


# ================================================================================ frozen base
def _encode(model: nn.Module, batch: Batch, cache: TokenStateCache | None, need_kl_attention: bool = False) -> Any:
    """``model(batch)``, or the aggregation module over cached frozen-base states."""
    if cache is None:
        return model(batch, need_kl_attention=need_kl_attention)
    core: UniFAR = model.module if hasattr(model, "module") else model  # type: ignore[assignment]
    tokens = core.upper_states(cache.token_states(core, batch), batch.attention_mask, cache.top_layers)
    return core.aggregate(tokens, batch, need_kl_attention)


def _frozen_base_mode(model: UniFAR, top_k: int, dropout: bool = False) -> None:
    """Frozen layers in eval mode (no dropout: a cached input's states are the same every epoch);
    the top ``top_k`` layers, which train, in train mode (dropout as in fine-tuning) only with
    ``dropout`` (``TrainArgs.top_layers_dropout``)."""
    model.base.eval()
    if top_k and dropout:
        model.top_base_layers(top_k).train()


# ================================================================================ losses
def ftu_objective(model: nn.Module, fb: FTUBatch, kl_lambda: float, cache: TokenStateCache | None = None) -> LossTerms:
    r"""The training loss of section 4.2 on a prepared :class:`FTUBatch` (already on the device).

    One forward over the unique documents (with the detached-base attention for L_KL) and one
    over the questions; per-FTU tensors come from index gathering:

    * ``L_DD^(f) = L_CL(a = d_q, P = {d_+^(f)}, N = {d_-^(f)})`` (section 4.2, eq. for L_DD);
    * ``L_QD^(f) = L_CL(a = q^(f), P = {d_q} u {d_+^(f)}, N = {d_-^(f)})`` for facets with a
      question (documents detached inside :func:`unifar.losses.question_doc_loss`, figure 2);
    * ``L_KL^(d)`` for every document of the batch with at least one labelled kept sentence;
    * ``L_total = 1/|F| sum_f (L_DD + L_QD) + lambda 1/|D| sum_d L_KL`` (:func:`total_loss`).

    ``model.config.use_kl_loss`` / ``use_qd_loss`` switch the table-3 ablations off. A facet with
    a question but no document positive (e.g. a real question for its own abstract) still has
    the L_QD term (its positive set is {d_q}); its L_DD term is masked out. ``cache``: see
    :class:`TokenStateCache`.
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
    return total_loss(l_dd, l_qd, l_kl, kl_lambda, facet_mask=union, kl_valid=kl_valid)


def ftu_batch_loss(
    model: UniFAR,
    ftus: Sequence[Any],
    documents: Mapping[str, Mapping[str, Any]],
    progress: float = 0.0,
    *,
    max_positives: int | None = None,
    max_negatives: int | None = None,
    rng: np.random.Generator | None = None,
    cache: TokenStateCache | None = None,
) -> LossTerms:
    r"""``L_total`` (section 4.2) of a list of FTUs, with ``lambda = config.kl_lambda(progress)``.

    :func:`build_ftu_batch` then :func:`ftu_objective`; see those for the equations. The caller
    chooses train/eval mode and autocast.
    """
    fb = build_ftu_batch(model, ftus, documents, max_positives, max_negatives, rng).to(model.device)
    return ftu_objective(model, fb, model.config.kl_lambda(progress), cache)


class _Objective(nn.Module):
    """Wraps the model so that DistributedDataParallel sees one forward (two model calls) per backward."""

    def __init__(self, model: UniFAR, cache: TokenStateCache | None = None) -> None:
        super().__init__()
        self.model = model
        self.cache = cache

    def forward(self, fb: FTUBatch, kl_lambda: float) -> LossTerms:
        # DDP's find_unused_parameters walks the autograd graph from the tensors of LossTerms.
        return ftu_objective(self.model, fb, kl_lambda, self.cache)


# ================================================================================ run options
@dataclass
class TrainArgs:
    """Run-level options (everything the paper's hyper-parameters in :class:`UniFARConfig` are not)."""

    output_dir: str = "runs/unifar"
    epochs: int | None = None  # overrides config.epochs
    max_steps: int | None = None  # stop (and end the schedule) after this many optimizer steps
    max_positives: int | None = None  # per facet and FTU, sampled (our choice; paper: all)
    max_negatives: int | None = None
    save_every: int = 500  # optimizer steps between checkpoints (and one at the end)
    keep_checkpoints: int = 2
    log_every: int = 1  # optimizer steps between log.jsonl records
    eval_fraction: float = 0.0  # FTUs held out (seeded) for a held-out loss
    eval_every: int = 0  # optimizer steps between held-out losses (0: only at the end)
    eval_max_ftus: int | None = 256
    seed: int = 0
    device: str | None = None  # default: cuda when available (the local rank's GPU under torchrun)
    bf16: bool | None = None  # bf16 autocast; default: on CUDA only
    tf32: bool = True  # TF32 matmuls/convolutions on CUDA
    grad_clip: float | None = 1.0  # our choice: the paper does not clip
    max_loss: float = 100.0  # a total loss above this stops the run (InfoNCE at tau=0.08 stays below ~60)
    resume: bool = False
    progress: bool = True  # tqdm bar (rank 0)
    # Our CPU profile: the base encoder is frozen (eval mode, no gradient) and its token states
    # cached per input, so only the anchors and the aggregation module train. The paper
    # fine-tunes the base as well (False).
    freeze_base: bool = False
    # With freeze_base: the top k transformer layers of the base still train (at lr_base), on
    # cached states of the frozen layers below; a CPU-sized step towards the paper's trainable base.
    train_top_layers: int = 0
    # Dropout in those trained layers (the encoder's own rates). Off by default, our CPU choice:
    # on a CPU, dropout's random masks and the unfused attention they force cost about half of
    # a top-layer training step (measured here on MiniLM: 2.97 s -> 1.44 s per 4 FTUs).
    top_layers_dropout: bool = False

    def __post_init__(self) -> None:
        for name in ("save_every", "keep_checkpoints", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("epochs", "max_steps", "max_positives", "max_negatives", "eval_max_ftus"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} must be at least 1 (or None), got {v}")
        if self.train_top_layers < 0:
            raise ValueError(f"train_top_layers must be at least 0, got {self.train_top_layers}")
        if self.train_top_layers and not self.freeze_base:
            raise ValueError("train_top_layers needs freeze_base=True (without it the whole base trains)")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    model: UniFAR
    output_dir: Path
    final_dir: Path | None
    steps: int
    start_step: int
    last_checkpoint: Path | None
    last_terms: dict[str, float]
    run_info: dict[str, Any]


class TrainingDiverged(RuntimeError):
    """The loss became NaN/inf or exceeded ``TrainArgs.max_loss``; nothing was saved after it."""

    def __init__(self, step: int, terms: Mapping[str, float], last_checkpoint: Path | None, reason: str) -> None:
        self.step, self.terms, self.last_checkpoint = step, dict(terms), last_checkpoint
        shown = ", ".join(f"{k}={v:.4g}" for k, v in terms.items())
        where = f"last checkpoint: {last_checkpoint}" if last_checkpoint else "no checkpoint was written yet"
        super().__init__(f"training diverged at optimizer step {step}: {reason} ({shown}); {where}")


# ================================================================================ schedule
def warmup_linear_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Learning-rate factor: linear warm-up over ``warmup_steps`` (appendix A, 5 %), then linear
    decay to 0 at ``total_steps`` (the decay is our choice; the paper names only the warm-up).

    >>> [round(warmup_linear_factor(s, 2, 6), 3) for s in range(7)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]
    """
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def make_optimizer(model: UniFAR, config: UniFARConfig) -> torch.optim.AdamW:
    """AdamW over the paper's three groups (appendix A): base encoder (``lr_base``), facet anchors
    (``lr_anchors``), the rest of the aggregation module (``lr_aggregation``). Weight decay
    applies to matrices only; biases and LayerNorm weights (1-D tensors) get none."""
    lrs = {"base": config.lr_base, "anchors": config.lr_anchors, "aggregation": config.lr_aggregation}
    groups = []
    for name, params in model.parameter_groups().items():
        # 1-D tensors, and matrices whose frozen rows must not shrink (train_values=False)
        decay = [p for p in params if p.ndim >= 2 and not getattr(p, "_unifar_no_decay", False)]
        no_decay = [p for p in params if p.ndim < 2 or getattr(p, "_unifar_no_decay", False)]
        if decay:
            groups.append({"params": decay, "lr": lrs[name], "weight_decay": config.weight_decay, "name": name})
        if no_decay:
            groups.append({"params": no_decay, "lr": lrs[name], "weight_decay": 0.0, "name": f"{name}/no_decay"})
    return torch.optim.AdamW(groups, lr=config.lr_base)


def epoch_shard(n: int, seed: int, epoch: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
    """This rank's FTU indices for ``epoch``: a seeded permutation, dealt round-robin to ranks
    and cut to equal length (DDP needs the same number of steps on every rank).

    >>> epoch_shard(6, 0, 0).tolist() == epoch_shard(6, 0, 0).tolist()
    True
    >>> sorted(epoch_shard(6, 0, 1, 0, 2).tolist() + epoch_shard(6, 0, 1, 1, 2).tolist())
    [0, 1, 2, 3, 4, 5]
    """
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    per_rank = n // world_size
    return perm[rank::world_size][:per_rank]


# ================================================================================ checkpoints
def _checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (their trainer_state.json exists), oldest first."""
    root = output_dir / CHECKPOINTS
    found = []
    if root.is_dir():
        for p in root.glob("step-*"):
            if p.is_dir() and (p / TRAINER_STATE).is_file() and p.name[5:].isdigit():
                found.append((int(p.name[5:]), p))
    return sorted(found)


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under ``output_dir/checkpoints``, or None."""
    found = _checkpoints(Path(output_dir))
    return found[-1][1] if found else None


def _rng_state() -> dict[str, Any]:
    """Every RNG this loop uses, in a form ``torch.load(weights_only=True)`` accepts."""
    version, state, gauss = random.getstate()
    np_state = np.random.get_state()
    return {
        "python": {"version": version, "state": list(state), "gauss": gauss},
        "numpy": {
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def _set_rng_state(s: Mapping[str, Any]) -> None:
    p = s["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    n = s["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(s["torch"])
    if s.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


# ================================================================================ run facts
def _git_commit() -> dict[str, Any] | None:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=10
        )
        return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return None


def _machine(device: torch.device, world_size: int) -> dict[str, Any]:
    import transformers

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "world_size": world_size,
    }


def _peak_memory(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        return {"kind": "cuda_max_memory_allocated", "bytes": int(torch.cuda.max_memory_allocated(device))}
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
        return {"kind": "max_rss", "bytes": int(kb) * (1 if sys.platform == "darwin" else 1024)}
    except ImportError:  # pragma: no cover - Windows
        return {"kind": "unavailable", "bytes": None}


def read_log(path_or_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``log.jsonl`` (or of ``DIR/log.jsonl``)."""
    p = Path(path_or_dir)
    if p.is_dir():
        p = p / "log.jsonl"
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def summarize_log(records: Sequence[Mapping[str, Any]], window: int = 50,
                  terms: Sequence[str] = ("loss", "l_dd", "l_qd", "l_kl")) -> dict[str, Any]:
    """A run's loss curve in a few numbers: the first and last logged step's ``terms``, their
    means over the first and last ``window`` steps (at most half the run each, so the two never
    overlap), and every held-out record (``{"step", **terms}``).

    >>> log = [{"step": i + 1, "loss": 2.0 - 0.1 * i} for i in range(10)]
    >>> s = summarize_log(log, window=4, terms=("loss",))
    >>> s["steps"], s["window"], s["first"], round(s["last_mean"]["loss"], 2)
    (10, 4, {'loss': 2.0}, 1.25)
    """
    if not records:
        raise ValueError("the log has no records")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    w = max(1, min(window, len(records) // 2))

    def mean(part: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        return {t: float(np.mean([r[t] for r in part])) for t in terms}

    return {
        "steps": int(records[-1].get("step", len(records))),
        "window": w,
        "first": {t: float(records[0][t]) for t in terms},
        "last": {t: float(records[-1][t]) for t in terms},
        "first_mean": mean(records[:w]),
        "last_mean": mean(records[-w:]),
        "held_out": [{"step": r.get("step"), **{t: float(r["eval"][t]) for t in terms if t in r["eval"]}}
                     for r in records if r.get("eval")],
    }


# ================================================================================ distributed
def _init_distributed() -> tuple[int, int, int, bool]:
    """``(rank, world_size, local_rank, initialised_here)`` from torchrun's environment variables."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0, False
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), False
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), True


# ================================================================================ training
def _check_config(model: UniFAR, config: UniFARConfig) -> None:
    a, b = model.config.to_dict(), config.to_dict()
    differ = sorted(k for k in a if k not in TRAINING_FIELDS and a[k] != b[k])
    if differ:
        raise ValueError(
            f"config and model.config differ in model field(s) {differ}; build the model from the config "
            "or pass config=None to train with model.config"
        )


def _held_out_loss(
    model: UniFAR, ftus: Sequence[Any], documents: Mapping[str, Any], args: TrainArgs, progress: float, autocast: Any,
    cache: TokenStateCache | None = None,
) -> dict[str, float]:
    """Mean loss terms over held-out FTUs (eval mode, fixed cap sample so values are comparable)."""
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
                                   cache=cache)
            for name, v in t.as_floats().items():
                sums[name] = sums.get(name, 0.0) + v * len(ftus[k : k + bs])
    model.train(was_training)
    return {k: v / len(ftus) for k, v in sums.items()}


def train(
    config: UniFARConfig | None,
    ftu_dataset: Any,
    args: TrainArgs,
    model: UniFAR | None = None,
    *,
    resume: bool | None = None,
    eval_dataset: Any | None = None,
    callbacks: Iterable[Callable[[dict[str, Any]], None]] = (),
    state_cache: TokenStateCache | None = None,
) -> TrainResult:
    """Train UniFAR on an :class:`~unifar.construction.ftu.FTUDataset` (section 4.2, appendix A).

    ``model=None`` builds ``UniFAR(config)``; a given model must match ``config`` in every model
    field (training fields may differ; ``config=None`` uses ``model.config``). ``resume`` (default
    ``args.resume``) restarts from the latest complete checkpoint in ``args.output_dir``; on the
    CPU the resumed run ends with exactly the weights of an uninterrupted one. ``eval_dataset``
    (FTUs with their documents) gives a held-out loss; otherwise ``args.eval_fraction`` of the
    FTUs is held out. Each ``callbacks`` entry is called with every step's log record (all ranks).
    ``state_cache`` (with ``args.freeze_base``): a :class:`~unifar.model.TokenStateCache` to reuse
    across runs on the same frozen base (e.g. a sweep); a fresh one by default.
    """
    resume = args.resume if resume is None else resume
    rank, world, local_rank, dist_here = _init_distributed()
    is_main = rank == 0
    try:
        return _train(config, ftu_dataset, args, model, resume, eval_dataset, list(callbacks), rank, world, local_rank, is_main,
                      state_cache)
    finally:
        if dist_here:
            import torch.distributed as dist

            dist.destroy_process_group()


def _train(
    config: UniFARConfig | None,
    ds: Any,
    args: TrainArgs,
    model: UniFAR | None,
    resume: bool,
    eval_dataset: Any | None,
    callbacks: list[Callable[[dict[str, Any]], None]],
    rank: int,
    world: int,
    local_rank: int,
    is_main: bool,
    state_cache: TokenStateCache | None = None,
) -> TrainResult:
    from tqdm.auto import tqdm

    t_start = time.perf_counter()
    out_dir = Path(args.output_dir)
    if world > 1 and args.device is None and torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
    else:
        device = pick_device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if args.tf32:  # TF32 tensor cores for fp32 matmuls outside autocast
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        torch.cuda.reset_peak_memory_stats(device)
    use_bf16 = (device.type == "cuda") if args.bf16 is None else bool(args.bf16)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()

    # ---- resume point -------------------------------------------------------------------
    ckpt = latest_checkpoint(out_dir) if resume else None
    state: dict[str, Any] | None = None
    seed = args.seed
    if ckpt is not None:
        state = json.loads((ckpt / TRAINER_STATE).read_text(encoding="utf-8"))
        if state["seed"] != seed:
            logger.warning("resuming with the checkpoint's seed %s (args.seed=%s)", state["seed"], seed)
            seed = state["seed"]
        if config is None and model is None:
            config = UniFARConfig.from_dict(state["config"])
    elif not resume and (_checkpoints(out_dir) or (out_dir / "final").exists()):  # every rank: none may hang
        raise FileExistsError(f"{out_dir} already holds a training run; pass resume=True (--resume) or use a new folder")
    elif resume and is_main:
        logger.info("resume requested but %s has no checkpoint: starting from scratch", out_dir)

    # Seed every RNG (rank-specific for torch so dropout masks differ across ranks).
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed + rank)

    if model is None:
        if config is None:
            raise ValueError("give a config or a model")
        model = UniFAR(config, device=device)
    else:
        if config is None:
            config = model.config
        _check_config(model, config)
        model.config = config
        model.to(device)
    if state is not None and state["config"] != config.to_dict():
        differ = sorted(k for k in state["config"] if state["config"][k] != config.to_dict().get(k))
        raise ValueError(f"cannot resume {ckpt}: its config differs in {differ}")

    # ---- data split ---------------------------------------------------------------------
    all_ftus = list(ds.ftus)
    documents = ds.documents
    if eval_dataset is not None:
        train_ftus, eval_ftus, eval_docs = all_ftus, list(eval_dataset.ftus), eval_dataset.documents
    elif args.eval_fraction > 0:
        perm = np.random.default_rng([seed, 424242]).permutation(len(all_ftus))
        k = max(1, int(round(args.eval_fraction * len(all_ftus))))
        held = set(perm[:k].tolist())
        eval_ftus = [all_ftus[i] for i in sorted(held)]
        train_ftus = [u for i, u in enumerate(all_ftus) if i not in held]
        eval_docs = documents
    else:
        train_ftus, eval_ftus, eval_docs = all_ftus, [], documents
    if args.eval_max_ftus is not None:
        eval_ftus = eval_ftus[: args.eval_max_ftus]

    bs, ga = config.batch_size, config.grad_accumulation
    per_step = bs * ga
    per_rank = len(train_ftus) // world
    if per_rank == 0:
        raise ValueError(f"{len(train_ftus)} training FTUs cannot be shared by {world} ranks")
    steps_per_epoch = math.ceil(per_rank / per_step)
    epochs = args.epochs or config.epochs
    total_steps = steps_per_epoch * epochs
    if args.max_steps is not None:
        total_steps = min(total_steps, args.max_steps)
    warmup_steps = math.ceil(config.warmup_ratio * total_steps)

    # ---- optimiser, schedule, DDP -------------------------------------------------------
    top_k = args.train_top_layers
    if args.freeze_base:  # before the optimiser, so that the frozen base gets no parameter group
        for p in model.base.parameters():
            p.requires_grad_(False)
        for p in (model.top_base_layers(top_k).parameters() if top_k else ()):
            p.requires_grad_(True)
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_linear_factor(s, warmup_steps, total_steps)
    )
    cache = (state_cache if state_cache is not None else TokenStateCache(top_layers=top_k)) if args.freeze_base else None
    if cache is not None and cache.top_layers != top_k:
        raise ValueError(f"state_cache holds the states below the top {cache.top_layers} layers, "
                         f"but train_top_layers={top_k}")
    objective: nn.Module = _Objective(model, cache)
    ddp = None
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        # find_unused_parameters: the sentence/token branch is chosen per input, so a step may
        # leave MHA_tok (or MHA_sent) without gradient.
        ddp = DDP(objective, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=True)
        objective = ddp

    step, start_epoch, start_pos = 0, 0, 0
    if ckpt is not None and state is not None:
        from safetensors.torch import load_model

        missing, unexpected = load_model(model, str(ckpt / "model.safetensors"), strict=False, device=str(device))
        missing = [k for k in missing if not k.startswith("base.pooler.")]
        unexpected = [k for k in unexpected if not k.startswith("base.pooler.")]
        if missing or unexpected:
            raise RuntimeError(f"{ckpt} does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
        optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location=device, weights_only=True))
        scheduler.load_state_dict(torch.load(ckpt / "scheduler.pt", weights_only=True))
        rng_states = torch.load(ckpt / "rng_state.pt", weights_only=True)
        if len(rng_states) == world:
            _set_rng_state(rng_states[rank])
        else:  # a different world size: re-seed deterministically from the step instead
            logger.warning("checkpoint has RNG states for %d ranks, this run has %d: re-seeding", len(rng_states), world)
            torch.manual_seed(seed + rank + 7919 * state["step"])
        step, start_epoch, start_pos = state["step"], state["epoch"], state["step_in_epoch"]
        if state.get("n_train_ftus") != len(train_ftus):
            raise ValueError(f"cannot resume {ckpt}: it was trained on {state.get('n_train_ftus')} FTUs, this run has {len(train_ftus)}")
        if state.get("total_steps") != total_steps:
            logger.warning("resuming with %d total steps (checkpoint: %s): the schedule changes", total_steps, state.get("total_steps"))
    start_step = step

    log_path = out_dir / "log.jsonl"
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        if ckpt is not None and log_path.exists():
            # Drop records of steps the interrupted run did after its last checkpoint.
            kept = [r for r in read_log(log_path) if r.get("step", 0) <= step]
            log_path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        elif ckpt is None:
            log_path.write_text("", encoding="utf-8")

    run_base = {
        "config": config.to_dict(),
        "args": args.to_dict(),
        "seed": seed,
        "world_size": world,
        "n_train_ftus": len(train_ftus),
        "n_eval_ftus": len(eval_ftus),
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "warmup_steps": warmup_steps,
        "ftus_per_step": per_step * world,
        "bf16": use_bf16,
    }

    def save_checkpoint(at_step: int, epoch: int, next_pos: int, last: Mapping[str, float]) -> Path | None:
        # Gather every rank's RNG state (collective: all ranks call this), rank 0 writes.
        states = [_rng_state()]
        if world > 1:
            import torch.distributed as dist

            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, states[0])
            states = gathered
        if not is_main:
            return None
        if next_pos >= steps_per_epoch:
            epoch, next_pos = epoch + 1, 0
        trainer_state = {
            **run_base,
            "step": at_step,
            "epoch": epoch,
            "step_in_epoch": next_pos,
            "last_terms": dict(last),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

        def write(d: Path) -> None:
            model.save_pretrained(d)
            torch.save(optimizer.state_dict(), d / "optimizer.pt")
            torch.save(scheduler.state_dict(), d / "scheduler.pt")
            torch.save(states, d / "rng_state.pt")
            (d / TRAINER_STATE).write_text(json.dumps(trainer_state, indent=2) + "\n", encoding="utf-8")

        path = atomic_dir(out_dir / CHECKPOINTS / f"step-{at_step:06d}", write)
        for _, old in _checkpoints(out_dir)[: -args.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    # ---- loop ---------------------------------------------------------------------------
    model.train()
    if args.freeze_base:
        _frozen_base_mode(model, top_k, args.top_layers_dropout)
        # Warm the cache with every training document and question in length-sorted batches
        # (several times faster than filling it batch by batch during the first epoch).
        needed = list(dict.fromkeys(d for u in train_ftus for d in u.doc_ids()))
        questions = list(dict.fromkeys(q.text for u in train_ftus for q in u.questions.values()))
        t_fill = time.perf_counter()
        n_filled = cache.fill(model, model.tokenize_documents([documents[d] for d in needed]),
                              show_progress=args.progress and is_main)
        n_filled += cache.fill(model, model.tokenize_questions(questions), show_progress=args.progress and is_main)
        if is_main:
            cache.save()  # an on-disk cache (TokenStateCache.on_disk) keeps them for later chapters
        if is_main:
            logger.info("cached frozen base states of %d inputs in %.1f s", n_filled, time.perf_counter() - t_fill)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    last_ckpt = ckpt
    last_terms: dict[str, float] = {}
    eval_terms: dict[str, float] | None = None
    ftus_seen = 0
    t_loop = time.perf_counter()
    bar = tqdm(total=total_steps, initial=step, desc="training", unit="step", disable=not (args.progress and is_main))
    log_file = open(log_path, "a", encoding="utf-8") if is_main else None
    try:
        for epoch in range(start_epoch, epochs):
            if step >= total_steps:
                break
            shard = epoch_shard(len(train_ftus), seed, epoch, rank, world)
            for pos in range(start_pos if epoch == start_epoch else 0, steps_per_epoch):
                if step >= total_steps:
                    break
                t0 = time.perf_counter()
                idx = shard[pos * per_step : (pos + 1) * per_step]
                micro = [idx[k : k + bs] for k in range(0, len(idx), bs)]
                progress = step / max(1, total_steps - 1)
                lam = config.kl_lambda(progress)
                sums = torch.zeros(4, device=device)
                for k, mb in enumerate(micro):
                    # The cap sample depends only on (seed, epoch, position, micro-batch, rank),
                    # so a resumed run draws the same documents.
                    rng = np.random.default_rng([seed, epoch, pos, k, rank])
                    fb = build_ftu_batch(model, [train_ftus[i] for i in mb], documents,
                                         args.max_positives, args.max_negatives, rng).to(device)
                    sync = ddp is None or k == len(micro) - 1
                    with (nullcontext() if sync else ddp.no_sync()):  # type: ignore[union-attr]
                        with autocast:
                            terms = objective(fb, lam)
                        (terms.total / len(micro)).backward()
                    sums += torch.stack([terms.total, terms.doc_doc, terms.question_doc, terms.kl]).detach().float()
                sums /= len(micro)
                if world > 1:
                    import torch.distributed as dist

                    dist.all_reduce(sums)
                    sums /= world
                grad_norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip if args.grad_clip else float("inf"))
                loss, l_dd, l_qd, l_kl = sums.tolist()
                gnorm = float(grad_norm)
                current = {"loss": loss, "l_dd": l_dd, "l_qd": l_qd, "l_kl": l_kl, "lambda": lam}
                bad = None
                if not math.isfinite(loss):
                    bad = "non-finite loss"
                elif loss > args.max_loss:
                    bad = f"loss above max_loss={args.max_loss}"
                elif not math.isfinite(gnorm):
                    bad = "non-finite gradient norm"
                if bad:
                    optimizer.zero_grad(set_to_none=True)
                    if is_main:
                        logger.error("step %d: %s", step + 1, bad)
                    raise TrainingDiverged(step + 1, {**current, "grad_norm": gnorm}, last_ckpt, bad)
                lrs = {g["name"]: g["lr"] for g in optimizer.param_groups if "/" not in g["name"]}
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                n_ftus = len(idx) * world
                ftus_seen += n_ftus
                dt = time.perf_counter() - t0
                last_terms = current
                record: dict[str, Any] = {
                    "step": step,
                    "epoch": epoch,
                    "progress": round(progress, 6),
                    "lr": lrs,
                    **current,
                    "grad_norm": gnorm,
                    "seconds": round(dt, 4),
                    "ftus_per_s": round(n_ftus / dt, 3) if dt > 0 else None,
                    "ftus": n_ftus,
                }
                if eval_ftus and is_main and ((args.eval_every and step % args.eval_every == 0) or step == total_steps):
                    eval_terms = _held_out_loss(model, eval_ftus, eval_docs, args, progress, autocast, cache)
                    if args.freeze_base:
                        _frozen_base_mode(model, top_k, args.top_layers_dropout)
                    record["eval"] = eval_terms
                if log_file is not None and (step % args.log_every == 0 or step == total_steps or "eval" in record):
                    log_file.write(json.dumps(record) + "\n")
                    log_file.flush()
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lrs.get('base', 0):.2e}")
                if step % args.save_every == 0 or step == total_steps:
                    saved = save_checkpoint(step, epoch, pos + 1, current)
                    last_ckpt = saved or last_ckpt
                for cb in callbacks:
                    cb(record)
    except TrainingDiverged as err:
        if is_main:  # record the failure; no checkpoint or final model is written after it
            diverged = {**run_base, "status": "diverged", "error": str(err), "step": err.step, "terms": err.terms,
                        "last_checkpoint": str(last_ckpt.relative_to(out_dir)) if last_ckpt else None,
                        "git": _git_commit(), "machine": _machine(device, world),
                        "wall_seconds": round(time.perf_counter() - t_start, 3)}
            (out_dir / "run.json").write_text(json.dumps(diverged, indent=2) + "\n", encoding="utf-8")
        raise
    finally:
        bar.close()
        if log_file is not None:
            log_file.close()

    # ---- end of run ---------------------------------------------------------------------
    wall = time.perf_counter() - t_start
    loop_seconds = time.perf_counter() - t_loop
    final_dir = None
    run_info: dict[str, Any] = {}
    if is_main:
        final_dir = atomic_dir(out_dir / "final", lambda d: model.save_pretrained(d))
        run_info = {
            **run_base,
            "status": "finished",
            "git": _git_commit(),
            "machine": _machine(device, world),
            "wall_seconds": round(wall, 3),
            "train_loop_seconds": round(loop_seconds, 3),
            "start_step": start_step,
            "steps": step,
            "ftus_seen": ftus_seen,
            "ftus_per_second": round(ftus_seen / loop_seconds, 3) if loop_seconds > 0 else None,
            "peak_memory": _peak_memory(device),
            "frozen_state_cache": {"inputs": len(cache), "hits": cache.hits, "misses": cache.misses} if cache else None,
            "last_terms": last_terms,
            "held_out": eval_terms,
            "last_checkpoint": str(last_ckpt.relative_to(out_dir)) if last_ckpt else None,
            "final": "final",
        }
        (out_dir / "run.json").write_text(json.dumps(run_info, indent=2) + "\n", encoding="utf-8")
    return TrainResult(
        model=model,
        output_dir=out_dir,
        final_dir=final_dir,
        steps=step,
        start_step=start_step,
        last_checkpoint=last_ckpt,
        last_terms=last_terms,
        run_info=run_info,
    )


#: ``--profile paper``: MPNet base with the learning rates of appendix A (3e-6 for the base model
#: and the anchors; the aggregation modules keep 5e-5) and the paper's other training values.
PAPER_PROFILE: dict[str, Any] = {
    "base_model": "mpnet",
    "lr_base": 3e-6,
    "lr_anchors": 3e-6,
    "lr_aggregation": 5e-5,
    "temperature": 0.08,
    "kl_lambda_start": 0.3,
    "kl_lambda_end": 0.5,
    "warmup_ratio": 0.05,
    "batch_size": 4,
    "grad_accumulation": 4,
    "epochs": 2,
}
