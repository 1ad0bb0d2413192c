"""The SciRepEval samples (Singh et al., 2023) kept in ``data/scirepeval_samples``: citation
triplets (:class:`~unifar.datasets.schema.TripletCorpus`) and a search benchmark
(:class:`~unifar.datasets.schema.QDocBenchmark`) with its fixed train / test halves. No
sentence labels (``labels`` is ``None``).

Malformed input raises ``ValueError`` naming ``file:line``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
from datasets import Value

from unifar.datasets.readers import find_file, iter_jsonl, read_json, require, resolve_dir
from unifar.datasets.schema import (
    QDocBenchmark,
    TripletCorpus,
    make_document,
    make_question,
    questions_to_dataset,
    to_dataset,
)
from unifar.text import split_sentences

__all__ = ["SCIREPEVAL_SEARCH_PARTS", "load_scirepeval_triplets", "load_scirepeval_search", "split_scirepeval_search"]


def _paper_document(paper: Any, where: str, source: str, **extra: Any) -> dict[str, Any]:
    """A document from a SciRepEval paper ``{corpus_id, title, abstract, ...}`` (abstract may be null)."""
    if not isinstance(paper, dict):
        raise ValueError(f"{where}: expected a paper object, got {type(paper).__name__}")
    cid = require(paper, "corpus_id", (int, str), where)
    title = paper.get("title") or ""
    abstract = paper.get("abstract") or ""
    if not isinstance(title, str) or not isinstance(abstract, str):
        raise ValueError(f"{where}: 'title' and 'abstract' must be strings or null")
    return make_document(str(cid), " ".join(title.split()), split_sentences(abstract), None,
                         source=source, field=None, where=where, **extra)


def _add_unique(docs: dict[str, dict[str, Any]], doc: dict[str, Any], stats: dict[str, int]) -> None:
    """Keep the first copy of each paper; count later copies whose text differs."""
    old = docs.get(doc["id"])
    if old is None:
        docs[doc["id"]] = doc
    elif (old["title"], old["sentences"]) != (doc["title"], doc["sentences"]):
        stats["conflicting_copies"] = stats.get("conflicting_copies", 0) + 1


def load_scirepeval_triplets(path: str | Path | None = None) -> TripletCorpus:
    """SciRepEval / SPECTER citation triplets ``{query, pos, neg}`` (each a paper with title + abstract).

    ``path``: ``specter_small.json`` (a JSON array), a JSON-lines file of the same records,
    or a folder holding ``specter_small.json`` (default ``data/scirepeval_samples``).
    Returns the triplets (``query_id``, ``pos_id``, ``neg_id`` = corpus ids) and the distinct
    papers as documents (a paper seen twice keeps its first text; differing copies are counted
    in ``stats["conflicting_copies"]``).
    """
    p = Path(path) if path is not None else None
    file = p if p is not None and p.is_file() else find_file(resolve_dir(p, "scirepeval_samples"), "specter_small.json")
    if file.suffix == ".jsonl":
        items = list(iter_jsonl(file))
    else:
        data = read_json(file)
        if not isinstance(data, list):
            raise ValueError(f"{file}: expected a JSON array of triplets")
        items = list(enumerate(data, start=1))
    docs: dict[str, dict[str, Any]] = {}
    triplets = []
    stats: dict[str, int] = {"triplets": 0, "conflicting_copies": 0}
    unit = "line" if file.suffix == ".jsonl" else "item"
    for n, rec in items:
        where = f"{file}:{n}" if unit == "line" else f"{file}: item {n}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object with query/pos/neg")
        ids = {}
        for side in ("query", "pos", "neg"):
            doc = _paper_document(require(rec, side, dict, where), f"{where}: {side}", "scirepeval_specter")
            _add_unique(docs, doc, stats)
            ids[side] = doc["id"]
        triplets.append({"query_id": ids["query"], "pos_id": ids["pos"], "neg_id": ids["neg"]})
    stats["triplets"] = len(triplets)
    stats["documents"] = len(docs)
    stats["empty_abstracts"] = sum(1 for d in docs.values() if not d["sentences"])
    feats = datasets.Features({k: Value("string") for k in ("query_id", "pos_id", "neg_id")})
    return TripletCorpus(
        name="scirepeval_specter",
        documents=to_dataset(list(docs.values())),
        triplets=datasets.Dataset.from_list(triplets, features=feats),
        stats=stats,
    )


def load_scirepeval_search(path: str | Path | None = None) -> QDocBenchmark:
    """SciRepEval search sample: Semantic Scholar queries, 10 candidates each, click relevance 0/1/2.

    ``path``: ``search_small.jsonl`` or a folder holding it (default
    ``data/scirepeval_samples``); the full release's JSON-lines files read the same way.
    Question ids are ``"<file stem>:<line>"`` unless a record has ``doc_id``/``query_id``.
    ``candidates[qid]`` is the pool to rerank; every candidate is judged (0 = not clicked).
    Extra document columns: ``venue``, ``year``.
    """
    p = Path(path) if path is not None else None
    file = p if p is not None and p.is_file() else find_file(resolve_dir(p, "scirepeval_samples"), "search_small.jsonl")
    docs: dict[str, dict[str, Any]] = {}
    questions, candidates, qrels = [], {}, {}
    stats: dict[str, int] = {"conflicting_copies": 0}
    for lineno, rec in iter_jsonl(file):
        where = f"{file}:{lineno}"
        qid = str(rec.get("query_id") or rec.get("doc_id") or f"{file.stem}:{lineno}")
        text = require(rec, "query", str, where)
        cands = require(rec, "candidates", list, where)
        pool, judged = [], {}
        for k, cand in enumerate(cands):
            cw = f"{where}: candidate {k}"
            year = cand.get("year") if isinstance(cand, dict) else None
            try:
                year = int(float(year)) if year not in (None, "") else None
            except (TypeError, ValueError):
                year = None
            doc = _paper_document(cand, cw, "scirepeval_search", venue=cand.get("venue") or None, year=year)
            _add_unique(docs, doc, stats)
            score = require(cand, "score", (int, float), cw)
            pool.append(doc["id"])
            judged[doc["id"]] = score
        questions.append(make_question(qid, " ".join(text.split()), source="scirepeval_search", where=where))
        candidates[qid] = pool
        qrels[qid] = judged
    stats.update(questions=len(questions), documents=len(docs), candidates=sum(map(len, candidates.values())))
    return QDocBenchmark(
        name="scirepeval_search",
        documents=to_dataset(list(docs.values()), {"venue": Value("string"), "year": Value("int32")}),
        questions=questions_to_dataset(questions),
        qrels=qrels,
        candidates=candidates,
        relevance_threshold=1,
        stats=stats,
    )


#: The two halves of :func:`split_scirepeval_search`.
SCIREPEVAL_SEARCH_PARTS = ("train", "test")


def split_scirepeval_search(bench: QDocBenchmark, part: str) -> QDocBenchmark:
    """One deterministic half of the SciRepEval search questions: ``"train"`` or ``"test"``.

    A question goes to ``"test"`` when the first byte of ``sha256(qid)`` is odd, else to
    ``"train"``: a stable hash of the question id alone, so the assignment does not depend on
    the order of the file, on the other questions, on the Python hash seed or on the machine,
    and a question keeps its half when the file grows. The halves are disjoint and together
    cover every question (about half each; exactly 50 / 50 on the 100-query sample).

    Use: the ``"train"`` half may feed training questions (its questions, candidates and
    clicks); the ``"test"`` half is what we report, and nothing of it may enter training. The
    returned benchmark keeps only that half's questions, qrels and candidate pools, and only the
    documents in those pools; ``stats`` is recomputed and names the part.

    >>> import hashlib
    >>> ["test" if hashlib.sha256(f"search_small:{i}".encode()).digest()[0] % 2 else "train" for i in (1, 4, 5, 6)]
    ['train', 'test', 'test', 'train']
    """
    import hashlib

    if part not in SCIREPEVAL_SEARCH_PARTS:
        raise ValueError(f"part must be one of {SCIREPEVAL_SEARCH_PARTS}, got {part!r}")
    want = 1 if part == "test" else 0
    rows = [i for i, q in enumerate(bench.questions["qid"]) if hashlib.sha256(q.encode("utf-8")).digest()[0] % 2 == want]
    questions = bench.questions.select(rows)
    qids = list(questions["qid"])
    candidates = {q: list(bench.candidates[q]) for q in qids} if bench.candidates is not None else None
    if candidates is not None:
        keep = {d for pool in candidates.values() for d in pool}
        doc_rows = [i for i, d in enumerate(bench.documents["id"]) if d in keep]
        documents = bench.documents.select(doc_rows)
    else:
        documents = bench.documents
    stats = {
        "part": part,
        "questions": len(qids),
        "documents": len(documents),
        "candidates": sum(map(len, candidates.values())) if candidates is not None else 0,
        "questions_before_split": len(bench.questions),
    }
    return QDocBenchmark(
        name=f"{bench.name}_{part}",
        documents=documents,
        questions=questions,
        qrels={q: dict(bench.qrels.get(q, {})) for q in qids},
        candidates=candidates,
        relevance_threshold=bench.relevance_threshold,
        stats=stats,
    )


__all__ += ["SCIREPEVAL_SEARCH_PARTS", "split_scirepeval_search"]
