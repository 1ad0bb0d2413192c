"""Chapter 4's prose numbers: training, this run and the full profile (:func:`ch4`); the dev
studies the chapter reports after them are :func:`unifar.prose.chapter4_studies.ch4_studies`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paper
from ..config import PAPER_PROFILE
from ..facets import FACETS
from .chapter4_studies import ch4_studies

if TYPE_CHECKING:
    from ..config import UniFARConfig

__all__ = ["ch4"]


def _settings(config: UniFARConfig, eval_fraction: float) -> dict[str, Any]:
    """Appendix A's hyper-parameters as the paper prints them (reported), beside this run's."""
    printed = paper.PRINTED["unifar/hyperparameters"]  # reported in the paper
    out: dict[str, Any] = {}
    for key in ("temperature", "kl_lambda_start", "kl_lambda_end", "lr_base", "lr_aggregation",
                "lr_mpnet", "epochs"):
        out[f"ch4_paper_{key.replace('temperature', 'tau').replace('kl_', '')}"] = printed[key]
    out |= {"ch4_paper_warmup": printed["warmup_percent"], "ch4_paper_batch": printed["batch_size"],
            "ch4_paper_accumulation": printed["grad_accumulation"],
            "ch4_paper_ftus": paper.UNIFAR_FACTS["ftus"]}
    for key in ("lr_base", "lr_aggregation"):  # the paper profile's learning rates, as "2e-5"
        out[f"ch4_paper_profile_{key}"] = f"{PAPER_PROFILE[key]:.0e}".replace("e-0", "e-")
    # this run's settings, and the lambda schedules of the lambda study (x3, x10 of this run's)
    out |= {"ch4_distill_weight": config.distill_weight, "ch4_batch_size": config.batch_size,
            "ch4_accumulation": config.grad_accumulation, "ch4_eval_fraction": eval_fraction}
    for x in (3, 10):
        out[f"ch4_l{x}_start"] = x * config.kl_lambda_start
        out[f"ch4_l{x}_end"] = x * config.kl_lambda_end
    return out


def _this_run(run: Mapping[str, Any], ftu_sources: Mapping[Any, int]) -> dict[str, Any]:
    """This run's numbers (measured here): the first seed's loss terms at the start and end of
    training, fold1_dev MAP against the untrained model and mean pooling, where its attention went,
    and the documents of its FTUs by source. ``run`` has the shape of the chapter's record."""
    seed0 = min(run["seeds"], key=int)
    s0, log = run["seeds"][seed0], run["seeds"][seed0]["log"]
    out: dict[str, Any] = {"ch4_first_window": log["window"]}
    for t in ("l_dd", "l_qd", "l_kl"):
        out[f"ch4_first_{t.replace('_', '')}"] = log["first_mean"][t]
        out[f"ch4_last_{t.replace('_', '')}"] = log["last_mean"][t]
    # changes rounded as the prose prints them: a difference of two near-equal means holds only
    # float noise beyond that (another CPU moved L_KL's from 2.3e-05 to 6.0e-05: isa_check.py)
    for t in ("l_kl", "l_qd", "l_dd"):
        out[f"ch4_{t.replace('_', '')}_change"] = round(log["last_mean"][t] - log["first_mean"][t], 3) + 0.0
    out["ch4_first_lkd"] = log["first_mean"].get("l_kd", float("nan"))
    out["ch4_last_lkd"] = log["last_mean"].get("l_kd", float("nan"))
    dev = run["fold1_dev_map"]
    trained, untrained, mean = dev["trained"]["all"]["mean"], dev["untrained"]["all"], dev["mean pooling"]["all"]
    out |= {"ch4_seed0": int(seed0), "ch4_n_dev_papers": run["n_dev_papers"],
            "ch4_n_dev_query_facets": run["n_dev_query_facets"], "ch4_dev_trained": trained,
            "ch4_dev_untrained": untrained, "ch4_dev_mean": mean,
            "ch4_dev_gain_untrained": trained - untrained, "ch4_dev_gap_mean": trained - mean,
            "ch4_dev_vs_mean": "above" if trained > mean else "not above",
            "ch4_dev_vs_untrained": "above" if trained > untrained else "not above"}
    a0, au = s0["attention"], run["attention_untrained"]
    for f in FACETS:
        out[f"ch4_mass_{f}"] = a0["mass_on_gold_by_facet"][f]
        out[f"ch4_mass_untrained_{f}"] = au["mass_on_gold_by_facet"][f]
    out["ch4_mass_max_change"] = max(abs(a0["mass_on_gold_by_facet"][f] - au["mass_on_gold_by_facet"][f])
                                     for f in FACETS)
    out |= {"ch4_entropy": a0["norm_entropy"], "ch4_cos_untrained": a0["cos_to_reference"],
            "ch4_uniform_mass": au["uniform_mass_on_gold"], "ch4_run_heldout_lkl": s0["held_out"]["l_kl"]}
    n_s2 = sum(n for s, n in ftu_sources.items() if str(s).startswith("scirepeval"))
    n_docs = sum(ftu_sources.values())
    out |= {"ch4_n_docs": n_docs, "ch4_n_docs_s2": n_s2, "ch4_n_docs_human": n_docs - n_s2}
    return out


def _full(full: Mapping[str, Any], cpu_model: Mapping[str, Any]) -> dict[str, Any]:
    """The committed full profile's numbers (measured here): seeds, fold1_dev MAP, the first
    seed's attention and L_KL, and which CPU profile the record was made with (``cpu_model``:
    the chapter's model settings, to say so when the record predates them)."""
    fr = full["results"]
    fm = fr["fold1_dev_map"]
    trained, untrained, mean = fm["trained"]["all"]["mean"], fm["untrained"]["all"], fm["mean pooling"]["all"]
    full0 = fr["seeds"][min(fr["seeds"], key=int)]
    out: dict[str, Any] = {
        "ch4_full_n_seeds": len(fr["seeds"]), "ch4_full_n_ftus": fr["n_ftus"],
        "ch4_full_epochs": full["config"]["model"]["epochs"], "ch4_full_dev_trained": trained,
        "ch4_full_dev_trained_std": fm["trained"]["all"]["std"], "ch4_full_dev_untrained": untrained,
        "ch4_full_dev_mean": mean, "ch4_full_dev_gain_untrained": trained - untrained,
        "ch4_full_dev_gap_mean": trained - mean, "ch4_full_dev_vs_mean": "above" if trained > mean else "below",
        "ch4_full_entropy": full0["attention"]["norm_entropy"],
        "ch4_full_cos_untrained": full0["attention"]["cos_to_reference"],
        "ch4_full_mass": full0["attention"]["mass_on_gold"],
        "ch4_full_uniform_mass": fr["attention_untrained"]["uniform_mass_on_gold"],
        "ch4_full_window": full0["log"]["window"],
        "ch4_full_first_lkl": full0["log"]["first_mean"]["l_kl"],
        "ch4_full_last_lkl": full0["log"]["last_mean"]["l_kl"],
        "ch4_full_attention_verdict": ("stayed close to uniform" if full0["attention"]["norm_entropy"] > 0.99
                                       else "moved away from uniform")}
    model = full["config"]["model"]
    same_profile = all(model.get(k, v) == v for k, v in cpu_model.items())
    out["ch4_full_profile_note"] = "this chapter's CPU profile" if same_profile else (
        "the previous CPU profile: the paper's objective without distillation (weight "
        f"{model.get('distill_weight', 0.0):g}), value projections "
        f"{'trained' if model.get('train_values') else 'fixed'}; the distillation profile's "
        "full run is still to be made")
    return out


def ch4(run: Mapping[str, Any], full: Mapping[str, Any], *, config: UniFARConfig, eval_fraction: float,
        cpu_model: Mapping[str, Any], ftu_sources: Mapping[Any, int], n_fold1_dev: int,
        results_dir: str | Path = "results") -> dict[str, Any]:
    """Chapter 4 (training): appendix A's settings beside this run's, this run's training and
    fold1_dev check, the full profile's, and the committed dev studies.

    ``run``: what this run measured, in the shape of the chapter's record (``results`` of
    ``results/ch04/full/train.json``); ``full``: that committed record; ``config``, ``eval_fraction``:
    this run's model settings and held-out share; ``cpu_model``: the chapter's CPU model settings
    (to tell whether ``full`` was made with them); ``ftu_sources``: the number of FTU documents per
    source; ``n_fold1_dev``: CSFCube's fold1_dev query facets; ``results_dir``: where the studies'
    records are (:func:`~unifar.prose.chapter4_studies.ch4_studies`).
    """
    return {**_settings(config, eval_fraction), **_this_run(run, ftu_sources), **_full(full, cpu_model),
            **ch4_studies(results_dir, n_fold1_dev=n_fold1_dev)}
