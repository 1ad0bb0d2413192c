"""Chapter 5's prose numbers: evaluation, power, verdicts and the attention ceiling (:func:`ch5`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import paper
from ..evaluation.attention import ceiling_mixes
from ..evaluation.report import HEADLINE_METRICS, fold_strata

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CH5_BENCHMARKS", "CH5_CONTROLS", "CH5_VS", "ch5"]


def _key(*parts: object) -> str:
    """A glue name from a benchmark, metric, system and field: ``ch5_csfcube_all_map_mean_diff``.

    >>> _key("ch5", "pubmedqa", "mrr@10", "hybrid-mean", "ci_low")
    'ch5_pubmedqa_mrr10_hybrid_mean_ci_low'
    """
    return "_".join(str(p).replace("/", "_").replace("@", "").replace("%", "").replace("-", "_") for p in parts)


#: chapter 5's comparisons of the trained model, each system it is compared with
CH5_VS = ("mean", "unifar-untrained", "bm25", "hybrid-mean")
#: chapter 4's controls that chapter 5 evaluates beside the trained model: system name -> the
#: folder of chapter 4's run under ``artifacts/ch04/<profile>/`` (its final model is in ``final/``)
CH5_CONTROLS = {"unifar-top-layer": "top_layer", "control-trained": "single-vector_control_top_layer",
                "unifar-paper-objective": "paper_objective"}
CH5_BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval")


def _ch5_paper_and_power(full: Mapping[str, Any], power: pd.DataFrame) -> dict[str, Any]:
    """The paper's gains and baselines (reported), the full profile's CSFCube gain, and each
    benchmark's minimum detectable effect beside the effect sought (measured here)."""
    import numpy as np

    t1, t2, t8 = paper.UNIFAR_TABLE1, paper.UNIFAR_TABLE2, paper.UNIFAR_TABLE8
    gain = {x: t2.value(f"UniFAR-{x}", "aggregated MAP") - t2.value(x, "aggregated MAP")
            for x in ("SciBERT", "Contriever", "MPNet")}
    full_cs = full["results"]["benchmarks"]["csfcube"]["systems"]
    out: dict[str, Any] = {
        "ch5_paper_mpnet_map": t2.value("MPNet", "aggregated MAP"),
        "ch5_paper_unifar_mpnet_map": t2.value("UniFAR-MPNet", "aggregated MAP"),
        "ch5_paper_gain_mpnet": gain["MPNet"], "ch5_paper_gain_scibert": gain["SciBERT"],
        "ch5_paper_gain_contriever": gain["Contriever"],
        "ch5_paper_doris_mpnet": t1.value("MPNet", "Query MAP"),
        "ch5_paper_doris_unifar_mpnet": t1.value("UniFAR-MPNet", "Query MAP"),
        "ch5_paper_litsearch_unifar_scibert": t8.value("UniFAR-SciBERT", "Recall@10"),
        "ch5_paper_litsearch_specter2": t8.value("SPECTER-2", "Recall@10"),
        "ch5_full_trained_map": full_cs["unifar-trained"]["metrics"]["all/map"],
        "ch5_full_mean_map": full_cs["mean"]["metrics"]["all/map"],
        "ch5_full_gain": full_cs["unifar-trained"]["metrics"]["all/map"] - full_cs["mean"]["metrics"]["all/map"]}

    def mde_of(bench: str, metric: str, fold: str = "") -> tuple[float, float]:
        hit = power[(power.benchmark == bench) & (power.metric == metric) & (power.fold == fold)]
        return (float(hit.iloc[0]["mde"]), float(hit.iloc[0]["effect_sought"])) if len(hit) else (np.nan, np.nan)

    for b, m in (("csfcube", "all/map"), ("cranfield", "ndcg@10"), ("pubmedqa", "mrr@10"),
                 ("scirepeval", "ndcg@10")):
        out[_key("ch5_mde", b, m)], out[_key("ch5_sought", b, m)] = mde_of(b, m)
    for fold in ("fold1_test", "fold2_test"):
        out[_key("ch5_mde_csfcube", fold)] = mde_of("csfcube", "all/map", fold)[0]
    out["ch5_n_powered"] = int(power[power.fold == ""]["powered"].sum())
    out["ch5_n_power_rows"] = int((power.fold == "").sum())
    return out


def _ch5_verdicts(full: Mapping[str, Any], verdicts: pd.DataFrame, full_verdicts: pd.DataFrame,
                  full_fold_verdicts: pd.DataFrame) -> dict[str, Any]:
    """The full profile's verdicts of the trained model against each system and fold
    (measured here; benchmarks it did not run are NaN / "not run"), the headline counts, and how
    many of them this run's verdicts agree with."""
    import numpy as np

    out: dict[str, Any] = {}
    fv = full_verdicts

    def quote(rows: pd.DataFrame, *name: str) -> None:
        r = rows.iloc[0] if len(rows) else None
        for field in ("a", "b", "diff", "ci_low", "ci_high"):
            out[_key("ch5", *name, field)] = float(r[field]) if r is not None else float("nan")
        out[_key("ch5", *name, "verdict")] = r["verdict"] if r is not None else "not run"

    for b in CH5_BENCHMARKS:
        for m in HEADLINE_METRICS[b]:
            for vs in (*CH5_VS, *CH5_CONTROLS):
                quote(fv[(fv.benchmark == b) & (fv.metric == m) & (fv.vs == vs)] if not fv.empty else fv, b, m, vs)
    headline = np.array([m == HEADLINE_METRICS.get(b, (m,))[0] for b, m in zip(fv.benchmark, fv.metric)], dtype=bool)
    head = fv[(fv.vs == "mean") & headline]
    out["ch5_n_bench"] = len(head)
    out["ch5_n_ahead"] = int((head["diff"] > 0).sum())
    out["ch5_n_better"] = int((head.verdict == "better").sum())
    out["ch5_n_worse"] = int((head.verdict == "worse").sum())
    out["ch5_n_noise"] = int(head.verdict.isin(["within noise", "underpowered", "no detectable difference"]).sum())
    out["ch5_n_underpowered"] = int((head.verdict == "underpowered").sum())
    out["ch5_target"] = ("is met" if len(head) and (head.verdict == "better").all()
                         else "is met on some benchmarks only" if (head.verdict == "better").any() else "is not met")
    cs_mean = fv[(fv.benchmark == "csfcube") & (fv.vs == "mean") & (fv.metric == "all/map")]
    lo, hi = cs_mean.iloc[0][["ci_low", "ci_high"]] if len(cs_mean) else (np.nan, np.nan)
    gain = paper.UNIFAR_TABLE2.value("UniFAR-MPNet", "aggregated MAP") - paper.UNIFAR_TABLE2.value("MPNet", "aggregated MAP")
    out["ch5_paper_gain_vs_ci"] = "inside" if lo <= gain <= hi else "above" if gain > hi else "below"
    both = verdicts.merge(fv, on=["benchmark", "fold", "vs", "metric"], suffixes=("", "_full"))
    out["ch5_n_compared"] = len(both)  # measured here, this run against the full profile
    out["ch5_n_agree"] = int((both.verdict == both.verdict_full).sum())
    full_cs = full["results"]["benchmarks"]["csfcube"]["systems"]
    out["ch5_cs_half_width"] = (hi - lo) / 2
    for f in ("background", "method", "result", "all"):
        out[f"ch5_facetq_{f}"] = full_cs["facet-query"]["metrics"][f"{f}/map"] - full_cs["mean"]["metrics"][f"{f}/map"]
    folds = fold_strata(full["results"]["benchmarks"]["csfcube"], "all/map")
    out["ch5_n_fold1_test"], out["ch5_n_fold2_test"] = len(folds["fold1_test"]), len(folds["fold2_test"])
    ff = full_fold_verdicts
    for fold in ("fold1_test", "fold2_test"):
        for vs in ("mean", "unifar-untrained", *CH5_CONTROLS):
            quote(ff[(ff.fold == fold) & (ff.vs == vs) & (ff.metric == "all/map")], fold, vs)
    return out


def _ch5_studies(study_table: pd.DataFrame, full_spread: pd.DataFrame) -> dict[str, Any]:
    """The hybrid benchmark study's rows and the full profile's spread over training seeds
    (measured here), beside the paper's best CSFCube MAP (reported)."""
    s = study_table
    out: dict[str, Any] = {
        "ch5_hyb_minilm_map": s.loc[("minilm", "hybrid-mean"), "CSFCube MAP"],
        "ch5_hyb_minilm_f1": s.loc[("minilm", "hybrid-mean"), "fold1_test MAP"],
        "ch5_hyb_minilm_mean": s.loc[("minilm", "mean"), "CSFCube MAP"],
        "ch5_hyb_minilm_mean_f1": s.loc[("minilm", "mean"), "fold1_test MAP"],
        "ch5_hyb_mpnet_map": s.loc[("mpnet", "hybrid-mean"), "CSFCube MAP"],
        "ch5_hyb_mpnet_f1": s.loc[("mpnet", "hybrid-mean"), "fold1_test MAP"],
        "ch5_hyb_mpnet_mean": s.loc[("mpnet", "mean"), "CSFCube MAP"],
        "ch5_hyb_lab_map": s.loc[("minilm_labeller", "hybrid-mean-labeller"), "CSFCube MAP"],
        "ch5_hyb_lab_f1": s.loc[("minilm_labeller", "hybrid-mean-labeller"), "fold1_test MAP"],
        "ch5_paper_best_map": paper.UNIFAR_TABLE2.value("UniFAR-MPNet", "aggregated MAP")}
    have = not full_spread.empty and ("csfcube", "all/map") in full_spread.index
    row = full_spread.loc[("csfcube", "all/map")] if have else None
    out["ch5_n_seeds"] = int(row["n_seeds"]) if have else 0
    for name, field in (("min", "min"), ("max", "max"), ("range", "range"),
                        ("ci_width", "seed0 95% CI width"), ("meanpool", "mean pooling")):
        out[f"ch5_seeds_cs_{name}"] = float(row[field]) if have else float("nan")
    out["ch5_seeds_cs_ahead"] = int(row["seeds ahead of mean pooling"]) if have else 0
    out["ch5_seeds_vs_queries"] = ("smaller than" if have and row["range"] < row["seed0 95% CI width"] else
                                   "at least as large as" if have else "not measured against")
    return out


def _ch5_diagnosis(diagnosis: Mapping[str, Mapping[str, Any]], token_attention: bool,
                   train_values: bool) -> dict[str, Any]:
    """The q-doc diagnosis of the token branch and of the sentence branch that replaced it
    (measured here, ``results/ch05/qdoc_diagnosis*.json``), and the trained model's switches."""
    import pandas as pd

    tok, nxt = diagnosis.values()
    mrr = tok["mrr@10"]
    losses = [mrr["untrained questions x untrained documents"] - mrr[k]
              for k in ("trained questions x trained documents", "trained questions x untrained documents")]
    ex = tok["example"]
    att = pd.Series(ex["trained_attention_facet0"], index=ex["tokens"]).sort_values(ascending=False)
    return {"ch5_diag_uu": mrr["untrained questions x untrained documents"],
            "ch5_diag_ut": mrr["untrained questions x trained documents"],
            "ch5_diag_loss_min": min(losses), "ch5_diag_loss_max": max(losses),
            "ch5_diag_ent_untrained": tok["attention_entropy"]["questions"]["untrained"],
            "ch5_diag_ent_trained": tok["attention_entropy"]["questions"]["trained"],
            "ch5_diag_top2_tokens": " and ".join(f'"{t}"' for t in att.index[:2]),
            "ch5_diag_top2_mass": float(att.iloc[:2].sum()),
            "ch5_diag_next_tt": nxt["mrr@10"]["trained questions x trained documents"],
            "ch5_diag_next_ut": nxt["mrr@10"]["untrained questions x trained documents"],
            "ch5_diag_next_uu": nxt["mrr@10"]["untrained questions x untrained documents"],
            "ch5_question_branch": "the token branch" if token_attention else "the sentence branch",
            "ch5_train_values": str(train_values)}


def _ch5_ceiling(ceiling: Mapping[str, Any], by_labels: pd.DataFrame, labellers: Mapping[str, Any],
                 half_width: float) -> dict[str, Any]:
    """The attention ceiling (an oracle over frozen states, ``results/ch05/attention_ceiling.json``)
    and the labels that could steer it (measured here, dev data only)."""
    cs_rows, pm_rows = ceiling["csfcube_fold1_dev_map"], ceiling["pubmedqa_train_half_mrr@10"]
    both_sides = {a: cs_rows[f"a={a} both sides"] for a in ceiling_mixes(ceiling)}
    best_a = max(both_sides, key=lambda a: both_sides[a]["all"])
    mean_pool = cs_rows["mean pooling (all tokens)"]
    methods = [r["method"] for r in both_sides.values()]
    reweighted = [v for k, v in pm_rows.items() if "documents a=" in k]
    headroom = both_sides[best_a]["all"] - mean_pool["all"]
    out: dict[str, Any] = {
        "ch5_ceil_best": both_sides[best_a]["all"], "ch5_ceil_best_a": best_a,
        "ch5_ceil_uniform": both_sides[0.0]["all"], "ch5_ceil_mean": mean_pool["all"],
        "ch5_ceil_headroom": headroom, "ch5_ceil_method_min": min(methods),
        "ch5_ceil_method_max": max(methods), "ch5_ceil_method_mean": mean_pool["method"],
        "ch5_ceil_pm_min": min(reweighted), "ch5_ceil_pm_max": max(reweighted),
        "ch5_ceil_pm_mean": pm_rows["mean pooling (all tokens)"],
        "ch5_ceil_pm_below": "below" if max(reweighted) < pm_rows["mean pooling (all tokens)"] else "not all below",
        "ch5_ceil_vs_noise": "smaller than" if headroom < half_width else "not smaller than"}
    lab = by_labels["chapter 2's labeller"]
    out["ch5_lab_agree"] = labellers["labeller"]["labeller"]["agreement_with_csfcube_labels"]
    out["ch5_lab_half"] = lab.loc[0.5]
    out["ch5_oracle_half"] = by_labels["CSFCube's labels (oracle)"].loc[0.5]
    out["ch5_lab_direction"] = "lowers" if lab.iloc[1:].max() < lab.loc[0.0] else "does not lower"
    probes = by_labels.filter(like="probe").iloc[1:]
    out["ch5_probe_best_min"] = float(probes.max().min())
    out["ch5_probe_best_max"] = float(probes.max().max())
    out["ch5_probe_gap"] = float(probes.max().max() - mean_pool["all"])
    f1 = labellers["probe"]["probe"]
    out["ch5_probe_f1"] = f1["held_out_macro_f1_by_C"][str(f1["C"])]
    agree = [labellers[n]["probe"]["agreement_with_csfcube_labels"] for n in ("probe", "probe_cs")]
    out["ch5_probe_agree_min"], out["ch5_probe_agree_max"] = min(agree), max(agree)
    return out


def ch5(full: Mapping[str, Any], *, profile: str, base: str, power: pd.DataFrame, verdicts: pd.DataFrame,
        full_verdicts: pd.DataFrame, full_fold_verdicts: pd.DataFrame, study_table: pd.DataFrame,
        full_spread: pd.DataFrame, diagnosis: Mapping[str, Mapping[str, Any]], token_attention: bool,
        train_values: bool, ceiling: Mapping[str, Any], ceiling_by_labels: pd.DataFrame,
        labellers: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 5 (evaluation): the paper's gains, each benchmark's power, the full profile's
    verdicts (and how many this run agrees with), the hybrid study, the seed spread, the q-doc
    diagnosis and the attention ceiling.

    ``full``: the committed record ``results/ch05/full/evaluation.json``; ``profile``, ``base``:
    this run's profile and base encoder; ``power``: the power table the verdicts are labelled
    with (the full record's, else this run's); ``verdicts``: this run's verdicts of the trained
    model; ``full_verdicts``, ``full_fold_verdicts``: the full record's, labelled with ``power``
    (:func:`unifar.evaluation.power.label_verdicts`); ``study_table``:
    :func:`unifar.evaluation.hybrid.hybrid_study_table` of the hybrid study; ``full_spread``:
    :func:`unifar.evaluation.report.seed_spread_table` of the full record; ``diagnosis``: the two
    q-doc diagnosis records (token branch first); ``token_attention``, ``train_values``: the
    trained model's config switches; ``ceiling``: the attention-ceiling record;
    ``ceiling_by_labels``: its fold1_dev MAP per label source (columns) and mix ``a`` (index);
    ``labellers``: the ceiling records of the labeller and the probes.
    """
    out: dict[str, Any] = {"ch5_base": base, "ch5_profile": profile}
    out.update(_ch5_paper_and_power(full, power))
    out.update(_ch5_verdicts(full, verdicts, full_verdicts, full_fold_verdicts))
    out.update(_ch5_studies(study_table, full_spread))
    out.update(_ch5_diagnosis(diagnosis, token_attention, train_values))
    out.update(_ch5_ceiling(ceiling, ceiling_by_labels, labellers, out["ch5_cs_half_width"]))
    return out
