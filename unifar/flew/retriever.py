"""FLeW as a system of the evaluation runner (:func:`unifar.evaluation.runner.evaluate_all`).

* CSFCube (doc-doc), as UniFAR's table 2 reports FLeW: the queried facet ``x`` is ranked by
  FLeW-``x`` alone, the cosine of the query paper's and each candidate's ``title [SEP] abstract``
  under that facet's encoder (``csfcube="facet"``); or, as a measured variant, by the weighted
  embedding of eq. 8 with the weights chosen on fold1_dev (``csfcube="weighted"``).
* q-doc: the question and each document as the weighted embedding of eq. 8
  (:func:`~unifar.flew.inference.weighted_embedding`) of the three facet embeddings, L2-normalised,
  cosine. The weights are chosen per benchmark on its dev half
  (:func:`unifar.evaluation.tuning.qdoc_dev_half`) from :func:`~unifar.flew.inference.weight_grid`
  (section 3.4's grid search); a benchmark without a dev half gets equal weights.

The choices and their dev curves are recorded in :meth:`FLeWRetriever.describe`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..bi_encoder import BiEncoder
from ..caching import TokenStateCache
from ..evaluation.tuning import choose_on_csfcube_dev, choose_on_qdoc_dev, qdoc_dev_half
from ..evaluation.retrievers import Retriever, ScoreFn, cached
from ..facets import FACETS
from .inference import facet_embeddings, per_facet, weight_grid, weighted_embedding

if TYPE_CHECKING:
    from ..datasets.csfcube import CSFCube
    from ..evaluation.benchmarks import LoadedBenchmark

__all__ = ["FLeWRetriever", "CSFCUBE_MODES"]

#: how CSFCube's facet queries are ranked (module docstring)
CSFCUBE_MODES = ("facet", "weighted")
EQUAL = tuple(round(1 / len(FACETS), 10) for _ in FACETS)


class FLeWRetriever(Retriever):
    """The three facet encoders of :func:`unifar.flew.training.train_facet_encoders` as one
    system (module docstring). ``weights``: fixed eq. 8 weights (no tuning), or None to choose
    them on each benchmark's dev split with grid ``step``. ``state_cache``: the frozen lower
    layers' states shared by encoders that train only their top layers. ``qdoc=False`` leaves
    the q-doc benchmarks out (a CSFCube-only variant of a system evaluated beside it)."""

    def __init__(
        self,
        encoders: Mapping[str, BiEncoder],
        name: str = "flew",
        label: str | None = None,
        csfcube: str = "facet",
        weights: Sequence[float] | None = None,
        step: float = 0.1,
        batch_size: int = 32,
        state_cache: TokenStateCache | None = None,
        qdoc: bool = True,
    ) -> None:
        missing = [f for f in FACETS if f not in encoders]
        if missing:
            raise ValueError(f"FLeW needs one encoder per facet; missing {missing}")
        if csfcube not in CSFCUBE_MODES:
            raise ValueError(f"csfcube must be one of {CSFCUBE_MODES}, got {csfcube!r}")
        if weights is not None:
            weighted_embedding(torch.zeros(len(FACETS), 1), weights)  # checks the constraints
        self.encoders = {f: encoders[f] for f in FACETS}
        pooling = {e.config.pooling for e in self.encoders.values()}
        self.name, self.csfcube, self.step, self.batch_size = name, csfcube, step, batch_size
        self.label = label or f"FLeW ({'/'.join(sorted(pooling))} pooling, {csfcube} on CSFCube)"
        self.weights = tuple(weights) if weights is not None else None
        self.state_cache = state_cache
        self.qdoc = qdoc
        self.model_ids = [e.fingerprint() for e in self.encoders.values()]
        self.choices: dict[str, dict[str, Any]] = {}
        self._active: str | None = None
        self._exclude_query = False

    @property
    def index_key(self) -> str:
        return "flew:" + "+".join(self.model_ids)

    def _grid(self) -> list[tuple[float, ...]]:
        if self.weights is not None:
            return [self.weights]
        return [tuple(round(float(x), 10) for x in w) for w in weight_grid(self.step)]

    def _weights(self) -> tuple[float, ...]:
        if self.weights is not None:
            return self.weights
        chosen = self.choices.get(self._active or "")
        if chosen is None:
            raise ValueError(
                f"{self.name}: no weights chosen for this benchmark; evaluate it through "
                "evaluate_all (which calls prepare) or give fixed weights="
            )
        return tuple(chosen["weights"])

    # -- the runner's hook ------------------------------------------------------------------------
    def prepare(self, benchmark: LoadedBenchmark, options: Mapping[str, Any], cache: dict | None = None) -> None:
        """Choose the eq. 8 weights for ``benchmark`` on its dev split (CSFCube's on fold1_dev,
        when first scored in ``weighted`` mode)."""
        self._active = benchmark.name
        if benchmark.kind == "csfcube":
            self._exclude_query = bool(options.get("exclude_self", False))
            self.choices.pop(benchmark.name, None)
            return
        if self.weights is not None:
            self.choices[benchmark.name] = {"weights": list(self.weights), "chosen_on": "fixed", "dev_curve": []}
            return
        dev = qdoc_dev_half(benchmark.name, options)
        if dev is None:
            self.choices[benchmark.name] = {"weights": list(EQUAL), "chosen_on": "equal (no dev half)", "dev_curve": []}
            return
        index = self.index(dev.documents.select_columns(["id", "title", "sentences"]).to_list())
        questions = self.encode_texts(list(dev.questions["text"]))
        self.choices[benchmark.name] = choose_on_qdoc_dev(
            dev, benchmark, lambda w: self._scores(questions, index, w), self._grid()
        )

    # -- q-doc ------------------------------------------------------------------------------------
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """``[N, 3, h]``: each text (a question) by FLeW-bg, -mt and -rs, L2-normalised."""
        return per_facet(self.encoders, lambda e: e.encode(texts, self.batch_size, show_progress=False,
                                                            state_cache=self.state_cache))

    def index(self, documents: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """``[N, 3, h]`` facet embeddings of ``title [SEP] abstract`` (eq. 7)."""
        return facet_embeddings(self.encoders, documents, self.batch_size, self.state_cache)

    @staticmethod
    def _scores(questions: torch.Tensor, index: torch.Tensor, w: Sequence[float]) -> np.ndarray:
        q = F.normalize(weighted_embedding(questions, w), dim=-1)
        d = F.normalize(weighted_embedding(index, w), dim=-1)
        return (q @ d.T).double().numpy()

    def score(self, questions: Sequence[str], index: torch.Tensor) -> np.ndarray:
        return self._scores(self.encode_texts(list(questions)), index, self._weights())

    # -- CSFCube ----------------------------------------------------------------------------------
    def csfcube_score_fn(self, data: CSFCube, cache: dict | None = None) -> ScoreFn:
        """Facet ``x`` by FLeW-``x``'s cosine (``facet``), or by eq. 8's weighted embedding with
        the weights chosen on fold1_dev (``weighted``)."""
        pids = data.pool_pids()
        index_of = {p: i for i, p in enumerate(pids)}
        docs = cached(cache, (self.index_key, "csfcube"), lambda: self.index([data.papers[p] for p in pids]))

        if self.csfcube == "facet":

            def by_facet(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
                c = torch.as_tensor([index_of[p] for p in cands], dtype=torch.long)
                i = FACETS.index(facet)
                return (docs[c, i] @ docs[index_of[qpid], i]).double().numpy()

            return by_facet

        def with_weights(w: Sequence[float]) -> ScoreFn:
            emb = F.normalize(weighted_embedding(docs, w), dim=-1)

            def fn(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
                c = torch.as_tensor([index_of[p] for p in cands], dtype=torch.long)
                return (emb[c] @ emb[index_of[qpid]]).double().numpy()

            return fn

        if "csfcube" not in self.choices:
            self.choices["csfcube"] = choose_on_csfcube_dev(
                with_weights, data, self._grid(), self._exclude_query, self.weights is None
            )
        return with_weights(tuple(self.choices["csfcube"]["weights"]))

    def describe(self) -> dict[str, Any]:
        first = next(iter(self.encoders.values()))
        return {
            **super().describe(),
            "model": first.config.base_model,
            "pooling": first.config.pooling,
            "max_length": first.max_length,
            "fingerprints": dict(zip(FACETS, self.model_ids)),
            "csfcube": self.csfcube,
            "grid_step": None if self.weights is not None else self.step,
            "weights_by_benchmark": self.choices,
        }
