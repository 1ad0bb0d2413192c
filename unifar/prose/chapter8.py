"""Chapter 8's prose numbers: combining objectives (:func:`ch8`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..multi_objective import report
from ..multi_objective.experiments import TABLE1, TABLE2

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ch8"]


def _ch8_full_rank_changes(full_changes: Mapping[str, Any] | None, scores: pd.DataFrame) -> dict[str, Any]:
    """Chapter 8's full-profile rank changes (measured here): how far the runs reordered
    SciRepEval's pools and PubMedQA's questions against the base; nothing for a record without
    them. ``scores``: the record's headline score per run and benchmark."""
    import pandas as pd

    if not full_changes:
        return {}
    out: dict[str, Any] = {}
    full_sci = pd.DataFrame(full_changes["scirepeval"]).T.astype(float)
    out["ch8_full_sci_runs"] = len(full_sci)
    out["ch8_full_sci_reordered"] = full_sci["reordered (%)"].max()
    out["ch8_full_sci_swapped"] = full_sci["judged pair swapped (%)"].max()
    out["ch8_full_sci_shift"] = full_sci["largest shift, median"].max()
    out["ch8_full_sci_gap"] = full_sci["smallest judged gap, median"].median()
    swapped = full_sci.index[full_sci["judged pair swapped (%)"] > 0]
    differ = [n for n in full_sci.index if scores.at[n, "scirepeval"] != scores.at["base", "scirepeval"]]
    out["ch8_full_sci_same"] = len(full_sci) - len(differ)
    out["ch8_full_sci_swap_runs"] = ", ".join(swapped) or "none"
    out["ch8_full_sci_differ_runs"] = ", ".join(differ) or "none"
    out["ch8_full_pub_changed"] = int(pd.DataFrame(full_changes["pubmedqa"]).T["changed"].max())
    return out


def ch8(full: Mapping[str, Any], verdicts: pd.DataFrame, *, objectives: Mapping[str, Mapping[str, Any]],
        n_dev: int, stops: pd.DataFrame, steps: int, sci_changes: pd.DataFrame,
        pub_changes: pd.DataFrame | None = None) -> dict[str, Any]:
    """Chapter 8 (multi-objective): the objectives' sizes, how this run's runs ended and moved the
    rankings, and the full profile's verdicts, rank changes and the paper's findings on its scores.

    ``full``: the committed record ``results/ch08/full/multi_objective.json``; ``verdicts``: its
    paired verdicts of each run against the untrained base, on the 2-fold test and the headline
    metrics (:func:`unifar.evaluation.power.labelled_verdicts`); ``objectives``: each objective's
    ``stats`` (:func:`unifar.multi_objective.build_objectives`); ``n_dev``: held-out examples per
    objective; ``stops``: :func:`unifar.learning_curve.where_runs_ended` of this run's runs;
    ``steps``: their step budget; ``sci_changes``, ``pub_changes``: this run's rank changes on
    SciRepEval (:func:`unifar.evaluation.qdoc.rank_change_summary`) and PubMedQA
    (:func:`unifar.multi_objective.report.changed_questions`, None without PubMedQA).
    """
    import pandas as pd

    # measured here, this run
    out: dict[str, Any] = {"ch8_questions": objectives["questions"]["examples"],
                           "ch8_pubmedqa": objectives["questions"]["pubmedqa/examples"],
                           "ch8_citations": objectives["citations"]["examples"],
                           "ch8_icrop": objectives["icrop"]["examples"], "ch8_n_dev": n_dev,
                           "ch8_stopped": int((stops["ended by"] == "flat dev curve").sum()),
                           "ch8_runs": len(stops), "ch8_budget": steps}
    res = full["results"]
    scores = pd.DataFrame(res["scores"]).T
    out.update(_ch8_full_rank_changes(res.get("rank_changes"), scores))
    out["ch8_sci_reordered"] = sci_changes["reordered (%)"].max()  # measured here, this run
    out["ch8_sci_swapped"] = sci_changes["judged pair swapped (%)"].max()
    out["ch8_sci_shift"] = sci_changes["largest shift, median"].max()
    out["ch8_sci_gap"] = sci_changes["smallest judged gap, median"].median()
    if pub_changes is not None:
        out["ch8_pub_changed"] = int(pub_changes["changed"].max())
        out["ch8_pub_questions"] = int(pub_changes["questions"].iloc[0])
        out["ch8_pub_ceiling"] = (100.0 * pub_changes["reference at the ceiling"].iloc[0]
                                  / pub_changes["questions"].iloc[0])
    # measured here, full profile: the verdicts, how the runs ended, the paper's findings
    v = verdicts
    moved = sorted(set(v[v.verdict.isin(["better", "worse"])].system))
    out["ch8_full_underpowered"] = int((v.verdict == "underpowered").sum())
    out["ch8_full_nodiff"] = int((v.verdict == "no detectable difference").sum())
    out["ch8_full_cells"] = len(v)
    out["ch8_full_runs"] = len(set(v.system))
    out["ch8_full_moved"] = len(moved)
    out["ch8_full_moved_names"] = ", ".join(moved) if moved else "none"
    out["ch8_full_steps"] = full["config"]["steps"]
    experiments = res["experiments"]
    out["ch8_full_stopped"] = sum(bool(e.get("stopped")) for e in experiments.values())
    trained_steps = [len(e["losses"]) for e in experiments.values()]
    out["ch8_full_fewest_steps"] = min(trained_steps)
    out["ch8_full_most_steps"] = max(trained_steps)
    # how far any run's held-out loss fell below where it started (empty in a record without curves)
    drops = [e["dev_curve"][0]["dev"] - min(p["dev"] for p in e["dev_curve"])
             for e in experiments.values() if e.get("dev_curve")]
    out["ch8_full_dev_drop"] = max(drops) if drops else float("nan")
    ours = report.findings(scores.drop(index=["base", "unifar-trained"]))
    theirs = report.findings(report.paper_frame())  # reported in the paper
    out["ch8_full_ties"] = sum(f["ties"] for f in ours.values())
    for claim, key in zip(report.CLAIMS, ("combined", "finetune", "alt2", "alt3")):
        out[f"ch8_paper_{key}"] = f"{theirs[claim]['holds']} of {theirs[claim]['of']}"
        out[f"ch8_full_{key}"] = f"{ours[claim]['holds']} of {ours[claim]['of']}" if claim in ours else "-"
    names = [e.name for e in TABLE1 + TABLE2]
    best = scores.loc[[n for n in dict.fromkeys(names) if n in scores.index]].mean(axis=1)
    out["ch8_full_best"] = best.idxmax()
    out["ch8_full_base_csfcube"] = scores.at["base", "csfcube"]
    out["ch8_full_best_csfcube"] = scores.loc[best.idxmax(), "csfcube"]
    return out
