"""Table 3 of the paper, measured: evaluate the trained ablation rows and compare them.

* :func:`evaluate_rows` -- one :func:`~unifar.evaluation.runner.evaluate_all` over every
  (row, seed) model of :func:`unifar.ablation.train_rows`, the untrained model and the base
  encoder's mean pooling, with the frozen base's states shared;
* :func:`seed_mean_result` -- per row, the per-query metrics averaged over its seeds (the paired
  bootstrap then compares rows query by query);
* :func:`ablation_table` -- rows x :data:`COLUMNS`: mean and spread over seeds;
* :func:`column_mde` -- each column's minimum detectable effect, stated before the comparisons;
* :func:`ablation_verdicts` -- the paired bootstrap of every row against the full row, per
  column, with the share of queries scored identically and the verdict ("worse", "better",
  "within noise", or with an MDE "underpowered" / "no detectable difference");
* :func:`paper_sign_agreement` -- for each cell, whether our difference to the full row has the
  sign of the paper's (table 3, :data:`unifar.paper.UNIFAR_TABLE3`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import paper
from .power import mde_from_interval, minimum_detectable_effect
from .report import compare_systems, fold_strata
from .runner import evaluate_all
from .systems import build_retrievers, load_unifar

if TYPE_CHECKING:
    import pandas as pd

    from ..ablation import AblationRun
    from ..model import UniFAR

__all__ = ["COLUMNS", "PAPER_ROWS", "PAPER_COLUMNS", "ablation_table", "ablation_verdicts", "column_mde", "column_values",
           "evaluate_rows", "metrics_only", "paper_sign_agreement", "seed_mean_result", "system_name"]

#: column -> (benchmark, metric, CSFCube fold or None): the table's columns, in order
COLUMNS: dict[str, tuple[str, str, str | None]] = {
    "CSFCube background MAP": ("csfcube", "background/map", None),
    "CSFCube method MAP": ("csfcube", "method/map", None),
    "CSFCube result MAP": ("csfcube", "result/map", None),
    "CSFCube aggregated MAP": ("csfcube", "all/map", None),
    "CSFCube aggregated MAP, fold1_test": ("csfcube", "all/map", "fold1_test"),
    "SciRepEval search nDCG@10": ("scirepeval", "ndcg@10", None),
    "Cranfield nDCG@10": ("cranfield", "ndcg@10", None),
    "PubMedQA MRR@10": ("pubmedqa", "mrr@10", None),
    "DORIS-MAE Query MAP": ("doris_mae_query", "map", None),
    "DORIS-MAE Aspect MAP": ("doris_mae_aspect", "map", None),
    "DORIS-MAE Subquery_2 MAP": ("doris_mae_subquery_2", "map", None),
}

#: our row name -> the paper's table-3 row name
PAPER_ROWS = {"full": "UniFAR (full)", "w/o MHA_sent": "w/o MHA_sent", "w/o MHA_tok": "w/o MHA_tok",
              "freeze anchors": "Freeze A_facet", "w/o anchors": "w/o A_facet", "w/o E_input": "w/o E_input",
              "w/o L_KL": "w/o L_KL", "w/o L_QD": "w/o L_QD"}

#: our column -> the paper's table-3 column (columns the paper has)
PAPER_COLUMNS = {"CSFCube background MAP": "CSFCube background MAP", "CSFCube method MAP": "CSFCube method MAP",
                 "CSFCube result MAP": "CSFCube result MAP", "CSFCube aggregated MAP": "CSFCube aggregated MAP",
                 "DORIS-MAE Query MAP": "DORIS-MAE Query MAP", "DORIS-MAE Aspect MAP": "DORIS-MAE Aspect MAP",
                 "DORIS-MAE Subquery_2 MAP": "DORIS-MAE Subquery_2 MAP"}


def system_name(row: str, seed: int) -> str:
    """The system name of one (row, seed) in an evaluation result.

    >>> system_name("w/o L_KL", 2)
    'w/o L_KL | seed 2'
    """
    return f"{row} | seed {seed}"


def evaluate_rows(runs: Mapping[tuple[str, int], AblationRun], benchmarks: Sequence[str], base_model: str = "minilm",
                  untrained: UniFAR | None = None, cache_dir: str | None = None, **options: Any) -> dict[str, Any]:
    """Evaluate every run of :func:`unifar.ablation.train_rows` (system :func:`system_name`), plus
    ``untrained`` (a :class:`unifar.UniFAR`, system ``"untrained"``) and mean pooling of
    ``base_model`` (system ``"mean"``), on ``benchmarks``. Models on the same frozen base share its
    states (``cache_dir``: on disk); rows that trained base layers are evaluated in a second pass
    with the states below those layers. ``options`` go to
    :func:`~unifar.evaluation.runner.evaluate_all`. Returns one merged result."""
    from .dense import UniFARRetriever

    groups: dict[int, list[Any]] = {}
    for (row, seed), run in runs.items():
        top = int(run.args.get("train_top_layers", 0))
        model = load_unifar(run.model_dir)
        groups.setdefault(top, []).append(UniFARRetriever(model, name=system_name(row, seed),
                                                          label=f"UniFAR {row}, seed {seed}",
                                                          model_id=f"ablation:{row}:{seed}"))
    first = groups.pop(0, [])
    if untrained is not None:
        first.insert(0, UniFARRetriever(untrained, name="untrained", label="UniFAR untrained",
                                        model_id="ablation:untrained"))
    mean, _ = build_retrievers(base_model, ["mean"], cache_dir=cache_dir, show_progress=False)
    common = {"benchmarks": list(benchmarks), "cache_dir": cache_dir, "show_progress": False, "log": None,
              **options}
    result = evaluate_all(retrievers=[*mean, *first], **common)
    for retrievers in groups.values():
        more = evaluate_all(retrievers=retrievers, **common)
        for bench, entry in more["benchmarks"].items():
            result["benchmarks"][bench]["systems"].update(entry["systems"])
    return result


def metrics_only(result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{benchmark: {system: {"metrics", "ci", "n_queries"}}}`` of an evaluation result: what a
    chapter keeps of dozens of systems (the per-query values, which the verdicts were computed
    from, stay out of the committed file).

    >>> r = {"benchmarks": {"b": {"systems": {"s": {"metrics": {"map": 1.0}, "ci": {}, "n_queries": 2,
    ...                                              "per_query": {"map": {"q": 1.0}}}}}}}
    >>> metrics_only(r)
    {'b': {'s': {'metrics': {'map': 1.0}, 'ci': {}, 'n_queries': 2}}}
    """
    return {bench: {name: {k: res.get(k) for k in ("metrics", "ci", "n_queries")}
                    for name, res in entry["systems"].items()}
            for bench, entry in result["benchmarks"].items()}


def seed_mean_result(result: Mapping[str, Any], rows: Sequence[str], seeds: Sequence[int]) -> dict[str, Any]:
    """A result with one system per row whose per-query values (and metrics) are the means over
    ``seeds`` of that row's systems; other systems are kept as they are."""
    import copy

    out = copy.deepcopy(dict(result))
    for entry in out["benchmarks"].values():
        systems = entry["systems"]
        for row in rows:
            names = [system_name(row, s) for s in seeds if system_name(row, s) in systems]
            if not names:
                continue
            per = [systems[n]["per_query"] for n in names]
            per_query = {m: {q: float(np.mean([p[m][q] for p in per])) for q in per[0][m]} for m in per[0]}
            metrics = {m: float(np.mean([systems[n]["metrics"][m] for n in names])) for m in per_query}
            systems[row] = {"label": row, "metrics": metrics, "per_query": per_query, "ci": {},
                            "n_queries": systems[names[0]]["n_queries"], "seeds": len(names)}
    return out


def column_values(result: Mapping[str, Any], system: str) -> dict[str, float]:
    """One system's value in each of :data:`COLUMNS` that ``result`` has (fold columns: the mean
    of the fold's per-query values)."""
    out = {}
    for col, (bench, metric, fold) in COLUMNS.items():
        entry = result["benchmarks"].get(bench)
        if entry is None or system not in entry["systems"]:
            continue
        res = entry["systems"][system]
        if metric not in res["metrics"]:
            continue
        if fold is None:
            out[col] = float(res["metrics"][metric])
        else:
            ids = fold_strata(entry, metric)[fold]
            out[col] = float(np.mean([res["per_query"][metric][q] for q in ids]))
    return out


def ablation_table(result: Mapping[str, Any], rows: Sequence[str], seeds: Sequence[int],
                   references: Sequence[str] = ("untrained", "mean")):
    """Rows x columns: ``(mean, std over seeds)`` as two DataFrames; the reference systems (one
    run each) have a std of 0."""
    import pandas as pd

    means, stds = {}, {}
    for row in rows:
        per_seed = [column_values(result, system_name(row, s)) for s in seeds]
        per_seed = [v for v in per_seed if v]
        if not per_seed:
            continue
        frame = pd.DataFrame(per_seed)
        means[row], stds[row] = frame.mean(), frame.std(ddof=1) if len(per_seed) > 1 else frame.mean() * 0
    for ref in references:
        vals = column_values(result, ref)
        if vals:
            means[ref], stds[ref] = pd.Series(vals), pd.Series(vals) * 0
    return pd.DataFrame(means).T, pd.DataFrame(stds).T


def _column_queries(entry: Mapping[str, Any], metric: str, fold: str | None, system: str) -> dict[str, float]:
    """One system's per-query values of a column (a fold column: that fold's queries only)."""
    values = entry["systems"][system]["per_query"][metric]
    return values if fold is None else {q: values[q] for q in fold_strata(entry, metric)[fold]}


def column_mde(mean_result: Mapping[str, Any], pair: tuple[str, str] = ("full", "untrained"),
               n_resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    """Each column's minimum detectable effect (:func:`unifar.evaluation.power.minimum_detectable_effect`,
    80 % power), stated before any row is compared: from the per-query differences of ``pair``
    (by default what training changed, the full row against the untrained model: removing a
    component moves a model somewhere between the two), CSFCube resampled within its folds."""
    out = {}
    for col, (bench, metric, fold) in COLUMNS.items():
        entry = mean_result["benchmarks"].get(bench)
        if entry is None or any(p not in entry["systems"] or metric not in entry["systems"][p]["per_query"]
                                for p in pair):
            continue
        a, b = (_column_queries(entry, metric, fold, p) for p in pair)
        strata = entry.get("strata", {}).get(metric) if fold is None else None
        out[col] = minimum_detectable_effect(a, b, strata=strata, n_resamples=n_resamples, seed=seed).mde
    return out


def ablation_verdicts(mean_result: Mapping[str, Any], rows: Sequence[str], reference: str = "full",
                      n_resamples: int = 1000, seed: int = 0, mde: Mapping[str, float] | None = None):
    """The paired bootstrap of each row minus ``reference`` in each column of a
    :func:`seed_mean_result` (CSFCube resampled within its folds; the fold column within that
    fold), as a DataFrame ``row, column, diff, ci_low, ci_high, identical, mde, effect_sought,
    verdict``. ``identical`` is the share of queries on which the row scores exactly what the
    reference scores (1.0: the two rank identically, a bug until explained); with ``mde``
    (:func:`column_mde`) and the paper's difference as the effect sought, a "within noise" row
    becomes "underpowered" or "no detectable difference" (:func:`unifar.evaluation.power.verdict`);
    a cell's ``mde`` is the column's or, where larger, the one its own interval implies (the
    :func:`unifar.evaluation.power.mde_from_interval`), so that a row whose removal
    moves many queries is not called powered on the full row's small changes."""
    import pandas as pd

    t3 = paper.UNIFAR_TABLE3
    out = []
    for row in [r for r in rows if r != reference]:
        for col, (bench, metric, fold) in COLUMNS.items():
            entry = mean_result["benchmarks"].get(bench, {})
            systems = entry.get("systems", {})
            if row not in systems or reference not in systems or metric not in systems[row]["metrics"]:
                continue
            cmp = compare_systems(mean_result, bench, row, reference, metrics=[metric], n_resamples=n_resamples,
                                  seed=seed, fold=fold).iloc[0]
            mine, ref = (_column_queries(entry, metric, fold, s) for s in (row, reference))
            prow, pcol = PAPER_ROWS.get(row), PAPER_COLUMNS.get(col)
            sought = t3.value(prow, pcol) - t3.value(PAPER_ROWS[reference], pcol) if prow and pcol else float("nan")
            size = (mde or {}).get(col, float("nan"))
            if np.isfinite(size):
                # the stated MDE comes from what training changed (full vs untrained), which can
                # understate a row that changes more: the row's own interval bounds it from below
                size = max(size, mde_from_interval(cmp["ci_low"], cmp["ci_high"]))
            verdict = "within noise" if cmp["within_noise"] else ("better" if cmp["diff"] > 0 else "worse")
            if verdict == "within noise" and np.isfinite(size) and np.isfinite(sought):
                verdict = "underpowered" if size > abs(sought) else "no detectable difference"
            out.append({"row": row, "column": col, "diff": float(cmp["diff"]), "ci_low": float(cmp["ci_low"]),
                        "ci_high": float(cmp["ci_high"]), "identical": float(np.mean([mine[q] == ref[q] for q in ref])),
                        "mde": size, "effect_sought": sought, "verdict": verdict})
    return pd.DataFrame(out, columns=["row", "column", "diff", "ci_low", "ci_high", "identical", "mde",
                                      "effect_sought", "verdict"])


def paper_sign_agreement(verdicts: pd.DataFrame) -> pd.DataFrame:
    """For each (row, column) of :func:`ablation_verdicts` the paper also reports: the paper's
    difference to its full row (table 3, reported), ours (measured), and whether the signs agree
    (``agree``) -- and whether ours is distinguishable from noise at all (``verdict``)."""
    t3 = paper.UNIFAR_TABLE3
    rows = []
    for rec in verdicts.to_dict("records"):
        prow, pcol = PAPER_ROWS.get(rec["row"]), PAPER_COLUMNS.get(rec["column"])
        if prow is None or pcol is None:
            continue
        theirs = t3.value(prow, pcol) - t3.value(PAPER_ROWS["full"], pcol)
        rows.append({**rec, "paper_diff": theirs, "agree": bool(np.sign(theirs) == np.sign(rec["diff"]))})
    import pandas as pd

    return pd.DataFrame(rows)
