"""The facet labeller's training data: CSAbstruct documents without the evaluation papers, and
their facet-labelled sentences.

Classes are the three facets, mapped from CSAbstruct's labels as CSFCube does
(:data:`~unifar.facets.CSABSTRUCT_TO_FACET`); ``other`` sentences are left out of training and
of evaluation (:func:`labelled_sentences`).

**Leakage.** 32 CSAbstruct abstracts are CSFCube papers (CSAbstruct was drawn from the same
Semantic Scholar pool): 21 in ``train``, 8 in ``dev``, 3 in ``test``. CSFCube is an evaluation
benchmark, so they must not train the labeller (the leakage rule: no evaluation document or question enters training data).
:func:`csabstruct_training_documents` finds them with :func:`unifar.datasets.leakage.find_leaks`
against :func:`~unifar.datasets.leakage.forbidden_from_repo_data` (CSAbstruct has no titles and
no S2 ids, so they are caught by their text: the whole normalised abstract equal to a CSFCube
abstract, or at least two shared long sentences) and drops them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..datasets.labelled_abstracts import load_csabstruct
from ..datasets.leakage import ForbiddenSet, LeakageReport, find_leaks, forbidden_from_repo_data
from ..facets import FACETS

__all__ = ["drop_leaking_documents", "csabstruct_training_documents", "labelled_sentences"]


def drop_leaking_documents(
    docs: Sequence[Mapping[str, Any]], forbidden: ForbiddenSet
) -> tuple[list[Mapping[str, Any]], LeakageReport]:
    """The documents that do not leak (:func:`~unifar.datasets.leakage.find_leaks`), in order, and
    the report of those that do."""
    docs = list(docs)
    report = find_leaks(docs, forbidden)
    bad = {h.training_id for h in report.hits}
    kept = [d for i, d in enumerate(docs) if str(d.get("id", f"#{i}")) not in bad]
    return kept, report


def csabstruct_training_documents(
    splits: Sequence[str] = ("train",),
    path: str | Path | None = None,
    forbidden: ForbiddenSet | None = None,
) -> tuple[list[dict[str, Any]], LeakageReport]:
    """CSAbstruct documents of ``splits`` without the CSFCube papers (and any other evaluation
    material of ``forbidden``, default :func:`~unifar.datasets.leakage.forbidden_from_repo_data`).

    Returns the kept documents and the leakage report (``report.hits`` names the dropped ids:
    21 of ``train`` with the repository's data)."""
    fs = forbidden if forbidden is not None else forbidden_from_repo_data()
    docs: list[dict[str, Any]] = []
    for sp in splits:
        docs.extend(dict(d) for d in load_csabstruct(path, split=sp))
    return drop_leaking_documents(docs, fs)  # type: ignore[return-value]


def labelled_sentences(docs: Sequence[Mapping[str, Any]], key: str = "labels",
                       allowed: Sequence[str] | None = FACETS) -> tuple[list[str], list[str]]:
    """Sentences with a label and their labels, from each document's ``sentences`` and ``key``
    column (``None`` labels, e.g. CSAbstruct's ``other``, skipped); a label outside ``allowed``
    is an error (default: the facets; ``None``: any, e.g. CSAbstruct's five ``raw_labels``).

    >>> labelled_sentences([{"sentences": ["a", "b", "c"], "labels": ["method", None, "result"]}])
    (['a', 'c'], ['method', 'result'])
    """
    sents: list[str] = []
    labels: list[str] = []
    for k, doc in enumerate(docs):
        s, lab = doc.get("sentences"), doc.get(key)
        if s is None or lab is None or len(s) != len(lab):
            raise ValueError(f"document {k} ({doc.get('id', '?')!r}) needs 'sentences' and one {key!r} entry each")
        for text, label in zip(s, lab):
            if label is None:
                continue
            if allowed is not None and label not in allowed:
                raise ValueError(f"document {k}: unknown label {label!r} in {key!r}; expected one of {tuple(allowed)}")
            sents.append(text)
            labels.append(label)
    return sents, labels

