"""How well a sentence facet labeller agrees with gold labels (:func:`facet_scores`), and how its
regularisation is chosen on a small dev set (:func:`choose_regularisation`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..facets import FACETS

__all__ = ["facet_scores", "choose_regularisation"]


def facet_scores(gold: Sequence[str], pred: Sequence[str | None]) -> dict[str, Any]:
    """Accuracy, macro-F1 over the three facets, Cohen's kappa (agreement beyond chance, for
    comparing two labellers when ``gold`` is itself predicted) and per-class precision / recall /
    F1 / support (scikit-learn), plus the confusion matrix (rows gold, columns predicted, in
    :data:`FACETS` order and a last column for ``None``). A ``None`` prediction counts as wrong.

    >>> facet_scores(["method", "result", "result"], ["method", "result", None])["accuracy"]
    0.6666666666666666
    """
    from sklearn.metrics import (
        accuracy_score,
        cohen_kappa_score,
        confusion_matrix,
        f1_score,
        precision_recall_fscore_support,
    )

    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    pred_ = [p if p is not None else "none" for p in pred]
    names = list(FACETS)
    p, r, f, s = precision_recall_fscore_support(gold, pred_, labels=names, zero_division=0)
    cm = confusion_matrix(gold, pred_, labels=names + ["none"])[: len(names)]
    return {
        "n": len(gold),
        "accuracy": float(accuracy_score(gold, pred_)),
        "macro_f1": float(f1_score(gold, pred_, labels=names, average="macro", zero_division=0)),
        "cohen_kappa": float(cohen_kappa_score(gold, pred_, labels=names + ["none"])) if gold else float("nan"),
        "per_class": {
            c: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
            for i, c in enumerate(names)
        },
        "confusion": cm.tolist(),
    }


def choose_regularisation(dev_scores: Mapping[float, float], tolerance: float = 0.01) -> float:
    """The smallest ``C`` (strongest L2) whose dev score is within ``tolerance`` of the best.

    A plain arg-max over a dev set of ~200 sentences picks between values one sentence apart
    (0.005 macro-F1), a choice that float noise from another CPU can flip; within that noise the
    simpler model wins (the "one standard error" habit of model selection).

    >>> choose_regularisation({1.0: 0.508, 10.0: 0.513, 100.0: 0.489})
    1.0
    >>> choose_regularisation({1.0: 0.423, 10.0: 0.4325, 100.0: 0.446})
    100.0
    """
    if not dev_scores:
        raise ValueError("no dev scores to choose from")
    best = max(dev_scores.values())
    return min(C for C, v in dev_scores.items() if v >= best - tolerance)

