"""Multi-head attention of a few queries over many keys, computed the cheap way.

UniFAR's token branch (paper section 3.2, ``E_facet = MHA_tok(Q, T, T)``) attends with three
facet queries over every token of a text. :func:`folded_attention` gives what
``nn.MultiheadAttention`` gives for the same weights, without projecting every token;
:func:`attend` is what both branches call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["attend", "folded_attention"]


def folded_attention(mha: nn.MultiheadAttention, Q: torch.Tensor, X: torch.Tensor,
                     valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``mha(Q, X, X)`` for a few queries over many keys, with the key and value projections
    folded into the queries (the same function, about ``E / (F H)`` times less arithmetic).

    For head ``h`` with rows ``W_k^h, W_v^h`` of the packed projection and ``d = E / H``:

    .. math::
        a^h = \operatorname{softmax}_i\Big(\tfrac{(W_k^{h\top} q^h) \cdot x_i}{\sqrt d}\Big),
        \qquad o^h = W_v^h \Big(\sum_i a^h_i x_i\Big) + b_v^h,

    since the key bias adds the same ``q^h \cdot b_k^h`` to every key's score (softmax ignores it)
    and the weights sum to 1. ``nn.MultiheadAttention`` projects every one of the ``L`` keys and
    values (``2 L E^2`` multiply-adds an input); this costs ``2 F H L E`` for ``F`` queries, so the
    token branch over a 300-token abstract (``F H`` = 24, ``E`` = 384) does a sixteenth of the
    work. ``Q`` [B, F, E], ``X`` [B, L, E], ``valid`` [B, L] (True = a real key). Returns the
    output [B, F, E] and the head-averaged weights [B, F, L], as ``mha`` with
    ``need_weights=True`` (dropout on the weights, as ``mha``, when it trains).
    """
    E, H = mha.embed_dim, mha.num_heads
    d = E // H
    W_q, W_k, W_v = mha.in_proj_weight.chunk(3)
    b_q, _, b_v = mha.in_proj_bias.chunk(3)
    B, F_, _ = Q.shape
    q = F.linear(Q, W_q, b_q).view(B, F_, H, d) * d**-0.5
    u = torch.einsum("bfhd,hde->bfhe", q, W_k.view(H, d, E))  # each head's query in X's space
    scores = torch.einsum("bfhe,ble->bfhl", u, X).masked_fill(~valid[:, None, None, :], float("-inf"))
    a = F.dropout(scores.softmax(dim=-1), mha.dropout, mha.training)
    z = torch.einsum("bfhl,ble->bfhe", a, X)  # each head's weighted mean of the keys
    o = torch.einsum("bfhe,hde->bfhd", z, W_v.view(H, d, E)) + b_v.view(H, d)
    return mha.out_proj(o.reshape(B, F_, E)), a.mean(dim=2)


def attend(mha: nn.MultiheadAttention, Q: torch.Tensor, KV: torch.Tensor, valid: torch.Tensor,
           folded: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``mha(Q, KV, KV)`` over the keys where ``valid`` [B, L] is True: the output [B, F, E] and
    the head-averaged weights [B, F, L]; ``folded``: by :func:`folded_attention`."""
    # An input with no valid key (an empty text) would give NaN; let it see position 0.
    # Its result is either discarded by the selector or comes from a [CLS] state.
    valid = valid.clone()
    valid[:, 0] |= ~valid.any(dim=1)
    if folded:
        return folded_attention(mha, Q, KV, valid)
    return mha(Q, KV, KV, key_padding_mask=~valid, need_weights=True, average_attn_weights=True)
