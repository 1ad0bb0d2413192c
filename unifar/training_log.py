"""The log of a training run: ``OUT/log.jsonl``, one JSON record per logged optimizer step.

Each record holds ``step``, ``epoch``, ``progress``, the learning rates ``lr`` of the parameter
groups, the loss terms ``loss`` (L_total), ``l_dd``, ``l_qd``, ``l_kl`` and ``lambda`` (paper
section 4.2), ``grad_norm``, timings, and ``eval`` (the held-out loss terms) where one was
computed. :func:`read_log` reads it back, :func:`summarize_log` reduces it to a few numbers and
:func:`unifar.plots.plot_losses` draws it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["LOG_NAME", "read_log", "summarize_log", "loss_windows", "start_log"]

LOG_NAME = "log.jsonl"


def read_log(path_or_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``log.jsonl`` (or of ``DIR/log.jsonl``)."""
    p = Path(path_or_dir)
    if p.is_dir():
        p = p / LOG_NAME
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


def loss_windows(records: Sequence[Mapping[str, Any]], width: int = 20, term: str = "loss") -> list[dict[str, float]]:
    """A run's training ``term`` as one mean per ``width`` logged steps (the last window may be
    shorter), each at the step that ends it: a loss curve short enough to store with a result.

    >>> loss_windows([{"loss": v} for v in (4.0, 2.0, 3.0, 1.0, 0.5)], width=2)
    [{'step': 2, 'loss': 3.0}, {'step': 4, 'loss': 2.0}, {'step': 5, 'loss': 0.5}]
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    values = [float(r[term]) for r in records]
    return [{"step": min(i + width, len(values)), term: float(np.mean(values[i:i + width]))}
            for i in range(0, len(values), width)]


def start_log(out_dir: Path, resumed_from: Path | None, step: int) -> Path:
    """Prepare ``out_dir/log.jsonl`` for a run (rank 0 only): empty for a fresh run; when
    resuming, without the records of steps the interrupted run did after its last checkpoint
    (``step``). Returns the log's path."""
    log_path = out_dir / LOG_NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    if resumed_from is not None and log_path.exists():
        # Drop records of steps the interrupted run did after its last checkpoint.
        kept = [r for r in read_log(log_path) if r.get("step", 0) <= step]
        log_path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    elif resumed_from is None:
        log_path.write_text("", encoding="utf-8")
    return log_path
