"""The offline FTU set: training documents from the offline corpora, facet positives and
negatives from stated signals, one question per facet (section 4.1, adapted as described below).

The paper's FTUs come from FLeW's citation-intent triplets with LLM sentence labels and LLM
questions, none of which is public. Here every part has a stated origin. The training
documents, their sources and pools are in :mod:`unifar.construction.mining_sources`.

Facet positives and negatives (per query document d and facet f with facet-f sentences):

* ``facet-bm25`` (``MiningConfig(signal="facet-bm25")``; weak, facet-specific; every labelled
  document): the positive is the document of
  the same pool whose facet-f sentences have the highest BM25 score for d's facet-f sentences
  (IDF over the pool's facet-f texts): "the paper whose *method* reads most like this one's
  method", wherever its topic. The hard negative is the dense (base-encoder) topical neighbour
  of d, among its ``neighbourhood`` nearest, whose facet-f text scores *lowest* under the same
  BM25: topically close, facet-f different, which is what CSFCube's pools ask a model to tell
  apart. One random document of the pool is a second, easy negative. Lexical BM25 picks the
  positives so that the encoder being trained is not taught its own similarities.
* ``hybrid`` (the default; facet-specific, every labelled document): d's
  ``rerank_depth`` dense (base-encoder) topical neighbours are reranked by a teacher score,
  ``z(cosine) + hybrid_weight * z(facet-f BM25)`` (z over the candidates,
  :func:`unifar.scoring.zscore_fusion`), the way CSFCube reranks a pool of topical neighbours.
  The positive is the teacher's top candidate among those with facet-f sentences (at least
  ``min_facet_words`` words); the hard negative is the one of the
  ``neighbourhood`` nearest that the teacher ranks lowest (topically close, facet-f different);
  plus one random negative. On CSFCube fold1_dev this teacher is a better ranker than either
  part alone (chapter 3, section 3.3), so it can teach the encoder what its own cosine misses.
  Unlike ``facet-bm25``, it does use the encoder's similarities: only the facet evidence added
  to them is new to the model.
* ``citation`` (real, not facet-specific): each SciRepEval triplet (query cites positive, not
  negative) is attached to the facet of the query whose facet-f text is closest (dense cosine)
  to the cited abstract.
* ``search-clicks`` (real): a SciRepEval search query (train half) becomes an FTU whose query
  document is its best-graded candidate, other relevant candidates are positives and
  non-relevant candidates negatives, under the facet the query is attributed to.

Pools keep fields apart: ``cs`` (CSAbstruct, S2 papers) and ``biomed`` (PubMedQA, NICTA).

Questions: real questions where we have them (``pubmedqa``: a training-half question for its
own abstract; ``scirepeval-search``: the search query), each attached to the facet whose
sentences of its document are closest to it (dense cosine; our rule, the data has no facet);
independent cropping (:class:`~unifar.construction.questions.ICropQuestionGenerator`, origin ``icrop``)
for every other facet that has positives.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..datasets.ftu import FTU, Question, TeacherList
from ..evaluation.ranking import rank_order
from ..evaluation.retrievers import BM25Scorer
from ..evaluation.texts import facet_text
from ..facets import FACETS
from ..scoring import zscore_fusion
from .ftu import Triplet, merge_triplets
from .mining_attribution import Encode, attribute_facets, citation_triplets, search_ftus
from .mining_sources import SOURCES, label_unlabelled, load_training_documents, sample_pool, whole_text
from .questions import ICropQuestionGenerator
from .teacher import teacher_list

__all__ = [
    "MiningConfig",
    "OfflineFTUs",
    "SIGNALS",
    "mine_facet_triplets",
    "build_offline_ftus",
]

logger = logging.getLogger(__name__)

#: Signals that pick the facet positives (``MiningConfig.signal``).
SIGNALS = ("facet-bm25", "hybrid")


@dataclass
class MiningConfig:
    """Choices of the offline FTU construction (all ours; the paper's data is not public)."""

    sources: tuple[str, ...] = tuple(SOURCES)
    positives_per_facet: int = 1
    hard_negatives_per_facet: int = 1
    random_negatives_per_facet: int = 1
    neighbourhood: int = 20  # dense topical neighbours a hard negative is drawn from
    min_facet_words: int = 5  # facet text shorter than this gives no facet pair
    max_query_documents: int | None = None  # per source, seeded sample (None: all)
    # Documents kept per source before mining, a seeded sample (None, or a source not named: all
    # of it). Shrinks the pool a source's positives and negatives come from, and so the encoding
    # (chapter 3's default profile; the full profile keeps everything).
    pool_per_source: dict[str, int] | None = None
    seed: int = 0
    # Which score picks positives (and ranks the hard-negative candidates): "facet-bm25" (BM25
    # between facet-f texts over the whole pool) or "hybrid" (the dense topical neighbours
    # reranked by z(cosine) + hybrid_weight * z(facet BM25); see the module docstring). Hybrid is
    # the default since it is the only offline signal that ranks CSFCube fold1_dev better than the
    # base encoder (chapter 3, section 3.3); chapter 3 builds the book's FTUs with it.
    signal: str = "hybrid"
    hybrid_weight: float = 0.25  # chosen on CSFCube fold1_dev (chapter 3, section 3.3)
    rerank_depth: int = 100  # hybrid: dense neighbours reranked (CSFCube's pools hold 88-253)
    # hybrid: None = the hard negative is the neighbour (of the `neighbourhood` nearest) that the
    # teacher ranks lowest; m = the nearest neighbour that the teacher ranks below its top m, i.e.
    # where the encoder and the teacher disagree most sharply (harder, and more often relevant)
    teacher_margin: int | None = None
    # hybrid: each FTU also stores the teacher's graded scores over a candidate list of its query
    # document's rerank list (for distillation, beyond the paper): the union of every facet's
    # teacher top `teacher_top`, plus `teacher_random` more drawn (seeded) from the rest of the
    # rerank list, so that the list also holds candidates the teacher ranks low. 0 and 0: none.
    teacher_top: int = 8
    teacher_random: int = 8

    def __post_init__(self) -> None:
        self.sources = tuple(self.sources)
        unknown = sorted(set(self.sources) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown source(s) {unknown}; choose from {sorted(SOURCES)}")
        if self.positives_per_facet < 1:
            raise ValueError("positives_per_facet must be at least 1")
        if self.neighbourhood < 2:
            raise ValueError("neighbourhood must be at least 2")
        if self.teacher_margin is not None and not 0 < self.teacher_margin < self.rerank_depth:
            raise ValueError(f"teacher_margin must be in [1, rerank_depth), got {self.teacher_margin}")
        if self.teacher_margin is not None and self.signal != "hybrid":
            raise ValueError(f"teacher_margin needs the hybrid signal (it ranks by the teacher), got signal={self.signal!r}")
        if self.signal not in SIGNALS:
            raise ValueError(f"unknown mining signal {self.signal!r}; choose from {SIGNALS}")
        if self.pool_per_source is not None:
            self.pool_per_source = dict(self.pool_per_source)
            bad = sorted(set(self.pool_per_source) - set(SOURCES))
            if bad:
                raise ValueError(f"pool_per_source names unknown source(s) {bad}; choose from {sorted(SOURCES)}")
            small = {k: v for k, v in self.pool_per_source.items() if not isinstance(v, int) or v < self.neighbourhood + 1}
            if small:
                raise ValueError(f"pool_per_source must keep more than neighbourhood ({self.neighbourhood}) "
                                 f"documents per source, got {small}")
        if self.teacher_top < 0 or self.teacher_random < 0:
            raise ValueError(f"teacher_top and teacher_random must be at least 0, got {self.teacher_top}, "
                             f"{self.teacher_random}")
        if self.signal == "hybrid" and self.rerank_depth < self.neighbourhood:
            raise ValueError(f"rerank_depth ({self.rerank_depth}) must be at least neighbourhood ({self.neighbourhood})")


@dataclass
class OfflineFTUs:
    """The result of :func:`build_offline_ftus`: FTUs, their documents and a report."""

    ftus: list[FTU]
    documents: dict[str, dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)


# ----- signals ----------------------------------------------------------------------------------
def _dense_neighbours(
    docs: Mapping[str, Mapping[str, Any]], ids: list[str], encode: Encode, depth: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``depth`` nearest other documents of each of ``ids`` by dense cosine of
    :func:`~unifar.construction.mining_sources.whole_text`: indices [N, depth] and similarities."""
    E = encode([whole_text(docs[d]) for d in ids])  # [N, h], unit norm
    sims = E @ E.T
    sims.fill_diagonal_(-2.0)  # never one's own neighbour
    if depth > 0:
        top = torch.topk(sims, depth, dim=1)
        return top.indices.numpy(), top.values.double().numpy()
    return np.zeros((len(ids), 0), dtype=int), np.zeros((len(ids), 0))


def _hybrid_choice(
    cands: list[str], teacher: np.ndarray, have_set: set[str], config: MiningConfig, k: int
) -> tuple[list[str], list[str]]:
    """``hybrid``: a query's dense neighbourhood ``cands`` reranked by the ``teacher`` score
    z(cosine) + w z(facet-f BM25); the positives and the ranked hard-negative candidates."""
    order = [i for i in rank_order(teacher) if cands[i] in have_set]  # a facet-f text to match
    positives = [cands[i] for i in order[: config.positives_per_facet]]
    if not positives:
        return positives, []
    if config.teacher_margin is None:
        score_of = dict(zip(cands, teacher))
        ranked = sorted((d for d in cands[:k] if d not in positives), key=lambda d: score_of[d])
    else:  # cands are in dense order: the nearest ones the teacher puts below its top m
        below = set(rank_order(teacher)[config.teacher_margin :].tolist())
        ranked = [d for i, d in enumerate(cands) if i in below and d not in positives]
    return positives, ranked


def _facet_bm25_choice(
    q: str, neigh_all: list[str], scorer: BM25Scorer, texts: Mapping[str, str], have: list[str], have_set: set[str],
    config: MiningConfig,
) -> tuple[list[str], list[str]]:
    """``facet-bm25``: the positives by facet-f BM25 over the pool, and the hard-negative
    candidates ``neigh_all`` (q's dense neighbours) ranked by least facet-f overlap."""
    s = scorer.scores(texts[q], have)
    s[scorer.index_of[q]] = -np.inf  # not itself (scorer.pids is `have`)
    order = rank_order(s)
    positives = [have[i] for i in order[: config.positives_per_facet] if np.isfinite(s[i]) and s[i] > 0]
    if not positives:
        return positives, []
    # hard negatives: topical neighbours with the least facet-f overlap (those without
    # facet-f text at all come after those with some, which are the informative ones)
    neigh = [d for d in neigh_all if d not in positives]
    with_f = [d for d in neigh if d in have_set]
    score_of = dict(zip(with_f, scorer.scores(texts[q], with_f))) if with_f else {}
    return positives, sorted(with_f, key=lambda d: score_of[d]) + [d for d in neigh if d not in have_set]


def mine_facet_triplets(
    docs: Mapping[str, Mapping[str, Any]],
    ids: Sequence[str],
    encode: Encode,
    config: MiningConfig,
    query_ids: Sequence[str] | None = None,
    teachers: dict[str, TeacherList] | None = None,
) -> list[Triplet]:
    """Facet triplets over one pool ``ids`` with ``config.signal`` (``facet-bm25`` or ``hybrid``,
    module docstring); ``query_ids`` (default all) are the query documents. Returns
    :class:`~unifar.construction.ftu.Triplet` records (each positive paired with each negative).
    With the hybrid signal and a ``teachers`` dict, each query document's :func:`teacher_list`
    is stored there under its id."""
    ids = list(ids)
    pos_of = {d: i for i, d in enumerate(ids)}
    queries = list(query_ids) if query_ids is not None else ids
    rng = np.random.default_rng(config.seed)
    hybrid = config.signal == "hybrid"
    depth = min(max(config.neighbourhood, config.rerank_depth if hybrid else 0), len(ids) - 1)
    neighbours, neighbour_sims = _dense_neighbours(docs, ids, encode, depth)
    k = min(config.neighbourhood, depth)
    out: list[Triplet] = []
    facet_scores: dict[str, dict[str, np.ndarray]] = {}  # query -> facet -> teacher over its rerank list
    for f in FACETS:
        texts = {d: facet_text(docs[d], f) for d in ids}
        have = [d for d in ids if len(texts[d].split()) >= config.min_facet_words]
        if len(have) < 3:
            continue
        scorer = BM25Scorer({d: texts[d] for d in have})
        have_set = set(have)

        def bm25(q: str, cands: list[str]) -> np.ndarray:
            """Facet-f BM25 of q's facet text; 0 for candidates without facet-f text."""
            out_ = np.zeros(len(cands))
            rows = [i for i, d in enumerate(cands) if d in have_set]
            if rows:
                out_[rows] = scorer.scores(texts[q], [cands[i] for i in rows])
            return out_

        for q in queries:
            if q not in have_set:
                continue
            if hybrid:
                # rerank q's dense neighbourhood: z(cosine) + w z(facet-f BM25) over the candidates
                cands = [ids[j] for j in neighbours[pos_of[q]]]
                teacher = zscore_fusion([neighbour_sims[pos_of[q]], bm25(q, cands)], [1.0, config.hybrid_weight])
                facet_scores.setdefault(q, {})[f] = teacher
                positives, ranked = _hybrid_choice(cands, teacher, have_set, config, k)
            else:
                neigh_all = [ids[j] for j in neighbours[pos_of[q], :k]]
                positives, ranked = _facet_bm25_choice(q, neigh_all, scorer, texts, have, have_set, config)
            if not positives:
                continue
            negatives = ranked[: config.hard_negatives_per_facet]
            pool = [d for d in ids if d != q and d not in positives and d not in negatives]
            if pool and config.random_negatives_per_facet:
                pick = rng.choice(len(pool), size=min(config.random_negatives_per_facet, len(pool)), replace=False)
                negatives += [pool[i] for i in sorted(pick)]
            out += [Triplet(q, p, n, f) for p in positives for n in negatives]
    if teachers is not None and hybrid:
        t_rng = np.random.default_rng([config.seed, 7])  # its own stream: the triplets stay as they were
        for q in queries:  # in query order, so the draw does not depend on dict order
            if q in facet_scores:
                t = teacher_list([ids[j] for j in neighbours[pos_of[q]]],
                                 {f: facet_scores[q][f] for f in FACETS if f in facet_scores[q]}, config, t_rng)
                if t is not None:
                    teachers[q] = t
    return out


# ----- the whole construction -------------------------------------------------------------------
def build_offline_ftus(
    encode: Encode,
    labeller: Any | None = None,
    config: MiningConfig | None = None,
    data_dir: str | Path | None = None,
    forbidden: Any | None = None,
    questions: Any | None = None,
) -> OfflineFTUs:
    """Build the offline FTU set (module docstring): load and guard the documents, label the
    unlabelled ones, mine each signal, merge triplets into FTUs, attach questions.

    ``encode``: texts -> unit-norm float tensor ``[N, h]`` (e.g. ``MeanPoolingEncoder.encode``),
    used for topical neighbours and facet attribution, and, with ``config.signal == "hybrid"``,
    as the dense half of the teacher score that picks positives.
    ``labeller``: anything with ``label_documents(docs)`` (the offline
    :class:`~unifar.rhetoric.labeller.FacetLabeller` or the table-6 :class:`~unifar.construction.labelling.LLMLabeller`).
    ``questions``: the generator for facets without a real question (default: independent
    cropping; :class:`~unifar.construction.questions.LLMQuestionGenerator` for the paper's table 5).
    """
    config = config or MiningConfig()
    docs, report = load_training_documents(config.sources, data_dir, forbidden)
    extra = report.pop("_extra")
    if config.pool_per_source:
        docs = sample_pool(docs, config.pool_per_source, config.seed)
        report["pool_per_source"] = dict(config.pool_per_source)
    report["labelled_by_labeller"] = label_unlabelled(docs, labeller)
    rnd = random.Random(config.seed)  # picks the query documents, then shuffles the FTUs
    query_ids = _query_documents(docs, config, rnd)
    teachers: dict[str, TeacherList] = {}
    triplets, per_signal = _mine_signals(docs, query_ids, encode, config, extra, report, teachers)
    ftus = merge_triplets(triplets)
    for u in ftus:  # the teacher list of a mined query document (none for citation-only FTUs)
        u.teacher = teachers.get(u.query)
    ftus = _attach_questions(ftus, docs, extra, encode, config, questions, per_signal)
    rnd.shuffle(ftus)
    used = {d for u in ftus for d in u.all_doc_ids()}
    report.update(
        config=asdict(config),
        triplets_per_signal=dict(per_signal),
        ftus=len(ftus),
        documents_used=len(used),
        question_origins=dict(Counter(q.origin for u in ftus for q in u.questions.values())),
        teacher_lists={"ftus": sum(u.teacher is not None for u in ftus),
                       "candidates": sum(len(u.teacher_ids()) for u in ftus)},
    )
    return OfflineFTUs(ftus=ftus, documents={d: docs[d] for d in docs if d in used}, report=report)


def _query_documents(docs: Mapping[str, Mapping[str, Any]], config: MiningConfig, rnd: random.Random) -> set[str]:
    """Query documents: every labelled document, or a seeded per-source sample of them
    (``config.max_query_documents``); SciRepEval's FTUs come from their real signals."""
    by_source: dict[str, list[str]] = {}
    for d, doc in docs.items():
        by_source.setdefault(doc["source"], []).append(d)
    query_ids: set[str] = set()
    for source, ids in sorted(by_source.items()):
        if source.startswith("scirepeval"):
            continue  # their FTUs come from their real signals
        chosen = ids if config.max_query_documents is None or len(ids) <= config.max_query_documents else rnd.sample(ids, config.max_query_documents)
        query_ids.update(chosen)
    return query_ids


def _mine_signals(
    docs: Mapping[str, Mapping[str, Any]], query_ids: set[str], encode: Encode, config: MiningConfig,
    extra: Mapping[str, Any], report: dict[str, Any], teachers: dict[str, TeacherList] | None = None,
) -> tuple[list[Triplet], Counter[str]]:
    """Triplets of ``config.signal`` within each pool, then of the ``citation`` signal; the
    count per signal. Records the skipped citation triplets in ``report``."""
    triplets: list[Triplet] = []
    signal_of: dict[tuple[str, str], str] = {}
    per_signal: Counter[str] = Counter()
    pools: dict[str, list[str]] = {}
    for d, doc in docs.items():
        pools.setdefault(SOURCES[doc["source"]][0], []).append(d)
    for pool, ids in sorted(pools.items()):
        mined = mine_facet_triplets(docs, ids, encode, config, [d for d in ids if d in query_ids], teachers)
        triplets += mined
        per_signal[config.signal] += len(mined)
        for t in mined:
            signal_of.setdefault((t.query_id, t.facet), config.signal)
    if extra["scirepeval_triplets"]:
        cited, skipped = citation_triplets(extra["scirepeval_triplets"], docs, encode)
        triplets += cited
        per_signal["citation"] += len(cited)
        report["citation_triplets_skipped"] = skipped
        for t in cited:
            signal_of.setdefault((t.query_id, t.facet), "citation")
    return triplets, per_signal


def _attach_questions(
    ftus: list[FTU], docs: Mapping[str, Mapping[str, Any]], extra: Mapping[str, Any], encode: Encode,
    config: MiningConfig, questions: Any | None, per_signal: Counter[str],
) -> list[FTU]:
    """Questions: real ones first (PubMedQA's; SciRepEval search FTUs, counted in
    ``per_signal``), then ``questions`` (default independent cropping) for the other facets."""
    # questions: real ones first, then independent cropping for the other facets
    by_query = {u.query: u for u in ftus}
    q_docs = [d for _, d in extra["pubmedqa_questions"] if d in by_query]
    q_texts = [t for t, d in extra["pubmedqa_questions"] if d in by_query]
    for text, d, f in zip(q_texts, q_docs, attribute_facets(q_texts, [docs[d] for d in q_docs], encode)):
        if f is not None:
            by_query[d].questions[f] = Question(text, f, "pubmedqa", d, {"facet_rule": "dense-attribution"})
            u = by_query[d]
            if not u.positives.get(f):  # the question still has d_q as its positive (L_QD) ...
                u.positives[f] = []
                # ... and needs negatives to contrast it with: the FTU's other negatives
                u.negatives[f] = list(dict.fromkeys(n for g in FACETS for n in u.negatives.get(g, [])))
    if extra["scirepeval_search"] is not None:
        search = search_ftus(extra["scirepeval_search"], docs, encode, max_negatives=2 * (config.hard_negatives_per_facet + config.random_negatives_per_facet))
        per_signal["search-clicks"] += len(search)
        ftus += search
    generator = questions if questions is not None else ICropQuestionGenerator(seed=config.seed)
    for ftu in ftus:
        for f in ftu.facets:
            if f not in ftu.questions:
                q = generator.generate(docs[ftu.query], f, [docs[p] for p in ftu.positives[f]])
                if q is not None:
                    ftu.questions[f] = q
    return ftus
