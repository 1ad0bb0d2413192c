"""Chapter 7's prose numbers: FLeW's facet encoders (:func:`ch7`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import paper
from .verdicts import verdict_row

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ch7"]


def _flew_schedule(config: Mapping[str, Any], runs: list[Mapping[str, Any]]) -> str:
    """How chapter 7's full run ended its facet encoders' training, as a clause of the prose:
    how many dev curves flattened within the step budget, and, for the others, that they were
    still improving when it ended. A record made before the dev curves says so instead."""
    taken = [len(r["losses"]) for r in runs]
    if not all(r.get("dev_curve") for r in runs):  # a record predating the dev curves
        return (f"a fixed {config['steps']} steps per facet; this record predates the "
                "dev curves, which the next run of the full profile draws")
    flat, n = sum(bool(r["stopped"]) for r in runs), len(runs)
    schedule = (f"each encoder to stop once its dev curve flattened, within {config['steps']} steps: "
                + (f"all {n} curves flattened" if flat == n else
                   "none of the curves flattened" if not flat else f"{flat} of {n} flattened")
                + (f", after {min(taken)} steps" if min(taken) == max(taken) else
                   f", after {min(taken)} to {max(taken)} steps"))
    if flat < n:  # say which way the budget cut the others
        schedule += (f"; {'every' if not flat else 'every other'} curve had still improved by "
                     f"at least {config['min_delta']} within its last {config['patience']} dev points "
                     "when the budget ended")
    return schedule


def ch7(full: Mapping[str, Any], verdicts: pd.DataFrame, *, batch_size: int, steps: int, patience: int,
        min_delta: float, moves: pd.DataFrame | None = None) -> dict[str, Any]:
    """Chapter 7 (FLeW): the run's training settings, how far this run's FLeW-cls moved the
    SciRepEval rankings, the paper's FLeW rows, and the full profile's CSFCube results and verdicts.

    ``full``: the committed record ``results/ch07/full/flew.json`` (``results``, ``config``);
    ``verdicts``: its paired verdicts against mean pooling and UniFAR
    (:func:`unifar.evaluation.power.labelled_verdicts`); ``batch_size``, ``steps``, ``patience``,
    ``min_delta``: this run's training settings; ``moves``: this run's rank changes of the trained
    encoders against their untrained start
    (:func:`unifar.evaluation.qdoc.rank_change_summary`), whose ``flew-cls`` row is quoted when
    present.
    """
    out: dict[str, Any] = {"ch7_batch": batch_size, "ch7_steps": steps, "ch7_patience": patience,
                           "ch7_min_delta": min_delta}
    t2 = paper.UNIFAR_TABLE2  # reported in the paper
    out["ch7_paper_flew_map"] = t2.value("FLeW-bg/mt/rs", "aggregated MAP")
    out["ch7_paper_scibert_map"] = t2.value("SciBERT", "aggregated MAP")
    out["ch7_paper_unifar_map"] = t2.value("UniFAR-SciBERT", "aggregated MAP")
    out["ch7_paper_search"] = paper.FLEW_TABLE1.value("FLeW", "Search")
    # measured here, full profile
    res, config = full["results"], full["config"]
    fcs = res["benchmarks"]["csfcube"]["systems"]
    flews = [f"flew-{p}" for p in config["poolings"]]
    best = max(flews, key=lambda s: fcs.get(s, {}).get("metrics", {}).get("all/map", -1))
    out["ch7_full_best"] = best
    out["ch7_full_best_map"] = fcs[best]["metrics"]["all/map"]
    out["ch7_full_mean_map"] = fcs["mean"]["metrics"]["all/map"]
    out["ch7_full_unifar_map"] = fcs["unifar-trained"]["metrics"]["all/map"]
    out["ch7_full_cls_map"] = fcs["cls-untrained"]["metrics"]["all/map"]
    out["ch7_full_flew_cls_map"] = fcs["flew-cls"]["metrics"]["all/map"]
    out["ch7_full_cls_gain"] = fcs["flew-cls"]["metrics"]["all/map"] - fcs["cls-untrained"]["metrics"]["all/map"]
    v_mean = verdict_row(verdicts, best, "mean", "csfcube", "all/map")
    v_unifar = verdict_row(verdicts, best, "unifar-trained", "csfcube", "all/map")
    out["ch7_full_vs_mean"] = v_mean["diff"]
    out["ch7_full_vs_mean_verdict"] = v_mean["verdict"]
    out["ch7_full_vs_unifar"] = v_unifar["diff"]
    out["ch7_full_vs_unifar_verdict"] = v_unifar["verdict"]
    out["ch7_full_mde"] = v_unifar["mde"]
    out["ch7_full_effect"] = v_unifar["effect_sought"]
    out["ch7_full_steps"] = config["steps"]
    out["ch7_full_schedule"] = _flew_schedule(config, [r for per in res["training"].values() for r in per.values()])
    out["ch7_full_top"] = config["top_layers"]
    if moves is not None and "flew-cls" in moves.index:  # measured here, this run
        m = moves.loc["flew-cls"]
        out["ch7_moves_reordered"] = m["reordered (%)"]
        out["ch7_moves_swapped"] = m["judged pair swapped (%)"]
        out["ch7_moves_shift"] = m["largest shift, median"]
        out["ch7_moves_gap"] = m["smallest judged gap, median"]
    return out
