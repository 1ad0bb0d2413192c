"""The multi-objective paper's tables beside ours, and its findings tested the same way on both.

The paper evaluates on a BEIR subset, SciDocs and ICLR2022; we evaluate on our benchmarks
(:data:`unifar.evaluation.report.HEADLINE_METRICS`' first metric of each). The numbers are not
comparable, the *findings* are: :func:`findings` states each of the paper's section-5
conclusions as a count of comparisons over a frame of scores (experiment x benchmark) and is
applied alike to the paper's frame (:func:`paper_frame`) and to ours (:func:`measured_frame`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..evaluation.report import HEADLINE_METRICS
from ..paper import multi_objective as mo
from .experiments import OBJECTIVES, TABLE1, TABLE2, Experiment

__all__ = ["CLAIMS", "changed_questions", "findings", "measured_frame", "paper_frame", "relative_gains"]

#: The paper's conclusions (section 5), each tested by :func:`findings`.
CLAIMS = {
    "combined beats each single": "all three objectives alternated score above every single "
    "objective (table 1: 'multi-objective training leads to models that generalize better')",
    "fine-tuning beats mixing (2 objectives)": "for a pair, the better fine-tuning direction "
    "scores above both in-batch mixing and alternating ('finetuning is a better option')",
    "alternate beats mix (2 objectives)": "for a pair, alternating batches scores above in-batch "
    "mixing (the paper: 'no clear preference')",
    "alternate beats mix (3 objectives)": "for all three, alternating scores above in-batch "
    "mixing ('alternating between batches ... seems like the best compromise')",
}


def _experiments() -> list[Experiment]:
    return list(dict.fromkeys(TABLE1 + TABLE2))


def paper_frame():
    """The paper's tables 1-3 as a frame: our experiment names x (BEIR subset, SciDocs,
    ICLR2022), the values as printed (SciDocs x100, the others fractions).

    >>> f = paper_frame()
    >>> float(f.loc["alternate(questions+citations+icrop)", "ICLR2022"]), float(f.loc["icrop", "SciDocs"])
    (0.424, 74.93)
    """
    import pandas as pd

    tables = {"table 1": mo.MO_TABLE1, "table 2": mo.MO_TABLE2, "table 3": mo.MO_TABLE3}
    rows = {}
    for exp in _experiments():
        where = exp.paper_row()
        if where is not None:
            table = tables[where[0]]
            rows[exp.name] = {c: table.value(where[1], c) for c in table.columns}
    return pd.DataFrame(rows).T


def measured_frame(result: Mapping[str, Any], names: Sequence[str] | None = None):
    """Experiment x benchmark: each benchmark's headline metric (percent) from an
    :func:`~unifar.evaluation.runner.evaluate_all` result; ``names`` picks and orders the systems."""
    import pandas as pd

    cols = {}
    for bench, entry in result["benchmarks"].items():
        metric = HEADLINE_METRICS.get(bench, ("ndcg@10",))[0]
        cols[bench] = {s: r["metrics"][metric] for s, r in entry["systems"].items()}
    frame = pd.DataFrame(cols)
    return (
        frame.loc[[n for n in names if n in frame.index]]
        if names is not None
        else frame
    )


def relative_gains(frame, over: str):
    """Percent change of every row over row ``over``, the paper's table-1 "∆" rows.

    >>> import pandas as pd
    >>> float(relative_gains(pd.DataFrame({"b": [2.0, 3.0]}, index=["x", "y"]), "x").loc["y", "b"])
    50.0
    """
    return (frame / frame.loc[over] - 1.0) * 100.0


def _pairs() -> list[tuple[str, str]]:
    return [e.objectives for e in TABLE2 if e.how == "mix" and len(e.objectives) == 2]


def findings(frame) -> dict[str, dict[str, Any]]:
    """Each claim of :data:`CLAIMS` counted over ``frame`` (experiment x benchmark, higher is
    better): ``{"holds": k, "of": n, "share": k / n, "ties": t, "cells": [...]}``, one cell per
    compared (benchmark, pair); a tie (equal scores) is in ``cells`` and ``ties`` but not in
    ``of``; claims whose experiments are missing or all tied are left out.

    >>> f = findings(paper_frame())
    >>> [(c, f[c]["holds"], f[c]["of"]) for c in f]  # the paper's own numbers
    [('combined beats each single', 2, 3), ('fine-tuning beats mixing (2 objectives)', 8, 9), \
('alternate beats mix (2 objectives)', 4, 9), ('alternate beats mix (3 objectives)', 3, 3)]
    """
    have = set(frame.index)
    out: dict[str, dict[str, Any]] = {}

    def add(claim: str, cells: list[tuple[str, str, bool | None]]) -> None:
        decided = [c for c in cells if c[2] is not None]  # a tie neither holds nor fails
        if decided:
            k = int(sum(bool(ok) for *_, ok in decided))
            out[claim] = {
                "holds": k,
                "of": len(decided),
                "share": k / len(decided),
                "ties": len(cells) - len(decided),
                "cells": [{"benchmark": b, "where": w, "holds": ok} for b, w, ok in cells],
            }

    def above(x: float, y: float) -> bool | None:
        return None if abs(x - y) < 1e-9 else bool(x > y)

    combined = Experiment(OBJECTIVES, "alternate").name
    singles = [Experiment((o,)).name for o in OBJECTIVES]
    if combined in have and any(s in have for s in singles):
        present = [s for s in singles if s in have]
        add(
            "combined beats each single",
            [
                (b, combined, above(frame.at[combined, b], frame.loc[present, b].max()))
                for b in frame.columns
            ],
        )
    ft, alt_mix = [], []
    for a, b in _pairs():
        mix_, alt = Experiment((a, b), "mix").name, Experiment((a, b), "alternate").name
        tunes = [
            Experiment((a, b), "finetune").name,
            Experiment((b, a), "finetune").name,
        ]
        where = f"{a}+{b}"
        if {mix_, alt} <= have:
            alt_mix += [
                (c, where, above(frame.at[alt, c], frame.at[mix_, c])) for c in frame.columns
            ]
        if {mix_, alt, *tunes} <= have:
            ft += [
                (
                    c,
                    where,
                    above(frame.loc[tunes, c].max(), max(frame.at[mix_, c], frame.at[alt, c])),
                )
                for c in frame.columns
            ]
    add("fine-tuning beats mixing (2 objectives)", ft)
    add("alternate beats mix (2 objectives)", alt_mix)
    mix3, alt3 = Experiment(OBJECTIVES, "mix").name, combined
    if {mix3, alt3} <= have:
        add(
            "alternate beats mix (3 objectives)",
            [
                (c, "all three", above(frame.at[alt3, c], frame.at[mix3, c]))
                for c in frame.columns
            ],
        )
    return out


def changed_questions(result: Mapping[str, Any], benchmark: str, metric: str, reference: str,
                      systems: Sequence[str]):
    """Per system of an :func:`~unifar.evaluation.runner.evaluate_all` result: how many of the
    benchmark's questions score ``metric`` differently from ``reference``, and how many of them
    the reference already scores at the ceiling (100: nothing above it to gain). A system equal to
    its reference to every digit has 0 changed questions; the ceiling share says whether any room
    was left.

    >>> r = {"benchmarks": {"b": {"systems": {
    ...     "base": {"per_query": {"mrr@10": {"q1": 100.0, "q2": 50.0}}},
    ...     "run": {"per_query": {"mrr@10": {"q1": 100.0, "q2": 100.0}}}}}}}
    >>> changed_questions(r, "b", "mrr@10", "base", ["run"]).to_dict(orient="index")
    {'run': {'questions': 2, 'changed': 1, 'reference at the ceiling': 1}}
    """
    import pandas as pd

    entry = result["benchmarks"][benchmark]["systems"]
    ref = entry[reference]["per_query"][metric]
    ceiling = sum(v >= 100.0 for v in ref.values())
    rows = {}
    for name in systems:
        values = entry[name]["per_query"][metric]
        rows[name] = {"questions": len(ref), "changed": sum(values[q] != v for q, v in ref.items()),
                      "reference at the ceiling": ceiling}
    return pd.DataFrame(rows).T
