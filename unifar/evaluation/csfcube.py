"""The CSFCube protocol: rerank each query-facet's annotated pool, score it officially.

CSFCube protocol (Mysore et al., 2021; GitHub ``iesl/CSFCube`` ``eval_scripts/ranking_eval.py``):

* a ranking is, per facet, ``{qpid: [(cpid, score), ...]}`` in rank order; the evaluator reads only
  the order (the upstream files carry distances, ours similarities);
* each ranked candidate gets its adjudicated grade; a candidate that is not annotated for that
  query, or listed twice, is an error (upstream: ``KeyError``). Annotated candidates missing
  from the ranking are not scored upstream, so a ranking that keeps one relevant candidate per
  query scores MAP 100: here such a ranking is refused (:func:`pool_coverage`) unless
  ``allow_partial=True`` (command line ``--allow-partial``). Leaving only the query paper out of
  its own pool, as the shipped SPECTER rankings and ``rank_pools(exclude_query=True)`` do, is
  accepted as complete;
* query 8781666 is annotated as a grade-3 candidate of itself (background and result). The
  upstream README's ranking recipe ranks every annotated candidate, so :func:`rank_pools` keeps it
  by default (a dense ranker then puts it first); the shipped SPECTER rankings leave it out.
  Leaving it out (``exclude_query=True``) lowers MiniLM mean pooling from 39.40 to 38.87 MAP
  (aggregated) on this collection;
* per query: AP (grade >= 2) and NDCG%20 (:mod:`unifar.evaluation.metrics`); per facet and for ``all``
  (ids ``"<pid>_<facet>"`` over the three facets): mean of the fold1_test and fold2_test means
  from ``evaluation_splits.json`` (``split="test"``), or the fold1_dev mean (``split="dev"``).

Ranking files follow the upstream naming ``test-pid2pool-csfcube-<name>-<facet>-ranked.json``
holding ``{qpid: [[cpid, score], ...]}``. A ranking, read from such files or made by
:func:`rank_pools` from a retriever (:mod:`unifar.evaluation.retrievers`), is scored by
:func:`csfcube_scores` (aggregates and per-query values) or :func:`evaluate_csfcube_rankings`.
This module imports neither torch nor a model: scoring ranking files stays light.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..datasets.csfcube import CSFCube
from ..facets import FACETS, facet_of_csfcube_label
from ..files import atomic_file
from .metrics import csfcube_query_metrics, fold_mean
from .ranking import rank_order
from .retrievers import Retriever, ScoreFn

__all__ = [
    "CSFCUBE_FACETS",
    "Ranked",
    "ScoreFn",
    "aggregate_csfcube",
    "csfcube_per_query",
    "csfcube_frame",
    "csfcube_scores",
    "csfcube_split_papers",
    "csfcube_strata",
    "evaluate_csfcube_rankings",
    "fold_names",
    "pool_coverage",
    "ranked_grades",
    "ranked_pool_names",
    "rank_pools",
    "read_ranked_pools",
    "score_csfcube_ranking",
    "write_ranked_pools",
]

CSFCUBE_FACETS: tuple[str, ...] = (*FACETS, "all")
Ranked = dict[str, dict[str, list[tuple[str, float]]]]

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
        blob = path.read_bytes()
        try:
            raw = json.loads(blob.decode("utf-8"))
        except UnicodeDecodeError as err:  # name the file and line: the codec's message names neither
            line = blob.count(b"\n", 0, err.start) + 1
            raise ValueError(f"{path}:{line}: not valid UTF-8 (byte 0x{blob[err.start]:02x} at offset {err.start})") from None
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
        text = json.dumps(payload)
        atomic_file(path, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8"))  # readers never see half a file
        paths.append(path)
    return paths


def rank_pools(score_fn: ScoreFn | Retriever, data: CSFCube, facets: Sequence[str] = FACETS,
               exclude_query: bool = False) -> Ranked:
    """Rerank every query's annotated candidate pool (not the corpus) by ``score_fn``, a score
    function or a :class:`~unifar.evaluation.retrievers.Retriever` (its
    :meth:`~unifar.evaluation.retrievers.Retriever.csfcube_score_fn`).

    Candidates are sorted by decreasing score, ties kept in pool order (stable sort). By default
    every annotated candidate is ranked, as in the upstream README's recipe; with
    ``exclude_query`` the query paper is left out of its own pool, as in the upstream SPECTER
    rankings (query 8781666 is annotated as its own grade-3 candidate in two facets).
    """
    if isinstance(score_fn, Retriever):
        score_fn = score_fn.csfcube_score_fn(data)
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
            ranked[facet][qpid] = [(pool[i], float(scores[i])) for i in rank_order(scores)]
    return ranked


def pool_coverage(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube) -> dict[str, list]:
    """Which ranked queries leave annotated candidates of their pool unranked.

    ``{"incomplete": [(facet, qpid, n_missing, pool_size), ...], "self_left_out": [(facet, qpid), ...]}``:
    ``self_left_out`` lists queries whose only missing candidate is the query paper itself (the
    ``exclude_query`` convention, complete for scoring). Queries absent from the ranking are
    :func:`aggregate_csfcube`'s concern.
    """
    incomplete, self_left_out = [], []
    for facet, per_query in ranked.items():
        gold = data.anns.get(facet, {})
        for qpid, items in per_query.items():
            if qpid not in gold:
                continue  # refused by ranked_grades
            missing = set(gold[qpid][0]) - {c for c, _ in items}
            if missing == {qpid}:
                self_left_out.append((facet, qpid))
            elif missing:
                incomplete.append((facet, qpid, len(missing), len(gold[qpid][0])))
    return {"incomplete": incomplete, "self_left_out": self_left_out}


def _refuse_partial(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube) -> None:
    incomplete = pool_coverage(ranked, data)["incomplete"]
    if incomplete:
        facet, qpid, n, size = incomplete[0]
        total = sum(len(per_q) for per_q in ranked.values())
        raise ValueError(
            f"incomplete rankings: {len(incomplete)} of {total} ranked queries leave candidates of their pool unranked "
            f"({sum(x[2] for x in incomplete)} candidates in all; e.g. query {qpid} ({facet}) ranks {size - n} of {size}). "
            "Unranked candidates are not scored, which inflates MAP (one relevant candidate per query scores 100). "
            "Rank every candidate, or score them as the official scripts do with allow_partial=True "
            "(command line: --allow-partial)")


def ranked_grades(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube,
                  allow_partial: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """Adjudicated grades of each ranked list, in rank order: ``{facet: {qpid: int array}}``.

    Refuses candidates outside the pool, duplicates and, unless ``allow_partial``, rankings that
    leave candidates of a pool unranked (:func:`pool_coverage`)."""
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
    if not allow_partial:
        _refuse_partial(ranked, data)
    return out


def csfcube_per_query(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube,
                      allow_partial: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """Per-query metrics (fractions): ``{facet: {qpid: {"map": AP, "ndcg%20": NDCG%20}}}``.

    The input for bootstrap confidence intervals and paired tests. ``allow_partial``: see
    :func:`ranked_grades`.
    """
    grades = ranked_grades(ranked, data, allow_partial)
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
    if max_queries is not None and max_queries < 1:
        raise ValueError(f"max_queries must be at least 1 (or None), got {max_queries}")
    ids = data.splits["all"][split]
    if max_queries is not None:
        kept = {i for f in FACETS for i in data.splits[f][split][:max_queries]}
        ids = [i for i in ids if i in kept]
    pids = sorted({k.split("_")[0] for k in ids} | {c for k in ids for c in data.anns[k.split("_", 1)[1]][k.split("_")[0]][0]})
    row = {p: i for i, p in enumerate(pids)}
    docs = [{"id": p, "title": data.papers[p]["title"], "sentences": data.papers[p]["sentences"],
             "labels": [facet_of_csfcube_label(lab) for lab in data.papers[p]["labels"]]} for p in pids]
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
    ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube, split: str = "test",
    allow_partial: bool = False,
) -> dict[str, dict[str, float]]:
    """Official CSFCube scores of a ranking, in percent: ``{facet|"all": {"map", "ndcg%20"}}``.

    ``split="test"`` gives the reported 2-fold number; ``split="dev"`` the fold1_dev tuning number.
    Per-query values: :func:`csfcube_per_query`. A ranking that leaves candidates of a pool
    unranked is refused unless ``allow_partial`` (then scored as the official scripts do).
    """
    return aggregate_csfcube(csfcube_per_query(ranked, data, allow_partial), data, split=split)


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


def fold_names(split: str) -> tuple[str, ...]:
    """The folds a CSFCube split averages: ``test`` = fold1_test and fold2_test, ``dev`` = fold1_dev.

    >>> fold_names("test"), fold_names("dev")
    (('fold1_test', 'fold2_test'), ('fold1_dev',))
    """
    return ("fold1_test", "fold2_test") if split == "test" else ("fold1_dev",)


def csfcube_strata(data: CSFCube, split: str) -> dict[str, list[list[str]]]:
    """``{"<target>/<metric>": [query ids of each fold]}``: the groups the bootstrap resamples within."""
    return {f"{t}/{m}": [list(data.splits[t][f]) for f in fold_names(split)]
            for t in CSFCUBE_FACETS for m in ("map", "ndcg%20") if t in data.splits}


def csfcube_scores(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube,
                   split: str = "test", allow_partial: bool = False) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """A ranking's official scores and per-query values, in percent:
    ``({facet|"all": {"map", "ndcg%20"}}, {"<facet|all>/<metric>": {"<qpid>_<facet>": value}})``.

    The first is :func:`evaluate_csfcube_rankings`; the second holds every query of the split's
    folds (:func:`fold_names`), in fold order, for bootstrap intervals and paired tests.
    """
    per_facet = csfcube_per_query(ranked, data, allow_partial)
    aggregate = aggregate_csfcube(per_facet, data, split=split)
    keyed = {f"{q}_{f}": m for f, per_q in per_facet.items() for q, m in per_q.items()}
    per_query = {}
    for target, values in aggregate.items():
        ids = [i for fold in fold_names(split) for i in data.splits[target][fold]]
        for m in values:
            per_query[f"{target}/{m}"] = {i: 100.0 * keyed[i][m] for i in ids}
    return aggregate, per_query


def score_csfcube_ranking(ranked: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]], data: CSFCube,
                          split: str = "test", allow_partial: bool = False) -> tuple[dict[str, dict[str, float]], dict[str, object]]:
    """Official scores of a CSFCube ranking, ``{facet|"all": {"map", "ndcg%20"}}`` (percent), and
    the system's entry of a result: ``{"metrics": {"all/map": ...}, "per_query": {...}, "n_queries"}``.

    The one path by which both :func:`~unifar.evaluation.runner.evaluate_all` and ``python -m
    unifar evaluate csfcube`` score a ranking (:func:`csfcube_scores`). A ranking that leaves
    candidates of a pool unranked is refused unless ``allow_partial``.
    """
    scores, per_query = csfcube_scores(ranked, data, split, allow_partial)
    metrics = {f"{target}/{m}": v for target, values in scores.items() for m, v in values.items()}
    return scores, {"metrics": metrics, "per_query": per_query, "n_queries": len(per_query.get("all/map", {}))}
