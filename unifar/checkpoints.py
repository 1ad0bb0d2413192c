"""The run folder of a training run: checkpoints, the RNG state they carry, and exact resume.

A run folder ``OUT`` holds ``log.jsonl`` (:mod:`unifar.training_log`), ``run.json`` (the run's
facts, written at its end or when it diverges), ``final/`` (the trained model) and
``checkpoints/step-NNNNNN/``: the model (:meth:`unifar.model.UniFAR.save_pretrained`), the
optimizer, the scheduler, every rank's RNG state and ``trainer_state.json`` (where in which
epoch the run stands). Each checkpoint is written to a temporary folder and renamed
(:func:`unifar.files.atomic_dir`), so a killed run never leaves a torn one, and resuming from
the newest complete checkpoint on the CPU ends with exactly the weights of an uninterrupted run.

Integrity: a model folder's ``manifest.json`` records the SHA-256 of each of its files and the
config its weights were saved with, and ``trainer_state.json`` the SHA-256 of the optimizer, scheduler
and RNG files and of the FTUs the run trains on. A resume skips (with a warning) checkpoints whose
files differ and refuses other FTUs. A running run holds ``OUT/.lock`` (``flock``, released by the
OS even when the process dies), so a second run into the same folder stops at once.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Mapping

import numpy as np
import torch
from torch import nn

from .config import TRAINING_FIELDS, UniFARConfig
from .files import (LOCK_NAME, FolderBusy, IntegrityError, atomic_dir, digest_mismatch, file_digests,
                    lock_folder, unlock_folder, write_json)

if TYPE_CHECKING:
    from .model import UniFAR

__all__ = [
    "CHECKPOINTS",
    "TRAINER_STATE",
    "RunFolderBusy",
    "lock_run_folder",
    "unlock_run_folder",
    "remove_orphans",
    "verify_checkpoint",
    "check_model_folder",
    "load_weights",
    "nonfinite_tensors",
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
model_logger = logging.getLogger("unifar.model")

CHECKPOINTS = "checkpoints"
TRAINER_STATE = "trainer_state.json"
STATE_FILES = ("optimizer.pt", "scheduler.pt", "rng_state.pt")
# A model folder (UniFAR.save_pretrained); a checkpoint is one plus STATE_FILES and TRAINER_STATE.
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
BASE_DIR = "base"
MANIFEST_NAME = "manifest.json"  # SHA-256 of every file save_pretrained wrote, and the config the weights fit
# Config fields that may be edited in a saved folder's config.json without changing what its
# weights mean (the training loop's and the input budget); any other edit is refused.
EDITABLE_FIELDS = TRAINING_FIELDS | {"max_tokens"}


# ================================================================================ model folders
def check_model_folder(d: Path) -> UniFARConfig:
    """The config of the model folder ``d`` (:meth:`UniFAR.save_pretrained`), after checking every
    file against the SHA-256 in its ``manifest.json`` and ``config.json`` against the config the
    weights were saved with; raises :class:`~unifar.files.IntegrityError` naming the file.

    A folder saved before manifests were written is loaded unchecked (an info message)."""
    config = UniFARConfig.from_json(d / CONFIG_NAME)
    mpath = d / MANIFEST_NAME
    if not mpath.is_file():
        model_logger.info("%s has no %s (saved by an older unifar): its files are not checked", d, MANIFEST_NAME)
        return config
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        files, saved = dict(manifest["files"]), dict(manifest["config"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{mpath} is damaged ({type(err).__name__}: {err})") from None
    now = config.to_dict()
    differ = sorted(k for k in saved if saved[k] != now.get(k))  # a field added later keeps its default
    refused = [k for k in differ if k not in EDITABLE_FIELDS]
    if refused:
        shown = ", ".join(f"{k}={now.get(k)!r} (saved with {saved.get(k)!r})" for k in refused)
        raise IntegrityError(f"{d / CONFIG_NAME} no longer matches the weights in {d}: {shown}; "
                             f"restore the saved values or train a new model")
    if differ:
        model_logger.warning("%s was edited after saving (%s): loading with the edited values", d / CONFIG_NAME, ", ".join(differ))
    why = digest_mismatch(d, {n: r for n, r in files.items() if n != CONFIG_NAME}, str(mpath))
    if why:
        raise IntegrityError(why)
    return config


def load_weights(model: nn.Module, weights: Path, device: str) -> None:
    """Load ``weights`` (safetensors) into ``model``, refusing a file that does not fit it or
    holds non-finite values (:class:`~unifar.files.IntegrityError`, naming the file)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    try:
        missing, unexpected = load_model(model, str(weights), strict=False, device=device)
    except (RuntimeError, SafetensorError, OSError) as err:
        detail = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())[:400]
        raise IntegrityError(f"{weights} does not fit the model its folder's config.json and base/ describe, "
                             f"or is damaged: {detail}") from None
    # An encoder's unused pooler may be absent from (or extra in) the file; nothing else may.
    missing = [k for k in missing if not k.startswith("base.pooler.")]
    unexpected = [k for k in unexpected if not k.startswith("base.pooler.")]
    if missing or unexpected:
        raise IntegrityError(f"{weights} does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    bad = nonfinite_tensors(model)
    if bad:
        raise IntegrityError(f"{weights} holds NaN or infinite values in {bad[:5]} (corrupted file?)")


def nonfinite_tensors(model: nn.Module) -> list[str]:
    """Names of ``model``'s floating-point parameters and buffers holding a NaN or an infinity."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return [n for n, t in tensors if t.is_floating_point() and not bool(torch.isfinite(t).all())]


# ================================================================================ the run folder
class RunFolderBusy(FolderBusy):
    """Another training run holds the output folder's lock."""


def lock_run_folder(out_dir: Path) -> IO[str] | None:
    """Create ``out_dir`` and take its exclusive lock (``out_dir/.lock``, holding our pid), or raise
    :class:`RunFolderBusy` naming the folder and the holder's pid (:func:`unifar.files.lock_folder`).
    Rank 0 only."""
    return lock_folder(out_dir, "another training run", RunFolderBusy)


#: release what :func:`lock_run_folder` took
unlock_run_folder = unlock_folder


def remove_orphans(out_dir: Path) -> None:
    """Delete the temporary folders a killed save leaves (``checkpoints/.tmp-step-*``,
    ``.tmp-final-*`` and their ``.old-*`` twins). Only under the run folder's lock."""
    for parent, name in ((out_dir / CHECKPOINTS, "step-"), (out_dir, "final-")):
        if not parent.is_dir():
            continue
        for p in sorted(parent.iterdir()):
            if p.is_dir() and p.name.startswith((f".tmp-{name}", f".old-{name}")):
                shutil.rmtree(p, ignore_errors=True)
                logger.info("removed %s, left by an interrupted save", p)


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


def verify_checkpoint(ckpt: Path) -> dict[str, Any]:
    """The trainer state of the checkpoint ``ckpt`` after checking every file against the SHA-256
    recorded at saving; raises :class:`~unifar.files.IntegrityError` (or a config error) naming
    what is broken. A checkpoint saved before digests were recorded is read once in full instead."""
    path = ckpt / TRAINER_STATE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IntegrityError(f"{path} is damaged ({type(err).__name__}: {err})") from None
    lacking = [k for k in ("step", "epoch", "step_in_epoch", "seed", "config") if not isinstance(state, dict) or k not in state]
    if lacking:
        raise IntegrityError(f"{path} lacks {lacking}: not a checkpoint a run can resume from")
    check_model_folder(ckpt)
    if state.get("files") is not None:
        why = digest_mismatch(ckpt, state["files"], str(path))
        if why:
            raise IntegrityError(why)
        return state
    from safetensors.torch import load_file

    for name in (WEIGHTS_NAME, *STATE_FILES):  # no digests: at least every file must read
        try:
            if name == WEIGHTS_NAME:
                bad = [k for k, t in load_file(str(ckpt / name)).items() if t.is_floating_point() and not torch.isfinite(t).all()]
                if bad:
                    raise ValueError(f"NaN or infinite values in {bad[:5]}")
            else:
                torch.load(ckpt / name, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 -- SafetensorError, EOFError, UnpicklingError...: all mean unusable
            raise IntegrityError(f"{ckpt / name} cannot be read ({type(err).__name__}: {err})") from None
    return state


def _newest_intact(out_dir: Path, is_main: bool) -> tuple[Path | None, dict[str, Any] | None]:
    """The newest checkpoint of ``out_dir`` that passes :func:`verify_checkpoint`, and its state;
    each newer broken one is skipped with a warning. Raises when every checkpoint is broken."""
    found = list_checkpoints(out_dir)
    for _, ckpt in reversed(found):
        try:
            return ckpt, verify_checkpoint(ckpt)
        except (ValueError, TypeError, OSError) as err:
            if is_main:
                logger.warning("checkpoint %s is broken, resuming from an older one: %s", ckpt, err)
    if found:
        raise IntegrityError(f"cannot resume: none of the {len(found)} checkpoint(s) in {out_dir / CHECKPOINTS} is intact "
                             "(see the warnings); start a fresh run in a new folder")
    return None, None


def resume_point(out_dir: Path, resume: bool, seed: int, is_main: bool) -> tuple[Path | None, dict[str, Any] | None, int]:
    """``(checkpoint, its trainer state, seed)`` a run starts from: the newest intact checkpoint
    of ``out_dir`` when resuming (and the seed it was trained with), else ``(None, None, seed)``.

    A fresh run (``resume=False``) refuses a folder that already holds a run; every rank checks,
    so none hangs waiting for the others. Rank 0 first removes what killed saves left.
    """
    if is_main:
        remove_orphans(out_dir)
    ckpt, state = _newest_intact(out_dir, is_main) if resume else (None, None)
    if ckpt is not None and state is not None:
        if state["seed"] != seed:
            logger.warning("resuming with the checkpoint's seed %s (args.seed=%s)", state["seed"], seed)
            seed = state["seed"]
    elif not resume and (list_checkpoints(out_dir) or (out_dir / "final").exists()):  # every rank: none may hang
        raise FileExistsError(f"{out_dir} already holds a training run; pass resume=True (--resume) or use a new folder")
    elif resume and (out_dir / "final").exists() and _finished_without_checkpoints(out_dir):
        raise FileExistsError(f"{out_dir} holds a finished run whose checkpoints were deleted "
                              "(keep_checkpoints_when_done=False): nothing to resume; load its final/ "
                              "model, or train again in a new folder")
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
def save_checkpoint(out_dir: Path, model: "UniFAR", optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, rng_states: list[Any],
                    trainer_state: Mapping[str, Any], keep: int) -> Path:
    """Write ``out_dir/checkpoints/step-NNNNNN`` (atomically) and delete all but the newest ``keep``.

    ``trainer_state`` holds at least ``step``; ``saved_at`` and the digests of the files are added.
    """
    at_step = trainer_state["step"]
    state = {**trainer_state, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}

    def write(d: Path) -> None:
        model.save_pretrained(d)
        torch.save(optimizer.state_dict(), d / "optimizer.pt")
        torch.save(scheduler.state_dict(), d / "scheduler.pt")
        torch.save(rng_states, d / "rng_state.pt")
        state["files"] = file_digests(d, STATE_FILES)  # the model's own are in its manifest.json
        (d / TRAINER_STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")

    path = atomic_dir(out_dir / CHECKPOINTS / f"step-{at_step:06d}", write)
    for _, old in list_checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def load_checkpoint(ckpt: Path, state: Mapping[str, Any], model: "UniFAR", optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler,
                    device: torch.device, rank: int, world: int, seed: int, n_train_ftus: int,
                    total_steps: int, *, ftus_digest: str | None = None, verified: bool = False) -> tuple[int, int, int]:
    """Load a checkpoint's weights, optimizer, scheduler and this rank's RNG state; returns
    ``(step, epoch, step_in_epoch)`` to continue from.

    With another number of ranks than the checkpoint's, the RNGs are re-seeded from the step
    instead (deterministic, but not the uninterrupted run's draws). The run must train on the
    checkpoint's FTUs: as many (``n_train_ftus``) and, where both are known, the same
    (``ftus_digest``, :func:`~unifar.training_data.ftus_digest`); another ``total_steps`` changes
    the schedule. The files are checked first (:func:`verify_checkpoint`) unless ``verified``.
    """
    if not verified:
        verify_checkpoint(ckpt)
    if state.get("n_train_ftus") != n_train_ftus:
        raise ValueError(f"cannot resume {ckpt}: it was trained on {state.get('n_train_ftus')} FTUs, this run has {n_train_ftus}")
    saved_digest = state.get("train_ftus_sha256")
    if saved_digest is not None and ftus_digest is not None and saved_digest != ftus_digest:
        raise ValueError(f"cannot resume {ckpt}: it was trained on other FTUs (SHA-256 of its training FTUs "
                         f"{saved_digest}, of this run's {ftus_digest}); resume with the same FTU folder")
    load_weights(model, ckpt / WEIGHTS_NAME, str(device))
    optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location=device, weights_only=True))
    scheduler.load_state_dict(torch.load(ckpt / "scheduler.pt", weights_only=True))
    rng_states = torch.load(ckpt / "rng_state.pt", weights_only=True)
    if len(rng_states) == world:
        set_rng_state(rng_states[rank])
    else:  # a different world size: re-seed deterministically from the step instead
        logger.warning("checkpoint has RNG states for %d ranks, this run has %d: re-seeding", len(rng_states), world)
        torch.manual_seed(seed + rank + 7919 * state["step"])
    if state.get("total_steps") != total_steps:
        logger.warning("resuming with %d total steps (checkpoint: %s): the schedule changes", total_steps, state.get("total_steps"))
    return state["step"], state["epoch"], state["step_in_epoch"]


def _finished_without_checkpoints(out_dir: Path) -> bool:
    try:
        info = json.loads((out_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return info.get("status") == "finished" and bool(info.get("checkpoints_deleted"))


def write_run_info(out_dir: Path, info: Mapping[str, Any]) -> Path:
    """Write ``out_dir/run.json``: the run's settings, facts and outcome."""
    return write_json(out_dir / "run.json", info)
