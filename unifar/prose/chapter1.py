"""Chapter 1's prose numbers: the model and CSFCube (:func:`ch1`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import paper

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ch1"]


def ch1(measured: Mapping[str, Mapping[str, Mapping[str, float]]], full: Mapping[str, Any],
        model: str) -> dict[str, Any]:
    """Chapter 1 (the model and CSFCube): this run's baselines, the full profile's untrained
    UniFAR and MPNet, and the paper's table 2 rows they compare with.

    ``measured``: this run's CSFCube scores per ranker (``{ranker: {facet|"all": {"map",
    "ndcg%20"}}}``, :func:`unifar.evaluation.csfcube.evaluate_csfcube_rankings`), named
    ``"BM25"``, ``"<model> mean pooling"`` and ``"<model> facet query (...)"``; ``full``: the
    committed record ``results/ch01/full/csfcube.json``; ``model``: the base encoder's short name.
    """
    t2 = paper.UNIFAR_TABLE2  # reported in the paper
    agg = {n: r["all"]["map"] for n, r in measured.items()}  # measured here, this run
    mean = agg[f"{model} mean pooling"]
    full_all = full["results"]["pools_as_annotated"]  # measured here, full profile
    untrained = full_all["UniFAR-minilm (untrained)"]["all"]["map"]
    mpnet = full_all["mpnet mean pooling"]["all"]
    return {"ch1_mean_map": mean, "ch1_bm25_map": agg["BM25"],
            "ch1_specter2_map": t2.value("SPECTER-2", "aggregated MAP"),
            "ch1_scincl_map": t2.value("SciNCL", "aggregated MAP"),
            "ch1_facet_only_loss": mean - agg[f"{model} facet query (facet sentences only)"],
            "ch1_facet_title_loss": mean - agg[f"{model} facet query (title + facet sentences)"],
            "ch1_untrained_map": untrained,
            "ch1_untrained_gain": untrained - full_all["minilm mean pooling"]["all"]["map"],
            "ch1_mpnet_map": mpnet["map"], "ch1_mpnet_ndcg": mpnet["ndcg%20"],
            "ch1_paper_mpnet_map": t2.value("MPNet", "aggregated MAP"),
            "ch1_paper_mpnet_ndcg": t2.value("MPNet", "aggregated NDCG%20"),
            "ch1_paper_unifar_mpnet_map": t2.value("UniFAR-MPNet", "aggregated MAP"),
            "ch1_mpnet_over_paper": mpnet["map"] - t2.value("MPNet", "aggregated MAP"),
            "ch1_paper_unifar_mpnet_gain": (t2.value("UniFAR-MPNet", "aggregated MAP")
                                            - t2.value("MPNet", "aggregated MAP"))}
