"""Independent cropping (ICrop; Izacard et al., 2021), the self-supervised objective of the
multi-objective paper (section 3.2): two independent spans of one document are the anchor and
the positive, a span of another document is the negative.

The spans follow :func:`unifar.construction.questions.random_crop_span` (Contriever's random crop:
a length ratio uniform in ``[ratio_min, ratio_max]`` of the document, at least ``min_tokens`` =
10 tokens, "both the query and document spans contain at least ten tokens"; a start uniform
over the valid positions), drawn here for a whole corpus at once (:func:`crop_spans`). Tokens are
whitespace-separated words of ``title + abstract``, so a crop is readable text and a span of
``n`` words is at least ``n`` word pieces; documents shorter than ``min_tokens`` words are left
out, and so are copies of a text already in the corpus (a negative is always another text).
Every epoch crops anew (:attr:`unifar.multi_objective.objectives.Objective.resample`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..datasets.leakage import ForbiddenSet, normalise_text
from ..evaluation.texts import document_text
from .objectives import ICROP, Example, Objective, drop_leaks

__all__ = ["crop_spans", "icrop_examples", "icrop_objective"]


def crop_spans(
    n_tokens: np.ndarray,
    rng: np.random.Generator,
    ratio_min: float = 0.1,
    ratio_max: float = 0.5,
    min_tokens: int = 10,
) -> tuple[np.ndarray, np.ndarray]:
    r"""One random crop ``[start, end)`` of each of ``N`` sequences, vectorised:

    .. math::
        \ell_i = \min\big(n_i,\ \max(\lfloor n_i r_i \rfloor,\ m)\big),\quad
        r_i \sim U[r_{\min}, r_{\max}],\quad s_i \sim U\{0, \dots, n_i - \ell_i\}

    Args:
        n_tokens: ``[N]`` sequence lengths :math:`n_i` (>= 1).
        rng: the random stream.
        ratio_min, ratio_max: :math:`r_{\min}, r_{\max}` (Contriever's 0.1 and 0.5).
        min_tokens: :math:`m`, 10 in the multi-objective paper (section 3.2).

    Returns:
        ``(start, end)``, two ``[N]`` int arrays; ``end - start`` >= ``min(n_i, m)``.

    Reference: Izacard et al. (2021), "Unsupervised dense information retrieval with
    contrastive learning", random cropping; the multi-objective paper, section 3.2.

    >>> s, e = crop_spans(np.array([100, 12, 5]), np.random.default_rng(0))
    >>> s.tolist(), e.tolist()
    ([4, 0, 0], [39, 10, 5])
    """
    n = np.asarray(n_tokens, dtype=np.int64)
    if n.ndim != 1 or (n < 1).any():
        raise ValueError("n_tokens must be a 1-D array of positive lengths")
    if not 0 < ratio_min <= ratio_max <= 1:
        raise ValueError(f"need 0 < ratio_min <= ratio_max <= 1, got {ratio_min}, {ratio_max}")
    ratio = rng.uniform(ratio_min, ratio_max, size=n.shape)
    length = np.minimum(n, np.maximum((n * ratio).astype(np.int64), min_tokens))
    start = rng.integers(0, n - length + 1)
    return start, start + length


def icrop_examples(
    words: list[list[str]],
    rng: np.random.Generator,
    ratio_min: float = 0.1,
    ratio_max: float = 0.5,
    min_tokens: int = 10,
) -> list[Example]:
    """One epoch of ICrop: per document, two independent crops (anchor, positive; they may
    overlap) and a crop of another document, ``(i + U{1..N-1}) mod N``, as the negative."""
    n_docs = len(words)
    if n_docs < 2:
        raise ValueError(
            f"ICrop needs at least two documents (negatives come from another one), got {n_docs}"
        )
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=n_docs)
    other = (np.arange(n_docs) + rng.integers(1, n_docs, size=n_docs)) % n_docs
    spans = [
        crop_spans(lengths[idx], rng, ratio_min, ratio_max, min_tokens)
        for idx in (np.arange(n_docs), np.arange(n_docs), other)
    ]
    texts = [
        [" ".join(words[d][s:e]) for d, s, e in zip(idx.tolist(), st.tolist(), en.tolist())]
        for idx, (st, en) in zip((np.arange(n_docs), np.arange(n_docs), other), spans)
    ]
    return [Example(a, p, n, recurs=False) for a, p, n in zip(*texts)]


def icrop_objective(
    documents: Iterable[Mapping[str, Any]],
    seed: int = 0,
    ratio_min: float = 0.1,
    ratio_max: float = 0.5,
    min_tokens: int = 10,
    forbidden: ForbiddenSet | None = None,
    id_prefix: str = "",
    name: str = "icrop",
    n_dev: int = 0,
) -> Objective:
    """ICrop over a corpus of documents (``{"id", "title", "sentences"}``), after the leakage
    guard (:func:`~unifar.multi_objective.objectives.drop_leaks`; ``id_prefix`` puts the ids in
    the forbidden set's id space); fresh crops every epoch. ``n_dev``: documents (a seeded
    random choice) held out of training, cropped once into the objective's ``dev`` examples."""
    docs = list(documents)
    kept, dropped = drop_leaks([(d,) for d in docs], forbidden, id_prefix)
    words, seen = [], set()
    for (doc,) in kept:
        text = document_text(doc, " ")
        key = normalise_text(text)
        if len(text.split()) >= min_tokens and key not in seen:
            seen.add(key)
            words.append(text.split())

    stats = {
        "documents": len(docs),
        "dropped_leaks": dropped,
        "dropped_short_or_copies": len(kept) - len(words),
    }
    dev: list[Example] = []
    if n_dev:
        if not 2 <= n_dev <= len(words) - 2:
            raise ValueError(f"{name}: cannot hold out {n_dev} of {len(words)} documents (2 to n - 2)")
        drawn = np.random.default_rng(seed + 1).permutation(len(words))[:n_dev].tolist()
        dev_words = [words[i] for i in drawn]  # in the drawn order: batches as mixed as training's
        held = set(drawn)
        words = [w for i, w in enumerate(words) if i not in held]
        # fixed crops, measured again and again: their frozen states are worth caching
        dev = [e._replace(recurs=True) for e in
               icrop_examples(dev_words, np.random.default_rng(seed + 2), ratio_min, ratio_max, min_tokens)]
        stats["dev_examples"] = len(dev)

    def resample(rng: np.random.Generator) -> list[Example]:
        return icrop_examples(words, rng, ratio_min, ratio_max, min_tokens)

    examples = resample(np.random.default_rng(seed)) if len(words) >= 2 else []
    return Objective(name, ICROP, examples, {"examples": len(examples), **stats}, resample, dev)
