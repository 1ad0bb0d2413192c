"""The Cranfield collection (Cleverdon, 1967) as a question-document benchmark
(:class:`~unifar.datasets.schema.QDocBenchmark`): 1,400 aeronautics abstracts, 225 queries and
graded relevance judgements (:data:`CRANFIELD_GRADES`). No sentence labels.

Reads the repository's JSONL conversion or the original SMART files (:func:`load_cranfield`).
Malformed input raises ``ValueError`` naming ``file:line``.
"""

from __future__ import annotations

import re
from pathlib import Path

from datasets import Value

from unifar.datasets.readers import find_file, iter_jsonl, require, resolve_dir
from unifar.datasets.schema import (
    QDocBenchmark,
    make_document,
    make_question,
    questions_to_dataset,
    to_dataset,
    warn_skipped,
)

__all__ = ["CRANFIELD_GRADES", "load_cranfield"]

#: Cranfield judgement -> grade, higher = more relevant. Cleverdon's codes run the other way
#: (1 = complete answer ... 4 = minimal interest); checked here: TF-IDF ranks grade-1 documents
#: highest (median rank 13) and grade-4 lowest (66). The -1 code (one per query, undocumented)
#: is dropped by default.
CRANFIELD_GRADES: dict[int, int] = {1: 4, 2: 3, 3: 2, 4: 1}


_CRAN_SENTENCE_END = re.compile(r"(?<= \.)\s+")


def _cranfield_sentences(title: str, abstract: str) -> list[str]:
    """Split a Cranfield abstract (lower-cased, tokenised, sentences end with ``" ."``).

    The abstract repeats the title at its start; that copy is removed.
    """
    text = " ".join(abstract.split())
    t = " ".join(title.split())
    if t and text.startswith(t):
        text = text[len(t):].strip()
    return [s.strip() for s in _CRAN_SENTENCE_END.split(text) if s.strip()]


def _read_smart(file: Path, fields: dict[str, str]) -> list[tuple[int, str, dict[str, str]]]:
    """Parse a SMART-format file (``.I <id>`` then ``.T``/``.A``/``.B``/``.W`` sections)."""
    out: list[tuple[int, str, dict[str, str]]] = []
    key: str | None = None
    with open(file, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            if line.startswith(".I"):
                parts = line.split()
                if len(parts) != 2:
                    raise ValueError(f"{file}:{lineno}: expected '.I <id>'")
                out.append((lineno, parts[1], {v: "" for v in fields.values()}))
                key = None
            elif line[:2] in fields and line[:2].strip() == line.strip():
                if not out:
                    raise ValueError(f"{file}:{lineno}: field {line.strip()} before the first '.I'")
                key = fields[line[:2]]
            elif key is not None:
                out[-1][2][key] += line
            elif line.strip():
                raise ValueError(f"{file}:{lineno}: text outside a field")
    return [(n, i, {k: " ".join(v.split()) for k, v in rec.items()}) for n, i, rec in out]


def _cranfield_raw(root: Path) -> tuple[list[dict], list[dict], list[tuple[int, str, str, int]]]:
    """Docs, queries and qrels from the original ``cran.all.1400``, ``cran.qry``, ``cranqrel``."""
    docs = [
        {"doc_id": i, "title": r["title"], "authors": r["authors"], "bib": r["bib"], "abstract": r["abstract"], "_line": n}
        for n, i, r in _read_smart(root / "cran.all.1400", {".T": "title", ".A": "authors", ".B": "bib", ".W": "abstract"})
    ]
    queries = [
        {"qid": k, "orig_qid": i, "text": r["text"], "_line": n}
        for k, (n, i, r) in enumerate(_read_smart(root / "cran.qry", {".W": "text"}), start=1)
    ]
    qrels = []
    file = root / "cranqrel"
    with open(file, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError(f"{file}:{lineno}: expected 'qid doc_id grade'")
            qrels.append((lineno, parts[0], parts[1], int(parts[2])))
    return docs, queries, qrels


def load_cranfield(path: str | Path | None = None, keep_minus_one: int | None = None) -> QDocBenchmark:
    """Cranfield 1400 (aeronautics): 1,400 abstracts, 225 questions, graded judgements.

    Reads ``docs.jsonl``, ``queries.jsonl``, ``qrels.tsv`` from ``path`` (default
    ``data/cranfield``) or, when those are absent, the original SMART files ``cran.all.1400``,
    ``cran.qry``, ``cranqrel`` (query ids are then the ordinals 1..225 that ``cranqrel`` uses).
    Grades become "higher is more relevant" via :data:`CRANFIELD_GRADES` (4 = complete answer
    ... 1 = minimal interest). The undocumented ``-1`` entries (one per query; that document is
    lexically the closest to the question, TF-IDF median rank 3) are dropped and counted in
    ``stats["dropped_minus_one"]`` unless ``keep_minus_one`` gives them a grade. Text is
    lower-cased and tokenised as upstream; sentences are split at ``" ."``.
    """
    root = resolve_dir(path, "cranfield")
    if (root / "docs.jsonl").is_file():
        docs = [dict(r, _line=n) for n, r in iter_jsonl(root / "docs.jsonl")]
        queries = [dict(r, _line=n) for n, r in iter_jsonl(root / "queries.jsonl")]
        qrels_raw = []
        file = find_file(root, "qrels.tsv")
        with open(file, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                parts = line.split()
                if not parts or (lineno == 1 and parts[0] == "qid"):
                    continue
                if len(parts) != 3:
                    raise ValueError(f"{file}:{lineno}: expected 'qid<TAB>doc_id<TAB>grade'")
                try:
                    qrels_raw.append((lineno, parts[0], parts[1], int(parts[2])))
                except ValueError:
                    raise ValueError(f"{file}:{lineno}: grade {parts[2]!r} is not an integer") from None
        doc_file, q_file = root / "docs.jsonl", root / "queries.jsonl"
    else:
        find_file(root, "cran.all.1400")
        docs, queries, qrels_raw = _cranfield_raw(root)
        doc_file, q_file, file = root / "cran.all.1400", root / "cran.qry", root / "cranqrel"

    records = []
    for d in docs:
        where = f"{doc_file}:{d['_line']}"
        title = require(d, "title", str, where)
        abstract = require(d, "abstract", str, where)
        records.append(
            make_document(
                str(require(d, "doc_id", (int, str), where)), " ".join(title.split()), _cranfield_sentences(title, abstract),
                None, source="cranfield", field="aeronautics", where=where,
                authors=d.get("authors") or "", bib=d.get("bib") or "",
            )
        )
    questions = [
        make_question(
            str(require(q, "qid", (int, str), f"{q_file}:{q['_line']}")), " ".join(require(q, "text", str, f"{q_file}:{q['_line']}").split()),
            source="cranfield", where=f"{q_file}:{q['_line']}", orig_qid=str(q.get("orig_qid", q["qid"])),
        )
        for q in queries
    ]
    doc_ids = {r["id"] for r in records}
    qids = {q["qid"] for q in questions}
    qrels: dict[str, dict[str, float]] = {}
    stats = {"documents": len(records), "questions": len(questions), "judgements": 0}
    dropped = 0
    for lineno, qid, did, grade in qrels_raw:
        if qid not in qids or did not in doc_ids:
            raise ValueError(f"{file}:{lineno}: unknown question {qid!r} or document {did!r}")
        if grade == -1 and keep_minus_one is None:
            dropped += 1
            continue
        if grade != -1 and grade not in CRANFIELD_GRADES:
            raise ValueError(f"{file}:{lineno}: grade {grade} not in {{-1, 1, 2, 3, 4}}")
        qrels.setdefault(qid, {})[did] = keep_minus_one if grade == -1 else CRANFIELD_GRADES[grade]
        stats["judgements"] += 1
    warn_skipped(file, dropped, "judgements with grade -1", stats, "dropped_minus_one")
    return QDocBenchmark(
        name="cranfield",
        documents=to_dataset(records, {"authors": Value("string"), "bib": Value("string")}),
        questions=questions_to_dataset(questions, {"orig_qid": Value("string")}),
        qrels=qrels,
        relevance_threshold=1,
        stats=stats,
    )

