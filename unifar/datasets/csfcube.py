"""CSFCube loader: the faceted query-by-example test collection of Mysore et al. (NeurIPS 2021).

Files (``data/csfcube``, copied from GitHub ``iesl/CSFCube``; see ``PROVENANCE.md`` there):

* ``abstracts-csfcube-preds.jsonl``: one paper per line, ``paper_id``, ``title``, ``abstract``
  (list of sentences), ``pred_labels`` (one CSAbstruct label per sentence) and, in our rebuilt
  copy, ``is_query``; the upstream format (no ``is_query``) is accepted too.
* ``queries-release.csv``: ``pid,facet,year,title,paper type`` for the 50 query-facet pairs.
* ``test-pid2anns-csfcube-<facet>.json``: ``{qpid: {cands, relevance_adju, ...}}``, grades 0-3.
* ``evaluation_splits.json``: ``{facet|all: {fold1_dev, fold1_test, fold2_dev, fold2_test}}``
  with ids ``"<pid>_<facet>"``.

Sentence labels map to facets as CSFCube defines them: background = {background, objective},
method = {method}, result = {result}; ``other_label`` belongs to no facet
(:data:`unifar.facets.CSFCUBE_LABEL_TO_FACET`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..facets import CSFCUBE_LABEL_TO_FACET, FACETS
from .readers import iter_jsonl, read_json

__all__ = [
    "CSFCube",
    "default_data_dir",
    "load_csfcube",
    "read_abstracts",
]

_SPLIT_NAMES = ("fold1_dev", "fold1_test", "fold2_dev", "fold2_test")


def default_data_dir() -> Path:
    """The repository's ``data/csfcube`` folder (found relative to this package)."""
    return Path(__file__).resolve().parents[2] / "data" / "csfcube"


@dataclass
class CSFCube:
    """The CSFCube test collection in memory.

    ``papers[pid] = {"title": str, "sentences": list[str], "labels": list[str]}``;
    ``anns[facet][qpid] = (cands, relevance_adju)`` (adjudicated grades 0-3, same order);
    ``splits[facet|"all"][fold] = ["<pid>_<facet>", ...]``; ``queries`` are the rows of
    ``queries-release.csv``.
    """

    papers: dict[str, dict[str, Any]]
    anns: dict[str, dict[str, tuple[list[str], list[int]]]]
    splits: dict[str, dict[str, list[str]]]
    queries: list[dict[str, str]] = field(default_factory=list)
    root: Path | None = None

    @property
    def query_pids(self) -> list[str]:
        """Distinct query paper ids, in ``queries-release.csv`` order."""
        return list(dict.fromkeys(row["pid"] for row in self.queries))

    def pool_pids(self) -> list[str]:
        """Every paper a CSFCube evaluation touches (queries and rated candidates), sorted."""
        pids = {q for facet in self.anns.values() for q in facet}
        pids.update(c for facet in self.anns.values() for cands, _ in facet.values() for c in cands)
        return sorted(pids)

    def facet_sentences(self, pid: str, facet: str) -> list[str]:
        """The sentences of paper ``pid`` whose predicted label maps to ``facet``."""
        if facet not in FACETS:
            raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS}")
        paper = self.papers[pid]
        return [s for s, lab in zip(paper["sentences"], paper["labels"]) if CSFCUBE_LABEL_TO_FACET.get(lab) == facet]


def read_abstracts(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read ``abstracts-csfcube-preds.jsonl`` into ``{pid: {title, sentences, labels, is_query}}``.

    ``is_query`` is ``None`` when the file is in the upstream format (which lacks it).
    Raises ``ValueError`` naming ``file:line`` for malformed JSON or a bad field.
    """
    path = Path(path)
    papers: dict[str, dict[str, Any]] = {}
    for lineno, rec in iter_jsonl(path):
        where = f"{path}:{lineno}"
        for key in ("paper_id", "title", "abstract", "pred_labels"):
            if key not in rec:
                raise ValueError(f"{where}: missing field {key!r}")
        sentences, labels = rec["abstract"], rec["pred_labels"]
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise ValueError(f"{where}: field 'abstract' must be a list of sentence strings")
        if not isinstance(labels, list) or len(labels) != len(sentences):
            raise ValueError(
                f"{where}: field 'pred_labels' must be a list with one label per sentence "
                f"({len(sentences)} sentences)"
            )
        pid = str(rec["paper_id"])
        if pid in papers:
            raise ValueError(f"{where}: duplicate paper_id {pid!r}")
        papers[pid] = {
            "title": str(rec["title"]),
            "sentences": sentences,
            "labels": [str(x) for x in labels],
            "is_query": rec.get("is_query"),
        }
    return papers


def _read_queries(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"CSFCube file not found: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows, start=2):
        if not row.get("pid") or row.get("facet") not in FACETS:
            raise ValueError(f"{path}:{i}: expected columns pid and facet (one of {FACETS})")
    return rows


def _read_anns(path: Path, facet: str) -> dict[str, tuple[list[str], list[int]]]:
    raw = read_json(path)
    anns: dict[str, tuple[list[str], list[int]]] = {}
    for qpid, rec in raw.items():
        try:
            cands, rels = [str(c) for c in rec["cands"]], [int(r) for r in rec["relevance_adju"]]
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: query {qpid!r}: bad 'cands'/'relevance_adju' ({err})") from None
        if len(cands) != len(rels):
            raise ValueError(f"{path}: query {qpid!r}: {len(cands)} cands but {len(rels)} relevance_adju")
        anns[str(qpid)] = (cands, rels)
    return anns


def load_csfcube(data_dir: str | Path | None = None, check_texts: bool = True) -> CSFCube:
    """Load CSFCube from ``data_dir`` (default: :func:`default_data_dir`).

    With ``check_texts`` every query and rated candidate must have a record in the abstracts file.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"CSFCube data directory not found: {root}")
    papers = read_abstracts(root / "abstracts-csfcube-preds.jsonl")
    queries = _read_queries(root / "queries-release.csv")
    anns = {f: _read_anns(root / f"test-pid2anns-csfcube-{f}.json", f) for f in FACETS}
    splits_path = root / "evaluation_splits.json"
    splits = read_json(splits_path)
    for name in (*FACETS, "all"):
        missing = [s for s in _SPLIT_NAMES if s not in splits.get(name, {})]
        if missing:
            raise ValueError(f"{splits_path}: entry {name!r} lacks {missing}")
    query_pids = {row["pid"] for row in queries}
    for pid, paper in papers.items():
        if paper["is_query"] is None:  # upstream format: derive from queries-release.csv
            paper["is_query"] = pid in query_pids
    data = CSFCube(papers=papers, anns=anns, splits=splits, queries=queries, root=root)
    if check_texts:
        absent = [p for p in data.pool_pids() if p not in papers]
        if absent:
            raise ValueError(
                f"{root / 'abstracts-csfcube-preds.jsonl'}: {len(absent)} annotated papers have no "
                f"record, e.g. {absent[:5]}"
            )
    return data
