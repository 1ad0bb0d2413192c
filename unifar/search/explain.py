"""Why a paper matches a query: the 3 x 3 facet similarity matrix (paper section 3.3,
:func:`unifar.scoring.facet_similarity`), the sentences of the paper each facet attends to most
(the aggregation attention of section 3.2; token attention, for a paper with fewer sentences
than facets, summed per sentence) and the BM25 terms that matched, per BM25 field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..facets import FACETS
from ..scoring import facet_similarity
from .lexical import field_texts, matched_terms

if TYPE_CHECKING:
    from ..model import UniFAR
    from .corpus_index import Index

__all__ = ["explain", "attended_sentences", "format_explanation"]


def attended_sentences(model: UniFAR, doc: dict[str, Any], top: int = 3) -> dict[str, Any]:
    """Per facet the ``top`` units (title first, then sentences) of ``doc`` with the most
    attention weight; the branch (``sentence`` or ``token``) UniFAR took for it."""
    item = model.tokenize_documents([doc])[0]
    enc = model.encode([item], show_progress=False)
    att = enc.attention[0]  # [F, units] (sentence branch) or [F, tokens] (token branch)
    if enc.branch[0] == "token":  # sum each sentence's tokens; special tokens (-1) dropped
        sid = torch.tensor(item.sentence_ids)
        per = torch.zeros(att.shape[0], max(item.n_sentences, 1))
        real = sid >= 0
        per.index_add_(1, sid[real], att[:, real])
        att = per[:, : item.n_sentences]
    units = list(item.units)
    out: dict[str, Any] = {"branch": enc.branch[0], "truncated": bool(item.truncated)}
    for i, f in enumerate(enc.facets):
        if not units:
            out[f] = []
            continue
        w, j = torch.topk(att[i], min(top, len(units)))
        out[f] = [
            {
                "unit": int(u),
                "text": units[u],
                "weight": round(float(x), 4),
                "title": bool(item.has_title and u == 0),
            }
            for x, u in zip(w, j.tolist())
        ]
    return out


def explain(
    index: Index, query: str | None, doc_id: str, *, like: str | None = None, top: int = 3
) -> dict[str, Any]:
    """The explanation of ``doc_id`` for a question or a paper (``like``), as a JSON-ready dict:
    ``matrix`` (rows: query facets, columns: the paper's), ``diagonal_mean``, ``attention``
    (:func:`attended_sentences`) and ``bm25`` (score and matched terms per field)."""
    pos = index.position(doc_id, "DOC_ID")
    qe = index.query_embedding(query, like)
    M = facet_similarity(qe[None], index.embeddings[pos][None])[0, 0]
    doc = index.documents[pos]
    bm25 = {}
    for field, scorer in index.bm25.items():
        text = query if like is None else field_texts(index.documents[index.position(like)], field)
        bm25[field] = {
            "score": round(float(scorer.scores(text, [str(pos)])[0]), 4),
            "terms": matched_terms(scorer, text, pos),
        }
    return {
        "query": query,
        "like": like,
        "document": {"id": doc["id"], "title": doc["title"]},
        "facets": list(FACETS),
        "matrix": [[round(float(x), 4) for x in row] for row in M.tolist()],
        "diagonal_mean": round(float(M.diagonal().mean()), 4),
        "attention": attended_sentences(index.model, doc, top),
        "bm25": bm25,
    }


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_explanation(ex: dict[str, Any], width: int = 90) -> str:
    """The explanation as text: the matrix, the attended sentences, the BM25 terms."""
    q = f"paper {ex['like']}" if ex["like"] is not None else repr(_short(ex["query"], width - 10))
    lines = [
        f"query: {q}",
        f"paper: {ex['document']['id']}  {_short(ex['document']['title'], width)}",
        "",
        "facet similarity cos(query facet i, paper facet j):",
        f"{'':>12}" + "".join(f"{f:>12}" for f in ex["facets"]),
    ]
    for f, row in zip(ex["facets"], ex["matrix"]):
        lines.append(f"{f:>12}" + "".join(f"{x:>12.4f}" for x in row))
    lines += [
        f"diagonal mean: {ex['diagonal_mean']:.4f}",
        "",
        f"sentences each facet attends to most ({ex['attention']['branch']} attention"
        + (", text truncated" if ex["attention"]["truncated"] else "")
        + "):",
    ]
    for f in ex["facets"]:
        lines.append(f"  {f}:")
        for u in ex["attention"][f]:
            tag = "[title] " if u["title"] else ""
            lines.append(f"    {u['weight']:.3f}  {tag}{_short(u['text'], width - 14)}")
    lines += ["", "BM25 terms that matched:"]
    for field, b in ex["bm25"].items():
        terms = ", ".join(f"{t['term']} ({t['score']:.2f})" for t in b["terms"]) or "none"
        lines.append(f"  {field:<10} {b['score']:>8.3f}  {terms}")
    return "\n".join(lines)
