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
  0.25 was chosen on CSFCube fold1_dev. Every hybrid of unifar writes its weight this way (the
  evaluation runner's, :mod:`unifar.evaluation.hybrid`, included).

On disk an index is an encoding folder (:mod:`unifar.search.encode`) plus ``index/``
(``index.json``, FAISS files, BM25 folders), each written atomically under the folder's lock;
:meth:`Index.load` checks every file against the digests its writer recorded and that ``index/``
was built from the encoding beside it (:mod:`unifar.search.folder`).
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..facets import FACETS, normalise_facet
from ..files import atomic_dir, file_digests, write_json
from ..scoring import zscore_fusion
from .corpus import check_documents
from .encode import label_documents, read_encoding, shares_pass, write_encoding
from .explain import explain
from .folder import (CHUNKS, DOCUMENTS, INDEX_DIR, INDEX_JSON, MANIFEST, clear, read_index_meta,
                     read_manifest, verify_index, writing)
from .lexical import LEXICAL_FIELDS, SavedBM25, build_bm25, field_texts
from .models import load_model, model_digest, model_facts
from .vectors import VectorIndex

if TYPE_CHECKING:
    from ..model import UniFAR
    from ..rhetoric.context_labeller import InContextLabeller
    from ..rhetoric.labeller import FacetLabeller

__all__ = ["Index", "Hit", "INDEX_DIR", "check_search_options"]

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


def _whole(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_search_options(k: Any, hybrid: Any = None, depth: Any = 100,
                         names: Sequence[str] = ("k", "hybrid", "depth")) -> None:
    """Refuse, naming the option (``names``: the CLI passes ``-k``, ``--hybrid``, ``--depth``),
    a ``k`` or ``depth`` that is not a whole number >= 1 and a ``hybrid`` weight that is not a
    finite number >= 0 (None: dense only).

    >>> check_search_options(10, 0.25, 100)
    >>> check_search_options(10, float("nan"), 100, names=("-k", "--hybrid", "--depth"))
    Traceback (most recent call last):
    ...
    ValueError: --hybrid must be a finite number >= 0 (or none: dense only), got nan
    """
    for value, name in ((k, names[0]), (depth, names[2])):
        if not _whole(value) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if hybrid is not None and not (
        isinstance(hybrid, (int, float, np.number)) and not isinstance(hybrid, bool)
        and math.isfinite(hybrid) and hybrid >= 0
    ):
        raise ValueError(f"{names[1]} must be a finite number >= 0 (or none: dense only), got {hybrid!r}")


class Index:
    """Facet-aware search over papers (module docstring).

    ``model``: a :class:`unifar.UniFAR`, a checkpoint folder or a base encoder name. ``labeller``:
    labels the sentences of papers given without ``labels`` (facet BM25); ``use_labels=False``
    drops all labels (dense search, BM25 over the whole text only).
    """

    def __init__(
        self,
        model: UniFAR | str | os.PathLike[str] | None = None,
        *,
        labeller: FacetLabeller | InContextLabeller | None = None,
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
        self.encoding_id: str | None = None  # of the encoding on disk it was read from or saved as

    # ------------------------------------------------------------------ the model
    @property
    def model(self) -> UniFAR:
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

    def position(self, paper_id: str | int, option: str = "like") -> int:
        """Row of ``paper_id`` (a string, or an integer as :meth:`add` accepts it); a clear
        error when the index lacks it."""
        if _whole(paper_id):
            paper_id = str(paper_id)  # add() keeps integer ids as their decimal strings
        elif not isinstance(paper_id, str):
            raise ValueError(f"{option}: a paper id is a string or an integer, got {paper_id!r}")
        if not hasattr(self, "_pos") or len(self._pos) != len(self.documents):
            self._pos = {p: i for i, p in enumerate(self.ids)}
        if paper_id not in self._pos:
            raise KeyError(f"{option}: no paper {paper_id!r} in the index ({len(self)} papers)")
        return self._pos[paper_id]

    # ------------------------------------------------------------------ building
    def add(self, documents: Sequence[Mapping[str, Any]]) -> "Index":
        """Check, label and encode papers (``{"id", "title", "abstract" or "sentences"}``)."""
        if self._model is None and (self.facts or {}).get("spec") is None:
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
        labeller = self.labeller if self.use_labels else None
        shared = shares_pass(labeller, self.model)  # labels from the pass that encodes
        enc = self.model.encode_documents(
            docs, batch_size=self.batch_size, show_progress=False, bf16=self.bf16,
            sentence_states=shared,
        )
        for d, labels in zip(docs, label_documents(docs, labeller, enc if shared else None,
                                                   self.model)):
            d["labels"] = labels
        self.documents += docs
        self.embeddings = (
            torch.cat([self.embeddings.reshape(-1, *enc.embeddings.shape[1:]), enc.embeddings])
            if len(self.embeddings)
            else enc.embeddings
        )
        self.facts = self.facts or model_facts(self.model, self.spec)
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
    def _write_index(self, folder: Path, encoding_id: str) -> None:
        for name, vi in self.vectors.items():
            vi.save(folder / f"vectors-{name}.faiss")
        for name, scorer in self.bm25.items():
            scorer.save(folder / f"bm25-{name}")
        files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
        write_json(
            folder / INDEX_JSON,
            {
                "format": INDEX_FORMAT,
                "encoding_id": encoding_id,  # what it was built from (unifar.search.folder)
                "backend": self.backend,
                "documents": len(self),
                "model_digest": self.facts["digest"] if self.facts else None,
                "params": {n: v.params for n, v in self.vectors.items()},
                "lexical_fields": list(self.bm25),
                "files": file_digests(folder, files),
            },
        )

    def save_index(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``directory/index`` (atomically, under the folder's lock) for the encoding in
        ``directory``, which must be the one this index was read from."""
        if not self.vectors:
            self.build(self.backend)
        with writing(directory, "DIR") as folder:
            found = read_manifest(folder).get("encoding_id")
            if found is None or found != self.encoding_id:
                raise ValueError(f"{folder}: holds another encoding than the one this index was read "
                                 "from (encoded again since?); read it again (Index.from_encoding)")
            return atomic_dir(folder / INDEX_DIR, lambda tmp: self._write_index(tmp, found))

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the whole index (encoding and ``index/``) to ``directory``: a new or empty folder
        or one of unifar's; only unifar's entries in it are replaced (:mod:`unifar.search.folder`)."""
        if not self.vectors:
            self.build(self.backend)
        with writing(directory, "Index.save:") as folder:
            tmp = folder / f".tmp-save-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            try:
                manifest = write_encoding(tmp, self.documents, self.embeddings, self.facts,
                                          self.label_source)
                (tmp / INDEX_DIR).mkdir()
                self._write_index(tmp / INDEX_DIR, manifest["encoding_id"])
                clear(folder, keep=tmp.name)  # the manifest goes first and comes back last
                for name in (CHUNKS, DOCUMENTS, INDEX_DIR, MANIFEST):
                    os.replace(tmp / name, folder / name)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            self.folder, self.encoding_id = folder, manifest["encoding_id"]
        return folder

    @classmethod
    def from_encoding(
        cls,
        directory: str | os.PathLike[str],
        model: UniFAR | str | os.PathLike[str] | None = None,
        device: str | None = None,
        check: bool = True,
    ) -> "Index":
        """An index over an encoding folder (``unifar encode``), not built yet; ``model`` (spec or
        UniFAR) must be the one it was encoded with."""
        enc = read_encoding(directory, check=check)
        obj = cls(None, device=device)
        obj.folder, obj.encoding_id = Path(directory), enc.manifest["encoding_id"]
        obj.documents, obj.embeddings = enc.documents, enc.embeddings
        obj.facts, obj.label_source = enc.manifest["model"], enc.manifest["labels"]["source"]
        obj.use_labels = obj.label_source != "none"  # add() then labels new papers the same way
        if model is not None:
            obj.spec = str(model) if isinstance(model, (str, os.PathLike)) else None
            obj._model = load_model(obj.spec, device) if obj.spec is not None else model
            obj._check_model(f"model {obj.spec or type(model).__name__}")
        return obj

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        model: UniFAR | str | os.PathLike[str] | None = None,
        device: str | None = None,
        check: bool = True,
    ) -> "Index":
        """Read an index written by :meth:`save` or ``unifar encode`` + ``unifar index``. Every
        file is checked against its recorded size and (``check``, the default) SHA-256, and the
        index against the encoding it was built from: a damaged or stale part is an error."""
        folder = Path(directory)
        verify_index(folder, read_manifest(folder), check)  # before reading anything big
        obj = cls.from_encoding(directory, model, device, check=check)
        meta = read_index_meta(folder)
        if meta["encoding_id"] != obj.encoding_id:  # encoded again while it was being read
            raise ValueError(f"{folder} changed while it was read (encoded again?): load it again")
        folder = folder / INDEX_DIR
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
        embedding: torch.Tensor | None = None,
    ) -> list[Hit]:
        """The ``k`` best papers for a question or a paper (module docstring); ``embedding``:
        the question's facet embeddings [F, h] when already computed (``unifar serve`` reuses
        them for the facet scores)."""
        check_search_options(k, hybrid, depth)
        field = _field(facet)
        if not self.vectors:
            self.build(self.backend)
        if hybrid is not None and field not in self.bm25:
            raise ValueError(
                f"hybrid search on facet {field!r} needs sentence labels, and this "
                "index has none (encode with labels or a labeller)"
            )
        qe = embedding if embedding is not None and like is None else self.query_embedding(query, like)
        vec = qe.reshape(-1) if field == "all" else qe[FACETS.index(field)]
        scale = 1.0 / len(FACETS) if field == "all" else 1.0
        self_pos = self.position(like) if like is not None else -1
        want = k + (like is not None)
        scores, idx = self.vectors[field].search(vec[None], max(want, depth) if hybrid else want)
        keep = (idx[0] >= 0) & (idx[0] != self_pos)
        dense, idx = scores[0][keep].astype(np.float64) * scale, idx[0][keep]
        lexical, final = None, dense
        if hybrid is not None:
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
        return explain(self, query, doc_id, like=like, top=top)
