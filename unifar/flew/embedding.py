"""Node embeddings of one weighted facet subgraph (FLeW section 3.1, "Subgraph Embedding").

FLeW trains PyTorch-BigGraph (PBG) on each facet subgraph, with each weighted edge turned into
``w(e)`` repeated edges. PBG is not installable here (unmaintained, and no dependency may be
added), so the documented equivalent is a **spectral (diffusion-map) embedding** computed with
SciPy. Why it embeds the same graph: the adjacency matrix of PBG's multigraph of repeated
edges *is* the weighted matrix :math:`\\mathcal{W}_x` of eq. 3 (an entry counts the parallel
edges), and the spectral embedding is a function of that matrix. With the symmetrised graph
:math:`A = W + W^\\top` (citing direction dropped: neighbourhood proximity is symmetric),
degrees :math:`D` and the top eigenpairs :math:`(\\mu_k, u_k)` of
:math:`D^{-1/2} A D^{-1/2}`, paper :math:`i` is embedded as
:math:`\\big(\\max(\\mu_k, 0)^t\\, u_{ik} / \\sqrt{D_{ii}}\\big)_k`, the diffusion map of
Coifman and Lafon: L2 distances approximate how differently ``t``-step random walks along the
facet's citations spread from two papers, so papers sharing many heavily weighted citations
of that intent are close, which is all the neighbourhood sampling (:mod:`unifar.flew.sampling`)
reads from the embedding (PBG also places linked papers close). Scaling by the eigenvalue
(rather than the plain Laplacian eigenmap of :func:`sklearn.manifold.spectral_embedding`) keeps
high-frequency eigenvectors, which split tight clusters apart, from weighing as much as the
low-frequency ones when ``dim`` is large for the graph. Differences from PBG: PBG learns a
relation model with negative sampling on directed edges; this is the exact solution of a
quadratic objective, deterministic for a seed.

Only nodes with at least one edge in the facet get an embedding: an isolated node carries no
structural signal for that facet, and FLeW samples triplets only where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["NodeEmbedding", "embed_subgraph"]


@dataclass
class NodeEmbedding:
    """``vectors[i]`` embeds graph node ``nodes[i]`` (indices into the graph's node list)."""

    nodes: np.ndarray  # [n] int64 node indices of the graph (nodes with >= 1 edge)
    vectors: np.ndarray  # [n, d] float64


def embed_subgraph(weights: sp.spmatrix, dim: int = 32, t: int = 1, seed: int = 0) -> NodeEmbedding:
    """Diffusion-map embedding (``dim`` components, ``t`` steps) of the symmetrised weighted
    subgraph ``weights`` ``[N, N]`` (:func:`unifar.flew.graph.facet_weights`), over its
    non-isolated nodes (module docstring).

    ``dim`` is capped at the number of those nodes. Graphs of up to 2,000 such nodes are solved
    densely (NumPy), larger ones with ARPACK (:func:`scipy.sparse.linalg.eigsh`, start vector
    drawn from ``seed``).
    """
    A = sp.csr_matrix(weights, dtype=np.float64)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"weights must be square, got shape {A.shape}")
    A = (A + A.T).tocsr()
    nodes = np.flatnonzero(np.diff(A.indptr) > 0)
    if len(nodes) < 3:
        raise ValueError(f"the subgraph has {len(nodes)} nodes with edges; at least 3 are needed")
    sub = A[nodes][:, nodes]
    inv_sqrt = 1.0 / np.sqrt(np.asarray(sub.sum(axis=1)).ravel())
    M = sp.diags(inv_sqrt) @ sub @ sp.diags(inv_sqrt)  # D^-1/2 A D^-1/2, symmetric
    k = max(1, min(int(dim), len(nodes)))
    if len(nodes) <= 2000 or k >= len(nodes) - 1:
        mu, U = np.linalg.eigh(M.toarray())
        mu, U = mu[::-1][:k], U[:, ::-1][:, :k]  # largest first
    else:
        from scipy.sparse.linalg import eigsh

        v0 = np.random.default_rng(seed).uniform(-1.0, 1.0, len(nodes))
        mu, U = eigsh(M, k=k, which="LA", v0=v0)
    vectors = U * inv_sqrt[:, None] * np.clip(mu, 0.0, None) ** int(t)
    return NodeEmbedding(nodes.astype(np.int64), vectors)
