"""Nearest-neighbour search over unit vectors by inner product: exact (a matrix product and a
top-k, in blocks that bound memory) or FAISS (``flat``: exact, ``ivf``: inverted lists over
k-means cells, ``hnsw``: a navigable small-world graph).

With L2-normalised rows the inner product is the cosine; over concatenated facet vectors it is
``N_facet`` times the diagonal mean of the facet similarity matrix
(:func:`unifar.scoring.flatten_for_index`). ``auto`` picks ``exact`` below
:data:`AUTO_THRESHOLD` rows and ``ivf`` above (``benchmarks/search_scale.py`` measures both).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["BACKENDS", "AUTO_THRESHOLD", "VectorIndex", "choose_backend", "exact_topk"]

BACKENDS = ("exact", "flat", "ivf", "hnsw")
#: rows from which ``auto`` chooses the IVF index over the exact matrix product
AUTO_THRESHOLD = 500_000


def choose_backend(backend: str, n_rows: int) -> str:
    """``backend``, or for ``auto`` the one its size calls for.

    >>> choose_backend("auto", 1000), choose_backend("auto", 10**7), choose_backend("hnsw", 5)
    ('exact', 'ivf', 'hnsw')
    """
    if backend == "auto":
        return "exact" if n_rows < AUTO_THRESHOLD else "ivf"
    if backend not in BACKENDS:
        raise ValueError(f"--backend: unknown {backend!r}; choose auto, {', '.join(BACKENDS)}")
    return backend


def exact_topk(
    vectors: torch.Tensor, queries: torch.Tensor, k: int, max_block: int = 1 << 26
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` inner products of ``queries`` [Q, d] against ``vectors`` [N, d]: scores and
    row indices [Q, k], best first; queries go in blocks of at most ``max_block`` scores."""
    k = min(k, vectors.shape[0])
    step = max(1, max_block // max(vectors.shape[0], 1))
    scores, idx = [], []
    for s in range(0, queries.shape[0], step):
        top = torch.topk(queries[s : s + step].float() @ vectors.T, k, dim=1)
        scores.append(top.values)
        idx.append(top.indices)
    return torch.cat(scores).numpy(), torch.cat(idx).numpy()


class VectorIndex:
    """An inner-product index over the rows of ``vectors`` [N, d] (float32, unit norm).

    ``nlist`` (IVF cells; default ``sqrt(N)``, at most N / 39 so that k-means has 39 points a
    cell; k-means trains on at most 64 points a cell), ``nprobe`` (cells searched; default 32),
    ``hnsw_m`` (graph degree, default 32) and ``ef_search`` (HNSW search breadth, default 128)
    tune the FAISS indexes.
    """

    def __init__(
        self,
        vectors: torch.Tensor | np.ndarray,
        backend: str = "exact",
        *,
        nlist: int | None = None,
        nprobe: int = 32,
        hnsw_m: int = 32,
        ef_search: int = 128,
        seed: int = 0,
    ) -> None:
        self.vectors = torch.as_tensor(vectors, dtype=torch.float32)
        if self.vectors.dim() != 2:
            raise ValueError(f"expected vectors [N, d], got shape {tuple(self.vectors.shape)}")
        self.backend = choose_backend(backend, self.vectors.shape[0])
        n, d = self.vectors.shape
        self.params: dict[str, Any] = {}
        self.faiss: Any = None
        if self.backend == "exact":
            return
        import faiss

        x = np.ascontiguousarray(self.vectors.numpy())
        if self.backend == "flat":
            index = faiss.IndexFlatIP(d)
        elif self.backend == "hnsw":
            index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = max(40, 2 * hnsw_m)
            index.hnsw.efSearch = ef_search
            self.params = {"hnsw_m": hnsw_m, "ef_search": ef_search}
        else:
            nlist = nlist or max(1, min(int(math.sqrt(n)), n // 39))
            if nlist > n:  # FAISS's k-means would fail with a RuntimeError
                raise ValueError(f"--nlist {nlist}: more IVF cells than papers ({n}); k-means needs "
                                 f"a paper per cell at least (the default is sqrt(N), at most N / 39)")
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(seed)
            sample = x if n <= 64 * nlist else x[np.sort(rng.choice(n, 64 * nlist, replace=False))]
            index.cp.seed = seed
            index.train(sample)
            index.nprobe = min(nprobe, nlist)
            self.params = {"nlist": nlist, "nprobe": index.nprobe}
        index.add(x)
        self.faiss = index

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def search(self, queries: torch.Tensor | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (at most N) inner products and row indices [Q, k], best first."""
        q = torch.as_tensor(queries, dtype=torch.float32).reshape(-1, self.vectors.shape[1])
        k = min(k, len(self))
        if self.faiss is None:
            return exact_topk(self.vectors, q, k)
        scores, idx = self.faiss.search(np.ascontiguousarray(q.numpy()), k)
        return scores, idx  # an IVF/HNSW search that finds fewer than k rows pads with -1

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the FAISS index to ``path`` (nothing for ``exact``: the vectors are the index)."""
        if self.faiss is not None:
            import faiss

            faiss.write_index(self.faiss, str(path))

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        vectors: torch.Tensor,
        backend: str,
        params: dict[str, Any],
    ) -> "VectorIndex":
        """An index over ``vectors`` with the FAISS index saved at ``path`` (unless ``exact``)."""
        obj = cls.__new__(cls)
        obj.vectors, obj.backend, obj.params, obj.faiss = vectors, backend, dict(params), None
        if backend != "exact":
            import faiss

            obj.faiss = faiss.read_index(str(path))
            if obj.faiss.ntotal != vectors.shape[0] or obj.faiss.d != vectors.shape[1]:
                raise ValueError(
                    f"{Path(path)}: FAISS index of {obj.faiss.ntotal} x {obj.faiss.d} "
                    f"rows does not fit {tuple(vectors.shape)} embeddings"
                )
        return obj
