"""Reusing a finished training run instead of training it again.

A notebook that re-runs its analysis (``-p resume True``) asks :func:`finished_run` for each run
folder: a run that finished with the same settings comes back as a
:class:`unifar.train.TrainResult` with its final weights loaded; anything else trains.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoints import WEIGHTS_NAME, load_weights
from .train import TrainResult

if TYPE_CHECKING:
    from .config import TrainArgs
    from .model import UniFAR

__all__ = ["finished_run", "reused_message"]


def finished_run(output_dir: str | os.PathLike[str], model: UniFAR, args: TrainArgs | None = None) -> TrainResult | None:
    """The finished run in ``output_dir`` as a :class:`unifar.train.TrainResult` with its final weights loaded
    into ``model`` (so that a frozen base stays shared), or None when the folder holds no finished
    run. A run trained with other settings is an error, not a silent reuse: ``model``'s config
    must be the run's, and ``args`` (when given) must match its training arguments except where
    and how it logs. Lets a notebook re-run its analysis without training again."""
    out = Path(output_dir)
    info_path = out / "run.json"
    if not info_path.exists() or not (out / "final").exists():
        return None
    info = json.loads(info_path.read_text(encoding="utf-8"))
    if info.get("status") != "finished":
        return None
    mine = model.config.to_dict()
    differ = sorted(k for k in set(mine) | set(info["config"]) if mine.get(k) != info["config"].get(k))
    if differ:
        raise ValueError(f"{out}: the finished run's config differs from the model's in {differ}")
    if args is not None:
        ignore = {"output_dir", "resume", "progress", "device", "log_every"}
        theirs, ours = info["args"], args.to_dict()
        differ = sorted(k for k in set(ours) | set(theirs) if k not in ignore and ours.get(k) != theirs.get(k))
        if differ:
            raise ValueError(f"{out}: the finished run's training arguments differ in {differ}")
    load_weights(model, out / "final" / WEIGHTS_NAME, str(next(model.parameters()).device))
    return TrainResult(model=model, output_dir=out, final_dir=out / "final", steps=int(info["steps"]),
                       start_step=int(info.get("start_step", 0)), last_checkpoint=None,
                       last_terms=dict(info.get("last_terms") or {}), run_info=info)


def reused_message(name: str, steps: int, tail: str = "") -> str:
    """The line a chapter prints for a run it reuses instead of training: ``NAME: finished
    earlier (N steps), reused`` + ``tail``. One form for every chapter, so that CI's output
    sanitiser (``.ci/nbval_sanitize.cfg``, rule ``reused-training-runs``) maps it onto the line a
    cold run prints (``NAME: N steps in T s`` + ``tail``): a stored output must not depend on
    what the machine's ``artifacts/`` held.

    >>> reused_message("icrop", 10, ", loss 0.158 -> 0.038")
    'icrop: finished earlier (10 steps), reused, loss 0.158 -> 0.038'
    """
    return f"{name}: finished earlier ({steps} steps), reused{tail}"
