"""FLeW's citation graph with intents and its three weighted facet subgraphs (FLeW section 3.1,
eqs. 2-3).

**File format** (one citation context, or a count of them, per row), TSV or JSON lines:

* ``.tsv``/``.txt``: ``citing_id<TAB>cited_id<TAB>intent[<TAB>contexts]``; a first line
  starting with ``citing`` is a header; blank lines and lines starting with ``#`` are skipped.
* ``.jsonl``: ``{"citing": ..., "cited": ..., "intent": ..., "contexts": n}`` (``contexts``
  optional, default 1; ``citing_id``/``cited_id`` are accepted too).

``contexts`` is how many citation contexts of that intent the row stands for (default 1). Rows
repeating the same (citing, cited, facet) add up, so a file of one row per citation sentence
and a file of counted rows give the same graph. ``intent`` is a facet name (``background``,
``method``, ``result`` or ``bg``/``mt``/``rs``) or a label of SciCite, ACL-ARC or MultiCite,
mapped by :data:`unifar.facets.SCICITE_TO_FACET`, :data:`~unifar.facets.ACL_ARC_TO_FACET`
and :data:`~unifar.facets.MULTICITE_TO_FACET` (case ignored: the three schemes never disagree
on a lower-cased label). A label that maps to no facet is skipped and counted; an unknown label,
a missing field, a non-positive count or a self-citation is an error naming file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from ..datasets.readers import iter_lines
from ..facets import ACL_ARC_TO_FACET, FACET_ALIASES, FACETS, MULTICITE_TO_FACET, SCICITE_TO_FACET

__all__ = [
    "INTENT_TO_FACET",
    "intent_facet",
    "CitationEdges",
    "read_citation_edges",
    "facet_weights",
    "FacetGraphs",
    "facet_subgraphs",
]

#: every accepted intent label (lower-cased) -> facet, or None (no facet: the row is skipped)
INTENT_TO_FACET: dict[str, str | None] = {
    **{
        k.lower(): v
        for m in (SCICITE_TO_FACET, ACL_ARC_TO_FACET, MULTICITE_TO_FACET)
        for k, v in m.items()
    },
    **FACET_ALIASES,
}


def intent_facet(label: str) -> str | None:
    """The facet of an intent label of SciCite, ACL-ARC or MultiCite (or a facet name).

    >>> intent_facet("CompareOrContrast"), intent_facet("uses"), intent_facet("bg")
    ('result', 'method', 'background')
    """
    key = str(label).strip().lower()
    if key not in INTENT_TO_FACET:
        raise ValueError(
            f"unknown intent {label!r}; expected a facet or one of {sorted(INTENT_TO_FACET)}"
        )
    return INTENT_TO_FACET[key]


@dataclass
class CitationEdges:
    """Citation rows as arrays: ``citing[i] -> cited[i]`` (node indices), facet index
    ``facet[i]`` (order of :data:`~unifar.facets.FACETS`) and ``contexts[i]`` (a count)."""

    nodes: list[str]
    citing: np.ndarray
    cited: np.ndarray
    facet: np.ndarray
    contexts: np.ndarray
    skipped: int = 0  # rows whose intent maps to no facet

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, str, str, int]], skipped: int = 0
    ) -> "CitationEdges":
        """From ``(citing_id, cited_id, facet, contexts)`` rows; node order = first appearance."""
        index: dict[str, int] = {}
        cols: list[list[int]] = [[], [], [], []]
        for citing, cited, facet, n in rows:
            for col, value in zip(
                cols,
                (
                    index.setdefault(citing, len(index)),
                    index.setdefault(cited, len(index)),
                    FACETS.index(facet),
                    n,
                ),
            ):
                col.append(value)
        arrays = [np.asarray(c, dtype=np.int64) for c in cols]
        return cls(list(index), *arrays, skipped=skipped)


def _parse_row(line: str, jsonl: bool, where: str) -> tuple[str, str, str, int] | None:
    """One row -> ``(citing, cited, intent label, contexts)``; ``None`` for a header/comment."""
    if jsonl:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: malformed JSON ({err.msg})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected a JSON object")
        fields = [
            rec.get("citing", rec.get("citing_id")),
            rec.get("cited", rec.get("cited_id")),
            rec.get("intent"),
            rec.get("contexts", 1),
        ]
    else:
        if line.startswith("#") or line.lower().startswith("citing"):
            return None
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) not in (3, 4):
            raise ValueError(
                f"{where}: expected 3 or 4 tab-separated fields "
                f"(citing_id, cited_id, intent[, contexts]), got {len(fields)}"
            )
        fields = fields + ["1"] * (4 - len(fields))
    names = ("citing", "cited", "intent")
    for name, value in zip(names, fields):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: field {name!r} missing or not a non-empty string")
    try:
        n = int(fields[3])
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: field 'contexts' must be an integer, got {fields[3]!r}"
        ) from None
    if n < 1:
        raise ValueError(f"{where}: field 'contexts' must be >= 1, got {n}")
    citing, cited = fields[0].strip(), fields[1].strip()
    if citing == cited:
        raise ValueError(f"{where}: paper {citing!r} cites itself")
    return citing, cited, fields[2].strip(), n


def read_citation_edges(path: str | Path) -> CitationEdges:
    """Read a citation file with intents (module docstring) into :class:`CitationEdges`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"citation edge file not found: {path}")
    jsonl = path.suffix.lower() in (".jsonl", ".json")
    rows: list[tuple[str, str, str, int]] = []
    skipped = 0
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        row = _parse_row(line, jsonl, where)
        if row is None:
            continue
        try:
            facet = intent_facet(row[2])
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if facet is None:
            skipped += 1
            continue
        rows.append((row[0], row[1], facet, row[3]))
    if not rows:
        raise ValueError(f"{path}: no citation edge with a facet intent")
    return CitationEdges.from_rows(rows, skipped)


def facet_weights(
    citing: np.ndarray, cited: np.ndarray, contexts: np.ndarray, n_nodes: int
) -> sp.csr_matrix:
    r"""FLeW eq. 3: the weighted adjacency of one facet subgraph,
    :math:`\mathcal{W}_x(e) = |\mathcal{C}_x(e)|`, the number of citation contexts of intent
    :math:`x` on the edge :math:`e` = (citing, cited).

    ``citing``, ``cited`` [E] node indices of the rows of facet :math:`x` (eq. 2's
    :math:`\mathcal{E}_x`), ``contexts`` [E] how many contexts each row stands for. Returns the
    directed ``[n_nodes, n_nodes]`` matrix ``W[citing, cited]``; repeated rows add up. FLeW
    section 3.1.

    >>> W = facet_weights(np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([1, 2, 1]), 3)
    >>> W.toarray().tolist()
    [[0, 3, 0], [0, 0, 1], [0, 0, 0]]
    """
    W = sp.coo_matrix(
        (np.asarray(contexts), (np.asarray(citing), np.asarray(cited))), shape=(n_nodes, n_nodes)
    )
    return W.tocsr()  # COO -> CSR sums duplicate (citing, cited) entries: |C_x(e)| over rows


@dataclass
class FacetGraphs:
    """The three weighted facet subgraphs :math:`\\mathcal{G}^W_x` over one node list (eq. 3)."""

    nodes: list[str]
    weights: dict[str, sp.csr_matrix] = field(default_factory=dict)  # facet -> directed W_x

    def index(self, ids: Sequence[str]) -> np.ndarray:
        """Node indices of paper ids (a clear error for an unknown id)."""
        pos = {n: i for i, n in enumerate(self.nodes)}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise KeyError(f"papers not in the citation graph: {missing[:5]}")
        return np.asarray([pos[i] for i in ids], dtype=np.int64)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per facet: edges, citation contexts and nodes with at least one edge."""
        out = {}
        for f, W in self.weights.items():
            sym = W + W.T
            out[f] = {
                "edges": int(W.nnz),
                "contexts": int(W.sum()),
                "nodes": int((np.diff(sym.indptr) > 0).sum()),
            }
        return out


def facet_subgraphs(edges: CitationEdges) -> FacetGraphs:
    """Split the citation graph by intent (eq. 2) and weight each subgraph (eq. 3)."""
    n = len(edges.nodes)
    graphs = FacetGraphs(list(edges.nodes))
    for k, f in enumerate(FACETS):
        sel = edges.facet == k
        graphs.weights[f] = facet_weights(
            edges.citing[sel], edges.cited[sel], edges.contexts[sel], n
        )
    return graphs
