"""Loaders for the offline document corpora, returning ``datasets.Dataset`` in the common schema
(:mod:`unifar.datasets.schema`).

Each loader takes a path (default: the repository's ``data/<folder>``) and also reads the full
upstream files in the same format. Facet mappings, one line of reason each:

* CSFCube and CSAbstruct: background + objective -> background, method -> method,
  result -> result, other -> ``None`` (CSFCube's own definition of its facets).
* NICTA-PIBOSO: background -> background (it also holds the aims); population, intervention,
  study design -> method (who was studied, what was done, how); outcome -> result (its
  sentences report findings); other -> ``None`` (settings, measures, review procedures and
  case narratives are mixed in it, so no single facet fits).
* Cranfield, SciRepEval: no sentence labels (``labels`` is ``None``).

Malformed input raises ``ValueError`` naming ``file:line``. PubMedQA lives in
:mod:`unifar.datasets.pubmedqa`, citation intents in :mod:`unifar.datasets.citation_intents`, the
downloadable DORIS-MAE and LitSearch in :mod:`unifar.datasets.external`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import datasets
from datasets import List, Value

from unifar.datasets.csfcube import LABEL_TO_FACET, load_csfcube
from unifar.datasets.readers import SPLITS, find_file, iter_jsonl, read_json, require, resolve_dir
from unifar.datasets.readers import splits as _splits
from unifar.datasets.schema import (
    QDocBenchmark,
    TripletCorpus,
    make_document,
    make_question,
    questions_to_dataset,
    to_dataset,
    warn_skipped,
)
from unifar.text import split_sentences

__all__ = [
    "CSABSTRUCT_TO_FACET",
    "NICTA_TO_FACET",
    "CRANFIELD_GRADES",
    "SPLITS",
    "load_csfcube_documents",
    "load_csabstruct",
    "load_nicta_piboso",
    "load_cranfield",
    "load_scirepeval_triplets",
    "load_scirepeval_search",
]


#: CSAbstruct label -> facet (CSFCube's convention; ``other`` has no facet).
CSABSTRUCT_TO_FACET: dict[str, str | None] = {
    "background": "background",
    "objective": "background",
    "method": "method",
    "result": "result",
    "other": None,
}

#: NICTA-PIBOSO sentence role -> facet (see the module docstring for the reasons).
NICTA_TO_FACET: dict[str, str | None] = {
    "background": "background",
    "population": "method",
    "intervention": "method",
    "study design": "method",
    "outcome": "result",
    "other": None,
}

#: Cranfield judgement -> grade, higher = more relevant. Cleverdon's codes run the other way
#: (1 = complete answer ... 4 = minimal interest); checked here: TF-IDF ranks grade-1 documents
#: highest (median rank 13) and grade-4 lowest (66). The -1 code (one per query, undocumented)
#: is dropped by default.
CRANFIELD_GRADES: dict[int, int] = {1: 4, 2: 3, 3: 2, 4: 1}


# ----------------------------------------------------------------------------- CSFCube


def load_csfcube_documents(data_dir: str | Path | None = None) -> datasets.Dataset:
    """The 4,205 CSFCube abstracts as documents: predicted labels mapped to facets.

    Extra columns: ``raw_labels`` (the CSAbstruct-style ``*_label``), ``is_query``.
    """
    data = load_csfcube(data_dir)
    records = [
        make_document(
            pid, p["title"], p["sentences"], [LABEL_TO_FACET.get(x) for x in p["labels"]],
            source="csfcube", field="computer science", where=f"CSFCube paper {pid}",
            raw_labels=p["labels"], is_query=bool(p["is_query"]),
        )
        for pid, p in data.papers.items()
    ]
    return to_dataset(records, {"raw_labels": List(Value("string")), "is_query": Value("bool")})


# ----------------------------------------------------------------------------- CSAbstruct


def load_csabstruct(path: str | Path | None = None, split: str | None = None) -> datasets.Dataset:
    """CSAbstruct (Cohan et al., 2019): CS abstracts with human sentence roles.

    Reads ``{train,dev,test}.jsonl`` (``abstract_id``, ``sentences``, ``labels``, ``confs``)
    from ``path`` (default ``data/csabstruct``). Ids are ``"<split>-<line number>"`` (upstream's
    ``abstract_id`` is 0 on every line). No titles. Extra columns: ``split``, ``raw_labels`` (the
    original 5-way label), ``confs``.
    """
    root = resolve_dir(path, "csabstruct")
    records = []
    for sp in _splits(split):
        file = find_file(root, f"{sp}.jsonl")
        for lineno, rec in iter_jsonl(file):
            where = f"{file}:{lineno}"
            sentences = require(rec, "sentences", list, where)
            labels = require(rec, "labels", list, where)
            if len(labels) != len(sentences):
                raise ValueError(f"{where}: {len(sentences)} sentences but {len(labels)} labels")
            unknown = sorted({str(x) for x in labels} - set(CSABSTRUCT_TO_FACET))
            if unknown:
                raise ValueError(f"{where}: unknown labels {unknown}; expected {sorted(CSABSTRUCT_TO_FACET)}")
            confs = rec.get("confs")
            if confs is not None and (not isinstance(confs, list) or len(confs) != len(sentences)):
                raise ValueError(f"{where}: field 'confs' must have one value per sentence")
            records.append(
                make_document(
                    f"{sp}-{lineno}", "", sentences,
                    [CSABSTRUCT_TO_FACET[x] for x in labels], source="csabstruct", field="computer science",
                    where=where, split=sp, raw_labels=labels, confs=[float(c) for c in confs] if confs else None,
                )
            )
    return to_dataset(
        records, {"split": Value("string"), "raw_labels": List(Value("string")), "confs": List(Value("float32"))}
    )


# ----------------------------------------------------------------------------- NICTA-PIBOSO


def _read_hsln_blocks(file: Path) -> Iterator[tuple[int, str, list[tuple[str, str]]]]:
    """Yield ``(line, abstract id, [(label, sentence), ...])`` from an HSLN-format file."""
    current: tuple[int, str, list[tuple[str, str]]] | None = None
    with open(file, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if line.startswith("###"):
                if current is not None:
                    yield current
                current = (lineno, line[3:].strip(), [])
            elif not line.strip():
                continue
            else:
                if current is None:
                    raise ValueError(f"{file}:{lineno}: sentence before the first '###<id>' header")
                if "\t" not in line:
                    raise ValueError(f"{file}:{lineno}: expected 'label<TAB>sentence'")
                label, sentence = line.split("\t", 1)
                if label not in NICTA_TO_FACET:
                    raise ValueError(f"{file}:{lineno}: unknown label {label!r}; expected {sorted(NICTA_TO_FACET)}")
                current[2].append((label, sentence))
    if current is not None:
        yield current


def load_nicta_piboso(path: str | Path | None = None, split: str | None = None) -> datasets.Dataset:
    """NICTA-PIBOSO (Kim et al., 2011) medical abstracts, HSLN single-label copy.

    Reads ``{train,dev,test}_clean.txt`` (``###<id>`` header, then ``label<TAB>sentence``
    lines) from ``path`` (default ``data/nicta_piboso``); :data:`NICTA_TO_FACET` maps roles to
    facets. No titles. Extra columns: ``split``, ``raw_labels``.
    """
    root = resolve_dir(path, "nicta_piboso")
    records = []
    for sp in _splits(split):
        file = find_file(root, f"{sp}_clean.txt", f"{sp}.txt")
        for lineno, doc_id, rows in _read_hsln_blocks(file):
            where = f"{file}:{lineno}"
            if not doc_id:
                raise ValueError(f"{where}: empty abstract id after '###'")
            records.append(
                make_document(
                    doc_id, "", [s for _, s in rows], [NICTA_TO_FACET[lab] for lab, _ in rows],
                    source="nicta_piboso", field="medicine", where=where, split=sp, raw_labels=[lab for lab, _ in rows],
                )
            )
    return to_dataset(records, {"split": Value("string"), "raw_labels": List(Value("string"))})


# ----------------------------------------------------------------------------- Cranfield

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


# ----------------------------------------------------------------------------- SciRepEval samples


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
