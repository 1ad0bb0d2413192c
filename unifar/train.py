"""Training UniFAR on Facet-Aware Training Units (paper section 4.2 and appendix A).

:func:`train` runs AdamW with the paper's three learning-rate groups, linear warm-up, gradient
accumulation, bf16/TF32 on CUDA, checkpoints, exact resume and logs. The loop (``_train``) reads
top to bottom, as nanoGPT's does: set up the run (:func:`unifar.training_run.setup_run`: the rank
and the model, the FTU split, the optimizer, a restored checkpoint), then per optimizer step
``_gradients`` (the micro-batches), ``_update`` (clip, check, step) and ``_after_step`` (held-out
loss, log record, checkpoint, callbacks), and ``_finish``. Its parts live beside it:

* :mod:`unifar.training_run` -- what a run sets up and carries from step to step;
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
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np
import torch

from .caching import TokenStateCache
from .checkpoints import CHECKPOINTS, gather_rng_states, save_checkpoint, unlock_run_folder, write_run_info
from .config import TrainArgs, UniFARConfig
from .distributed import init_distributed, mean_over_ranks
from .files import atomic_dir
from .frozen_base import frozen_base_mode, warm_cache
from .model import UniFAR
from .objective import build_ftu_batch, held_out_loss
from .runtime import peak_memory, run_facts
from .training_data import epoch_shard
from .training_log import start_log
from .training_run import RunState, lock_output, setup_run

if TYPE_CHECKING:
    from tqdm.auto import tqdm

    from .datasets.ftu_files import FTUDataset

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
    ftu_dataset: FTUDataset,
    args: TrainArgs,
    model: UniFAR | None = None,
    *,
    resume: bool | None = None,
    eval_dataset: FTUDataset | None = None,
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
        lock = lock_output(Path(args.output_dir), is_main, world)
        return _train(config, ftu_dataset, args, model, resume, eval_dataset, list(callbacks), rank, world, local_rank, is_main,
                      state_cache)
    finally:
        unlock_run_folder(lock)
        if dist_here:
            import torch.distributed as dist

            dist.destroy_process_group()


# ================================================================================ step helpers
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


def _facts(device: torch.device, world: int, started: float) -> dict[str, Any]:
    """The commit, machine, date and duration a run's ``run.json`` records (one shape with every
    other record: :func:`unifar.runtime.run_facts` under ``"run"``)."""
    return {"run": run_facts(started, device, world)}


# ================================================================================ the loop
def _train(
    config: UniFARConfig | None,
    ds: FTUDataset,
    args: TrainArgs,
    model: UniFAR | None,
    resume: bool,
    eval_dataset: FTUDataset | None,
    callbacks: list[Callable[[dict[str, Any]], Any]],
    rank: int,
    world: int,
    local_rank: int,
    is_main: bool,
    state_cache: TokenStateCache | None = None,
) -> TrainResult:
    """The run, top to bottom: set up (:func:`unifar.training_run.setup_run`), then per optimizer
    step the gradients of its micro-batches, the update, and what follows it (held-out loss, log
    record, checkpoint, callbacks); at the end the final model and ``run.json``."""
    from tqdm.auto import tqdm

    run = setup_run(config, ds, args, model, resume, eval_dataset, rank, world, local_rank, is_main, state_cache)
    run.model.train()
    if args.freeze_base:
        frozen_base_mode(run.model, args.train_top_layers, args.top_layers_dropout)
        warm_cache(run.model, run.cache, run.train_ftus, run.documents, args.progress and is_main, is_main)
    per_step = run.config.batch_size * run.config.grad_accumulation
    t_loop = time.perf_counter()
    bar = tqdm(total=run.total_steps, initial=run.step, desc="training", unit="step",
               disable=not (args.progress and is_main))
    log_path = start_log(run.out_dir, run.last_ckpt, run.step) if is_main else None
    log_file = open(log_path, "a", encoding="utf-8") if log_path is not None else None
    try:
        for epoch in range(run.start_epoch, run.epochs):
            if run.step >= run.total_steps:
                break
            shard = epoch_shard(len(run.train_ftus), run.seed, epoch, rank, world)
            for pos in range(run.start_pos if epoch == run.start_epoch else 0, run.steps_per_epoch):
                if run.step >= run.total_steps:
                    break
                t0 = time.perf_counter()
                idx = shard[pos * per_step : (pos + 1) * per_step]
                progress = run.step / max(1, run.total_steps - 1)
                lam = run.config.kl_lambda(progress)
                lrs, grad_norm = _update(run, _gradients(run, idx, epoch, pos, lam), lam)
                record = _step_record(run, epoch, progress, lrs, grad_norm, len(idx) * world, t0)
                if _after_step(run, record, progress, log_file, bar, callbacks, epoch, pos):
                    break
            if run.stopped:
                break
    except TrainingDiverged as err:
        if is_main:  # record the failure; no checkpoint or final model is written after it
            write_run_info(run.out_dir, {
                **run.run_base, "status": "diverged", "error": str(err), "step": err.step, "terms": err.terms,
                "last_checkpoint": str(run.last_ckpt.relative_to(run.out_dir)) if run.last_ckpt else None,
                **_facts(run.device, world, run.t_start), "wall_seconds": round(time.perf_counter() - run.t_start, 3)})
        raise
    finally:
        bar.close()
        if log_file is not None:
            log_file.close()
    return _finish(run, t_loop)


def _gradients(run: RunState, idx: np.ndarray, epoch: int, pos: int, lam: float) -> torch.Tensor:
    """Forward and backward of one optimizer step's micro-batches (``idx``: its FTUs' positions);
    returns ``[L_total, L_dd, L_qd, L_KL, L_KD]`` averaged over the micro-batches and the ranks."""
    bs = run.config.batch_size
    micro = [idx[k : k + bs] for k in range(0, len(idx), bs)]
    sums = torch.zeros(5, device=run.device)
    for k, mb in enumerate(micro):
        # The cap sample depends only on (seed, epoch, position, micro-batch, rank),
        # so a resumed run draws the same documents.
        rng = np.random.default_rng([run.seed, epoch, pos, k, run.rank])
        fb = build_ftu_batch(run.model, [run.train_ftus[i] for i in mb], run.documents,
                             run.args.max_positives, run.args.max_negatives, rng,
                             max_teacher_candidates=run.args.max_teacher_candidates).to(run.device)
        sync = run.ddp is None or k == len(micro) - 1
        with (nullcontext() if sync else run.ddp.no_sync()):
            with run.autocast:
                terms = run.objective(fb, lam)
            (terms.total / len(micro)).backward()
        kd = terms.distill if terms.distill is not None else terms.kl.new_zeros(())
        sums += torch.stack([terms.total, terms.doc_doc, terms.question_doc, terms.kl, kd]).detach().float()
    sums /= len(micro)
    mean_over_ranks(sums, run.world)
    return sums


def _update(run: RunState, sums: torch.Tensor, lam: float) -> tuple[dict[str, float], float]:
    """Clip, check and apply one optimizer step (a diverged step raises :class:`TrainingDiverged`
    before it is applied); sets ``run.last_terms`` and returns the learning rates it used and the
    gradient norm before clipping."""
    grad_norm = torch.nn.utils.clip_grad_norm_(run.params, run.args.grad_clip if run.args.grad_clip else float("inf"))
    loss, l_dd, l_qd, l_kl, l_kd = sums.tolist()
    gnorm = float(grad_norm)
    current = {"loss": loss, "l_dd": l_dd, "l_qd": l_qd, "l_kl": l_kl, "lambda": lam}
    if run.config.distill_weight > 0:
        current["l_kd"] = l_kd
    bad = _divergence(loss, gnorm, run.args.max_loss)
    if bad:
        run.optimizer.zero_grad(set_to_none=True)
        if run.is_main:
            logger.error("step %d: %s", run.step + 1, bad)
        raise TrainingDiverged(run.step + 1, {**current, "grad_norm": gnorm}, run.last_ckpt, bad)
    lrs = {g["name"]: g["lr"] for g in run.optimizer.param_groups if "/" not in g["name"]}
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.step += 1
    run.last_terms = current
    return lrs, gnorm


def _step_record(run: RunState, epoch: int, progress: float, lrs: dict[str, float], grad_norm: float,
                 n_ftus: int, t0: float) -> dict[str, Any]:
    """The log record of the step just taken (``log.jsonl``, :mod:`unifar.training_log`)."""
    run.ftus_seen += n_ftus
    dt = time.perf_counter() - t0
    return {
        "step": run.step, "epoch": epoch, "progress": round(progress, 6), "lr": lrs, **run.last_terms,
        "grad_norm": grad_norm, "seconds": round(dt, 4),
        "ftus_per_s": round(n_ftus / dt, 3) if dt > 0 else None, "ftus": n_ftus,
    }


def _checkpoint(run: RunState, epoch: int, pos: int) -> None:
    """Save the step just taken (every rank gathers its RNG state; rank 0 writes)."""
    rng_states = gather_rng_states(run.world)  # collective: every rank calls it
    if not run.is_main:
        return
    at = (epoch, pos + 1) if pos + 1 < run.steps_per_epoch else (epoch + 1, 0)
    trainer_state = {**run.run_base, "step": run.step, "epoch": at[0], "step_in_epoch": at[1],
                     "last_terms": dict(run.last_terms), "train_ftus_sha256": run.train_digest}
    run.last_ckpt = save_checkpoint(run.out_dir, run.model, run.optimizer, run.scheduler, rng_states,
                                    trainer_state, run.args.keep_checkpoints) or run.last_ckpt


def _after_step(run: RunState, record: dict[str, Any], progress: float, log_file: IO[str] | None, bar: tqdm,
                callbacks: list[Callable[[dict[str, Any]], Any]], epoch: int, pos: int) -> bool:
    """What follows a step: the held-out loss (rank 0), the log record, the progress bar, the
    scheduled checkpoint, then the callbacks. True when a callback ends the run."""
    args, step = run.args, run.step
    if run.eval_ftus and run.is_main and ((args.eval_every and step % args.eval_every == 0)
                                          or step == run.total_steps):
        run.eval_terms = held_out_loss(run.model, run.eval_ftus, run.eval_docs, args, progress, run.autocast,
                                       run.cache)
        if args.freeze_base:
            frozen_base_mode(run.model, args.train_top_layers, args.top_layers_dropout)
        record["eval"] = run.eval_terms
    if log_file is not None and (step % args.log_every == 0 or step == run.total_steps or "eval" in record):
        log_file.write(json.dumps(record) + "\n")
        log_file.flush()
    bar.update(1)
    bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr'].get('base', 0):.2e}")
    # The scheduled checkpoint comes before the callbacks, so that a callback that raises
    # (a killed job) finds the step saved.
    saved = step % args.save_every == 0 or step == run.total_steps
    if saved:
        _checkpoint(run, epoch, pos)
    if not callbacks:
        return False
    # A callback may end the run: a truthy return (the reason), e.g. a dev curve that
    # has flattened (unifar.learning_curve.DevCurve). Rank 0's answer counts.
    answers = [cb(record) for cb in callbacks]
    if args.freeze_base:  # a callback's evaluation may have switched modes
        frozen_base_mode(run.model, args.train_top_layers, args.top_layers_dropout)
    stop_reason = _stop_reason(answers, run.world)
    if stop_reason:
        run.stopped = {"step": step, "reason": stop_reason}
        if not saved:
            _checkpoint(run, epoch, pos)
    return bool(stop_reason)


def _finish(run: RunState, t_loop: float) -> TrainResult:
    """Rank 0 writes the final model and ``run.json`` (and drops the checkpoints unless kept)."""
    wall = time.perf_counter() - run.t_start
    loop_seconds = time.perf_counter() - t_loop
    final_dir, run_info, out_dir, cache = None, {}, run.out_dir, run.cache
    if run.is_main:
        final_dir = atomic_dir(out_dir / "final", lambda d: run.model.save_pretrained(d))
        run_info = {
            **run.run_base, "status": "finished", **_facts(run.device, run.world, run.t_start),
            "wall_seconds": round(wall, 3), "train_loop_seconds": round(loop_seconds, 3),
            "start_step": run.start_step, "steps": run.step, "ftus_seen": run.ftus_seen,
            "ftus_per_second": round(run.ftus_seen / loop_seconds, 3) if loop_seconds > 0 else None,
            "peak_memory": peak_memory(run.device),
            "frozen_state_cache": {"inputs": len(cache), "hits": cache.hits, "misses": cache.misses} if cache else None,
            "last_terms": run.last_terms, "held_out": run.eval_terms, "stopped_early": run.stopped,
            "last_checkpoint": str(run.last_ckpt.relative_to(out_dir)) if run.last_ckpt else None, "final": "final",
        }
        if not run.args.keep_checkpoints_when_done and run.last_ckpt is not None:
            shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
            run_info["last_checkpoint"], run.last_ckpt = None, None
            run_info["checkpoints_deleted"] = True  # a resume of this folder has nothing to start from
        write_run_info(out_dir, run_info)
    return TrainResult(model=run.model, output_dir=out_dir, final_dir=final_dir, steps=run.step,
                       start_step=run.start_step, last_checkpoint=run.last_ckpt, last_terms=run.last_terms,
                       run_info=run_info)
