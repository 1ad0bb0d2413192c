"""Chapter 6's prose numbers: table 3's ablations, figure 3 and the case study (:func:`ch6`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import paper
from ..learning_curve import movement_after

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ch6"]


def _ch6_full_structure(fs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Chapter 6's full-profile structure measures (measured here): facet contrast, attention on
    the gold sentences, how far the parameters moved, and the sentence they choose."""
    out: dict[str, Any] = {}
    out["ch6_full_contrast_untrained"] = fs["untrained"]["contrast"]["scirepeval"]
    out["ch6_full_contrast_full"] = fs["full"]["contrast"]["scirepeval"]
    out["ch6_full_contrast_noanchor"] = fs.get("w/o anchors", fs["full"])["contrast"]["scirepeval"]
    out["ch6_full_gold_untrained"] = fs["untrained"]["attention"]["mass_on_gold"]
    out["ch6_full_gold_full"] = fs["full"]["attention"]["mass_on_gold"]
    out["ch6_full_gold_nokl"] = fs.get("w/o L_KL", fs["full"])["attention"]["mass_on_gold"]
    out["ch6_full_uniform"] = fs["full"]["attention"]["uniform_mass_on_gold"]
    # how far the full row's anchors and aggregation moved (relative norm; older records lack it)
    out["ch6_full_anchor_shift"] = fs["full"].get("shift", {}).get("anchors", float("nan"))
    out["ch6_full_agg_shift"] = fs["full"].get("shift", {}).get("aggregation", float("nan"))
    # how far any trained row moved from uniform attention and from identical facets (the identity
    # initialisation); the sentence is chosen by these two numbers
    gold_moves = [abs(v["attention"]["mass_on_gold"] - v["attention"]["uniform_mass_on_gold"])
                  for v in fs.values() if v["attention"]["mass_on_gold"] is not None]
    contrasts = [abs(c) for v in fs.values() for c in v["contrast"].values()]
    out["ch6_full_gold_move"] = max(gold_moves)
    out["ch6_full_contrast_max"] = max(contrasts)
    out["ch6_full_structure_reading"] = (
        "so training on a frozen base with the paper's learning rates leaves the attention within "
        "a percentage point of uniform and the facet embeddings of a text nearly identical: at "
        "this scale the switches of the table have almost nothing to act on"
        if max(gold_moves) < 0.01 and max(contrasts) < 0.01 else
        "so training does move the attention and the facet geometry away from the identity "
        "initialisation; whether that moves retrieval is the question of the table")
    return out


def _ch6_full_verdicts(full: Mapping[str, Any], left_out: list[str]) -> dict[str, Any]:
    """Chapter 6's table-3 verdicts of the full profile (measured here) beside the paper's rows
    (reported), and what its runs cost."""
    import numpy as np
    import pandas as pd

    out: dict[str, Any] = {}
    # the table's verdicts (measured here, full profile) beside the paper's (reported)
    res = full["results"]
    fv = pd.DataFrame(res["verdicts"])
    fa = pd.DataFrame(res["paper_agreement"])
    out["ch6_full_cells"] = len(fv)
    counts = fv["verdict"].value_counts() if len(fv) else pd.Series(dtype=int)
    for key, label in (("underpowered", "underpowered"), ("nodiff", "no detectable difference"),
                       ("worse", "worse"), ("better", "better"), ("noise", "within noise")):
        out[f"ch6_full_{key}"] = int(counts.get(label, 0))
    out["ch6_full_identical"] = int(fv["identical"].fillna(0).eq(1).sum()) if "identical" in fv else 0
    out["ch6_full_agree"] = int(fa["agree"].sum()) if len(fa) else 0
    out["ch6_full_agree_n"] = len(fa)
    out["ch6_paper_full_agg"] = paper.UNIFAR_TABLE3.value("UniFAR (full)", "CSFCube aggregated MAP")
    out["ch6_paper_nokl_agg"] = paper.UNIFAR_TABLE3.value("w/o L_KL", "CSFCube aggregated MAP")
    out["ch6_full_seeds"] = len(full["config"]["seeds"])
    out["ch6_full_runs"] = len(res["runs"])
    out["ch6_full_train_minutes"] = sum(r["seconds"] for r in res["runs"].values()) / 60
    row_minutes = pd.DataFrame(res["runs"].values()).groupby("row")["seconds"].median() / 60
    out["ch6_full_left_out"] = (
        f"Rows of the `full` profile not yet in its committed results: "
        f"{', '.join(repr(r) for r in left_out)} (a re-run of the profile trains only what is "
        "missing; the finished runs are reused)" if left_out else
        "Every row of the `full` profile is in its committed results; a row took from "
        f"{row_minutes.min():.1f} ({row_minutes.idxmin()!r}) to {row_minutes.max():.1f} "
        f"({row_minutes.idxmax()!r}) minutes per seed (median) on 2 CPU cores")
    out["ch6_paper_ftus"] = paper.UNIFAR_FACTS["ftus"]
    beyond = fv[fv["verdict"].isin(["better", "worse"])] if len(fv) else fv
    out["ch6_full_beyond"] = "; ".join(f"{r.row} in {r.column} ({r.diff:+.2f}, {r.verdict})"
                                       for r in beyond.itertuples()) or "none"
    # what the teacher's distillation adds to the paper's architecture (the row without it)
    kd = (fv[(fv["row"] == "w/o L_KD (the paper's objective)") & (fv["column"] == "CSFCube aggregated MAP")]
          if len(fv) else fv)
    kd = kd.iloc[0] if len(kd) else pd.Series({"diff": np.nan, "ci_low": np.nan, "ci_high": np.nan})
    out.update(ch6_full_kd_diff=kd["diff"], ch6_full_kd_low=kd["ci_low"], ch6_full_kd_high=kd["ci_high"])
    out["ch6_full_table_reading"] = (
        "the table cannot tell the rows apart on retrieval: almost no row differs from the full "
        "row beyond the paired bootstrap, and the structural measures above say how little the "
        "switches had to act on"
        if len(beyond) <= 0.1 * max(len(fv), 1) else
        "some switches move retrieval beyond noise (the cells marked worse or better above); "
        "the sign table compares them with the paper cell by cell")
    return out


def ch6(full: Mapping[str, Any], *, structure: Mapping[str, Mapping[str, Any]], steps: int,
        case_ratio: Mapping[str, float], ch4_full: Mapping[str, Any], left_out: list[str]) -> dict[str, Any]:
    """Chapter 6 (ablations): what this run's training changed in the full row, the full
    profile's structure measures, table-3 verdicts, figure 3's contrasts and the paper's rows.

    ``full``: the committed record ``results/ch06/full/ablations.json``; ``structure``: this run's
    structure measures per model (``"untrained"``, ``"full"``, ...: ``contrast``, ``attention``,
    ``held_out_before``/``_after``); ``steps``: the optimizer steps each row trained;
    ``case_ratio``: the case study's mean attention share on the paper's spans over uniform, per
    model; ``ch4_full``: chapter 4's committed full record (its fold1_dev curves say how flat the
    same objective is after this chapter's epoch); ``left_out``: rows of the full profile missing
    from ``full``.
    """
    # measured here, this run
    s_full, s_untrained = structure["full"], structure["untrained"]
    out: dict[str, Any] = {
        "ch6_contrast_untrained": s_untrained["contrast"]["scirepeval"],
        "ch6_contrast_full": s_full["contrast"]["scirepeval"],
        "ch6_gold_untrained": s_untrained["attention"]["mass_on_gold"],
        "ch6_gold_full": s_full["attention"]["mass_on_gold"],
        "ch6_lqd_before": (s_full["held_out_before"] or {}).get("l_qd", float("nan")),
        "ch6_lqd_after": (s_full["held_out_after"] or {}).get("l_qd", float("nan")),
        "ch6_steps": steps}
    # measured here, full profile: how long the rows trained, against chapter 4's dev curves
    res = full["results"]
    full_steps = max(r["steps"] for r in res["runs"].values())
    flat_from, moved_after = movement_after([s["dev_curve"] for s in ch4_full["results"]["seeds"].values()],
                                            full_steps, "fold1_dev_map")
    out.update(ch6_full_steps=full_steps, ch6_ch4_flat_from=flat_from, ch6_ch4_flat_gain=moved_after)
    fs = res["structure"]
    out.update(_ch6_full_structure(fs))
    out.update(_ch6_full_verdicts(full, left_out))
    fc = {r: v["contrast"]["scirepeval"] for r, v in fs.items()}  # figure 3, full profile
    out["ch6_fig3_full"] = fc["full"]
    out["ch6_fig3_freeze"] = fc.get("freeze anchors", float("nan"))
    out["ch6_fig3_noanchor"] = fc.get("w/o anchors", float("nan"))
    out["ch6_fig3_noinput"] = fc.get("w/o E_input", float("nan"))
    out["ch6_fig3_untrained"] = fc["untrained"]
    out["ch6_case_ratio_untrained"] = case_ratio["untrained"]  # measured here, this run
    out["ch6_case_ratio_full"] = case_ratio["full"]
    return out
