"""Chapter 4's committed dev studies as the tables the chapter shows.

The studies (``benchmarks/studies/tune_dev.py`` and its neighbours) write one record per study
under ``results/ch04/``: ``runs`` maps a variant's name to what it measured on dev data only
(fold1_dev MAP, held-out FTUs, the real and cropped held-out questions, PubMedQA's train half)
and, for the later studies, its dev curve. ``benchmarks/studies/whole_stack_test.py`` evaluates
the chosen row on the test splits once (``whole_stack_test.json``).

* :func:`study_row` / :func:`study_table`: one row per variant, as chapter 4's study tables;
* :func:`whole_stack_frames`: that test record's verdicts and power, indexed for lookup;
* :func:`gpu_profile_frames`: the ``gpu`` profile's record (``benchmarks/studies/gpu_profile.py``
  on a lent GPU, ``results/ch04/gpu/train.json``): its runs and its verdicts at the headline metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .report import HEADLINE_METRICS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["STUDY_HEADLINE", "study_row", "study_table", "whole_stack_frames", "gpu_profile_frames"]

#: the headline metric of each benchmark the whole-stack test record reports
STUDY_HEADLINE = {"csfcube": "all/map", "scirepeval": "ndcg@10"}


def study_row(run: Mapping[str, Any]) -> dict[str, Any]:
    """One dev-study row: fold1_dev aggregated MAP (final, and best on the dev curve), held-out
    L_KD (first curve point and end), steps and the q-doc checks; NaN where the variant did not
    measure a field (the references train nothing).

    >>> r = {"fold1_dev_map": {"all": 41.2}, "dev_curve": [{"fold1_dev_map": 40.0, "held_out_l_kd": 0.9},
    ...      {"fold1_dev_map": 41.5, "held_out_l_kd": 0.5}], "held_out_loss": {"l_kd": 0.4}, "steps": 200}
    >>> row = study_row(r)
    >>> row["candidates"], row["best on the curve"], row["held-out L_KD, first point"], row["steps"]
    ('all', 41.5, 0.9, 200)
    """
    import numpy as np

    curve = run.get("dev_curve") or []
    spec = run.get("spec") or {}
    return {"candidates": str(spec.get("max_teacher_candidates") or "all"),
            "fold1_dev MAP": run["fold1_dev_map"]["all"],
            "best on the curve": max((p["fold1_dev_map"] for p in curve), default=np.nan),
            "held-out L_KD, first point": curve[0]["held_out_l_kd"] if curve else np.nan,
            "held-out L_KD, end": (run.get("held_out_loss") or {}).get("l_kd", np.nan),
            "steps": run.get("steps", np.nan),
            "real q MRR@10": run.get("heldout_real_questions", {}).get("mrr@10", np.nan),
            "crop q MRR@10": run.get("heldout_crop_questions", {}).get("mrr@10", np.nan),
            "PubMedQA MRR@10": run.get("pubmedqa_train_half_mrr@10", {}).get("all", np.nan)}


def study_table(runs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """:func:`study_row` of every variant of a study's ``runs``, one row each, in order."""
    import pandas as pd

    return pd.DataFrame({name: study_row(r) for name, r in runs.items()}).T


def whole_stack_frames(record: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole-stack test record's verdicts and power at each benchmark's headline metric
    (:data:`STUDY_HEADLINE`): verdicts indexed by ``(benchmark, fold, vs)`` (the evaluated row,
    ``unifar-trained``, against system ``vs``; fold ``""`` is the 2-fold figure), power by
    ``(benchmark, fold)``."""
    import pandas as pd

    res = record["results"]
    verdicts = pd.DataFrame([v for v in res["verdicts"] + res["fold_verdicts"]
                             if v["metric"] == STUDY_HEADLINE[v["benchmark"]]])
    power = pd.DataFrame([p for p in res["power"] if p["metric"] == STUDY_HEADLINE[p["benchmark"]]])
    return verdicts.set_index(["benchmark", "fold", "vs"]), power.set_index(["benchmark", "fold"])


def gpu_profile_frames(record: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``gpu`` profile's runs (kind, seed, steps, seconds, fold1_dev MAP at the first and
    last dev point, why it stopped; one row per run, in training order) and its verdicts at the
    headline metrics (each benchmark's first in :data:`~unifar.evaluation.report.HEADLINE_METRICS`,
    with the MDE that labels them). A record
    written before the runs were a grid (one run, no ``runs``) gives that run as ``unifar-trained``.

    >>> rec = {"results": {"steps": 3, "dev_curve": [{"fold1_dev_map": 40.0}, {"fold1_dev_map": 41.0}],
    ...        "run_info": {"stopped_early": {"reason": "flat"}},
    ...        "verdicts": [{"benchmark": "csfcube", "fold": "", "vs": "mean", "metric": "all/map", "diff": 1.0}]}}
    >>> runs, verdicts = gpu_profile_frames(rec)
    >>> runs.loc["unifar-trained", ["steps", "fold1_dev first", "fold1_dev last", "stopped"]].tolist()
    [3, 40.0, 41.0, 'flat']
    >>> verdicts.index.tolist()
    [('csfcube', '', 'mean')]
    """
    import pandas as pd

    res = record["results"]
    runs = res.get("runs") or {"unifar-trained": {"kind": "unifar", "seed": 0, **res}}
    rows = {}
    for name, r in runs.items():
        curve = r.get("dev_curve") or [{}]
        stopped = (r.get("run_info") or {}).get("stopped_early") or {}
        rows[name] = {"kind": r.get("kind"), "seed": r.get("seed"), "steps": r.get("steps"),
                      "seconds": r.get("seconds"), "fold1_dev first": curve[0].get("fold1_dev_map"),
                      "fold1_dev last": curve[-1].get("fold1_dev_map"),
                      "stopped": stopped.get("reason", "end of its epochs")}
    verdicts = pd.DataFrame([v for v in res.get("verdicts", [])
                             if v["metric"] == HEADLINE_METRICS.get(v["benchmark"], (v["metric"],))[0]])
    if not verdicts.empty:
        verdicts = verdicts.set_index(["benchmark", "fold", "vs"])
    return pd.DataFrame(rows).T, verdicts
