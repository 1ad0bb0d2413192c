"""Training objectives as data sources with one interface (multi-objective paper, section 3.2).

An :class:`Objective` is a named list of :class:`Example` ``(anchor, positive, negative | None)``
texts and a stream over them (reshuffled every epoch; ICrop crops anew,
:mod:`unifar.multi_objective.icrop`). Builders, the paper's objectives in our data:

* question -> document (the paper's MS MARCO): :func:`pubmedqa_objective` (the PQA-L *train*
  half: a question and its own abstract, conclusion included as in the benchmark's collection)
  and :func:`scirepeval_search_objective` (the *train* half of
  :func:`unifar.datasets.scirepeval.split_scirepeval_search`: a question and each clicked
  candidate, with an unclicked candidate of the same pool as hard negative);
* document -> cited document (the paper's SPECTER triplets): :func:`specter_objective` (the
  SciRepEval citation triplets) and :func:`ftu_docdoc_objective` (chapter 3's FTUs: the query
  document and each of its facet positives, a facet negative as hard negative).

Leakage guard (:func:`drop_leaks`): every example whose question or any of whose documents is
evaluation material is dropped, by the FTUs' guard :func:`unifar.datasets.leakage.find_leaks`
against :func:`unifar.datasets.leakage.forbidden_from_repo_data` (every CSFCube and Cranfield
paper and question, PubMedQA's test half, SciRepEval search's test half). The builders run it by
default; ``stats["dropped_leaks"]`` counts what it removed. Documents become text as
``title + sep + abstract`` (:func:`unifar.evaluation.texts.document_text`); pass the model's
``sep_token`` (``[SEP]`` for MiniLM, ``</s>`` for MPNet).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from ..datasets.leakage import ForbiddenSet, find_leaks, forbidden_from_repo_data
from ..evaluation.texts import document_text

__all__ = [
    "hold_out",
    "Example",
    "Objective",
    "repo_forbidden",
    "drop_leaks",
    "pubmedqa_objective",
    "scirepeval_search_objective",
    "specter_objective",
    "ftu_docdoc_objective",
]

QUESTION_TO_DOCUMENT, DOCUMENT_TO_DOCUMENT, ICROP = (
    "question->document",
    "document->document",
    "icrop",
)
Side = str | Mapping[str, Any]  # a question (str) or a document ({"id", "title", "sentences"})


class Example(NamedTuple):
    """One training example: anchor text, positive text, hard negative text (or None).
    ``recurs``: the same texts come back in later epochs, so a frozen base's states of them are
    worth caching (False for ICrop's fresh crops)."""

    anchor: str
    positive: str
    negative: str | None = None
    recurs: bool = True


@dataclass
class Objective:
    """A named source of examples. ``resample(rng)`` (ICrop) draws a fresh epoch of examples;
    without it every epoch is ``examples`` reshuffled. ``dev``: held-out examples, never
    streamed, on which a run's learning curve is measured (:func:`hold_out`)."""

    name: str
    kind: str  # QUESTION_TO_DOCUMENT, DOCUMENT_TO_DOCUMENT or ICROP
    examples: list[Example]
    stats: dict[str, int] = field(default_factory=dict)
    resample: Callable[[np.random.Generator], list[Example]] | None = None
    dev: list[Example] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)

    def stream(self, seed: int = 0) -> Iterator[Example]:
        """Examples without end, epoch after epoch, each epoch in a new order (seeded)."""
        if not self.examples:
            raise ValueError(f"objective {self.name!r} has no examples (stats: {self.stats})")
        rng = np.random.default_rng(seed)
        epoch = self.examples
        while True:
            for i in rng.permutation(len(epoch)):
                yield epoch[i]
            epoch = self.resample(rng) if self.resample is not None else self.examples


def hold_out(objective: Objective, n: int, seed: int = 0) -> Objective:
    """``objective`` with ``n`` of its examples (a seeded random choice) moved to ``dev``: the
    held-out part of the training data a run's dev curve is measured on. An objective that
    crops anew every epoch (ICrop) holds out *documents* instead, when it is built
    (:func:`unifar.multi_objective.icrop.icrop_objective`'s ``n_dev``).

    >>> o = hold_out(Objective("a", "icrop", [Example(str(i), "p") for i in range(5)]), 2)
    >>> len(o.examples), len(o.dev), o.stats["dev_examples"], set(o.examples) & set(o.dev)
    (3, 2, 2, set())
    """
    if objective.resample is not None:
        raise ValueError(f"objective {objective.name!r} crops anew every epoch: hold out its documents "
                         "when building it (icrop_objective's n_dev)")
    if not 0 <= n < len(objective.examples):
        raise ValueError(f"objective {objective.name!r}: cannot hold out {n} of {len(objective.examples)} examples")
    order = np.random.default_rng(seed).permutation(len(objective.examples))
    dev = set(order[:n].tolist())
    examples = [e for i, e in enumerate(objective.examples) if i not in dev]
    # in the drawn order, not the source's: neighbouring examples of a source are often on one
    # topic, and batches of them would be harder than the shuffled training batches
    return Objective(objective.name, objective.kind, examples,
                     {**objective.stats, "examples": len(examples), "dev_examples": n},
                     dev=[objective.examples[i] for i in order[:n].tolist()])


@lru_cache(maxsize=4)
def repo_forbidden(data_dir: str | None = None) -> ForbiddenSet:
    """The evaluation material of ``data/``
    (:func:`~unifar.datasets.leakage.forbidden_from_repo_data`), built once per process."""
    return forbidden_from_repo_data(data_dir)


def drop_leaks(
    records: Sequence[tuple[Side, ...]], forbidden: ForbiddenSet | None = None, id_prefix: str = ""
) -> tuple[list[tuple[Side, ...]], int]:
    """The records none of whose sides is forbidden, and how many were dropped.

    A record is ``(anchor, positive[, negative])``; a side is a question (``str``) or a document
    mapping whose ``id`` (with ``id_prefix``, e.g. ``"s2:"``, the id space of the forbidden set),
    title and text are checked. ``forbidden`` defaults to :func:`repo_forbidden`.

    >>> fs = ForbiddenSet().add_text("What is held out?", "test question")
    >>> doc = {"id": "7", "title": "A kept paper", "sentences": ["Kept."]}
    >>> drop_leaks([("What is held out?", doc), ("A fine question", doc)], fs)
    ([('A fine question', {'id': '7', 'title': 'A kept paper', 'sentences': ['Kept.']})], 1)
    """
    forbidden = repo_forbidden() if forbidden is None else forbidden
    docs = {
        f"{id_prefix}{s['id']}": s
        for r in records
        for s in r
        if not isinstance(s, str) and s is not None
    }
    questions = {s for r in records for s in r if isinstance(s, str)}
    report = find_leaks(
        [{**d, "id": k} for k, d in docs.items()], forbidden, [(q, q) for q in questions]
    )
    bad = {h.training_id for h in report.hits}

    def leaks(side: Side | None) -> bool:
        if side is None:
            return False
        return side in bad if isinstance(side, str) else f"{id_prefix}{side['id']}" in bad

    kept = [r for r in records if not any(leaks(s) for s in r)]
    return kept, len(records) - len(kept)


def _objective(
    name: str,
    kind: str,
    records: Sequence[tuple[Side, ...]],
    sep: str,
    forbidden: ForbiddenSet | None,
    id_prefix: str = "",
    **stats: int,
) -> Objective:
    """Guard ``records``, render every side as text, count what was kept."""
    kept, dropped = drop_leaks(records, forbidden, id_prefix)

    def text(side: Side | None) -> str | None:
        return side if side is None or isinstance(side, str) else document_text(side, sep)

    examples = [Example(*(text(s) for s in r)) for r in kept]
    return Objective(
        name,
        kind,
        examples,
        {
            "examples": len(examples),
            "dropped_leaks": dropped,
            "with_hard_negative": sum(e.negative is not None for e in examples),
            **stats,
        },
    )


def _has_text(doc: Mapping[str, Any]) -> bool:
    return bool(document_text(doc, " ").strip())


def pubmedqa_objective(
    root: str | os.PathLike[str] | None = None,
    sep: str = "[SEP]",
    forbidden: ForbiddenSet | None = None,
) -> Objective:
    """PubMedQA PQA-L train half: ``(question, its abstract)``, no hard negative."""
    from ..datasets.pubmedqa import load_pubmedqa

    bench = load_pubmedqa(root, split="train")
    docs = {d["id"]: d for d in bench.documents}
    records = [
        (q["text"], docs[q["doc_id"]]) for q in bench.questions if _has_text(docs[q["doc_id"]])
    ]
    return _objective("pubmedqa", QUESTION_TO_DOCUMENT, records, sep,
                      forbidden, "pubmedqa:", questions=len(bench.questions))


def scirepeval_search_objective(
    root: str | os.PathLike[str] | None = None,
    sep: str = "[SEP]",
    forbidden: ForbiddenSet | None = None,
) -> Objective:
    """SciRepEval search train half: ``(question, clicked candidate, unclicked candidate)``; the
    k-th clicked candidate of a pool gets the k-th unclicked one (cycling; None if there is none).
    Candidates without title and abstract are left out."""
    from ..datasets.scirepeval import load_scirepeval_search, split_scirepeval_search

    bench = split_scirepeval_search(load_scirepeval_search(root), "train")
    docs = {d["id"]: d for d in bench.documents}
    records: list[tuple[Side, ...]] = []
    for q in bench.questions:
        grades = bench.qrels[q["qid"]]
        pool = [d for d in bench.candidates[q["qid"]] if _has_text(docs[d])]
        pos = [d for d in pool if grades.get(d, 0) >= bench.relevance_threshold]
        neg = [d for d in pool if grades.get(d, 0) == 0]
        records += [
            (q["text"], docs[d], docs[neg[k % len(neg)]] if neg else None)
            for k, d in enumerate(pos)
        ]
    return _objective("scirepeval-search", QUESTION_TO_DOCUMENT, records, sep,
                      forbidden, "s2:", questions=len(bench.questions))


def specter_objective(
    root: str | os.PathLike[str] | None = None,
    sep: str = "[SEP]",
    forbidden: ForbiddenSet | None = None,
) -> Objective:
    """SciRepEval (SPECTER) citation triplets: ``(query paper, cited paper, paper cited by a
    cited paper but not by the query)``; triplets with an empty side are left out."""
    from ..datasets.scirepeval import load_scirepeval_triplets

    corpus = load_scirepeval_triplets(root)
    docs = {d["id"]: d for d in corpus.documents}
    records = [tuple(docs[t[k]] for k in ("query_id", "pos_id", "neg_id")) for t in corpus.triplets]
    full = [r for r in records if all(_has_text(d) for d in r)]
    return _objective("specter", DOCUMENT_TO_DOCUMENT, full, sep, forbidden, "s2:",
                      triplets=len(records), dropped_empty=len(records) - len(full))


def ftu_docdoc_objective(
    folder: str | os.PathLike[str], sep: str = "[SEP]", forbidden: ForbiddenSet | None = None
) -> Objective:
    """Chapter 3's FTUs (``artifacts/ftus/<profile>``) as doc-doc pairs: the query document and
    each distinct facet positive (any facet), the k-th with the k-th distinct facet negative
    (cycling). FTU document ids are already in the forbidden set's id space."""
    from ..datasets.ftu_files import load_ftus

    data = load_ftus(folder)
    records: list[tuple[Side, ...]] = []
    for u in data.ftus:
        pos = list(dict.fromkeys(d for ids in u.positives.values() for d in ids))
        neg = [
            d for d in dict.fromkeys(d for ids in u.negatives.values() for d in ids) if d not in pos
        ]
        query = data.documents[u.query]
        records += [
            (query, data.documents[d], data.documents[neg[k % len(neg)]] if neg else None)
            for k, d in enumerate(pos)
            if d != u.query
        ]
    return _objective(
        "ftu-docdoc", DOCUMENT_TO_DOCUMENT, records, sep, forbidden, ftus=len(data.ftus)
    )
