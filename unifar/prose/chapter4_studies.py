"""Chapter 4's prose numbers from its committed dev studies (:func:`ch4_studies`).

Every value here is *measured here*, on dev data only (fold1_dev, held-out FTUs, PubMedQA's
train half), by the study scripts under ``benchmarks/studies/`` (2-core CPU unless the record
says H200); the one test-split record is the whole-stack test (``whole_stack_test.json``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..book import load_record
from ..config import UniFARConfig
from ..construction.mining import MiningConfig
from ..evaluation.attention import ceiling_ladder
from ..evaluation.dev_studies import study_table, whole_stack_frames
from ..evaluation.power import effects_sought
from ..training_log import read_log

__all__ = ["WHOLE_STACK_GOAL", "ch4_studies"]

#: issue 31's target for the trained model on CSFCube's test MAP (2-fold), which the whole-stack
#: test is compared with
WHOLE_STACK_GOAL = 42.0

Record = Mapping[str, Any]


def _dev_all(r: Record) -> float:
    return r["fold1_dev_map"]["all"]


def _real(r: Record) -> float:
    return r["heldout_real_questions"]["mrr@10"]


def _crop(r: Record) -> float:
    return r["heldout_crop_questions"]["mrr@10"]


def _pubmedqa(r: Record) -> float:
    return r["pubmedqa_train_half_mrr@10"]["all"]


def _tuning(load: Callable[[str], Record], n_fold1_dev: int) -> dict[str, Any]:
    """The first study (paper learning rates, fixed values, x10) and its q-doc follow-up."""
    tuning = load("ch04/tuning_dev.json")
    tr = tuning["runs"]
    untr, dflt = tr["untrained (identity init)"], tr["default (paper lrs, all aggregation parameters)"]
    fixed, x10 = tr["fixed values (V, out_proj kept at init)"], tr["fixed values, lrs x10"]
    out = {"ch4_tune_held_out_share": tuning["n_held_out_ftus"] / tuning["n_ftus"],
           "ch4_tune_n_documents": tuning["n_documents"], "ch4_tune_n_real": tuning["n_real_questions"],
           "ch4_tune_x10_loss": x10["held_out_loss"]["loss"], "ch4_tune_x10_mrr": _real(x10),
           "ch4_tune_untrained_mrr": _real(untr), "ch4_tune_default_loss": dflt["held_out_loss"]["loss"],
           "ch4_tune_fixed_loss": fixed["held_out_loss"]["loss"],
           "ch4_tune_default_mrr_drop": _real(untr) - _real(dflt), "ch4_tune_woqd_mrr": _real(tr["w/o L_QD"]),
           "ch4_tune_real_only_mrr": _real(tr["real questions only (no crops)"]),
           "ch4_tune_fixed_all": _dev_all(fixed), "ch4_tune_untrained_all": _dev_all(untr),
           "ch4_tune_fixed_mrr": _real(fixed), "ch4_tune_fixed_r1": fixed["heldout_real_questions"]["r@1"],
           "ch4_tune_untrained_r1": untr["heldout_real_questions"]["r@1"], "ch4_n_fold1_dev": n_fold1_dev}
    diag = load("ch05/qdoc_diagnosis_token_branch.json")
    mrr, example = diag["mrr@10"], diag["example"]
    weights = dict(zip(example["tokens"], example["trained_attention_facet0"]))
    out |= {"ch4_diag_trained_pair": mrr["trained questions x trained documents"],
            "ch4_diag_trained_q": mrr["trained questions x untrained documents"],
            "ch4_diag_trained_docs": mrr["untrained questions x trained documents"],
            "ch4_diag_untrained_pair": mrr["untrained questions x untrained documents"],
            "ch4_diag_increase": weights["increase"], "ch4_diag_can": weights["can"],
            "ch4_diag_uniform": 1 / len(example["tokens"]), "ch4_diag_n_questions": diag["n_questions"],
            "ch4_diag_n_documents": diag["n_documents"]}
    follow = load("ch04/tuning_dev_qdoc.json")
    fr = follow["runs"]
    q_untr, q_fixed = fr["untrained (identity init)"], fr["fixed values (V, out_proj kept at init)"]
    q_switch = fr["fixed values + w/o MHA_tok (chapter 4's default)"]
    r1 = [r["heldout_real_questions"]["r@1"] for r in fr.values()]
    return out | {
        "ch4_q_fixed_pm": _pubmedqa(q_fixed), "ch4_q_untrained_pm": _pubmedqa(q_untr),
        "ch4_q_n_pm_held": follow["n_pubmedqa_held_out"],
        "ch4_q_fixed_pm_held": q_fixed["pubmedqa_train_half_mrr@10"]["held_out"],
        "ch4_q_untrained_pm_held": q_untr["pubmedqa_train_half_mrr@10"]["held_out"],
        "ch4_q_switch_pm": _pubmedqa(q_switch), "ch4_q_switch_all": _dev_all(q_switch),
        "ch4_q_fixed_all": _dev_all(q_fixed), "ch4_q_untrained_all": _dev_all(q_untr),
        "ch4_q_r1_min": min(r1), "ch4_q_r1_max": max(r1)}


def _hybrid(load: Callable[[str], Record]) -> dict[str, Any]:
    """The hybrid teacher's FTUs (128- and 512-token neighbours, teacher margin 3) and the
    top-layer runs (top 1, top 6), against the frozen base and mean pooling."""
    hyb = load("ch04/tuning_dev_hybrid.json")
    h128, h512 = load("ch04/tuning_dev_hybrid_128.json")["runs"], hyb["runs"]
    m3 = load("ch04/tuning_dev_m3.json")["runs"]["frozen, teacher_margin=3"]
    top1 = next(iter(load("ch04/tuning_dev_top1.json")["runs"].values()))
    top6 = next(iter(load("ch04/tuning_dev_top6.json")["runs"].values()))
    init = load("ch04/initial_loss.json")
    f128, t1_128 = h128["hybrid FTUs, frozen (ch04 default)"], h128["hybrid FTUs, top1"]
    f512, mean512 = h512["frozen base (ch04 default)"], h512["mean pooling (base encoder)"]
    out = {"ch4_rerank_depth": MiningConfig().rerank_depth, "ch4_hybrid_weight": MiningConfig().hybrid_weight,
           "ch4_h_frozen128": _dev_all(f128), "ch4_h_frozen512": _dev_all(f512),
           "ch4_h_untrained": _dev_all(h512["untrained, w/o MHA_tok"]), "ch4_h_mean": _dev_all(mean512)}
    for key, folder in (("default", "default"), ("bm25", "facet-bm25"), ("m3", "teacher_margin=3")):
        out[f"ch4_init_ldd_{key}"] = init["folders"][folder]["terms"]["l_dd"]
    out |= {"ch4_init_n": init["n"], "ch4_m3_heldout_ldd": m3["held_out_loss"]["l_dd"],
            "ch4_frozen_heldout_ldd": f512["held_out_loss"]["l_dd"], "ch4_m3_all": _dev_all(m3),
            "ch4_top1_128_all": _dev_all(t1_128), "ch4_top1_128_real": _real(t1_128),
            "ch4_frozen128_real": _real(f128), "ch4_top1_128_crop": _crop(t1_128),
            "ch4_frozen128_crop": _crop(f128), "ch4_top1_128_ratio": t1_128["seconds"] / f128["seconds"],
            "ch4_top1_128_min": t1_128["seconds"] / 60, "ch4_frozen128_min": f128["seconds"] / 60,
            "ch4_top1_all": _dev_all(top1), "ch4_top1_real": _real(top1), "ch4_frozen512_real": _real(f512),
            "ch4_top1_crop": _crop(top1), "ch4_frozen512_crop": _crop(f512), "ch4_top1_pm": _pubmedqa(top1),
            "ch4_frozen512_pm": _pubmedqa(f512), "ch4_mean_pm": _pubmedqa(mean512),
            "ch4_top1_min": top1["seconds"] / 60, "ch4_frozen512_min": f512["seconds"] / 60,
            "ch4_top1_steps": top1["steps"], "ch4_top6_loss": top6["held_out_loss"]["loss"],
            "ch4_frozen512_loss": f512["held_out_loss"]["loss"], "ch4_top6_lqd": top6["held_out_loss"]["l_qd"],
            "ch4_frozen512_lqd": f512["held_out_loss"]["l_qd"], "ch4_top6_all": _dev_all(top6),
            "ch4_top6_real": _real(top6), "ch4_top6_pm": _pubmedqa(top6), "ch4_top6_crop": _crop(top6),
            "ch4_top6_steps": top6["steps"], "ch4_top6_hours": top6["seconds"] / 3600,
            "ch4_h_n_train": hyb["n_train_ftus"], "ch4_h_n_documents": hyb["n_documents"],
            "ch4_joint_heldout_lkl": f512["held_out_loss"]["l_kl"]}
    h200_runs = load("ch04/tuning_dev_h200.json")["runs"]
    h200_mean = h200_runs["mean pooling (base encoder)"]
    whole = [r for n, r in h200_runs.items() if n.startswith("whole base")]
    bg = [r["fold1_dev_map"]["background"] for r in whole]
    mt = [r["fold1_dev_map"]["method"] for r in whole]
    return out | {
        "ch4_h200_mean": _dev_all(h200_mean),
        "ch4_transport_cos": load("ch04/h200_transport_check.json")["cosine_min"],
        "ch4_h200_bg_gain_min": min(bg) - h200_mean["fold1_dev_map"]["background"],
        "ch4_h200_bg_gain_max": max(bg) - h200_mean["fold1_dev_map"]["background"],
        "ch4_h200_mt_loss_min": h200_mean["fold1_dev_map"]["method"] - max(mt),
        "ch4_h200_mt_loss_max": h200_mean["fold1_dev_map"]["method"] - min(mt),
        "ch4_h200_crop_mean": _crop(h200_mean), "ch4_h200_crop_min": min(_crop(r) for r in whole),
        "ch4_h200_crop_max": max(_crop(r) for r in whole), "ch4_h200_all_max": max(_dev_all(r) for r in whole)}


def _attention(load: Callable[[str], Record]) -> dict[str, Any]:
    """Where the trained attention goes (``attention_stats.json``), the seed spread, the key
    projection's initialisation, the KL fit, and the lambda study."""
    stats = load("ch04/attention_stats.json")
    sm = stats["models"]
    dflt = sm["chapter 4 default (frozen, paper lrs)"]
    u = dflt["uniform_mass_on_gold"]
    # chapter 5's oracle gains most with a quarter to a half of the attention on the gold
    # sentences: attention mass (1 - a) * uniform + a
    out = {"ch4_att_n_papers": stats["n_papers"], "ch4_att_entropy": dflt["norm_entropy"],
           "ch4_att_mass": dflt["mass_on_gold"], "ch4_att_uniform": u, "ch4_att_cos": dflt["cos_to_untrained"],
           "ch4_oracle_mass_quarter": 0.75 * u + 0.25, "ch4_oracle_mass_half": 0.5 * u + 0.5}
    seed_all = [_dev_all(r) for r in load("ch04/tuning_dev_seeds.json")["runs"].values()]
    out |= {f"ch4_seed_dev_{i}": v for i, v in enumerate(seed_all)}
    out["ch4_seed_spread"] = max(seed_all) - min(seed_all)
    key_init = load("ch04/tuning_dev_key_init.json")["runs"]
    k_i, k_i3 = key_init["key projection at identity (K = I)"], key_init["K = I, lrs x3"]
    k_3 = key_init["lrs x3 (small K)"]
    frozen512 = load("ch04/tuning_dev_hybrid.json")["runs"]["frozen base (ch04 default)"]
    out |= {"ch4_ki_all": _dev_all(k_i), "ch4_ki_entropy": sm["K = I"]["norm_entropy"],
            "ch4_ki3_mass": sm["K = I, lrs x3"]["mass_on_gold"], "ch4_k3_mass": sm["lrs x3 (small K)"]["mass_on_gold"],
            "ch4_ki3_entropy": sm["K = I, lrs x3"]["norm_entropy"],
            "ch4_k3_entropy": sm["lrs x3 (small K)"]["norm_entropy"], "ch4_ki3_all": _dev_all(k_i3),
            "ch4_k3_all": _dev_all(k_3), "ch4_k3_gain": max(_dev_all(k_i3), _dev_all(k_3)) - _dev_all(frozen512)}
    kl = load("ch04/kl_fit.json")
    kl_runs = {r["lr"]: r for r in kl["runs"].values() if not r["init_key_identity"]}
    lr_paper = min(kl_runs)
    out |= {"ch4_kl_n_train": kl["n_train_batches"] * kl["batch_size"],
            "ch4_kl_n_held_out": kl["n_held_out_batches"] * kl["batch_size"], "ch4_kl_steps": kl["steps"],
            "ch4_kl_before": kl_runs[lr_paper]["held_out_kl_before"],
            "ch4_kl_after": kl_runs[lr_paper]["held_out_kl_after"],
            "ch4_kl_after_10": kl_runs[10 * lr_paper]["held_out_kl_after"],
            "ch4_kl_after_100": kl_runs[100 * lr_paper]["held_out_kl_after"]}
    lam = load("ch04/tuning_dev_lambda.json")["runs"]
    lam3, lam10 = lam["lambda x3 (0.9 -> 1.5)"], lam["lambda x10 (3 -> 5)"]
    s10 = sm["lambda x10 (3 -> 5)"]
    return out | {
        "ch4_l3_lkl": lam3["held_out_loss"]["l_kl"], "ch4_l10_lkl": lam10["held_out_loss"]["l_kl"],
        "ch4_l3_ldd": lam3["held_out_loss"]["l_dd"], "ch4_l10_ldd": lam10["held_out_loss"]["l_dd"],
        "ch4_l10_mass": s10["mass_on_gold"], "ch4_l10_entropy": s10["norm_entropy"],
        "ch4_l10_cos": s10["cos_to_untrained"], "ch4_l10_all": _dev_all(lam10), "ch4_l3_all": _dev_all(lam3),
        "ch4_l10_share": (s10["mass_on_gold"] - u) / (1 - u)}


def _ceiling(load: Callable[[str], Record]) -> dict[str, Any]:
    """Chapter 5's attention ceiling: CSFCube's own labels (the oracle), chapter 2's labeller and
    the linear probes, at each share ``a`` of the attention on the labelled sentences."""
    ceiling = load("ch05/attention_ceiling.json")["csfcube_fold1_dev_map"]
    mean = ceiling["mean pooling (all tokens)"]["all"]
    oracle = max(v["all"] for k, v in ceiling.items() if k.endswith("both sides"))
    out = {"ch4_oracle_max": oracle, "ch4_oracle_gain": oracle - mean, "ch4_oracle_gain_mean": oracle - mean,
           "ch4_oracle_uniform": ceiling["a=0.0 both sides"]["all"],
           "ch4_oracle_quarter": ceiling["a=0.25 both sides"]["all"], "ch4_ceiling_mean": mean}
    labeller = load("ch05/attention_ceiling_labeller.json")
    lab_map = labeller["csfcube_fold1_dev_map"]
    out |= {"ch4_lab_agreement": labeller["labeller"]["agreement_with_csfcube_labels"] / 100,
            "ch4_lab_n_units": labeller["labeller"]["n_labelled_units"]}
    for f in ("background", "method", "result"):
        out[f"ch4_lab_uniform_{f}"] = lab_map["labeller a=0.0 both sides"][f]
        out[f"ch4_lab_half_{f}"] = lab_map["labeller a=0.5 both sides"][f]
    out |= {"ch4_lab_quarter_all": lab_map["labeller a=0.25 both sides"]["all"],
            "ch4_lab_full_all": lab_map["labeller a=1.0 both sides"]["all"]}
    probe, probe_cs = load("ch05/attention_ceiling_probe.json"), load("ch05/attention_ceiling_probe_csabstruct.json")
    p = probe["probe"]
    out |= {"ch4_probe_f1": p["held_out_macro_f1_by_C"][str(p["C"])], "ch4_probe_n_docs": p["n_docs"],
            "ch4_probe_agreement": p["agreement_with_csfcube_labels"] / 100,
            "ch4_probe_cs_agreement": probe_cs["probe"]["agreement_with_csfcube_labels"] / 100,
            "ch4_probe_cs_n_docs": probe_cs["probe"]["n_docs"],
            "ch4_probe_held_out_share": p["n_held_out_units"] / (p["n_train_units"] + p["n_held_out_units"])}
    mixes = (0.25, 0.5, 0.75, 1.0)  # the probes' labelled mixes (a = 0 is uniform attention)
    best = {(name, kind): max(ceiling_ladder(rec, f"probe {kind} ", mixes))
            for name, rec in (("all", probe), ("cs", probe_cs)) for kind in ("hard", "soft")}
    return out | {"ch4_probe_best": max(best.values()), "ch4_probe_best_gap": max(best.values()) - mean,
                  "ch4_probe_below_oracle": oracle - max(best.values()),
                  "ch4_probe_cs_hard_best": best[("cs", "hard")], "ch4_probe_all_hard_best": best[("all", "hard")]}


#: the distillation references' rows (``distill_references.json``)
TOKEN_MEAN = "mean of the unified input's tokens (single-vector control, untrained)"
UNIFORM = "untrained UniFAR (uniform over sentences)"


def _distillation(load: Callable[[str], Record]) -> dict[str, Any]:
    """The distillation study (rows B1-B5, C1-C4): fold1_dev MAP at the end and best on the dev
    curve, held-out L_KD, against mean pooling, untrained UniFAR and the L_KD references."""
    runs = load("ch04/tuning_dev_distill.json")["runs"] | load("ch04/tuning_dev_distill_kd10.json")["runs"]
    table = study_table(runs)
    fields = {"dev": "fold1_dev MAP", "best": "best on the curve", "lkd0": "held-out L_KD, first point",
              "lkd": "held-out L_KD, end"}
    out: dict[str, Any] = {}
    for key in ("B1", "B2", "B3", "B4", "B5", "C1", "C2", "C3", "C4"):
        row = next(k for k in table.index if k.startswith(key))  # the row whose name starts with key
        for tag, field in fields.items():
            out[f"ch4_kd_{key}_{tag}"] = float(table.loc[row, field])
    c4 = runs[next(k for k in runs if k.startswith("C4"))]
    refs = load("ch04/distill_references.json")["l_kd"]
    out |= {"ch4_kd_C4_s_per_step": c4["seconds_training"] / c4["steps"],
            "ch4_kd_mean_dev": _dev_all(runs["mean pooling (base encoder)"]),
            "ch4_kd_untrained_dev": _dev_all(runs["untrained, w/o MHA_tok"])}
    for n in ("all", 12):
        out[f"ch4_kd_ref_uniform_{n}"] = refs[f"{UNIFORM}, candidates {n}"]
        out[f"ch4_kd_ref_tokens_{n}"] = refs[f"{TOKEN_MEAN}, candidates {n}"]
    return out


def _whole_stack(load: Callable[[str], Record]) -> dict[str, Any]:
    """The whole-stack study (rows E*, top layers trained with distillation): its dev curves and
    paired differences on fold1_dev, the benchmark's power, and what an epoch would cost."""
    import numpy as np

    whole = load("ch04/tuning_dev_whole_stack.json")
    runs, power = whole["runs"], whole["fold1_dev_power"]
    rows = {name.split(" ")[0]: (name, r) for name, r in runs.items() if name[:1] == "E"}
    stack = [r for _, r in rows.values() if r["spec"].get("train_top_layers")]
    rate = float(np.mean([r["ftus_per_second"] for r in stack]))
    full_train = load("ch04/tuning_dev_distill.json")["n_train_ftus"]
    out: dict[str, Any] = {
        "ch4_ws_layers": stack[0]["spec"]["train_top_layers"],
        "ch4_ws_ftus_per_step": UniFARConfig(**stack[0]["spec"]["config"]).batch_size,
        "ch4_ws_ftus_per_s": rate, "ch4_ws_n_train": whole["n_train_ftus"], "ch4_ws_n_held": whole["n_held_out_ftus"],
        "ch4_ws_candidates": stack[0]["spec"]["max_teacher_candidates"],
        "ch4_ws_dev_every": stack[0]["spec"]["dev_every"], "ch4_ws_n_queries": power["n_queries"],
        "ch4_ws_mde": power["mde"], "ch4_ws_effect": effects_sought()["csfcube"]["all/map"],
        "ch4_ws_mean": _dev_all(runs["mean pooling (base encoder)"]),
        "ch4_ws_untrained": _dev_all(runs["untrained, w/o MHA_tok"]),
        "ch4_ws_mean_crop": _crop(runs["mean pooling (base encoder)"]),
        "ch4_ws_untrained_crop": _crop(runs["untrained, w/o MHA_tok"]),
        "ch4_ws_full_train": full_train, "ch4_ws_full_epoch_hours": full_train / rate / 3600}
    for key, (name, r) in rows.items():
        curve = [p["fold1_dev_map"] for p in r["dev_curve"]]
        out |= {f"ch4_ws_{key}_dev": _dev_all(r), f"ch4_ws_{key}_best": max(curve),
                f"ch4_ws_{key}_first": curve[0], f"ch4_ws_{key}_lkd": r["held_out_loss"]["l_kd"],
                f"ch4_ws_{key}_steps": r["steps"], f"ch4_ws_{key}_minutes": r["seconds"] / 60,
                f"ch4_ws_{key}_crop": _crop(r), f"ch4_ws_{key}_pm": _pubmedqa(r),
                f"ch4_ws_{key}_last_gain": curve[-1] - curve[-2], f"ch4_ws_{key}_gain": curve[-1] - curve[0],
                f"ch4_ws_{key}_ended": "its dev curve flattened" if r.get("stopped_early") else "its step budget ended"}
        for ref, tag in (("mean pooling", "mean"), ("untrained", "untr")):
            out |= {f"ch4_ws_{key}_{tag}_{k}": power["paired"][name][ref][k] for k in ("diff", "low", "high")}
    return out


def _whole_stack_test(load: Callable[[str], Record]) -> dict[str, Any]:
    """The whole-stack row's one evaluation on the test splits: power at each benchmark's
    headline metric and its paired differences with each control (95 % intervals)."""
    verdicts, power = whole_stack_frames(load("ch04/whole_stack_test.json"))
    out: dict[str, Any] = {
        "ch4_wst_n": power.loc[("csfcube", ""), "n"], "ch4_wst_mde": power.loc[("csfcube", ""), "mde"],
        "ch4_wst_mde_f1": power.loc[("csfcube", "fold1_test"), "mde"],
        "ch4_wst_mde_sr": power.loc[("scirepeval", ""), "mde"],
        "ch4_wst_effect_sr": power.loc[("scirepeval", ""), "effect_sought"],
        "ch4_wst_e2": verdicts.loc[("csfcube", "", "mean"), "a"],
        "ch4_wst_e2_f1": verdicts.loc[("csfcube", "fold1_test", "mean"), "a"],
        "ch4_wst_e2_sr": verdicts.loc[("scirepeval", "", "mean"), "a"], "ch4_wst_goal": WHOLE_STACK_GOAL}
    all_three = [("csfcube", "", ""), ("csfcube", "fold1_test", "_f1"), ("scirepeval", "", "_sr")]
    rows = {"mean": ("mean", all_three), "untr": ("unifar-untrained", all_three),
            "e1": ("unifar-frozen-kd10", all_three[:1]), "teacher": ("hybrid-mean", all_three[:1])}
    for tag, (system, where) in rows.items():
        for bench, fold, suffix in where:
            v = verdicts.loc[(bench, fold, system)]
            out[f"ch4_wst_{tag}{suffix}"] = v["b"]
            out |= {f"ch4_wst_{tag}{suffix}_{k}": v[k] for k in ("diff", "ci_low", "ci_high")}
    return out


def _gpu(load: Callable[[str], Record], results_dir: Path) -> dict[str, Any]:
    """The paper profile on the lent H200 (speed, memory) beside chapter 4's configuration, and
    the CPU's share of a step spent building batches."""
    import numpy as np

    run = load("ch04/paper_profile_h200/run.json")
    log = read_log(results_dir / "ch04/paper_profile_h200")
    speed = {n: r["ftus_per_second"] for n, r in load("ch04/tuning_dev_h200.json")["runs"].items()
             if r.get("ftus_per_second")}
    paper_speed = speed["whole base trains, paper config, 1 epoch"]
    ours_speed = speed["whole base trains, chapter 4 config, 1 epoch"]
    build = load("ch04/batch_build_cpu.json")
    step_fast, step_slow = build["ftus_per_step"] / ours_speed, build["ftus_per_step"] / paper_speed
    return {"ch4_gpu_steps": run["steps"], "ch4_gpu_ftus_per_s": run["ftus_per_second"],
            "ch4_gpu_median_ftus_per_s": float(np.median([r["ftus_per_s"] for r in log[1:]])),
            "ch4_gpu_peak_gib": run["peak_memory"]["bytes"] / 2**30, "ch4_h200_paper_speed": paper_speed,
            "ch4_h200_ours_speed": ours_speed, "ch4_h200_speed_ratio": paper_speed / ours_speed,
            "ch4_build_docs": build["documents_per_step_mean"], "ch4_build_questions": build["questions_per_step_mean"],
            "ch4_build_ftus": build["ftus_per_step"], "ch4_build_seconds": build["seconds_per_step_median"],
            "ch4_h200_step_fast": step_fast, "ch4_h200_step_slow": step_slow,
            "ch4_build_share_min": build["seconds_per_step_median"] / step_slow,
            "ch4_build_share_max": build["seconds_per_step_median"] / step_fast}


def ch4_studies(results_dir: str | Path = "results", *, n_fold1_dev: int) -> dict[str, Any]:
    """Every number chapter 4's prose quotes from its committed dev studies (``results_dir``:
    the repository's ``results/``; ``n_fold1_dev``: CSFCube's fold1_dev query facets)."""
    root = Path(results_dir)
    # several studies read the same record (the hybrid FTUs' reference rows)
    load = functools.cache(functools.partial(load_record, results_dir=root))

    return {**_tuning(load, n_fold1_dev), **_hybrid(load), **_attention(load), **_ceiling(load),
            **_distillation(load), **_whole_stack(load), **_whole_stack_test(load), **_gpu(load, root)}
