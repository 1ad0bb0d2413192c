"""Picking one comparison out of a verdict table, for the chapters' prose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    import pandas as pd

__all__ = ["verdict_row"]


def verdict_row(verdicts: pd.DataFrame, system: str, vs: str, benchmark: str, metric: str,
             fold: str = "") -> pd.Series:
    """The one row of a verdict table (:func:`unifar.evaluation.power.labelled_verdicts`) for a
    comparison; a missing or repeated row is an error, not a silent pick."""
    v = verdicts
    rows = v[(v.system == system) & (v.vs == vs) & (v.benchmark == benchmark) & (v.metric == metric)
             & (v.fold == fold)]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} verdict rows for {system} vs {vs} on {benchmark} {metric} "
                       f"(fold {fold or 'all'}); expected exactly one")
    return rows.iloc[0]
