"""The systems of an evaluation run: which retrievers a model name or checkpoint stands for.

``systems=`` names: ``bm25``; ``mean`` (the base encoder, mean pooling); ``facet-query``
(CSFCube only: the query paper reduced to its title + the facet's sentences); ``unifar`` (the
model given: a trained UniFAR checkpoint folder, stored as ``unifar-trained``, or an untrained
UniFAR on a base encoder name, stored as ``unifar-untrained``); ``unifar-untrained`` (UniFAR with
untrained aggregation on the base encoder; for a checkpoint, its own configuration on its base).
Hybrids (:mod:`unifar.evaluation.hybrid`, fusion weights chosen on each benchmark's dev split):
``hybrid-mean`` (mean pooling + facet-BM25 on CSFCube, + BM25 on q-doc), ``hybrid-mean-labeller``
(CSFCube only: facet-BM25 on chapter 2's labeller's sentence labels, ``labeller=`` its folder),
``hybrid-unifar`` (UniFAR's facet cosine + that facet's BM25; BM25 on q-doc) and
``hybrid-mean-unifar`` (all three); like ``unifar``, a name ending in ``unifar`` is stored with
``-trained`` or ``-untrained`` appended.
The baselines use the base encoder: ``base_model`` if given, else the checkpoint's
``config.base_model``, else ``model`` itself. :func:`share_frozen_base` lets UniFAR models on
one frozen base encoder share its token states.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import UniFARConfig
from ..files import public_path
from .retrievers import BM25Retriever, FacetBM25Retriever

if TYPE_CHECKING:
    from ..caching import TokenStateCache
    from ..model import UniFAR

__all__ = ["SYSTEMS", "build_retrievers", "is_unifar_checkpoint", "load_unifar", "public_model", "share_frozen_base"]

SYSTEMS = ("bm25", "mean", "facet-query", "unifar", "unifar-untrained", "hybrid-mean",
           "hybrid-mean-labeller", "hybrid-unifar", "hybrid-unifar-untrained", "hybrid-mean-unifar",
           "hybrid-mean-unifar-untrained")


def is_unifar_checkpoint(path: str | os.PathLike[str]) -> bool:
    """True for a folder written by :meth:`unifar.UniFAR.save_pretrained`: a ``config.json``
    with UniFAR's fields (a base encoder's folder, e.g. a Hugging Face model, has its own
    ``config.json`` and is a base name, not a checkpoint) and a safetensors file."""
    import json

    p = Path(path)
    if not (p / "config.json").is_file() or not any(p.glob("*.safetensors")):
        return False
    try:
        config = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # a damaged UniFAR config: loading it gives the clear error
    return isinstance(config, dict) and "facets" in config and "base_model" in config


def load_unifar(model: str, max_length: int | None = None, device: str | None = None) -> UniFAR:
    """A trained UniFAR from a checkpoint folder (keeping its own ``max_tokens`` unless
    ``max_length`` is given), or an untrained UniFAR on a base encoder name (512 by default)."""
    from .. import UniFAR, UniFARConfig

    if is_unifar_checkpoint(model):
        m = UniFAR.from_pretrained(model, device=device)
        if max_length is not None:
            m.config.max_tokens = max_length
        return m
    return UniFAR(UniFARConfig(base_model=model, max_tokens=max_length or 512), device=device)


def public_model(model: UniFAR | str | os.PathLike[str]) -> str:
    return public_path(model) if isinstance(model, (str, os.PathLike)) and os.path.isabs(str(model)) else str(model)


def _system_keys(systems: Sequence[str] | None, trained: bool) -> list[str]:
    """The result keys of ``systems`` (``unifar`` becomes ``unifar-trained`` or ``-untrained``), once each.

    >>> _system_keys(["bm25", "unifar", "unifar-untrained", "hybrid-unifar"], trained=False)
    ['bm25', 'unifar-untrained', 'hybrid-unifar-untrained']
    """
    if systems is None:
        systems = ["bm25", "mean", "facet-query", "unifar"] + (["unifar-untrained"] if trained else [])
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    keys = []
    for s in systems:
        key = f"{s}-{'trained' if trained else 'untrained'}" if s.endswith("unifar") else s
        if key not in keys:
            keys.append(key)
    return keys


def _untrained_unifar(config: UniFARConfig | None, base: str, max_length: int | None, device: str | None) -> UniFAR:
    """UniFAR with untrained aggregation on ``base``: ``config`` (a checkpoint's) on that base,
    or the defaults when there is none."""
    import dataclasses

    from .. import UniFAR

    cfg = dataclasses.replace(config, base_model=base) if config is not None else None
    if cfg is None:
        return load_unifar(base, max_length, device)
    if max_length is not None:
        cfg = dataclasses.replace(cfg, max_tokens=max_length)
    return UniFAR(cfg, device=device)


def build_retrievers(
    model: UniFAR | str | os.PathLike[str] | None = None,
    systems: Sequence[str] | None = None,
    base_model: str | None = None,
    max_length: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    show_progress: bool = True,
    query_title: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    labeller: str | os.PathLike[str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The retrievers for ``systems`` and facts about them (which model is trained, the base).

    ``model``: a UniFAR checkpoint folder, a base encoder name (``minilm``, ``mpnet``, hub id,
    path), or a :class:`unifar.UniFAR` instance (tests, notebooks). ``systems=None`` gives
    ``bm25, mean, facet-query, unifar`` and, for a trained model, also ``unifar-untrained``.
    ``cache_dir``: where the mean-pooling baselines store and reuse their embeddings
    (:class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder`); None encodes every time.
    ``labeller``: chapter 2's sentence labeller folder, for ``hybrid-mean-labeller``.
    """
    from .dense import MeanPoolingRetriever, UniFARRetriever
    from .hybrid import hybrid_system

    trained = None  # a trained UniFAR (instance or checkpoint path)
    config = None
    if model is not None and not isinstance(model, (str, os.PathLike)):
        trained, config = model, model.config
    elif model is not None and is_unifar_checkpoint(model):
        trained, config = str(model), UniFARConfig.from_json(Path(model) / "config.json")
    base = base_model or (config.base_model if config is not None else (str(model) if model is not None else None))
    keys = _system_keys(systems, trained is not None)
    needs_base = [k for k in keys if k in ("mean", "facet-query") or k.endswith("unifar-untrained")
                  or k.startswith("hybrid-mean")]
    if needs_base and base is None:
        raise ValueError(f"systems {needs_base} need a base encoder: give model= or base_model=")
    if "hybrid-mean-labeller" in keys and labeller is None:
        raise ValueError("system hybrid-mean-labeller needs labeller=: chapter 2's sentence "
                         "labeller folder, e.g. artifacts/ch02/full/labeller")

    out: list[Any] = []
    facts: dict[str, Any] = {"model": public_model(model) if model is not None else None, "base_model": public_model(base) if base else None,
                             "trained": trained is not None, "load_seconds": {}}
    encoder = None
    made: dict[str, Any] = {}  # one retriever per key: a hybrid shares its parts with the systems

    def make(key: str) -> Any:
        nonlocal encoder
        if key in made:
            return made[key]
        if key == "bm25":
            made[key] = BM25Retriever()
        elif key == "facet-bm25":
            made[key] = FacetBM25Retriever()
        elif key in ("mean", "facet-query"):
            if encoder is None:
                from .mean_pooling import MeanPoolingEncoder

                encoder = MeanPoolingEncoder(base, max_length or 512, batch_size, device, show_progress=show_progress,
                                             cache_dir=cache_dir)
            made[key] = MeanPoolingRetriever(encoder, facet_query=key == "facet-query",
                                             query_title=query_title)
        elif key == "unifar-trained":  # a checkpoint keeps its own max_tokens unless max_length is given
            m = load_unifar(trained, max_length, device) if isinstance(trained, str) else trained
            made[key] = UniFARRetriever(m, name=key, label=f"UniFAR trained ({facts['model']})",
                                        batch_size=batch_size, show_progress=show_progress,
                                        model_id=f"trained:{facts['model']}")
        else:  # unifar-untrained
            m = _untrained_unifar(config, base, max_length, device)
            label = f"UniFAR untrained ({facts['base_model']})"
            made[key] = UniFARRetriever(m, name=key, label=label, batch_size=batch_size, show_progress=show_progress,
                                        model_id=f"untrained:{facts['base_model']}")
        return made[key]

    for key in keys:
        t0 = time.perf_counter()
        hybrid = key.startswith("hybrid-")
        out.append(hybrid_system(key, make, labeller, cache_dir) if hybrid else make(key))
        facts["load_seconds"][key] = round(time.perf_counter() - t0, 2)
    return out, facts


def _differing_top_layers(ref: UniFAR, other: UniFAR) -> int | None:
    """0 when two UniFAR models have identical base encoders, ``k`` when they differ only in the
    top ``k`` transformer layers of a BERT-style base (one trained with ``--train-top-layers``),
    None otherwise (other encoders, token budgets or weights below the top layers)."""
    import re

    import torch

    if type(other.base) is not type(ref.base) or other.config.max_tokens != ref.config.max_tokens:
        return None
    a, b = ref.base.state_dict(), other.base.state_dict()
    if a.keys() != b.keys():
        return None
    differ = [k for k in a if not torch.equal(a[k], b[k].to(a[k].device))]
    if not differ:
        return 0
    try:
        n = len(ref.base_layers())
    except NotImplementedError:  # the base cannot be split: only identical bases share
        return None
    layer = [re.match(r"encoder\.layer\.(\d+)\.", k) for k in differ]
    if not all(layer):
        return None  # embeddings (or anything outside the layers) differ
    return n - min(int(m.group(1)) for m in layer)


def share_frozen_base(retrievers: Sequence[Any], cache_dir: str | os.PathLike[str] | None = None) -> TokenStateCache | None:
    """Give the UniFAR retrievers whose base encoders hold identical weights (e.g. untrained UniFAR
    and UniFAR trained with ``--freeze-base``) one :class:`~unifar.caching.TokenStateCache`, so the
    base runs once per input for all of them. Bases that differ only in their top ``k`` layers
    (``--train-top-layers k``) share the states entering those layers, and each model runs its own
    top layers on them. With ``cache_dir``, the cache starts from the states an earlier run saved
    there for the same base (:meth:`~unifar.caching.TokenStateCache.on_disk`; chapter 1 saves
    CSFCube's); then a single UniFAR model gets the on-disk cache too, so that evaluating another
    model on the same frozen base (a second training seed) reads the states instead of running the
    base again. Returns the cache, or None when nothing is shared."""
    from ..caching import TokenStateCache
    from .dense import UniFARRetriever

    # a hybrid's parts too
    flat = {id(p): p for r in retrievers for p in [r, *getattr(r, "parts", [])]}
    models = [r for r in flat.values() if isinstance(r, UniFARRetriever)]
    if len(models) == 1 and cache_dir is not None:
        cache = TokenStateCache.on_disk(models[0].model, cache_dir)
        models[0].state_cache = cache
        return cache
    if len(models) < 2:
        return None
    ref = models[0].model
    depth = {id(r): _differing_top_layers(ref, r.model) for r in models}
    group = [r for r in models if depth[id(r)] is not None]
    if len(group) < 2:
        return None
    top = max(depth[id(r)] for r in group)
    cache = TokenStateCache.on_disk(ref, cache_dir, top_layers=top) if cache_dir is not None else TokenStateCache(top_layers=top)
    for r in group:
        r.state_cache = cache
    return cache
