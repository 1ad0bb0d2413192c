"""What training changed in a facet model, measured without ranking anything (chapter 6).

Retrieval metrics of small CPU-trained models move by less than their noise, so chapter 6 also
reports structural measures, each a function here:

* :func:`mean_facet_matrix` -- the mean 3 x 3 facet similarity matrix (question facets x
  document facets) over judged-relevant question-document pairs (the paper's figure 3), and
  :func:`diagonal_contrast`, its diagonal minus its off-diagonal mean;
* :func:`sentence_attention` -- a document's facet attention over its abstract sentences, from
  either branch (token weights summed per sentence), and :func:`span_shares`, the share of each
  facet's attention on given sentence spans against uniform attention (the paper's figure 4);
* the attention's mass on labelled sentences and its entropy are
  :func:`unifar.evaluation.attention.facet_attention_stats`;
* :func:`parameter_shift` -- how far training moved each parameter group from where it started;
* :func:`structure_record` -- all of these for one model (chapter 6's record), and
  :func:`structure_table`, one row per model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .attention import facet_attention_stats

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from torch import nn

    from ..caching import TokenStateCache
    from ..datasets.schema import QDocBenchmark
    from ..encoding import FacetEncoding
    from ..model import UniFAR
    from ..text import EncodedInput

__all__ = ["case_study_attention", "diagonal_contrast", "mean_facet_matrix", "parameter_shift", "relevant_pairs",
           "sentence_attention", "span_shares", "structure_record", "structure_table"]


def diagonal_contrast(matrix: ArrayLike) -> float:
    r"""Mean diagonal minus mean off-diagonal entry of a square facet similarity matrix.

    .. math::
        c(M) = \frac{1}{F}\sum_f M_{ff} - \frac{1}{F(F-1)}\sum_{f \ne g} M_{fg}

    0 when every question facet is as close to every document facet (the paper's "w/o A_facet"
    collapse); the larger, the more each facet is matched with its own.

    >>> round(diagonal_contrast([[0.9, 0.2, 0.1], [0.3, 0.8, 0.2], [0.1, 0.2, 0.7]]), 4)
    0.6167
    >>> diagonal_contrast(np.full((3, 3), 0.5))
    0.0
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise ValueError(f"expected a square matrix of at least 2 x 2, got shape {m.shape}")
    n = m.shape[0]
    diag = float(np.trace(m)) / n
    return diag - (float(m.sum()) - n * diag) / (n * (n - 1))


def parameter_shift(model: nn.Module, start: nn.Module) -> dict[str, float]:
    r"""How far training moved each named parameter group of ``model`` from ``start`` (the same
    architecture before training), relative to where it started:

    .. math::
        s_g = \frac{\lVert \theta_g - \theta_g^{(0)} \rVert_2}{\lVert \theta_g^{(0)} \rVert_2}

    over the tensors of each group of :func:`unifar.optim.parameter_group` (``base``,
    ``anchors``, ``aggregation``), frozen tensors included; a group that is all
    zeros at the start is reported as its absolute norm. It tells a variant that did not move
    (a frozen tensor: exactly 0) from one whose trained tensor barely moved.

    >>> import torch
    >>> a, b = torch.nn.Module(), torch.nn.Module()
    >>> a.anchors = torch.nn.Parameter(torch.tensor([[3.0, 4.0]]))
    >>> b.anchors = torch.nn.Parameter(torch.tensor([[3.0, 4.5]]))
    >>> parameter_shift(b, a)
    {'anchors': 0.1}
    """
    from ..optim import parameter_group

    start_state = start.state_dict()
    sums: dict[str, list[float]] = {}
    for name, value in model.state_dict().items():
        if name not in start_state or not value.is_floating_point():
            continue
        group = parameter_group(name)
        ref = start_state[name].to(value.device, value.dtype)
        d = sums.setdefault(group, [0.0, 0.0])
        d[0] += float((value - ref).double().pow(2).sum())
        d[1] += float(ref.double().pow(2).sum())
    return {g: (diff / ref) ** 0.5 if ref > 0 else diff ** 0.5 for g, (diff, ref) in sums.items()}


def relevant_pairs(bench: QDocBenchmark, max_pairs: int | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """``(question text, document id)`` of every judged-relevant pair of a q-doc benchmark
    (:class:`unifar.datasets.schema.QDocBenchmark`), in question order; ``max_pairs`` keeps a
    seeded sample of that many."""
    text = dict(zip(bench.questions["qid"], bench.questions["text"]))
    pairs = [(text[q], d) for q in text for d in sorted(bench.relevant(q))]
    if max_pairs is not None and len(pairs) > max_pairs:
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), max_pairs, replace=False))
        pairs = [pairs[i] for i in keep]
    return pairs


def mean_facet_matrix(model: UniFAR, pairs: Sequence[tuple[str, str]], documents: Mapping[str, Mapping[str, Any]],
                      state_cache: TokenStateCache | None = None, batch_size: int = 32) -> np.ndarray:
    """The mean facet similarity matrix ``[F, F]`` (rows: question facets, columns: document
    facets) of ``model`` over ``pairs`` of (question text, document id); ``documents`` maps an id
    to ``{"title", "sentences"}``. Each question and document is encoded once (``state_cache``: a
    shared :class:`~unifar.caching.TokenStateCache` of the frozen base)."""
    import torch
    import torch.nn.functional as F

    if not pairs:
        raise ValueError("mean_facet_matrix needs at least one (question, document) pair")
    questions = list(dict.fromkeys(q for q, _ in pairs))
    doc_ids = list(dict.fromkeys(d for _, d in pairs))
    missing = [d for d in doc_ids if d not in documents]
    if missing:
        raise KeyError(f"{len(missing)} documents of the pairs are not in the collection, e.g. {missing[:3]}")
    kw = {"batch_size": batch_size, "show_progress": False, "state_cache": state_cache}
    q = model.encode_questions(questions, **kw).embeddings
    docs = [{"title": documents[d].get("title") or "", "sentences": list(documents[d]["sentences"])}
            for d in doc_ids]
    d = model.encode_documents(docs, **kw).embeddings
    qi = {t: i for i, t in enumerate(questions)}
    di = {t: i for i, t in enumerate(doc_ids)}
    a = [qi[x] for x, _ in pairs]
    b = [di[y] for _, y in pairs]
    # pairwise, not all-against-all: M[p, i, j] = cos(q_p^(i), d_p^(j)) as facet_similarity does
    qn, dn = F.normalize(q[a].float(), dim=-1), F.normalize(d[b].float(), dim=-1)
    return torch.einsum("pih,pjh->pij", qn, dn).double().mean(0).numpy()


def sentence_attention(encoding: FacetEncoding, index: int, item: EncodedInput) -> np.ndarray:
    """One document's facet attention over its abstract sentences ``[F, n]``, each row summing
    to 1. ``encoding`` is a :class:`unifar.encoding.FacetEncoding` and ``item`` the document's
    :class:`unifar.text.EncodedInput` (from :meth:`unifar.model.UniFAR.tokenize_documents`). A
    document that took the token branch gets its token weights summed per sentence; the title
    (unit 0 of a titled document) and special tokens are left out, and each facet's weights over
    the sentences renormalised."""
    att = encoding.attention[index].double().numpy()
    first = 1 if item.has_title else 0
    n = item.n_sentences - first
    if n < 1:
        raise ValueError(f"input {index} has no sentence besides its title")
    if encoding.branch[index] == "sentence":
        per = att[:, first : first + n]
    else:
        sid = np.asarray(item.sentence_ids)
        onehot = (sid[:, None] == np.arange(first, first + n)[None, :]).astype(np.float64)  # [L, n]
        per = att[:, : len(sid)] @ onehot
    total = per.sum(1, keepdims=True)
    return per / np.where(total > 0, total, 1.0)


def span_shares(attention: ArrayLike, spans: Mapping[str, Sequence[int]], facets: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per facet, the share of its attention on the sentences ``spans[facet]`` and what uniform
    attention would put there (span length / sentences).

    ``attention`` is ``[F, n]`` with rows summing to 1 (:func:`sentence_attention`).

    >>> a = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> span_shares(a, {"background": [0, 1], "method": [2]}, ["background", "method"])
    {'background': {'share': 0.8, 'uniform': 0.5}, 'method': {'share': 0.4, 'uniform': 0.25}}
    """
    a = np.asarray(attention, dtype=np.float64)
    n = a.shape[1]
    out = {}
    for f, name in enumerate(facets):
        idx = [i for i in spans.get(name, ()) if i < n]
        if not idx:
            continue
        out[name] = {"share": round(float(a[f, idx].sum()), 6), "uniform": round(len(idx) / n, 6)}
    return out


def case_study_attention(model: UniFAR, question: str, documents: Sequence[Any],
                         state_cache: TokenStateCache | None = None) -> dict[str, Any]:
    """Figure 4 for one model: the question's facet attention over its units (tokens or its one
    sentence, as the model's branch chooses) and each document's sentence attention
    (:func:`sentence_attention`) with :func:`span_shares` on the document's ``spans``.

    ``documents`` are :class:`unifar.paper.CaseStudyDocument` (or anything with ``title``,
    ``sentences``, ``spans``). Returns ``{"question": {"units", "attention", "branch"},
    "documents": [{"attention", "branch", "shares"}, ...]}`` with plain lists.
    """
    facets = tuple(model.config.facets)
    kw = {"show_progress": False, "state_cache": state_cache}
    q = model.encode_questions([question], **kw)
    docs = [{"title": d.title, "sentences": list(d.sentences)} for d in documents]
    items = model.tokenize_documents(docs)
    enc = model.encode(items, **kw)
    out_docs = []
    for i, d in enumerate(documents):
        att = sentence_attention(enc, i, items[i])
        out_docs.append({"attention": att.round(6).tolist(), "branch": enc.branch[i],
                         "shares": span_shares(att, d.spans, facets)})
    return {"question": {"units": q.units[0], "attention": q.attention[0].double().numpy().round(6).tolist(),
                         "branch": q.branch[0]},
            "documents": out_docs}


def structure_record(model: UniFAR, start: nn.Module, qdoc_sets: Mapping[str, tuple[Sequence[tuple[str, str]], Mapping[str, Any]]],
                     dev_docs: Sequence[Mapping[str, Any]], state_cache: TokenStateCache | None = None,
                     held_out: tuple[Mapping[str, float] | None, Mapping[str, float] | None] = (None, None)) -> dict[str, Any]:
    """What training changed in ``model``, with no ranking involved (one row of chapter 6's table):

    * ``matrices`` / ``contrast``: :func:`mean_facet_matrix` over each q-doc set of ``qdoc_sets``
      (``{name: (pairs, documents)}``, as :func:`relevant_pairs` gives them) and its
      :func:`diagonal_contrast`;
    * ``attention``: :func:`unifar.evaluation.attention.facet_attention_stats` on ``dev_docs``
      (CSFCube's fold1_dev papers, which ship sentence labels);
    * ``held_out_before`` / ``held_out_after``: the held-out loss terms the run logged before and
      after training (``held_out``; None for a model that was not trained);
    * ``shift``: :func:`parameter_shift` from ``start``, the untrained model.
    """
    matrices = {k: mean_facet_matrix(model, p, d, state_cache=state_cache) for k, (p, d) in qdoc_sets.items()}
    enc = model.encode_documents(list(dev_docs), state_cache=state_cache, show_progress=False)
    return {"matrices": {k: v.tolist() for k, v in matrices.items()},
            "contrast": {k: diagonal_contrast(v) for k, v in matrices.items()},
            "attention": facet_attention_stats(model, dev_docs, enc),
            "held_out_before": held_out[0], "held_out_after": held_out[1],
            "shift": parameter_shift(model, start)}


def structure_table(records: Mapping[str, Mapping[str, Any]]):
    """:func:`structure_record` of each model as a pandas DataFrame, one row per model: held-out
    loss terms before and after training, diagonal contrast per q-doc set, the attention's mass on
    its own facet's sentences beside uniform attention's, its normalised entropy, and how far the
    anchors and the aggregation module moved."""
    import pandas as pd

    out = {}
    for name, v in records.items():
        before, after = v["held_out_before"] or {}, v["held_out_after"] or {}
        # l_kd: the distillation term, logged where the base objective distils (full profile)
        terms = [t for t in ("l_dd", "l_qd", "l_kl", "l_kd") if t in before or t in after]
        out[name] = {
            **{f"held-out {t} before": before.get(t) for t in terms},
            **{f"held-out {t} after": after.get(t) for t in terms},
            **{f"contrast {k}": c for k, c in v["contrast"].items()},
            "attention mass on own sentences": v["attention"]["mass_on_gold"],
            "uniform mass on own sentences": v["attention"]["uniform_mass_on_gold"],
            "attention entropy (1 = uniform)": v["attention"]["norm_entropy"],
            # relative distance of the trained tensors from the identity initialisation
            **{f"{g} moved": v.get("shift", {}).get(g) for g in ("anchors", "aggregation")}}
    return pd.DataFrame(out).T.rename_axis("model")
