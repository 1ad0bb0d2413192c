"""The optimizer and learning-rate schedule of training (paper appendix A).

AdamW over three parameter groups with their own learning rates (base encoder, facet anchors,
aggregation module), linear warm-up over the first 5 % of the optimizer steps, then (our
choice, the paper names only the warm-up) linear decay to 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .config import UniFARConfig

if TYPE_CHECKING:
    from .model import UniFAR

__all__ = ["parameter_group", "warmup_linear_factor", "make_optimizer", "make_scheduler"]


def parameter_group(name: str) -> str:
    """The group of a UniFAR parameter or buffer by its name (appendix A's learning-rate groups):
    ``base`` (the encoder), ``anchors`` or ``aggregation`` (everything else).

    >>> [parameter_group(n) for n in ("base.encoder.layer.0.attention.self.query.weight", "anchors", "token_attn.in_proj_weight")]
    ['base', 'anchors', 'aggregation']
    """
    return "base" if name.startswith("base.") else "anchors" if name == "anchors" else "aggregation"


def warmup_linear_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Learning-rate factor: linear warm-up over ``warmup_steps`` (appendix A, 5 %), then linear
    decay to 0 at ``total_steps`` (the decay is our choice; the paper names only the warm-up).

    >>> [round(warmup_linear_factor(s, 2, 6), 3) for s in range(7)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]
    """
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def make_optimizer(model: "UniFAR", config: UniFARConfig) -> torch.optim.AdamW:
    """AdamW over the paper's three groups (appendix A): base encoder (``lr_base``), facet anchors
    (``lr_anchors``), the rest of the aggregation module (``lr_aggregation``). Weight decay
    applies to matrices only; biases and LayerNorm weights (1-D tensors) get none."""
    lrs = {"base": config.lr_base, "anchors": config.lr_anchors, "aggregation": config.lr_aggregation}
    groups = []
    for name, params in model.parameter_groups().items():
        # 1-D tensors, and matrices whose frozen rows must not shrink (train_values=False)
        decay = [p for p in params if p.ndim >= 2 and not getattr(p, "_unifar_no_decay", False)]
        no_decay = [p for p in params if p.ndim < 2 or getattr(p, "_unifar_no_decay", False)]
        if decay:
            groups.append({"params": decay, "lr": lrs[name], "weight_decay": config.weight_decay, "name": name})
        if no_decay:
            groups.append({"params": no_decay, "lr": lrs[name], "weight_decay": 0.0, "name": f"{name}/no_decay"})
    return torch.optim.AdamW(groups, lr=config.lr_base)


def make_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rates of :func:`make_optimizer` times :func:`warmup_linear_factor`, per step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_linear_factor(s, warmup_steps, total_steps)
    )
