"""Where each process of a training run works: its rank, its device and precision, and what the
ranks share (one process, or several GPUs of one machine under ``torchrun``)::

    torchrun --nproc_per_node 4 -m unifar train --ftus data/ftus --output runs/unifar-mpnet --profile paper

Under ``torchrun`` (PyTorch DistributedDataParallel) every rank takes a disjoint shard of each
epoch's seeded permutation (:func:`unifar.training_data.epoch_shard`) and rank 0 alone writes files. On a CPU the
ranks use the gloo backend, which is how ``tests/test_train_distributed.py`` runs this path
without a GPU: two ranks end with the weights of one process that sees the same global batch
(DDP averages what that process accumulates), and a two-rank run resumes bit for bit.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from .runtime import autocast_for, pick_device

__all__ = ["init_distributed", "rank_device", "wrap_ddp", "mean_over_ranks"]


def init_distributed() -> tuple[int, int, int, bool]:
    """``(rank, world_size, local_rank, initialised_here)`` from torchrun's environment variables."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0, False
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), False
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), True


def rank_device(device: str | None, world: int, local_rank: int, tf32: bool = True,
                bf16: bool | None = None) -> tuple[torch.device, bool, Any]:
    """``(device, use_bf16, autocast context)`` of this rank.

    ``device`` if given, else the local rank's GPU under torchrun, else :func:`pick_device`. On
    CUDA: TF32 matmuls with ``tf32`` and the peak-memory counter reset. ``bf16`` (default: on
    CUDA only) runs the forward passes under bfloat16 autocast.

    >>> rank_device("cpu", world=1, local_rank=0)[:2]
    (device(type='cpu'), False)
    """
    if world > 1 and device is None and torch.cuda.is_available():
        dev = torch.device("cuda", local_rank)
    else:
        dev = pick_device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        if tf32:  # TF32 tensor cores for fp32 matmuls outside autocast
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        torch.cuda.reset_peak_memory_stats(dev)
    use_bf16 = (dev.type == "cuda") if bf16 is None else bool(bf16)
    return dev, use_bf16, autocast_for(dev, use_bf16)


def wrap_ddp(module: torch.nn.Module, device: torch.device) -> Any:
    """``module`` in DistributedDataParallel, which averages the gradients over the ranks."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    # find_unused_parameters: the sentence/token branch is chosen per input, so a step may
    # leave MHA_tok (or MHA_sent) without gradient.
    return DDP(module, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=True)


def mean_over_ranks(x: torch.Tensor, world: int) -> torch.Tensor:
    """``x`` averaged over the ranks, in place (a no-op on one process)."""
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(x)
        x /= world
    return x
