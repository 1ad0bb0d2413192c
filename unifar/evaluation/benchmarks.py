"""The benchmarks of an evaluation run: load each one with its protocol and provenance.

:data:`LOADERS` maps a benchmark name to a loader that returns :class:`LoadedBenchmark` records
(DORIS-MAE gives one per level): the data (:mod:`unifar.datasets`), the protocol
(:mod:`unifar.evaluation.qdoc` for q-doc, the split name for CSFCube,
:mod:`unifar.evaluation.csfcube`), the collection's name (benchmarks sharing it share the
encoded index) and the facts recorded with the result (public path, counts, file digests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..datasets.csfcube import FACETS, load_csfcube
from ..datasets.readers import resolve_dir
from ..files import public_path, sha256_file

if TYPE_CHECKING:
    import os

    from ..datasets.schema import QDocBenchmark

__all__ = ["BENCHMARKS", "DEFAULT_BENCHMARKS", "DORIS_LEVELS", "LOADERS", "LoadedBenchmark"]

BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval", "doris_mae", "litsearch")
DEFAULT_BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval")
DORIS_LEVELS = ("query", "aspect", "subquery_2")


def _file_facts(paths: Sequence[Path], max_bytes: int = 64 << 20) -> dict[str, str]:
    return {public_path(p) or str(p): sha256_file(p) for p in paths if p.is_file() and p.stat().st_size <= max_bytes}


# ----------------------------------------------------------------------------- benchmarks
@dataclass
class LoadedBenchmark:
    """A benchmark ready to evaluate: its data, protocol and provenance.

    ``kind`` is ``"qdoc"`` (``data`` a :class:`unifar.datasets.schema.QDocBenchmark`, ``protocol`` a
    :class:`unifar.evaluation.qdoc.QDocProtocol`) or ``"csfcube"`` (``data`` a
    :class:`unifar.datasets.csfcube.CSFCube`, ``protocol`` the split name). ``collection`` names
    the document collection; benchmarks sharing it (DORIS-MAE levels) share the encoded index.
    """

    name: str
    kind: str
    data: Any
    protocol: Any
    collection: str
    info: dict[str, Any] = field(default_factory=dict)


def _qdoc_info(bench: QDocBenchmark, path: str | os.PathLike[str], files: Sequence[Path], **extra: Any) -> dict[str, Any]:
    return {
        "path": public_path(path),
        "questions": len(bench.questions),
        "documents": len(bench.documents),
        "judgements": sum(len(j) for j in bench.qrels.values()),
        "relevance_threshold": bench.relevance_threshold,
        "loader_stats": dict(bench.stats),
        "sha256": _file_facts(files),
        **extra,
    }


def _load_csfcube(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    data = load_csfcube(opts.get("csfcube_dir"))
    root = Path(data.root) if data.root else None
    info = {
        "path": public_path(root),
        "papers": len(data.papers),
        "queries": {f: len(data.anns[f]) for f in FACETS},
        "split": opts.get("csfcube_split", "test"),
        "exclude_query_from_pool": bool(opts.get("exclude_self", False)),
        "sha256": _file_facts([root / "abstracts-csfcube-preds.jsonl", root / "evaluation_splits.json"]) if root else {},
    }
    return [LoadedBenchmark("csfcube", "csfcube", data, opts.get("csfcube_split", "test"), "csfcube", info)]


def _load_cranfield(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from ..datasets.cranfield import load_cranfield
    from .qdoc import CRANFIELD

    root = resolve_dir(opts.get("cranfield_dir"), "cranfield")
    bench = load_cranfield(root)
    files = [root / n for n in ("docs.jsonl", "queries.jsonl", "qrels.tsv", "cran.all.1400", "cran.qry", "cranqrel")]
    return [LoadedBenchmark("cranfield", "qdoc", bench, CRANFIELD, "cranfield", _qdoc_info(bench, root, files))]


def _load_pubmedqa(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from ..datasets.pubmedqa import load_pubmedqa
    from .qdoc import PUBMEDQA

    root = resolve_dir(opts.get("pubmedqa_dir"), "pubmedqa_pqal")
    full = load_pubmedqa(root)  # all 1,000 abstracts are the collection
    rows = [i for i, s in enumerate(full.questions["split"]) if s == "test"]
    if not rows:
        raise ValueError(f"{root}: no official test questions (test_ground_truth.json missing?)")
    questions = full.questions.select(rows)
    qids = list(questions["qid"])
    from ..datasets.schema import QDocBenchmark

    bench = QDocBenchmark(
        name="pubmedqa", documents=full.documents, questions=questions, qrels={q: full.qrels[q] for q in qids},
        candidates=None, relevance_threshold=full.relevance_threshold, stats=dict(full.stats),
    )
    info = _qdoc_info(bench, root, [root / "ori_pqal.json", root / "test_ground_truth.json"],
                      questions_split="test (official test_ground_truth.json)", conclusion_in_document=True)
    return [LoadedBenchmark("pubmedqa", "qdoc", bench, PUBMEDQA, "pubmedqa", info)]


def _load_scirepeval(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from ..datasets.scirepeval import load_scirepeval_search, split_scirepeval_search
    from .qdoc import SCIREPEVAL_SEARCH

    part = opts.get("scirepeval_part", "test")
    root = resolve_dir(opts.get("scirepeval_dir"), "scirepeval_samples")
    full = load_scirepeval_search(root)
    bench = full if part == "all" else split_scirepeval_search(full, part)
    info = _qdoc_info(bench, root, [root / "search_small.jsonl"], part=part)
    return [LoadedBenchmark("scirepeval", "qdoc", bench, SCIREPEVAL_SEARCH, f"scirepeval:{part}", info)]


def _load_doris_mae(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from ..datasets.external import load_doris_mae
    from .qdoc import DORIS_MAE

    path = opts.get("doris_mae")
    if path is None:
        raise ValueError("DORIS-MAE is not shipped: pass the dataset JSON (--doris-mae PATH / doris_mae=PATH)")
    out = []
    for level in opts.get("doris_levels") or DORIS_LEVELS:
        bench = load_doris_mae(path, level=level)
        files = [Path(path)] if Path(path).is_file() else []
        out.append(LoadedBenchmark(f"doris_mae_{level}", "qdoc", bench, DORIS_MAE, "doris_mae",
                                   _qdoc_info(bench, path, files, level=level)))
    return out


def _load_litsearch(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from ..datasets.external import load_litsearch
    from .qdoc import LITSEARCH

    path = opts.get("litsearch")
    if path is None:
        raise ValueError("LitSearch is not shipped: pass its local folder (--litsearch PATH / litsearch=PATH)")
    bench = load_litsearch(path)
    return [LoadedBenchmark("litsearch", "qdoc", bench, LITSEARCH, "litsearch", _qdoc_info(bench, path, []))]


#: benchmark name -> loader(options) -> [LoadedBenchmark]; tests may replace entries.
LOADERS: dict[str, Callable[[Mapping[str, Any]], list[LoadedBenchmark]]] = {
    "csfcube": _load_csfcube,
    "cranfield": _load_cranfield,
    "pubmedqa": _load_pubmedqa,
    "scirepeval": _load_scirepeval,
    "doris_mae": _load_doris_mae,
    "litsearch": _load_litsearch,
}
