"""Report a result of :func:`unifar.evaluation.runner.evaluate_all`: tables, paired comparisons,
verdicts and the spread over training seeds.

* :func:`results_table` (pandas) and :func:`format_results` (fixed-width text);
* :func:`compare_systems`: the paired bootstrap of two systems on one benchmark
  (:func:`unifar.evaluation.bootstrap.paired_bootstrap`; CSFCube resampled within its folds,
  :func:`fold_strata`), and :func:`verdict_table` of one system against others on every
  benchmark, on the :data:`HEADLINE_METRICS`;
* :func:`seed_spread`: how much one system's metrics move between training seeds;
* :func:`strip_timings`: a result without what differs between two runs of one evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .bootstrap import N_RESAMPLES, paired_bootstrap
from .csfcube import fold_names

__all__ = ["HEADLINE_METRICS", "RUN_FACT_KEYS", "compare_systems", "csfcube_map_table", "fold_strata", "format_results",
           "results_table",
           "seed_spread", "seed_spread_table", "strip_timings", "verdict_table"]

#: the metrics systems are compared on, per benchmark (the first is the benchmark's headline);
#: a benchmark not listed (DORIS-MAE levels, LitSearch) is compared on all its metrics
HEADLINE_METRICS = {
    "csfcube": ("all/map", "background/map", "method/map", "result/map"),
    "cranfield": ("ndcg@10", "map"),
    "pubmedqa": ("mrr@10",),
    "scirepeval": ("ndcg@10",),
}


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


def csfcube_map_table(result: Mapping[str, Any], source: str):
    """CSFCube MAP per facet and aggregated (columns ``background MAP`` ... ``aggregated MAP``)
    of every system of ``result``, indexed by ``(source, system)``: the layout of the paper's
    table 2, so that rows measured here stack under the paper's (chapters 5 and 7).

    >>> m = {f"{f}/map": v for f, v in zip(("background", "method", "result", "all"), (1, 2, 3, 4))}
    >>> csfcube_map_table({"benchmarks": {"csfcube": {"systems": {"mean": {"metrics": m}}}}}, "here")
               background MAP  method MAP  result MAP  aggregated MAP
    here mean               1           2           3               4
    """
    import pandas as pd

    names = {"background": "background", "method": "method", "result": "result", "aggregated": "all"}
    systems = result["benchmarks"]["csfcube"]["systems"]
    table = pd.DataFrame({name: {f"{f} MAP": r["metrics"][f"{m}/map"] for f, m in names.items()}
                          for name, r in systems.items()}).T
    table.index = pd.MultiIndex.from_product([[source], table.index])
    return table


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
    the fold names were stored hold the folds in :func:`~unifar.evaluation.csfcube.fold_names` order)."""
    groups = entry.get("strata", {}).get(metric) or []
    names = entry.get("strata_names") or list(fold_names(entry.get("protocol", {}).get("split", "test")))
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


#: what :func:`strip_timings` drops from ``meta``: timings and the run's facts
# "run" holds unifar.runtime.run_facts; "git", "machine" and "date" are where results written
# before that one shape kept them
RUN_FACT_KEYS = ("load_seconds", "data_load_seconds", "ranx_warmup_seconds", "wall_seconds", "run", "git",
                 "machine", "date")


def strip_timings(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result of :func:`~unifar.evaluation.runner.evaluate_all` without what differs between two runs of the same
    evaluation: every system's ``seconds`` and the ``meta`` timings, commit, machine and date
    (:data:`RUN_FACT_KEYS`; a chapter's results file keeps those as its run facts). Metrics,
    intervals, per-query values and the data's provenance stay; :func:`results_table`,
    :func:`format_results` and :func:`compare_systems` accept the stripped result.

    >>> r = {"format": "unifar-eval/1", "meta": {"model": "m", "wall_seconds": 3.0},
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
    (``"seed0"``) to a result of :func:`~unifar.evaluation.runner.evaluate_all` (or anything with its ``benchmarks``) of
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


def seed_spread_table(result: Mapping[str, Any], records: Sequence[Mapping[str, Any]]):
    """:func:`seed_spread`'s records (as a results file stores them) beside what they are judged
    against, one row per (benchmark, metric): seed 0's 95 % interval over queries
    (``"seed0 95% CI width"``), mean pooling's score and how many seeds score above it. Empty when
    ``records`` is (a run with one seed).

    >>> res = {"benchmarks": {"scirepeval": {"systems": {
    ...     "unifar-trained": {"ci": {"ndcg@10": [58.0, 62.5]}}, "mean": {"metrics": {"ndcg@10": 61.0}}}}}}
    >>> t = seed_spread_table(res, [{"benchmark": "scirepeval", "metric": "ndcg@10", "seed0": 60.0, "seed1": 62.0}])
    >>> t.loc[("scirepeval", "ndcg@10"), ["seed0 95% CI width", "mean pooling", "seeds ahead of mean pooling"]].tolist()
    [4.5, 61.0, 1.0]
    """
    import numpy as np
    import pandas as pd

    t = pd.DataFrame(records)
    if t.empty:
        return t
    systems = {b: e["systems"] for b, e in result["benchmarks"].items()}
    t["seed0 95% CI width"] = [np.subtract(*systems[b]["unifar-trained"]["ci"][m][::-1])
                               for b, m in zip(t.benchmark, t.metric)]
    t["mean pooling"] = [systems[b]["mean"]["metrics"][m] for b, m in zip(t.benchmark, t.metric)]
    seeds = [c for c in t.columns if c.startswith("seed") and c[4:].isdigit()]
    t["seeds ahead of mean pooling"] = (t[seeds].gt(t["mean pooling"], axis=0)).sum(axis=1)
    return t.set_index(["benchmark", "metric"])
