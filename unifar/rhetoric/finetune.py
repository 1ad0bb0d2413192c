"""Fine-tuning a :class:`~unifar.rhetoric.encoder.SentenceEncoder` with a SciToricsBERT loss on
PK batches (paper 002, section 3.3 and appendix B): Adam at learning rate 2e-5
(:data:`PAPER_LR`), model selection by validation MAP@R (section 4.1).

The losses receive the *unnormalised* pooled vector: the softmax loss (eq. 1) is a plain linear
classifier on it, as in the paper; the other four normalise internally. The classifier weights
of the softmax and ArcFace losses are trained with the encoder by the same Adam optimiser and,
by default, the same learning rate (the paper states one).
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any, Callable, Hashable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..pooling import length_order
from ..runtime import pick_device
from .encoder import SentenceEncoder
from .losses import MetricLoss, make_loss
from .retrieval import retrieval_scores
from .sampling import PAPER_BATCH_SIZE, PKBatchSampler, encode_labels, pk_for

__all__ = ["PAPER_LR", "FinetuneHistory", "embed_in_length_chunks", "finetune", "finetune_steps"]

PAPER_LR = 2e-5  #: appendix B (Adam)


def embed_in_length_chunks(encoder: SentenceEncoder, sentences: Sequence[str], chunks: int = 1) -> torch.Tensor:
    """Unnormalised embeddings [N, d] of ``sentences`` (with gradients), computed in ``chunks``
    forward passes over length-sorted pieces and returned in the input order.

    A batch is padded to its longest sentence, so a PK batch of mixed lengths wastes most of its
    compute on padding; sorting by length (characters) and encoding in pieces pads each piece
    only to its own longest sentence. The result equals one pass over the whole batch (masked
    attention and masked mean pooling ignore padding) up to floating-point rounding.
    """
    sentences = list(sentences)
    chunks = max(1, min(int(chunks), len(sentences)))
    if chunks == 1:
        return encoder(sentences, normalize=False)
    order = length_order([len(s) for s in sentences], descending=False)
    pieces = [p for p in np.array_split(order, chunks) if len(p)]
    emb = torch.cat([encoder([sentences[i] for i in p], normalize=False) for p in pieces])
    inverse = torch.empty(len(sentences), dtype=torch.long)
    inverse[torch.as_tensor(np.concatenate(pieces))] = torch.arange(len(sentences))
    return emb[inverse.to(emb.device)]


class FinetuneHistory(list):
    """The loss of every optimisation step (a list of floats), plus ``validation`` (one
    ``{"epoch", "p@1", "map@r"}`` per epoch when validation data was given), ``best_epoch``
    (the epoch whose weights were kept) and ``settings`` (loss, P, K, lr, steps, device)."""

    def __init__(self) -> None:
        super().__init__()
        self.validation: list[dict[str, float]] = []
        self.best_epoch: int | None = None
        self.settings: dict[str, Any] = {}


def _adam(encoder: SentenceEncoder, loss: MetricLoss, lr: float, head_lr: float | None) -> torch.optim.Adam:
    """Adam over the encoder's trainable parameters at ``lr`` and the loss's (a classifier, if
    any) at ``head_lr`` (default ``lr``), in that group order."""
    head = [p for p in loss.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": [p for p in encoder.parameters() if p.requires_grad]}]
    if head:
        groups.append({"params": head, "lr": head_lr if head_lr is not None else lr})
    return torch.optim.Adam(groups, lr=lr)


def _step(encoder: SentenceEncoder, loss: MetricLoss, opt: torch.optim.Optimizer, ctx: Callable[[], Any],
          texts: list[str], targets: torch.Tensor, length_chunks: int) -> float:
    """One Adam step on one PK batch; returns its loss (computed in float32)."""
    with ctx():
        emb = embed_in_length_chunks(encoder, texts, length_chunks)
    value = loss(emb.float(), targets)
    opt.zero_grad(set_to_none=True)
    value.backward()
    opt.step()
    return float(value.detach())


def _keep_best(encoder: SentenceEncoder, validation: tuple[Sequence[str], Sequence[Hashable]], use_bf16: bool,
               history: FinetuneHistory, epoch: int,
               best: tuple[float, dict[str, torch.Tensor] | None]) -> tuple[float, dict[str, torch.Tensor] | None]:
    """After an epoch: its retrieval scores on ``validation`` (recorded in ``history``) and the
    best MAP@R so far with a CPU copy of that epoch's weights (the paper's model selection)."""
    scores = retrieval_scores(encoder.encode(validation[0], bf16=use_bf16), validation[1])
    history.validation.append({"epoch": epoch + 1, **scores})
    if not scores["map@r"] > best[0]:  # NaN never wins
        return best
    history.best_epoch = epoch + 1
    return scores["map@r"], {k: v.detach().to("cpu", copy=True) for k, v in encoder.state_dict().items()}


def finetune_steps(
    n_sentences: int,
    n_classes: int,
    loss: str = "softmax",
    epochs: int = 1,
    max_steps: int | None = None,
    P: int | None = None,
    K: int | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
) -> int:
    """The optimiser steps :func:`finetune` takes: ``epochs`` passes of ``max(1, n_sentences //
    (P*K))`` PK batches (the :class:`~unifar.rhetoric.sampling.PKBatchSampler`'s epoch), at most
    ``max_steps``. ``P``/``K`` default to :func:`~unifar.rhetoric.sampling.pk_for` of ``loss``.
    Chapter 2's table of profile sizes calls it, so the table and the trainer agree.

    CSAbstruct's 5 labels give every loss ``P = 5, K = 12`` (batches of 60):

    >>> finetune_steps(480, 5), finetune_steps(2400, 5, "ms", epochs=2), finetune_steps(480, 5, max_steps=4)
    (8, 80, 4)
    >>> finetune_steps(10, 5)  # fewer sentences than one batch: still one step an epoch
    1
    """
    p_default, k_default = pk_for(loss, n_classes, batch_size)
    per_epoch = max(1, n_sentences // ((P or p_default) * (K or k_default)))
    return epochs * per_epoch if max_steps is None else min(max_steps, epochs * per_epoch)


def finetune(
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    labels: Sequence[Hashable],
    loss: str | MetricLoss = "softmax",
    epochs: int = 1,
    lr: float = PAPER_LR,
    P: int | None = None,
    K: int | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
    seed: int = 0,
    device: str | torch.device | None = None,
    max_steps: int | None = None,
    progress: bool | None = None,
    head_lr: float | None = None,
    validation: tuple[Sequence[str], Sequence[Hashable]] | None = None,
    bf16: bool | None = None,
    length_chunks: int = 1,
) -> FinetuneHistory:
    """Fine-tune ``encoder`` in place with a metric-learning loss on PK batches (paper 002,
    section 3.3, appendix B): Adam at ``lr`` (2e-5), ``epochs`` passes of ``len(sentences) //
    (P*K)`` batches, at most ``max_steps`` steps. ``loss``: a :class:`~unifar.rhetoric.losses.MetricLoss`
    or a name for :func:`~unifar.rhetoric.losses.make_loss` (its classifier trained at ``head_lr``,
    default ``lr``); ``P``/``K`` default to :func:`~unifar.rhetoric.sampling.pk_for`.
    ``validation = (sentences, labels)``: after every epoch its
    :func:`~unifar.rhetoric.retrieval.retrieval_scores`, keeping the weights of the epoch with the
    best MAP@R (section 4.1's model selection). The torch seed is set to ``seed`` (deterministic on
    the CPU). On CUDA the encoder runs under bfloat16 autocast (``bf16``); the loss is float32.
    ``length_chunks > 1`` encodes each batch in that many length-sorted pieces
    (:func:`embed_in_length_chunks`: less padding, the same loss, other dropout draws). Returns the
    per-step losses (:class:`FinetuneHistory`).
    """
    if len(sentences) != len(labels):
        raise ValueError(f"{len(sentences)} sentences but {len(labels)} labels")
    torch.manual_seed(seed)
    dev = pick_device(device)
    y, classes = encode_labels(labels)
    if isinstance(loss, str):
        loss = make_loss(loss, encoder.embedding_size, len(classes), seed=seed)
    p_default, k_default = pk_for(loss.name, len(classes), batch_size)
    P, K = P or p_default, K or k_default
    sampler = PKBatchSampler(y, P, K, seed=seed)
    encoder.to(dev)
    loss.to(dev)
    opt = _adam(encoder, loss, lr, head_lr)
    use_bf16 = dev.type == "cuda" if bf16 is None else bf16
    ctx: Callable[[], Any] = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if use_bf16 else nullcontext
    sentences = list(sentences)

    history = FinetuneHistory()
    total = finetune_steps(len(y), len(classes), loss.name, epochs, max_steps, P, K, batch_size)
    history.settings = {
        "loss": loss.name, **loss.hparams, "P": P, "K": K, "lr": lr, "head_lr": head_lr if head_lr is not None else lr,
        "epochs": epochs, "steps": total, "seed": seed, "device": str(dev), "bf16": use_bf16,
        "length_chunks": length_chunks,
    }
    best: tuple[float, dict[str, torch.Tensor] | None] = (-math.inf, None)
    bar = tqdm(total=total, desc=f"fine-tuning ({loss.name})", disable=not (progress if progress is not None else total >= 50))
    step = 0
    for epoch in range(epochs):
        encoder.train()
        loss.train()
        for batch in sampler:
            if step >= total:
                break
            history.append(_step(encoder, loss, opt, ctx, [sentences[i] for i in batch], y[batch].to(dev), length_chunks))
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{history[-1]:.4f}")
        if validation is not None:
            best = _keep_best(encoder, validation, use_bf16, history, epoch, best)
        if step >= total:
            break
    bar.close()
    if best[1] is not None:
        encoder.load_state_dict(best[1])
    encoder.eval()
    encoder.finetuned = True
    return history
