"""The FTU record (Facet-Aware Training Units, paper section 4.1): what chapter 3 writes and
training, the ablations and chapters 6-8 read. How FTUs are *made* (merging facet triplets,
filling in questions) is :mod:`unifar.construction.ftu`; the on-disk folder is
:mod:`unifar.datasets.ftu_files`, the counts of an FTU set :mod:`unifar.datasets.ftu_statistics`.

An FTU is ``{d_q, D_pos^(f), D_neg^(f), q^(f) | f in {bg, mt, rs}}``. In memory and on disk it
refers to documents by id::

    {"query": "<doc id>",
     "positives": {"background": [ids], "method": [...], "result": [...]},
     "negatives": {facet: [ids]},
     "questions": {facet: {"text", "facet", "origin", "doc_id", "meta"}},
     "teacher": {"candidates", "scores", "origin", "meta"}}   # optional, beyond the paper

* :class:`FTU`, with one :class:`Question` per facet and an optional :class:`TeacherList`;
* :func:`validate_document`: one document of the common schema, checked.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping

from ..facets import FACETS
from .schema import make_document

__all__ = ["validate_document", "Question", "TeacherList", "FTU"]


# ----- documents --------------------------------------------------------------------------------
_DOC_KEYS = ("id", "title", "sentences", "labels", "source", "field")


def validate_document(rec: Any, where: str = "document") -> dict[str, Any]:
    """Check one document against the common schema (:func:`unifar.datasets.schema.make_document`:
    ``{"id", "title", "sentences", "labels", "source", "field"}`` plus extras) and return it.
    Every problem is a ``ValueError`` whose message starts with ``where``."""
    if not isinstance(rec, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    missing = [k for k in ("id", "title", "sentences", "source") if k not in rec]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    extra = {k: v for k, v in rec.items() if k not in _DOC_KEYS}
    try:
        return make_document(
            rec["id"], rec["title"], rec["sentences"], rec.get("labels"),
            source=rec["source"], field=rec.get("field"), where=where, **extra,
        )
    except TypeError as err:
        raise ValueError(str(err)) from None


# ----- questions ---------------------------------------------------------------------------------
@dataclass
class Question:
    """One facet question. ``origin``: ``"llm:<model>"``, ``"icrop"``, ``"pubmedqa"``,
    ``"scirepeval-search"``, ...; ``doc_id``: the query document it belongs to."""

    text: str
    facet: str
    origin: str
    doc_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a question needs a non-empty text")
        if self.facet not in FACETS:
            raise ValueError(f"unknown facet {self.facet!r}; expected one of {FACETS}")
        if not isinstance(self.origin, str) or not self.origin:
            raise ValueError("a question needs an origin, e.g. 'llm:<model>' or 'icrop'")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Question":
        unknown = sorted(set(d) - {"text", "facet", "origin", "doc_id", "meta"})
        if unknown:
            raise ValueError(f"unknown question field(s): {unknown}")
        return cls(**{k: (dict(v) if k == "meta" else v) for k, v in d.items()})

    @property
    def n_words(self) -> int:
        return len(self.text.split())


# ----- FTUs -------------------------------------------------------------------------------------
@dataclass
class TeacherList:
    """A teacher's graded scores of the query document against a candidate list, per facet
    (beyond the paper: what :func:`unifar.losses.listwise_distillation_loss` distils).

    ``scores[f][i]`` is the teacher's score of ``candidates[i]`` for facet ``f`` (the hybrid
    teacher of chapter 3: ``z(cos) + w z(BM25_f)``, z over its whole rerank list); a facet the
    query document has no text for is absent. ``meta`` records how the list was made.

    >>> t = TeacherList(["a", "b"], {"method": [1.5, -0.2]}, "hybrid", {"weight": 0.25})
    >>> TeacherList.from_dict(t.to_dict()) == t
    True
    """

    candidates: list[str]
    scores: dict[str, list[float]]
    origin: str = "hybrid"
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": list(self.candidates),
                "scores": {f: [round(float(x), 6) for x in self.scores[f]] for f in FACETS if f in self.scores},
                "origin": self.origin, "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, d: Any) -> "TeacherList":
        if not isinstance(d, Mapping):
            raise ValueError("FTU field 'teacher' must be an object {candidates, scores, origin, meta}")
        unknown = sorted(set(d) - {"candidates", "scores", "origin", "meta"})
        if unknown:
            raise ValueError(f"unknown FTU teacher field(s): {unknown}")
        cands = d.get("candidates")
        if not isinstance(cands, list) or not all(isinstance(c, str) and c for c in cands):
            raise ValueError("FTU teacher 'candidates' must be a list of document id strings")
        if len(set(cands)) != len(cands):
            raise ValueError("FTU teacher 'candidates' lists a document twice")
        scores = d.get("scores")
        if not isinstance(scores, Mapping):
            raise ValueError("FTU teacher 'scores' must be an object {facet: [numbers]}")
        out: dict[str, list[float]] = {}
        for f, v in scores.items():
            if f not in FACETS:
                raise ValueError(f"FTU teacher 'scores': unknown facet {f!r}")
            ok = isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
            if not ok or len(v) != len(cands):
                raise ValueError(f"FTU teacher scores[{f}] must be {len(cands)} numbers, one per candidate")
            if not all(math.isfinite(x) for x in v):
                raise ValueError(f"FTU teacher scores[{f}] holds a non-finite number")
            out[f] = [float(x) for x in v]
        meta = d.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise ValueError("FTU teacher 'meta' must be an object")
        return cls(list(cands), out, str(d.get("origin") or "hybrid"), dict(meta))


@dataclass
class FTU:
    """A Facet-Aware Training Unit, documents by id, with an optional teacher list (chapter 3's
    graded scores over candidates, for distillation; not part of the paper's FTU)."""

    query: str
    positives: dict[str, list[str]] = field(default_factory=dict)
    negatives: dict[str, list[str]] = field(default_factory=dict)
    questions: dict[str, Question] = field(default_factory=dict)
    teacher: TeacherList | None = None

    @property
    def facets(self) -> list[str]:
        """Facets with at least one positive, in the canonical order."""
        return [f for f in FACETS if self.positives.get(f)]

    def doc_ids(self) -> Iterator[str]:
        """The query, then every positive and negative (facet order; repeats possible)."""
        yield self.query
        for f in FACETS:
            yield from self.positives.get(f, [])
            yield from self.negatives.get(f, [])

    def teacher_ids(self) -> list[str]:
        """The teacher list's candidates (none without a teacher list)."""
        return list(self.teacher.candidates) if self.teacher is not None else []

    def all_doc_ids(self) -> Iterator[str]:
        """:meth:`doc_ids`, then the teacher's candidates: every document the FTU needs."""
        yield from self.doc_ids()
        yield from self.teacher_ids()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "query": self.query,
            "positives": {f: list(self.positives[f]) for f in FACETS if f in self.positives},
            "negatives": {f: list(self.negatives[f]) for f in FACETS if f in self.negatives},
            "questions": {f: self.questions[f].to_dict() for f in FACETS if f in self.questions},
        }
        if self.teacher is not None:
            out["teacher"] = self.teacher.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FTU":
        unknown = sorted(set(d) - {"query", "positives", "negatives", "questions", "teacher"})
        if unknown:
            raise ValueError(f"unknown FTU field(s): {unknown}")
        if not isinstance(d.get("query"), str) or not d["query"]:
            raise ValueError("FTU field 'query' must be a document id string")

        def facet_lists(name: str) -> dict[str, list[str]]:
            v = d.get(name) or {}
            if not isinstance(v, Mapping):
                raise ValueError(f"FTU field {name!r} must be an object {{facet: [doc ids]}}")
            out = {}
            for f, ids in v.items():
                if f not in FACETS:
                    raise ValueError(f"FTU field {name!r}: unknown facet {f!r}")
                if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                    raise ValueError(f"FTU field {name}[{f}] must be a list of document id strings")
                out[f] = list(ids)
            return out

        qs = d.get("questions") or {}
        questions = {}
        for f, q in qs.items():
            question = Question.from_dict(q)
            if question.facet != f:
                raise ValueError(f"FTU question under {f!r} has facet {question.facet!r}")
            questions[f] = question
        teacher = TeacherList.from_dict(d["teacher"]) if d.get("teacher") is not None else None
        if teacher is not None and d["query"] in teacher.candidates:
            raise ValueError("FTU teacher 'candidates' holds the query document itself")
        return cls(d["query"], facet_lists("positives"), facet_lists("negatives"), questions, teacher)
