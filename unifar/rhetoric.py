r"""Sentence embeddings of rhetorical function, after SciToricsBERT (Sugimoto and Aizawa, 2022,
"Incorporating the Rhetoric of Scientific Language into Sentence Embeddings using
Phrase-guided Distant Supervision and Metric Learning", SDP 2022; paper 002 of this book's
reading list).

SciToricsBERT fine-tunes an encoder so that sentences with the same communicative function lie
close together. This module holds its three ingredients and its evaluation:

* :func:`make_loss` -- the five objectives of section 3.3 (softmax cross-entropy with a linear
  classifier, triplet, ArcFace, multi-similarity, NT-Xent), built from
  ``pytorch-metric-learning`` where it has them, with the table-6 hyper-parameters marked with
  a bullet (the values used for the reported results) as defaults (:data:`PAPER_HYPERPARAMETERS`);
* :class:`PKBatchSampler` -- PK batches (appendix B, after Hermans et al. 2017): sample ``P``
  classes, then ``K`` sentences of each;
* :class:`SentenceEncoder` and :func:`finetune` -- a mean-pooled, L2-normalised sentence
  encoder on any base encoder, and its training loop (Adam, learning rate 2e-5, appendix B);
* :func:`retrieval_scores` -- P@1 and MAP@R of leave-one-out sentence retrieval (section 4.1,
  after Musgrave et al. 2020), and :func:`chance_retrieval_scores`, their expected values for
  a random ranking (the floor a set's label proportions put under both).

Where this reproduction departs from the paper, and why:

* **Pooling.** SciToricsBERT takes the [CLS] vector of SciBERT; here the base encoders are
  sentence-transformers models trained for mean pooling (``minilm``, ``mpnet``), so the sentence
  vector is the attention-masked mean of the last layer (what the paper itself does for its
  transformer baselines, footnote 8).
* **PK batches with few labels.** The paper trains on 77 classes with ``P = 64, K = 1``
  (softmax, ArcFace) or ``P = 8, K = 8`` (the others), batch 64. CSAbstruct has 5 labels (3
  facets), so ``P`` cannot exceed the number of classes: :func:`pk_for` takes
  ``P = min(P_paper, C)`` and ``K = max(K_paper, 64 // P)``, which keeps the batch near 64 and
  class-balanced (5 labels: ``P = 5, K = 12``, batch 60; 3 facets: ``P = 3, K = 21``, batch 63).
* **Which vectors the losses see.** The losses receive the *unnormalised* pooled vector: the
  softmax loss (eq. 1) is a plain linear classifier on it, as in the paper; the other four
  normalise internally (cosine similarity, or Euclidean distance of normalised vectors for the
  triplet loss, as ``pytorch-metric-learning`` does by default). Retrieval uses L2-normalised
  vectors (section 4.1, footnote 6).
* **Triplets.** Footnote 5: "all possible triplets are used for training without negative
  sampling", so no miner is used by default (``pytorch-metric-learning`` then forms every
  triplet of the batch). A ``TripletMarginMiner(type_of_triplets="all")`` gives the same loss
  value (it drops only triplets that contribute zero), which a test checks.
* **The classifier weights** of the softmax and ArcFace losses are trained with the encoder by
  the same Adam optimiser and, by default, the same learning rate (the paper states one).

References: Deng et al. (2019) ArcFace; Wang et al. (2019) multi-similarity loss; Chen et al.
(2020) SimCLR / NT-Xent; Hermans et al. (2017) "In defense of the triplet loss" (PK batches);
Musgrave et al. (2020) "A metric learning reality check" (MAP@R).
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Sampler

__all__ = [
    "LOSS_NAMES",
    "PAPER_HYPERPARAMETERS",
    "PAPER_PK",
    "PAPER_BATCH_SIZE",
    "PAPER_LR",
    "SoftmaxCrossEntropyLoss",
    "MetricLoss",
    "make_loss",
    "pk_for",
    "PKBatchSampler",
    "mean_pool",
    "SentenceEncoder",
    "FinetuneHistory",
    "embed_in_length_chunks",
    "finetune",
    "encode_labels",
    "stratified_sample",
    "retrieval_scores",
    "chance_retrieval_scores",
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

#: Appendix B: (P classes, K instances per class) of a PK batch.
PAPER_PK: dict[str, tuple[int, int]] = {
    "softmax": (64, 1),
    "arcface": (64, 1),
    "triplet": (8, 8),
    "ms": (8, 8),
    "ntxent": (8, 8),
}
PAPER_BATCH_SIZE = 64  #: appendix B
PAPER_LR = 2e-5  #: appendix B (Adam)


def _canonical(name: str) -> str:
    key = name.lower().replace("_", "-").strip()
    if key not in _ALIASES:
        raise ValueError(f"unknown loss {name!r}; choose one of {LOSS_NAMES}")
    return _ALIASES[key]


# ----------------------------------------------------------------------------- losses


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

    ``name``: ``softmax`` (eq. 1, :class:`SoftmaxCrossEntropyLoss`), ``triplet``, ``arcface``,
    ``ms`` (multi-similarity) or ``ntxent`` (aliases such as ``"multi-similarity"``, ``"nt-xent"``
    are accepted). ``x_i`` is the model output of sample ``i``, ``S_ij`` the cosine similarity of
    ``x_i`` and ``x_j`` in a batch of ``N``; ``P``/``N`` (in eqs. 4-5) the sets of same-label and
    different-label pairs.

    * Triplet (eq. 2), ``TripletMarginLoss(margin=m)``, ``m = 0.05``, all triplets of the batch,
      averaged over the ``K`` triplets with a positive loss (``AvgNonZeroReducer``):

      .. math:: \mathcal{L}_2 = \frac{1}{K}\sum_{i}\max(\|x^a_i - x^p_i\|_2 - \|x^a_i - x^n_i\|_2 + m, 0)

    * ArcFace (eq. 3), ``ArcFaceLoss``, ``m = 0.5`` rad (28.65 degrees), ``s = 16``, with
      ``\theta_j`` the angle between ``x_i`` and the class weight ``W_j``:

      .. math:: \mathcal{L}_3 = -\frac{1}{N}\sum_{i}\log\frac{\exp(s\cos\theta'_{y_i})}{\sum_{j}\exp(s\cos\theta'_j)},
                \quad \theta'_j = \theta_j + m\,[j = y_i]

    * Multi-similarity (eq. 4), ``MultiSimilarityLoss(alpha, beta, base=lambda)``,
      ``alpha = 2``, ``beta = 40``, ``lambda = 0.75``:

      .. math:: \mathcal{L}_4 = \frac{1}{N}\sum_{i}\Big\{\frac{1}{\alpha}\log\big[1 + \sum_{(i,j)\in P}
                e^{-\alpha(S_{ij}-\lambda)}\big] + \frac{1}{\beta}\log\big[1 + \sum_{(i,j)\in N} e^{\beta(S_{ij}-\lambda)}\big]\Big\}

    * NT-Xent (eq. 5), ``NTXentLoss(temperature=T)``, ``T = 0.1``:

      .. math:: \mathcal{L}_5 = -\frac{1}{|P|}\sum_{(i,j)\in P}\log\frac{\exp(S_{ij}/T)}
                {\exp(S_{ij}/T) + \sum_{(i,k)\in N}\exp(S_{ik}/T)}

    ``seed`` fixes the initial classifier weights (softmax, ArcFace) without touching the global
    random state (``None``: use it). ``miner`` is passed through (none by default; see the module
    docstring on triplets).

    >>> make_loss("nt-xent", 8, 3)
    MetricLoss(
      name='ntxent', temperature=0.1
      (loss_fn): NTXentLoss(
        (distance): CosineSimilarity()
        (reducer): MeanReducer()
      )
    )
    """
    from pytorch_metric_learning import losses as pml_losses

    key = _canonical(name)
    hp = {**PAPER_HYPERPARAMETERS[key], **overrides}
    unknown = set(overrides) - set(PAPER_HYPERPARAMETERS[key])
    if unknown:
        raise ValueError(f"{key} loss has no hyper-parameter(s) {sorted(unknown)}")
    rng = torch.random.fork_rng(devices=[]) if seed is not None else nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        if key == "softmax":
            fn: nn.Module = SoftmaxCrossEntropyLoss(embedding_size, num_classes)
        elif key == "triplet":
            fn = pml_losses.TripletMarginLoss(margin=hp["margin"])
        elif key == "arcface":
            fn = pml_losses.ArcFaceLoss(
                num_classes, embedding_size, margin=math.degrees(hp["margin"]), scale=hp["scale"]
            )
        elif key == "ms":
            fn = pml_losses.MultiSimilarityLoss(alpha=hp["alpha"], beta=hp["beta"], base=hp["base"])
        else:
            fn = pml_losses.NTXentLoss(temperature=hp["temperature"])
    return MetricLoss(key, fn, miner, **hp)


# ----------------------------------------------------------------------------- PK batches


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
    p0, k0 = PAPER_PK[_canonical(loss_name)]
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


# ----------------------------------------------------------------------------- encoder


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    r"""Masked mean over tokens, :math:`s = \sum_t m_t h_t / \sum_t m_t`, computed in float32.

    >>> mean_pool(torch.tensor([[[1.0], [3.0], [100.0]]]), torch.tensor([[1, 1, 0]])).tolist()
    [[2.0]]
    """
    m = attention_mask.to(torch.float32).unsqueeze(-1)
    return (hidden.float() * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


class SentenceEncoder(nn.Module):
    """A base encoder (``transformers`` model + tokenizer) giving one vector per sentence: the
    attention-masked mean of the last hidden layer, L2-normalised unless ``normalize=False``.

    ``name`` records where the weights came from (a short name of
    :func:`unifar.base_models.load_encoder`, e.g. ``"minilm"``) while they are unchanged;
    :func:`finetune` sets ``finetuned = True``. ``max_length`` (tokens, default 128) truncates
    long sentences.
    """

    def __init__(self, model: nn.Module, tokenizer: Any, max_length: int = 128, name: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.name = name
        self.finetuned = False

    @classmethod
    def from_name(cls, name: str, max_length: int = 128) -> "SentenceEncoder":
        """Load a base encoder by short name, hub id or path (float32 weights)."""
        from .base_models import load_encoder

        model, tok = load_encoder(name)
        return cls(model, tok, max_length=max_length, name=name)

    @property
    def embedding_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def tokenize(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(
            list(sentences), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {k: v.to(self.device) for k, v in enc.items()}

    def forward(self, sentences: Sequence[str], normalize: bool = True) -> torch.Tensor:
        """Embeddings [N, d] (float32) of ``sentences``, with gradients when training."""
        enc = self.tokenize(sentences)
        hidden = self.model(**enc).last_hidden_state
        emb = mean_pool(hidden, enc["attention_mask"])
        return F.normalize(emb, dim=-1) if normalize else emb

    @torch.no_grad()
    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 64,
        normalize: bool = True,
        bf16: bool | None = None,
        progress: bool | None = None,
    ) -> torch.Tensor:
        """Embeddings [N, d] on the CPU in float32, in eval mode; batches of similar length
        (sorted by character count) for speed, returned in the input order. ``bf16`` (default: on
        CUDA only) runs the encoder under bfloat16 autocast."""
        from tqdm.auto import tqdm

        sentences = list(sentences)
        out = torch.empty(len(sentences), self.embedding_size)
        if not sentences:
            return out
        was_training = self.training
        self.eval()
        dev = self.device
        use_bf16 = dev.type == "cuda" if bf16 is None else bf16
        ctx = torch.autocast(dev.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()
        order = np.argsort([-len(s) for s in sentences], kind="stable")
        starts = range(0, len(sentences), batch_size)
        show = progress if progress is not None else len(starts) >= 50
        try:
            for i in tqdm(starts, desc="encoding sentences", disable=not show):
                idx = order[i : i + batch_size]
                with ctx:
                    emb = self([sentences[j] for j in idx], normalize=normalize)
                out[torch.as_tensor(idx)] = emb.float().cpu()
        finally:
            self.train(was_training)
        return out

    def save_pretrained(self, directory: str | Path) -> Path:
        """Weights (safetensors) and tokenizer, loadable with :meth:`from_name`."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        return path


# ----------------------------------------------------------------------------- training


def embed_in_length_chunks(encoder: SentenceEncoder, sentences: Sequence[str], chunks: int = 1) -> torch.Tensor:
    """Unnormalised embeddings [N, d] of ``sentences`` (with gradients), computed in ``chunks``
    forward passes over length-sorted pieces and returned in the input order.

    A batch is padded to its longest sentence, so a PK batch of mixed lengths wastes most of its
    compute on padding; sorting by length (characters) and encoding in pieces pads each piece
    only to its own longest sentence. The result equals one pass over the whole batch (masked
    attention and masked mean pooling ignore padding) up to floating-point rounding.
    """
    sentences = list(sentences)
    chunks = max(1, min(int(chunks), len(sentences)))
    if chunks == 1:
        return encoder(sentences, normalize=False)
    order = np.argsort([len(s) for s in sentences], kind="stable")
    pieces = [p for p in np.array_split(order, chunks) if len(p)]
    emb = torch.cat([encoder([sentences[i] for i in p], normalize=False) for p in pieces])
    inverse = torch.empty(len(sentences), dtype=torch.long)
    inverse[torch.as_tensor(np.concatenate(pieces))] = torch.arange(len(sentences))
    return emb[inverse.to(emb.device)]


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


class FinetuneHistory(list):
    """The loss of every optimisation step (a list of floats), plus ``validation`` (one
    ``{"epoch", "p@1", "map@r"}`` per epoch when validation data was given), ``best_epoch``
    (the epoch whose weights were kept) and ``settings`` (loss, P, K, lr, steps, device)."""

    def __init__(self) -> None:
        super().__init__()
        self.validation: list[dict[str, float]] = []
        self.best_epoch: int | None = None
        self.settings: dict[str, Any] = {}


def finetune(
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    labels: Sequence[Hashable],
    loss: str | MetricLoss = "softmax",
    epochs: int = 1,
    lr: float = PAPER_LR,
    P: int | None = None,
    K: int | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
    seed: int = 0,
    device: str | torch.device | None = None,
    max_steps: int | None = None,
    progress: bool | None = None,
    head_lr: float | None = None,
    validation: tuple[Sequence[str], Sequence[Hashable]] | None = None,
    bf16: bool | None = None,
    length_chunks: int = 1,
) -> FinetuneHistory:
    """Fine-tune ``encoder`` in place with a metric-learning loss on PK batches (paper 002,
    section 3.3 and appendix B): Adam, learning rate ``lr`` (2e-5), ``epochs`` passes of
    ``len(sentences) // (P*K)`` batches each, at most ``max_steps`` steps in all.

    ``loss`` is a :class:`MetricLoss` or a name for :func:`make_loss` (its classifier, if any,
    is trained with ``head_lr``, default ``lr``). ``P``/``K`` default to :func:`pk_for`.
    ``validation = (sentences, labels)``: after every epoch compute :func:`retrieval_scores` and
    keep the weights of the epoch with the best MAP@R (the paper's model selection, section
    4.1). The global torch seed is set to ``seed``: on the CPU the result is deterministic.
    On CUDA the encoder runs under bfloat16 autocast (``bf16``, default: on CUDA only); the loss
    is computed in float32. ``length_chunks > 1`` runs the encoder on each PK batch in that many
    length-sorted pieces (:func:`embed_in_length_chunks`): the loss still sees the whole batch,
    only padding is saved (a CPU speed-up; dropout draws differ, nothing else). Returns the
    per-step losses (:class:`FinetuneHistory`).
    """
    from tqdm.auto import tqdm

    from .model import pick_device

    if len(sentences) != len(labels):
        raise ValueError(f"{len(sentences)} sentences but {len(labels)} labels")
    torch.manual_seed(seed)
    dev = pick_device(device)
    y, classes = encode_labels(labels)
    if isinstance(loss, str):
        loss = make_loss(loss, encoder.embedding_size, len(classes), seed=seed)
    p_default, k_default = pk_for(loss.name, len(classes), batch_size)
    P, K = P or p_default, K or k_default
    sampler = PKBatchSampler(y, P, K, seed=seed)
    encoder.to(dev)
    loss.to(dev)
    head = [p for p in loss.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": [p for p in encoder.parameters() if p.requires_grad]}]
    if head:
        groups.append({"params": head, "lr": head_lr if head_lr is not None else lr})
    opt = torch.optim.Adam(groups, lr=lr)
    use_bf16 = dev.type == "cuda" if bf16 is None else bf16
    ctx: Callable[[], Any] = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if use_bf16 else nullcontext
    sentences = list(sentences)

    history = FinetuneHistory()
    total = epochs * len(sampler) if max_steps is None else min(max_steps, epochs * len(sampler))
    history.settings = {
        "loss": loss.name, **loss.hparams, "P": P, "K": K, "lr": lr, "head_lr": head_lr if head_lr is not None else lr,
        "epochs": epochs, "steps": total, "seed": seed, "device": str(dev), "bf16": use_bf16,
        "length_chunks": length_chunks,
    }
    best_score, best_state = -math.inf, None
    bar = tqdm(total=total, desc=f"fine-tuning ({loss.name})", disable=not (progress if progress is not None else total >= 50))
    step = 0
    for epoch in range(epochs):
        encoder.train()
        loss.train()
        for batch in sampler:
            if step >= total:
                break
            with ctx():
                emb = embed_in_length_chunks(encoder, [sentences[i] for i in batch], length_chunks)
            value = loss(emb.float(), y[batch].to(dev))
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
            history.append(float(value.detach()))
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{history[-1]:.4f}")
        if validation is not None:
            scores = retrieval_scores(encoder.encode(validation[0], bf16=use_bf16), validation[1])
            history.validation.append({"epoch": epoch + 1, **scores})
            if scores["map@r"] > best_score:
                best_score, history.best_epoch = scores["map@r"], epoch + 1
                best_state = {k: v.detach().to("cpu", copy=True) for k, v in encoder.state_dict().items()}
        if step >= total:
            break
    bar.close()
    if best_state is not None:
        encoder.load_state_dict(best_state)
    encoder.eval()
    encoder.finetuned = True
    return history


# ----------------------------------------------------------------------------- evaluation


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


def retrieval_scores(
    embeddings: torch.Tensor | np.ndarray,
    labels: Sequence[Hashable],
    device: str | torch.device | None = "cpu",
    chunk_size: int = 2048,
) -> dict[str, float]:
    r"""P@1 and MAP@R of leave-one-out retrieval by cosine similarity (paper 002, section 4.1;
    Musgrave et al., 2020), computed by ``pytorch-metric-learning``'s ``AccuracyCalculator``.

    Every item is a query once; the references are all *other* items (the query itself is
    excluded). For a query with ``R`` same-label references, ranked by cosine similarity,

    .. math::
        \mathrm{P@1} = [\,y_{(1)} = y_q\,], \qquad
        \mathrm{MAP@R} = \frac{1}{R}\sum_{i=1}^{R} P(i)\,[\,y_{(i)} = y_q\,],

    with ``P(i)`` the precision at ``i``; both are averaged over the queries. Queries whose label
    occurs once (``R = 0``) are skipped, as in ``pytorch-metric-learning``. Ties in similarity are
    broken by ``torch.topk`` (unspecified order).
    """
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    emb = torch.as_tensor(np.asarray(embeddings) if not isinstance(embeddings, torch.Tensor) else embeddings)
    emb = F.normalize(emb.detach().float(), dim=-1)
    y, _ = encode_labels(labels)
    if len(y) != len(emb):
        raise ValueError(f"{len(emb)} embeddings but {len(y)} labels")
    dev = torch.device(device) if device is not None else emb.device
    emb, y = emb.to(dev), y.to(dev)
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r"),
        k="max_bin_count",
        device=dev,
        knn_func=CustomKNN(CosineSimilarity(), batch_size=chunk_size),
    )
    res = calc.get_accuracy(emb, y, emb, y, ref_includes_query=True)
    return {"p@1": float(res["precision_at_1"]), "map@r": float(res["mean_average_precision_at_r"])}


def chance_retrieval_scores(labels: Sequence[Hashable]) -> dict[str, float]:
    r"""Expected P@1 and MAP@R of :func:`retrieval_scores` when the references are ranked in a
    uniformly random order: the chance level that a set's label proportions give both metrics.

    A query whose label has ``n_c`` items has ``R = n_c - 1`` relevant among ``M = N - 1``
    references. With :math:`H_R = \sum_{i \le R} 1/i`, the expectations over random rankings are

    .. math::
        \mathbb{E}[\mathrm{P@1}] = \frac{R}{M}, \qquad
        \mathbb{E}[\mathrm{MAP@R}] = \frac{H_R}{M} + \frac{(R - 1)(R - H_R)}{M (M - 1)},

    (from :math:`\mathbb{E}[r_i] = R/M` and :math:`\mathbb{E}[r_i r_j] = R(R-1)/(M(M-1))` for the
    relevance indicators of ranks ``i != j``), averaged over the queries as
    :func:`retrieval_scores` does, skipping labels with one item. For large sets they approach
    :math:`\sum_c p_c^2` and :math:`\sum_c p_c^3` (``p_c`` the label proportions).

    >>> chance_retrieval_scores(["a", "a", "b", "b"])  # R = 1, M = 3 for every query
    {'p@1': 0.3333333333333333, 'map@r': 0.3333333333333333}
    >>> chance_retrieval_scores(["a"] * 3)["map@r"]  # every reference relevant
    1.0
    >>> s = chance_retrieval_scores(["a"] * 600 + ["b"] * 400)
    >>> round(s["p@1"], 3), round(s["map@r"], 2)  # near 0.6^2 + 0.4^2 and 0.6^3 + 0.4^3
    (0.52, 0.28)
    """
    ids, _ = encode_labels(labels)
    counts = torch.bincount(ids).double()
    n = float(counts.sum())
    counts = counts[counts >= 2]  # queries with R = 0 are skipped
    if n < 2 or len(counts) == 0:
        raise ValueError("need at least one label with two items")
    R, M = counts - 1, n - 1
    harmonic = torch.tensor([sum(1.0 / i for i in range(1, int(r) + 1)) for r in R.tolist()],
                            dtype=torch.float64)
    p1 = R / M
    mapr = harmonic / M + ((R - 1) * (R - harmonic) / (M * (M - 1)) if M > 1 else 0.0)
    weight = counts / counts.sum()
    return {"p@1": float((weight * p1).sum()), "map@r": float((weight * mapr).sum())}
