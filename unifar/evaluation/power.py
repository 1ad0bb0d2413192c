"""Power before verdicts: the smallest difference a paired comparison on a benchmark can detect.

A paired bootstrap (:func:`unifar.evaluation.bootstrap.paired_bootstrap`) that finds no difference
says little when the benchmark could not have detected a difference of the size sought. So every
training comparison states, before it runs, its **minimum detectable effect** (MDE): the true
mean difference that a two-sided test at level ``alpha`` detects with probability ``power``,

.. math::
    \\mathrm{MDE} = (z_{1-\\alpha/2} + z_{\\text{power}}) \\cdot \\mathrm{SE}(\\bar d),

where ``SE`` is the bootstrap standard error of the mean per-query difference ``d`` (resampling
queries, within strata, as the paired bootstrap does). Before the compared system exists, ``d``
comes from a *reference pair* scored on the same queries: the base and another system whose
per-query deviations from the base are of the kind expected (the chapters use the base against the
hybrid teacher that the trained model imitates, and name the pair). A comparison whose MDE
exceeds the effect it looks for is **underpowered** (:func:`verdict`): its "no difference" is
not evidence of no effect. Normal approximation, as in Webber, Moffat & Zobel (2008), *Statistical
power in retrieval experimentation*; Sakai (2016), *Statistical significance, power, and sample
sizes*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import paper
from .bootstrap import N_RESAMPLES, PairedResult, _groups, bootstrap_means
from .report import fold_strata

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MDE", "minimum_detectable_effect", "mde_from_interval", "power_for", "verdict", "VERDICTS",
           "effects_sought", "power_table", "label_verdicts",
           "labelled_verdicts"]

#: The labels :func:`verdict` gives a comparison.
VERDICTS = ("better", "worse", "no detectable difference", "underpowered")


@dataclass(frozen=True)
class MDE:
    """A benchmark's minimum detectable effect for one reference pair."""

    mde: float  # the smallest true mean difference detected with probability `power`
    se: float  # bootstrap standard error of the mean per-query difference
    n: int  # queries
    power: float = 0.8
    alpha: float = 0.05
    reference: str = ""  # which pair the per-query differences came from

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)

    def detects(self, effect: float) -> bool:
        """Whether a true difference of ``|effect|`` is at least the MDE."""
        return abs(effect) >= self.mde


def minimum_detectable_effect(
    a: Mapping[str, float],
    b: Mapping[str, float],
    power: float = 0.8,
    alpha: float = 0.05,
    strata: Sequence[Sequence[str]] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    reference: str = "",
) -> MDE:
    """The MDE of a paired comparison on the queries of ``a`` and ``b`` (per-query scores of the
    reference pair, ``{qid: value}``), at ``power`` and two-sided level ``alpha`` (module docstring).

    Per-query differences of 2 and 0: a resampled mean is 0, 1 or 2 with probabilities 1/4, 1/2,
    1/4, so the SE is ``sqrt(1/2)`` and the MDE at 80 % power ``(1.96 + 0.84) sqrt(1/2)``, about 2:

    >>> m = minimum_detectable_effect({"q1": 2.0, "q2": 0.0}, {"q1": 0.0, "q2": 0.0}, n_resamples=20000)
    >>> round(m.se, 1), round(m.mde, 1), m.n
    (0.7, 2.0, 2)
    >>> minimum_detectable_effect({"q": 1.0}, {"q": 1.0}).mde    # identical systems: any difference shows
    0.0
    """
    if not 0.0 < power < 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError(f"power and alpha must be in (0, 1), got power={power}, alpha={alpha}")
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise KeyError(f"the reference pair was scored on different queries ({len(only)} unpaired, e.g. {only[:3]})")
    diffs = {q: float(a[q]) - float(b[q]) for q in a}
    groups = _groups(diffs, strata)
    reps = bootstrap_means(groups, n_resamples, seed)
    se = float(np.std(reps, ddof=1)) if n_resamples > 1 else 0.0
    return MDE(mde=_mde_multiplier(power, alpha) * se, se=se, n=int(sum(g.size for g in groups)), power=power,
               alpha=alpha, reference=reference)


def mde_from_interval(low: float, high: float, power: float = 0.8, alpha: float = 0.05) -> float:
    """The MDE a comparison's own 95 % interval implies: its standard error, ``(high - low) /
    (2 z_{0.975})``, times ``z_{1-alpha/2} + z_power``.

    >>> round(mde_from_interval(-1.96, 1.96), 2)
    2.8
    """
    se = (float(high) - float(low)) / (2.0 * NormalDist().inv_cdf(0.975))
    return _mde_multiplier(power, alpha) * se


def _mde_multiplier(power: float, alpha: float) -> float:
    """``z_{1-alpha/2} + z_power``: the MDE in standard errors (two-sided test, normal approximation)."""
    return NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)


def power_for(effect: float, se: float, alpha: float = 0.05) -> float:
    """Probability that a two-sided test at ``alpha`` detects a true difference ``effect`` when the
    mean difference has standard error ``se`` (normal approximation).

    >>> round(power_for(2.8, 1.0), 2), power_for(0.0, 0.0), power_for(1.0, 0.0)
    (0.8, 0.0, 1.0)
    """
    if se <= 0:
        return 1.0 if effect != 0 else 0.0
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    shift = abs(effect) / se
    return float(NormalDist().cdf(shift - z) + NormalDist().cdf(-shift - z))


def verdict(result: PairedResult, mde: MDE | float, effect_sought: float) -> str:
    """The label of a paired comparison (one of :data:`VERDICTS`): ``better`` / ``worse`` when its
    interval excludes 0; otherwise ``underpowered`` when the benchmark's MDE exceeds the effect
    sought, else ``no detectable difference`` (a difference of the size sought would have shown).

    >>> r = PairedResult(diff=0.3, low=-0.5, high=1.1, flip=0.2, n=50)
    >>> verdict(r, 3.9, effect_sought=1.87), verdict(r, 1.2, effect_sought=1.87)
    ('underpowered', 'no detectable difference')
    >>> verdict(PairedResult(diff=-2.0, low=-3.0, high=-1.0, flip=0.0, n=50), 3.9, 1.87)
    'worse'
    """
    if not result.within_noise:
        return "better" if result.diff > 0 else "worse"
    size = mde.mde if isinstance(mde, MDE) else float(mde)
    return "underpowered" if size > abs(effect_sought) else "no detectable difference"


def effects_sought(pair: tuple[str, str] = ("MPNet", "UniFAR-MPNet")) -> dict[str, dict[str, float]]:
    """The effects a training comparison looks for, *reported in the paper*: UniFAR's gain over its
    own base encoder (``pair``, table 2 for CSFCube per facet and aggregated; table 1's DORIS-MAE
    Query MAP for every q-doc benchmark, the paper's q-doc claim), in percentage points, keyed like
    :data:`unifar.evaluation.report.HEADLINE_METRICS`.

    >>> e = effects_sought(); round(e["csfcube"]["all/map"], 2), round(e["pubmedqa"]["mrr@10"], 2)
    (1.87, 0.53)
    """
    base, model = pair
    t1, t2 = paper.UNIFAR_TABLE1, paper.UNIFAR_TABLE2
    cs = {f"{f}/map": t2.value(model, f"{f} MAP") - t2.value(base, f"{f} MAP") for f in ("background", "method", "result")}
    cs["all/map"] = t2.value(model, "aggregated MAP") - t2.value(base, "aggregated MAP")
    qdoc = t1.value(model, "Query MAP") - t1.value(base, "Query MAP")
    return {"csfcube": cs, "cranfield": {"ndcg@10": qdoc, "map": qdoc}, "pubmedqa": {"mrr@10": qdoc},
            "scirepeval": {"ndcg@10": qdoc}}


def power_table(result: Mapping[str, Any], base: str, reference: str,
                effects: Mapping[str, Mapping[str, float]] | None = None, folds: Sequence[str | None] = (None,),
                n_resamples: int = N_RESAMPLES, seed: int = 0):
    """The MDE of every comparison against ``base`` on every benchmark of an
    :func:`~unifar.evaluation.runner.evaluate_all` result, stated before the compared model is
    looked at: per-query differences of the reference pair (``reference`` minus ``base``, both
    measured in ``result``), on the metrics of ``effects`` (default :func:`effects_sought`).

    One row per benchmark, fold (None: the whole benchmark, CSFCube resampled within its folds;
    a CSFCube fold name: that fold's queries) and metric, with ``n, se, mde, effect_sought,
    powered`` (``mde <= |effect_sought|``) and ``reference`` (the pair's name). Where the pair
    scores every query alike (``se`` 0) it says nothing of the benchmark's noise: ``mde`` is NaN,
    ``powered`` False, and :func:`label_verdicts` leaves that row's verdicts as they are.
    """
    import pandas as pd

    effects = effects_sought() if effects is None else effects
    rows = []
    for bench, entry in result["benchmarks"].items():
        systems = entry["systems"]
        if bench not in effects or base not in systems or reference not in systems:
            continue
        for fold in folds:
            if fold is not None and entry.get("kind") != "csfcube":
                continue
            for metric, effect in effects[bench].items():
                if metric not in systems[base]["per_query"]:
                    continue
                a, b = systems[reference]["per_query"][metric], systems[base]["per_query"][metric]
                strata = entry.get("strata", {}).get(metric)
                if fold is not None:
                    ids = fold_strata(entry, metric)[fold]
                    a, b, strata = {q: a[q] for q in ids}, {q: b[q] for q in ids}, None
                m = minimum_detectable_effect(a, b, strata=strata, n_resamples=n_resamples, seed=seed,
                                              reference=f"{reference} - {base}")
                # a pair that agrees on every query (a hybrid tuned to weight 0) measures no noise:
                # its MDE of 0 would call every comparison powered, so there is no estimate
                mde = m.mde if m.se > 0 else float("nan")
                rows.append({"benchmark": bench, "fold": fold or "", "metric": metric, "n": m.n, "se": m.se,
                             "mde": mde, "effect_sought": float(effect), "powered": m.se > 0 and m.detects(effect),
                             "reference": m.reference})
    return pd.DataFrame(rows, columns=["benchmark", "fold", "metric", "n", "se", "mde", "effect_sought", "powered",
                                       "reference"])


def label_verdicts(verdicts: pd.DataFrame, power: pd.DataFrame) -> pd.DataFrame:
    """``verdicts`` (:func:`unifar.evaluation.report.verdict_table`) with the MDE and effect sought
    of each row's benchmark, fold and metric from ``power`` (:func:`power_table`), and every
    "within noise" verdict replaced by :func:`verdict`'s label: "underpowered" where the MDE
    exceeds the effect sought, "no detectable difference" where it does not. Rows without a
    power estimate keep their verdict."""
    keys = ["benchmark", "fold", "metric"]
    # labelling labelled verdicts again (a saved result read back) replaces their MDE columns
    out = verdicts.drop(columns=["mde", "effect_sought"], errors="ignore").merge(
        power[keys + ["mde", "effect_sought"]], on=keys, how="left")
    within = out["verdict"] == "within noise"
    has = out["mde"].notna()
    under = out["mde"] > out["effect_sought"].abs()
    out.loc[within & has & under, "verdict"] = "underpowered"
    out.loc[within & has & ~under, "verdict"] = "no detectable difference"
    return out


def labelled_verdicts(result: Mapping[str, Any], base: str, reference: str, folds: Sequence[str | None] = (None,),
                      n_resamples: int = N_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """The verdicts a chapter saved (``result["verdicts"]``, beside the per-query scores of
    ``result["benchmarks"]``) labelled by :func:`label_verdicts`, with the power of ``reference``
    against ``base`` (:func:`power_table`). For results saved before they were labelled (a
    committed full record) and for the reproduction summary: labelling is a function of what was
    measured, so it needs no re-run."""
    import pandas as pd

    power = power_table(result, base, reference, folds=folds, n_resamples=n_resamples, seed=seed)
    return label_verdicts(pd.DataFrame(result["verdicts"]), power)
