"""The text each system reads of a document: title + abstract, or one facet's sentences.

One builder for every system and benchmark (BM25, mean pooling, the facet-restricted query,
the mining encoder of :mod:`unifar.construction.mining`):

* :func:`document_text`: ``title + sep + " ".join(sentences)``; the abstract alone when the
  title is empty (PubMedQA). ``sep`` is the tokenizer's separator for an encoder (``[SEP]``,
  ``</s>``) and a space for BM25.
* :func:`facet_text`: the sentences whose label is (or, through ``facet_of``, maps to) the
  facet, joined by spaces (``""`` when there are none).
* :func:`facet_query_text`: a CSFCube query paper reduced to its title + one facet's sentences
  (Aspire's faceted query, Mysore et al., 2022); background = background + objective.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..facets import FACETS, facet_of_csfcube_label

__all__ = ["document_text", "facet_text", "facet_query_text"]


def document_text(doc: Mapping[str, Any], sep: str) -> str:
    """``title + sep + abstract``, or the abstract alone when the title is empty. The abstract is
    the document's ``sentences`` joined, or its ``abstract`` string when it has no sentences (a
    document given as title + abstract is never reduced to its title).

    >>> document_text({"title": "T", "sentences": ["A.", "B."]}, "[SEP]")
    'T[SEP]A. B.'
    >>> document_text({"title": "", "sentences": ["A.", "B."]}, "[SEP]")
    'A. B.'
    >>> document_text({"title": "T", "abstract": " A. B. "}, " ")
    'T A. B.'
    """
    abstract = " ".join(doc.get("sentences") or []) or str(doc.get("abstract") or "").strip()
    title = doc.get("title") or ""
    return f"{title}{sep}{abstract}" if title else abstract


def facet_text(doc: Mapping[str, Any], facet: str, facet_of: Callable[[Any], str | None] | None = None) -> str:
    """The document's sentences labelled ``facet``, joined (``''`` when none); ``facet_of`` maps
    a sentence label to its facet (default: the labels are facet names already).

    >>> facet_text({"sentences": ["A b.", "C d."], "labels": ["method", "result"]}, "result")
    'C d.'
    >>> facet_text({"sentences": ["a", "b"], "labels": ["objective_label", "background_label"]},
    ...            "background", facet_of_csfcube_label)
    'a b'
    """
    labels = doc.get("labels") or [None] * len(doc["sentences"])
    if facet_of is not None:
        labels = [facet_of(lab) for lab in labels]
    return " ".join(s for s, lab in zip(doc["sentences"], labels) if lab == facet)


def facet_query_text(paper: Mapping[str, Any], facet: str, sep: str, title: bool = True) -> str:
    """Title + only the CSFCube sentences labelled with ``facet`` (background = background +
    objective); with ``title=False`` the facet's sentences alone.

    >>> p = {"title": "T", "sentences": ["a", "b", "c"],
    ...      "labels": ["objective_label", "method_label", "background_label"]}
    >>> facet_query_text(p, "background", "[SEP]"), facet_query_text(p, "method", "[SEP]", title=False)
    ('T[SEP]a c', 'b')
    """
    if facet not in FACETS:
        raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS}")
    kept = facet_text(paper, facet, facet_of_csfcube_label)
    return f"{paper['title']}{sep}{kept}" if title else kept
