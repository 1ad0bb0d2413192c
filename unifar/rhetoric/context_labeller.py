"""A sentence facet labeller that reads UniFAR's own base pass: a linear head over each
sentence's *in-context* state, so that `unifar encode` labels a document from the pass that
encodes it.

:class:`~unifar.rhetoric.labeller.FacetLabeller` embeds every sentence again, alone, with a
separate encoder: a second pass over the corpus (about half of `unifar encode`'s time,
``benchmarks/labeller_cost.py``). UniFAR's base already computes, for every sentence of a
document, the mean of its token states *within the whole document* (section 3.1, ``S_i = MeanPool(T_{S_i})``, the states
the sentence branch attends over; :func:`unifar.pooling.sentence_states`). This labeller is a
multinomial logistic regression (:func:`~unifar.rhetoric.labeller.fit_linear_head`) on
features of those states (:func:`document_features`): for sentence ``i`` of ``n`` kept::

    x_i = [ s_i / |s_i| ;  (s_i - s_bar) / |s_i - s_bar| ;  i / (n - 1) ],   p(c | x_i) = softmax(W x_i + b)_c

with ``s_bar`` the mean of the document's sentence states: the state, what sets it apart from its
document (the states of one abstract share much of its topic), and its place in the abstract. A
rhetorical role depends on all three; the centred state and the position were chosen over the
state alone on CSAbstruct dev (``benchmarks/studies/labeller_features.py``).

* **The shared pass.** :meth:`InContextLabeller.label_documents` takes the
  :class:`~unifar.encoding.FacetEncoding` of a model whose base weights and token budget are the
  labeller's (:meth:`InContextLabeller.shares_pass_with`, by a digest of the base weights) and
  labels from its states; any other model (e.g. one whose base was trained) is never mixed in:
  the labeller then runs its own pass over the documents with the base it was trained on.
* **Truncation.** A sentence beyond the token budget (``max_tokens``, 512 by default) has no
  state and gets no label (``None``), as it gets no place in the facet embeddings either.

Saved as ``labeller.json`` (``"format": "in-context"``, the base model's name, its weights'
digest, ``max_tokens``, the head's hyper-parameters and training metadata) and
``head.safetensors`` (``W``, ``b``): a few kilobytes, the base loaded by name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch
import torch.nn.functional as F

from ..config import UniFARConfig
from ..facets import FACETS
from ..files import hash_tensors
from ..model import UniFAR
from .labeller import fit_linear_head
from .labeller_scores import facet_scores

if TYPE_CHECKING:
    from ..encoding import FacetEncoding

__all__ = ["InContextLabeller", "base_digest", "document_features", "sentence_features", "FORMAT"]

FORMAT = "in-context"
FEATURES = "state, centred state, position"  # document_features; recorded with a saved head
CONFIG_NAME = "labeller.json"
HEAD_NAME = "head.safetensors"


def base_digest(model: UniFAR) -> str:
    """SHA-256 (hex, 24 chars) of a UniFAR model's base encoder weights, device independent; the
    pooler, which UniFAR never reads, is left out (as in :func:`unifar.search.models.model_digest`)."""
    named = [(n, t) for n, t in sorted(model.base.state_dict().items()) if ".pooler." not in n]
    h = hash_tensors(hashlib.sha256(), named, lambda n, flat: f"{n}:{flat.dtype}:{flat.numel()}")
    return h.hexdigest()[:24]


def _sentences(doc: Mapping[str, Any], k: int) -> list[str]:
    sents = doc.get("sentences")
    if sents is None or isinstance(sents, str):
        raise ValueError(f"document {k} ({doc.get('id', '?')!r}) needs a 'sentences' list")
    return list(sents)


def document_features(S: torch.Tensor) -> torch.Tensor:
    """The head's features of one document's ``k`` sentence states ``[k, h]`` -> ``[k, 2h + 1]``
    (module docstring): each state and its deviation from their mean, L2-normalised, and the
    relative position (0 for the first sentence, 1 for the last; 0 for a lone sentence, whose
    deviation is the zero vector).

    >>> document_features(torch.tensor([[3.0, 4.0], [-3.0, 4.0]])).double().round(decimals=4).tolist()
    [[0.6, 0.8, 1.0, 0.0, 0.0], [-0.6, 0.8, -1.0, 0.0, 1.0]]
    """
    S = S.float()
    pos = torch.arange(len(S), dtype=torch.float32).unsqueeze(1) / max(len(S) - 1, 1)
    return torch.cat([F.normalize(S, dim=-1), F.normalize(S - S.mean(0, keepdim=True), dim=-1), pos], dim=1)


def sentence_features(docs: Sequence[Mapping[str, Any]], encoding: FacetEncoding) -> list[tuple[list[int], torch.Tensor]]:
    """Per document: the indices of its ``sentences`` that have an in-context state in
    ``encoding`` (from ``encode_documents(docs, sentence_states=True)``), and their features
    (:func:`document_features`, float32). The title's state is left out; a blank sentence, one
    that tokenises to nothing, or one cut by the token budget has none."""
    if len(encoding.sentence_states) != len(docs):
        raise ValueError("the encoding holds no sentence states for these documents: encode them "
                         "with encode_documents(docs, sentence_states=True)")
    out = []
    for k, doc in enumerate(docs):
        sents = _sentences(doc, k)
        given = [i for i, s in enumerate(sents) if " ".join(s.split())]  # normalize_document's
        offset = 1 if " ".join((doc.get("title") or "").split()) else 0  # the title is unit 0
        units = encoding.unit_index[k]
        rows = [u for u, i in enumerate(units) if i >= offset] if sents else []
        index = [given[units[u] - offset] for u in rows]
        states = encoding.sentence_states[k][rows] if rows else torch.empty(0, 0)
        out.append((index, document_features(states) if rows else states))
    return out


class InContextLabeller:
    """A linear facet head over the in-context sentence states of ``model``'s base (module
    docstring). ``model``: a :class:`~unifar.model.UniFAR` (only its base and tokenisation are
    read; :meth:`for_base` builds one). ``C``: the L2 penalty's inverse, chosen on a dev split."""

    def __init__(self, model: UniFAR, C: float = 1.0, class_weight: str | None = None, max_iter: int = 1000,
                 tol: float = 1e-6, batch_size: int = 16, progress: bool | None = None) -> None:
        self.model, self.C, self.class_weight = model, float(C), class_weight
        self.max_iter, self.tol, self.batch_size, self.progress = int(max_iter), float(tol), batch_size, progress
        self.params: dict[str, torch.Tensor] = {}
        self.metadata: dict[str, Any] = {}
        self.digest = base_digest(model)

    @classmethod
    def for_base(cls, base_model: str = "minilm", max_tokens: int = 512, device: str | None = None,
                 **kwargs: Any) -> "InContextLabeller":
        """A labeller over the untrained UniFAR of a named base encoder (its base is the encoder's own)."""
        return cls(UniFAR(UniFARConfig(base_model=base_model, max_tokens=max_tokens), device=device), **kwargs)

    # -- features ------------------------------------------------------------------------------
    def encode(self, docs: Sequence[Mapping[str, Any]]) -> FacetEncoding:
        """This labeller's own pass: the documents through its base, sentence states kept (a
        document without a title is encoded as one with an empty title)."""
        docs = [d if "title" in d else {**d, "title": ""} for d in docs]
        return self.model.encode_documents(docs, batch_size=self.batch_size, show_progress=self.progress,
                                           sentence_states=True)

    def shares_pass_with(self, model: UniFAR) -> bool:
        """Whether ``model``'s encoding can be labelled from its own states: the same base weights
        (digest) and the same token budget as this labeller's base."""
        return (model is self.model or (model.config.max_tokens == self.model.config.max_tokens
                                         and base_digest(model) == self.digest))

    def features(self, docs: Sequence[Mapping[str, Any]], encoding: FacetEncoding | None = None,
                 model: UniFAR | None = None) -> list[tuple[list[int], torch.Tensor]]:
        """:func:`sentence_features` from ``encoding`` (made by ``model``) when they share a pass
        (:meth:`shares_pass_with`), else from this labeller's own pass."""
        if encoding is None or not encoding.sentence_states or not self.shares_pass_with(model or self.model):
            encoding = self.encode(docs)
        return sentence_features(docs, encoding)

    # -- training and prediction ---------------------------------------------------------------
    def fit(self, docs: Sequence[Mapping[str, Any]], encoding: FacetEncoding | None = None,
            **metadata: Any) -> "InContextLabeller":
        """Train the head on the facet-labelled sentences of ``docs`` (``labels``; ``None``, e.g.
        CSAbstruct's ``other``, and sentences without a state skipped)."""
        X, y = [], []
        for doc, (index, states) in zip(docs, self.features(docs, encoding)):
            labels = doc.get("labels")
            if labels is None or len(labels) != len(doc["sentences"]):
                raise ValueError(f"document {doc.get('id', '?')!r} needs one 'labels' entry per sentence")
            keep = [r for r, i in enumerate(index) if labels[i] is not None]
            if keep:
                X.append(states[keep])
                y += [FACETS.index(labels[index[r]]) for r in keep]
        missing = sorted(set(FACETS) - {FACETS[c] for c in y})
        if missing:
            raise ValueError(f"no training sentence for facet(s) {missing}")
        target = torch.tensor(y, dtype=torch.long)
        self.params, iterations = fit_linear_head(torch.cat(X), target, self.C, self.class_weight,
                                                  self.max_iter, self.tol)
        counts = torch.bincount(target, minlength=len(FACETS)).tolist()
        self.metadata = {**metadata, "documents": len(docs), "sentences": len(y), "lbfgs_iterations": iterations,
                         "class_counts": dict(zip(FACETS, counts))}
        return self

    def predict_states(self, X: torch.Tensor) -> list[str]:
        """Facets of sentence features ``[N, 2h + 1]`` (:func:`document_features`):
        ``argmax(X W^T + b)`` in float64."""
        if not self.params:
            raise RuntimeError("the labeller is not fitted; call fit() or load()")
        if len(X) == 0:
            return []
        return [FACETS[i] for i in (X.double() @ self.params["W"].T + self.params["b"]).argmax(-1).tolist()]

    def label_documents(self, docs: Sequence[Mapping[str, Any]], encoding: FacetEncoding | None = None,
                        model: UniFAR | None = None) -> list[list[str | None]]:
        """One facet per sentence of each document (``None`` for a sentence without a state);
        from ``encoding`` (``model``'s) when the pass can be shared, else from its own pass."""
        docs = list(docs)
        out = []
        for k, (doc, (index, states)) in enumerate(zip(docs, self.features(docs, encoding, model))):
            labels: list[str | None] = [None] * len(_sentences(doc, k))
            for i, f in zip(index, self.predict_states(states)):
                labels[i] = f
            out.append(labels)
        return out

    def evaluate(self, docs: Sequence[Mapping[str, Any]], encoding: FacetEncoding | None = None) -> dict[str, Any]:
        """:func:`~unifar.rhetoric.labeller_scores.facet_scores` on the facet-labelled sentences
        of ``docs``; a sentence without a state counts as a wrong answer."""
        gold, pred = [], []
        for doc, labels in zip(docs, self.label_documents(docs, encoding)):
            for g, p in zip(doc["labels"], labels):
                if g is not None:
                    gold.append(g)
                    pred.append(p)
        return facet_scores(gold, pred)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """``labeller.json`` + ``head.safetensors`` (the base is loaded by name)."""
        from safetensors.torch import save_file

        if not self.params:
            raise RuntimeError("the labeller is not fitted; call fit() first")
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        cfg = {"format": FORMAT, "format_version": 1, "facets": list(FACETS), "features": FEATURES,
               "base_model": self.model.config.base_model, "max_tokens": self.model.config.max_tokens,
               "base_digest": self.digest, "C": self.C, "class_weight": self.class_weight,
               "max_iter": self.max_iter, "tol": self.tol, "batch_size": self.batch_size, "metadata": self.metadata}
        save_file({k: v.contiguous() for k, v in self.params.items()}, str(path / HEAD_NAME))
        (path / CONFIG_NAME).write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None, model: UniFAR | None = None) -> "InContextLabeller":
        """Read a labeller written by :meth:`save`; its base is loaded by name (or ``model`` is
        used) and must have the weights it was trained on (digest)."""
        from safetensors.torch import load_file

        path = Path(directory)
        cfg = json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))
        if cfg.get("format") != FORMAT or cfg.get("format_version") != 1:
            raise ValueError(f"{path / CONFIG_NAME}: not an in-context labeller (format {cfg.get('format')!r})")
        if tuple(cfg["facets"]) != FACETS or cfg.get("features") != FEATURES:
            raise ValueError(f"{path / CONFIG_NAME}: facets {cfg['facets']} and features "
                             f"{cfg.get('features')!r}; this version reads {FACETS}, {FEATURES!r}")
        kw = {k: cfg[k] for k in ("C", "class_weight", "max_iter", "tol", "batch_size")}
        lab = (cls(model, **kw) if model is not None
               else cls.for_base(cfg["base_model"], cfg["max_tokens"], device=device, **kw))
        if lab.digest != cfg["base_digest"]:
            raise ValueError(f"{path}: trained on base weights {cfg['base_digest']}, but "
                             f"{cfg['base_model']!r} loads as {lab.digest}: reinstall the model package "
                             "or retrain the labeller")
        lab.params, lab.metadata = load_file(str(path / HEAD_NAME)), cfg.get("metadata", {})
        return lab
