"""Pooling token states into vectors, and ordering inputs by length for batching.

One masked mean pooling serves the whole library (the mean-pooling baseline, the rhetorical
sentence encoder, the attention probes), and one length order serves every batched encoder:
sorting inputs by length before cutting batches pads each batch only to its own longest input.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["mean_pool", "sentence_states", "length_order"]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    r"""Masked mean over tokens, :math:`s = \sum_t m_t h_t / \sum_t m_t`, computed in float32.

    ``hidden`` [B, L, h], ``attention_mask`` [B, L] (1 = real token). An input without any real
    token pools to zeros.

    >>> mean_pool(torch.tensor([[[1.0], [3.0], [100.0]]]), torch.tensor([[1, 1, 0]])).tolist()
    [[2.0]]
    """
    m = attention_mask.to(torch.float32).unsqueeze(-1)
    return (hidden.float() * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def sentence_states(tokens: torch.Tensor, sentence_ids: torch.Tensor, n_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of the token states of each sentence (paper section 3.1, ``S_i = MeanPool(T_{S_i})``),
    for a whole batch with one batched matmul.

    ``tokens`` [B, L, h]; ``sentence_ids`` [B, L] with -1 for tokens outside any sentence.
    Returns the states [B, n_max, h] and a mask [B, n_max] of sentences that exist.

    >>> T = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])
    >>> S, m = sentence_states(T, torch.tensor([[-1, 0, 0, 1]]), 3)
    >>> S.squeeze(-1).tolist(), m.tolist()
    ([[4.0, 7.0, 0.0]], [[True, True, False]])
    """
    member = (sentence_ids.unsqueeze(-1) == torch.arange(n_max, device=tokens.device)).to(tokens.dtype)  # [B, L, n]
    sums = member.transpose(1, 2) @ tokens  # [B, n, h]
    counts = member.sum(dim=1)  # [B, n]
    return sums / counts.clamp(min=1).unsqueeze(-1), counts > 0


def length_order(lengths: Sequence[int] | np.ndarray, descending: bool = True) -> np.ndarray:
    """Indices that sort inputs by length, ties kept in input order (a stable sort).

    >>> length_order([2, 5, 2, 7]).tolist(), length_order([2, 5, 2, 7], descending=False).tolist()
    ([3, 1, 0, 2], [0, 2, 1, 3])
    """
    a = np.asarray(lengths, dtype=np.int64)
    return np.argsort(-a if descending else a, kind="stable")
