"""How Facet-Aware Training Units (section 4.1) are made from facet triplets. The record itself
(:class:`~unifar.datasets.ftu.FTU`), its on-disk folder (:mod:`unifar.datasets.ftu_files`) and
its counts (:mod:`unifar.datasets.ftu_statistics`) are in :mod:`unifar.datasets`, since training
and chapters 6-8 only read them.

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
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..datasets.ftu import FTU, validate_document
from ..datasets.readers import read_text
from ..facets import FACETS, normalise_facet
from ..text import split_sentences
from .questions import QuestionGenerator

__all__ = ["Triplet", "read_triplets", "merge_triplets", "fill_questions"]

logger = logging.getLogger(__name__)


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
    # An empty sentence list beside an abstract counts as absent (as in unifar.text.normalize_document).
    if isinstance(side.get("sentences"), list) and (side["sentences"] or not side.get("abstract")):
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
        text = read_text(path)  # invalid UTF-8 names file:line
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


def merge_triplets(triplets: Iterable[Triplet | Mapping[str, Any]], facet: str | None = None) -> list[FTU]:
    """Merge triplets sharing a query document into FTUs (first-seen order everywhere).

    Triplets are :class:`Triplet` objects or mappings ``{"query_id", "pos_id", "neg_id",
    "facet"}``; ``facet`` is used for mappings without one (e.g. the rows of
    :func:`unifar.datasets.scirepeval.load_scirepeval_triplets`).

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
