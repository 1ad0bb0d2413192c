"""Learning curves on dev data, and training until they flatten.

A run's loss on its own FTUs says how well it fits; whether it learns something that carries over
is a *dev* question. :class:`DevCurve` is a training callback (:func:`unifar.train.train`'s
``callbacks``): every ``every`` optimizer steps it evaluates a few dev measures of the model (for
example CSFCube fold1_dev MAP, or the held-out FTUs' losses that the step's record carries),
appends them to ``OUT/dev_curve.jsonl``, and ends the run once the monitored one has stopped
improving (:class:`Plateau`). So a run trains until its dev curve flattens, not for a fixed
handful of steps, within the step budget it was given.

Only dev data may be monitored here (CSFCube fold1_dev, held-out FTUs): a test split never
decides how long a model trains. CSFCube's fold1_dev is also fold2_test, so a chapter that stops
on fold1_dev reports fold1_test beside the 2-fold figure.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .evaluation.csfcube import csfcube_split_papers
from .training_data import split_ftus

if TYPE_CHECKING:
    from .caching import TokenStateCache
    from .config import TrainArgs
    from .datasets.csfcube import CSFCube
    from .datasets.ftu import FTU
    from .datasets.ftu_files import FTUDataset
    from .model import UniFAR
    from .train import TrainResult

__all__ = ["CURVE_NAME", "Plateau", "DevCurve", "read_curve", "movement_after", "where_runs_ended", "csfcube_dev_measure", "held_out_measure",
           "held_out_measures", "standard_dev_curve", "train_until_flat"]

CURVE_NAME = "dev_curve.jsonl"

#: A dev measure: ``fn(model, record) -> float`` (``record``: the step's log record, or ``{}``
#: before training).
Measure = Callable[["UniFAR", Mapping[str, Any]], float]


@dataclass
class Plateau:
    """Has a curve flattened? True once ``patience`` evaluations in a row have not improved on the
    best value so far by more than ``min_delta`` (``mode``: "max" or "min").

    >>> p = Plateau(mode="max", patience=2, min_delta=0.1)
    >>> [p.update(v) for v in (1.0, 1.5, 1.55, 1.58)]    # +0.05, +0.08: not better by 0.1
    [False, False, False, True]
    >>> p.best, p.best_index
    (1.5, 1)
    >>> p.update(1.7), p.best_index                        # a real gain starts the count again
    (False, 4)
    """

    mode: str = "max"
    patience: int = 3
    min_delta: float = 0.0
    best: float | None = None
    best_index: int = -1
    seen: int = 0
    since_best: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise ValueError(f"Plateau mode must be 'max' or 'min', got {self.mode!r}")
        if self.patience < 1:
            raise ValueError(f"Plateau patience must be at least 1, got {self.patience}")
        if self.min_delta < 0:
            raise ValueError(f"Plateau min_delta must be at least 0, got {self.min_delta}")

    def update(self, value: float) -> bool:
        """Add the next value; True when the curve has flattened."""
        if not math.isfinite(value):
            raise ValueError(f"a dev curve value must be finite, got {value}")
        if self.best is None or (value - self.best if self.mode == "max" else self.best - value) > self.min_delta:
            self.best, self.best_index, self.since_best = value, self.seen, 0
        else:
            self.since_best += 1
        self.seen += 1
        return self.since_best >= self.patience


def read_curve(path_or_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``dev_curve.jsonl`` (or ``DIR/dev_curve.jsonl``): ``{"step", **measures}``."""
    p = Path(path_or_dir)
    if p.is_dir():
        p = p / CURVE_NAME
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def movement_after(curves: Sequence[Sequence[Mapping[str, Any]]], step: int, key: str) -> tuple[int, float]:
    """How flat several dev curves are after ``step``: the last point at or before ``step`` (over
    all curves) and the largest absolute change of ``key`` from that point to each curve's end.
    Chapter 6 asks it of chapter 4's fold1_dev curves: did its runs of ``step`` steps train
    past the point where the same objective stops improving?

    >>> a = [{"step": 0, "m": 30.0}, {"step": 50, "m": 33.0}, {"step": 100, "m": 33.2}, {"step": 150, "m": 33.1}]
    >>> b = [{"step": 0, "m": 31.0}, {"step": 50, "m": 32.5}, {"step": 100, "m": 32.4}]
    >>> at, moved = movement_after([a, b], 120, "m"); at, round(moved, 2)
    (100, 0.1)
    """
    at = max((p["step"] for c in curves for p in c if p["step"] <= step), default=None)
    if at is None:
        raise ValueError(f"no dev point at or before step {step}")
    moved = [abs(c[-1][key] - next(p[key] for p in c if p["step"] == at)) for c in curves
             if any(p["step"] == at for p in c)]
    return at, max(moved)


def where_runs_ended(runs: Mapping[Any, Any]) -> dict[Any, dict[str, Any]]:
    """Per run (anything with ``log``, ``dev_curve`` and ``stopped``, e.g. a bi-encoder training
    result or a chapter-8 run): the steps it trained, whether a flat dev curve or the step budget
    ended it, and its held-out loss at step 0, at its best and at its last point. Runs without a
    dev curve are left out.

    >>> from types import SimpleNamespace as Run
    >>> run = Run(log=[{}] * 4, dev_curve=[{"dev": 0.5}, {"dev": 0.4}, {"dev": 0.45}], stopped={"a": 4})
    >>> where_runs_ended({"a": run, "b": Run(log=[{}], dev_curve=[], stopped={})})
    {'a': {'steps trained': 4, 'ended by': 'flat dev curve', 'dev loss at step 0': 0.5, 'best dev loss': 0.4, 'last dev loss': 0.45}}
    """
    return {name: {"steps trained": len(r.log),
                   "ended by": "flat dev curve" if r.stopped else "budget",
                   "dev loss at step 0": r.dev_curve[0]["dev"],
                   "best dev loss": min(p["dev"] for p in r.dev_curve),
                   "last dev loss": r.dev_curve[-1]["dev"]}
            for name, r in runs.items() if r.dev_curve}


@dataclass
class DevCurve:
    """A training callback that records dev measures every ``every`` steps and stops the run once
    ``monitor`` has flattened (see the module docstring).

    A point is recorded every ``every`` steps and at the run's last step.
    ``measures``: ``{name: fn(model, record) -> float}``; ``model``: the model being trained (the
    callback evaluates it in place); ``output_dir``: the run folder (the curve is written to
    ``OUT/dev_curve.jsonl`` and read back on a resume, so the plateau rule resumes too);
    ``monitor``, ``mode``, ``patience``, ``min_delta``: the :class:`Plateau` rule; ``min_steps``:
    never stop before this step. Call :meth:`begin` before training for the step-0 point.
    """

    model: Any
    measures: Mapping[str, Measure]
    output_dir: str | os.PathLike[str]
    every: int
    monitor: str
    mode: str = "max"
    patience: int = 3
    min_delta: float = 0.0
    min_steps: int = 0
    points: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"DevCurve every must be at least 1, got {self.every}")
        if self.monitor not in self.measures:
            raise ValueError(f"DevCurve monitor {self.monitor!r} is not one of the measures {sorted(self.measures)}")
        self.path = Path(self.output_dir) / CURVE_NAME
        self.plateau = Plateau(self.mode, self.patience, self.min_delta)
        self.points = read_curve(self.path)  # a resumed run continues its curve
        for p in self.points:
            self.plateau.update(float(p[self.monitor]))

    def _add(self, step: int, record: Mapping[str, Any]) -> dict[str, Any]:
        point = {"step": step, **{name: float(fn(self.model, record)) for name, fn in self.measures.items()}}
        self.points.append(point)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(point) + "\n")
        return point

    def begin(self) -> dict[str, Any] | None:
        """The step-0 point (the untrained model), unless the curve already has one."""
        if any(p["step"] == 0 for p in self.points):
            return None
        point = self._add(0, {})
        self.plateau.update(point[self.monitor])
        return point

    def __call__(self, record: Mapping[str, Any]) -> str | None:
        step = int(record["step"])
        last = float(record.get("progress", 0.0)) >= 1.0  # the run's final step: always a point
        if (step % self.every and not last) or any(p["step"] == step for p in self.points):
            return None
        point = self._add(step, record)
        flat = self.plateau.update(point[self.monitor])
        if flat and step >= self.min_steps:
            best = self.points[self.plateau.best_index]
            return (f"{self.monitor} flat for {self.patience} evaluations (best {best[self.monitor]:.4g} "
                    f"at step {best['step']}, min_delta {self.min_delta:g})")
        return None

    @property
    def best(self) -> dict[str, Any] | None:
        """The point with the best monitored value so far."""
        return self.points[self.plateau.best_index] if self.points else None


def csfcube_dev_measure(cube: CSFCube, state_cache: TokenStateCache | None = None, facet: str = "all", max_queries: int | None = None) -> Measure:
    """A :data:`Measure`: the model's CSFCube **fold1_dev** MAP in percent (aggregated by
    default), by the official protocol on the split's papers only
    (:func:`unifar.evaluation.csfcube.csfcube_split_papers`, whose ``max_queries`` gives a quick
    check on the first query facets of each facet); ``state_cache`` shares a frozen base's states
    across the evaluations of a run."""
    docs, split_map = csfcube_split_papers(cube, "fold1_dev", max_queries=max_queries)

    def measure(model: UniFAR, record: Mapping[str, Any]) -> float:
        enc = model.encode_documents(docs, state_cache=state_cache, show_progress=False)
        return float(split_map(enc.embeddings)[facet])

    return measure


def held_out_measures(terms: Sequence[str], ftus: Sequence[FTU], documents: Mapping[str, Any], args: TrainArgs,
                      state_cache: TokenStateCache | None = None) -> dict[str, Measure]:
    """One :data:`Measure` per held-out loss term (e.g. ``"l_kd"``, how far the student ranks
    from the teacher on FTUs it does not train on): the step record's own held-out values when
    the run computed them at that step (``TrainArgs.eval_every``), else computed here, once per
    point for all ``terms`` (:func:`unifar.objective.held_out_loss`, e.g. for the untrained
    point). With a frozen base's ``state_cache`` the held-out FTUs' inputs are first encoded in
    length-sorted batches (:func:`unifar.frozen_base.warm_cache`): batch by batch, chapter 4's
    default paid 50 s for them instead of 38 s."""
    from contextlib import nullcontext

    from .frozen_base import warm_cache
    from .objective import held_out_loss

    computed: dict[Any, Mapping[str, float]] = {}  # (model, step) -> held-out terms

    def values(model: UniFAR, record: Mapping[str, Any]) -> Mapping[str, float]:
        key = (id(model), record.get("step", 0))
        if key not in computed:
            if state_cache is not None:
                warm_cache(model, state_cache, list(ftus), documents, show_progress=False, is_main=False)
            computed.clear()
            computed[key] = held_out_loss(model, list(ftus), documents, args, float(record.get("progress", 0.0)),
                                          nullcontext(), state_cache)
        return computed[key]

    def measure_of(term: str) -> Measure:
        def measure(model: UniFAR, record: Mapping[str, Any]) -> float:
            held = record.get("eval")
            if not held or term not in held:
                held = values(model, record)
            return float(held.get(term, float("nan")))

        return measure

    return {term: measure_of(term) for term in terms}


def held_out_measure(term: str, ftus: Sequence[FTU], documents: Mapping[str, Any], args: TrainArgs,
                     state_cache: TokenStateCache | None = None) -> Measure:
    """:func:`held_out_measures` of one term."""
    return held_out_measures([term], ftus, documents, args, state_cache)[term]


def standard_dev_curve(model: UniFAR, ftus: FTUDataset, args: TrainArgs, cube: CSFCube,
                       state_cache: TokenStateCache | None = None, every: int = 50,
                       patience: int = 3, min_delta: float = 0.1, min_steps: int = 0,
                       max_queries: int | None = None) -> DevCurve:
    """The dev curve the book's training runs use: CSFCube fold1_dev aggregated MAP (monitored:
    the run stops once it has not risen by ``min_delta`` points for ``patience`` evaluations) and
    the held-out FTUs' ``L_KD`` and ``L_total`` (the FTUs ``train`` holds out with the same
    ``args``), every ``every`` steps, written to ``args.output_dir``. Set ``args.eval_every`` to
    ``every`` so that the held-out values come from the run itself; ``max_queries``: see
    :func:`csfcube_dev_measure`. Call :meth:`DevCurve.begin` for the untrained point."""
    _, held, docs = split_ftus(ftus, None, args, args.seed)
    measures: dict[str, Measure] = {"fold1_dev_map": csfcube_dev_measure(cube, state_cache, max_queries=max_queries)}
    if held:
        cache = state_cache if getattr(args, "freeze_base", False) else None
        both = held_out_measures(["l_kd", "loss"], held, docs, args, cache)
        measures["held_out_l_kd"], measures["held_out_loss"] = both["l_kd"], both["loss"]
    return DevCurve(model, measures, args.output_dir, every=every, monitor="fold1_dev_map", patience=patience,
                    min_delta=min_delta, min_steps=min_steps)


def train_until_flat(model: UniFAR, ftus: FTUDataset, args: TrainArgs, cube: CSFCube,
                     state_cache: TokenStateCache | Callable[[], TokenStateCache | None] | None = None,
                     max_queries: int | None = None) -> TrainResult:
    """Train ``model`` into ``args.output_dir`` until its :func:`standard_dev_curve` flattens
    (evaluated every ``args.eval_every`` steps), the way the book's chapters train; with
    ``args.resume`` a finished run there is reused instead (:func:`unifar.reuse.finished_run`,
    which refuses one trained with other settings), without it an earlier run is removed first.
    Seeds torch with ``args.seed``. ``state_cache``: the frozen base's
    :class:`~unifar.caching.TokenStateCache`, or a function that makes one, called only when the
    run trains (so a reused run loads no states)."""
    import torch  # here, not at the top: the module stays importable without torch

    from .reuse import finished_run
    from .train import train

    if args.eval_every <= 0:
        raise ValueError(f"train_until_flat: args.eval_every must be the dev curve's interval (> 0), got {args.eval_every}")
    out = Path(args.output_dir)
    if not args.resume and out.exists():
        shutil.rmtree(out)  # a fresh run replaces the previous one
    torch.manual_seed(args.seed)
    done = finished_run(out, model, args) if args.resume else None
    if done is not None:
        return done
    if callable(state_cache):
        state_cache = state_cache()
    curve = standard_dev_curve(model, ftus, args, cube, state_cache, every=args.eval_every, max_queries=max_queries)
    curve.begin()
    return train(None, ftus, args, model=model, state_cache=state_cache, callbacks=[curve])
