"""Leakage guard for the leakage rule: no evaluation document or question enters training data.

The forbidden material is given explicitly (:class:`ForbiddenSet`: ids, titles, texts), so the
guard depends on no loader; :func:`forbidden_from_repo_data` builds it from the repository's
``data/`` folder: every CSFCube paper (queries and candidates), the PubMedQA PQA-L *test half*
(the 500 PMIDs of ``test_ground_truth.json``: questions and abstracts), all Cranfield
documents and questions, and the test half of the SciRepEval search sample.

Texts are compared after :func:`normalise_text` (Unicode NFKC, lower case, every character that
is not a letter or digit removed), so case, punctuation, spacing and sentence splitting do not
matter. A training document leaks when

* its ``id`` equals a forbidden id (exact string; see :func:`forbidden_from_repo_data` for the
  id forms registered),
* its normalised title equals a forbidden title (titles shorter than 10 normalised characters
  are not registered),
* its normalised text (sentences, or title + sentences) equals a forbidden text, or
* it shares at least ``min_shared_sentences`` (default 2) long sentences (40+ normalised
  characters) with one forbidden text, which catches a partial copy (an abstract without its
  conclusion, a re-split abstract).

A training question leaks when its normalised text equals a forbidden text or title.
:func:`check_no_leakage` raises :class:`LeakageError` listing the offending ids and titles.

Beside this exact guard, :func:`unifar.construction.leakage_semantic.semantic_overlap` looks
for what it cannot see: for every training document, the evaluation document whose embedding is
closest (cosine).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .csfcube import load_csfcube

if TYPE_CHECKING:
    import os

    from .ftu_files import FTUDataset

__all__ = [
    "normalise_text",
    "ForbiddenSet",
    "LeakageHit",
    "LeakageReport",
    "LeakageError",
    "find_leaks",
    "check_no_leakage",
    "forbidden_from_repo_data",
]

MIN_TITLE_CHARS = 10
MIN_SENTENCE_CHARS = 40
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+")


def normalise_text(text: str | None) -> str:
    """Lower case, letters and digits only.

    >>> normalise_text("Get out the Vote:  Determining support (or opposition)!")
    'getoutthevotedeterminingsupportoropposition'
    """
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text or "").lower())


def _sentence_keys(text: str) -> list[str]:
    keys = (normalise_text(s) for s in _SENT_SPLIT.split(text or ""))
    return [k for k in keys if len(k) >= MIN_SENTENCE_CHARS]


@dataclass
class ForbiddenSet:
    """What must not appear in training data; every entry maps to a label naming its origin."""

    ids: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    sentences: dict[str, str] = field(default_factory=dict)

    def add_ids(self, ids: Iterable[Any], label: str) -> "ForbiddenSet":
        for i in ids:
            self.ids.setdefault(str(i), label)
        return self

    def add_title(self, title: str | None, label: str) -> "ForbiddenSet":
        key = normalise_text(title)
        if len(key) >= MIN_TITLE_CHARS:
            self.titles.setdefault(key, label)
        return self

    def add_text(self, text: str | None, label: str, sentences: bool = True) -> "ForbiddenSet":
        """Register a text (abstract or question); with ``sentences`` also its long sentences."""
        key = normalise_text(text)
        if key:
            self.texts.setdefault(key, label)
            if sentences:
                for s in _sentence_keys(text or ""):
                    self.sentences.setdefault(s, label)
        return self

    def add_document(self, doc_id: Any, title: str | None, text: str | None, label: str) -> "ForbiddenSet":
        """A forbidden paper: its id (as given), title, text and title + text."""
        if doc_id is not None:
            self.add_ids([doc_id], label)
        self.add_title(title, label)
        self.add_text(text, label)
        if title and text:
            self.add_text(f"{title} {text}", label, sentences=False)
        return self

    def update(self, other: "ForbiddenSet") -> "ForbiddenSet":
        for name in ("ids", "titles", "texts", "sentences"):
            for k, v in getattr(other, name).items():
                getattr(self, name).setdefault(k, v)
        return self

    def sizes(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in ("ids", "titles", "texts", "sentences")}


@dataclass(frozen=True)
class LeakageHit:
    """One leaking item and the forbidden item it matches; ``kind`` joins how it matched
    (``id``, ``title``, ``text``, ``<n> sentences``; ``question`` for questions)."""

    kind: str
    training_id: str
    title: str
    matched: str

    def __str__(self) -> str:
        t = f" (title {self.title[:80]!r})" if self.title else ""
        return f"{self.kind}: {self.training_id!r}{t} matches {self.matched}"


@dataclass
class LeakageReport:
    """What :func:`find_leaks` checked and found."""

    documents_checked: int
    questions_checked: int
    forbidden: dict[str, int]
    hits: list[LeakageHit] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.hits

    def summary(self, limit: int = 20) -> str:
        head = (
            f"checked {self.documents_checked} documents and {self.questions_checked} questions against "
            f"{self.forbidden}: {len(self.hits)} leak(s)"
        )
        lines = [head] + [f"  {h}" for h in self.hits[:limit]]
        if len(self.hits) > limit:
            lines.append(f"  ... and {len(self.hits) - limit} more")
        return "\n".join(lines)


class LeakageError(ValueError):
    """Training data contains forbidden evaluation material; ``report`` has every hit."""

    def __init__(self, report: LeakageReport) -> None:
        super().__init__(report.summary())
        self.report = report


def find_leaks(
    documents: Iterable[Mapping[str, Any]],
    forbidden: ForbiddenSet,
    questions: Iterable[tuple[str, str]] = (),
    min_shared_sentences: int = 2,
) -> LeakageReport:
    """Check documents (``{"id", "title", "sentences"}`` or ``"abstract"``) and questions
    (``(where, text)`` pairs) against ``forbidden``; never raises on a leak."""
    hits: list[LeakageHit] = []
    n_docs = n_q = 0
    for doc in documents:
        n_docs += 1
        doc_id = str(doc.get("id", f"#{n_docs - 1}"))
        title = doc.get("title") or ""
        sents = doc.get("sentences")
        body = " ".join(sents) if isinstance(sents, list) else str(doc.get("abstract") or "")
        found: dict[str, list[str]] = {}  # forbidden label -> kinds of match, in check order
        if doc_id in forbidden.ids:
            found.setdefault(forbidden.ids[doc_id], []).append("id")
        t = normalise_text(title)
        if t in forbidden.titles:
            found.setdefault(forbidden.titles[t], []).append("title")
        text_hit = next((forbidden.texts[k] for k in map(normalise_text, (body, f"{title} {body}"))
                         if k and k in forbidden.texts), None)
        if text_hit is not None:
            found.setdefault(text_hit, []).append("text")
        else:
            shared = Counter(forbidden.sentences[k] for k in set(_sentence_keys(body)) if k in forbidden.sentences)
            if shared:
                label, n = shared.most_common(1)[0]
                if n >= min_shared_sentences:
                    found.setdefault(label, []).append(f"{n} sentences")
        for label, kinds in found.items():
            hits.append(LeakageHit("+".join(kinds), doc_id, title, label))
    for where, text in questions:
        n_q += 1
        key = normalise_text(text)
        label = forbidden.texts.get(key) or forbidden.titles.get(key)
        if key and label:
            hits.append(LeakageHit("question", where, text, label))
    return LeakageReport(n_docs, n_q, forbidden.sizes(), hits)


def check_no_leakage(
    training: FTUDataset | str | os.PathLike[str],
    forbidden: ForbiddenSet,
    raise_on_leak: bool = True,
    min_shared_sentences: int = 2,
) -> LeakageReport:
    """Check an FTU folder (path) or a loaded :class:`~unifar.datasets.ftu_files.FTUDataset`: every
    document and every question. Raises :class:`LeakageError` on any hit unless
    ``raise_on_leak`` is False."""
    from .ftu_files import FTUDataset, load_ftus

    data = training if isinstance(training, FTUDataset) else load_ftus(training, verify_hashes=False)
    questions = [
        (f"question[{f}] of FTU {ftu.query}", q.text) for ftu in data.ftus for f, q in ftu.questions.items()
    ]
    report = find_leaks(data.documents.values(), forbidden, questions, min_shared_sentences)
    if raise_on_leak and not report.ok:
        raise LeakageError(report)
    return report


# ----- the repository's evaluation data ---------------------------------------------------------
def _default_data_root() -> Path:
    return Path(__file__).resolve().parents[2] / "data"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None


def _parse_smart(path: Path) -> dict[str, dict[str, str]]:
    """Records of a SMART-format file (``.I id`` then ``.T/.A/.B/.W`` fields)."""
    records: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    fieldname = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r"^\.([A-Z])\b\s*(.*)$", line)
        if m and m.group(1) == "I":
            current = {}
            records[m.group(2).strip()] = current
            fieldname = None
        elif m and current is not None:  # a repeated field (cran.all.1400 has one) is appended
            fieldname = m.group(1)
            current[fieldname] = f"{current.get(fieldname, '')} {m.group(2)}"
        elif current is not None and fieldname is not None:
            current[fieldname] = f"{current[fieldname]} {line}"
    return {k: {f: " ".join(v.split()) for f, v in rec.items()} for k, rec in records.items()}


def _add_pubmedqa(fs: ForbiddenSet, folder: Path) -> None:
    pqal, test = folder / "ori_pqal.json", folder / "test_ground_truth.json"
    for p in (pqal, test):
        if not p.is_file():
            raise FileNotFoundError(f"PubMedQA file not found: {p}")
    records, test_ids = _read_json(pqal), _read_json(test)
    missing = [pmid for pmid in test_ids if pmid not in records]
    if missing:
        raise ValueError(f"{test}: {len(missing)} test PMIDs are not in {pqal.name}, e.g. {missing[:3]}")
    for pmid in test_ids:
        rec, label = records[pmid], f"pubmedqa-test {pmid}"
        fs.add_ids([f"pubmedqa:{pmid}", f"pmid:{pmid}"], label)
        fs.add_text(rec.get("QUESTION"), f"{label} question", sentences=False)
        contexts = " ".join(rec.get("CONTEXTS") or [])
        fs.add_text(contexts, f"{label} abstract")
        fs.add_text(f"{contexts} {rec.get('LONG_ANSWER') or ''}", f"{label} abstract")


def _add_cranfield(fs: ForbiddenSet, folder: Path) -> None:
    docs_jsonl, queries_jsonl = folder / "docs.jsonl", folder / "queries.jsonl"
    if docs_jsonl.is_file() and queries_jsonl.is_file():
        with open(docs_jsonl, encoding="utf-8") as f:
            docs = [(str(r["doc_id"]), r.get("title"), r.get("abstract")) for r in map(json.loads, filter(str.strip, f))]
        with open(queries_jsonl, encoding="utf-8") as f:
            queries = [r["text"] for r in map(json.loads, filter(str.strip, f))]
    else:
        raw = folder / "raw" if (folder / "raw").is_dir() else folder
        all_docs, qry = raw / "cran.all.1400", raw / "cran.qry"
        for p in (all_docs, qry):
            if not p.is_file():
                raise FileNotFoundError(f"Cranfield file not found: {p} (nor {docs_jsonl.name})")
        docs = [(k.lstrip("0") or "0", r.get("T"), r.get("W")) for k, r in _parse_smart(all_docs).items()]
        queries = [r.get("W", "") for r in _parse_smart(qry).values()]
    for doc_id, title, abstract in docs:
        fs.add_document(f"cranfield:{doc_id}", title, abstract, f"cranfield doc {doc_id}")
    for i, text in enumerate(queries, start=1):
        fs.add_text(text, f"cranfield question {i}", sentences=False)


def _add_scirepeval_search_test(fs: ForbiddenSet, folder: Path) -> None:
    from .scirepeval import load_scirepeval_search, split_scirepeval_search

    test = split_scirepeval_search(load_scirepeval_search(folder), "test")
    for q in test.questions:
        fs.add_text(q["text"], f"scirepeval-search-test question {q['qid']}", sentences=False)
    for d in test.documents:
        fs.add_document(f"s2:{d['id']}", d["title"], " ".join(d["sentences"]), f"scirepeval-search-test doc {d['id']}")


def forbidden_from_repo_data(
    data_dir: str | Path | None = None,
    include: Iterable[str] = ("csfcube", "pubmedqa", "cranfield", "scirepeval-search"),
    require_all: bool = False,
) -> ForbiddenSet:
    """Build the forbidden set from ``data/`` (default: the repository's).

    CSFCube (``data/csfcube``, required) contributes every paper: ids ``<pid>``,
    ``csfcube:<pid>`` and ``s2:<pid>`` (its paper ids are S2ORC / Semantic Scholar corpus ids,
    the id space of S2-based training corpora), titles and abstracts. PubMedQA
    (``data/pubmedqa_pqal``) contributes the 500 test PMIDs as ``pubmedqa:<pmid>`` and
    ``pmid:<pmid>``, their questions and abstracts (contexts, with and without the
    conclusion). Cranfield (``data/cranfield``: ``docs.jsonl``/``queries.jsonl`` or the raw
    ``cran.all.1400``/``cran.qry``) contributes ``cranfield:<n>`` ids, titles, abstracts and
    the 225 questions. The SciRepEval search sample (``data/scirepeval_samples``) contributes its
    *test half* (:func:`~unifar.datasets.scirepeval.split_scirepeval_search`): the questions and the
    candidate papers as ``s2:<id>``, titles and abstracts. A missing PubMedQA, Cranfield or
    SciRepEval folder is skipped unless ``require_all``.
    """
    root = Path(data_dir) if data_dir is not None else _default_data_root()
    include = set(include)
    unknown = include - {"csfcube", "pubmedqa", "cranfield", "scirepeval-search"}
    if unknown:
        raise ValueError(f"unknown forbidden sources {sorted(unknown)}")
    fs = ForbiddenSet()
    if "csfcube" in include:
        cube = load_csfcube(root / "csfcube", check_texts=False)
        for pid, paper in cube.papers.items():
            label = f"csfcube paper {pid}"
            fs.add_ids([f"csfcube:{pid}", f"s2:{pid}"], label)
            fs.add_document(pid, paper["title"], " ".join(paper["sentences"]), label)
        for row in cube.queries:
            fs.add_title(row.get("title"), f"csfcube paper {row['pid']}")
    for name, folder, add in (("pubmedqa", "pubmedqa_pqal", _add_pubmedqa), ("cranfield", "cranfield", _add_cranfield),
                              ("scirepeval-search", "scirepeval_samples", _add_scirepeval_search_test)):
        if name not in include:
            continue
        if not (root / folder).is_dir():
            if require_all:
                raise FileNotFoundError(f"{root / folder} not found")
            continue
        add(fs, root / folder)
    return fs
