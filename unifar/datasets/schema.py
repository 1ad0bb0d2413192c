"""One record schema for every corpus: documents, questions, qrels, citation intents.

A **document** is ``{"id", "title", "sentences", "labels", "source", "field"}``:

* ``id`` (str): unique within its corpus;
* ``title`` (str): ``""`` when the corpus has none;
* ``sentences`` (list[str]): the abstract, sentence by sentence (may be empty);
* ``labels`` (list[str | None] | None): the facet of each sentence, one of :data:`FACETS` or
  ``None`` (no facet), same length as ``sentences``; ``None`` when the corpus has no labels;
* ``source`` (str): the corpus name (``"csabstruct"``, ``"cranfield"``, ...);
* ``field`` (str | None): the scientific field (``"computer science"``, ``"biomedicine"``, ...).

A corpus may add extra columns (``split``, ``raw_labels``, ...). A **question** is
``{"qid", "text", "source"}`` plus extras; **qrels** are a plain ``{qid: {doc_id: grade}}``
dict, higher grade = more relevant. A **citation-intent** record is
``{"id", "text", "intent", "raw_label", "source", "split"}`` with ``intent`` a facet or ``None``.

Bundles (:class:`QDocBenchmark`, :class:`TripletCorpus`) carry several datasets and a
``stats`` dict of counts, including what a loader skipped (skips are also logged as warnings
on the ``unifar.datasets`` logger, naming the file).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import datasets
from datasets import Features, List, Value

from unifar.facets import FACETS
from ..files import display_path

__all__ = [
    "DOCUMENT_FEATURES",
    "QUESTION_FEATURES",
    "INTENT_FEATURES",
    "Qrels",
    "QDocBenchmark",
    "TripletCorpus",
    "make_document",
    "make_question",
    "make_intent",
    "to_dataset",
    "questions_to_dataset",
    "intents_to_dataset",
    "validate_qrels",
    "warn_skipped",
]

logger = logging.getLogger("unifar.datasets")

DOCUMENT_FEATURES = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "sentences": List(Value("string")),
        "labels": List(Value("string")),
        "source": Value("string"),
        "field": Value("string"),
    }
)
QUESTION_FEATURES = Features({"qid": Value("string"), "text": Value("string"), "source": Value("string")})
INTENT_FEATURES = Features(
    {
        "id": Value("string"),
        "text": Value("string"),
        "intent": Value("string"),
        "raw_label": Value("string"),
        "source": Value("string"),
        "split": Value("string"),
    }
)

Qrels = dict[str, dict[str, float]]


def _check_str(value: Any, name: str, where: str, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise ValueError(f"{where}: field {name!r} must not be empty")
    return value


def _check_facet(value: Any, where: str) -> str | None:
    if value is not None and value not in FACETS:
        raise ValueError(f"{where}: unknown facet {value!r}; expected one of {FACETS} or None")
    return value


def make_document(
    id: str,
    title: str,
    sentences: Sequence[str],
    labels: Sequence[str | None] | None = None,
    *,
    source: str,
    field: str | None = None,
    where: str = "document",
    **extra: Any,
) -> dict[str, Any]:
    """Build and validate one document record; ``where`` prefixes error messages (e.g. ``file:line``).

    >>> make_document("1", "T", ["A.", "B."], ["method", None], source="demo")["labels"]
    ['method', None]
    >>> make_document("1", "T", ["A."], ["method", None], source="demo")
    Traceback (most recent call last):
    ...
    ValueError: document: 1 sentences but 2 labels
    """
    _check_str(id, "id", where, allow_empty=False)
    _check_str(title, "title", where)
    _check_str(source, "source", where, allow_empty=False)
    if field is not None:
        _check_str(field, "field", where)
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(f"{where}: field 'sentences' must be a list of strings")
    sentences = [_check_str(s, f"sentences[{i}]", where) for i, s in enumerate(sentences)]
    if labels is not None:
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise TypeError(f"{where}: field 'labels' must be a list (one facet or None per sentence) or None")
        if len(labels) != len(sentences):
            raise ValueError(f"{where}: {len(sentences)} sentences but {len(labels)} labels")
        labels = [_check_facet(x, f"{where}: labels[{i}]") for i, x in enumerate(labels)]
    return {"id": id, "title": title, "sentences": sentences, "labels": labels, "source": source, "field": field, **extra}


def make_question(qid: str, text: str, *, source: str, where: str = "question", **extra: Any) -> dict[str, Any]:
    """Build and validate one question record (``qid``, ``text``, ``source`` plus extras)."""
    _check_str(qid, "qid", where, allow_empty=False)
    _check_str(text, "text", where)
    _check_str(source, "source", where, allow_empty=False)
    return {"qid": qid, "text": text, "source": source, **extra}


def make_intent(
    id: str,
    text: str,
    intent: str | None,
    raw_label: str,
    *,
    source: str,
    split: str | None,
    where: str = "record",
    **extra: Any,
) -> dict[str, Any]:
    """Build and validate one citation-intent record; ``intent`` is a facet or ``None``."""
    _check_str(id, "id", where, allow_empty=False)
    _check_str(text, "text", where)
    _check_str(raw_label, "raw_label", where)
    _check_facet(intent, where)
    return {"id": id, "text": text, "intent": intent, "raw_label": raw_label, "source": source, "split": split, **extra}


def _build(
    records: list[dict[str, Any]],
    core: Features,
    extra_features: Mapping[str, Any] | None,
    key: str,
    what: str,
) -> datasets.Dataset:
    """A Dataset with the ``core`` columns first, then extras (typed by ``extra_features`` or inferred)."""
    seen: set[str] = set()
    for i, rec in enumerate(records):
        missing = [c for c in core if c not in rec]
        if missing:
            raise ValueError(f"{what} {i}: missing columns {missing}")
        if rec[key] in seen:
            raise ValueError(f"{what} {i}: duplicate {key} {rec[key]!r}")
        seen.add(rec[key])
    extra_cols = list(dict.fromkeys(k for rec in records for k in rec if k not in core))
    extra_features = dict(extra_features or {})
    unknown = [c for c in extra_cols if c not in extra_features]
    if unknown:  # infer the types of undeclared extras from the data
        probe = datasets.Dataset.from_list([{c: rec.get(c) for c in unknown} for rec in records])
        extra_features.update({c: probe.features[c] for c in unknown})
    feats = Features({**core, **{c: extra_features[c] for c in extra_cols}})
    if not records:
        return datasets.Dataset.from_dict({c: [] for c in feats}, features=feats)
    rows = [{c: rec.get(c) for c in feats} for rec in records]
    return datasets.Dataset.from_list(rows, features=feats)


def to_dataset(records: Iterable[Mapping[str, Any]], extra_features: Mapping[str, Any] | None = None) -> datasets.Dataset:
    """Validate document records and turn them into a ``datasets.Dataset`` with :data:`DOCUMENT_FEATURES`.

    Extra columns keep their values; their types come from ``extra_features`` or are inferred.
    Ids must be unique.
    """
    checked = []
    for i, rec in enumerate(records):
        rec = dict(rec)
        core = {k: rec.pop(k) for k in ("id", "title", "sentences", "labels", "source", "field") if k in rec}
        if "id" not in core or "sentences" not in core or "source" not in core:
            raise ValueError(f"document {i}: needs at least 'id', 'sentences' and 'source'")
        checked.append(
            make_document(
                core["id"], core.get("title", ""), core["sentences"], core.get("labels"),
                source=core["source"], field=core.get("field"), where=f"document {i} (id {core['id']!r})", **rec,
            )
        )
    return _build(checked, DOCUMENT_FEATURES, extra_features, "id", "document")


def questions_to_dataset(records: Iterable[Mapping[str, Any]], extra_features: Mapping[str, Any] | None = None) -> datasets.Dataset:
    """Validate question records and turn them into a ``datasets.Dataset`` (unique ``qid``)."""
    checked = []
    for i, rec in enumerate(records):
        rec = dict(rec)
        try:
            qid, text, source = rec.pop("qid"), rec.pop("text"), rec.pop("source")
        except KeyError as err:
            raise ValueError(f"question {i}: missing column {err.args[0]!r}") from None
        checked.append(make_question(qid, text, source=source, where=f"question {i}", **rec))
    return _build(checked, QUESTION_FEATURES, extra_features, "qid", "question")


def intents_to_dataset(records: Iterable[Mapping[str, Any]], extra_features: Mapping[str, Any] | None = None) -> datasets.Dataset:
    """Turn citation-intent records (from :func:`make_intent`) into a ``datasets.Dataset`` (unique ``id``)."""
    return _build([dict(r) for r in records], INTENT_FEATURES, extra_features, "id", "record")


def validate_qrels(qrels: Mapping[str, Mapping[str, float]], questions: datasets.Dataset | None = None,
                   documents: datasets.Dataset | None = None, name: str = "qrels") -> None:
    """Check that qrels are ``{str: {str: number}}`` and refer to known questions and documents."""
    qids = set(questions["qid"]) if questions is not None else None
    dids = set(documents["id"]) if documents is not None else None
    for qid, judged in qrels.items():
        if not isinstance(qid, str) or not isinstance(judged, Mapping):
            raise TypeError(f"{name}: expected {{qid: {{doc_id: grade}}}} with string ids, got key {qid!r}")
        if qids is not None and qid not in qids:
            raise ValueError(f"{name}: question {qid!r} is not among the questions")
        for did, grade in judged.items():
            if not isinstance(did, str) or isinstance(grade, bool) or not isinstance(grade, (int, float)):
                raise TypeError(f"{name}: question {qid!r}: bad entry {did!r}: {grade!r}")
            if dids is not None and did not in dids:
                raise ValueError(f"{name}: question {qid!r} judges unknown document {did!r}")


def warn_skipped(path: Any, count: int, what: str, stats: dict[str, int], key: str) -> None:
    """Record ``count`` skipped items under ``stats[key]`` and log one warning naming the file."""
    stats[key] = stats.get(key, 0) + count
    if count:
        logger.warning("%s: skipped %d %s", display_path(path) if isinstance(path, (str, os.PathLike)) else path, count, what)


@dataclass
class QDocBenchmark:
    """A question -> document benchmark in the common schema.

    ``candidates[qid]`` (when set) is the pool to rerank for that question (DORIS-MAE, the
    SciRepEval search sample); otherwise questions are run against all ``documents``.
    ``qrels`` grades are "higher is more relevant"; ``relevance_threshold`` is the smallest
    grade that counts as relevant for binary metrics.
    """

    name: str
    documents: datasets.Dataset
    questions: datasets.Dataset
    qrels: Qrels
    candidates: dict[str, list[str]] | None = None
    relevance_threshold: float = 1.0
    stats: dict[str, int] = field(default_factory=dict)

    def relevant(self, qid: str) -> set[str]:
        """Documents judged relevant (grade >= ``relevance_threshold``) for ``qid``."""
        return {d for d, g in self.qrels.get(qid, {}).items() if g >= self.relevance_threshold}


@dataclass
class TripletCorpus:
    """Citation triplets ``{query_id, pos_id, neg_id}`` over a document set in the common schema."""

    name: str
    documents: datasets.Dataset
    triplets: datasets.Dataset
    stats: dict[str, int] = field(default_factory=dict)
