"""Evaluate every system on every benchmark in one run: :func:`evaluate_all`.

One call loads the benchmarks (:data:`unifar.evaluation.benchmarks.LOADERS`), builds the systems
(:func:`unifar.evaluation.systems.build_retrievers`), encodes each document collection once per
system (shared between systems with the same
:attr:`unifar.evaluation.retrievers.Retriever.index_key`), scores every benchmark with its
protocol (:mod:`unifar.evaluation.qdoc` for q-doc, :mod:`unifar.evaluation.csfcube` for CSFCube),
adds 95 % bootstrap intervals over queries (:mod:`unifar.evaluation.bootstrap`) and returns one
JSON-ready dict::

    {"format": "unifar-eval/1",
     "meta": {model, base_model, systems, git commit, machine, timings, options, ...},
     "benchmarks": {name: {"kind": "qdoc" | "csfcube", "protocol": {...}, "data": {path, counts},
                           "strata": {metric: [[qid, ...], ...]} (CSFCube folds) or {},
                           "systems": {system: {"label", "metrics", "ci", "per_query", "subsets",
                                                "n_queries", "seconds"}}}}}

Every metric value is in percent; ``per_query`` keeps the value of every query so that two
systems can be compared later with the paired bootstrap
(:func:`unifar.evaluation.report.compare_systems`). A CSFCube ranking, made here by a retriever
or read from ranking files by the command line (``python -m unifar evaluate csfcube
--rankings DIR``), is scored by :func:`unifar.evaluation.csfcube.score_csfcube_ranking`. Importing this module imports
neither torch nor a model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..files import atomic_file
from ..runtime import run_facts
from .benchmarks import DEFAULT_BENCHMARKS, DORIS_LEVELS, LOADERS, LoadedBenchmark
from .bootstrap import N_RESAMPLES, bootstrap_ci
from .csfcube import csfcube_strata, fold_names, rank_pools, score_csfcube_ranking
from .systems import build_retrievers, public_model, share_frozen_base

__all__ = ["FORMAT", "EvalOptions", "evaluate_all", "load_results", "save_results"]

FORMAT = "unifar-eval/1"


def _with_ci(per_query: Mapping[str, Mapping[str, float]], n_resamples: int, seed: int,
             strata: Mapping[str, list[list[str]]] | None = None) -> dict[str, list[float]]:
    out = {}
    for metric, values in per_query.items():
        ci = bootstrap_ci(values, n_resamples=n_resamples, seed=seed, strata=(strata or {}).get(metric))
        out[metric] = [ci.low, ci.high]
    return out


def _csfcube_system(retriever, loaded: LoadedBenchmark, cache: dict, opts: Mapping[str, Any]) -> dict[str, Any]:
    data, split = loaded.data, loaded.protocol
    t0 = time.perf_counter()
    score_fn = retriever.csfcube_score_fn(data, cache)
    t1 = time.perf_counter()
    ranked = rank_pools(score_fn, data, exclude_query=bool(opts.get("exclude_self", False)))
    t2 = time.perf_counter()
    _, res = score_csfcube_ranking(ranked, data, split)
    t3 = time.perf_counter()
    return {**res, "seconds": {"index": t1 - t0, "score": t2 - t1, "rank_eval": t3 - t2}}


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
    from ..datasets.schema import QDocBenchmark, questions_to_dataset, to_dataset
    from .qdoc import QDocProtocol, evaluate_ranking

    t0 = time.perf_counter()
    docs = to_dataset([{"id": "d", "title": "", "sentences": ["x"], "source": "warm-up"}])
    bench = QDocBenchmark("warm-up", docs, questions_to_dataset([{"qid": "q", "text": "x", "source": "warm-up"}]), {"q": {"d": 1}})
    evaluate_ranking({"q": {"d": 1.0}}, bench, QDocProtocol("warm-up", metrics=("map",), graded_metrics=("ndcg@1",)))
    return time.perf_counter() - t0


def _entry(lb: LoadedBenchmark) -> dict[str, Any]:
    """A benchmark's result entry before any system: kind, data facts, protocol, strata."""
    entry: dict[str, Any] = {"kind": lb.kind, "data": lb.info, "systems": {}, "strata": {}}
    if lb.kind == "csfcube":
        entry["protocol"] = {"name": "csfcube", "split": lb.protocol,
                             "description": "rerank annotated pools; MAP (grade >= 2) and NDCG%20, per facet and all; "
                             + ("mean of fold1_test and fold2_test means" if lb.protocol == "test" else "fold1_dev mean")}
        entry["strata"] = csfcube_strata(lb.data, lb.protocol)
        entry["strata_names"] = list(fold_names(lb.protocol))
    else:
        p = lb.protocol
        entry["protocol"] = {"name": p.name, "metrics": list(p.all_metrics), "graded_metrics": list(p.graded_metrics),
                             "depth": p.depth, "breakdown": p.breakdown, "description": p.description,
                             "relevance_threshold": lb.data.relevance_threshold}
    return entry


def _evaluate_benchmark(lb: LoadedBenchmark, retrievers: Sequence[Any], cache: dict, opts: Mapping[str, Any],
                        n_resamples: int, seed: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Every system on one benchmark: its result entry (one line logged per system)."""
    entry = _entry(lb)
    for r in retrievers:
        if lb.kind == "qdoc" and not getattr(r, "qdoc", True):
            continue  # a doc-doc baseline (the facet-restricted query)
        t0 = time.perf_counter()
        if hasattr(r, "prepare"):
            r.prepare(lb, opts, cache)  # a hybrid chooses its fusion weights on the dev split
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
    return entry


def _load_benchmarks(benchmarks: Sequence[str] | None, opts: Mapping[str, Any]) -> tuple[list[LoadedBenchmark], dict[str, float]]:
    """The benchmarks' data (default :data:`~unifar.evaluation.benchmarks.DEFAULT_BENCHMARKS`,
    plus DORIS-MAE / LitSearch when their paths are given) and the seconds each took to load."""
    if benchmarks is None:
        benchmarks = (list(DEFAULT_BENCHMARKS) + (["doris_mae"] if opts["doris_mae"] else [])
                      + (["litsearch"] if opts["litsearch"] else []))
    unknown = [b for b in benchmarks if b not in LOADERS]
    if unknown:
        raise ValueError(f"unknown benchmarks {unknown}; choose from {', '.join(LOADERS)}")
    loaded: list[LoadedBenchmark] = []
    load_seconds: dict[str, float] = {}
    for name in benchmarks:
        t0 = time.perf_counter()
        loaded.extend(LOADERS[name](opts))
        load_seconds[name] = round(time.perf_counter() - t0, 2)
    return loaded, load_seconds


def _meta(facts: Mapping[str, Any], retrievers: Sequence[Any], loaded: Sequence[LoadedBenchmark],
          options: Mapping[str, Any], n_resamples: int, seed: int, timings: Mapping[str, Any]) -> dict[str, Any]:
    """A result's ``meta``: the systems, benchmarks, options, bootstrap, run facts and timings."""
    return {
        **facts,
        "systems": {r.name: r.describe() for r in retrievers},
        "benchmarks": [lb.name for lb in loaded],
        "options": dict(options),
        "bootstrap": {"n_resamples": n_resamples, "confidence": 0.95, "seed": seed, "method": "percentile, queries resampled"},
        "units": "percent",
        "run": run_facts(),
        **timings,
    }


@dataclass(frozen=True)
class EvalOptions:
    """How :func:`evaluate_all` builds the systems and reads the benchmarks (the command line's
    ``evaluate all`` flags, one field each). Checked when made: a bad value names its field.

    * ``base_model``: the base encoder of the untrained and mean-pooling systems (default: the
      trained model's own); ``max_length``: tokens per input (default: the model's own, 512);
      ``batch_size``, ``device``, ``show_progress``: how encoding runs;
    * ``csfcube_split``: ``test`` (2-fold, reported) or ``dev`` (fold1_dev, for tuning);
      ``scirepeval_part``: ``test`` (reported), ``train`` or ``all``; ``exclude_self``: drop a
      CSFCube query paper from its own pool; ``query_title``: the facet-restricted query keeps
      the title;
    * ``data_dirs``: data folders instead of the shipped ones (``{"csfcube": DIR, "cranfield":
      DIR, ...}``); ``doris_mae``, ``doris_levels``, ``litsearch``: the external benchmarks'
      files (not shipped), evaluated when given;
    * ``n_resamples``, ``seed``: the 95 % bootstrap intervals over queries;
    * ``cache_dir``: mean-pooling embeddings and frozen-base token states are stored there and
      reused by a later identical encoding (chapter 5 reuses chapter 1's CSFCube embeddings);
      results are unchanged;
    * ``labeller``: chapter 2's sentence labeller folder, for the ``hybrid-mean-labeller``
      system (:mod:`unifar.evaluation.hybrid`).

    >>> EvalOptions(batch_size=0)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be positive, got 0
    """

    base_model: str | None = None
    max_length: int | None = None
    batch_size: int = 32
    device: str | None = None
    show_progress: bool = True
    csfcube_split: str = "test"
    scirepeval_part: str = "test"
    exclude_self: bool = False
    query_title: bool = True
    data_dirs: Mapping[str, str] | None = None
    doris_mae: str | os.PathLike[str] | None = None
    doris_levels: Sequence[str] = DORIS_LEVELS
    litsearch: str | os.PathLike[str] | None = None
    n_resamples: int = N_RESAMPLES
    seed: int = 0
    cache_dir: str | os.PathLike[str] | None = None
    labeller: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if self.csfcube_split not in ("test", "dev"):
            raise ValueError(f"csfcube_split must be 'test' or 'dev', got {self.csfcube_split!r}")
        if self.scirepeval_part not in ("test", "train", "all"):
            raise ValueError(f"scirepeval_part must be 'test', 'train' or 'all', got {self.scirepeval_part!r}")
        if self.max_length is not None and self.max_length < 8:
            raise ValueError(f"max_length must be at least 8, got {self.max_length}")
        for name in ("batch_size", "n_resamples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @classmethod
    def with_overrides(cls, options: "EvalOptions | None", overrides: Mapping[str, Any]) -> "EvalOptions":
        """``options`` (default: the defaults) with ``overrides`` applied; an unknown name is a
        ``TypeError`` that lists the fields."""
        unknown = sorted(set(overrides) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"unknown evaluation option(s) {unknown}; the options are "
                            f"{', '.join(f.name for f in fields(cls))}")
        return replace(options or cls(), **overrides)

    def loader_options(self) -> dict[str, Any]:
        """What the benchmark loaders read (:data:`unifar.evaluation.benchmarks.LOADERS`)."""
        dirs = dict(self.data_dirs or {})
        return {
            "csfcube_dir": dirs.get("csfcube"), "cranfield_dir": dirs.get("cranfield"),
            "pubmedqa_dir": dirs.get("pubmedqa"), "scirepeval_dir": dirs.get("scirepeval"),
            "doris_mae": self.doris_mae, "doris_levels": tuple(self.doris_levels), "litsearch": self.litsearch,
            "csfcube_split": self.csfcube_split, "scirepeval_part": self.scirepeval_part,
            "exclude_self": self.exclude_self,
        }

    def recorded(self) -> dict[str, Any]:
        """The options a result's ``meta.options`` records."""
        return {"max_length": self.max_length, "batch_size": self.batch_size, "device": self.device,
                "csfcube_split": self.csfcube_split, "scirepeval_part": self.scirepeval_part,
                "exclude_self": self.exclude_self, "query_title": self.query_title,
                "doris_levels": list(self.doris_levels) if self.doris_mae else None}


def evaluate_all(
    model: Any = None,
    systems: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    options: EvalOptions | None = None,
    *,
    retrievers: Sequence[Any] | None = None,
    extra_retrievers: Sequence[Any] = (),
    log: Callable[[str], None] | None = print,
    index_cache: dict[Any, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Evaluate systems on benchmarks; returns the JSON-ready result (module docstring).

    ``benchmarks`` default :data:`~unifar.evaluation.benchmarks.DEFAULT_BENCHMARKS`, plus
    DORIS-MAE / LitSearch when their paths are given. ``options``: an :class:`EvalOptions`;
    ``overrides`` replace its fields by name (``evaluate_all(model, csfcube_split="dev")``).
    ``retrievers`` replaces the systems built from ``model`` (any
    :class:`unifar.evaluation.retrievers.Retriever`); ``extra_retrievers`` are evaluated beside the
    systems (e.g. chapter 5's single-vector control). ``index_cache``: a
    dict that keeps every system's encoded collections after the run (keyed by ``(index_key,
    collection)``), so that a later measurement on the same systems (e.g.
    :func:`unifar.evaluation.qdoc.pool_rank_changes`) does not encode them again.
    """
    start = time.perf_counter()
    say = log or (lambda _msg: None)
    o = EvalOptions.with_overrides(options, overrides)
    opts = o.loader_options()
    # load the data first: a missing file fails before any model is loaded
    loaded, load_seconds = _load_benchmarks(benchmarks, opts)
    if retrievers is None:
        retrievers, facts = build_retrievers(model, systems, o.base_model, o.max_length, o.batch_size, o.device,
                                             o.show_progress, o.query_title, o.cache_dir, o.labeller)
    else:
        retrievers = list(retrievers)
        facts = {"model": public_model(model) if model is not None else None, "base_model": o.base_model,
                 "trained": None, "load_seconds": {}}
    retrievers = list(retrievers) + list(extra_retrievers)

    shared = share_frozen_base(retrievers, o.cache_dir)
    if shared is not None and sum(getattr(r, "state_cache", None) is shared for r in retrievers) > 1:
        below = f"below their top {shared.top_layers} layer(s) " if shared.top_layers else ""
        say(f"unifar-trained and unifar-untrained share one frozen base {below}: each input is encoded once for both".replace("  ", " "))
    ranx_warmup = _warm_up_ranx() if any(lb.kind == "qdoc" for lb in loaded) else 0.0
    results: dict[str, Any] = {}
    cache: dict[Any, Any] = {} if index_cache is None else index_cache
    for n_done, lb in enumerate(loaded):
        if index_cache is None:  # free encoded collections no later benchmark uses
            still_needed = {x.collection for x in loaded[n_done:]}
            for key in [k for k in cache if k[1] not in still_needed]:
                del cache[key]
        results[lb.name] = _evaluate_benchmark(lb, retrievers, cache, opts, o.n_resamples, o.seed, say)
        if shared is not None and shared.path is not None:
            shared.save()  # on disk: keep every row for later benchmarks, models and chapters
        elif shared is not None:
            shared.states.clear()  # in memory only: the next benchmark has other inputs

    meta = _meta(facts, retrievers, loaded, o.recorded(), o.n_resamples, o.seed,
                 {"data_load_seconds": load_seconds, "ranx_warmup_seconds": round(ranx_warmup, 1),
                  "wall_seconds": round(time.perf_counter() - start, 1)})
    return {"format": FORMAT, "meta": meta, "benchmarks": results}


def save_results(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a result of :func:`evaluate_all` as JSON (parent folders created), atomically: a
    reader (or a parallel run) sees the old file or the new one, never a half-written one."""
    text = json.dumps(result, indent=1) + "\n"
    return atomic_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON written by :func:`save_results` (checks the format tag)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a unifar evaluation result (format {FORMAT!r})")
    return data
