"""The lexical side of search: BM25 (``bm25s``, through
:class:`unifar.evaluation.retrievers.BM25Scorer`, so the tokens, stemming, k1 and b are the
evaluation's) over the title + abstract (``all``) and over each facet's labelled sentences,
saved to and loaded from a folder, and the query terms that matched a document.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation.retrievers import BM25Scorer
from ..evaluation.texts import document_text, facet_text
from ..facets import FACETS

__all__ = ["LEXICAL_FIELDS", "SavedBM25", "field_texts", "build_bm25", "matched_terms"]

#: the BM25 indexes of a search index: the whole text, then one per facet
LEXICAL_FIELDS = ("all", *FACETS)


def field_texts(doc: Mapping[str, Any], field: str) -> str:
    """The text BM25 reads of a document: title + abstract (``all``) or the facet's sentences.

    >>> d = {"title": "T", "sentences": ["a b.", "c d."], "labels": ["method", None]}
    >>> field_texts(d, "all"), field_texts(d, "method"), field_texts(d, "result")
    ('T a b. c d.', 'a b.', '')
    """
    return document_text(doc, " ") if field == "all" else facet_text(doc, field)


class SavedBM25(BM25Scorer):
    """A :class:`BM25Scorer` that can be saved to a folder and read back without re-indexing."""

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the ``bm25s`` index and the document ids (no pickle)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.retriever is not None:  # None: no indexable word (every score 0)
            self.retriever.save(str(d), show_progress=False)
        meta = {"ids": self.pids, "stem": self.stemmer is not None, "empty": self.retriever is None}
        (d / "ids.json").write_text(json.dumps(meta), encoding="utf-8")
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> "SavedBM25":
        """Read a folder written by :meth:`save`."""
        import bm25s

        d = Path(directory)
        meta = json.loads((d / "ids.json").read_text(encoding="utf-8"))
        obj = cls.__new__(cls)  # the attributes BM25Scorer.__init__ sets, from the saved index
        obj._bm25s = bm25s
        obj.pids = list(meta["ids"])
        obj.index_of = {p: i for i, p in enumerate(obj.pids)}
        obj.stemmer = None
        if meta["stem"]:
            import snowballstemmer

            obj.stemmer = snowballstemmer.stemmer("english")
        obj.retriever, obj._vocab = None, {}
        if not meta.get("empty"):
            obj.retriever = bm25s.BM25.load(str(d), show_progress=False)
            obj._vocab = obj.retriever.vocab_dict
        return obj

    def all_scores(self, query: str) -> np.ndarray:
        """BM25 of ``query`` against every document, in index order (float64)."""
        return self.scores(query, self.pids)

    def query_terms(self, query: str) -> list[str]:
        """The query's indexed terms (lower-cased, stop words out, stemmed), once each."""
        words = self._bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stemmer, return_ids=False, show_progress=False
        )[0]
        return [w for w in dict.fromkeys(words) if w in self._vocab]


def build_bm25(
    docs: Sequence[Mapping[str, Any]],
    fields: Sequence[str] = LEXICAL_FIELDS,
) -> dict[str, SavedBM25]:
    """One BM25 index per field over ``docs`` (ids = positions as strings, so a candidate list of
    positions maps straight onto it)."""
    return {f: SavedBM25({str(i): field_texts(d, f) for i, d in enumerate(docs)}) for f in fields}


def matched_terms(scorer: SavedBM25, query: str, position: int) -> list[dict[str, Any]]:
    """The query terms found in document ``position`` and each one's BM25 contribution, largest
    first (they sum to the document's BM25 score)."""
    out = []
    for term in scorer.query_terms(query):
        s = float(scorer.retriever.get_scores([term])[position])
        if s > 0:
            out.append({"term": term, "score": round(s, 4)})
    return sorted(out, key=lambda x: -x["score"])
