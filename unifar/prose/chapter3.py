"""Chapter 3's prose numbers: data construction, the mining signal, leakage and the FTUs (:func:`ch3`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import paper
from ..facets import FACETS

if TYPE_CHECKING:
    from ..construction.mining import MiningConfig

__all__ = ["ch3", "signal_facts"]


def signal_facts(rows: Mapping[str, Mapping[str, float]]) -> tuple[Mapping[str, float], Mapping[str, float],
                                                                   float, dict[str, float]]:
    """What the prose quotes of one signal-check table ``{ranker: {"<facet> MAP": value}}``
    (fold1_dev MAP per facet and ``"all MAP"``; rankers ``"... mean pooling"`` and
    ``"hybrid, w = W"``): the dense row, the best hybrid row (ties go to the smaller ``W``), its
    ``W``, and the hybrid's gain over the dense ranker per facet.

    >>> rows = {"minilm mean pooling": {"background MAP": 50.0, "method MAP": 30.0, "result MAP": 40.0, "all MAP": 40.0},
    ...         "hybrid, w = 0.25": {"background MAP": 51.0, "method MAP": 33.0, "result MAP": 41.0, "all MAP": 41.7},
    ...         "hybrid, w = 0.5": {"background MAP": 50.0, "method MAP": 34.0, "result MAP": 41.1, "all MAP": 41.7}}
    >>> dense, best, w, gains = signal_facts(rows)
    >>> w, best["all MAP"], gains
    (0.25, 41.7, {'background': 1.0, 'method': 3.0, 'result': 1.0})
    """
    dense = next(v for k, v in rows.items() if "mean pooling" in k)
    hybrids = {float(k.split("= ")[1]): v for k, v in rows.items() if k.startswith("hybrid")}
    w = max(hybrids, key=lambda x: (hybrids[x]["all MAP"], -x))
    gains = {f: hybrids[w][f"{f} MAP"] - dense[f"{f} MAP"] for f in FACETS}
    return dense, hybrids[w], w, gains


def _signal(results: Mapping[str, Any], full: Mapping[str, Any], bench_128: Mapping[str, Any],
            max_length: int, grid: Sequence[float], weight: float) -> dict[str, Any]:
    """The signal check: facet-BM25, dense and hybrid rankers on CSFCube fold1_dev (measured here,
    this run, the full profile and the 128-token study)."""
    rows = results["signal_check_fold1_dev_map"]
    fbm25 = rows["facet-bm25 (facet sentences only)"]
    dense, best, w_best, gains = signal_facts(rows)
    f_dense, f_best, f_w, _ = signal_facts(full["results"]["signal_check_fold1_dev_map"])
    b_dense, b_best, b_w, _ = signal_facts(bench_128["signal_check_fold1_dev_map"])
    return {
        "ch3_max_length": max_length, "ch3_grid": ", ".join(f"{w:g}" for w in grid),
        "ch3_fbm25_all": fbm25["all MAP"], "ch3_dense_all": dense["all MAP"],
        "ch3_fbm25_minus_dense": fbm25["all MAP"] - dense["all MAP"],
        "ch3_fbm25_verdict": ("below" if fbm25["all MAP"] < dense["all MAP"]
                              else "above" if fbm25["all MAP"] > dense["all MAP"] else "level with"),
        "ch3_fbm25_worst_facet": min(FACETS, key=lambda f: fbm25[f"{f} MAP"]),
        "ch3_fbm25_worst_map": min(fbm25[f"{f} MAP"] for f in FACETS),
        "ch3_best_w": w_best, "ch3_weight": weight, "ch3_best_hybrid_all": best["all MAP"],
        "ch3_hybrid_gain": best["all MAP"] - dense["all MAP"],
        "ch3_hybrid_verdict": "better" if best["all MAP"] > dense["all MAP"] else "no better",
        "ch3_gain_max_facet": max(gains, key=gains.get), "ch3_gain_max": max(gains.values()),
        "ch3_gain_min_facet": min(gains, key=gains.get), "ch3_gain_min": min(gains.values()),
        "ch3_full_dense_all": f_dense["all MAP"], "ch3_full_best_hybrid_all": f_best["all MAP"],
        "ch3_full_best_w": f_w,
        "ch3_128_dense_all": b_dense["all MAP"], "ch3_128_best_hybrid_all": b_best["all MAP"],
        "ch3_128_best_w": b_w,
        "ch3_128_edge": "the largest weight of the grid" if b_w == max(grid) else "inside the grid"}


def _semantic(results: Mapping[str, Any], full: Mapping[str, Any]) -> dict[str, Any]:
    """The semantic leakage check: how close the training documents come to the evaluation
    collections (measured here, this run and the full profile)."""
    sem, full_sem = results["semantic_overlap"], full["results"]["semantic_overlap"]
    hi, lo = max(sem["thresholds"]), min(sem["thresholds"])
    anyc, full_any = sem["any_collection"], full_sem["any_collection"]
    return {"ch3_thr_hi": hi, "ch3_thr_lo": lo, "ch3_train_docs": sem["training_documents"],
            "ch3_above_hi": anyc["above"][f"{hi:g}"], "ch3_above_lo": anyc["above"][f"{lo:g}"],
            "ch3_max_cos": anyc["max"], "ch3_median_cos": anyc["q50"],
            "ch3_closest_collection": max(sem["collections"], key=lambda n: sem["collections"][n]["q50"]),
            "ch3_full_train_docs": full_sem["training_documents"],
            "ch3_full_above_hi": full_any["above"][f"{hi:g}"], "ch3_full_above_lo": full_any["above"][f"{lo:g}"],
            "ch3_full_max_cos": full_any["max"]}


def ch3(results: Mapping[str, Any], full: Mapping[str, Any], *, bench_128: Mapping[str, Any], max_length: int,
        grid: Sequence[float], weight: float, mining: MiningConfig, cranfield_docs: int) -> dict[str, Any]:
    """Chapter 3 (data construction): the paper's data (reported), the mining signal's check,
    the leakage guard, the teacher lists, the FTUs' statistics and the semantic leakage check.

    ``results``: what this run saved (``ch.save("ftus", ...)``: the signal check, build report,
    leakage, teacher lists, statistics, semantic overlap); ``full``: the committed record
    ``results/ch03/full/ftus.json`` (the same keys under ``results``); ``bench_128``: the signal
    check at 128 tokens (``results/ch03/signal_check_128_tokens.json``); ``max_length``: the
    encoder's token budget; ``grid``: the hybrid weights checked; ``weight``: the hybrid weight
    mining used (NaN for another signal); ``mining``: the mining configuration;
    ``cranfield_docs``: Cranfield's abstracts.
    """
    stats, full_stats = results["statistics"], full["results"]["statistics"]
    # reported in the paper (appendix B, table 5)
    out: dict[str, Any] = {"ch3_paper_ftus": paper.UNIFAR_FACTS["ftus"],
                           "ch3_paper_documents": paper.UNIFAR_FACTS["facet_labelled_documents"],
                           "ch3_paper_q_min": paper.UNIFAR_FACTS["question_words_min"],
                           "ch3_paper_q_max": paper.UNIFAR_FACTS["question_words_max"],
                           "ch3_paper_fields": len(paper.UNIFAR_APPENDIX_B.frame())}
    out.update(_signal(results, full, bench_128, max_length, grid, weight))
    leakage = results["leakage"]  # measured here, this run and the full profile
    out.update(ch3_dropped=sum(leakage["dropped_before_mining"].values()),
               ch3_full_dropped=sum(full["results"]["leakage"]["dropped_before_mining"].values()),
               ch3_checked_docs=leakage["documents_checked"], ch3_checked_questions=leakage["questions_checked"])
    teacher = results["teacher_lists"]
    out.update(ch3_teacher_ftus=teacher["ftus_with_list"], ch3_teacher_candidates=teacher["candidates_per_list"],
               ch3_teacher_top=mining.teacher_top, ch3_teacher_random=mining.teacher_random)
    out.update(ch3_ftus=stats["ftus"], ch3_documents=stats["documents"], ch3_questions=stats["questions"],
               ch3_full_ftus=full_stats["ftus"], ch3_full_documents=full_stats["documents"],
               ch3_paper_ratio=paper.UNIFAR_FACTS["ftus"] / full_stats["ftus"],
               ch3_paper_top_field=paper.UNIFAR_APPENDIX_B.frame()["# Documents"].idxmax(),
               ch3_icrop_share=stats["questions_per_origin"].get("icrop", 0) / max(stats["questions"], 1),
               ch3_labelled_by_labeller=results["build_report"]["labelled_by_labeller"],
               ch3_cranfield_docs=cranfield_docs)
    out.update(_semantic(results, full))
    return out
