"""Training with a frozen base encoder (``TrainArgs.freeze_base``, our CPU profile).

The base encoder gets no gradient (but its top ``k`` layers with ``TrainArgs.train_top_layers``)
and runs in eval mode, so each input's token states are the same every epoch: they are computed
once, kept in a :class:`~unifar.caching.TokenStateCache`, and only the anchors and the
aggregation module (and those top layers) train on them. The paper fine-tunes the base as well.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

from .caching import TokenStateCache
from .model import UniFAR

__all__ = ["freeze_base", "frozen_base_mode", "frozen_state_cache", "warm_cache"]

logger = logging.getLogger("unifar.train")  # one logger for all of training's messages


def freeze_base(model: UniFAR, top_k: int) -> None:
    """No gradient for the base but its top ``top_k`` layers (before the optimiser is built, so
    that the frozen base gets no parameter group)."""
    for p in model.base.parameters():
        p.requires_grad_(False)
    for p in (model.top_base_layers(top_k).parameters() if top_k else ()):
        p.requires_grad_(True)


def frozen_base_mode(model: UniFAR, top_k: int, dropout: bool = False) -> None:
    """Frozen layers in eval mode (no dropout: a cached input's states are the same every epoch);
    the top ``top_k`` layers, which train, in train mode (dropout as in fine-tuning) only with
    ``dropout`` (``TrainArgs.top_layers_dropout``)."""
    model.base.eval()
    if top_k and dropout:
        model.top_base_layers(top_k).train()


def warm_cache(model: UniFAR, cache: TokenStateCache, ftus: Sequence[Any], documents: Mapping[str, Any],
               show_progress: bool, is_main: bool) -> None:
    """Cache the frozen base's states of every training document and question in length-sorted
    batches (several times faster than filling the cache batch by batch during the first epoch)."""
    needed = list(dict.fromkeys(d for u in ftus for d in u.all_doc_ids()))
    questions = list(dict.fromkeys(q.text for u in ftus for q in u.questions.values()))
    t_fill = time.perf_counter()
    n_filled = cache.fill(model, model.tokenize_documents([documents[d] for d in needed]), show_progress=show_progress)
    n_filled += cache.fill(model, model.tokenize_questions(questions), show_progress=show_progress)
    if is_main:
        cache.save()  # an on-disk cache (TokenStateCache.on_disk) keeps them for later chapters
        logger.info("cached frozen base states of %d inputs in %.1f s", n_filled, time.perf_counter() - t_fill)


def frozen_state_cache(state_cache: TokenStateCache | None, top_k: int) -> TokenStateCache:
    """``state_cache`` (one shared across runs on the same frozen base), or a fresh cache of the
    states entering the top ``top_k`` layers; a given cache must hold those states."""
    cache = state_cache if state_cache is not None else TokenStateCache(top_layers=top_k)
    if cache.top_layers != top_k:
        raise ValueError(f"state_cache holds the states below the top {cache.top_layers} layers, "
                         f"but train_top_layers={top_k}")
    return cache
