"""Facet-BM25 on the sentence labels of chapter 2's labeller instead of the labels CSFCube ships:
the lexical part of the ``hybrid-mean-labeller`` system (:mod:`unifar.evaluation.hybrid`), i.e.
what a user's own corpus, which has no sentence labels, gets.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..facets import facet_of_csfcube_label
from ..files import public_path, sha256_file
from .retrievers import FacetBM25Retriever, ScoreFn, cached

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube

__all__ = ["LabelledFacetBM25Retriever"]

#: the CSFCube sentence label that stands for each facet a labeller predicts (None: no facet)
_CSFCUBE_LABEL = {
    "background": "background_label",
    "method": "method_label",
    "result": "result_label",
}


class LabelledFacetBM25Retriever(FacetBM25Retriever):
    """Facet-BM25 (:class:`~unifar.evaluation.retrievers.FacetBM25Retriever`) on the sentence
    labels of chapter 2's labeller (:class:`unifar.rhetoric.labeller.FacetLabeller`, a saved
    folder) instead of the labels CSFCube ships: what a user's own corpus gets. The labels of the
    collection are stored in ``cache_dir`` (keyed by the labeller's files and the texts) and reused.
    """

    def __init__(
        self,
        labeller_dir: str | os.PathLike[str],
        cache_dir: str | os.PathLike[str] | None = None,
        stem: bool = True,
        name: str = "facet-bm25-labeller",
    ) -> None:
        super().__init__(stem=stem, name=name)
        self.labeller_dir = Path(labeller_dir)
        if not (self.labeller_dir / "labeller.json").is_file():
            raise FileNotFoundError(
                f"labeller={str(labeller_dir)!r}: no labeller.json there; the labeller systems "
                "need chapter 2's "
                "saved sentence labeller, e.g. artifacts/ch02/full/labeller (run chapter 2 first)"
            )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

        digest = hashlib.sha256()  # the labeller's files name its cached labels
        for f in sorted(p for p in self.labeller_dir.rglob("*") if p.is_file()):
            digest.update(f"{f.relative_to(self.labeller_dir)}:{sha256_file(f)}".encode())
        self.digest = digest.hexdigest()[:24]
        self.label = "facet-BM25 (labeller's sentence labels)"
        self.agreement: float | None = None

    @property
    def index_key(self) -> str:
        return f"{super().index_key}:labeller={self.digest}"

    def labels(self, papers: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str | None]]:
        """The labeller's facet (or None) for every sentence of ``papers`` ``{pid: paper}``."""
        texts = hashlib.sha256(
            json.dumps([[p, papers[p]["sentences"]] for p in sorted(papers)]).encode()
        )
        path = (
            (self.cache_dir / f"labels-{self.digest}-{texts.hexdigest()[:16]}.json")
            if self.cache_dir
            else None
        )
        if path is not None and path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        from ..rhetoric.labeller import FacetLabeller

        pids = sorted(papers)
        labeller = FacetLabeller.load(self.labeller_dir, device="cpu")
        out = dict(zip(pids, labeller.label_documents([papers[p] for p in pids])))
        if path is not None:
            from ..caching import save_cache_file

            save_cache_file(path, lambda tmp: tmp.write_text(json.dumps(out, indent=0), encoding="utf-8"),
                            "sentence-label cache")
        return out

    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """Facet-BM25 of a copy of ``data`` whose sentence labels are the labeller's."""
        def relabel() -> CSFCube:
            pids = data.pool_pids()
            predicted = self.labels({p: data.papers[p] for p in pids})
            papers = {
                p: {
                    **data.papers[p],
                    "labels": [_CSFCUBE_LABEL.get(f, "other_label") for f in predicted[p]],
                }
                for p in pids
            }
            gold = [facet_of_csfcube_label(g) for p in pids for g in data.papers[p]["labels"]]
            both = [
                (g, f)
                for g, f in zip(gold, (f for p in pids for f in predicted[p]))
                if g is not None
            ]
            self.agreement = round(100.0 * sum(g == f for g, f in both) / max(len(both), 1), 2)
            return type(data)(papers, data.anns, data.splits, data.queries, data.root)

        return super().csfcube_score_fn(
            cached(cache, (f"{self.index_key}:data", "csfcube"), relabel), cache
        )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "labeller": public_path(self.labeller_dir),
            "labeller_sha256": self.digest,
            "agreement_with_csfcube_labels_percent": self.agreement,
        }
