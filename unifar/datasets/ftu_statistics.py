"""Counts of an FTU set in the spirit of the paper's appendix B and table 4: documents, questions
and positives per facet, documents and questions per field (:func:`field_table`)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from ..facets import FACETS
from .ftu import FTU

__all__ = ["ftu_statistics", "field_table"]


def ftu_statistics(ftus: Sequence[FTU], documents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Counts in the spirit of appendix B / table 4.

    ``documents``: distinct documents the FTUs refer to; ``document_slots``: query + positives +
    negatives summed over FTUs (a document counted once per appearance; the paper's "aggregating
    all query, positive, and negative documents across FTUs" may mean either);
    ``per_field``: ``{field: {"documents": distinct, "questions": questions of FTUs whose query
    document has that field}}``; plus documents per source, questions per origin and facet,
    positives/negatives per facet and sentence-label counts.
    """
    distinct: dict[str, None] = {}
    slots = 0
    pos_n: Counter[str] = Counter()
    neg_n: Counter[str] = Counter()
    with_facet: Counter[str] = Counter()
    q_origin: Counter[str] = Counter()
    q_facet: Counter[str] = Counter()
    q_field: Counter[str] = Counter()
    for ftu in ftus:
        for d in ftu.doc_ids():
            distinct[d] = None
            slots += 1
        for f in FACETS:
            pos_n[f] += len(ftu.positives.get(f, []))
            neg_n[f] += len(ftu.negatives.get(f, []))
            with_facet[f] += bool(ftu.positives.get(f))
        qfield = (documents.get(ftu.query) or {}).get("field") or "unknown"
        for f, q in ftu.questions.items():
            q_origin[q.origin] += 1
            q_facet[f] += 1
            q_field[qfield] += 1
    per_source: Counter[str] = Counter()
    per_field: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    n_unlabelled = 0
    for d in distinct:
        doc = documents.get(d) or {}
        per_source[doc.get("source") or "unknown"] += 1
        per_field[doc.get("field") or "unknown"] += 1
        if doc.get("labels") is None:
            n_unlabelled += 1
        else:
            labels.update(lab or "none" for lab in doc["labels"])
    fields = sorted(set(per_field) | set(q_field), key=lambda k: (-per_field[k], k))
    return {
        "ftus": len(ftus),
        "documents": len(distinct),
        "document_slots": slots,
        "questions": sum(q_origin.values()),
        "questions_per_origin": dict(sorted(q_origin.items())),
        "questions_per_facet": {f: q_facet[f] for f in FACETS},
        "ftus_with_facet": {f: with_facet[f] for f in FACETS},
        "positives_per_facet": {f: pos_n[f] for f in FACETS},
        "negatives_per_facet": {f: neg_n[f] for f in FACETS},
        "documents_per_source": dict(sorted(per_source.items(), key=lambda kv: (-kv[1], kv[0]))),
        "per_field": {k: {"documents": per_field[k], "questions": q_field[k]} for k in fields},
        "sentence_labels": {k: labels[k] for k in (*FACETS, "none")},
        "unlabelled_documents": n_unlabelled,
    }


def field_table(stats: Mapping[str, Any]) -> Any:
    """Table 4's layout (rows: fields; columns: documents, questions) as a pandas DataFrame."""
    import pandas as pd

    rows = [{"field": k, "documents": v["documents"], "questions": v["questions"]} for k, v in stats["per_field"].items()]
    return pd.DataFrame(rows, columns=["field", "documents", "questions"]).set_index("field")
