"""Which sentences go into a batch: PK batches (paper 002, appendix B, after Hermans et al. 2017),
their ``(P, K)`` for a data set with few labels, stratified subsamples, and label encoding.

* :func:`pk_for` -- ``(P, K)`` of a loss on a data set with ``C`` labels: the paper's
  (:data:`PAPER_PK`) when ``C`` allows, else ``P = min(P_paper, C)``, ``K = max(K_paper, 64 // P)``
  (CSAbstruct's 5 labels: ``P = 5, K = 12``; 3 facets: ``P = 3, K = 21``);
* :class:`PKBatchSampler` -- batches of ``P`` classes x ``K`` sentences each;
* :func:`stratified_sample` -- a seeded subsample keeping the label proportions;
* :func:`encode_labels` -- labels -> integer ids and the sorted classes.
"""

from __future__ import annotations

from typing import Hashable, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from .losses import canonical_loss_name

__all__ = ["PAPER_PK", "PAPER_BATCH_SIZE", "encode_labels", "pk_for", "PKBatchSampler", "stratified_sample"]

#: Appendix B: (P classes, K instances per class) of a PK batch.
PAPER_PK: dict[str, tuple[int, int]] = {
    "softmax": (64, 1),
    "arcface": (64, 1),
    "triplet": (8, 8),
    "ms": (8, 8),
    "ntxent": (8, 8),
}
PAPER_BATCH_SIZE = 64  #: appendix B


def encode_labels(labels: Sequence[Hashable] | torch.Tensor) -> tuple[torch.Tensor, list[Hashable]]:
    """Integer ids (int64 tensor) and the sorted distinct labels they index.

    >>> encode_labels(["b", "a", "b"])
    (tensor([1, 0, 1]), ['a', 'b'])
    """
    if isinstance(labels, torch.Tensor):
        labels = labels.tolist()
    labels = list(labels)
    if any(x is None for x in labels):
        raise ValueError("labels must not be None; drop unlabelled items first")
    classes = sorted(set(labels), key=lambda x: (str(type(x)), x))
    index = {c: i for i, c in enumerate(classes)}
    return torch.tensor([index[x] for x in labels], dtype=torch.long), classes



def pk_for(loss_name: str, num_classes: int, batch_size: int = PAPER_BATCH_SIZE) -> tuple[int, int]:
    """``(P, K)`` for a loss on a data set with ``num_classes`` labels.

    The paper's values (:data:`PAPER_PK`) when there are enough classes; otherwise
    ``P = min(P_paper, num_classes)`` and ``K = max(K_paper, batch_size // P)``, i.e. every class
    in every batch and the batch kept near ``batch_size``.

    >>> pk_for("softmax", 77), pk_for("ms", 77), pk_for("ms", 5), pk_for("arcface", 5), pk_for("ntxent", 3)
    ((64, 1), (8, 8), (5, 12), (5, 12), (3, 21))
    """
    if num_classes < 1:
        raise ValueError("need at least one class")
    p0, k0 = PAPER_PK[canonical_loss_name(loss_name)]
    p = min(p0, num_classes)
    return p, max(k0, batch_size // p)


class PKBatchSampler(Sampler[list[int]]):
    """Batches of ``P`` distinct classes x ``K`` items each (Hermans et al., 2017; paper 002,
    appendix B). A batch sampler: pass it as ``DataLoader(..., batch_sampler=...)`` or iterate.

    Each batch draws ``P`` classes uniformly without replacement, then ``K`` items of each class,
    without replacement when the class has at least ``K`` items and with replacement otherwise.
    Items of a batch are grouped by class (``[c1]*K + [c2]*K + ...``). ``num_batches`` (default
    ``len(labels) // (P*K)``, at least 1) batches make an epoch. Deterministic given ``seed``:
    a fresh sampler with the same arguments yields the same batches; iterating again continues
    the random stream (new batches for the next epoch).

    >>> s = PKBatchSampler([0, 0, 1, 1, 2, 2], P=2, K=2, seed=0)
    >>> b = next(iter(s)); len(b), len({[0, 0, 1, 1, 2, 2][i] for i in b})
    (4, 2)
    """

    def __init__(
        self, labels: Sequence[Hashable] | torch.Tensor, P: int, K: int, num_batches: int | None = None, seed: int = 0
    ) -> None:
        ids, classes = encode_labels(labels)
        if not 1 <= P <= len(classes):
            raise ValueError(f"P must be between 1 and the number of classes ({len(classes)}), got {P}")
        if K < 1:
            raise ValueError(f"K must be >= 1, got {K}")
        self.P, self.K = int(P), int(K)
        self.labels = ids
        self.classes = classes
        order = torch.argsort(ids, stable=True)
        self.counts = torch.bincount(ids, minlength=len(classes))
        starts = torch.cumsum(self.counts, 0) - self.counts
        width = int(self.counts.max())
        # table[c, j] = index of the j-th item of class c (padding -1)
        col = torch.arange(width)
        self.table = torch.full((len(classes), width), -1, dtype=torch.long)
        valid = col.unsqueeze(0) < self.counts.unsqueeze(1)
        self.table[valid] = order[(starts.unsqueeze(1) + col.unsqueeze(0))[valid]]
        self.num_batches = max(1, len(ids) // (P * K)) if num_batches is None else int(num_batches)
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def batch_size(self) -> int:
        return self.P * self.K

    def __len__(self) -> int:
        return self.num_batches

    def sample(self) -> list[int]:
        """One batch of item indices."""
        g = self.generator
        chosen = torch.randperm(len(self.classes), generator=g)[: self.P]  # [P]
        counts = self.counts[chosen]  # [P]
        width = self.table.shape[1]
        keys = torch.rand(self.P, width, generator=g)
        keys[torch.arange(width).unsqueeze(0) >= counts.unsqueeze(1)] = -1.0  # padding never wins
        k_wo = min(self.K, width)
        without = torch.topk(keys, k_wo, dim=1).indices  # [P, k_wo] distinct positions
        if k_wo < self.K:
            without = torch.cat([without, without[:, :1].expand(-1, self.K - k_wo)], dim=1)
        with_repl = (torch.rand(self.P, self.K, generator=g) * counts.unsqueeze(1)).long()  # [P, K]
        pos = torch.where((counts >= self.K).unsqueeze(1), without, with_repl)
        return self.table[chosen.unsqueeze(1), pos].reshape(-1).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        for _ in range(self.num_batches):
            yield self.sample()


def stratified_sample(labels: Sequence[Hashable], n: int | None, seed: int = 0) -> list[int]:
    """Indices (sorted) of a seeded random subsample of ``n`` items whose label proportions
    match those of ``labels`` (scikit-learn's stratified split; every label keeps at least one
    item when ``n`` allows). ``n`` of ``None`` or at least ``len(labels)``: all indices.

    >>> stratified_sample(["a"] * 6 + ["b"] * 3, 3, seed=0) == stratified_sample(["a"] * 6 + ["b"] * 3, 3, seed=0)
    True
    >>> stratified_sample(["a", "b"], None)
    [0, 1]
    """
    labels = list(labels)
    if n is None or n >= len(labels):
        return list(range(len(labels)))
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    from sklearn.model_selection import train_test_split

    ids, classes = encode_labels(labels)
    if n < len(classes):
        raise ValueError(f"n = {n} is smaller than the number of labels ({len(classes)})")
    counts = torch.bincount(ids)
    if int(counts.min()) < 2:  # scikit-learn cannot stratify a label with one item: keep those
        single = [i for i, c in enumerate(ids.tolist()) if counts[c] < 2]
        rest = [i for i, c in enumerate(ids.tolist()) if counts[c] >= 2]
        if n - len(single) < 1:
            raise ValueError("n too small to keep every single-item label")
        sub = stratified_sample([labels[i] for i in rest], n - len(single), seed)
        return sorted(single + [rest[i] for i in sub])
    chosen, _ = train_test_split(np.arange(len(labels)), train_size=n, stratify=ids.numpy(), random_state=seed)
    return sorted(int(i) for i in chosen)

