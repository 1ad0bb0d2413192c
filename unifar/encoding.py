"""Encoding inputs with a UniFAR model: length-sorted batches, facet embeddings in input order,
the attention that explains them and, on request, the base's in-context sentence states.

:meth:`unifar.model.UniFAR.encode` (and ``encode_documents`` / ``encode_questions``) call
:func:`encode_batched`; a frozen base's states can come from a
:class:`~unifar.caching.TokenStateCache`. The sentence states (section 3.1,
``S_i = MeanPool(T_{S_i})``) are what the sentence branch attends over; a labeller that reads
them (:class:`~unifar.rhetoric.context_labeller.InContextLabeller`) labels a document's
sentences from the same pass that encodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import torch

from .batching import batched_encode
from .pooling import sentence_states as pool_sentences
from .text import EncodedInput, collate

if TYPE_CHECKING:
    from .caching import TokenStateCache
    from .model import UniFAR

__all__ = ["FacetEncoding", "encode_batched"]


@dataclass
class FacetEncoding:
    """Facet embeddings of a list of inputs, in input order, plus what is needed to explain them."""

    embeddings: torch.Tensor  # [N, F, h] float32, L2-normalised
    attention: list[torch.Tensor]  # per input [F, n_units], head-averaged
    branch: list[str]  # "sentence" or "token" per input
    units: list[list[str]]  # per input: sentence texts (title first) or tokens, one per column of attention
    facets: tuple[str, ...]
    truncated: list[bool] = field(default_factory=list)
    # with encode(..., sentence_states=True): per input the base's in-context state of each kept
    # unit [n_units, h] (section 3.1, title first) and each unit's index among the units given
    sentence_states: list[torch.Tensor] = field(default_factory=list)
    unit_index: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return self.embeddings.shape[0]


@torch.inference_mode()
def encode_batched(
    model: "UniFAR", items: Sequence[EncodedInput], batch_size: int = 32,
    show_progress: bool | None = None, bf16: bool | None = None,
    state_cache: "TokenStateCache | None" = None, sentence_states: bool = False,
) -> FacetEncoding:
    """Encode tokenised inputs in batches sorted by length (less padding), in input order.

    The loop is :func:`unifar.batching.batched_encode` (eval mode, no gradients, the progress-bar
    rule); ``bf16`` runs under bfloat16 autocast, by default on CUDA only. Embeddings come back
    on the CPU in float32. ``state_cache`` (shared by models whose base encoders are identical,
    e.g. untrained UniFAR and UniFAR trained with a frozen base) keys inputs by their token
    ids so that the base encoder runs once per input for all of them. ``sentence_states``
    also returns the base's in-context sentence states (what the sentence branch attends
    over), for a labeller that reads them from this pass
    (:class:`~unifar.rhetoric.context_labeller.InContextLabeller`).
    """
    n = len(items)
    attention: list[torch.Tensor | None] = [None] * n
    branch: list[str] = [""] * n
    units: list[list[str]] = [[] for _ in range(n)]
    states: list[torch.Tensor] = [torch.empty(0)] * n if sentence_states else []
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    dev = model.device

    def encode_batch(idx: list[int]) -> torch.Tensor:
        """The facet embeddings [B, F, h] of one batch; its attention, branch, units and
        sentence states go into the lists above."""
        batch = collate([items[i] for i in idx], pad).to(dev)
        if state_cache is None:
            tokens = model.token_states(batch)
        else:
            lower = state_cache.token_states(model, batch)
            tokens = model.upper_states(lower, batch.attention_mask, state_cache.top_layers)
        out = model.aggregate(tokens, batch)
        if sentence_states:
            S = pool_sentences(tokens, batch.sentence_ids, batch.max_sentences)[0].float().cpu()
            for j, i in enumerate(idx):
                states[i] = S[j, : items[i].n_sentences].clone()
        att = out.attention.float().cpu()
        for j, i in enumerate(idx):
            if bool(out.uses_sentences[j]):
                k = items[i].n_sentences
                branch[i], units[i] = "sentence", list(items[i].units)
            else:
                k = len(items[i].input_ids)
                branch[i], units[i] = "token", model.tokenizer.convert_ids_to_tokens(items[i].input_ids)
            attention[i] = att[j, :, :k].clone()
        return out.embeddings

    embeddings = batched_encode(encode_batch, [len(it.input_ids) for it in items], batch_size,
                                (model.config.n_facets, model.hidden_size), module=model, device=dev,
                                bf16=bf16, show_progress=show_progress)
    return FacetEncoding(embeddings=embeddings, attention=attention,  # type: ignore[arg-type]
                         branch=branch, units=units, facets=model.config.facets,
                         truncated=[x.truncated for x in items], sentence_states=states,
                         unit_index=[list(x.unit_index) for x in items] if sentence_states else [])
