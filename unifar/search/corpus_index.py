"""The search index over a corpus: UniFAR facet embeddings, vector indexes and BM25 per facet.

``Index(model).add(papers)`` encodes papers; :meth:`Index.build` makes a vector index for each
facet and one over the concatenated facets (the diagonal mean, :func:`unifar.scoring.qdoc_scores`)
plus BM25 over the title + abstract and over each facet's sentences; :meth:`Index.search` answers

* a question -> papers: ``mean_f cos(q_f, d_f)`` (``facet="all"``) or ``cos(q_f, d_f)`` for one
  facet, the question encoded by ``UniFAR.encode_questions``;
* a paper -> papers (``like=ID``): ``M(f, f)`` of the facet similarity matrix for one facet, its
  diagonal mean for ``all``; the paper itself is left out;
* with ``hybrid=W``: the ``depth`` best by the dense score reranked by
  ``z(dense) + W z(BM25)`` (:func:`unifar.scoring.zscore_fusion`; the BM25 of the facet's
  sentences, or of the whole text for ``all``), the mining teacher of chapter 3, whose weight
  0.25 was chosen on CSFCube fold1_dev. The evaluation runner's hybrids
  (:mod:`unifar.evaluation.hybrid`) weight the same two z-scores ``(1 - V, V)``, which ranks
  as ``W = V / (1 - V)``.

On disk an index is an encoding folder (:mod:`unifar.search.encode`) plus ``index/``
(``index.json``, FAISS files, BM25 folders), each written atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..facets import FACETS, normalise_facet
from ..files import atomic_dir, write_json
from .corpus import check_documents
from .encode import (
    label_documents,
    load_model,
    model_digest,
    model_facts,
    read_encoding,
    write_encoding,
)
from .lexical import LEXICAL_FIELDS, SavedBM25, build_bm25, field_texts
from .vectors import VectorIndex

__all__ = ["Index", "Hit", "INDEX_DIR"]

INDEX_DIR = "index"
INDEX_FORMAT = "unifar-search-index"


@dataclass
class Hit:
    """One result: rank (1 = best), paper id and title, the score it was ranked by, the dense
    score and (with ``hybrid``) the BM25 score."""

    rank: int
    id: str
    title: str
    score: float
    dense: float
    bm25: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _field(facet: str) -> str:
    return "all" if str(facet).strip().lower() == "all" else normalise_facet(facet)


class Index:
    """Facet-aware search over papers (module docstring).

    ``model``: a :class:`unifar.UniFAR`, a checkpoint folder or a base encoder name. ``labeller``:
    labels the sentences of papers given without ``labels`` (facet BM25); ``use_labels=False``
    drops all labels (dense search, BM25 over the whole text only).
    """

    def __init__(
        self,
        model: Any = None,
        *,
        labeller: Any = None,
        use_labels: bool = True,
        batch_size: int = 32,
        bf16: bool | None = None,
        device: str | None = None,
    ) -> None:
        self.spec = str(model) if isinstance(model, (str, os.PathLike)) else None
        self.device = device
        self._model = load_model(self.spec, device) if self.spec is not None else model
        self._digest: str | None = None
        self.labeller, self.use_labels = labeller, use_labels
        self.batch_size, self.bf16 = batch_size, bf16
        self.documents: list[dict[str, Any]] = []
        self.embeddings = torch.empty(0)
        self.facts: dict[str, Any] | None = None
        self.label_source = "none" if not use_labels else "corpus"
        self.vectors: dict[str, VectorIndex] = {}
        self.bm25: dict[str, SavedBM25] = {}
        self.backend = "exact"
        self.folder: Path | None = None

    # ------------------------------------------------------------------ the model
    @property
    def model(self) -> Any:
        """The query encoder (loaded on first use from the spec the index was built with)."""
        if self._model is None:
            spec = (self.facts or {}).get("spec")
            if spec is None:
                raise ValueError("this index records no model to encode queries with; pass model=")
            self._model = load_model(spec, self.device)
            self._check_model("the recorded model " + spec)
        return self._model

    def _check_model(self, what: str) -> None:
        if self.facts is None or self._model is None:
            return
        digest = model_digest(self._model)
        if digest != self.facts["digest"]:
            where = self.folder / "manifest.json" if self.folder else "this index"
            raise ValueError(
                f"{what} (weights digest {digest}) is not the model the index was "
                f"built with ({self.facts['spec']}, digest {self.facts['digest']}, "
                f"{where}); encode the corpus again with it, or query with that model"
            )

    @property
    def ids(self) -> list[str]:
        return [d["id"] for d in self.documents]

    def __len__(self) -> int:
        return len(self.documents)

    def position(self, paper_id: str, option: str = "like") -> int:
        """Row of ``paper_id``; a clear error when the index lacks it."""
        if not hasattr(self, "_pos") or len(self._pos) != len(self.documents):
            self._pos = {p: i for i, p in enumerate(self.ids)}
        if paper_id not in self._pos:
            raise KeyError(f"{option}: no paper {paper_id!r} in the index ({len(self)} papers)")
        return self._pos[paper_id]

    # ------------------------------------------------------------------ building
    def add(self, documents: Sequence[Mapping[str, Any]]) -> "Index":
        """Check, label and encode papers (``{"id", "title", "abstract" or "sentences"}``)."""
        if self._model is None:
            raise ValueError("Index.add needs a model: Index(model=...)")
        docs = check_documents(documents, taken=self.ids)
        if not self.use_labels:
            for d in docs:
                d["labels"] = None
        elif any(d["labels"] is None for d in docs):
            if self.labeller is None:
                first = next(d["id"] for d in docs if d["labels"] is None)
                raise ValueError(
                    f"paper {first!r} has no sentence labels: pass labeller= "
                    "(unifar.search.encode.load_labeller) or use_labels=False"
                )
            self.label_source = "labeller"
        if not docs:
            return self
        for d, labels in zip(
            docs, label_documents(docs, self.labeller if self.use_labels else None)
        ):
            d["labels"] = labels
        enc = self._model.encode_documents(
            docs, batch_size=self.batch_size, show_progress=False, bf16=self.bf16
        )
        self.documents += docs
        self.embeddings = (
            torch.cat([self.embeddings.reshape(-1, *enc.embeddings.shape[1:]), enc.embeddings])
            if len(self.embeddings)
            else enc.embeddings
        )
        self.facts = self.facts or model_facts(self._model, self.spec)
        self.vectors, self.bm25 = {}, {}  # stale: rebuilt by build()
        return self

    def lexical_fields(self) -> tuple[str, ...]:
        return LEXICAL_FIELDS if self.label_source != "none" else ("all",)

    def build(self, backend: str = "exact", **params: Any) -> "Index":
        """Vector indexes (``all`` and each facet; :class:`~unifar.search.vectors.VectorIndex`
        ``backend`` and ``params``) and the BM25 indexes."""
        if not self.documents:
            raise ValueError("the index is empty: add papers first")
        e = self.embeddings
        self.vectors = {"all": VectorIndex(e.reshape(len(e), -1), backend, **params)}
        self.vectors.update(
            {f: VectorIndex(e[:, i], backend, **params) for i, f in enumerate(FACETS)}
        )
        self.backend = self.vectors["all"].backend
        self.bm25 = build_bm25(self.documents, self.lexical_fields())
        return self

    # ------------------------------------------------------------------ persistence
    def _write_index(self, folder: Path) -> None:
        for name, vi in self.vectors.items():
            vi.save(folder / f"vectors-{name}.faiss")
        for name, scorer in self.bm25.items():
            scorer.save(folder / f"bm25-{name}")
        write_json(
            folder / "index.json",
            {
                "format": INDEX_FORMAT,
                "backend": self.backend,
                "documents": len(self),
                "model_digest": self.facts["digest"] if self.facts else None,
                "params": {n: v.params for n, v in self.vectors.items()},
                "lexical_fields": list(self.bm25),
            },
        )

    def save_index(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``directory/index`` (atomically) for the encoding already in ``directory``."""
        if not self.vectors:
            self.build(self.backend)
        return atomic_dir(Path(directory) / INDEX_DIR, self._write_index)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the whole index (encoding and ``index/``) to ``directory``, atomically."""
        if not self.vectors:
            self.build(self.backend)

        def write(tmp: Path) -> None:
            write_encoding(tmp, self.documents, self.embeddings, self.facts, self.label_source)
            (tmp / INDEX_DIR).mkdir()
            self._write_index(tmp / INDEX_DIR)

        return atomic_dir(directory, write)

    @classmethod
    def from_encoding(
        cls,
        directory: str | os.PathLike[str],
        model: Any = None,
        device: str | None = None,
        check: bool = True,
    ) -> "Index":
        """An index over an encoding folder (``unifar encode``), not built yet; ``model`` (spec or
        UniFAR) must be the one it was encoded with."""
        enc = read_encoding(directory, check=check)
        obj = cls(None, device=device)
        obj.folder = Path(directory)
        obj.documents, obj.embeddings = enc.documents, enc.embeddings
        obj.facts, obj.label_source = enc.manifest["model"], enc.manifest["labels"]["source"]
        if model is not None:
            obj.spec = str(model) if isinstance(model, (str, os.PathLike)) else None
            obj._model = load_model(obj.spec, device) if obj.spec is not None else model
            obj._check_model(f"model {obj.spec or type(model).__name__}")
        return obj

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], model: Any = None, device: str | None = None
    ) -> "Index":
        """Read an index written by :meth:`save` or ``unifar encode`` + ``unifar index``."""
        obj = cls.from_encoding(directory, model, device, check=False)
        folder = Path(directory) / INDEX_DIR
        if not (folder / "index.json").is_file():
            raise FileNotFoundError(f"{directory} has no index yet: run `unifar index {directory}`")
        meta = json.loads((folder / "index.json").read_text(encoding="utf-8"))
        if meta.get("documents") != len(obj) or meta.get("model_digest") != obj.facts["digest"]:
            raise ValueError(
                f"{folder / 'index.json'} does not match the encoding in {directory} "
                f"(encoded again since?): run `unifar index {directory}` again"
            )
        e = obj.embeddings
        rows = {"all": e.reshape(len(e), -1), **{f: e[:, i] for i, f in enumerate(FACETS)}}
        obj.backend = meta["backend"]
        obj.vectors = {
            n: VectorIndex.load(
                folder / f"vectors-{n}.faiss", rows[n], meta["backend"], meta["params"][n]
            )
            for n in rows
        }
        obj.bm25 = {n: SavedBM25.load(folder / f"bm25-{n}") for n in meta["lexical_fields"]}
        return obj

    # ------------------------------------------------------------------ querying
    def query_embedding(self, query: str | None, like: str | None) -> torch.Tensor:
        """Facet embeddings [F, h] of a question (encoded) or of an indexed paper (stored)."""
        if (query is None) == (like is None):
            raise ValueError("give either a question or like=PAPER_ID (not both)")
        if like is not None:
            return self.embeddings[self.position(like)]
        if not isinstance(query, str) or not query.strip():
            raise ValueError("the query is empty: give a question, or like=PAPER_ID")
        return self.model.encode_questions([query.strip()], show_progress=False).embeddings[0]

    def search(
        self,
        query: str | None = None,
        *,
        like: str | None = None,
        facet: str = "all",
        k: int = 10,
        hybrid: float | None = None,
        depth: int = 100,
    ) -> list[Hit]:
        """The ``k`` best papers for a question or a paper (module docstring)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        field = _field(facet)
        if not self.vectors:
            self.build(self.backend)
        if hybrid is not None and field not in self.bm25:
            raise ValueError(
                f"hybrid search on facet {field!r} needs sentence labels, and this "
                "index has none (encode with labels or a labeller)"
            )
        qe = self.query_embedding(query, like)
        vec = qe.reshape(-1) if field == "all" else qe[FACETS.index(field)]
        scale = 1.0 / len(FACETS) if field == "all" else 1.0
        self_pos = self.position(like) if like is not None else -1
        want = k + (like is not None)
        scores, idx = self.vectors[field].search(vec[None], max(want, depth) if hybrid else want)
        keep = (idx[0] >= 0) & (idx[0] != self_pos)
        dense, idx = scores[0][keep].astype(np.float64) * scale, idx[0][keep]
        lexical, final = None, dense
        if hybrid is not None:
            from ..scoring import zscore_fusion

            text = query if like is None else field_texts(self.documents[self_pos], field)
            lexical = self.bm25[field].scores(text, [str(i) for i in idx])
            final = zscore_fusion([dense, lexical], [1.0, hybrid])
        order = np.argsort(-final, kind="stable")[:k]
        return [
            Hit(
                rank=r + 1,
                id=self.documents[idx[j]]["id"],
                title=self.documents[idx[j]]["title"],
                score=float(final[j]),
                dense=float(dense[j]),
                bm25=float(lexical[j]) if lexical is not None else None,
            )
            for r, j in enumerate(order)
        ]

    def explain(
        self, query: str | None, doc_id: str, *, like: str | None = None, top: int = 3
    ) -> dict[str, Any]:
        """Why ``doc_id`` matches: :func:`unifar.search.explain.explain`."""
        from .explain import explain

        return explain(self, query, doc_id, like=like, top=top)
