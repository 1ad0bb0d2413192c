"""Chapter 2's prose numbers: rhetorical sentence embeddings and the facet labeller (:func:`ch2`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .. import paper
from ..facets import FACETS

__all__ = ["ch2"]


def _cfs3_train() -> float:
    """CFS3's training sentences (reported: its sentences at the paper's 4:1 train/validation split)."""
    facts = paper.SCITORICSBERT_FACTS
    ratio = facts["train_validation_ratio"]
    return facts["cfs3_sentences"] * ratio / (1 + ratio)


def _paper(losses: Sequence[str], paper_rows: Mapping[str, str]) -> dict[str, Any]:
    """SciToricsBERT's hyper-parameters, data and table 4 (reported in the paper, as printed)."""
    t4 = paper.SCITORICSBERT_TABLE4
    out: dict[str, Any] = {f"ch2_paper_{k}": v for k, v in paper.PRINTED["scitoricsbert/hyperparameters"].items()}
    for key in ("cfs3_sentences", "cfs3_labels", "csabstruct_sentences", "csabstruct_labels"):
        out[f"ch2_paper_{key}"] = paper.PRINTED["scitoricsbert/facts"][key]
    for name, row in (("softmax", "SciToricsBERT (Softmax loss)"), ("scibert", "SciBERT avg.")):
        out[f"ch2_paper_{name}_p1"] = t4.value(row, "CS P@1")
        out[f"ch2_paper_{name}_map"] = t4.value(row, "CS MAP@R")
    cs = {r: (t4.value(r, "CS P@1"), t4.value(r, "CS MAP@R")) for r in t4.rows}
    baselines = {r: v for r, v in cs.items() if not r.startswith("SciToricsBERT")}
    gains = {r: v[1] - cs["SciBERT avg."][1] for r, v in cs.items() if r.startswith("SciToricsBERT")}
    out.update(ch2_paper_n_baselines=len(baselines), ch2_paper_glove_p1=cs["GloVe avg."][0],
               ch2_paper_srob_p1=cs["SRoBERTa"][0], ch2_paper_srob_map=cs["SRoBERTa"][1],
               ch2_paper_min_gain=min(gains.values()), ch2_paper_max_gain=max(gains.values()),
               ch2_paper_order=", ".join(sorted(losses, key=lambda n: -cs[paper_rows[n]][1])))
    out["ch2_paper_cfs3_train"] = round(_cfs3_train(), -3)
    out["ch2_paper_pubmed_softmax_gain"] = (t4.value("SciToricsBERT (Softmax loss)", "PubMed MAP@R")
                                            - t4.value("SciBERT avg.", "PubMed MAP@R"))
    out["ch2_paper_pubmed_scibert_p1"] = t4.value("SciBERT avg.", "PubMed P@1")
    return out


def _retrieval(src: str, r: Mapping[str, Any], n_available: int, cfs3_train: float) -> dict[str, Any]:
    """Rhetoric retrieval on CSAbstruct test, before and after fine-tuning with each loss, against
    chance and table 4's baselines (``src``: "run" or "full"; measured here)."""
    t4 = paper.SCITORICSBERT_TABLE4
    baselines = [(t4.value(row, "CS P@1"), t4.value(row, "CS MAP@R")) for row in t4.rows
                 if not row.startswith("SciToricsBERT")]
    ret, base = r["retrieval"], r["retrieval"]["base"]["test"]
    n_test = r["sizes"]["csabstruct test"]["used"]
    n_train = r["sizes"]["csabstruct train (fine-tuning)"]["used"]
    tuned = [n for n in ret if n != "base"]
    ft = r["finetune"]
    gain = {n: ret[n]["test"]["map@r"] - base["map@r"] for n in tuned}
    order = sorted(gain, key=lambda n: -gain[n])
    se = math.sqrt(base["p@1"] * (1 - base["p@1"]) / n_test)
    p1s = [ret[n]["test"]["p@1"] for n in tuned]
    b = r["best_finetuned"]["loss"]
    values = {
        "n_test": n_test, "base_p1": base["p@1"], "base_map": base["map@r"],
        "chance_p1": r["chance"]["test"]["p@1"], "chance_map": r["chance"]["test"]["map@r"],
        "n_above_p1": sum(p > base["p@1"] for p, _ in baselines),
        "n_above_map": sum(m > base["map@r"] for _, m in baselines),
        "train": n_train, "train_share": n_train / n_available, "cfs3_ratio": cfs3_train / n_train,
        "epochs": ft[tuned[0]]["settings"]["epochs"], "steps": len(ft[tuned[0]]["losses"]),
        "best_epochs": ", ".join(f"{n} {ft[n]['best_epoch']}" for n in tuned if ft[n]["best_epoch"] is not None)
                       or "none",
        "gain_order": ", ".join(f"{n} {gain[n]:+.3f}" for n in order), "order": ", ".join(order),
        "best_gain": gain[order[0]], "best_gain_loss": order[0],
        "softmax_rank": order.index("softmax") + 1 if "softmax" in order else 0,
        "se_p1": se, "p1_spread": max(p1s) - min(p1s), "p1_spread_se": (max(p1s) - min(p1s)) / se,
        "best_loss": b, "best_dev": ret[b]["dev"]["map@r"], "base_dev": ret["base"]["dev"]["map@r"],
        "best_test_gain": gain[b], "best_test_loss": order[0],
        "sil_base": r["silhouette_test"]["base"], "sil_best": r["silhouette_test"][b]}
    return {f"ch2_{src}_{k}": v for k, v in values.items()}


def _transfer(src: str, r: Mapping[str, Any]) -> dict[str, Any]:
    """How the fine-tuned embeddings transfer to PubMedQA's abstracts (measured here)."""
    ret = r["retrieval"]
    tuned = [n for n in ret if n != "base"]
    pq = {n: ret[n]["pubmedqa"] for n in ret}
    d_map = {n: pq[n]["map@r"] - pq["base"]["map@r"] for n in tuned}
    d_p1 = {n: pq[n]["p@1"] - pq["base"]["p@1"] for n in tuned}
    order = sorted(d_map, key=lambda n: -d_map[n])
    top_p1 = max(d_p1, key=lambda n: abs(d_p1[n]))
    c = r["label_counts"]["pubmedqa"]
    values = {"transfer_order": ", ".join(f"{n} {d_map[n]:+.3f}" for n in order),
              "transfer_best_loss": order[0], "transfer_best_gain": d_map[order[0]],
              "transfer_p1_loss": top_p1, "transfer_p1_gain": d_p1[top_p1], "transfer_p1_map": d_map[top_p1],
              "pubmed_result_share": c.get("result", 0) / sum(c.values()),
              "pubmed_chance_p1": r["chance"]["pubmedqa"]["p@1"], "pubmed_base_p1": ret["base"]["pubmedqa"]["p@1"]}
    return {f"ch2_{src}_{k}": v for k, v in values.items()}


def _labeller(src: str, r: Mapping[str, Any]) -> dict[str, Any]:
    """The facet labeller chosen on CSAbstruct dev and how it labels PubMedQA and CSFCube
    (measured here)."""
    import numpy as np

    lab = r["labeller"]
    res, win = lab["results"], lab["results"][lab["winner"]]
    keys = {(res[k]["encoder"], res[k]["head"]): k for k in res}  # (encoder, head) -> labeller
    encoders = ("base", "fine-tuned")
    best_of = {e: max((keys[e, h] for h in ("linear", "knn")), key=lambda k: res[k]["dev"]["macro_f1"])
               for e in encoders}
    base_linear = keys["base", "linear"]
    other = best_of["base" if win["encoder"] == "fine-tuned" else "fine-tuned"]
    ft, bs = res[best_of["fine-tuned"]]["test"], res[best_of["base"]]["test"]
    b = r["best_finetuned"]["loss"]
    test_f1 = {eh: res[k]["test"]["macro_f1"] for eh, k in keys.items()}
    pq = win["pubmedqa"]
    majority = max(c["support"] for c in pq["per_class"].values()) / pq["n"]
    cm = np.asarray(pq["confusion"])
    r_i, b_i = FACETS.index("result"), FACETS.index("background")
    csf = win["csfcube"]
    values = {
        "winner": lab["winner"], "winner_kind": "fine-tuned" if win["encoder"] == "fine-tuned" else "base",
        "winner_dev": win["dev"]["macro_f1"], "other_best": other, "other_dev": res[other]["dev"]["macro_f1"],
        "winner_test_acc": win["test"]["accuracy"], "winner_test_f1": win["test"]["macro_f1"],
        "winner_error": 1 - win["test"]["accuracy"],
        "ft_minus_base_f1": ft["macro_f1"] - bs["macro_f1"], "ft_minus_base_acc": ft["accuracy"] - bs["accuracy"],
        "ft_retrieval_gain": r["retrieval"][b]["test"]["map@r"] - r["retrieval"]["base"]["test"]["map@r"],
        "knn_worse": sum(test_f1[e, "knn"] < test_f1[e, "linear"] for e in encoders),
        "n_lab_train": lab["training_sentences"],
        "base_linear_acc": res[base_linear]["test"]["accuracy"], "base_linear_f1": res[base_linear]["test"]["macro_f1"],
        "pubmed_majority": majority,
        "n_below_majority": sum(res[k]["pubmedqa"]["accuracy"] < majority for k in res),
        "n_labellers": len(res), "winner_pubmed_acc": pq["accuracy"],
        "base_linear_pubmed_acc": res[base_linear]["pubmedqa"]["accuracy"],
        "pubmed_result_as_bg": cm[r_i, b_i] / max(cm[r_i].sum(), 1),
        "csf_acc": csf["accuracy"], "csf_kappa": csf["cohen_kappa"],
        "base_linear_csf_acc": res[base_linear]["csfcube"]["accuracy"],
        "base_linear_csf_kappa": res[base_linear]["csfcube"]["cohen_kappa"]}
    cm = np.asarray(csf["confusion"])[:, : len(FACETS)]
    off = sorted(((cm[i, j], i, j) for i in range(3) for j in range(3) if i != j), reverse=True)
    for rank, (count, i, j) in enumerate(off[:2], start=1):
        values[f"csf_conf{rank}"] = int(count)
        values[f"csf_conf{rank}_gold"], values[f"csf_conf{rank}_pred"] = FACETS[i], FACETS[j]
    return {f"ch2_{src}_{k}": v for k, v in values.items()}


def ch2(results: Mapping[str, Any], full: Mapping[str, Any], *, losses: Sequence[str],
        paper_rows: Mapping[str, str], n_available: int, smoke: Mapping[str, Any],
        stability: Mapping[str, Any], n_dev_facet: int, tolerance: float,
        shipped: Mapping[str, Any], sentence_alone: Mapping[str, Any],
        labeller_cost: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 2 (rhetorical sentence embeddings): SciToricsBERT's numbers (reported), and for
    this run and the full profile the retrieval before and after fine-tuning, its transfer to
    PubMedQA and the facet labeller; the plain-encoder smoke study, the labeller's stability and
    the shipped default labeller (measured here).

    ``results``: what this run saved (``ch.save("rhetoric", ...)``, with its ``labeller``);
    ``full``: the committed record ``results/ch02/full/rhetoric.json``; ``losses``: the losses
    fine-tuned; ``paper_rows``: each loss's row of table 4; ``n_available``: CSAbstruct's training
    sentences available for fine-tuning; ``smoke``: ``results/labeller_smoke.json``;
    ``stability``: ``results/ch02/labeller_stability.json``; ``n_dev_facet``: dev sentences with a
    facet label; ``tolerance``: :func:`unifar.rhetoric.labeller.choose_regularisation`'s default;
    ``shipped``, ``sentence_alone``, ``labeller_cost``: ``results/search/default_labeller.json``,
    ``sentence_labeller.json`` and ``labeller_cost.json``.
    """
    fr = full["results"]
    cfs3_train = _cfs3_train()
    out = _paper(losses, paper_rows)
    ls_test = smoke["retrieval"]["csabstruct_test_5_labels"]  # measured here: the plain encoder
    out.update(ch2_ls_p1=ls_test["p@1"], ch2_ls_map=ls_test["map@r"], ch2_ls_tokens=smoke["max_length"],
               ch2_full_tokens=full["config"]["profile_settings"]["max_tokens"],
               ch2_full_token_p1=fr["retrieval"]["base"]["test"]["p@1"] - ls_test["p@1"],
               ch2_full_token_map=fr["retrieval"]["base"]["test"]["map@r"] - ls_test["map@r"],
               ch2_ls_n_train=smoke["data"]["train_sentences_with_facet"],
               ch2_ls_acc=smoke["labeller"]["test"]["linear"]["accuracy"],
               ch2_ls_f1=smoke["labeller"]["test"]["linear"]["macro_f1"])
    for src, r in (("run", results), ("full", fr)):
        out.update(_retrieval(src, r, n_available, cfs3_train))
        out.update(_transfer(src, r))
        out.update(_labeller(src, r))
    spread = {tol: max(row["spread"] for row in stability["rows"] if row["tol"] == tol)
              for tol in {row["tol"] for row in stability["rows"]}}
    out.update(ch2_stab_spread_loose=spread[max(spread)], ch2_stab_spread_tight=spread[min(spread)],
               ch2_run_n_dev_facet=n_dev_facet, ch2_run_one_dev_sentence=1 / n_dev_facet,
               ch2_c_tolerance=tolerance)
    cost = labeller_cost["runs"]  # the shipped labeller (measured here)
    out.update(ch2_default_labeller_kb=shipped["labeller"]["bytes"] / 1000,
               ch2_default_labeller_test_f1=shipped["scores"]["test"]["macro_f1"],
               ch2_sentence_labeller_test_f1=sentence_alone["scores"]["test"]["macro_f1"],
               ch2_labeller_share_in_context=100 * cost["in-context"]["labeller_share"],
               ch2_labeller_share_sentence=100 * cost["sentence"]["labeller_share"])
    return out
