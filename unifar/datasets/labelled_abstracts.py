"""Abstracts whose sentences carry rhetorical roles, as ``datasets.Dataset`` documents in the
common schema (:mod:`unifar.datasets.schema`): CSFCube's 4,205 abstracts (predicted labels),
CSAbstruct and NICTA-PIBOSO (human labels).

Each loader takes a path (default: the repository's ``data/<folder>``) and also reads the full
upstream files in the same format. Roles map onto the facets by the tables of
:mod:`unifar.facets`, one line of reason each:

* CSFCube and CSAbstruct: background + objective -> background, method -> method,
  result -> result, other -> ``None`` (CSFCube's own definition of its facets;
  :data:`unifar.facets.CSFCUBE_LABEL_TO_FACET`, :data:`unifar.facets.CSABSTRUCT_TO_FACET`).
* NICTA-PIBOSO (:data:`unifar.facets.NICTA_TO_FACET`): background -> background (it also holds
  the aims); population, intervention, study design -> method (who was studied, what was done,
  how); outcome -> result (its sentences report findings); other -> ``None`` (settings,
  measures, review procedures and case narratives are mixed in it, so no single facet fits).

Malformed input raises ``ValueError`` naming ``file:line``. The unlabelled corpora live in
:mod:`unifar.datasets.cranfield` and :mod:`unifar.datasets.scirepeval`, PubMedQA in
:mod:`unifar.datasets.pubmedqa`, citation intents in :mod:`unifar.datasets.citation_intents`,
the downloadable DORIS-MAE and LitSearch in :mod:`unifar.datasets.external`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import datasets
from datasets import List, Value

from unifar.datasets.csfcube import load_csfcube
from unifar.datasets.readers import find_file, iter_jsonl, require, resolve_dir
from unifar.datasets.readers import splits as _splits
from unifar.datasets.schema import make_document, to_dataset
from unifar.facets import CSABSTRUCT_TO_FACET, CSFCUBE_LABEL_TO_FACET, NICTA_TO_FACET

__all__ = ["load_csfcube_documents", "load_csabstruct", "load_nicta_piboso"]


# ----------------------------------------------------------------------------- CSFCube


def load_csfcube_documents(data_dir: str | Path | None = None) -> datasets.Dataset:
    """The 4,205 CSFCube abstracts as documents: predicted labels mapped to facets.

    Extra columns: ``raw_labels`` (the CSAbstruct-style ``*_label``), ``is_query``.
    """
    data = load_csfcube(data_dir)
    records = [
        make_document(
            pid, p["title"], p["sentences"], [CSFCUBE_LABEL_TO_FACET.get(x) for x in p["labels"]],
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

