"""Bootstrap confidence intervals over queries, and the paired bootstrap between two systems.

Both resample *queries* with replacement (Efron & Tibshirani, 1993; for IR evaluation see
Sakai, 2006): a benchmark score is a mean over queries, so its uncertainty is that of a mean
over a sample of queries.

* :func:`bootstrap_ci`: the 95 % percentile interval of the mean (1,000 resamples, seeded).
* :func:`paired_bootstrap`: the two systems' per-query values on the *same* queries are
  differenced first, then the mean difference is resampled. It gives the interval of the
  difference and the share of resamples whose mean difference lies on the other side of 0 from
  the observed one (or on 0); :func:`within_noise` says whether the interval contains 0.
* ``strata``: a statistic that is a mean of group means (CSFCube's test score = mean of the
  fold1_test and fold2_test means) is resampled within each group, and each resample computes
  that same mean of group means.

Resamples are drawn once per call from ``numpy.random.default_rng(seed)``, so the same inputs
and seed give the same interval on every machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["CI", "PairedResult", "bootstrap_ci", "bootstrap_means", "paired_bootstrap", "within_noise", "describe"]

N_RESAMPLES = 1000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class CI:
    """A mean and its percentile bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int  # number of queries
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class PairedResult:
    """Mean of ``a - b`` over the shared queries, its interval, and the sign-flip share."""

    diff: float
    low: float
    high: float
    flip: float  # share of resamples whose mean difference is not on the observed side of 0
    n: int
    confidence: float = CONFIDENCE

    @property
    def within_noise(self) -> bool:
        """True when the interval of the difference contains 0."""
        return self.low <= 0.0 <= self.high

    def as_dict(self) -> dict[str, float | bool]:
        return {**asdict(self), "within_noise": self.within_noise}


def _groups(values: Mapping[str, float] | Sequence[float] | np.ndarray, strata: Sequence[Sequence[str]] | None) -> list[np.ndarray]:
    """The values as one array per stratum (a single group without ``strata``)."""
    if isinstance(values, Mapping):
        if strata is None:
            return [np.asarray(list(values.values()), dtype=np.float64)]
        missing = [q for s in strata for q in s if q not in values]
        if missing:
            raise KeyError(f"no value for {len(missing)} queries of the strata, e.g. {missing[:3]}")
        return [np.asarray([values[q] for q in s], dtype=np.float64) for s in strata]
    if strata is not None:
        raise TypeError("strata need the values as a {query id: value} mapping")
    return [np.asarray(values, dtype=np.float64).reshape(-1)]


def bootstrap_means(groups: Sequence[np.ndarray], n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """``n_resamples`` bootstrap replicates of the mean of group means (vectorised).

    Each group is resampled with replacement to its own size; a replicate is the mean over
    groups of the resampled group means.

    >>> bootstrap_means([np.array([2.0, 2.0])], n_resamples=3).tolist()
    [2.0, 2.0, 2.0]
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    if not groups or any(g.size == 0 for g in groups):
        raise ValueError("bootstrap needs at least one value in every group")
    rng = np.random.default_rng(seed)
    reps = np.zeros(n_resamples)
    for g in groups:
        idx = rng.integers(0, g.size, size=(n_resamples, g.size))
        reps += g[idx].mean(axis=1)
    return reps / len(groups)


def bootstrap_ci(
    values: Mapping[str, float] | Sequence[float] | np.ndarray,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    strata: Sequence[Sequence[str]] | None = None,
) -> CI:
    """Percentile bootstrap interval of the mean over queries (of the mean of stratum means).

    ``values``: per-query values (a sequence, or ``{qid: value}``; ``strata`` lists the query
    ids of each group and needs the mapping).

    >>> bootstrap_ci([0.5, 0.5, 0.5])
    CI(mean=0.5, low=0.5, high=0.5, n=3, confidence=0.95)
    >>> ci = bootstrap_ci([0.0, 1.0] * 20, seed=1); ci.low < ci.mean == 0.5 < ci.high
    True
    >>> bootstrap_ci({"a": 1.0, "b": 0.0, "c": 0.0}, strata=[["a"], ["b", "c"]])
    CI(mean=0.5, low=0.5, high=0.5, n=3, confidence=0.95)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    groups = _groups(values, strata)
    reps = bootstrap_means(groups, n_resamples, seed)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(reps, [tail, 100.0 - tail])
    mean = float(np.mean([g.mean() for g in groups]))
    return CI(mean=mean, low=float(low), high=float(high), n=int(sum(g.size for g in groups)), confidence=confidence)


def paired_bootstrap(
    a: Mapping[str, float],
    b: Mapping[str, float],
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    strata: Sequence[Sequence[str]] | None = None,
) -> PairedResult:
    """Paired bootstrap of ``mean(a) - mean(b)`` over the queries both systems were scored on.

    ``a``, ``b``: ``{qid: value}`` of two systems on one benchmark metric. Queries scored by
    only one system are an error (the comparison would not be paired).

    >>> paired_bootstrap({"q1": 0.2, "q2": 0.4}, {"q1": 0.2, "q2": 0.4})
    PairedResult(diff=0.0, low=0.0, high=0.0, flip=0.0, n=2, confidence=0.95)
    >>> r = paired_bootstrap({"q1": 0.5, "q2": 0.9}, {"q1": 0.4, "q2": 0.8}); (round(r.diff, 6), r.flip, r.within_noise)
    (0.1, 0.0, False)
    """
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise KeyError(f"the systems were scored on different queries ({len(only)} unpaired, e.g. {only[:3]})")
    diffs = {q: float(a[q]) - float(b[q]) for q in a}
    groups = _groups(diffs, strata)
    reps = bootstrap_means(groups, n_resamples, seed)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(reps, [tail, 100.0 - tail])
    observed = float(np.mean([g.mean() for g in groups]))
    sign = np.sign(observed)
    flip = float(np.mean(np.sign(reps) != sign)) if sign != 0 else float(np.mean(reps != 0.0))
    return PairedResult(
        diff=observed, low=float(low), high=float(high), flip=flip, n=int(sum(g.size for g in groups)), confidence=confidence
    )


def within_noise(result: PairedResult) -> bool:
    """True when the paired interval of the difference contains 0 (no detectable difference).

    >>> within_noise(PairedResult(diff=0.3, low=-0.1, high=0.7, flip=0.2, n=50))
    True
    """
    return result.within_noise


def describe(result: PairedResult, a: str = "A", b: str = "B", unit: str = "") -> str:
    """One line: the difference, its interval, and whether it is within noise.

    >>> print(describe(PairedResult(diff=1.234, low=0.5, high=2.0, flip=0.001, n=50), "unifar", "mean", " pts"))
    unifar - mean = +1.23 pts [95% CI +0.50, +2.00], sign flips in 0.1% of resamples: unifar better
    >>> print(describe(PairedResult(diff=-0.2, low=-0.9, high=0.4, flip=0.3, n=50)))
    A - B = -0.20 [95% CI -0.90, +0.40], sign flips in 30.0% of resamples: within noise
    """
    verdict = "within noise" if result.within_noise else (f"{a} better" if result.diff > 0 else f"{b} better")
    return (
        f"{a} - {b} = {result.diff:+.2f}{unit} [{100 * result.confidence:g}% CI {result.low:+.2f}, {result.high:+.2f}], "
        f"sign flips in {100 * result.flip:.1f}% of resamples: {verdict}"
    )
