"""What a trained facet model attends to: attention diagnostics on labelled documents.

:func:`facet_attention_stats` compares a UniFAR model's facet attention over the title and the
sentences of CSFCube papers (labelled by their predicted facets, as
:func:`unifar.evaluation.csfcube.csfcube_split_papers` gives them) with uniform attention:
normalised entropy, the mass on the sentences labelled with the facet, the mass on the title.
Chapter 4 reports it beside the fold1_dev MAP of the same models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["ceiling_ladder", "ceiling_mixes", "facet_attention_stats"]


def facet_attention_stats(model, docs: Sequence[Mapping], encoding, reference=None) -> dict:
    """Where a facet model's attention goes on labelled documents, against uniform attention.

    ``docs`` carry ``labels`` as facet names (None for no facet), as :func:`unifar.evaluation.csfcube.csfcube_split_papers`
    gives them; ``encoding`` is ``model.encode_documents(docs)``; ``reference`` (optional) the
    facet embeddings ``[N, F, h]`` of another model on the same documents (the untrained one).
    Over the documents that took the sentence branch, with each facet's attention over the title
    and the kept sentences renormalised:

    * ``norm_entropy``: entropy divided by ``log(n)``, averaged over documents and facets (1.0 is
      uniform attention, the identity-initialised model's);
    * ``mass_on_gold``: the attention mass a facet puts on the sentences labelled with it,
      averaged over (document, facet) pairs with such sentences; ``mass_on_gold_by_facet`` per
      facet; ``uniform_mass_on_gold``: what uniform attention puts there (the same average of the
      labelled share of the units); ``title_mass``: mass on the title (documents with one);
    * ``cos_to_reference``: mean cosine between each facet embedding and the reference's;
    * ``n_documents``: documents counted (sentence branch).
    """
    import torch.nn.functional as F

    from ..objective import unit_labels

    facets = tuple(model.config.facets)
    fidx = {f: i for i, f in enumerate(facets)}
    items = model.tokenize_documents(docs)
    ent: list[float] = []
    title: list[float] = []
    gold: dict[str, list[float]] = {f: [] for f in facets}
    frac: list[float] = []
    for doc, item, A, branch in zip(docs, items, encoding.attention, encoding.branch):
        if branch != "sentence":
            continue
        lab = np.array(unit_labels(doc, item, fidx) or [-1] * item.n_sentences)
        A = A[:, : len(lab)].double().numpy()
        A = A / A.sum(1, keepdims=True)
        n = len(lab)
        ent.append(float((-(A * np.log(A + 1e-12)).sum(1)).mean() / np.log(n)) if n > 1 else 1.0)
        if (doc.get("title") or "").strip():
            title.append(float(A[:, 0].mean()))
        for f, name in enumerate(facets):
            g = lab == f
            if g.any():
                gold[name].append(float(A[f, g].sum()))
                frac.append(float(g.mean()))
    pooled = [v for f in facets for v in gold[f]]
    out = {
        "n_documents": len(ent),
        "norm_entropy": round(float(np.mean(ent)), 4) if ent else None,
        "mass_on_gold": round(float(np.mean(pooled)), 4) if pooled else None,
        "mass_on_gold_by_facet": {f: round(float(np.mean(v)), 4) if v else None for f, v in gold.items()},
        "uniform_mass_on_gold": round(float(np.mean(frac)), 4) if frac else None,
        "title_mass": round(float(np.mean(title)), 4) if title else None,
    }
    if reference is not None:
        out["cos_to_reference"] = round(float(F.cosine_similarity(encoding.embeddings, reference, dim=-1).mean()), 4)
    return out


def ceiling_mixes(record: Mapping) -> list[float]:
    """The attention mixes ``a`` an attention-ceiling record scores (``benchmarks/studies/
    attention_ceiling.py``: ``w_f = (1 - a) uniform + a labels_f``), sorted.

    >>> ceiling_mixes({"csfcube_fold1_dev_map": {"a=0.5 both sides": {}, "a=0.0 query only": {}, "mean pooling": {}}})
    [0.0, 0.5]
    """
    return sorted({float(k.split("=")[1].split()[0]) for k in record["csfcube_fold1_dev_map"] if k.startswith("a=")})


def ceiling_ladder(record: Mapping, prefix: str, mixes: Sequence[float]) -> list[float]:
    """CSFCube fold1_dev aggregated MAP of an attention-ceiling record at each mix ``a`` (both
    sides), for the labels named by ``prefix`` (``""``: CSFCube's own, the oracle; ``"probe soft "``,
    ``"labeller "``, ...). A record without a row for ``a`` (``a = 0``: uniform attention, the
    same for every label source) gives its ``a=0.0`` row.

    >>> rec = {"csfcube_fold1_dev_map": {"a=0.0 both sides": {"all": 41.1}, "probe a=0.5 both sides": {"all": 42.0}}}
    >>> ceiling_ladder(rec, "probe ", [0.0, 0.5])
    [41.1, 42.0]
    """
    rows = record["csfcube_fold1_dev_map"]
    return [rows.get(f"{prefix}a={a} both sides", rows["a=0.0 both sides"])["all"] for a in mixes]
