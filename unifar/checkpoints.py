"""The run folder of a training run: checkpoints, the RNG state they carry, and exact resume.

A run folder ``OUT`` holds ``log.jsonl`` (:mod:`unifar.training_log`), ``run.json`` (the run's
facts, written at its end or when it diverges), ``final/`` (the trained model) and
``checkpoints/step-NNNNNN/``: the model (:meth:`unifar.model.UniFAR.save_pretrained`), the
optimizer, the scheduler, every rank's RNG state and ``trainer_state.json`` (where in which
epoch the run stands). Each checkpoint is written to a temporary folder and renamed
(:func:`unifar.files.atomic_dir`), so a killed run never leaves a torn one, and resuming from
the newest complete checkpoint on the CPU ends with exactly the weights of an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch

from .files import atomic_dir, write_json

if TYPE_CHECKING:
    from .model import UniFAR

__all__ = [
    "CHECKPOINTS",
    "TRAINER_STATE",
    "list_checkpoints",
    "latest_checkpoint",
    "resume_point",
    "rng_state",
    "set_rng_state",
    "gather_rng_states",
    "save_checkpoint",
    "load_checkpoint",
    "write_run_info",
]

logger = logging.getLogger("unifar.train")  # one logger for all of training's messages

CHECKPOINTS = "checkpoints"
TRAINER_STATE = "trainer_state.json"


# ================================================================================ finding checkpoints
def list_checkpoints(output_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete checkpoints (their trainer_state.json exists) as ``(step, folder)``, oldest first."""
    root = Path(output_dir) / CHECKPOINTS
    found = []
    if root.is_dir():
        for p in root.glob("step-*"):
            if p.is_dir() and (p / TRAINER_STATE).is_file() and p.name[5:].isdigit():
                found.append((int(p.name[5:]), p))
    return sorted(found)


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under ``output_dir/checkpoints``, or None."""
    found = list_checkpoints(Path(output_dir))
    return found[-1][1] if found else None


def resume_point(out_dir: Path, resume: bool, seed: int, is_main: bool) -> tuple[Path | None, dict[str, Any] | None, int]:
    """``(checkpoint, its trainer state, seed)`` a run starts from: the newest checkpoint of
    ``out_dir`` when resuming (and the seed it was trained with), else ``(None, None, seed)``.

    A fresh run (``resume=False``) refuses a folder that already holds a run; every rank checks,
    so none hangs waiting for the others.
    """
    ckpt = latest_checkpoint(out_dir) if resume else None
    state: dict[str, Any] | None = None
    if ckpt is not None:
        state = json.loads((ckpt / TRAINER_STATE).read_text(encoding="utf-8"))
        if state["seed"] != seed:
            logger.warning("resuming with the checkpoint's seed %s (args.seed=%s)", state["seed"], seed)
            seed = state["seed"]
    elif not resume and (list_checkpoints(out_dir) or (out_dir / "final").exists()):  # every rank: none may hang
        raise FileExistsError(f"{out_dir} already holds a training run; pass resume=True (--resume) or use a new folder")
    elif resume and is_main:
        logger.info("resume requested but %s has no checkpoint: starting from scratch", out_dir)
    return ckpt, state, seed


# ================================================================================ RNG state
def rng_state() -> dict[str, Any]:
    """Every RNG the training loop uses (Python's, NumPy's global one, torch's CPU and CUDA ones),
    in a form ``torch.load(weights_only=True)`` accepts.

    >>> s = rng_state()
    >>> first = (random.random(), np.random.rand(), torch.rand(1).item())
    >>> set_rng_state(s)
    >>> first == (random.random(), np.random.rand(), torch.rand(1).item())
    True
    >>> set_rng_state(s)  # leave the RNGs as they were
    """
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


def set_rng_state(s: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    p = s["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    n = s["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(s["torch"])
    if s.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def gather_rng_states(world: int) -> list[Any]:
    """Every rank's :func:`rng_state`, in rank order (collective: all ranks call this)."""
    states = [rng_state()]
    if world > 1:
        import torch.distributed as dist

        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, states[0])
        states = gathered
    return states


# ================================================================================ save and load
def save_checkpoint(out_dir: Path, model: "UniFAR", optimizer: Any, scheduler: Any, rng_states: list[Any],
                    trainer_state: Mapping[str, Any], keep: int) -> Path:
    """Write ``out_dir/checkpoints/step-NNNNNN`` (atomically) and delete all but the newest ``keep``.

    ``trainer_state`` holds at least ``step``; ``saved_at`` is added.
    """
    at_step = trainer_state["step"]
    state = {**trainer_state, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}

    def write(d: Path) -> None:
        model.save_pretrained(d)
        torch.save(optimizer.state_dict(), d / "optimizer.pt")
        torch.save(scheduler.state_dict(), d / "scheduler.pt")
        torch.save(rng_states, d / "rng_state.pt")
        (d / TRAINER_STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")

    path = atomic_dir(out_dir / CHECKPOINTS / f"step-{at_step:06d}", write)
    for _, old in list_checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def load_checkpoint(ckpt: Path, state: Mapping[str, Any], model: "UniFAR", optimizer: Any, scheduler: Any,
                    device: torch.device, rank: int, world: int, seed: int, n_train_ftus: int,
                    total_steps: int) -> tuple[int, int, int]:
    """Load a checkpoint's weights, optimizer, scheduler and this rank's RNG state; returns
    ``(step, epoch, step_in_epoch)`` to continue from.

    With another number of ranks than the checkpoint's, the RNGs are re-seeded from the step
    instead (deterministic, but not the uninterrupted run's draws). The run must train on as many
    FTUs as the checkpoint's (``n_train_ftus``); another ``total_steps`` changes the schedule.
    """
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
        set_rng_state(rng_states[rank])
    else:  # a different world size: re-seed deterministically from the step instead
        logger.warning("checkpoint has RNG states for %d ranks, this run has %d: re-seeding", len(rng_states), world)
        torch.manual_seed(seed + rank + 7919 * state["step"])
    if state.get("n_train_ftus") != n_train_ftus:
        raise ValueError(f"cannot resume {ckpt}: it was trained on {state.get('n_train_ftus')} FTUs, this run has {n_train_ftus}")
    if state.get("total_steps") != total_steps:
        logger.warning("resuming with %d total steps (checkpoint: %s): the schedule changes", total_steps, state.get("total_steps"))
    return state["step"], state["epoch"], state["step_in_epoch"]


def write_run_info(out_dir: Path, info: Mapping[str, Any]) -> Path:
    """Write ``out_dir/run.json``: the run's settings, facts and outcome."""
    return write_json(out_dir / "run.json", info)
