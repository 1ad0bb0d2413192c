"""PubMedQA PQA-L (Jin et al., EMNLP 2019) as a question -> abstract benchmark with facet labels.

``ori_pqal.json`` maps a PMID to ``{QUESTION, CONTEXTS, LABELS, LONG_ANSWER, MESHES, YEAR,
final_decision, ...}``: ``CONTEXTS`` are the sections of the structured abstract *without*
its conclusion, ``LABELS`` their section names, ``LONG_ANSWER`` the conclusion. A document is
the abstract: each section is split into sentences with :func:`unifar.text.split_sentences`
and every sentence inherits the facet of its section (:data:`SECTION_TO_FACET`); the
conclusion (``LONG_ANSWER``) is appended as facet ``result``. PQA-L has no titles, and the
question usually rephrases the title, so ``title`` is ``""``.

Split: the 500 PMIDs of ``test_ground_truth.json`` are the official test set (``split ==
"test"``); the other 500 are ``"train"`` (upstream's ``split_dataset.py`` cuts them into ten
cross-validation train/dev folds). Without ``test_ground_truth.json`` (e.g. for the
artificial PQA-A file ``ori_pqaa.json``, same record format) every record is ``"train"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import List, Value

from unifar.datasets.readers import read_json, require, resolve_dir
from unifar.datasets.schema import (
    QDocBenchmark,
    make_document,
    make_question,
    questions_to_dataset,
    to_dataset,
)
from unifar.text import split_sentences

__all__ = ["SECTION_TO_FACET", "CONCLUSION_LABEL", "section_facet", "load_pubmedqa"]

CONCLUSION_LABEL = "LONG_ANSWER"

_BACKGROUND = """
BACKGROUND | BACKGROUND AND AIM | BACKGROUND AND AIMS | BACKGROUND AND AIM OF THE STUDY |
BACKGROUND AND OBJECTIVE | BACKGROUND AND OBJECTIVES | BACKGROUND AND PURPOSE |
BACKGROUND AND STUDY AIMS | BACKGROUND AND STUDY OBJECTIVE | BACKGROUND CONTEXT | AIMS AND BACKGROUND |
SUMMARY OF BACKGROUND DATA | SUMMARY BACKGROUND DATA | INTRODUCTION | INTRODUCTION AND HYPOTHESIS |
CONTEXT | CONTEXT AND OBJECTIVES | OBJECTIVE | OBJECTIVES | STUDY OBJECTIVE | STUDY OBJECTIVES |
PRIMARY OBJECTIVE | OBJECT | AIMS | AIMS AND OBJECTIVES | PURPOSE | PURPOSES | PURPOSE OF INVESTIGATION |
PURPOSE OF THE STUDY | GOAL | HYPOTHESIS | HYPOTHESES | RATIONALE | RATIONALE AND OBJECTIVES |
RATIONALE, AIMS AND OBJECTIVES
"""
_METHOD = """
METHOD | METHODS | METHODOLOGY | METHOD AND MATERIAL | METHODS AND MATERIALS | MATERIAL |
MATERIAL AND METHOD | MATERIAL AND METHODS | MATERIALS AND METHODS | METHODS AND STUDY DESIGN |
METHODS OR INTERVENTIONS | EXTRACTION METHODS | DESIGN | DESIGN OF STUDY | STUDY DESIGN |
STUDY DESIGN AND METHODS | STUDY DESIGN AND SETTING | RESEARCH DESIGN | RESEARCH DESIGN AND METHODS |
EXPERIMENTAL DESIGN | DESIGN AND SETTING | DESIGN, SETTING AND PATIENTS | DESIGN, SETTING, AND PATIENTS |
DESIGN, SETTING, AND PARTICIPANTS | SETTING | SETTINGS | STUDY SETTING | LOCATION |
SETTING AND PARTICIPANTS | SETTINGS AND PARTICIPANTS | SETTING AND PATIENTS | PATIENTS AND SETTING |
LOCATION, SUBJECTS, AND INTERVENTIONS | PATIENTS | PATIENT SAMPLE | PATIENTS AND METHODS |
PATIENTS AND METHOD | PATIENT AND METHODS | PATIENTS AND PARTICIPANTS | PARTICIPANTS |
PARTICIPANTS AND INTERVENTION | SUBJECTS | SUBJECTS AND METHODS | PROBANDS AND METHODS | POPULATION |
POPULATION AND SAMPLE | STUDY POPULATION AND METHODS | SAMPLE | STUDY SAMPLE | INTERVENTION |
INTERVENTIONS | INTERVENTIONS AND OUTCOME MEASURES | MEASUREMENTS | MEASURES | MAIN MEASURES |
OUTCOME | OUTCOMES | OUTCOMES MEASURED | OUTCOME MEASURE | OUTCOME MEASURES | MAIN OUTCOME |
MAIN OUTCOME MEASURE | MAIN OUTCOME MEASURES | MAIN OUTCOME MEASUREMENTS |
PRIMARY AND SECONDARY OUTCOME MEASURES | END POINT | MAIN RESEARCH VARIABLES | CASE DEFINITION |
DATA SOURCE | DATA SOURCES | DATA EXTRACTION | STUDY SELECTION | COLLECTION | , FSAII | , SCCVII
"""
_RESULT = """
RESULT | RESULTS | MAIN RESULTS | KEY RESULTS | FINDINGS | PRINCIPAL FINDINGS | OBSERVATIONS |
DATA SYNTHESIS | RESULTS AND DISCUSSION | RESULTS AND LIMITATIONS | DISCUSSION | CONCLUSION |
CONCLUSIONS | ICU LOS
"""
_NO_FACET = """
METHODS AND RESULTS | MEASUREMENT AND RESULTS | MEASUREMENTS AND RESULTS | MEASUREMENTS AND MAIN RESULTS |
OBJECTIVE AND METHODS | CASE REPORT | CASE REPORTS | CASE PRESENTATION | CASE DESCRIPTION | PRESENTATION |
DESCRIPTION | SUMMARY | MAIN BODY | LIMITATIONS | KEY LIMITATIONS | CLINICAL TRIAL REGISTRATION |
TRIAL REGISTRATION | UNLABELLED
"""


def _names(block: str) -> list[str]:
    return [n.strip() for n in block.replace("\n", " ").split(" | ") if n.strip()]


#: Section name (upper case) -> facet, covering every section name in PQA-L's ``ori_pqal.json``
#: (140 names) plus CONCLUSION(S). Rules, in order:
#:
#: * background: background, context, introduction, objective, aim, purpose, goal, hypothesis,
#:   rationale (what is known and what the study sets out to do; CSFCube counts objectives as
#:   background too);
#: * method: methods and materials, design, setting/location, patients/participants/subjects/
#:   population/sample, interventions, outcome *measures* / measurements / end points (they say
#:   what was measured, not what was found), data sources / extraction / study selection of
#:   reviews, case definitions;
#: * result: results, findings, observations, data synthesis (a review's pooled results),
#:   discussion and conclusions (the conclusion is ``result`` as in CSAbstruct);
#: * no facet (``None``): sections that mix two facets (``METHODS AND RESULTS``,
#:   ``MEASUREMENTS AND MAIN RESULTS``, ``OBJECTIVE AND METHODS``: their sentences are of both
#:   kinds), case narratives (patient, treatment and outcome in one block), review summaries
#:   and bodies, limitations, trial registration numbers, and ``UNLABELLED``;
#: * parse artefacts of upstream's section splitter: ``, FSAII`` and ``, SCCVII`` are pieces of a
#:   MATERIALS AND METHODS section and ``ICU LOS`` a piece of a RESULTS section (PMIDs 20304513
#:   and 26606599), so they take that section's facet.
SECTION_TO_FACET: dict[str, str | None] = {
    **{n: "background" for n in _names(_BACKGROUND)},
    **{n: "method" for n in _names(_METHOD)},
    **{n: "result" for n in _names(_RESULT)},
    **{n: None for n in _names(_NO_FACET)},
}

_KEYWORDS: dict[str, tuple[str, ...]] = {
    "background": ("BACKGROUND", "INTRODUCTION", "CONTEXT", "OBJECTIVE", "AIM", "PURPOSE", "GOAL", "HYPOTHES", "RATIONALE"),
    "method": ("METHOD", "MATERIAL", "DESIGN", "SETTING", "PATIENT", "PARTICIPANT", "SUBJECT", "POPULATION",
               "SAMPLE", "INTERVENTION", "MEASURE", "OUTCOME", "DATA SOURCE", "EXTRACTION", "SELECTION"),
    "result": ("RESULT", "FINDING", "OBSERVATION", "SYNTHESIS", "DISCUSSION", "CONCLUSION"),
}


def section_facet(name: str) -> tuple[str | None, bool]:
    """``(facet, known)`` of a PubMed section name.

    Names in :data:`SECTION_TO_FACET` are looked up (``known=True``); any other name (the
    larger PQA-A/PQA-U files have more variants) gets the facet whose keywords it contains
    when exactly one facet's keywords match, else ``None`` (``known=False``).

    >>> section_facet("Materials and Methods"), section_facet("RESULTS AND INTERPRETATION")
    (('method', True), ('result', False))
    """
    key = " ".join(name.upper().split())
    if key in SECTION_TO_FACET:
        return SECTION_TO_FACET[key], True
    hits = {f for f, words in _KEYWORDS.items() if any(w in key for w in words)}
    return (hits.pop() if len(hits) == 1 else None), False


_DOC_EXTRA = {
    "raw_labels": List(Value("string")),
    "split": Value("string"),
    "year": Value("string"),
    "meshes": List(Value("string")),
    "final_decision": Value("string"),
}
_Q_EXTRA = {"split": Value("string"), "final_decision": Value("string"), "doc_id": Value("string")}


def _section_sentences(sections: list[tuple[Any, Any]], where: str, stats: dict[str, int],
                       unknown: set[str]) -> tuple[list[str], list[str | None], list[str]]:
    """One record's sentences, each with its facet and its section's own name; counts the facets
    into ``stats`` and the section names outside :data:`SECTION_TO_FACET` into ``unknown``."""
    sentences, facets, raw_labels = [], [], []
    for name, text in sections:
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError(f"{where}: section labels and texts must be strings")
        facet, known = ("result", True) if name == CONCLUSION_LABEL else section_facet(name)
        if not known:
            unknown.add(name)
        for s in split_sentences(text):
            sentences.append(s)
            facets.append(facet)
            raw_labels.append(name)
            stats[facet or "no_facet"] += 1
    return sentences, facets, raw_labels


def load_pubmedqa(
    path: str | Path | None = None,
    split: str | None = None,
    include_conclusion: bool = True,
) -> QDocBenchmark:
    """Load PQA-L (or a file in the same format) as a :class:`QDocBenchmark`.

    ``path``: a folder holding ``ori_pqal.json`` (and optionally ``test_ground_truth.json``),
    or the JSON file itself; default ``data/pubmedqa_pqal``. ``split``: ``"train"``,
    ``"test"`` or ``None`` (all). Each question's only relevant document is its own abstract
    (``qrels[pmid] = {pmid: 1}``); retrieval runs over all loaded abstracts.
    ``stats`` counts records, sentences per facet and ``unknown_section_names`` (names outside
    :data:`SECTION_TO_FACET`, mapped by keyword).
    """
    p = Path(path) if path is not None else None
    if p is not None and p.is_file():
        file, root = p, p.parent
    else:
        root = resolve_dir(p, "pubmedqa_pqal")
        file = root / "ori_pqal.json"
    raw = read_json(file)
    if not isinstance(raw, dict):
        raise ValueError(f"{file}: expected a JSON object {{pmid: record}}, got {type(raw).__name__}")
    gt_path = root / "test_ground_truth.json"
    test_ids = set(read_json(gt_path)) if gt_path.is_file() and file.name == "ori_pqal.json" else set()
    if test_ids - set(raw):
        raise ValueError(f"{gt_path}: {len(test_ids - set(raw))} test PMIDs are absent from {file}")
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")

    stats: dict[str, int] = {"records": 0, "unknown_section_names": 0, "background": 0, "method": 0, "result": 0, "no_facet": 0}
    unknown: set[str] = set()
    docs, questions = [], []
    for pmid, rec in raw.items():
        where = f"{file}: record {pmid}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object, got {type(rec).__name__}")
        contexts = require(rec, "CONTEXTS", list, where)
        labels = require(rec, "LABELS", list, where)
        question = require(rec, "QUESTION", str, where)
        if len(contexts) != len(labels):
            raise ValueError(f"{where}: {len(contexts)} CONTEXTS but {len(labels)} LABELS")
        rec_split = "test" if pmid in test_ids else "train"
        if split is not None and rec_split != split:
            continue
        sections = list(zip(labels, contexts))
        if include_conclusion and rec.get("LONG_ANSWER"):
            sections.append((CONCLUSION_LABEL, rec["LONG_ANSWER"]))
        sentences, facets, raw_labels = _section_sentences(sections, where, stats, unknown)
        year = rec.get("YEAR")
        docs.append(
            make_document(
                str(pmid), "", sentences, facets, source="pubmedqa", field="biomedicine", where=where,
                raw_labels=raw_labels, split=rec_split, year=None if year is None else str(year),
                meshes=[str(m) for m in rec.get("MESHES") or []], final_decision=rec.get("final_decision"),
            )
        )
        questions.append(
            make_question(str(pmid), question, source="pubmedqa", where=where, split=rec_split,
                          final_decision=rec.get("final_decision"), doc_id=str(pmid))
        )
        stats["records"] += 1
    stats["unknown_section_names"] = len(unknown)
    return QDocBenchmark(
        name="pubmedqa",
        documents=to_dataset(docs, _DOC_EXTRA),
        questions=questions_to_dataset(questions, _Q_EXTRA),
        qrels={q["qid"]: {q["qid"]: 1} for q in questions},
        candidates=None,
        relevance_threshold=1,
        stats=stats,
    )
