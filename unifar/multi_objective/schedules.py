"""The three ways of combining objectives (multi-objective paper, section 3.3), each a list of
training :class:`Phase` s for :func:`unifar.multi_objective.training.train_bi_encoder`.

* :func:`mix` -- in-batch mixing: each example of a batch comes from objective ``i`` with
  probability ``w_i`` (so ``w_i * B`` examples of it per batch on average); MNRL then shares
  negatives across objectives. One objective alone is the single-objective run (table 1).
* :func:`alternate` -- alternating batches: batch ``t`` comes wholly from objective ``t mod N``.
* :func:`sequential` -- fine-tuning: train on A, then a shorter phase on B at a lower learning
  rate (the paper: one epoch of B at 1e-5 after A at 2e-5), with a fresh optimizer.

Each phase has its own AdamW and a linear decay of its learning rate to 0 without warm-up
(paper section 4.3). Streams are seeded, so a schedule is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .objectives import Example, Objective

__all__ = [
    "Phase",
    "mix",
    "alternate",
    "sequential",
    "PAPER_LR",
    "PAPER_FINETUNE_LR",
    "PAPER_BATCH_SIZE",
]

PAPER_LR, PAPER_FINETUNE_LR, PAPER_BATCH_SIZE = 2e-5, 1e-5, 16  # section 4.3


@dataclass
class Phase:
    """``steps`` optimizer steps at peak learning rate ``lr`` on the batches of ``batches``;
    ``sources`` yields, beside each batch, the objective name of each of its examples."""

    name: str
    lr: float
    steps: int
    batches: Iterator[tuple[list[Example], list[str]]]

    def __post_init__(self) -> None:
        if self.steps < 1 or not self.lr > 0:
            raise ValueError(
                f"phase {self.name!r}: need steps >= 1 and lr > 0, got {self.steps}, {self.lr}"
            )


def _check(objectives: Sequence[Objective], batch_size: int) -> None:
    if not objectives:
        raise ValueError("give at least one objective")
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2 (in-batch negatives), got {batch_size}")
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise ValueError(f"objective names must be distinct, got {names}")


def mix(
    objectives: Sequence[Objective],
    steps: int,
    weights: Sequence[float] | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
    lr: float = PAPER_LR,
    seed: int = 0,
) -> list[Phase]:
    """In-batch mixing: per batch, the count of each objective is multinomial(``batch_size``,
    ``weights``) (weights normalised; default equal)."""
    _check(objectives, batch_size)
    w = np.ones(len(objectives)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (len(objectives),) or (w < 0).any() or not w.sum() > 0:
        raise ValueError(
            f"weights must be {len(objectives)} non-negative numbers, not all 0; got {weights}"
        )
    w = w / w.sum()
    streams = [o.stream(seed + 1 + i) for i, o in enumerate(objectives)]
    rng = np.random.default_rng(seed)

    def batches() -> Iterator[tuple[list[Example], list[str]]]:
        while True:
            counts = rng.multinomial(batch_size, w)
            pairs = [
                (next(streams[i]), objectives[i].name)
                for i, c in enumerate(counts)
                for _ in range(c)
            ]
            yield [p[0] for p in pairs], [p[1] for p in pairs]

    name = "+".join(o.name for o in objectives) if len(objectives) > 1 else objectives[0].name
    return [Phase(f"mix({name})" if len(objectives) > 1 else name, lr, steps, batches())]


def alternate(
    objectives: Sequence[Objective],
    steps: int,
    batch_size: int = PAPER_BATCH_SIZE,
    lr: float = PAPER_LR,
    seed: int = 0,
) -> list[Phase]:
    """Alternating batches: batch ``t`` holds ``batch_size`` examples of objective ``t mod N``."""
    _check(objectives, batch_size)
    streams = [o.stream(seed + 1 + i) for i, o in enumerate(objectives)]

    def batches() -> Iterator[tuple[list[Example], list[str]]]:
        t = 0
        while True:
            i = t % len(objectives)
            yield [next(streams[i]) for _ in range(batch_size)], [objectives[i].name] * batch_size
            t += 1

    return [Phase(f"alternate({'+'.join(o.name for o in objectives)})", lr, steps, batches())]


def sequential(
    first: Objective,
    second: Objective,
    steps: int,
    finetune_steps: int | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
    lr: float = PAPER_LR,
    finetune_lr: float = PAPER_FINETUNE_LR,
    seed: int = 0,
) -> list[Phase]:
    """Fine-tune ``first`` then ``second``: ``steps`` at ``lr``, then ``finetune_steps`` (default
    one epoch of ``second``, at most ``steps``) at ``finetune_lr``.

    >>> o = Objective("a", "icrop", [Example("x", "y")] * 10)
    >>> b = Objective("b", "icrop", o.examples)
    >>> [(p.name, p.lr, p.steps) for p in sequential(o, b, 8, batch_size=4)]
    [('a', 2e-05, 8), ('b (fine-tune)', 1e-05, 3)]
    """
    if finetune_steps is None:
        finetune_steps = min(steps, math.ceil(len(second) / batch_size))
    if finetune_lr > lr:
        raise ValueError(
            f"the fine-tuning phase uses a lower learning rate; got {finetune_lr} > {lr}"
        )
    (a,) = mix([first], steps, batch_size=batch_size, lr=lr, seed=seed)
    (b,) = mix([second], finetune_steps, batch_size=batch_size, lr=finetune_lr, seed=seed + 1000)
    b.name = f"{second.name} (fine-tune)"
    return [a, b]
