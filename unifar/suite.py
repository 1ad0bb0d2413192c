"""Evaluate every system on every benchmark in one run: :func:`evaluate_all`.

One call loads the benchmarks (:data:`LOADERS`), builds the systems (:func:`build_retrievers`),
encodes each document collection once per system (shared between systems with the same
:attr:`unifar.retrievers.Retriever.index_key`), scores every benchmark with its protocol
(:mod:`unifar.qdoc` for q-doc, :mod:`unifar.evaluate` for CSFCube), adds 95 % bootstrap
intervals over queries (:mod:`unifar.bootstrap`) and returns one JSON-ready dict::

    {"format": "unifar-eval/1",
     "meta": {model, base_model, systems, git commit, machine, timings, options, ...},
     "benchmarks": {name: {"kind": "qdoc" | "csfcube", "protocol": {...}, "data": {path, counts},
                           "strata": {metric: [[qid, ...], ...]} (CSFCube folds) or {},
                           "systems": {system: {"label", "metrics", "ci", "per_query", "subsets",
                                                "n_queries", "seconds"}}}}}

Every metric value is in percent; ``per_query`` keeps the value of every query so that two
systems can be compared later with the paired bootstrap (:func:`compare_systems`).
:func:`results_table` turns a result into a pandas DataFrame, :func:`format_results` into text.

Systems (``systems=``): ``bm25``; ``mean`` (the base encoder, mean pooling); ``facet-query``
(CSFCube only: the query paper reduced to its title + the facet's sentences); ``unifar`` (the
model given: a trained UniFAR checkpoint folder, stored as ``unifar-trained``, or an untrained
UniFAR on a base encoder name, stored as ``unifar-untrained``); ``unifar-untrained`` (UniFAR with
untrained aggregation on the base encoder; for a checkpoint, its own configuration on its base).
The baselines use the base encoder: ``base_model`` if given, else the checkpoint's
``config.base_model``, else ``model`` itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bootstrap import N_RESAMPLES, bootstrap_ci, paired_bootstrap
from .files import REPO, sha256_file  # REPO: one definition of the repository root

__all__ = [
    "BENCHMARKS",
    "DEFAULT_BENCHMARKS",
    "DORIS_LEVELS",
    "LOADERS",
    "SYSTEMS",
    "LoadedBenchmark",
    "build_retrievers",
    "compare_systems",
    "evaluate_all",
    "fold_strata",
    "format_results",
    "git_commit",
    "is_unifar_checkpoint",
    "load_results",
    "HEADLINE_METRICS",
    "load_unifar",
    "machine_info",
    "results_table",
    "save_results",
    "seed_spread",
    "strip_timings",
    "verdict_table",
]

FORMAT = "unifar-eval/1"
SYSTEMS = ("bm25", "mean", "facet-query", "unifar", "unifar-untrained")
BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval", "doris_mae", "litsearch")
DEFAULT_BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval")
DORIS_LEVELS = ("query", "aspect", "subquery_2")
#: the metrics systems are compared on, per benchmark (the first is the benchmark's headline);
#: a benchmark not listed (DORIS-MAE levels, LitSearch) is compared on all its metrics
HEADLINE_METRICS = {
    "csfcube": ("all/map", "background/map", "method/map", "result/map"),
    "cranfield": ("ndcg@10", "map"),
    "pubmedqa": ("mrr@10",),
    "scirepeval": ("ndcg@10",),
}


# ----------------------------------------------------------------------------- run facts
def machine_info() -> dict[str, Any]:
    """Platform facts; torch/transformers facts only when the run used them (imported)."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info.update(
            torch=torch.__version__,
            torch_threads=torch.get_num_threads(),
            cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        )
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        info["transformers"] = transformers.__version__
    return info


def git_commit(repo: str | os.PathLike[str] = REPO) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the repository holding the package."""
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        )
        return {"commit": sha.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _public_path(path: str | os.PathLike[str] | None) -> str | None:
    """A path relative to the repository when inside it, else its last component (no home paths)."""
    if path is None:
        return None
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return p.name


def _file_facts(paths: Sequence[Path], max_bytes: int = 64 << 20) -> dict[str, str]:
    return {_public_path(p) or str(p): sha256_file(p) for p in paths if p.is_file() and p.stat().st_size <= max_bytes}


# ----------------------------------------------------------------------------- benchmarks
@dataclass
class LoadedBenchmark:
    """A benchmark ready to evaluate: its data, protocol and provenance.

    ``kind`` is ``"qdoc"`` (``data`` a :class:`unifar.datasets.schema.QDocBenchmark`, ``protocol`` a
    :class:`unifar.qdoc.QDocProtocol`) or ``"csfcube"`` (``data`` a
    :class:`unifar.datasets.csfcube.CSFCube`, ``protocol`` the split name). ``collection`` names
    the document collection; benchmarks sharing it (DORIS-MAE levels) share the encoded index.
    """

    name: str
    kind: str
    data: Any
    protocol: Any
    collection: str
    info: dict[str, Any] = field(default_factory=dict)


def _qdoc_info(bench, path: Any, files: Sequence[Path], **extra: Any) -> dict[str, Any]:
    return {
        "path": _public_path(path),
        "questions": len(bench.questions),
        "documents": len(bench.documents),
        "judgements": sum(len(j) for j in bench.qrels.values()),
        "relevance_threshold": bench.relevance_threshold,
        "loader_stats": dict(bench.stats),
        "sha256": _file_facts(files),
        **extra,
    }


def _load_csfcube(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from .datasets.csfcube import FACETS, load_csfcube

    data = load_csfcube(opts.get("csfcube_dir"))
    root = Path(data.root) if data.root else None
    info = {
        "path": _public_path(root),
        "papers": len(data.papers),
        "queries": {f: len(data.anns[f]) for f in FACETS},
        "split": opts.get("csfcube_split", "test"),
        "exclude_query_from_pool": bool(opts.get("exclude_self", False)),
        "sha256": _file_facts([root / "abstracts-csfcube-preds.jsonl", root / "evaluation_splits.json"]) if root else {},
    }
    return [LoadedBenchmark("csfcube", "csfcube", data, opts.get("csfcube_split", "test"), "csfcube", info)]


def _load_cranfield(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from .datasets.corpora import load_cranfield
    from .datasets.readers import resolve_dir
    from .qdoc import CRANFIELD

    root = resolve_dir(opts.get("cranfield_dir"), "cranfield")
    bench = load_cranfield(root)
    files = [root / n for n in ("docs.jsonl", "queries.jsonl", "qrels.tsv", "cran.all.1400", "cran.qry", "cranqrel")]
    return [LoadedBenchmark("cranfield", "qdoc", bench, CRANFIELD, "cranfield", _qdoc_info(bench, root, files))]


def _load_pubmedqa(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from .datasets.pubmedqa import load_pubmedqa
    from .datasets.readers import resolve_dir
    from .qdoc import PUBMEDQA

    root = resolve_dir(opts.get("pubmedqa_dir"), "pubmedqa_pqal")
    full = load_pubmedqa(root)  # all 1,000 abstracts are the collection
    rows = [i for i, s in enumerate(full.questions["split"]) if s == "test"]
    if not rows:
        raise ValueError(f"{root}: no official test questions (test_ground_truth.json missing?)")
    questions = full.questions.select(rows)
    qids = list(questions["qid"])
    from .datasets.schema import QDocBenchmark

    bench = QDocBenchmark(
        name="pubmedqa", documents=full.documents, questions=questions, qrels={q: full.qrels[q] for q in qids},
        candidates=None, relevance_threshold=full.relevance_threshold, stats=dict(full.stats),
    )
    info = _qdoc_info(bench, root, [root / "ori_pqal.json", root / "test_ground_truth.json"],
                      questions_split="test (official test_ground_truth.json)", conclusion_in_document=True)
    return [LoadedBenchmark("pubmedqa", "qdoc", bench, PUBMEDQA, "pubmedqa", info)]


def _load_scirepeval(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from .datasets.corpora import load_scirepeval_search, split_scirepeval_search
    from .datasets.readers import resolve_dir
    from .qdoc import SCIREPEVAL_SEARCH

    part = opts.get("scirepeval_part", "test")
    root = resolve_dir(opts.get("scirepeval_dir"), "scirepeval_samples")
    full = load_scirepeval_search(root)
    bench = full if part == "all" else split_scirepeval_search(full, part)
    info = _qdoc_info(bench, root, [root / "search_small.jsonl"], part=part)
    return [LoadedBenchmark("scirepeval", "qdoc", bench, SCIREPEVAL_SEARCH, f"scirepeval:{part}", info)]


def _load_doris_mae(opts: Mapping[str, Any]) -> list[LoadedBenchmark]:
    from .datasets.external import load_doris_mae
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
    from .datasets.external import load_litsearch
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


# ----------------------------------------------------------------------------- systems
def is_unifar_checkpoint(path: str | os.PathLike[str]) -> bool:
    """True for a folder written by :meth:`unifar.UniFAR.save_pretrained`."""
    p = Path(path)
    return (p / "config.json").is_file() and any(p.glob("*.safetensors"))


def load_unifar(model: str, max_length: int | None = None, device: str | None = None):
    """A trained UniFAR from a checkpoint folder (keeping its own ``max_tokens`` unless
    ``max_length`` is given), or an untrained UniFAR on a base encoder name (512 by default)."""
    from . import UniFAR, UniFARConfig

    if is_unifar_checkpoint(model):
        m = UniFAR.from_pretrained(model, device=device)
        if max_length is not None:
            m.config.max_tokens = max_length
        return m
    return UniFAR(UniFARConfig(base_model=model, max_tokens=max_length or 512), device=device)


def _public_model(model: Any) -> str:
    return _public_path(model) if isinstance(model, (str, os.PathLike)) and os.path.isabs(str(model)) else str(model)


def build_retrievers(
    model: Any = None,
    systems: Sequence[str] | None = None,
    base_model: str | None = None,
    max_length: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    show_progress: bool = True,
    query_title: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The retrievers for ``systems`` and facts about them (which model is trained, the base).

    ``model``: a UniFAR checkpoint folder, a base encoder name (``minilm``, ``mpnet``, hub id,
    path), or a :class:`unifar.UniFAR` instance (tests, notebooks). ``systems=None`` gives
    ``bm25, mean, facet-query, unifar`` and, for a trained model, also ``unifar-untrained``.
    ``cache_dir``: where the mean-pooling baselines store and reuse their embeddings
    (:class:`unifar.baselines.MeanPoolingEncoder`); None encodes every time.
    """
    import dataclasses

    from .retrievers import BM25Retriever, MeanPoolingRetriever, UniFARRetriever

    trained = None  # a trained UniFAR (instance or checkpoint path)
    config = None
    if model is not None and not isinstance(model, (str, os.PathLike)):
        trained, config = model, model.config
    elif model is not None and is_unifar_checkpoint(model):
        from .config import UniFARConfig

        trained, config = str(model), UniFARConfig.from_json(Path(model) / "config.json")
    base = base_model or (config.base_model if config is not None else (str(model) if model is not None else None))
    if systems is None:
        systems = ["bm25", "mean", "facet-query", "unifar"] + (["unifar-untrained"] if trained is not None else [])
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    keys = []
    for s in systems:
        key = "unifar-trained" if s == "unifar" and trained is not None else "unifar-untrained" if s == "unifar" else s
        if key not in keys:
            keys.append(key)
    needs_base = [k for k in keys if k in ("mean", "facet-query", "unifar-untrained")]
    if needs_base and base is None:
        raise ValueError(f"systems {needs_base} need a base encoder: give model= or base_model=")

    out: list[Any] = []
    facts: dict[str, Any] = {"model": _public_model(model) if model is not None else None, "base_model": _public_model(base) if base else None,
                             "trained": trained is not None, "load_seconds": {}}
    encoder = None
    for key in keys:
        t0 = time.perf_counter()
        if key == "bm25":
            out.append(BM25Retriever())
        elif key in ("mean", "facet-query"):
            if encoder is None:
                from .baselines import MeanPoolingEncoder

                encoder = MeanPoolingEncoder(base, max_length or 512, batch_size, device, show_progress=show_progress,
                                             cache_dir=cache_dir)
            out.append(MeanPoolingRetriever(encoder, facet_query=key == "facet-query", query_title=query_title))
        elif key == "unifar-trained":  # a checkpoint keeps its own max_tokens unless max_length is given
            m = load_unifar(trained, max_length, device) if isinstance(trained, str) else trained
            out.append(UniFARRetriever(m, name=key, label=f"UniFAR trained ({facts['model']})", batch_size=batch_size,
                                       show_progress=show_progress, model_id=f"trained:{facts['model']}"))
        else:  # unifar-untrained
            from . import UniFAR

            cfg = dataclasses.replace(config, base_model=base) if config is not None else None
            if cfg is None:
                m = load_unifar(base, max_length, device)
            else:
                if max_length is not None:
                    cfg = dataclasses.replace(cfg, max_tokens=max_length)
                m = UniFAR(cfg, device=device)
            out.append(UniFARRetriever(m, name=key, label=f"UniFAR untrained ({facts['base_model']})", batch_size=batch_size,
                                       show_progress=show_progress, model_id=f"untrained:{facts['base_model']}"))
        facts["load_seconds"][key] = round(time.perf_counter() - t0, 2)
    return out, facts


def _differing_top_layers(ref: Any, other: Any) -> int | None:
    """0 when two UniFAR models have identical base encoders, ``k`` when they differ only in the
    top ``k`` transformer layers of a BERT-style base (one trained with ``--train-top-layers``),
    None otherwise (other encoders, token budgets or weights below the top layers)."""
    import re

    import torch

    if type(other.base) is not type(ref.base) or other.config.max_tokens != ref.config.max_tokens:
        return None
    a, b = ref.base.state_dict(), other.base.state_dict()
    if a.keys() != b.keys():
        return None
    differ = [k for k in a if not torch.equal(a[k], b[k].to(a[k].device))]
    if not differ:
        return 0
    try:
        n = len(ref.base_layers())
    except NotImplementedError:  # the base cannot be split: only identical bases share
        return None
    layer = [re.match(r"encoder\.layer\.(\d+)\.", k) for k in differ]
    if not all(layer):
        return None  # embeddings (or anything outside the layers) differ
    return n - min(int(m.group(1)) for m in layer)


def share_frozen_base(retrievers: Sequence[Any], cache_dir: str | os.PathLike[str] | None = None) -> Any | None:
    """Give the UniFAR retrievers whose base encoders hold identical weights (e.g. untrained UniFAR
    and UniFAR trained with ``--freeze-base``) one :class:`~unifar.model.TokenStateCache`, so the
    base runs once per input for all of them. Bases that differ only in their top ``k`` layers
    (``--train-top-layers k``) share the states entering those layers, and each model runs its own
    top layers on them. With ``cache_dir``, the cache starts from the states an earlier run saved
    there for the same base (:meth:`~unifar.model.TokenStateCache.on_disk`; chapter 1 saves
    CSFCube's); then a single UniFAR model gets the on-disk cache too, so that evaluating another
    model on the same frozen base (a second training seed) reads the states instead of running the
    base again. Returns the cache, or None when nothing is shared."""
    from .model import TokenStateCache
    from .retrievers import UniFARRetriever

    models = [r for r in retrievers if isinstance(r, UniFARRetriever)]
    if len(models) == 1 and cache_dir is not None:
        cache = TokenStateCache.on_disk(models[0].model, cache_dir)
        models[0].state_cache = cache
        return cache
    if len(models) < 2:
        return None
    ref = models[0].model
    depth = {id(r): _differing_top_layers(ref, r.model) for r in models}
    group = [r for r in models if depth[id(r)] is not None]
    if len(group) < 2:
        return None
    top = max(depth[id(r)] for r in group)
    cache = TokenStateCache.on_disk(ref, cache_dir, top_layers=top) if cache_dir is not None else TokenStateCache(top_layers=top)
    for r in group:
        r.state_cache = cache
    return cache


# ----------------------------------------------------------------------------- evaluation
def _with_ci(per_query: Mapping[str, Mapping[str, float]], n_resamples: int, seed: int,
             strata: Mapping[str, list[list[str]]] | None = None) -> dict[str, list[float]]:
    out = {}
    for metric, values in per_query.items():
        ci = bootstrap_ci(values, n_resamples=n_resamples, seed=seed, strata=(strata or {}).get(metric))
        out[metric] = [ci.low, ci.high]
    return out


def _csfcube_system(retriever, loaded: LoadedBenchmark, cache: dict, opts: Mapping[str, Any]) -> dict[str, Any]:
    from .evaluate import aggregate_csfcube, csfcube_per_query, rank_pools

    data, split = loaded.data, loaded.protocol
    t0 = time.perf_counter()
    score_fn = retriever.csfcube_score_fn(data, cache)
    t1 = time.perf_counter()
    ranked = rank_pools(score_fn, data, exclude_query=bool(opts.get("exclude_self", False)))
    t2 = time.perf_counter()
    per_facet = csfcube_per_query(ranked, data)
    agg = aggregate_csfcube(per_facet, data, split=split)
    keyed = {f"{q}_{f}": m for f, per_q in per_facet.items() for q, m in per_q.items()}
    metrics, per_query = {}, {}
    for target, values in agg.items():
        ids = [i for fold in _fold_names(split) for i in data.splits[target][fold]]
        for m, v in values.items():
            metrics[f"{target}/{m}"] = v
            per_query[f"{target}/{m}"] = {i: 100.0 * keyed[i][m] for i in ids}
    t3 = time.perf_counter()
    return {"metrics": metrics, "per_query": per_query, "n_queries": len(per_query.get("all/map", {})),
            "seconds": {"index": t1 - t0, "score": t2 - t1, "rank_eval": t3 - t2}}


def _qdoc_system(retriever, lb: LoadedBenchmark, cache: dict, n_resamples: int, seed: int) -> dict[str, Any]:
    from .qdoc import evaluate_qdoc

    bench = lb.data
    key = (retriever.index_key, lb.collection)
    ids = list(bench.documents["id"])
    t0 = time.perf_counter()
    hit = cache.get(key)
    reused = hit is not None and hit[0] == ids
    if reused:
        index = hit[1]
    else:
        index = retriever.index(bench.documents.select_columns(["id", "title", "sentences"]).to_list())
        cache[key] = (ids, index)
    index_seconds = time.perf_counter() - t0
    q = evaluate_qdoc(retriever, bench, lb.protocol, doc_index=index)
    subsets = {}
    for name, sub in q.subsets.items():
        members = sub["qids"]
        subsets[name] = {"n": len(members), "metrics": sub["metrics"], "qids": members,
                         "ci": _with_ci({m: {i: v[i] for i in members} for m, v in q.per_query.items()}, n_resamples, seed)}
    return {"metrics": q.metrics, "ci": _with_ci(q.per_query, n_resamples, seed), "per_query": q.per_query,
            "subsets": subsets, "n_queries": q.n_queries, "skipped_no_relevant": q.skipped_no_relevant,
            "index_reused": reused, "seconds": {**q.seconds, "index": index_seconds}}


def _warm_up_ranx() -> float:
    """Import ranx and compile its numba code once, so that per-system timings exclude it."""
    from .qdoc import evaluate_ranking, QDocProtocol
    from .datasets.schema import QDocBenchmark, questions_to_dataset, to_dataset

    t0 = time.perf_counter()
    docs = to_dataset([{"id": "d", "title": "", "sentences": ["x"], "source": "warm-up"}])
    bench = QDocBenchmark("warm-up", docs, questions_to_dataset([{"qid": "q", "text": "x", "source": "warm-up"}]), {"q": {"d": 1}})
    evaluate_ranking({"q": {"d": 1.0}}, bench, QDocProtocol("warm-up", metrics=("map",), graded_metrics=("ndcg@1",)))
    return time.perf_counter() - t0


def _fold_names(split: str) -> tuple[str, ...]:
    return ("fold1_test", "fold2_test") if split == "test" else ("fold1_dev",)


def _csfcube_strata(data, split: str) -> dict[str, list[list[str]]]:
    from .evaluate import CSFCUBE_FACETS

    return {f"{t}/{m}": [list(data.splits[t][f]) for f in _fold_names(split)]
            for t in CSFCUBE_FACETS for m in ("map", "ndcg%20") if t in data.splits}


def evaluate_all(
    model: Any = None,
    systems: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    *,
    base_model: str | None = None,
    max_length: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    doris_mae: str | os.PathLike[str] | None = None,
    doris_levels: Sequence[str] = DORIS_LEVELS,
    litsearch: str | os.PathLike[str] | None = None,
    csfcube_split: str = "test",
    scirepeval_part: str = "test",
    exclude_self: bool = False,
    query_title: bool = True,
    data_dirs: Mapping[str, str] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    show_progress: bool = True,
    retrievers: Sequence[Any] | None = None,
    log: Callable[[str], None] | None = print,
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Evaluate systems on benchmarks; returns the JSON-ready result (module docstring).

    ``benchmarks`` default :data:`DEFAULT_BENCHMARKS`, plus ``doris_mae`` / ``litsearch`` when
    their paths are given. ``csfcube_split``: ``test`` (2-fold, reported) or ``dev``
    (fold1_dev, for tuning). ``scirepeval_part``: ``test`` (reported), ``train`` or ``all``.
    ``data_dirs`` overrides data folders (``{"csfcube": DIR, "cranfield": DIR, ...}``).
    ``retrievers`` replaces the systems built from ``model`` (any :class:`unifar.retrievers.Retriever`).
    ``cache_dir``: mean-pooling embeddings are stored there and reused by a later identical
    encoding (e.g. chapter 5 reuses chapter 1's CSFCube embeddings), and frozen-base token states
    saved there (chapter 1 saves CSFCube's) are read back; results are unchanged.
    """
    start = time.perf_counter()
    say = log or (lambda _msg: None)
    if csfcube_split not in ("test", "dev"):
        raise ValueError(f"csfcube_split must be 'test' or 'dev', got {csfcube_split!r}")
    if scirepeval_part not in ("test", "train", "all"):
        raise ValueError(f"scirepeval_part must be 'test', 'train' or 'all', got {scirepeval_part!r}")
    if benchmarks is None:
        benchmarks = list(DEFAULT_BENCHMARKS) + (["doris_mae"] if doris_mae else []) + (["litsearch"] if litsearch else [])
    unknown = [b for b in benchmarks if b not in LOADERS]
    if unknown:
        raise ValueError(f"unknown benchmarks {unknown}; choose from {', '.join(LOADERS)}")
    dirs = dict(data_dirs or {})
    opts = {
        "csfcube_dir": dirs.get("csfcube"), "cranfield_dir": dirs.get("cranfield"), "pubmedqa_dir": dirs.get("pubmedqa"),
        "scirepeval_dir": dirs.get("scirepeval"), "doris_mae": doris_mae, "doris_levels": tuple(doris_levels),
        "litsearch": litsearch, "csfcube_split": csfcube_split, "scirepeval_part": scirepeval_part,
        "exclude_self": exclude_self,
    }
    # load the data first: a missing file fails before any model is loaded
    loaded: list[LoadedBenchmark] = []
    load_seconds: dict[str, float] = {}
    for name in benchmarks:
        t0 = time.perf_counter()
        loaded.extend(LOADERS[name](opts))
        load_seconds[name] = round(time.perf_counter() - t0, 2)
    if retrievers is None:
        retrievers, facts = build_retrievers(model, systems, base_model, max_length, batch_size, device, show_progress, query_title,
                                               cache_dir)
    else:
        retrievers = list(retrievers)
        facts = {"model": _public_model(model) if model is not None else None, "base_model": base_model, "trained": None, "load_seconds": {}}

    shared = share_frozen_base(retrievers, cache_dir)
    if shared is not None and sum(getattr(r, "state_cache", None) is shared for r in retrievers) > 1:
        below = f"below their top {shared.top_layers} layer(s) " if shared.top_layers else ""
        say(f"unifar-trained and unifar-untrained share one frozen base {below}: each input is encoded once for both".replace("  ", " "))
    ranx_warmup = _warm_up_ranx() if any(lb.kind == "qdoc" for lb in loaded) else 0.0
    results: dict[str, Any] = {}
    cache: dict[Any, Any] = {}
    for n_done, lb in enumerate(loaded):
        still_needed = {x.collection for x in loaded[n_done:]}
        for key in [k for k in cache if k[1] not in still_needed]:
            del cache[key]  # free encoded collections no later benchmark uses
        entry: dict[str, Any] = {"kind": lb.kind, "data": lb.info, "systems": {}, "strata": {}}
        if lb.kind == "csfcube":
            entry["protocol"] = {"name": "csfcube", "split": lb.protocol,
                                 "description": "rerank annotated pools; MAP (grade >= 2) and NDCG%20, per facet and all; "
                                 + ("mean of fold1_test and fold2_test means" if lb.protocol == "test" else "fold1_dev mean")}
            entry["strata"] = _csfcube_strata(lb.data, lb.protocol)
            entry["strata_names"] = list(_fold_names(lb.protocol))
        else:
            p = lb.protocol
            entry["protocol"] = {"name": p.name, "metrics": list(p.all_metrics), "graded_metrics": list(p.graded_metrics),
                                 "depth": p.depth, "breakdown": p.breakdown, "description": p.description,
                                 "relevance_threshold": lb.data.relevance_threshold}
        for r in retrievers:
            if lb.kind == "qdoc" and getattr(r, "facet_query", False):
                continue  # the facet-restricted query is a doc-doc baseline
            t0 = time.perf_counter()
            if lb.kind == "csfcube":
                res = _csfcube_system(r, lb, cache, opts)
                res["ci"] = _with_ci(res["per_query"], n_resamples, seed, entry["strata"])
                res["subsets"], res["skipped_no_relevant"] = {}, 0
            else:
                res = _qdoc_system(r, lb, cache, n_resamples, seed)
            res["seconds"] = {k: round(v, 2) for k, v in res["seconds"].items()}
            res["seconds"]["total"] = round(time.perf_counter() - t0, 2)
            res = {"label": r.label, **res}
            entry["systems"][r.name] = res
            shown = [m for m in res["metrics"] if m.startswith("all/")] or list(res["metrics"])[:4]
            say(f"{lb.name:<22} {r.name:<18} {res['seconds']['total']:>8.1f} s  "
                + "  ".join(f"{m}={res['metrics'][m]:.2f}" for m in shown))
        results[lb.name] = entry
        if shared is not None and shared.path is not None:
            shared.save()  # on disk: keep every row for later benchmarks, models and chapters
        elif shared is not None:
            shared.states.clear()  # in memory only: the next benchmark has other inputs

    meta = {
        **facts,
        "systems": {r.name: r.describe() for r in retrievers},
        "benchmarks": [lb.name for lb in loaded],
        "options": {"max_length": max_length, "batch_size": batch_size, "device": device, "csfcube_split": csfcube_split,
                    "scirepeval_part": scirepeval_part, "exclude_self": exclude_self, "query_title": query_title,
                    "doris_levels": list(doris_levels) if doris_mae else None},
        "bootstrap": {"n_resamples": n_resamples, "confidence": 0.95, "seed": seed, "method": "percentile, queries resampled"},
        "units": "percent",
        "git": git_commit(),
        "machine": machine_info(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "data_load_seconds": load_seconds,
        "ranx_warmup_seconds": round(ranx_warmup, 1),
        "wall_seconds": round(time.perf_counter() - start, 1),
    }
    return {"format": FORMAT, "meta": meta, "benchmarks": results}


# ----------------------------------------------------------------------------- results
def save_results(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a result of :func:`evaluate_all` as JSON (parent folders created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return out


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON written by :func:`save_results` (checks the format tag)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a unifar evaluation result (format {FORMAT!r})")
    return data


def _total_seconds(res: Mapping[str, Any]) -> float:
    """A system's total seconds; NaN for a result saved without timings (:func:`strip_timings`)."""
    return float(res.get("seconds", {}).get("total", float("nan")))


def results_table(result: Mapping[str, Any], wide: bool = False, subsets: bool = False):
    """The result as a pandas DataFrame.

    Long form (default): one row per benchmark, system and metric with columns ``benchmark,
    system, label, metric, value, ci_low, ci_high, n_queries, seconds``. ``wide=True``: one
    row per (benchmark, system), one column per metric (values only). ``subsets=True`` adds
    the breakdown rows (LitSearch specificity) with ``metric`` suffixed ``[specificity=1]``.
    """
    import pandas as pd

    rows = []
    for bench, entry in result["benchmarks"].items():
        for system, res in entry["systems"].items():
            for metric, value in res["metrics"].items():
                lo, hi = res["ci"].get(metric, [None, None])
                rows.append({"benchmark": bench, "system": system, "label": res["label"], "metric": metric, "value": value,
                             "ci_low": lo, "ci_high": hi, "n_queries": res["n_queries"], "seconds": _total_seconds(res)})
            if subsets:
                for sub, vals in res.get("subsets", {}).items():
                    for metric, value in vals["metrics"].items():
                        lo, hi = vals["ci"].get(metric, [None, None])
                        rows.append({"benchmark": bench, "system": system, "label": res["label"], "metric": f"{metric}[{sub}]",
                                     "value": value, "ci_low": lo, "ci_high": hi, "n_queries": vals["n"],
                                     "seconds": _total_seconds(res)})
    df = pd.DataFrame(rows, columns=["benchmark", "system", "label", "metric", "value", "ci_low", "ci_high", "n_queries", "seconds"])
    if not wide:
        return df
    order = list(dict.fromkeys(df["metric"]))
    table = df.pivot_table(index=["benchmark", "system"], columns="metric", values="value", sort=False)
    return table[[m for m in order if m in table.columns]]


def format_results(result: Mapping[str, Any], ci: bool = True) -> str:
    """A fixed-width text table: per benchmark, one row per system, ``value [low, high]``
    per metric (percent, 2 decimals), the number of queries and the seconds taken."""
    lines = []
    for bench, entry in result["benchmarks"].items():
        systems = entry["systems"]
        if not systems:
            continue
        metrics = list(next(iter(systems.values()))["metrics"])
        width = 22 if ci else 8
        head = f"{bench:<20} {'system':<18} " + " ".join(f"{m:>{width}}" for m in metrics) + f" {'n':>5} {'seconds':>8}"
        lines.append(head)
        for name, res in systems.items():
            cells = []
            for m in metrics:
                v = res["metrics"][m]
                if ci:
                    lo, hi = res["ci"][m]
                    cells.append(f"{f'{v:.2f} [{lo:.1f}, {hi:.1f}]':>{width}}")
                else:
                    cells.append(f"{v:>{width}.2f}")
            lines.append(f"{'':<20} {name:<18} " + " ".join(cells) + f" {res['n_queries']:>5} {_total_seconds(res):>8.1f}")
        lines.append("")
    return "\n".join(lines).rstrip()


def fold_strata(entry: Mapping[str, Any], metric: str) -> dict[str, list[str]]:
    """``{fold name: query ids}`` of one CSFCube metric of a result entry (results written before
    the fold names were stored hold the folds in :func:`_fold_names` order)."""
    groups = entry.get("strata", {}).get(metric) or []
    names = entry.get("strata_names") or list(_fold_names(entry.get("protocol", {}).get("split", "test")))
    if len(names) != len(groups):
        raise ValueError(f"{metric}: {len(groups)} query groups but fold names {names}")
    return dict(zip(names, groups))


def compare_systems(result: Mapping[str, Any], benchmark: str, a: str, b: str, metrics: Sequence[str] | None = None,
                    n_resamples: int = N_RESAMPLES, seed: int = 0, fold: str | None = None):
    """Paired bootstrap of system ``a`` minus system ``b`` on one benchmark, per metric.

    Returns a DataFrame with ``metric, a, b, diff, ci_low, ci_high, flip, within_noise, n``
    (percentage points). CSFCube metrics are resampled within their folds. ``fold`` (CSFCube
    only) restricts the comparison to the queries of one fold, e.g. ``"fold1_test"``: CSFCube's
    fold1_dev *is* fold2_test, so a system tuned on fold1_dev has an untouched estimate on
    fold1_test alone; ``a`` and ``b`` are then that fold's means.
    """
    import numpy as np
    import pandas as pd

    entry = result["benchmarks"][benchmark]
    for s in (a, b):
        if s not in entry["systems"]:
            raise KeyError(f"{benchmark}: no system {s!r}; have {sorted(entry['systems'])}")
    if fold is not None and entry.get("kind") != "csfcube":
        raise ValueError(f"fold= applies to CSFCube only, not to {benchmark!r}")
    ra, rb = entry["systems"][a], entry["systems"][b]
    rows = []
    for m in metrics or list(ra["metrics"]):
        va, vb, strata = ra["per_query"][m], rb["per_query"][m], entry.get("strata", {}).get(m)
        mean_a, mean_b = ra["metrics"][m], rb["metrics"][m]
        if fold is not None:
            folds = fold_strata(entry, m)
            if fold not in folds:
                raise KeyError(f"{benchmark}/{m}: no fold {fold!r}; have {sorted(folds)}")
            ids = folds[fold]
            va, vb, strata = {i: va[i] for i in ids}, {i: vb[i] for i in ids}, None
            mean_a, mean_b = float(np.mean(list(va.values()))), float(np.mean(list(vb.values())))
        r = paired_bootstrap(va, vb, n_resamples=n_resamples, seed=seed, strata=strata)
        rows.append({"metric": m, "a": mean_a, "b": mean_b, "diff": r.diff, "ci_low": r.low,
                     "ci_high": r.high, "flip": r.flip, "within_noise": r.within_noise, "n": r.n})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- chapter helpers
#: what :func:`strip_timings` drops from ``meta``: timings and the run's facts
RUN_FACT_KEYS = ("load_seconds", "data_load_seconds", "ranx_warmup_seconds", "wall_seconds", "git", "machine",
                 "date")


def strip_timings(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result of :func:`evaluate_all` without what differs between two runs of the same
    evaluation: every system's ``seconds`` and the ``meta`` timings, commit, machine and date
    (:data:`RUN_FACT_KEYS`; a chapter's results file keeps those as its run facts). Metrics,
    intervals, per-query values and the data's provenance stay; :func:`results_table`,
    :func:`format_results` and :func:`compare_systems` accept the stripped result.

    >>> r = {"format": FORMAT, "meta": {"model": "m", "wall_seconds": 3.0},
    ...      "benchmarks": {"b": {"systems": {"s": {"metrics": {"map": 1.0}, "seconds": {"total": 2}}}}}}
    >>> strip_timings(r)["meta"], strip_timings(r)["benchmarks"]["b"]["systems"]["s"]
    ({'model': 'm'}, {'metrics': {'map': 1.0}})
    """
    import copy

    out = copy.deepcopy(dict(result))
    out["meta"] = {k: v for k, v in out.get("meta", {}).items() if k not in RUN_FACT_KEYS}
    for entry in out.get("benchmarks", {}).values():
        for res in entry.get("systems", {}).values():
            res.pop("seconds", None)
    return out


def _verdict(diff: float, noise: bool) -> str:
    return "within noise" if noise else ("better" if diff > 0 else "worse")


def verdict_table(result: Mapping[str, Any], a: str = "unifar-trained",
                  others: Sequence[str] = ("mean", "unifar-untrained", "bm25"),
                  metrics: Mapping[str, Sequence[str] | None] | None = None, n_resamples: int = N_RESAMPLES,
                  seed: int = 0, folds: Sequence[str] | None = None):
    """The paired bootstrap (:func:`compare_systems`) of system ``a`` against each of ``others``
    on every benchmark of ``result`` that has both, as one DataFrame with the columns
    ``benchmark, fold, vs, metric, a, b, diff, ci_low, ci_high, flip, within_noise, n, verdict``
    (percentage points; ``verdict`` is "better" or "worse" when the 95 % interval of the
    difference excludes 0, else "within noise"; ``fold`` is "" for the whole benchmark).

    ``metrics``: benchmark -> metrics compared (default :data:`HEADLINE_METRICS`; a benchmark
    not listed, or listed as None, is compared on all its metrics). ``folds``: compare within
    each named CSFCube fold (e.g. ``["fold1_test", "fold2_test"]``) instead of on the whole
    benchmark; q-doc benchmarks are then left out. Benchmarks without ``a`` give no rows, and
    ``others`` missing from a benchmark are skipped (BM25 is everywhere, facet-query CSFCube only).
    """
    import pandas as pd

    metrics = HEADLINE_METRICS if metrics is None else metrics
    columns = ["benchmark", "fold", "vs", "metric", "a", "b", "diff", "ci_low", "ci_high", "flip", "within_noise",
               "n", "verdict"]
    frames = []
    for bench, entry in result["benchmarks"].items():
        systems = entry["systems"]
        if a not in systems or (folds is not None and entry.get("kind") != "csfcube"):
            continue
        for fold in folds if folds is not None else [None]:
            for other in [o for o in others if o in systems and o != a]:
                cmp = compare_systems(result, bench, a, other, metrics=metrics.get(bench), n_resamples=n_resamples,
                                      seed=seed, fold=fold)
                frames.append(cmp.assign(benchmark=bench, fold=fold or "", vs=other))
    if not frames:
        return pd.DataFrame(columns=columns)
    out = pd.concat(frames, ignore_index=True)
    out["verdict"] = [_verdict(d, w) for d, w in zip(out["diff"], out["within_noise"])]
    return out[columns]


def seed_spread(results: Mapping[str, Mapping[str, Any]], system: str = "unifar-trained",
                metrics: Mapping[str, Sequence[str] | None] | None = None):
    """How much one system's metrics move between training seeds: ``results`` maps a label
    (``"seed0"``) to a result of :func:`evaluate_all` (or anything with its ``benchmarks``) of
    the model trained with that seed. One row per benchmark and metric (default
    :data:`HEADLINE_METRICS`; benchmarks missing from a result are left out) with a column per
    label, then ``mean, min, max, range`` (max - min) over the labels and ``n_seeds``.

    >>> def run(v):
    ...     return {"benchmarks": {"scirepeval": {"systems": {"unifar-trained": {"metrics": {"ndcg@10": v}}}}}}
    >>> t = seed_spread({"seed0": run(60.0), "seed1": run(62.0), "seed2": run(64.0)})
    >>> t[["benchmark", "metric", "seed1", "mean", "min", "max", "range", "n_seeds"]].to_dict("records")
    [{'benchmark': 'scirepeval', 'metric': 'ndcg@10', 'seed1': 62.0, 'mean': 62.0, 'min': 60.0, 'max': 64.0, 'range': 4.0, 'n_seeds': 3}]
    """
    import numpy as np
    import pandas as pd

    if not results:
        raise ValueError("seed_spread needs at least one result")
    metrics = HEADLINE_METRICS if metrics is None else metrics
    labels = list(results)
    benches = [b for b in next(iter(results.values()))["benchmarks"]
               if all(b in r["benchmarks"] for r in results.values())]
    rows = []
    for bench in benches:
        per_label = {}
        for label, r in results.items():
            systems = r["benchmarks"][bench]["systems"]
            if system not in systems:
                raise KeyError(f"{label}/{bench}: no system {system!r}; have {sorted(systems)}")
            per_label[label] = systems[system]["metrics"]
        wanted = metrics.get(bench) or list(per_label[labels[0]])
        for m in wanted:
            values = [float(per_label[label][m]) for label in labels]
            rows.append({"benchmark": bench, "metric": m, **dict(zip(labels, values)), "mean": float(np.mean(values)),
                         "min": min(values), "max": max(values), "range": max(values) - min(values),
                         "n_seeds": len(values)})
    return pd.DataFrame(rows, columns=["benchmark", "metric", *labels, "mean", "min", "max", "range", "n_seeds"])
