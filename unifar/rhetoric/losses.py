r"""The five sentence-embedding objectives of SciToricsBERT (paper 002, section 3.3, eqs. 1-5).

One builder per loss, each returning a module ``loss(embeddings [N, d], labels [N]) -> scalar``:
:func:`softmax_cross_entropy_loss` (eq. 1), :func:`triplet_loss` (eq. 2), :func:`arcface_loss`
(eq. 3), :func:`multi_similarity_loss` (eq. 4) and :func:`ntxent_loss` (eq. 5). All but the first
come from ``pytorch-metric-learning``. Their defaults are the table-6 values marked with a
bullet (:data:`PAPER_HYPERPARAMETERS`). :func:`make_loss` builds one by name, seeded, wrapped
in a :class:`MetricLoss` that computes it in float32.

Notation: ``x_i`` is the model output (pooled, unnormalised sentence vector) of sample ``i``,
``S_ij`` the cosine similarity of ``x_i`` and ``x_j`` in a batch of ``N``, ``P`` / ``N`` (in eqs.
4-5) the sets of same-label and different-label pairs.

The doctests use one batch of four 2-d vectors, two per class:

>>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
>>> y = torch.tensor([0, 0, 1, 1])
>>> make_loss("ms", 2, 2)(x, y).item() == multi_similarity_loss()(x, y).item()
True
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "LOSS_NAMES",
    "PAPER_HYPERPARAMETERS",
    "canonical_loss_name",
    "SoftmaxCrossEntropyLoss",
    "MetricLoss",
    "softmax_cross_entropy_loss",
    "triplet_loss",
    "arcface_loss",
    "multi_similarity_loss",
    "ntxent_loss",
    "make_loss",
]

#: Canonical loss names, in the order of section 3.3.
LOSS_NAMES: tuple[str, ...] = ("softmax", "triplet", "arcface", "ms", "ntxent")

_ALIASES: dict[str, str] = {
    "softmax": "softmax", "cross-entropy": "softmax", "ce": "softmax", "softmax-ce": "softmax",
    "triplet": "triplet",
    "arcface": "arcface",
    "ms": "ms", "multi-similarity": "ms", "multisimilarity": "ms",
    "ntxent": "ntxent", "nt-xent": "ntxent", "infonce": "ntxent",
}

#: Table 6, the values marked with a bullet (used for the reported results). ArcFace's margin
#: is in radians here, as in eq. 3 (``pytorch-metric-learning`` takes degrees; converted).
#: The MS loss's lambda is ``base`` in ``pytorch-metric-learning``.
PAPER_HYPERPARAMETERS: dict[str, dict[str, float]] = {
    "softmax": {},
    "triplet": {"margin": 0.05},
    "arcface": {"margin": 0.5, "scale": 16.0},
    "ms": {"alpha": 2.0, "beta": 40.0, "base": 0.75},
    "ntxent": {"temperature": 0.1},
}


def canonical_loss_name(name: str) -> str:
    """The canonical name (one of :data:`LOSS_NAMES`) of a loss name or alias.

    >>> canonical_loss_name("Multi_Similarity"), canonical_loss_name("nt-xent")
    ('ms', 'ntxent')
    """
    key = name.lower().replace("_", "-").strip()
    if key not in _ALIASES:
        raise ValueError(f"unknown loss {name!r}; choose one of {LOSS_NAMES}")
    return _ALIASES[key]


class SoftmaxCrossEntropyLoss(nn.Module):
    r"""Softmax cross-entropy with a linear classifier (paper 002, eq. 1):

    .. math::
        \mathcal{L}_1 = -\frac{1}{N}\sum_{i=1}^{N}
        \log\frac{\exp(W_{y_i}^\top x_i + b_{y_i})}{\sum_{j=1}^{n}\exp(W_j^\top x_i + b_j)}

    with ``W`` in R^{d x n}, ``b`` in R^n trained with the encoder. ``pytorch-metric-learning``
    has no plain linear-softmax loss (its ``NormalizedSoftmaxLoss`` normalises ``W`` and ``x``),
    so this one is written here.
    """

    def __init__(self, embedding_size: int, num_classes: int) -> None:
        super().__init__()
        self.classifier = nn.Linear(embedding_size, num_classes)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the linear classifier's logits on ``embeddings`` [N, d]."""
        return F.cross_entropy(self.classifier(embeddings), labels)


class MetricLoss(nn.Module):
    """One of the five objectives behind one call: ``loss(embeddings [N, d], labels [N]) -> scalar``.

    ``loss_fn`` is the underlying module (a ``pytorch_metric_learning.losses`` loss or
    :class:`SoftmaxCrossEntropyLoss`), ``miner`` an optional ``pytorch_metric_learning`` miner.
    Its parameters (the classifier of softmax and ArcFace) are this module's parameters, so
    ``optimizer(list(encoder.parameters()) + list(loss.parameters()))`` trains them. The loss is
    computed in float32 whatever the embeddings' dtype (ArcFace would otherwise cast its
    weights to bfloat16 under autocast).
    """

    def __init__(self, name: str, loss_fn: nn.Module, miner: nn.Module | None = None, **hparams: float) -> None:
        super().__init__()
        self.name = name
        self.loss_fn = loss_fn
        self.miner = miner
        self.hparams = dict(hparams)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss (a scalar) of ``embeddings`` [N, d] with class ``labels`` [N], in float32."""
        embeddings = embeddings.float()
        if self.miner is not None:
            return self.loss_fn(embeddings, labels, self.miner(embeddings, labels))
        return self.loss_fn(embeddings, labels)

    def extra_repr(self) -> str:
        """The loss name and its hyper-parameters, shown by ``repr(loss)``."""
        return f"name={self.name!r}, " + ", ".join(f"{k}={v}" for k, v in self.hparams.items())


def softmax_cross_entropy_loss(embedding_size: int, num_classes: int) -> SoftmaxCrossEntropyLoss:
    r"""Softmax cross-entropy of a linear classifier, paper 002 eq. 1 (section 3.3):

    .. math::
        \mathcal{L}_1 = -\frac{1}{N}\sum_{i=1}^{N}
        \log\frac{\exp(W_{y_i}^\top x_i + b_{y_i})}{\sum_{j=1}^{n}\exp(W_j^\top x_i + b_j)}

    Inputs: embeddings [N, d] (``d = embedding_size``), integer labels [N] in ``[0, num_classes)``;
    output: a scalar. The classifier (``W`` [n, d], ``b`` [n]) is randomly initialised from the
    global torch generator and trained with the encoder. With ``W = I``, ``b = 0``:

    >>> loss = softmax_cross_entropy_loss(2, 2)
    >>> with torch.no_grad():
    ...     _ = loss.classifier.weight.copy_(torch.eye(2)), loss.classifier.bias.zero_()
    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> round(loss(x, torch.tensor([0, 0, 1, 1])).item(), 4)  # similar vectors share a label
    0.3422
    >>> round(loss(x, torch.tensor([0, 1, 0, 1])).item(), 4)  # they do not
    0.7922
    """
    return SoftmaxCrossEntropyLoss(embedding_size, num_classes)


def triplet_loss(margin: float = PAPER_HYPERPARAMETERS["triplet"]["margin"]) -> nn.Module:
    r"""Triplet margin loss, paper 002 eq. 2 (section 3.3; Schroff et al. 2015), over every
    triplet of the batch (footnote 5: no negative sampling) and averaged over the ``K`` triplets
    with a positive loss (``pytorch-metric-learning``'s ``TripletMarginLoss``, ``AvgNonZeroReducer``):

    .. math:: \mathcal{L}_2 = \frac{1}{K}\sum_{i}\max(\|x^a_i - x^p_i\|_2 - \|x^a_i - x^n_i\|_2 + m, 0)

    on L2-normalised vectors, ``m = 0.05``. Inputs: embeddings [N, d], labels [N]; output: a
    scalar (0 when every triplet already satisfies the margin).

    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> round(triplet_loss()(x, torch.tensor([0, 0, 1, 1])).item(), 4)  # similar vectors share a label
    0.0
    >>> round(triplet_loss()(x, torch.tensor([0, 1, 0, 1])).item(), 4)  # they do not
    0.8909
    """
    from pytorch_metric_learning import losses as pml_losses

    return pml_losses.TripletMarginLoss(margin=margin)


def arcface_loss(
    embedding_size: int,
    num_classes: int,
    margin: float = PAPER_HYPERPARAMETERS["arcface"]["margin"],
    scale: float = PAPER_HYPERPARAMETERS["arcface"]["scale"],
) -> nn.Module:
    r"""Additive angular margin (ArcFace) loss, paper 002 eq. 3 (section 3.3; Deng et al. 2019),
    with ``\theta_j`` the angle between ``x_i`` and the class weight ``W_j``:

    .. math:: \mathcal{L}_3 = -\frac{1}{N}\sum_{i}\log\frac{\exp(s\cos\theta'_{y_i})}{\sum_{j}\exp(s\cos\theta'_j)},
              \quad \theta'_j = \theta_j + m\,[j = y_i]

    ``m = 0.5`` rad (28.65 degrees; ``pytorch-metric-learning`` takes degrees, converted here),
    ``s = 16``. Inputs: embeddings [N, d], labels [N]; output: a scalar. The class weights
    ``W`` [d, n] are randomly initialised from the global torch generator. With ``W = I``:

    >>> loss = arcface_loss(2, 2)
    >>> with torch.no_grad():
    ...     _ = loss.W.copy_(torch.eye(2))
    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> round(loss(x, torch.tensor([0, 0, 1, 1])).item(), 4)  # similar vectors share a label
    0.0
    >>> round(loss(x, torch.tensor([0, 1, 0, 1])).item(), 4)  # they do not
    11.4116
    """
    from pytorch_metric_learning import losses as pml_losses

    return pml_losses.ArcFaceLoss(num_classes, embedding_size, margin=math.degrees(margin), scale=scale)


def multi_similarity_loss(
    alpha: float = PAPER_HYPERPARAMETERS["ms"]["alpha"],
    beta: float = PAPER_HYPERPARAMETERS["ms"]["beta"],
    base: float = PAPER_HYPERPARAMETERS["ms"]["base"],
) -> nn.Module:
    r"""Multi-similarity loss, paper 002 eq. 4 (section 3.3; Wang et al. 2019), ``base`` being
    the paper's ``\lambda``:

    .. math:: \mathcal{L}_4 = \frac{1}{N}\sum_{i}\Big\{\frac{1}{\alpha}\log\big[1 + \sum_{(i,j)\in P}
              e^{-\alpha(S_{ij}-\lambda)}\big] + \frac{1}{\beta}\log\big[1 + \sum_{(i,j)\in N} e^{\beta(S_{ij}-\lambda)}\big]\Big\}

    ``alpha = 2``, ``beta = 40``, ``lambda = 0.75`` (``pytorch-metric-learning``'s
    ``MultiSimilarityLoss``). Inputs: embeddings [N, d], labels [N]; output: a scalar.

    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> round(multi_similarity_loss()(x, torch.tensor([0, 0, 1, 1])).item(), 4)  # similar vectors share a label
    0.2394
    >>> round(multi_similarity_loss()(x, torch.tensor([0, 1, 0, 1])).item(), 4)  # they do not
    1.0088
    """
    from pytorch_metric_learning import losses as pml_losses

    return pml_losses.MultiSimilarityLoss(alpha=alpha, beta=beta, base=base)


def ntxent_loss(temperature: float = PAPER_HYPERPARAMETERS["ntxent"]["temperature"]) -> nn.Module:
    r"""NT-Xent (normalised temperature-scaled cross-entropy) loss, paper 002 eq. 5 (section 3.3;
    Chen et al. 2020, SimCLR), every same-label pair a positive:

    .. math:: \mathcal{L}_5 = -\frac{1}{|P|}\sum_{(i,j)\in P}\log\frac{\exp(S_{ij}/T)}
              {\exp(S_{ij}/T) + \sum_{(i,k)\in N}\exp(S_{ik}/T)}

    ``T = 0.1`` (``pytorch-metric-learning``'s ``NTXentLoss``). Inputs: embeddings [N, d],
    labels [N]; output: a scalar.

    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> round(ntxent_loss()(x, torch.tensor([0, 0, 1, 1])).item(), 4)  # similar vectors share a label
    0.0004
    >>> round(ntxent_loss()(x, torch.tensor([0, 1, 0, 1])).item(), 4)  # they do not
    8.8417
    """
    from pytorch_metric_learning import losses as pml_losses

    return pml_losses.NTXentLoss(temperature=temperature)


def make_loss(
    name: str,
    embedding_size: int,
    num_classes: int,
    seed: int | None = 0,
    miner: nn.Module | None = None,
    **overrides: float,
) -> MetricLoss:
    r"""Build one of the five SciToricsBERT objectives (paper 002, section 3.3) with the table-6
    hyper-parameters (:data:`PAPER_HYPERPARAMETERS`) unless ``overrides`` says otherwise.

    ``name``: ``softmax`` (:func:`softmax_cross_entropy_loss`, eq. 1), ``triplet``
    (:func:`triplet_loss`, eq. 2), ``arcface`` (:func:`arcface_loss`, eq. 3), ``ms``
    (:func:`multi_similarity_loss`, eq. 4) or ``ntxent`` (:func:`ntxent_loss`, eq. 5); aliases
    such as ``"multi-similarity"``, ``"nt-xent"`` are accepted. ``seed`` fixes the initial
    classifier weights (softmax, ArcFace) without touching the global random state (``None``:
    use it). ``miner`` is passed through (none by default: footnote 5 uses all triplets; a
    ``TripletMarginMiner(type_of_triplets="all")`` gives the same loss value).

    >>> make_loss("nt-xent", 8, 3)
    MetricLoss(
      name='ntxent', temperature=0.1
      (loss_fn): NTXentLoss(
        (distance): CosineSimilarity()
        (reducer): MeanReducer()
      )
    )
    """
    import pytorch_metric_learning.losses  # noqa: F401  (imported before the seeded block, as always)

    key = canonical_loss_name(name)
    hp = {**PAPER_HYPERPARAMETERS[key], **overrides}
    unknown = set(overrides) - set(PAPER_HYPERPARAMETERS[key])
    if unknown:
        raise ValueError(f"{key} loss has no hyper-parameter(s) {sorted(unknown)}")
    rng = torch.random.fork_rng(devices=[]) if seed is not None else nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        if key == "softmax":
            fn: nn.Module = softmax_cross_entropy_loss(embedding_size, num_classes)
        elif key == "triplet":
            fn = triplet_loss(margin=hp["margin"])
        elif key == "arcface":
            fn = arcface_loss(embedding_size, num_classes, margin=hp["margin"], scale=hp["scale"])
        elif key == "ms":
            fn = multi_similarity_loss(alpha=hp["alpha"], beta=hp["beta"], base=hp["base"])
        else:
            fn = ntxent_loss(temperature=hp["temperature"])
    return MetricLoss(key, fn, miner, **hp)
