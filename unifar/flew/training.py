"""FLeW's pre-training (section 3.3, eqs. 5-6): three facet encoders from the same base, each
trained with the triplet margin loss (L2 distance, margin 1) on its facet's triplets.

Each facet encoder is a [CLS]-pooled :class:`unifar.bi_encoder.BiEncoder` (eq. 1; mean pooling
is the measured variant) copied from one base and trained by
:func:`unifar.multi_objective.training.train_bi_encoder` with
:func:`unifar.bi_encoder_losses.triplet_margin_loss` (eq. 5) on one phase of its triplets. A
triplet document is ``title [SEP] abstract_[x]`` (eq. 4, :mod:`unifar.flew.splitting`).

FLeW fine-tunes all of SciBERT (Adam with weight decay, batch 10, 2 epochs): ``top_layers=None``
(the GPU profile). On this CPU ``top_layers=k`` trains only the base's top ``k`` layers on the
cached states of the frozen layers below, as chapter 4 does for UniFAR. The frozen layers are the
same in the three copies, so one :class:`~unifar.caching.TokenStateCache` serves all three
facets. Our choices where FLeW is silent: weight decay 0.01 (SPECTER's AdamW default), and
``train_bi_encoder``'s linear decay of the learning rate and gradient clipping at norm 1.

FLeW trains for 2 epochs; here each encoder can instead train until its dev curve flattens:
eq. 5 on the triplets of held-out query papers (:func:`unifar.flew.sampling.hold_out_queries`),
measured every ``dev_every`` steps, as chapter 8's runs are.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..bi_encoder import BiEncoder, BiEncoderConfig
from ..bi_encoder_losses import triplet_margin_loss
from ..caching import TokenStateCache
from ..evaluation.texts import document_text
from ..facets import FACETS
from ..files import write_json
from ..multi_objective.objectives import DOCUMENT_TO_DOCUMENT, Example, Objective
from ..multi_objective.schedules import mix
from ..multi_objective.training import (
    BiEncoderTrainArgs,
    BiEncoderTrainResult,
    examples_digest,
    finished_run,
    train_bi_encoder,
)
from .sampling import Triplet
from .splitting import triplet_texts

__all__ = ["FLEW_BATCH_SIZE", "FLEW_LR", "FacetTraining", "facet_examples", "train_facet_encoders"]

RUN_RECORD = "flew_run.json"  # a finished facet's settings (what a resumed run must match)

logger = logging.getLogger(__name__)

#: FLeW section 4.1: batch size 10; learning rate printed "2^-5", read as SPECTER's 2e-5
FLEW_BATCH_SIZE, FLEW_LR = 10, 2e-5


@dataclass
class FacetTraining:
    """What :func:`train_facet_encoders` returns: one encoder and one training result per facet."""

    encoders: dict[str, BiEncoder]
    results: dict[str, BiEncoderTrainResult] = field(default_factory=dict)
    triplets: dict[str, int] = field(default_factory=dict)  # triplets available per facet

    def losses(self) -> dict[str, list[float]]:
        """The loss of every step, per facet."""
        return {f: r.losses() for f, r in self.results.items()}

    def dev_curves(self) -> dict[str, list[dict[str, Any]]]:
        """The held-out loss measurements (``step``, ``dev``), per facet; empty without a dev set."""
        return {f: r.dev_curve for f, r in self.results.items()}

    def steps_taken(self) -> dict[str, int]:
        """The steps each facet trained: the budget, or fewer where its dev curve flattened."""
        return {f: len(r.log) for f, r in self.results.items()}


def facet_examples(
    triplets: Sequence[Triplet],
    documents: Mapping[str, Mapping[str, Any]],
    facet: str,
    sep: str,
    textual: bool = True,
) -> list[Example]:
    """Training examples of one facet: each triplet's documents as ``title [SEP] abstract_[x]``
    (eq. 4; ``textual=False``: the full abstract, FLeW's "w/o Textual" ablation).

    >>> docs = {d: {"title": d.upper(), "sentences": ["S."], "labels": ["method"]} for d in "qpn"}
    >>> facet_examples([("q", "p", "n")], docs, "method", "[SEP]")[0]
    Example(anchor='Q[SEP]S.', positive='P[SEP]S.', negative='N[SEP]S.', recurs=True)
    """
    rows = triplet_texts(triplets, documents, facet, textual)
    texts = [[document_text({"title": t, "abstract": a}, sep) for t, a in row] for row in rows]
    return [Example(q, p, n) for q, p, n in texts]


def train_facet_encoders(
    triplets_by_facet: Mapping[str, Sequence[Triplet]],
    documents: Mapping[str, Mapping[str, Any]],
    base: BiEncoder | str,
    steps: int,
    top_layers: int | None = 1,
    textual: bool = True,
    pooling: str = "cls",
    batch_size: int = FLEW_BATCH_SIZE,
    lr: float = FLEW_LR,
    margin: float = 1.0,
    weight_decay: float = 0.01,
    seed: int = 0,
    out_dir: str | Path | None = None,
    state_cache: TokenStateCache | None = None,
    resume: bool = True,
    dev_triplets: Mapping[str, Sequence[Triplet]] | None = None,
    **train_args: Any,
) -> FacetTraining:
    """Eq. 6: for each facet of ``triplets_by_facet``, a copy of ``base`` (a :class:`BiEncoder`,
    or a base model name loaded with ``pooling``) trained for ``steps`` steps of ``batch_size``
    triplets with eq. 5 (margin ``margin``). ``top_layers=None`` fine-tunes the whole base.
    ``out_dir``: each encoder is saved to ``out_dir/<facet>/final`` with its log, and a record of
    its settings (``flew_run.json``, written last); with ``resume``, a facet whose record
    matches this call's settings (base weights, triplet texts, hyper-parameters) is loaded
    instead of trained again, so an interrupted run loses at most the facet it was on.
    ``dev_triplets``: held-out triplets per facet (:func:`unifar.flew.sampling.hold_out_queries`);
    with ``train_args`` ``dev_every`` > 0, each encoder's eq. 5 loss on its facet's held-out
    triplets is measured every ``dev_every`` steps and its training ends once that dev curve has
    flattened (``patience``, ``min_delta``): ``steps`` is then a budget.
    ``train_args`` go to :class:`~unifar.multi_objective.training.BiEncoderTrainArgs`.
    """
    unknown = sorted(set(triplets_by_facet) - set(FACETS))
    if unknown:
        raise ValueError(f"unknown facets {unknown}; expected keys among {FACETS}")
    if isinstance(base, str):
        base = BiEncoder(BiEncoderConfig(base_model=base, pooling=pooling))
    if top_layers and state_cache is None:
        state_cache = TokenStateCache(top_layers=top_layers)  # shared: the frozen layers agree
    args = BiEncoderTrainArgs(top_layers=top_layers, weight_decay=weight_decay, **train_args)
    loss_fn = partial(triplet_margin_loss, margin=margin)
    out = FacetTraining({})
    for k, f in enumerate(f for f in FACETS if f in triplets_by_facet):
        examples = facet_examples(triplets_by_facet[f], documents, f, base.sep_token, textual)
        held = facet_examples((dev_triplets or {}).get(f, []), documents, f, base.sep_token, textual)
        out.triplets[f] = len(examples)
        objective = Objective(f"flew-{f}", DOCUMENT_TO_DOCUMENT, examples, dev=held)
        phases = mix([objective], steps, batch_size=batch_size, lr=lr, seed=seed + k)
        args.seed = seed + k
        where = None if out_dir is None else Path(out_dir) / f
        settings = None
        if where is not None:
            settings = _run_settings(base, examples, held, steps, batch_size, lr, margin, args, textual)
            done = finished_run(where, settings, RUN_RECORD, base.device) if resume else None
            if done is not None:
                out.results[f], out.encoders[f] = done, done.model
                logger.info("FLeW-%s: finished earlier in %s, reused", f, where)
                continue
        enc = copy.deepcopy(base)
        dev = {objective.name: held} if held and args.dev_every > 0 else None
        out.results[f] = train_bi_encoder(enc, phases, loss_fn, args, where, state_cache, dev=dev)
        out.encoders[f] = enc
        if where is not None:
            write_json(where / RUN_RECORD, settings)  # last: the facet is complete
        losses = out.results[f].losses()
        logger.info(
            "FLeW-%s: %d triplets, loss %.4f -> %.4f", f, len(examples), losses[0], losses[-1]
        )
    return out


def _run_settings(
    base: BiEncoder,
    examples: Sequence[Example],
    held: Sequence[Example],
    steps: int,
    batch_size: int,
    lr: float,
    margin: float,
    args: BiEncoderTrainArgs,
    textual: bool,
) -> dict[str, Any]:
    """What decides a facet encoder's weights (a resumed run reuses one only if all match)."""
    return {
        "base": base.fingerprint(),
        "base_model": base.config.base_model,
        "pooling": base.config.pooling,
        "examples": len(examples),
        "examples_sha256": examples_digest(examples),
        "dev_examples": len(held),
        "dev_sha256": examples_digest(held),
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "margin": margin,
        "textual": textual,
        "args": {k: v for k, v in vars(args).items() if k != "show_progress"},
    }

