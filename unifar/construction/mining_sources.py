"""The offline training documents of the FTU construction: their sources and pools, the leakage
guard, labelling the unlabelled ones, and the text mining encodes (:func:`whole_text`; a facet's
sentences: :func:`unifar.evaluation.texts.facet_text`). The mining itself is :mod:`unifar.construction.mining`.

Documents (ids are namespaced by source; evaluation material is dropped by the leakage guard):

* ``csabstruct:<id>``: CSAbstruct train + dev abstracts, human sentence roles (its test split is
  kept for the labeller's evaluation). Field ``computer science``.
* ``nicta:<id>``: NICTA-PIBOSO abstracts, human sentence roles. Field ``medicine``.
* ``pubmedqa:<pmid>``: the PubMedQA PQA-L *training half*, section-name labels. Field
  ``biomedicine``.
* ``s2:<corpus id>``: papers of the SciRepEval citation triplets and of the *train half* of the
  SciRepEval search sample (:func:`unifar.datasets.scirepeval.split_scirepeval_search`); they have no
  sentence labels, so the offline labeller labels them (``labels_origin = "labeller"``).

Pools keep fields apart (:data:`SOURCES`): ``cs`` (CSAbstruct, S2 papers) and ``biomed``
(PubMedQA, NICTA); documents are only paired within a pool.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..datasets import labelled_abstracts, pubmedqa, scirepeval
from ..datasets.leakage import find_leaks, forbidden_from_repo_data
from ..evaluation.texts import document_text

if TYPE_CHECKING:
    from .labelling import SentenceLabeller

__all__ = ["SOURCES", "load_training_documents", "label_unlabelled", "whole_text", "sample_pool"]

#: Offline sources, their pool (documents are only paired within a pool) and field.
SOURCES: dict[str, tuple[str, str]] = {
    "csabstruct": ("cs", "computer science"),
    "scirepeval_triplets": ("cs", "multi-field (S2)"),
    "scirepeval_search": ("cs", "multi-field (S2)"),
    "pubmedqa": ("biomed", "biomedicine"),
    "nicta": ("biomed", "medicine"),
}



def _renamed(doc: Mapping[str, Any], new_id: str, source: str, field_: str, **extra: Any) -> dict[str, Any]:
    labels = doc.get("labels")
    return {
        "id": new_id,
        "title": doc.get("title") or "",
        "sentences": list(doc["sentences"]),
        "labels": list(labels) if labels is not None else None,
        "source": source,
        "field": field_,
        "labels_origin": extra.pop("labels_origin", "gold" if labels is not None else None),
        **extra,
    }


def load_training_documents(
    sources: Sequence[str] = tuple(SOURCES),
    data_dir: str | Path | None = None,
    forbidden: Any | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Documents of the offline training sources ``{id: doc}`` and a report (counts per source,
    documents dropped by the leakage guard). ``forbidden``: a
    :class:`~unifar.datasets.leakage.ForbiddenSet` (default: built from ``data_dir``)."""
    root = Path(data_dir) if data_dir is not None else None
    sub = (lambda name: root / name) if root is not None else (lambda name: None)
    if forbidden is None:
        forbidden = forbidden_from_repo_data(root)
    docs: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {"scirepeval_triplets": [], "scirepeval_search": None, "pubmedqa_questions": []}
    counts: Counter[str] = Counter()

    def add(doc: dict[str, Any]) -> None:
        if not doc["sentences"]:
            counts[f"{doc['source']}:empty"] += 1
            return
        if doc["id"] not in docs:
            docs[doc["id"]] = doc
            counts[doc["source"]] += 1

    for source in sources:
        if source not in SOURCES:
            raise ValueError(f"unknown source {source!r}; choose from {sorted(SOURCES)}")
        _, fld = SOURCES[source]
        if source == "csabstruct":
            for split in ("train", "dev"):
                for d in labelled_abstracts.load_csabstruct(sub("csabstruct"), split=split):
                    add(_renamed(d, f"csabstruct:{d['id']}", source, fld))
        elif source == "nicta":
            for d in labelled_abstracts.load_nicta_piboso(sub("nicta_piboso")):
                add(_renamed(d, f"nicta:{d['id']}", source, fld))
        elif source == "pubmedqa":
            bench = pubmedqa.load_pubmedqa(sub("pubmedqa_pqal"), split="train")
            for d in bench.documents:
                add(_renamed(d, f"pubmedqa:{d['id']}", source, fld))
            for q in bench.questions:
                extra["pubmedqa_questions"].append((q["text"], f"pubmedqa:{q['doc_id']}"))
        elif source == "scirepeval_triplets":
            corpus = scirepeval.load_scirepeval_triplets(sub("scirepeval_samples"))
            for d in corpus.documents:
                add(_renamed(d, f"s2:{d['id']}", source, fld))
            extra["scirepeval_triplets"] = [
                (f"s2:{t['query_id']}", f"s2:{t['pos_id']}", f"s2:{t['neg_id']}") for t in corpus.triplets
            ]
        elif source == "scirepeval_search":
            bench = scirepeval.split_scirepeval_search(scirepeval.load_scirepeval_search(sub("scirepeval_samples")), "train")
            wanted = {d for qid in bench.qrels for d in (bench.candidates or {}).get(qid, bench.qrels[qid])}
            for d in bench.documents:
                if d["id"] in wanted:
                    add(_renamed(d, f"s2:{d['id']}", source, fld))
            extra["scirepeval_search"] = bench

    leaks = find_leaks(docs.values(), forbidden)
    dropped = sorted({h.training_id for h in leaks.hits})
    for d in dropped:
        counts[f"{docs[d]['source']}:leak_dropped"] += 1
        del docs[d]
    report = {
        "documents_per_source": {k: v for k, v in sorted(counts.items()) if ":" not in k},
        "dropped_by_leakage_guard": {k.split(":")[0]: v for k, v in sorted(counts.items()) if k.endswith(":leak_dropped")},
        "dropped_empty": {k.split(":")[0]: v for k, v in sorted(counts.items()) if k.endswith(":empty")},
        "leak_examples": [asdict(h) for h in leaks.hits[:10]],
    }
    report["_extra"] = extra
    return docs, report


def label_unlabelled(docs: Mapping[str, dict[str, Any]], labeller: SentenceLabeller | None) -> int:
    """Give every document without sentence labels the offline labeller's labels (in place;
    ``labels_origin = "labeller"``). Returns how many documents were labelled."""
    todo = [d for d in docs.values() if d.get("labels") is None]
    if not todo:
        return 0
    if labeller is None:
        raise ValueError(
            f"{len(todo)} documents (e.g. {todo[0]['id']!r}, source {todo[0]['source']!r}) have no sentence "
            "labels; pass a FacetLabeller (chapter 2 trains one) or leave their sources out"
        )
    for doc, labels in zip(todo, labeller.label_documents(todo)):
        doc["labels"] = list(labels)
        doc["labels_origin"] = "labeller"
    return len(todo)


def whole_text(doc: Mapping[str, Any]) -> str:
    """The text the mining encoder embeds: title and abstract joined by a space.

    >>> whole_text({"title": "T", "sentences": ["A.", "B."]}), whole_text({"title": "", "sentences": ["A."]})
    ('T A. B.', 'A.')
    """
    return document_text(doc, " ").strip()  # title + " " + abstract (unifar.evaluation.texts)


def sample_pool(docs: Mapping[str, Mapping[str, Any]], per_source: Mapping[str, int], seed: int) -> dict[str, Any]:
    """Keep at most ``per_source[s]`` documents of each source ``s`` (a seeded sample, in the
    original order); sources not named keep everything.

    >>> docs = {f"a{i}": {"source": "nicta"} for i in range(5)} | {"b0": {"source": "pubmedqa"}}
    >>> sorted(sample_pool(docs, {"nicta": 2}, seed=0))
    ['a3', 'a4', 'b0']
    """
    by_source: dict[str, list[str]] = {}
    for d, doc in docs.items():
        by_source.setdefault(doc["source"], []).append(d)
    keep: set[str] = set()
    rnd = random.Random(seed)
    for source, ids in sorted(by_source.items()):
        n = per_source.get(source)
        keep.update(ids if n is None or len(ids) <= n else rnd.sample(ids, n))
    return {d: doc for d, doc in docs.items() if d in keep}

