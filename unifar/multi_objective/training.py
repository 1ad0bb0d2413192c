"""Training a :class:`unifar.bi_encoder.BiEncoder` on a schedule of phases, with any loss.

:func:`train_bi_encoder` reads top to bottom: make the base trainable (all of it, the ``paper``
profile on a GPU; or only its top ``k`` layers on cached states of the frozen layers below, our
CPU profile, as UniFAR's :mod:`unifar.frozen_base`), then per phase a fresh AdamW (learning rate
``phase.lr``, linearly decayed to 0 without warm-up, no weight decay, eps 1e-8: section 4.3 of
the multi-objective paper) and per step: embed anchors, positives and hard negatives of the
batch in one call, ``loss_fn(anchor, positive, negative | None)``, clip, step. The loss is any
callable on pooled embeddings: :func:`unifar.bi_encoder_losses.multiple_negatives_ranking_loss`
(default; ``negative`` holds the hard negatives of the examples that have one) or
:func:`unifar.bi_encoder_losses.triplet_margin_loss` (every example needs a negative). At the end
the model is saved atomically to ``out_dir/final`` and the per-step log to ``out_dir/log.json``.
Our choices: gradient clipping at norm 1 (sentence-transformers' default), dropout off in the
top layers of a frozen base (as UniFAR's CPU profile), a new optimizer per phase (the paper's
fine-tuning is a separate run).

Dev curve (``dev``, ``args.dev_every``): before the first step and every ``dev_every`` steps,
the loss on held-out examples of each objective (:func:`held_out_losses`, no gradient) goes to
``result.dev_curve``; a phase ends early once the mean over the monitored objectives has not
improved by ``args.min_delta`` for ``args.patience`` measurements
(:class:`unifar.learning_curve.Plateau`), so a run trains until its dev curve flattens, within
its phases' step budget (the learning rate still decays over the whole budget).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..bi_encoder import BiEncoder
from ..bi_encoder_losses import multiple_negatives_ranking_loss
from ..caching import TokenStateCache
from ..files import write_json
from ..frozen_base import freeze_base, frozen_base_mode, frozen_state_cache
from ..learning_curve import Plateau
from ..optim import make_scheduler
from ..runtime import autocast_for
from .objectives import Example
from .schedules import Phase

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = [
    "BiEncoderTrainArgs",
    "BiEncoderTrainResult",
    "train_bi_encoder",
    "held_out_losses",
    "prepare_base",
    "examples_digest",
    "finished_run",
]

LossFn = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


@dataclass
class BiEncoderTrainArgs:
    """How to train; the schedule (steps, learning rates, batches) is in the phases."""

    top_layers: int | None = 1  # train the top k base layers on cached states; None: the whole base
    grad_clip: float = 1.0
    weight_decay: float = 0.0  # the paper: none
    adam_eps: float = 1e-8
    dropout: bool = False  # dropout in the training top layers of a frozen base
    bf16: bool | None = None  # autocast; default on CUDA only
    seed: int = 0
    show_progress: bool = True
    dev_every: int = 0  # > 0: measure the held-out losses every dev_every steps (and before step 0)
    patience: int = 3  # dev measurements without improvement that end a phase
    min_delta: float = 0.0  # what counts as an improvement of the monitored held-out loss
    dev_batch_size: int = 16  # held-out batches (in-batch negatives), the paper's batch size


@dataclass
class BiEncoderTrainResult:
    """The trained model, one log record per step, where it was saved."""

    model: BiEncoder
    log: list[dict[str, Any]] = field(default_factory=list)
    final_dir: Path | None = None
    seconds: float = 0.0
    cached_states: int = 0
    # {"phase", "step", "dev": monitored mean, "dev/<objective>": loss, ...} per measurement
    dev_curve: list[dict[str, Any]] = field(default_factory=list)
    stopped: dict[str, int] = field(default_factory=dict)  # phase -> steps taken, where it ended early

    def losses(self, phase: str | None = None) -> list[float]:
        """The loss of every step (of one phase)."""
        return [r["loss"] for r in self.log if phase is None or r["phase"] == phase]


def prepare_base(
    model: BiEncoder,
    top_layers: int | None,
    state_cache: TokenStateCache | None = None,
    dropout: bool = False,
) -> TokenStateCache | None:
    """Make the whole base trainable (``top_layers=None``; returns None) or only its top
    ``top_layers`` layers, the rest frozen in eval mode (returns the cache of their input states,
    ``state_cache`` when given)."""
    if top_layers is None:
        model.base.requires_grad_(True)
        model.train()
        return None
    if top_layers < 1:
        raise ValueError(
            "top_layers must be >= 1 (a bi-encoder has no weights besides its base), "
            f"got {top_layers}"
        )
    freeze_base(model, top_layers)  # type: ignore[arg-type]  (duck-typed: .base, .top_base_layers)
    cache = frozen_state_cache(state_cache, top_layers)
    frozen_base_mode(model, top_layers, dropout)  # type: ignore[arg-type]
    return cache


def _embed(
    model: BiEncoder, texts: list[str], recurs: list[bool], cache: TokenStateCache | None
) -> torch.Tensor:
    """Pooled embeddings of ``texts``; the frozen states of texts that do not recur (ICrop crops)
    go to a throw-away cache, so the shared one does not grow by a batch every step."""
    if cache is None:
        return model.embed_texts(texts)
    scratch = TokenStateCache(top_layers=cache.top_layers)
    groups = [
        (idx, c)
        for idx, c in (
            ([i for i, r in enumerate(recurs) if r], cache),
            ([i for i, r in enumerate(recurs) if not r], scratch),
        )
        if idx
    ]
    parts = [model.embed_texts([texts[i] for i in idx], c) for idx, c in groups]
    order = torch.tensor([i for idx, _ in groups for i in idx])
    return torch.cat(parts)[torch.argsort(order)]


def batch_loss(
    model: BiEncoder, examples: Sequence[Example], loss_fn: LossFn, cache: TokenStateCache | None
) -> torch.Tensor:
    """``loss_fn(anchor, positive, negative | None)`` of one batch, every text embedded at once."""
    negatives = [e for e in examples if e.negative is not None]
    texts = (
        [e.anchor for e in examples]
        + [e.positive for e in examples]
        + [e.negative for e in negatives]
    )
    recurs = [e.recurs for e in examples] * 2 + [e.recurs for e in negatives]
    emb = _embed(model, texts, recurs, cache)  # type: ignore[arg-type]
    b = len(examples)
    return loss_fn(emb[:b], emb[b : 2 * b], emb[2 * b :] if negatives else None)


def held_out_losses(
    model: BiEncoder,
    dev: Mapping[str, Sequence[Example]],
    loss_fn: LossFn,
    cache: TokenStateCache | None,
    batch_size: int,
) -> dict[str, float]:
    """The mean of ``loss_fn`` over consecutive batches of ``batch_size`` held-out examples, per
    objective of ``dev`` (a last batch of one example, which has no in-batch negative, is left
    out), with dropout off and no gradient: the points of a run's dev curve."""
    out = {}
    with torch.no_grad():
        for name, examples in dev.items():
            parts = [examples[s : s + batch_size] for s in range(0, len(examples), batch_size)]
            parts = [p for p in parts if len(p) >= 2]
            if not parts:
                raise ValueError(f"dev examples of {name!r}: need at least 2, got {len(examples)}")
            out[name] = sum(float(batch_loss(model, p, loss_fn, cache)) * len(p) for p in parts) / sum(map(len, parts))
    return out


def train_bi_encoder(
    model: BiEncoder,
    phases: Sequence[Phase],
    loss_fn: LossFn = multiple_negatives_ranking_loss,
    args: BiEncoderTrainArgs | None = None,
    out_dir: str | Path | None = None,
    state_cache: TokenStateCache | None = None,
    dev: Mapping[str, Sequence[Example]] | None = None,
    monitor: Sequence[str] | None = None,
) -> BiEncoderTrainResult:
    """Train ``model`` in place on ``phases`` (:mod:`unifar.multi_objective.schedules`); see the
    module docstring. ``dev``: held-out examples per objective, measured every
    ``args.dev_every`` steps; ``monitor``: the objectives whose mean held-out loss decides when a
    phase has flattened (default: all of ``dev``). A non-finite loss or gradient stops the run
    before its step is applied."""
    from tqdm.auto import tqdm

    args = args or BiEncoderTrainArgs()
    dev = dict(dev or {}) if args.dev_every > 0 else {}
    monitor = list(dev) if monitor is None else list(monitor)
    if dev and (not monitor or any(m not in dev for m in monitor)):
        raise ValueError(f"monitor {monitor}: choose among the dev objectives {sorted(dev)}")
    torch.manual_seed(args.seed)
    cache = prepare_base(model, args.top_layers, state_cache, args.dropout)
    params = [p for p in model.parameters() if p.requires_grad]
    autocast = autocast_for(model.device, args.bf16)  # None: bf16 on CUDA only
    result = BiEncoderTrainResult(model)
    bar = tqdm(total=sum(p.steps for p in phases), desc="training", unit="step", disable=not args.show_progress)

    def measure(phase: Phase, step: int) -> bool:
        """One dev-curve point; True when the phase's curve has flattened."""
        result.dev_curve.append(_dev_point(model, args, cache, dev, monitor, loss_fn, autocast, phase.name, step))
        return plateau.update(result.dev_curve[-1]["dev"])

    start = time.perf_counter()
    for phase in phases:
        # -- each phase: its own AdamW, learning rate decayed linearly from phase.lr to 0
        optimizer = torch.optim.AdamW(
            params, lr=phase.lr, eps=args.adam_eps, weight_decay=args.weight_decay
        )
        scheduler = make_scheduler(optimizer, 0, phase.steps)
        plateau = Plateau(mode="min", patience=args.patience, min_delta=args.min_delta)
        if dev:
            measure(phase, 0)
        for step in range(phase.steps):
            examples, sources = next(phase.batches)
            with autocast:
                loss = batch_loss(model, examples, loss_fn, cache)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip or float("inf")))
            value = float(loss.item())
            if not (math.isfinite(value) and math.isfinite(grad_norm)):
                raise RuntimeError(
                    f"phase {phase.name!r}, step {step}: loss {value}, gradient norm {grad_norm}; "
                    "nothing was saved"
                )
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            result.log.append({"phase": phase.name, "step": step, "loss": value, "lr": lr,
                               "grad_norm": grad_norm, "sources": dict(Counter(sources))})
            bar.update(1)
            bar.set_postfix(phase=phase.name[:24], loss=f"{value:.4f}")
            done = step + 1
            if dev and (done % args.dev_every == 0 or done == phase.steps) and measure(phase, done):
                if done < phase.steps:
                    result.stopped[phase.name] = done
                    bar.update(phase.steps - done)
                break
    bar.close()
    model.eval()
    result.seconds = time.perf_counter() - start
    result.cached_states = len(cache) if cache is not None else 0
    if out_dir is not None:
        _save_run(result, Path(out_dir), phases, args)
    return result


def _save_run(result: BiEncoderTrainResult, out_dir: Path, phases: Sequence[Phase],
              args: BiEncoderTrainArgs) -> None:
    """The trained model (``final/``) and ``log.json``: phases, arguments, log and dev curve."""
    result.final_dir = result.model.save_pretrained(out_dir / "final")
    write_json(out_dir / "log.json", {
        "phases": [{"name": p.name, "lr": p.lr, "steps": p.steps} for p in phases],
        "args": vars(args), "seconds": round(result.seconds, 2), "log": result.log,
        "dev_curve": result.dev_curve, "stopped": result.stopped})


def _dev_point(model: BiEncoder, args: BiEncoderTrainArgs, cache: TokenStateCache | None,
               dev: Mapping[str, Sequence[Example]], monitor: Sequence[str], loss_fn: LossFn,
               autocast: AbstractContextManager[Any], phase: str, step: int) -> dict[str, Any]:
    """One point of a dev curve (:func:`held_out_losses` with dropout off): ``dev`` is the mean
    over the ``monitor`` objectives, ``dev/<objective>`` each objective's loss."""
    if cache is None:
        model.eval()  # the whole base trains with dropout: measure without it
    elif args.dropout:
        frozen_base_mode(model, args.top_layers, False)  # type: ignore[arg-type]
    with autocast:
        losses = held_out_losses(model, dev, loss_fn, cache, args.dev_batch_size)
    if cache is None:
        model.train()
    elif args.dropout:
        frozen_base_mode(model, args.top_layers, True)  # type: ignore[arg-type]
    return {"phase": phase, "step": step, "dev": sum(losses[m] for m in monitor) / len(monitor),
            **{f"dev/{k}": v for k, v in losses.items()}}


def examples_digest(examples: Sequence[Example]) -> str:
    """SHA-256 of the examples' texts, in order (what a resumed run's record must match)."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.anchor, e.positive, e.negative]).encode("utf-8"))
    return h.hexdigest()


def finished_run(
    where: Path, settings: Mapping[str, Any], record: str, device: str | torch.device | None = None
) -> BiEncoderTrainResult | None:
    """The run :func:`train_bi_encoder` saved in ``where`` (``final/``, ``log.json``) if the
    record file ``where/record``, written by the caller when the run finished, equals
    ``settings``; else None (never trained, interrupted, or trained with other settings)."""
    rec, final, log = where / record, where / "final", where / "log.json"
    if not (rec.is_file() and final.is_dir() and log.is_file()):
        return None
    if json.loads(rec.read_text(encoding="utf-8")) != json.loads(json.dumps(settings, default=str)):
        return None
    saved = json.loads(log.read_text(encoding="utf-8"))
    model = BiEncoder.from_pretrained(final, device=device)
    return BiEncoderTrainResult(model, saved["log"], final, float(saved.get("seconds", 0.0)),
                                dev_curve=saved.get("dev_curve", []), stopped=saved.get("stopped", {}))
