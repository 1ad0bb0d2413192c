"""Figures the chapters share: facet attention heatmaps, facet similarity matrices, result bars."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from .evaluation.structure import diagonal_contrast
from .facets import FACET_SHORT
from .training_log import read_log

if TYPE_CHECKING:
    import os

    import torch
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike

    from .encoding import FacetEncoding

__all__ = ["plot_dev_curves", "plot_attention", "plot_facet_similarity", "plot_facet_matrix_panels", "plot_span_attention",
           "plot_results", "plot_losses"]


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_attention(
    encoding: FacetEncoding,
    index: int = 0,
    ax: Axes | None = None,
    title: str | None = None,
    max_label: int = 40,
) -> Axes:
    """Heatmap of the head-averaged facet attention of one encoded input (appendix F, figure 4).

    Rows are facets; columns are sentences (``S0`` is the title of a document) or tokens,
    depending on the branch the input took.
    """
    import seaborn as sns

    att = encoding.attention[index].float().numpy()
    units = encoding.units[index]
    branch = encoding.branch[index]
    if branch == "sentence":
        labels = [f"S{i}: {u[:max_label]}{'…' if len(u) > max_label else ''}" for i, u in enumerate(units)]
    else:
        labels = list(units)
    width = max(4.0, 0.35 * len(labels) + 2) if branch == "token" else 4.0 + 0.6 * len(labels)
    ax = _axes(ax, (min(width, 16.0), 2.4))
    sns.heatmap(att, ax=ax, cmap="Blues", vmin=0, cbar_kws={"label": "attention"},
                yticklabels=list(encoding.facets), xticklabels=labels)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=60 if branch == "sentence" else 90, ha="right", fontsize=8)
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    ax.set_title(title or f"facet attention over {'sentences' if branch == 'sentence' else 'tokens'}")
    return ax


def plot_facet_similarity(
    matrix: ArrayLike | torch.Tensor,
    facets: Sequence[str] = ("background", "method", "result"),
    ax: Axes | None = None,
    title: str = "facet similarity matrix",
    row_prefix: str = "Q",
    col_prefix: str = "Doc",
    vmin: float | None = None,
    vmax: float | None = None,
    cbar: bool = True,
) -> Axes:
    """Annotated heatmap of an F x F facet similarity matrix (paper figure 3); ``vmin`` /
    ``vmax`` fix the colour scale (one scale for several panels)."""
    import seaborn as sns

    m = np.asarray(matrix.detach().cpu() if hasattr(matrix, "detach") else matrix, dtype=float)
    short = [FACET_SHORT.get(f, f) for f in facets]
    ax = _axes(ax, (3.8, 3.2))
    sns.heatmap(m, ax=ax, annot=True, fmt=".3f", cmap="viridis", square=True, vmin=vmin, vmax=vmax, cbar=cbar,
                xticklabels=[f"{col_prefix}-{s}" for s in short], yticklabels=[f"{row_prefix}-{s}" for s in short])
    ax.set_title(title)
    return ax


def plot_facet_matrix_panels(
    matrices: Mapping[str, ArrayLike],
    facets: Sequence[str] = ("background", "method", "result"),
    ncols: int = 4,
    suptitle: str | None = None,
) -> Figure:
    """One :func:`plot_facet_similarity` panel per model, on one colour scale, each titled with
    its name and diagonal contrast (:func:`unifar.evaluation.structure.diagonal_contrast`).
    Returns the figure."""
    import matplotlib.pyplot as plt

    arrays = {name: np.asarray(m, dtype=float) for name, m in matrices.items()}
    lo = min(float(a.min()) for a in arrays.values())
    hi = max(float(a.max()) for a in arrays.values())
    nrows = -(-len(arrays) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.0 * nrows), squeeze=False)
    for ax, (name, m) in zip(axes.flat, arrays.items()):
        plot_facet_similarity(m, facets, ax=ax, vmin=lo, vmax=hi, cbar=False,
                              title=f"{name}\ncontrast {diagonal_contrast(m):+.3f}")
        ax.title.set_fontsize(9)
    for ax in list(axes.flat)[len(arrays):]:
        ax.axis("off")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def plot_span_attention(
    attention: ArrayLike,
    units: Sequence[str],
    facets: Sequence[str],
    spans: Mapping[str, Sequence[int]] | None = None,
    ax: Axes | None = None,
    title: str = "",
) -> Axes:
    """Heatmap of facet attention ``[F, n]`` over ``units`` (sentences ``S0..`` or tokens), with
    the cells of ``spans[facet]`` (the paper's reading of figure 4) outlined in red."""
    import seaborn as sns
    from matplotlib.patches import Rectangle

    a = np.asarray(attention, dtype=float)
    ax = _axes(ax, (min(16.0, 2.0 + 0.45 * a.shape[1]), 2.2))
    sns.heatmap(a, ax=ax, cmap="Blues", vmin=0, xticklabels=list(units), yticklabels=list(facets),
                cbar_kws={"label": "attention"})
    for f, name in enumerate(facets):
        for i in (spans or {}).get(name, ()):
            if i < a.shape[1]:
                ax.add_patch(Rectangle((i, f), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
    ax.set_xticklabels(ax.get_xticklabels(), rotation=90, fontsize=8)
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    ax.set_title(title, fontsize=10)
    return ax


def plot_results(
    results: Mapping[str, Mapping[str, Mapping[str, float]]],
    metric: str = "map",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Grouped bars: one group per facet, one bar per system. ``results[system][facet][metric]``."""
    import pandas as pd
    import seaborn as sns

    rows = [
        {"system": system, "facet": facet, metric: vals[metric]}
        for system, per_facet in results.items()
        for facet, vals in per_facet.items()
        if not facet.startswith("_") and metric in vals
    ]
    df = pd.DataFrame(rows)
    ax = _axes(ax, (8.0, 3.6))
    sns.barplot(data=df, x="facet", y=metric, hue="system", ax=ax)
    ax.set_ylabel(f"{metric.upper()} (%)")
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    ax.set_title(title or f"CSFCube test, {metric.upper()}")
    return ax


def plot_losses(
    log_path_or_records: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    ax: Axes | None = None,
    smooth: int | None = None,
    title: str | None = None,
) -> Axes:
    """Training curves from a run's ``log.jsonl`` (a file, a run folder or the records).

    One line per loss term of section 4.2 (``L_total``, ``L_DD``, ``L_QD``, ``L_KL``, and the
    distillation term ``L_KD`` when the run used it), smoothed by
    a centred rolling mean over ``smooth`` steps (default: about 2 % of the run), the held-out
    loss as points when logged, and the KL weight lambda on a second axis.
    """
    import pandas as pd
    import seaborn as sns

    if isinstance(log_path_or_records, (str, bytes)) or hasattr(log_path_or_records, "__fspath__"):
        records = read_log(log_path_or_records)
    else:
        records = list(log_path_or_records)
    if not records:
        raise ValueError("no log records to plot")
    df = pd.DataFrame(records).sort_values("step")
    window = smooth or max(1, len(df) // 50)
    names = {"loss": "L_total", "l_dd": "L_DD", "l_qd": "L_QD", "l_kl": "L_KL", "l_kd": "L_KD"}
    cols = [c for c in names if c in df]
    smoothed = df[cols].rolling(window, min_periods=1, center=True).mean()
    smoothed["step"] = df["step"].to_numpy()
    long = smoothed.melt(id_vars="step", var_name="term", value_name="value")
    long["term"] = long["term"].map(names)
    ax = _axes(ax, (8.0, 3.6))
    sns.lineplot(data=long, x="step", y="value", hue="term", ax=ax)
    if "eval" in df:
        held = [(s, e["loss"]) for s, e in zip(df["step"], df["eval"]) if isinstance(e, dict) and "loss" in e]
        if held:
            xs, ys = zip(*held)
            ax.plot(xs, ys, "o", color="black", markersize=4, label="held-out L_total")
    ax.set_ylabel("loss" + (f" (rolling mean, {window} steps)" if window > 1 else ""))
    if "lambda" in df:
        ax2 = ax.twinx()
        ax2.plot(df["step"], df["lambda"], color="grey", linestyle="--", linewidth=1, label="lambda")
        ax2.set_ylabel("lambda (KL weight)", color="grey")
        ax2.tick_params(axis="y", colors="grey")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or "training losses")
    return ax


def plot_dev_curves(curves: Mapping[str, Sequence[Mapping[str, Any]]], measure: str, ax: Axes | None = None,
                    title: str | None = None, reference: dict[str, float] | None = None) -> Axes:
    """Dev learning curves: ``curves`` maps a run's label to its ``dev_curve.jsonl`` records
    (:func:`unifar.learning_curve.read_curve`, ``{"step", measure, ...}``); one line per run, a
    marker at its best point, and a dashed horizontal line per ``reference`` value (e.g. the base
    encoder's score on the same dev split)."""
    import pandas as pd
    import seaborn as sns

    rows = [{"run": label, "step": p["step"], measure: p[measure]} for label, pts in curves.items() for p in pts
            if measure in p]
    if not rows:
        raise ValueError(f"no dev curve records with {measure!r}")
    df = pd.DataFrame(rows)
    ax = _axes(ax, (7.0, 3.4))
    sns.lineplot(data=df, x="step", y=measure, hue="run", marker="o", ax=ax)
    for name, value in (reference or {}).items():
        ax.axhline(value, linestyle="--", color="grey", linewidth=1)
        ax.annotate(name, (df["step"].max(), value), fontsize=8, color="grey", ha="right", va="bottom")
    ax.set_title(title or f"dev curve: {measure}")
    ax.legend(fontsize=8)
    return ax
