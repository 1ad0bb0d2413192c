"""What a training run iterates over: the FTUs it trains on and holds out, the order each rank
sees them in every epoch, and how many optimizer steps that makes (paper appendix A).

``config.batch_size`` FTUs form one micro-batch *per rank*; ``config.grad_accumulation``
micro-batches form one optimizer step, so one step sees ``batch_size x grad_accumulation x
world_size`` FTUs (the paper trains with batch 4 and accumulation 4 on four GPUs and does not say
whether its batch of 4 is per GPU).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from .config import UniFARConfig

if TYPE_CHECKING:
    from .config import TrainArgs
    from .datasets.ftu import FTU
    from .datasets.ftu_files import FTUDataset

__all__ = ["split_ftus", "epoch_shard", "run_length", "ftus_digest"]


def split_ftus(ds: FTUDataset, eval_dataset: FTUDataset | None, args: TrainArgs,
               seed: int) -> tuple[list[FTU], list[FTU], Mapping[str, Any]]:
    """``(train FTUs, held-out FTUs, the held-out FTUs' documents)`` of an FTU dataset ``ds``:
    ``eval_dataset``'s FTUs, or a seeded ``args.eval_fraction`` of the FTUs, at most
    ``args.eval_max_ftus`` of them (``args``: the run's :class:`~unifar.train.TrainArgs`)."""
    all_ftus = list(ds.ftus)
    if eval_dataset is not None:
        train_ftus, eval_ftus, eval_docs = all_ftus, list(eval_dataset.ftus), eval_dataset.documents
    elif args.eval_fraction > 0:
        perm = np.random.default_rng([seed, 424242]).permutation(len(all_ftus))
        k = max(1, int(round(args.eval_fraction * len(all_ftus))))
        held = set(perm[:k].tolist())
        eval_ftus = [all_ftus[i] for i in sorted(held)]
        train_ftus = [u for i, u in enumerate(all_ftus) if i not in held]
        eval_docs = ds.documents
    else:
        train_ftus, eval_ftus, eval_docs = all_ftus, [], ds.documents
    if args.eval_max_ftus is not None:
        eval_ftus = eval_ftus[: args.eval_max_ftus]
    return train_ftus, eval_ftus, eval_docs


def epoch_shard(n: int, seed: int, epoch: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
    """This rank's FTU indices for ``epoch``: a seeded permutation, dealt round-robin to ranks
    and cut to equal length (DDP needs the same number of steps on every rank).

    >>> epoch_shard(6, 0, 0).tolist() == epoch_shard(6, 0, 0).tolist()
    True
    >>> sorted(epoch_shard(6, 0, 1, 0, 2).tolist() + epoch_shard(6, 0, 1, 1, 2).tolist())
    [0, 1, 2, 3, 4, 5]
    """
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    per_rank = n // world_size
    return perm[rank::world_size][:per_rank]


def run_length(n_train: int, world: int, config: UniFARConfig, epochs: int | None = None,
               max_steps: int | None = None) -> tuple[int, int, int, int]:
    """``(steps_per_epoch, epochs, total_steps, warmup_steps)`` of a run on ``n_train`` FTUs.

    One optimizer step takes ``batch_size x grad_accumulation`` FTUs per rank; ``epochs``
    overrides ``config.epochs``; ``max_steps`` ends the run (and the schedule) early.

    >>> run_length(10, 1, UniFARConfig(batch_size=2, grad_accumulation=2, epochs=3))
    (3, 3, 9, 1)
    """
    per_rank = n_train // world
    if per_rank == 0:
        raise ValueError(f"{n_train} training FTUs cannot be shared by {world} ranks")
    steps_per_epoch = math.ceil(per_rank / (config.batch_size * config.grad_accumulation))
    epochs = epochs or config.epochs
    total_steps = steps_per_epoch * epochs
    if max_steps is not None:
        total_steps = min(total_steps, max_steps)
    warmup_steps = math.ceil(config.warmup_ratio * total_steps)
    return steps_per_epoch, epochs, total_steps, warmup_steps


def ftus_digest(ftus: Iterable[FTU]) -> str:
    """SHA-256 of FTUs in order (each one's ``to_dict()`` as sorted JSON): what a checkpoint
    records of the FTUs it was trained on, so a resume on another training set is refused.

    >>> from unifar.datasets.ftu import FTU
    >>> ftus_digest([FTU("a")]) == ftus_digest([FTU("a")]) != ftus_digest([FTU("b")])
    True
    """
    h = hashlib.sha256()
    for u in ftus:
        h.update(json.dumps(u.to_dict(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
