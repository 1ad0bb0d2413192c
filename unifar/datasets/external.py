"""Loaders for the q-doc benchmarks a user downloads: DORIS-MAE (Zenodo) and LitSearch (HF hub).

Neither is shipped (no hub is reachable here); both loaders follow the published formats and
are tested on small fixtures in ``tests/fixtures/``.

**DORIS-MAE** (Wang et al., NeurIPS 2023 Datasets and Benchmarks), one JSON file
(``DORIS-MAE_dataset_v1.json``) with

* ``Query``: list of ``{query_text, query_type, idea_from, candidate_pool: [abstract_id],
  aspects: {aspect_id: [sub-aspect ids]}, aspect_id2sent: {aspect_id: [sentence]},
  sent2aspect_id: {sentence: [aspect_id]}}``;
* ``Corpus``: list of papers, position = ``abstract_id``, each with ``original_abstract`` (and
  ``title``, ``abstract_id``, ``categories``, ... where present);
* ``Annotation``: list of ``{aspect_id, abstract_id, score}`` (score 0-2, by ChatGPT);
* ``aspect_id2aspect``: ``{aspect_id: aspect text}``.

Relevance follows the official ``benchmarking/dataset_util.py``: for a query and a candidate,
the sum of the annotation scores over the query's aspects and sub-aspects, divided by their
number; relevant when >= 1.0. Levels: ``"query"`` (the full query text), ``"aspect"`` (the
aspect texts joined, as ``create_aspect_dataset``), ``"subquery_k"`` (every combination of k
aspects, as ``create_subquery_dataset``). The official ranking drops four over-long abstracts
(:data:`DORIS_MAE_EXCLUDED`) from the candidate pools but keeps them in the ground truth;
``drop_long=True`` does the same.

**LitSearch** (Ajith et al., EMNLP 2024), HF dataset ``princeton-nlp/LitSearch``, split
``full``: configuration ``query`` (``query_set``, ``query``, ``specificity``, ``quality``,
``corpusids``) and ``corpus_clean`` (``corpusid``, ``title``, ``abstract``, ``citations``,
``full_paper``). Retrieval runs over the whole corpus (title + abstract); a question's
relevant papers are its ``corpusids``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Iterable, Mapping

import datasets
from datasets import Value

from unifar.datasets.readers import read_json
from unifar.datasets.schema import (
    QDocBenchmark,
    make_document,
    make_question,
    questions_to_dataset,
    to_dataset,
    warn_skipped,
)
from unifar.text import split_sentences

__all__ = ["DORIS_MAE_EXCLUDED", "DORIS_MAE_THRESHOLD", "LITSEARCH_HUB", "load_doris_mae", "load_litsearch"]

#: Abstracts the official DORIS-MAE ranking code removes from candidate pools (over 512 tokens).
DORIS_MAE_EXCLUDED: frozenset[int] = frozenset({205580, 346695, 346826, 346836})
#: A normalised DORIS-MAE score at or above this counts as relevant.
DORIS_MAE_THRESHOLD = 1.0
LITSEARCH_HUB = "princeton-nlp/LitSearch"


# ----------------------------------------------------------------------------- DORIS-MAE


def _aspect_ids(aspects: Mapping[str, Iterable[Any]]) -> list[str]:
    """Aspect ids and sub-aspect ids of a query, as strings, de-duplicated (official ``aspect_list``)."""
    ids: list[str] = []
    for a, subs in aspects.items():
        ids.append(str(a))
        ids.extend(str(s) for s in subs)
    return sorted(set(ids))


def _subqueries(q: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """The official ``create_subquery_dataset`` for one query: one subquery per k-combination of aspects."""
    out = []
    sent2aspect = q.get("sent2aspect_id", {})
    aspect2sent = q.get("aspect_id2sent", {})
    for comb in itertools.combinations(list(q["aspects"].keys()), k):
        sents: list[str] = []
        for a in comb:
            for s in aspect2sent.get(a, []):
                if s not in sents:
                    sents.append(s)
        covered = {str(a) for s in sents for a in sent2aspect.get(s, [])}
        if len(covered) > k:  # a sentence also covers another aspect: skipped upstream too
            continue
        out.append({"query_text": " ".join(sents), "aspects": {a: q["aspects"][a] for a in q["aspects"] if a in comb}})
    return out


def _read_doris_mae(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The dataset JSON (``path`` = the file, or a folder holding one ``*.json``) and its content,
    checked for the top-level lists ``Query``, ``Corpus``, ``Annotation``."""
    file = Path(path)
    if file.is_dir():
        found = sorted(file.glob("*.json"))
        if len(found) != 1:
            raise FileNotFoundError(f"expected one DORIS-MAE dataset JSON in {file}, found {[f.name for f in found]}")
        file = found[0]
    data = read_json(file)
    for key in ("Query", "Corpus", "Annotation"):
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise ValueError(f"{file}: not a DORIS-MAE dataset: top-level list {key!r} missing")
    return file, data


def _check_corpus(file: Path, corpus: list[Any]) -> None:
    """Every paper has a string ``original_abstract`` and, if given, ``abstract_id`` = position."""
    for i, paper in enumerate(corpus):
        if not isinstance(paper, dict) or not isinstance(paper.get("original_abstract"), str):
            raise ValueError(f"{file}: Corpus[{i}] needs a string 'original_abstract'")
        if "abstract_id" in paper and int(paper["abstract_id"]) != i:
            raise ValueError(f"{file}: Corpus[{i}] has abstract_id {paper['abstract_id']} (ids must equal positions)")


def _annotation_scores(file: Path, annotations: list[Any]) -> tuple[dict[tuple[str, int], float], int]:
    """Summed score per (aspect id, abstract id), and how many scores are negative."""
    scores: dict[tuple[str, int], float] = {}
    negative = 0
    for i, ann in enumerate(annotations):
        try:
            key = (str(ann["aspect_id"]), int(ann["abstract_id"]))
            score = float(ann["score"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{file}: Annotation[{i}] needs aspect_id, abstract_id and a numeric score") from None
        negative += score < 0
        scores[key] = scores.get(key, 0.0) + score
    return scores, negative


def _doris_queries(
    file: Path, data: dict[str, Any], level: str, aspect_text: Mapping[str, str], n_corpus: int
) -> list[tuple[str, str, dict[str, Any], list[int]]]:
    """``(qid, text, aspects, pool)`` of every question at ``level`` (query, aspect, subquery_<k>)."""
    queries: list[tuple[str, str, dict[str, Any], list[int]]] = []  # qid, text, aspects, pool
    for qi, q in enumerate(data["Query"]):
        where = f"{file}: Query[{qi}]"
        if not isinstance(q, dict) or not isinstance(q.get("query_text"), str):
            raise ValueError(f"{where}: needs a string 'query_text'")
        if not isinstance(q.get("candidate_pool"), list) or not isinstance(q.get("aspects"), dict):
            raise ValueError(f"{where}: needs 'candidate_pool' (list) and 'aspects' (dict)")
        pool = [int(c) for c in q["candidate_pool"]]
        bad = [c for c in pool if not 0 <= c < n_corpus]
        if bad:
            raise ValueError(f"{where}: candidate_pool refers to abstracts outside the Corpus: {bad[:5]}")
        if level == "query":
            queries.append((str(qi), q["query_text"], q["aspects"], pool))
        elif level == "aspect":
            missing = [a for a in q["aspects"] if str(a) not in aspect_text]
            if missing:
                raise ValueError(f"{where}: aspects {missing} absent from 'aspect_id2aspect'")
            text = " ".join(aspect_text[str(a)] for a in q["aspects"])
            queries.append((str(qi), text, q["aspects"], pool))
        else:
            for n, sub in enumerate(_subqueries(q, int(level[9:]))):
                queries.append((f"{qi}-{n}", sub["query_text"], sub["aspects"], pool))
    return queries


def load_doris_mae(
    path: str | Path,
    level: str = "query",
    drop_long: bool = True,
    pool_only: bool = True,
) -> QDocBenchmark:
    """Load DORIS-MAE from its dataset JSON (``path`` = the file, or a folder holding one ``*.json``).

    ``level``: ``"query"``, ``"aspect"`` or ``"subquery_<k>"``. Question ids are the query's
    position (``"7"``), subqueries ``"<query>-<n>"``. ``qrels`` hold the normalised score of
    every pool candidate (threshold :data:`DORIS_MAE_THRESHOLD`); ``candidates`` the pool to
    rank. ``pool_only`` keeps only abstracts that are in some pool as documents.
    """
    file, data = _read_doris_mae(path)
    if level not in ("query", "aspect") and not (level.startswith("subquery_") and level[9:].isdigit()):
        raise ValueError(f"level must be 'query', 'aspect' or 'subquery_<k>', got {level!r}")
    aspect_text = {str(k): v for k, v in (data.get("aspect_id2aspect") or {}).items()}

    corpus = data["Corpus"]
    _check_corpus(file, corpus)
    scores, negative = _annotation_scores(file, data["Annotation"])
    queries = _doris_queries(file, data, level, aspect_text, len(corpus))

    qrels: dict[str, dict[str, float]] = {}
    candidates: dict[str, list[str]] = {}
    questions = []
    for qid, text, aspects, pool in queries:
        ids = _aspect_ids(aspects)
        if not ids:
            raise ValueError(f"{file}: query {qid} has no aspects")
        qrels[qid] = {str(c): sum(scores.get((a, c), 0.0) for a in ids) / len(ids) for c in pool}
        candidates[qid] = [str(c) for c in pool if not (drop_long and c in DORIS_MAE_EXCLUDED)]
        questions.append(make_question(qid, " ".join(text.split()), source="doris_mae", level=level))

    keep = sorted({int(c) for pool in candidates.values() for c in pool}) if pool_only else range(len(corpus))
    docs = []
    for i in keep:
        paper = corpus[i]
        docs.append(
            make_document(
                str(i), " ".join(str(paper.get("title") or "").split()), split_sentences(paper["original_abstract"]),
                None, source="doris_mae", field="computer science", where=f"{file}: Corpus[{i}]",
            )
        )
    stats = {
        "queries": len(data["Query"]),
        "questions": len(questions),
        "documents": len(docs),
        "negative_scores": int(negative),
        "with_relevant": sum(any(g >= DORIS_MAE_THRESHOLD for g in j.values()) for j in qrels.values()),
    }
    return QDocBenchmark(
        name=f"doris_mae_{level}",
        documents=to_dataset(docs),
        questions=questions_to_dataset(questions, {"level": Value("string")}),
        qrels=qrels,
        candidates=candidates,
        relevance_threshold=DORIS_MAE_THRESHOLD,
        stats=stats,
    )


# ----------------------------------------------------------------------------- LitSearch


def _read_table(source: Path, config: str, columns: list[str]) -> list[dict[str, Any]]:
    """Rows of one LitSearch configuration from a local copy (parquet folder or JSON lines)."""
    import pyarrow.parquet as pq

    folder = source / config
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    if files:
        schema = pq.read_schema(files[0])
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise ValueError(f"{files[0]}: LitSearch {config!r} lacks columns {missing}")
        return [row for f in files for row in pq.read_table(f, columns=columns).to_pylist()]
    for name in (f"{config}.jsonl", f"{config}/full.jsonl"):
        if (source / name).is_file():
            ds = datasets.Dataset.from_json(str(source / name))
            missing = [c for c in columns if c not in ds.column_names]
            if missing:
                raise ValueError(f"{source / name}: LitSearch {config!r} lacks columns {missing}")
            return ds.select_columns(columns).to_list()
    raise FileNotFoundError(
        f"LitSearch {config!r} not found under {source}: expected {config}/*.parquet (the hub layout) or {config}.jsonl"
    )


def _read_hub(name: str, config: str, columns: list[str]) -> list[dict[str, Any]]:
    try:
        ds = datasets.load_dataset(name, config, split="full")
    except Exception as err:  # offline, unknown name, gated: one clear message
        raise RuntimeError(
            f"could not load {name!r} (configuration {config!r}) from the Hugging Face hub: "
            f"{type(err).__name__}: {err}. Without network access, download the dataset elsewhere "
            f"(its 'query' and 'corpus_clean' folders) and pass the local folder instead."
        ) from err
    return ds.select_columns(columns).to_list()


def load_litsearch(source: str | Path = LITSEARCH_HUB, query_set: str | None = None) -> QDocBenchmark:
    """Load LitSearch: 597 questions over 64,183 papers (title + abstract).

    ``source``: a local folder in the hub layout (``query/*.parquet`` and
    ``corpus_clean/*.parquet``, or ``query.jsonl`` / ``corpus_clean.jsonl``), or a hub name
    (default ``princeton-nlp/LitSearch``; needs network, else a ``RuntimeError`` says what to
    do). ``query_set`` keeps one query set (e.g. ``"inline_acl"``). Question ids are the row
    positions; extras ``query_set``, ``specificity``, ``quality`` allow the per-specificity
    breakdown. ``full_paper`` is not loaded.
    """
    qcols = ["query_set", "query", "specificity", "quality", "corpusids"]
    ccols = ["corpusid", "title", "abstract"]
    local = Path(source)
    if local.exists():
        rows, papers = _read_table(local, "query", qcols), _read_table(local, "corpus_clean", ccols)
    else:
        rows, papers = _read_hub(str(source), "query", qcols), _read_hub(str(source), "corpus_clean", ccols)
    docs = [
        make_document(
            str(p["corpusid"]), " ".join((p["title"] or "").split()), split_sentences(p["abstract"] or ""), None,
            source="litsearch", field="computer science", where=f"LitSearch corpus_clean row {i}",
        )
        for i, p in enumerate(papers)
    ]
    doc_ids = {d["id"] for d in docs}
    questions, qrels = [], {}
    missing = 0
    for i, r in enumerate(rows):
        if query_set is not None and r["query_set"] != query_set:
            continue
        qid = str(i)
        questions.append(
            make_question(qid, " ".join(str(r["query"]).split()), source="litsearch", where=f"LitSearch query row {i}",
                          query_set=r["query_set"], specificity=r["specificity"], quality=r["quality"])
        )
        rel = {str(c): 1 for c in r["corpusids"] or []}
        missing += sum(c not in doc_ids for c in rel)
        qrels[qid] = rel
    stats = {"questions": len(questions), "documents": len(docs)}
    warn_skipped(source, missing, "relevant corpusids absent from corpus_clean (kept in qrels)", stats,
                 "relevant_not_in_corpus")
    return QDocBenchmark(
        name="litsearch",
        documents=to_dataset(docs),
        questions=questions_to_dataset(
            questions, {"query_set": Value("string"), "specificity": Value("int64"), "quality": Value("int64")}
        ),
        qrels=qrels,
        candidates=None,
        relevance_threshold=1,
        stats=stats,
    )
