"""Facet-Aware Training Units (section 4.1): merging facet triplets, the on-disk format, statistics.

An FTU is ``{d_q, D_pos^(f), D_neg^(f), q^(f) | f in {bg, mt, rs}}``. In memory and on disk it
refers to documents by id::

    {"query": "<doc id>",
     "positives": {"background": [ids], "method": [...], "result": [...]},
     "negatives": {facet: [ids]},
     "questions": {facet: {"text", "facet", "origin", "doc_id", "meta"}}}

:func:`merge_triplets` builds FTUs the paper's way: every ``(d_q, d+^(f), d-^(f))`` triplet that
shares a query document joins one FTU; per facet, positives and negatives are deduplicated in
first-seen order. FLeW's triplets are ``(query, positive, negative)_x`` with x in {background,
method, result} (its paper, section 2.1; the released files' exact layout is not described),
so :func:`read_triplets` accepts the simple JSON-lines form
``{"query_id", "pos_id", "neg_id", "facet"}``, the same with ``query``/``positive``/``negative``
keys holding ids or documents, and SciRepEval/SPECTER triplets ``{"query", "pos", "neg"}``
whose sides are ``{"corpus_id", "title", "abstract"}`` (these have no facet: pass ``facet=``).
Our choices where the paper is silent: a document that is both a positive and a negative of the
same query and facet stays a positive only; a triplet whose positive or negative *is* the query
is dropped. Both are counted and logged.

A folder of FTUs holds ``documents.jsonl`` (one document per line: ``{"id", "title",
"sentences", "labels", "source", "field"}``), ``ftus.jsonl`` (one FTU per line) and
``manifest.json`` (``schema_version``, counts, provenance, the creating command, file hashes).
:func:`write_ftus` writes into a temporary sibling folder and renames it into place;
:func:`load_ftus` checks the schema version, every line, the counts and that every referenced
document exists, naming file and line in its errors.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..files import atomic_dir, sha256_file
from ..text import split_sentences
from ..datasets.csfcube import FACETS
from .questions import Question, QuestionGenerator
from ..datasets.schema import make_document

__all__ = [
    "SCHEMA_VERSION",
    "FACET_ALIASES",
    "normalise_facet",
    "Triplet",
    "FTU",
    "FTUDataset",
    "read_triplets",
    "merge_triplets",
    "fill_questions",
    "validate_document",
    "write_ftus",
    "load_ftus",
    "ftu_statistics",
    "field_table",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
FACET_ALIASES: dict[str, str] = {
    "bg": "background", "background": "background",
    "mt": "method", "method": "method", "methods": "method",
    "rs": "result", "result": "result", "results": "result",
}


def normalise_facet(facet: Any) -> str:
    """``"bg"``/``"Method"``/``"results"`` -> ``"background"``/``"method"``/``"result"``.

    >>> normalise_facet("RS"), normalise_facet("method")
    ('result', 'method')
    """
    key = str(facet).strip().lower()
    if key not in FACET_ALIASES:
        raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS} (or bg, mt, rs)")
    return FACET_ALIASES[key]


# ----- triplets ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Triplet:
    """One facet triplet ``(d_q, d+^(f), d-^(f))`` by document id."""

    query_id: str
    pos_id: str
    neg_id: str
    facet: str


def _doc_from_side(side: Mapping[str, Any], where: str, source: str, id_prefix: str) -> dict[str, Any]:
    raw_id = next((side[k] for k in ("id", "corpus_id", "paper_id", "doc_id") if side.get(k) is not None), None)
    if raw_id is None:
        raise ValueError(f"{where}: document has no id (expected 'id' or 'corpus_id')")
    if isinstance(side.get("sentences"), list):
        sentences = [str(s) for s in side["sentences"]]
    else:
        sentences = split_sentences(side.get("abstract") or "")
    return validate_document({
        "id": f"{id_prefix}{raw_id}",
        "title": " ".join(str(side.get("title") or "").split()),
        "sentences": sentences,
        "labels": side.get("labels"),
        "source": side.get("source") or source,
        "field": side.get("field"),
    }, where)


def read_triplets(
    path_or_records: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    facet: str | None = None,
    source: str = "triplets",
    id_prefix: str = "",
) -> tuple[list[Triplet], dict[str, dict[str, Any]]]:
    """Read triplets (a ``.jsonl`` file, a ``.json`` array, or records) and the documents they embed.

    ``facet`` is used when a record has none (SciRepEval/SPECTER triplets); a record's own
    ``facet``/``intent`` wins. Embedded documents become documents of the FTU schema
    (abstracts are split into sentences; ``labels`` stay ``None`` until a labeller runs).
    Returns ``(triplets, {doc id: document})``.
    """
    if isinstance(path_or_records, (str, os.PathLike)):
        path = Path(path_or_records)
        if not path.is_file():
            raise FileNotFoundError(f"triplet file not found: {path}")
        text = path.read_text(encoding="utf-8")
        name = path.name
        if text.lstrip().startswith("["):
            try:
                records: list[tuple[str, Any]] = [(f"{name}[{i}]", r) for i, r in enumerate(json.loads(text))]
            except json.JSONDecodeError as err:
                raise ValueError(f"{name}:{err.lineno}: malformed JSON ({err.msg})") from None
        else:
            records = []
            for lineno, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        records.append((f"{name}:{lineno}", json.loads(line)))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{name}:{lineno}: malformed JSON ({err.msg})") from None
    else:
        records = [(f"record {i}", r) for i, r in enumerate(path_or_records)]

    triplets: list[Triplet] = []
    docs: dict[str, dict[str, Any]] = {}
    for where, rec in records:
        if not isinstance(rec, Mapping):
            raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        ids = []
        for keys in (("query_id", "query", "anchor"), ("pos_id", "positive", "pos"), ("neg_id", "negative", "neg")):
            value = next((rec[k] for k in keys if rec.get(k) is not None), None)
            if value is None:
                raise ValueError(f"{where}: missing one of {keys}")
            if isinstance(value, Mapping):
                doc = _doc_from_side(value, where, source, id_prefix)
                docs.setdefault(doc["id"], doc)
                ids.append(doc["id"])
            else:
                ids.append(f"{id_prefix}{value}")
        f = rec.get("facet", rec.get("intent", facet))
        if f is None:
            raise ValueError(f"{where}: triplet has no facet; pass facet= for facet-less triplets")
        try:
            triplets.append(Triplet(ids[0], ids[1], ids[2], normalise_facet(f)))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return triplets, docs


# ----- FTUs -------------------------------------------------------------------------------------
@dataclass
class FTU:
    """A Facet-Aware Training Unit, documents by id."""

    query: str
    positives: dict[str, list[str]] = field(default_factory=dict)
    negatives: dict[str, list[str]] = field(default_factory=dict)
    questions: dict[str, Question] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "positives": {f: list(self.positives[f]) for f in FACETS if f in self.positives},
            "negatives": {f: list(self.negatives[f]) for f in FACETS if f in self.negatives},
            "questions": {f: self.questions[f].to_dict() for f in FACETS if f in self.questions},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FTU":
        unknown = sorted(set(d) - {"query", "positives", "negatives", "questions"})
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
        return cls(d["query"], facet_lists("positives"), facet_lists("negatives"), questions)


def merge_triplets(triplets: Iterable[Triplet | Mapping[str, Any]], facet: str | None = None) -> list[FTU]:
    """Merge triplets sharing a query document into FTUs (first-seen order everywhere).

    Triplets are :class:`Triplet` objects or mappings ``{"query_id", "pos_id", "neg_id",
    "facet"}``; ``facet`` is used for mappings without one (e.g. the rows of
    :func:`unifar.datasets.corpora.load_scirepeval_triplets`).

    >>> ftus = merge_triplets([Triplet("q", "a", "x", "method"), Triplet("q", "b", "x", "method"),
    ...                        Triplet("q", "a", "y", "result"), Triplet("r", "c", "z", "background")])
    >>> [(u.query, u.positives, u.negatives) for u in ftus][0]
    ('q', {'method': ['a', 'b'], 'result': ['a']}, {'method': ['x'], 'result': ['y']})
    >>> len(ftus)
    2
    """
    groups: dict[str, dict[str, tuple[dict[str, None], dict[str, None]]]] = {}
    n_self = 0
    for i, t in enumerate(triplets):
        if not isinstance(t, Triplet):
            if not isinstance(t, Mapping):
                raise TypeError(f"triplet {i}: expected a Triplet or a mapping, got {type(t).__name__}")
            f = t.get("facet") or facet
            if f is None:
                raise ValueError(f"triplet {i}: no facet; pass facet= for facet-less triplets")
            try:
                t = Triplet(str(t["query_id"]), str(t["pos_id"]), str(t["neg_id"]), normalise_facet(f))
            except KeyError as err:
                raise ValueError(f"triplet {i}: missing field {err}") from None
            except ValueError as err:
                raise ValueError(f"triplet {i}: {err}") from None
        t_facet = normalise_facet(t.facet)
        if t.query_id in (t.pos_id, t.neg_id):
            n_self += 1
            continue
        pos, neg = groups.setdefault(t.query_id, {}).setdefault(t_facet, ({}, {}))
        pos[t.pos_id] = None
        neg[t.neg_id] = None
    n_conflicts = 0
    ftus = []
    for q, per_facet in groups.items():
        ftu = FTU(q)
        for f in FACETS:
            if f not in per_facet:
                continue
            pos, neg = per_facet[f]
            clash = [d for d in neg if d in pos]
            n_conflicts += len(clash)
            ftu.positives[f] = list(pos)
            negs = [d for d in neg if d not in pos]
            if negs:
                ftu.negatives[f] = negs
        ftus.append(ftu)
    if n_self or n_conflicts:
        logger.warning(
            "merge_triplets: dropped %d triplets whose positive or negative is the query; removed %d "
            "negatives that are also positives of the same query and facet",
            n_self, n_conflicts,
        )
    return ftus


def fill_questions(
    ftus: Sequence[FTU],
    documents: Mapping[str, Mapping[str, Any]],
    generator: QuestionGenerator,
    facets: Sequence[str] | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
) -> Counter[str]:
    """Give every FTU a question per facet (default: the facets it has positives for) from
    ``generator``; existing questions stay unless ``overwrite``. Returns counts
    ``{"generated", "kept", "none"}``."""
    from tqdm.auto import tqdm

    counts: Counter[str] = Counter()
    show = progress if progress is not None else len(ftus) >= 20
    for ftu in tqdm(ftus, desc=f"questions ({generator.origin})", disable=not show):
        missing = [d for d in ftu.doc_ids() if d not in documents]
        if missing:
            raise KeyError(f"FTU with query {ftu.query!r} refers to unknown document(s) {missing[:5]}")
        query = documents[ftu.query]
        for f in facets or ftu.facets:
            if f in ftu.questions and not overwrite:
                counts["kept"] += 1
                continue
            positives = [documents[d] for d in ftu.positives.get(f, [])]
            q = generator.generate(query, f, positives)
            if q is None:
                counts["none"] += 1
            else:
                ftu.questions[f] = q
                counts["generated"] += 1
    return counts


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


# ----- on disk ----------------------------------------------------------------------------------
@dataclass
class FTUDataset:
    """FTUs with the documents they refer to and the folder's manifest."""

    ftus: list[FTU]
    documents: dict[str, dict[str, Any]]
    manifest: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ftus)

    def query_doc(self, ftu: FTU) -> dict[str, Any]:
        return self.documents[ftu.query]

    def statistics(self) -> dict[str, Any]:
        return ftu_statistics(self.ftus, self.documents)


def write_ftus(
    folder: str | os.PathLike[str],
    ftus: Sequence[FTU],
    documents: Mapping[str, Mapping[str, Any]],
    command: str | None = None,
    provenance: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    all_documents: bool = False,
    created_at: str | None = None,
) -> Path:
    """Write an FTU folder atomically and return its path.

    Only the documents the FTUs refer to are written (in first-reference order) unless
    ``all_documents``. ``command`` (how the folder was made, e.g. a CLI line or notebook name)
    and ``provenance`` (free-form, e.g. ``{"labels": "llm:<model>", "triplets": "..."}``) go
    into the manifest verbatim: keep machine paths out of them.
    """
    folder = Path(folder)
    if folder.exists() and not overwrite:
        raise FileExistsError(f"{folder} exists; pass overwrite=True to replace it")
    order: dict[str, None] = {}
    for k, ftu in enumerate(ftus):
        for d in ftu.doc_ids():
            if d not in documents:
                raise KeyError(f"FTU {k} (query {ftu.query!r}) refers to document {d!r}, which is not in documents")
            order[d] = None
    if all_documents:
        order.update(dict.fromkeys(documents))
    docs = [validate_document(documents[d], f"document {d!r}") for d in order]

    def write(tmp: Path) -> None:
        with open(tmp / "documents.jsonl", "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
        with open(tmp / "ftus.jsonl", "w", encoding="utf-8") as f:
            for ftu in ftus:
                f.write(json.dumps(ftu.to_dict(), ensure_ascii=False) + "\n")
        from .. import __version__

        stats = ftu_statistics(ftus, {d["id"]: d for d in docs})
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "format": "unifar-ftus",
            "created_by": f"unifar {__version__}",
            "created_at": created_at or datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
            "command": command,
            "provenance": dict(provenance or {}),
            "counts": {"ftus": len(ftus), "documents": len(docs)},
            "statistics": stats,
            "files": {
                name: {"sha256": sha256_file(tmp / name), "lines": n}
                for name, n in (("documents.jsonl", len(docs)), ("ftus.jsonl", len(ftus)))
            },
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    atomic_dir(folder, write)
    return folder


def _read_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"FTU folder file not found: {path}")
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            where = f"{path.name}:{lineno}"
            if not line.strip():
                continue
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: malformed JSON ({err.msg})") from None


def load_ftus(folder: str | os.PathLike[str], verify_hashes: bool = True) -> FTUDataset:
    """Read an FTU folder written by :func:`write_ftus`, checking it thoroughly."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"FTU folder not found: {folder}")
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise FileNotFoundError(f"{mpath} missing: not an FTU folder")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{mpath}:{err.lineno}: malformed JSON ({err.msg})") from None
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{mpath}: schema_version {version!r} is not supported; this version of unifar reads {SCHEMA_VERSION}"
        )
    documents: dict[str, dict[str, Any]] = {}
    dpath = folder / "documents.jsonl"
    for where, rec in _read_jsonl(dpath):
        doc = validate_document(rec, f"{folder / where}")
        if doc["id"] in documents:
            raise ValueError(f"{folder / where}: duplicate document id {doc['id']!r}")
        documents[doc["id"]] = doc
    ftus: list[FTU] = []
    fpath = folder / "ftus.jsonl"
    for where, rec in _read_jsonl(fpath):
        try:
            ftu = FTU.from_dict(rec) if isinstance(rec, Mapping) else None
        except (ValueError, TypeError) as err:
            raise ValueError(f"{folder / where}: {err}") from None
        if ftu is None:
            raise ValueError(f"{folder / where}: expected a JSON object")
        for part, lists in (("positives", ftu.positives), ("negatives", ftu.negatives)):
            for f, ids in lists.items():
                for d in ids:
                    if d not in documents:
                        raise ValueError(f"{folder / where}: {part}[{f}] refers to unknown document {d!r} (not in {dpath.name})")
        if ftu.query not in documents:
            raise ValueError(f"{folder / where}: query refers to unknown document {ftu.query!r} (not in {dpath.name})")
        ftus.append(ftu)
    files = manifest.get("files", {})
    for name, n in (("documents.jsonl", len(documents)), ("ftus.jsonl", len(ftus))):
        expected = files.get(name, {})
        if "lines" in expected and expected["lines"] != n:
            raise ValueError(f"{folder / name}: {n} records but manifest.json says {expected['lines']} (truncated or edited?)")
        if verify_hashes and "sha256" in expected and sha256_file(folder / name) != expected["sha256"]:
            raise ValueError(f"{folder / name}: SHA-256 differs from manifest.json (file changed after writing)")
    return FTUDataset(ftus=ftus, documents=documents, manifest=manifest)


# ----- statistics (appendix B) ------------------------------------------------------------------
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
