"""Training UniFAR on Facet-Aware Training Units (paper section 4.2 and appendix A).

:func:`train` runs AdamW with the paper's three learning-rate groups, linear warm-up, gradient
accumulation, bf16/TF32 on CUDA, checkpoints, exact resume and logs. The loop reads top to
bottom: set up the rank and the model, split the FTUs, build the optimizer, restore a checkpoint,
then per optimizer step the micro-batches, the held-out loss, the log record and the checkpoint.
Its parts live beside it:

* :mod:`unifar.objective` -- the FTU batch and ``L_total`` of section 4.2;
* :mod:`unifar.optim` -- AdamW's groups and the learning-rate schedule (appendix A);
* :mod:`unifar.training_data` -- the held-out split, each epoch's shard, the number of steps;
* :mod:`unifar.distributed` -- ranks, devices and precision under ``torchrun``;
* :mod:`unifar.frozen_base` -- training on a frozen base's cached states (our CPU profile);
* :mod:`unifar.checkpoints` -- checkpoints, RNG states, resume, ``run.json``;
* :mod:`unifar.training_log` -- ``log.jsonl`` and its summary.

Launch on one device (CPU or one GPU), or on several GPUs of one machine with ``torchrun``
(see :mod:`unifar.distributed`)::

    python -m unifar train --ftus data/ftus --output runs/unifar-minilm
    torchrun --nproc_per_node 4 -m unifar train --ftus data/ftus --output runs/unifar-mpnet --profile paper

Our choices where the paper is silent (each also noted where it is made): linear *decay* after
the warm-up, gradient clipping at norm 1.0, weight decay 0.01 on every matrix (not on biases or
LayerNorm weights), lambda's progress measured in optimizer steps, and per-facet caps on the
number of positives/negatives (none by default, as in the paper).
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch

from .caching import TokenStateCache
from .checkpoints import (CHECKPOINTS, TRAINER_STATE, RunFolderBusy, gather_rng_states,
                          load_checkpoint, lock_run_folder, resume_point, save_checkpoint, unlock_run_folder,
                          write_run_info)
from .config import TrainArgs, UniFARConfig, check_training_config
from .distributed import init_distributed, mean_over_ranks, rank_device, wrap_ddp
from .files import atomic_dir
from .frozen_base import freeze_base, frozen_base_mode, frozen_state_cache, warm_cache
from .model import UniFAR
from .objective import Objective, build_ftu_batch, held_out_loss
from .optim import make_optimizer, make_scheduler
from .runtime import git_commit, machine_facts, peak_memory
from .training_data import epoch_shard, ftus_digest, run_length, split_ftus
from .training_log import start_log

__all__ = ["TrainResult", "TrainingDiverged", "train"]

logger = logging.getLogger(__name__)


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


def train(
    config: UniFARConfig | None,
    ftu_dataset: Any,
    args: TrainArgs,
    model: UniFAR | None = None,
    *,
    resume: bool | None = None,
    eval_dataset: Any | None = None,
    callbacks: Iterable[Callable[[dict[str, Any]], Any]] = (),
    state_cache: TokenStateCache | None = None,
) -> TrainResult:
    """Train UniFAR on an :class:`~unifar.datasets.ftu_files.FTUDataset` (section 4.2, appendix A).

    ``model=None`` builds ``UniFAR(config)``; a given model must match ``config`` in every model
    field (training fields may differ; ``config=None`` uses ``model.config``). ``resume`` (default
    ``args.resume``) restarts from the latest complete checkpoint in ``args.output_dir``; on the
    CPU the resumed run ends with exactly the weights of an uninterrupted one. ``eval_dataset``
    (FTUs with their documents) gives a held-out loss; otherwise ``args.eval_fraction`` of the
    FTUs is held out. Each ``callbacks`` entry is called with every step's log record (all ranks);
    a truthy return ends the run after that step (its reason goes to ``run.json`` as
    ``stopped_early``), which is how :class:`unifar.learning_curve.DevCurve` trains until the dev
    curve flattens.
    ``state_cache`` (with ``args.freeze_base``): a :class:`~unifar.caching.TokenStateCache` to reuse
    across runs on the same frozen base (e.g. a sweep); a fresh one by default.

    One run at a time per ``args.output_dir``: rank 0 holds ``OUT/.lock`` for the run, and a
    second run into the folder raises :class:`~unifar.checkpoints.RunFolderBusy` at once.
    """
    resume = args.resume if resume is None else resume
    rank, world, local_rank, dist_here = init_distributed()
    is_main = rank == 0
    lock = None
    try:
        lock = _lock_output(Path(args.output_dir), is_main, world)
        return _train(config, ftu_dataset, args, model, resume, eval_dataset, list(callbacks), rank, world, local_rank, is_main,
                      state_cache)
    finally:
        unlock_run_folder(lock)
        if dist_here:
            import torch.distributed as dist

            dist.destroy_process_group()


# ================================================================================ setup steps
def _lock_output(out_dir: Path, is_main: bool, world: int) -> Any:
    """Rank 0 locks the run folder (only it writes there); every rank learns whether it could, so
    with another run in the folder (or an unwritable one) all ranks stop instead of waiting."""
    lock, failed = None, None
    if is_main:
        try:
            lock = lock_run_folder(out_dir)
        except OSError as err:  # RunFolderBusy, or the folder cannot be created
            failed = err
    if world > 1:
        import torch.distributed as dist

        shared = [None if failed is None else str(failed)]
        dist.broadcast_object_list(shared, src=0)
        if shared[0] is not None and failed is None:
            failed = RunFolderBusy(f"rank 0: {shared[0]}")
    if failed is not None:
        raise failed
    return lock


def _setup_model(config: UniFARConfig | None, model: UniFAR | None, device: torch.device,
                 state: Mapping[str, Any] | None, ckpt: Path | None) -> tuple[UniFAR, UniFARConfig]:
    """``UniFAR(config)``, or the given model checked against ``config`` in every model field
    (training fields may differ), on ``device``; a resumed run's config must be the checkpoint's."""
    if model is None:
        if config is None:
            raise ValueError("give a config or a model")
        model = UniFAR(config, device=device)
    else:
        if config is None:
            config = model.config
        check_training_config(model.config, config)
        model.config = config
        model.to(device)
    if state is not None and state["config"] != config.to_dict():
        differ = sorted(k for k in state["config"] if state["config"][k] != config.to_dict().get(k))
        raise ValueError(f"cannot resume {ckpt}: its config differs in {differ}")
    return model, config


def _divergence(loss: float, grad_norm: float, max_loss: float) -> str | None:
    """Why a step must not be taken (non-finite or too large a loss, non-finite gradient), or None."""
    if not math.isfinite(loss):
        return "non-finite loss"
    if loss > max_loss:
        return f"loss above max_loss={max_loss}"
    if not math.isfinite(grad_norm):
        return "non-finite gradient norm"
    return None


def _stop_reason(answers: list[Any], world: int) -> str | None:
    """The first truthy callback answer as the reason to stop, agreed across ranks (rank 0's)."""
    reason = next((str(a) for a in answers if a), None)
    if world > 1:
        import torch.distributed as dist

        shared = [reason]
        dist.broadcast_object_list(shared, src=0)
        reason = shared[0]
    return reason


def _facts(device: torch.device, world: int) -> dict[str, Any]:
    """The commit and machine a run's ``run.json`` records."""
    return {"git": git_commit(), "machine": machine_facts(device, world)}


# ================================================================================ the loop
def _train(
    config: UniFARConfig | None,
    ds: Any,
    args: TrainArgs,
    model: UniFAR | None,
    resume: bool,
    eval_dataset: Any | None,
    callbacks: list[Callable[[dict[str, Any]], Any]],
    rank: int,
    world: int,
    local_rank: int,
    is_main: bool,
    state_cache: TokenStateCache | None = None,
) -> TrainResult:
    from tqdm.auto import tqdm

    # ---- setup: device, resume point, seeds, model -----------------------------------------
    t_start = time.perf_counter()
    out_dir = Path(args.output_dir)
    device, use_bf16, autocast = rank_device(args.device, world, local_rank, args.tf32, args.bf16)
    ckpt, state, seed = resume_point(out_dir, resume, args.seed, is_main)
    if state is not None and config is None and model is None:
        config = UniFARConfig.from_dict(state["config"], where=str(ckpt / TRAINER_STATE))
    # Seed every RNG (rank-specific for torch so dropout masks differ across ranks).
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed + rank)
    model, config = _setup_model(config, model, device, state, ckpt)

    # ---- data: held-out split, run length ---------------------------------------------------
    train_ftus, eval_ftus, eval_docs = split_ftus(ds, eval_dataset, args, seed)
    train_digest = ftus_digest(train_ftus)  # a checkpoint records it: a resume must train on the same FTUs
    documents = ds.documents
    bs, per_step = config.batch_size, config.batch_size * config.grad_accumulation
    steps_per_epoch, epochs, total_steps, warmup_steps = run_length(len(train_ftus), world, config, args.epochs,
                                                                    args.max_steps)

    # ---- optimiser, schedule, frozen-base cache, DDP, resume ---------------------------------
    top_k = args.train_top_layers
    if args.freeze_base:
        freeze_base(model, top_k)
    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, warmup_steps, total_steps)
    cache = frozen_state_cache(state_cache, top_k) if args.freeze_base else None
    objective: torch.nn.Module = Objective(model, cache)
    ddp = wrap_ddp(objective, device) if world > 1 else None
    if ddp is not None:
        objective = ddp
    step, start_epoch, start_pos = 0, 0, 0
    if ckpt is not None and state is not None:
        step, start_epoch, start_pos = load_checkpoint(ckpt, state, model, optimizer, scheduler, device, rank, world,
                                                       seed, len(train_ftus), total_steps, ftus_digest=train_digest,
                                                       verified=True)
    start_step = step
    log_path = start_log(out_dir, ckpt, step) if is_main else None
    run_base = {
        "config": config.to_dict(), "args": args.to_dict(), "seed": seed, "world_size": world,
        "n_train_ftus": len(train_ftus), "n_eval_ftus": len(eval_ftus), "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps, "warmup_steps": warmup_steps, "ftus_per_step": per_step * world, "bf16": use_bf16,
    }

    # ---- loop ----------------------------------------------------------------------------------
    model.train()
    if args.freeze_base:
        frozen_base_mode(model, top_k, args.top_layers_dropout)
        warm_cache(model, cache, train_ftus, documents, args.progress and is_main, is_main)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    last_ckpt, last_terms, eval_terms, ftus_seen = ckpt, {}, None, 0
    stopped: dict[str, Any] | None = None  # set when a callback ends the run early
    t_loop = time.perf_counter()
    bar = tqdm(total=total_steps, initial=step, desc="training", unit="step", disable=not (args.progress and is_main))

    def _checkpoint() -> Path | None:
        """Save the step just taken (every rank gathers its RNG state; rank 0 writes)."""
        rng_states = gather_rng_states(world)  # collective: every rank calls it
        if not is_main:
            return None
        at = (epoch, pos + 1) if pos + 1 < steps_per_epoch else (epoch + 1, 0)
        trainer_state = {**run_base, "step": step, "epoch": at[0], "step_in_epoch": at[1],
                         "last_terms": dict(last_terms), "train_ftus_sha256": train_digest}
        return save_checkpoint(out_dir, model, optimizer, scheduler, rng_states, trainer_state, args.keep_checkpoints)

    log_file = open(log_path, "a", encoding="utf-8") if log_path is not None else None
    try:
        for epoch in range(start_epoch, epochs):
            if step >= total_steps:
                break
            shard = epoch_shard(len(train_ftus), seed, epoch, rank, world)
            for pos in range(start_pos if epoch == start_epoch else 0, steps_per_epoch):
                if step >= total_steps:
                    break
                # -- one optimizer step: gradients of its micro-batches, clipped, checked, applied
                t0 = time.perf_counter()
                idx = shard[pos * per_step : (pos + 1) * per_step]
                micro = [idx[k : k + bs] for k in range(0, len(idx), bs)]
                progress = step / max(1, total_steps - 1)
                lam = config.kl_lambda(progress)
                sums = torch.zeros(5, device=device)
                for k, mb in enumerate(micro):
                    # The cap sample depends only on (seed, epoch, position, micro-batch, rank),
                    # so a resumed run draws the same documents.
                    rng = np.random.default_rng([seed, epoch, pos, k, rank])
                    fb = build_ftu_batch(model, [train_ftus[i] for i in mb], documents,
                                         args.max_positives, args.max_negatives, rng,
                                         max_teacher_candidates=args.max_teacher_candidates).to(device)
                    sync = ddp is None or k == len(micro) - 1
                    with (nullcontext() if sync else ddp.no_sync()):  # type: ignore[union-attr]
                        with autocast:
                            terms = objective(fb, lam)
                        (terms.total / len(micro)).backward()
                    kd = terms.distill if terms.distill is not None else terms.kl.new_zeros(())
                    sums += torch.stack([terms.total, terms.doc_doc, terms.question_doc, terms.kl, kd]).detach().float()
                sums /= len(micro)
                mean_over_ranks(sums, world)
                grad_norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip if args.grad_clip else float("inf"))
                loss, l_dd, l_qd, l_kl, l_kd = sums.tolist()
                gnorm = float(grad_norm)
                current = {"loss": loss, "l_dd": l_dd, "l_qd": l_qd, "l_kl": l_kl, "lambda": lam}
                if config.distill_weight > 0:
                    current["l_kd"] = l_kd
                bad = _divergence(loss, gnorm, args.max_loss)
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
                    "step": step, "epoch": epoch, "progress": round(progress, 6), "lr": lrs, **current,
                    "grad_norm": gnorm, "seconds": round(dt, 4),
                    "ftus_per_s": round(n_ftus / dt, 3) if dt > 0 else None, "ftus": n_ftus,
                }
                # -- held-out loss (rank 0), log record, checkpoint, callbacks
                if eval_ftus and is_main and ((args.eval_every and step % args.eval_every == 0) or step == total_steps):
                    eval_terms = held_out_loss(model, eval_ftus, eval_docs, args, progress, autocast, cache)
                    if args.freeze_base:
                        frozen_base_mode(model, top_k, args.top_layers_dropout)
                    record["eval"] = eval_terms
                if log_file is not None and (step % args.log_every == 0 or step == total_steps or "eval" in record):
                    log_file.write(json.dumps(record) + "\n")
                    log_file.flush()
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lrs.get('base', 0):.2e}")
                # The scheduled checkpoint comes before the callbacks, so that a callback that raises
                # (a killed job) finds the step saved.
                saved = step % args.save_every == 0 or step == total_steps
                if saved:
                    last_ckpt = _checkpoint() or last_ckpt
                # A callback may end the run: a truthy return (the reason), e.g. a dev curve that
                # has flattened (unifar.learning_curve.DevCurve). Rank 0's answer counts.
                answers = [cb(record) for cb in callbacks]
                if args.freeze_base and callbacks:  # a callback's evaluation may have switched modes
                    frozen_base_mode(model, top_k, args.top_layers_dropout)
                stop_reason = _stop_reason(answers, world) if callbacks else None
                if stop_reason:
                    stopped = {"step": step, "reason": stop_reason}
                    if not saved:
                        last_ckpt = _checkpoint() or last_ckpt
                if stop_reason:
                    break
            if stopped:
                break
    except TrainingDiverged as err:
        if is_main:  # record the failure; no checkpoint or final model is written after it
            write_run_info(out_dir, {
                **run_base, "status": "diverged", "error": str(err), "step": err.step, "terms": err.terms,
                "last_checkpoint": str(last_ckpt.relative_to(out_dir)) if last_ckpt else None,
                **_facts(device, world), "wall_seconds": round(time.perf_counter() - t_start, 3)})
        raise
    finally:
        bar.close()
        if log_file is not None:
            log_file.close()

    # ---- end of run: final model, run.json ---------------------------------------------------
    wall = time.perf_counter() - t_start
    loop_seconds = time.perf_counter() - t_loop
    final_dir = None
    run_info: dict[str, Any] = {}
    if is_main:
        final_dir = atomic_dir(out_dir / "final", lambda d: model.save_pretrained(d))
        run_info = {
            **run_base, "status": "finished", **_facts(device, world),
            "wall_seconds": round(wall, 3), "train_loop_seconds": round(loop_seconds, 3),
            "start_step": start_step, "steps": step, "ftus_seen": ftus_seen,
            "ftus_per_second": round(ftus_seen / loop_seconds, 3) if loop_seconds > 0 else None,
            "peak_memory": peak_memory(device),
            "frozen_state_cache": {"inputs": len(cache), "hits": cache.hits, "misses": cache.misses} if cache else None,
            "last_terms": last_terms, "held_out": eval_terms, "stopped_early": stopped,
            "last_checkpoint": str(last_ckpt.relative_to(out_dir)) if last_ckpt else None, "final": "final",
        }
        if not args.keep_checkpoints_when_done and last_ckpt is not None:
            shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
            run_info["last_checkpoint"], last_ckpt = None, None
            run_info["checkpoints_deleted"] = True  # a resume of this folder has nothing to start from
        write_run_info(out_dir, run_info)
    return TrainResult(model=model, output_dir=out_dir, final_dir=final_dir, steps=step, start_step=start_step,
                       last_checkpoint=last_ckpt, last_terms=last_terms, run_info=run_info)
