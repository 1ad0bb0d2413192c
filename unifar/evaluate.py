"""Benchmark protocols. CSFCube: rerank each query-facet's annotated pool, score it officially.

CSFCube protocol (Mysore et al., 2021; GitHub ``iesl/CSFCube`` ``eval_scripts/ranking_eval.py``):

* a ranking is, per facet, ``{qpid: [(cpid, score), ...]}`` in rank order; the evaluator reads only
  the order (the upstream files carry distances, ours similarities);
* each ranked candidate gets its adjudicated grade; a candidate that is not annotated for that
  query is an error (upstream: ``KeyError``); annotated candidates missing from the ranking are
  simply not scored (upstream behaviour);
* query 8781666 is annotated as a grade-3 candidate of itself (background and result). The
  upstream README's ranking recipe ranks every annotated candidate, so :func:`rank_pools` keeps it
  by default (a dense ranker then puts it first); the shipped SPECTER rankings leave it out.
  Leaving it out (``exclude_query=True``) lowers MiniLM mean pooling from 39.40 to 38.87 MAP
  (aggregated) on this collection;
* per query: AP (grade >= 2) and NDCG%20 (:mod:`unifar.metrics`); per facet and for ``all``
  (ids ``"<pid>_<facet>"`` over the three facets): mean of the fold1_test and fold2_test means
  from ``evaluation_splits.json`` (``split="test"``), or the fold1_dev mean (``split="dev"``).

Ranking files follow the upstream naming ``test-pid2pool-csfcube-<name>-<facet>-ranked.json``
holding ``{qpid: [[cpid, score], ...]}``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from .datasets.csfcube import FACETS, CSFCube
from .metrics import csfcube_query_metrics, fold_mean

__all__ = [
    "CSFCUBE_FACETS",
    "Ranked",
    "ScoreFn",
    "aggregate_csfcube",
    "csfcube_per_query",
    "csfcube_split_papers",
    "facet_attention_stats",
    "evaluate_csfcube_rankings",
    "ranked_grades",
    "ranked_pool_names",
    "rank_pools",
    "read_ranked_pools",
    "write_ranked_pools",
]

CSFCUBE_FACETS: tuple[str, ...] = (*FACETS, "all")
Ranked = dict[str, dict[str, list[tuple[str, float]]]]
# score_fn(facet, qpid, cand_pids) -> scores, one per candidate, higher = more relevant
ScoreFn = Callable[[str, str, list[str]], Sequence[float] | np.ndarray]

_POOL_FILE = re.compile(r"^test-pid2pool-csfcube-(?P<name>.+)-(?P<facet>background|method|result)-ranked\.json$")


def _pool_file(directory: Path, name: str, facet: str) -> Path:
    return directory / f"test-pid2pool-csfcube-{name}-{facet}-ranked.json"


def ranked_pool_names(directory: str | Path) -> dict[str, list[str]]:
    """Ranker names found in ``directory`` and the facets each has a ranking file for."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"rankings directory not found: {directory}")
    names: dict[str, list[str]] = {}
    for path in sorted(directory.iterdir()):
        m = _POOL_FILE.match(path.name)
        if m:
            names.setdefault(m["name"], []).append(m["facet"])
    return names


def read_ranked_pools(directory: str | Path, name: str | None = None) -> Ranked:
    """Read the three ``test-pid2pool-csfcube-<name>-<facet>-ranked.json`` files of one ranker.

    ``name`` is detected when the directory holds exactly one ranker; otherwise it must be given.
    Returns ``{facet: {qpid: [(cpid, score), ...]}}`` in file (= rank) order.
    """
    directory = Path(directory)
    found = ranked_pool_names(directory)
    if name is None:
        if not found:
            raise FileNotFoundError(
                f"{directory}: no files named test-pid2pool-csfcube-<name>-<facet>-ranked.json"
            )
        if len(found) > 1:
            raise ValueError(f"{directory}: rankings of several rankers {sorted(found)}; choose one by name")
        name = next(iter(found))
    missing = [str(_pool_file(directory, name, f)) for f in FACETS if f not in found.get(name, [])]
    if missing:
        raise FileNotFoundError(f"ranking files missing for {name!r}: {', '.join(missing)}")
    ranked: Ranked = {}
    for facet in FACETS:
        path = _pool_file(directory, name, facet)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected {{qpid: [[cpid, score], ...]}}")
        ranked[facet] = {}
        for qpid, items in raw.items():
            try:
                ranked[facet][str(qpid)] = [(str(c), float(s)) for c, s in items]
            except (TypeError, ValueError):
                raise ValueError(f"{path}: query {qpid!r}: expected a list of [cpid, score] pairs") from None
    return ranked


def write_ranked_pools(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], directory: str | Path, name: str) -> list[Path]:
    """Write one upstream-format ranking file per facet; returns the paths written."""
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"ranker name must be a non-empty file-name part, got {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for facet, per_query in ranked.items():
        if facet not in FACETS:
            raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS}")
        path = _pool_file(directory, name, facet)
        payload = {q: [[c, float(s)] for c, s in items] for q, items in per_query.items()}
        path.write_text(json.dumps(payload), encoding="utf-8")
        paths.append(path)
    return paths


def rank_pools(score_fn: ScoreFn, data: CSFCube, facets: Sequence[str] = FACETS, exclude_query: bool = False) -> Ranked:
    """Rerank every query's annotated candidate pool (not the corpus) by ``score_fn``.

    Candidates are sorted by decreasing score, ties kept in pool order (stable sort). By default
    every annotated candidate is ranked, as in the upstream README's recipe; with
    ``exclude_query`` the query paper is left out of its own pool, as in the upstream SPECTER
    rankings (query 8781666 is annotated as its own grade-3 candidate in two facets).
    """
    ranked: Ranked = {}
    for facet in facets:
        if facet not in data.anns:
            raise ValueError(f"unknown facet {facet!r}; expected one of {tuple(data.anns)}")
        ranked[facet] = {}
        for qpid, (cands, _) in data.anns[facet].items():
            pool = [c for c in cands if not (exclude_query and c == qpid)]
            scores = np.asarray(score_fn(facet, qpid, pool), dtype=np.float64).reshape(-1)
            if scores.shape != (len(pool),):
                raise ValueError(f"score_fn gave {scores.shape[0]} scores for {len(pool)} candidates ({facet}, {qpid})")
            if not np.isfinite(scores).all():
                raise ValueError(f"score_fn gave non-finite scores ({facet}, query {qpid})")
            order = np.argsort(-scores, kind="stable")
            ranked[facet][qpid] = [(pool[i], float(scores[i])) for i in order]
    return ranked


def ranked_grades(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube) -> dict[str, dict[str, np.ndarray]]:
    """Adjudicated grades of each ranked list, in rank order: ``{facet: {qpid: int array}}``."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for facet, per_query in ranked.items():
        if facet not in FACETS:
            raise ValueError(f"unknown facet {facet!r} in rankings; expected one of {FACETS}")
        gold = data.anns[facet]
        out[facet] = {}
        for qpid, items in per_query.items():
            if qpid not in gold:
                raise ValueError(f"{facet}: query {qpid!r} is not a CSFCube {facet} query")
            grade_of = dict(zip(*gold[qpid]))
            cpids = [c for c, _ in items]
            unknown = [c for c in cpids if c not in grade_of]
            if unknown:
                raise ValueError(f"{facet}/{qpid}: {len(unknown)} ranked candidates are not annotated, e.g. {unknown[:3]}")
            if len(set(cpids)) != len(cpids):
                raise ValueError(f"{facet}/{qpid}: the ranking lists a candidate twice")
            out[facet][qpid] = np.array([grade_of[c] for c in cpids], dtype=np.int64)
    return out


def csfcube_per_query(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube) -> dict[str, dict[str, dict[str, float]]]:
    """Per-query metrics (fractions): ``{facet: {qpid: {"map": AP, "ndcg%20": NDCG%20}}}``.

    The input for bootstrap confidence intervals and paired tests.
    """
    grades = ranked_grades(ranked, data)
    return {f: {q: csfcube_query_metrics(g) for q, g in per_q.items()} for f, per_q in grades.items()}


def csfcube_split_papers(data: CSFCube, split: str = "fold1_dev",
                         max_queries: int | None = None) -> tuple[list[dict], Callable[..., dict[str, float]]]:
    """The papers of one CSFCube split (its query papers and their candidate pools) and a scorer.

    Returns ``(docs, split_map)``: ``docs`` as ``{"id", "title", "sentences", "labels"}`` (labels
    mapped to facet names, None for others), in a fixed order; ``split_map(q_emb, c_emb=None)``
    takes facet embeddings ``[len(docs), F, h]`` in that order (``c_emb`` for the candidates,
    default ``q_emb``), scores ``M(f, f)`` by dot product, and returns the split's MAP in percent
    per facet and ``all``. For dev-only analyses that encode only this split's papers.

    ``max_queries`` keeps only the first ``max_queries`` query facets of each facet's split (and
    the papers of their pools): a quick check whose MAP averages those queries only, not the
    split's number.
    """
    from .datasets.csfcube import facet_of_label

    if max_queries is not None and max_queries < 1:
        raise ValueError(f"max_queries must be at least 1 (or None), got {max_queries}")
    ids = data.splits["all"][split]
    if max_queries is not None:
        kept = {i for f in FACETS for i in data.splits[f][split][:max_queries]}
        ids = [i for i in ids if i in kept]
    pids = sorted({k.split("_")[0] for k in ids} | {c for k in ids for c in data.anns[k.split("_", 1)[1]][k.split("_")[0]][0]})
    row = {p: i for i, p in enumerate(pids)}
    docs = [{"id": p, "title": data.papers[p]["title"], "sentences": data.papers[p]["sentences"],
             "labels": [facet_of_label(lab) for lab in data.papers[p]["labels"]]} for p in pids]
    # rank only this split's queries: the other queries' candidates were not encoded
    sub = type(data)(data.papers, {f: {q: v for q, v in data.anns[f].items() if f"{q}_{f}" in ids} for f in FACETS},
                     data.splits, data.queries, data.root)
    scored = set(ids)

    def split_map(q_emb, c_emb=None) -> dict[str, float]:
        c_emb = q_emb if c_emb is None else c_emb

        def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
            f = FACETS.index(facet)
            return (c_emb[[row[c] for c in cands], f] @ q_emb[row[qpid], f]).numpy()

        per = csfcube_per_query(rank_pools(score, sub), sub)
        keyed = {f"{q}_{f}": m["map"] for f, per_q in per.items() for q, m in per_q.items()}
        return {t: round(100 * float(np.mean([keyed[i] for i in data.splits[t][split] if i in scored])), 2)
                for t in CSFCUBE_FACETS}

    return docs, split_map


def facet_attention_stats(model, docs: Sequence[Mapping], encoding, reference=None) -> dict:
    """Where a facet model's attention goes on labelled documents, against uniform attention.

    ``docs`` carry ``labels`` as facet names (None for no facet), as :func:`csfcube_split_papers`
    gives them; ``encoding`` is ``model.encode_documents(docs)``; ``reference`` (optional) the
    facet embeddings ``[N, F, h]`` of another model on the same documents (the untrained one).
    Over the documents that took the sentence branch, with each facet's attention over the title
    and the kept sentences renormalised:

    * ``norm_entropy``: entropy divided by ``log(n)``, averaged over documents and facets (1.0 is
      uniform attention, the identity-initialised model's);
    * ``mass_on_gold``: the attention mass a facet puts on the sentences labelled with it,
      averaged over (document, facet) pairs with such sentences; ``mass_on_gold_by_facet`` per
      facet; ``uniform_mass_on_gold``: what uniform attention puts there (the same average of the
      labelled share of the units); ``title_mass``: mass on the title (documents with one);
    * ``cos_to_reference``: mean cosine between each facet embedding and the reference's;
    * ``n_documents``: documents counted (sentence branch).
    """
    import torch.nn.functional as F

    from .train import _unit_labels

    facets = tuple(model.config.facets)
    fidx = {f: i for i, f in enumerate(facets)}
    items = model.tokenize_documents(docs)
    ent: list[float] = []
    title: list[float] = []
    gold: dict[str, list[float]] = {f: [] for f in facets}
    frac: list[float] = []
    for doc, item, A, branch in zip(docs, items, encoding.attention, encoding.branch):
        if branch != "sentence":
            continue
        lab = np.array(_unit_labels(doc, item, fidx) or [-1] * item.n_sentences)
        A = A[:, : len(lab)].double().numpy()
        A = A / A.sum(1, keepdims=True)
        n = len(lab)
        ent.append(float((-(A * np.log(A + 1e-12)).sum(1)).mean() / np.log(n)) if n > 1 else 1.0)
        if (doc.get("title") or "").strip():
            title.append(float(A[:, 0].mean()))
        for f, name in enumerate(facets):
            g = lab == f
            if g.any():
                gold[name].append(float(A[f, g].sum()))
                frac.append(float(g.mean()))
    pooled = [v for f in facets for v in gold[f]]
    out = {
        "n_documents": len(ent),
        "norm_entropy": round(float(np.mean(ent)), 4) if ent else None,
        "mass_on_gold": round(float(np.mean(pooled)), 4) if pooled else None,
        "mass_on_gold_by_facet": {f: round(float(np.mean(v)), 4) if v else None for f, v in gold.items()},
        "uniform_mass_on_gold": round(float(np.mean(frac)), 4) if frac else None,
        "title_mass": round(float(np.mean(title)), 4) if title else None,
    }
    if reference is not None:
        out["cos_to_reference"] = round(float(F.cosine_similarity(encoding.embeddings, reference, dim=-1).mean()), 4)
    return out


def aggregate_csfcube(per_query: Mapping[str, Mapping[str, Mapping[str, float]]], data: CSFCube, split: str = "test") -> dict[str, dict[str, float]]:
    """Cross-validated CSFCube aggregate, in percent: ``{facet|"all": {"map", "ndcg%20"}}``.

    ``all`` is reported only when the three facets are present.
    """
    keyed = {f"{q}_{f}": m for f, per_q in per_query.items() for q, m in per_q.items()}
    targets = [f for f in FACETS if f in per_query]
    if len(targets) == len(FACETS):
        targets.append("all")
    result: dict[str, dict[str, float]] = {}
    for target in targets:
        folds = data.splits[target]
        needed = {i for name, ids in folds.items() if name.startswith("fold") for i in ids}
        missing = sorted(needed - keyed.keys())
        if missing:
            raise ValueError(f"rankings lack {len(missing)} queries of split {target!r}, e.g. {missing[:3]}")
        result[target] = {
            metric: 100.0 * fold_mean({k: m[metric] for k, m in keyed.items()}, folds, split)
            for metric in ("map", "ndcg%20")
        }
    return result


def evaluate_csfcube_rankings(
    ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube, split: str = "test"
) -> dict[str, dict[str, float]]:
    """Official CSFCube scores of a ranking, in percent: ``{facet|"all": {"map", "ndcg%20"}}``.

    ``split="test"`` gives the reported 2-fold number; ``split="dev"`` the fold1_dev tuning number.
    Per-query values: :func:`csfcube_per_query`.
    """
    return aggregate_csfcube(csfcube_per_query(ranked, data), data, split=split)


def csfcube_frame(results: Mapping[str, Mapping[str, Mapping[str, float]]], source: str | None = None):
    """A pandas table of CSFCube scores, one row per ranker, with the columns of the paper's
    table 2 (``"background MAP"``, ``"background NDCG%20"``, ..., ``"aggregated NDCG%20"``, as in
    :data:`unifar.paper.UNIFAR_TABLE2`), so measured and reported rows stack into one table.
    ``results[ranker]`` is what :func:`evaluate_csfcube_rankings` returns; ``source`` (e.g.
    "measured here, this run") becomes a second index level.

    >>> scores = {f: {"map": 1.0, "ndcg%20": 2.0} for f in ("background", "method", "result", "all")}
    >>> list(csfcube_frame({"bm25": scores}).loc["bm25"])
    [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    >>> csfcube_frame({}, "none").shape
    (0, 8)
    """
    import pandas as pd

    names = {"background": "background", "method": "method", "result": "result", "all": "aggregated"}
    rows = []
    for ranker, per_facet in results.items():
        row = {"ranker": ranker, **({"source": source} if source is not None else {})}
        for facet, label in names.items():
            row[f"{label} MAP"] = per_facet[facet]["map"]
            row[f"{label} NDCG%20"] = per_facet[facet]["ndcg%20"]
        rows.append(row)
    columns = ["ranker", *(["source"] if source is not None else []),
               *(f"{label} {m}" for label in names.values() for m in ("MAP", "NDCG%20"))]
    return pd.DataFrame(rows, columns=columns).set_index(["ranker", "source"] if source is not None else "ranker")


def unifar_score_fn(model, data: CSFCube, batch_size: int = 32, show_progress: bool = True, state_cache=None,
                    cache_dir: str | os.PathLike[str] | None = None) -> ScoreFn:
    """CSFCube score function of a facet model: doc-doc relevance for facet f = M(f, f) =
    cos(e_q^(f), e_c^(f)) (UniFAR section 3). Every paper of the collection is encoded once.

    ``model`` is a :class:`unifar.UniFAR` (anything with ``encode_documents`` and ``config.facets``);
    ``state_cache``: see :meth:`unifar.UniFAR.encode`. ``cache_dir`` (without ``state_cache``):
    the base encoder's token states are read from and saved to a file there
    (:meth:`unifar.model.TokenStateCache.on_disk`), so that a later evaluation of any model on the
    same frozen base (chapter 5's) skips the encoder; the embeddings are the same either way.
    """
    from .scoring import docdoc_scores

    pids = data.pool_pids()
    index_of = {p: i for i, p in enumerate(pids)}
    docs = [{"title": data.papers[p]["title"], "sentences": data.papers[p]["sentences"]} for p in pids]
    if state_cache is None and cache_dir is not None:
        from .model import TokenStateCache

        state_cache = TokenStateCache.on_disk(model, cache_dir)
    kw = {"state_cache": state_cache} if state_cache is not None else {}
    emb = model.encode_documents(docs, batch_size=batch_size, show_progress=show_progress, **kw).embeddings
    if cache_dir is not None and state_cache is not None:
        state_cache.save()
    facets = tuple(model.config.facets)

    def score(facet: str, qpid: str, cands: list[str]) -> np.ndarray:
        if facet not in facets:
            raise ValueError(f"the model has no facet {facet!r}; its facets are {facets}")
        c = emb[[index_of[p] for p in cands]]
        return docdoc_scores(emb[[index_of[qpid]]], c, facets.index(facet))[0].double().numpy()

    return score
