"""FLeW's inference (section 3.4, eqs. 7-8): three facet embeddings of ``title [SEP] full
abstract``, their weighted sum, and the grid search of the weights on a dev split.

The weights sum to 1 and are each > 0, so two are free; FLeW searches "all weight
combinations" on a grid without giving its step. Here the grid is every
``(i, j, k) * step`` with positive integers ``i + j + k = 1 / step`` (step 0.1: 36 points),
and the best point is the first of the highest dev score in grid order (bg-major), so the
search is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from ..bi_encoder import BiEncoder
from ..caching import TokenStateCache
from ..evaluation.texts import document_text
from ..facets import FACETS

__all__ = [
    "facet_embeddings",
    "per_facet",
    "weighted_embedding",
    "weight_grid",
    "WeightSearch",
    "grid_search_weights",
]


def facet_embeddings(
    encoders: Mapping[str, BiEncoder],
    documents: Sequence[Mapping[str, Any]],
    batch_size: int = 32,
    state_cache: TokenStateCache | None = None,
) -> torch.Tensor:
    """Eq. 7: ``[N, 3, h]`` embeddings of each document's ``title [SEP] abstract`` (the full
    abstract: its ``sentences`` joined, or its ``abstract``) by FLeW-bg, -mt and -rs, in the
    facet order of :data:`~unifar.facets.FACETS`. :meth:`BiEncoder.encode
    <unifar.bi_encoder.BiEncoder.encode>` L2-normalises each facet embedding (FLeW sums the raw
    [CLS] states; normalising first keeps one facet's norm from outweighing its weight).
    ``state_cache``: the frozen lower layers' states, shared by encoders that train only their
    top layers (:func:`unifar.flew.training.train_facet_encoders`)."""
    missing = [f for f in FACETS if f not in encoders]
    if missing:
        raise KeyError(f"no encoder for facets {missing}")
    return per_facet(
        encoders,
        lambda enc: enc.encode([document_text(d, enc.sep_token) for d in documents],
                               batch_size=batch_size, show_progress=False, state_cache=state_cache),
    )


def per_facet(encoders: Mapping[str, BiEncoder], encode: Callable[[BiEncoder], torch.Tensor]) -> torch.Tensor:
    """``[N, 3, h]``: ``encode(encoders[f])`` for each facet of :data:`~unifar.facets.FACETS`,
    once per distinct encoder (FLeW's untrained starting point is one encoder three times, which
    then runs once, not three times)."""
    done: dict[int, torch.Tensor] = {}
    out = []
    for f in FACETS:
        enc = encoders[f]
        if id(enc) not in done:
            done[id(enc)] = encode(enc)
        out.append(done[id(enc)])
    return torch.stack(out, dim=1)


def weighted_embedding(
    facet_emb: torch.Tensor, weights: Sequence[float] | torch.Tensor
) -> torch.Tensor:
    r"""FLeW eq. 8, the document embedding as a weighted sum of the facet embeddings:

    .. math::
        \mathbf{E}_{weighted} = \mathcal{W}_{bg}\,\mathbf{E}_{background}
        + \mathcal{W}_{mt}\,\mathbf{E}_{method} + \mathcal{W}_{rs}\,\mathbf{E}_{result},
        \quad \mathcal{W}_{bg} + \mathcal{W}_{mt} + \mathcal{W}_{rs} = 1,\ \mathcal{W}_x > 0

    ``facet_emb`` ``[..., 3, h]`` (facets in the order bg, mt, rs; eq. 7), ``weights`` ``[3]``.
    Returns ``[..., h]``. Weights that are not all positive or do not sum to 1 (within 1e-6)
    are an error. FLeW section 3.4.

    >>> E = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]])
    >>> weighted_embedding(E, [0.5, 0.25, 0.25]).tolist()
    [[1.0, 0.75]]
    """
    w = torch.as_tensor(weights, dtype=facet_emb.dtype, device=facet_emb.device)
    if w.shape != (len(FACETS),) or facet_emb.shape[-2] != len(FACETS):
        raise ValueError(
            f"need weights [3] and embeddings [..., 3, h]; got {tuple(w.shape)} "
            f"and {tuple(facet_emb.shape)}"
        )
    if bool((w <= 0).any()) or abs(float(w.sum()) - 1.0) > 1e-6:
        raise ValueError(f"eq. 8 needs weights > 0 that sum to 1, got {w.tolist()}")
    return (w.unsqueeze(-1) * facet_emb).sum(dim=-2)


def weight_grid(step: float = 0.1) -> torch.Tensor:
    """``[K, 3]`` every weight triple on the grid of ``step`` with each weight > 0, sum 1.

    >>> g = weight_grid(0.25); g.tolist()
    [[0.25, 0.25, 0.5], [0.25, 0.5, 0.25], [0.5, 0.25, 0.25]]
    >>> g = weight_grid(0.1)
    >>> len(g), bool(torch.allclose(g.sum(1), torch.ones(36, dtype=torch.float64)))
    (36, True)
    """
    n = round(1.0 / step)
    if n < 3 or abs(n * step - 1.0) > 1e-9:
        raise ValueError(f"step must be 1/n for an integer n >= 3, got {step}")
    ij = torch.cartesian_prod(torch.arange(1, n - 1), torch.arange(1, n - 1))
    ijk = torch.cat([ij, (n - ij.sum(1)).unsqueeze(1)], dim=1)
    return ijk[ijk[:, 2] > 0].double() / n


@dataclass
class WeightSearch:
    """The grid, its dev scores, and the best weights (first of the highest score)."""

    grid: torch.Tensor  # [K, 3]
    scores: torch.Tensor  # [K]
    best: tuple[float, float, float]
    best_score: float

    def as_dict(self) -> dict[str, float]:
        return dict(zip(FACETS, self.best))


def grid_search_weights(
    facet_emb: torch.Tensor,
    score: Callable[[torch.Tensor], float],
    step: float = 0.1,
) -> WeightSearch:
    """Section 3.4's weight search: ``score(weighted_embedding(facet_emb, w))`` (a dev metric,
    higher is better, e.g. MAP of CSFCube fold1_dev) for every ``w`` of :func:`weight_grid`."""
    grid = weight_grid(step)
    emb = facet_emb.to(torch.float64)
    scores = torch.tensor(
        [float(score(weighted_embedding(emb, w).to(facet_emb.dtype))) for w in grid],
        dtype=torch.float64,
    )
    if torch.isnan(scores).any():
        raise ValueError("the dev score returned NaN for some weights")
    i = int(torch.argmax(scores))  # argmax returns the first maximum: grid order breaks ties
    best = tuple(round(float(x), 10) for x in grid[i])
    return WeightSearch(grid, scores, best, float(scores[i]))  # type: ignore[arg-type]
