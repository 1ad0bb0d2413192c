"""What a training run sets up before its first step, and what it carries from step to step.

:func:`setup_run` does, in order: pick the rank's device and precision
(:func:`unifar.distributed.rank_device`), find the resume point and seed every RNG, build or
check the model, split the FTUs (:func:`unifar.training_data.split_ftus`) and count the run's
steps, freeze the base where asked, build AdamW and its schedule (:mod:`unifar.optim`), wrap the
objective in DDP on several ranks, and restore a checkpoint. It returns a :class:`RunState`, which
:func:`unifar.train.train`'s loop advances one optimizer step at a time.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch

from .caching import TokenStateCache
from .checkpoints import TRAINER_STATE, RunFolderBusy, load_checkpoint, lock_run_folder, resume_point
from .config import TrainArgs, UniFARConfig, check_training_config
from .distributed import rank_device, wrap_ddp
from .frozen_base import freeze_base, frozen_state_cache
from .model import UniFAR
from .objective import Objective
from .optim import make_optimizer, make_scheduler
from .training_data import ftus_digest, run_length, split_ftus

if TYPE_CHECKING:
    from .datasets.ftu_files import FTUDataset

__all__ = ["RunState", "lock_output", "setup_run"]


@dataclass
class RunState:
    """One training run: what is fixed once it is set up (first block), and the counters and
    records the loop advances (second block)."""

    model: UniFAR
    config: UniFARConfig
    args: TrainArgs
    out_dir: Path
    device: torch.device
    autocast: Any  # torch.autocast on CUDA with bf16, else a null context
    seed: int
    rank: int
    world: int
    is_main: bool
    train_ftus: list[Any]
    eval_ftus: list[Any]
    eval_docs: Mapping[str, Any]
    documents: Mapping[str, Any]
    train_digest: str  # a checkpoint records it: a resume must train on the same FTUs
    steps_per_epoch: int
    epochs: int
    total_steps: int
    optimizer: torch.optim.Optimizer
    scheduler: Any
    cache: TokenStateCache | None  # the frozen base's states (args.freeze_base)
    objective: torch.nn.Module  # Objective(model, cache), DDP-wrapped on several ranks
    ddp: Any
    params: list[torch.nn.Parameter]
    run_base: dict[str, Any]  # what run.json and every checkpoint record about the run
    t_start: float

    step: int = 0
    start_epoch: int = 0
    start_pos: int = 0
    start_step: int = 0
    last_ckpt: Path | None = None
    last_terms: dict[str, float] = field(default_factory=dict)
    eval_terms: dict[str, float] | None = None
    ftus_seen: int = 0
    stopped: dict[str, Any] | None = None  # set when a callback ends the run early


def lock_output(out_dir: Path, is_main: bool, world: int) -> Any:
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


def setup_run(config: UniFARConfig | None, ds: FTUDataset, args: TrainArgs, model: UniFAR | None, resume: bool,
              eval_dataset: FTUDataset | None, rank: int, world: int, local_rank: int, is_main: bool,
              state_cache: TokenStateCache | None = None) -> RunState:
    """Everything before the first step (module docstring), restored from the latest checkpoint
    of ``args.output_dir`` when ``resume``."""
    # ---- device, resume point, seeds, model
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

    # ---- data: held-out split, run length
    train_ftus, eval_ftus, eval_docs = split_ftus(ds, eval_dataset, args, seed)
    per_step = config.batch_size * config.grad_accumulation
    steps_per_epoch, epochs, total_steps, warmup_steps = run_length(len(train_ftus), world, config, args.epochs,
                                                                    args.max_steps)

    # ---- optimiser, schedule, frozen-base cache, DDP
    if args.freeze_base:
        freeze_base(model, args.train_top_layers)
    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, warmup_steps, total_steps)
    cache = frozen_state_cache(state_cache, args.train_top_layers) if args.freeze_base else None
    objective: torch.nn.Module = Objective(model, cache)
    ddp = wrap_ddp(objective, device) if world > 1 else None
    run = RunState(
        model=model, config=config, args=args, out_dir=out_dir, device=device, autocast=autocast, seed=seed,
        rank=rank, world=world, is_main=is_main, train_ftus=train_ftus, eval_ftus=eval_ftus, eval_docs=eval_docs,
        documents=ds.documents, train_digest=ftus_digest(train_ftus), steps_per_epoch=steps_per_epoch,
        epochs=epochs, total_steps=total_steps, optimizer=optimizer, scheduler=scheduler, cache=cache,
        objective=ddp if ddp is not None else objective, ddp=ddp,
        params=[p for g in optimizer.param_groups for p in g["params"]],
        run_base={
            "config": config.to_dict(), "args": args.to_dict(), "seed": seed, "world_size": world,
            "n_train_ftus": len(train_ftus), "n_eval_ftus": len(eval_ftus), "steps_per_epoch": steps_per_epoch,
            "total_steps": total_steps, "warmup_steps": warmup_steps, "ftus_per_step": per_step * world,
            "bf16": use_bf16,
        },
        t_start=t_start, last_ckpt=ckpt,
    )
    # ---- resume
    if ckpt is not None and state is not None:
        run.step, run.start_epoch, run.start_pos = load_checkpoint(
            ckpt, state, model, optimizer, scheduler, device, rank, world, seed, len(train_ftus), total_steps,
            ftus_digest=run.train_digest, verified=True)
    run.start_step = run.step
    return run
