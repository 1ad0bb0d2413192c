"""Which model an index was made with: load it from a spec, record the spec, and name its weights
by a digest, so that a search refuses a query encoder other than the one its index was encoded
with (:meth:`unifar.search.corpus_index.Index.load`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..base_models import check_model_name, short_name
from ..evaluation.systems import is_unifar_checkpoint, load_unifar
from ..files import hash_tensors

if TYPE_CHECKING:
    from ..model import UniFAR

__all__ = ["load_model", "model_spec", "model_digest", "model_facts"]


def load_model(spec: str, device: str | None = None) -> UniFAR:
    """UniFAR from a checkpoint folder, or untrained on a base encoder name (clear errors for a
    name that names nothing, :func:`unifar.base_models.check_model_name`)."""
    if not is_unifar_checkpoint(spec):
        check_model_name(spec)
    return load_unifar(spec, None, device)


def model_spec(spec: str) -> str:
    """What the manifest records: a checkpoint folder as an absolute path, a name as given."""
    return str(Path(spec).resolve()) if Path(spec).is_dir() else spec


def model_digest(model: UniFAR) -> str:
    """SHA-256 (hex, 24 chars) of a UniFAR model's config and weights (device independent).

    The base encoder's pooler is left out: UniFAR never reads it, and a checkpoint of a base
    saved without one gets a fresh random pooler at every load. A shipped base is named by its
    short name, so its hub id gives the same digest (the weights are the same). Anchors still as
    :meth:`~unifar.model.UniFAR.init_anchors_from_words` made them count by that recipe, not by
    their bits, which depend on the CPU and its thread count (an index encoded with 2 threads
    once refused a query encoder loaded with 1)."""
    config = model.config.to_dict()
    config["base_model"] = short_name(str(config["base_model"]))
    h = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    from_words = getattr(model, "anchors_from_words", None)
    for name, t in sorted(model.state_dict().items()):
        if ".pooler." in name:
            continue
        if name == "anchors" and from_words is not None and torch.equal(t.detach().cpu(), from_words):
            h.update(b"anchors:from-words")
            continue
        hash_tensors(h, [(name, t)], lambda n, flat: f"{n}:{flat.dtype}:{flat.numel()}")
    return h.hexdigest()[:24]


def model_facts(model: UniFAR, spec: str | None) -> dict[str, Any]:
    """The manifest's ``model`` entry."""
    return {
        "spec": spec,
        "digest": model_digest(model),
        "base_model": model.config.base_model,
        "max_tokens": model.config.max_tokens,
        "hidden_size": model.hidden_size,
        "facets": list(model.config.facets),
    }
