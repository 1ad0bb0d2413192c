"""CSFCube loader, official metrics, 2-fold aggregation and the golden SPECTER sample rankings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from unifar.datasets.csfcube import CSFCube, default_data_dir, load_csfcube, read_abstracts
from unifar.facets import FACETS
from unifar.evaluation.csfcube import (
    aggregate_csfcube,
    csfcube_per_query,
    evaluate_csfcube_rankings,
    rank_pools,
    ranked_grades,
    read_ranked_pools,
    write_ranked_pools,
)
from unifar.evaluation.metrics import average_precision, fold_mean, ndcg_at_k, ndcg_pct, ranx_per_query

REPO = Path(__file__).resolve().parents[1]
SAMPLE = default_data_dir() / "sample_ranked_pools"
# Official eval_scripts on the shipped SPECTER rankings (MAP, NDCG%20), test split, 2 decimals.
GOLDEN = {
    "background": {"map": 43.95, "ndcg%20": 66.70},
    "method": {"map": 22.44, "ndcg%20": 37.41},
    "result": {"map": 36.79, "ndcg%20": 56.67},
    "all": {"map": 34.23, "ndcg%20": 53.28},
}


@pytest.fixture(scope="module")
def data() -> CSFCube:
    return load_csfcube()


# ----------------------------------------------------------------------------- golden
def test_golden_cli(tmp_path: Path) -> None:
    out = tmp_path / "specter.json"
    proc = subprocess.run(
        [sys.executable, "-m", "unifar", "evaluate", "csfcube", "--rankings", str(SAMPLE), "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(out.read_text())
    assert set(scores) == set(GOLDEN)  # top level is exactly the facets
    rounded = {f: {m: round(v, 2) for m, v in d.items()} for f, d in scores.items()}
    assert rounded == GOLDEN
    assert "53.28" in proc.stdout
    meta = json.loads((tmp_path / "specter.meta.json").read_text())
    assert meta["benchmark"] == "csfcube" and meta["split"] == "test"


def test_golden_dev_split_differs(data: CSFCube) -> None:
    ranked = read_ranked_pools(SAMPLE)
    dev = evaluate_csfcube_rankings(ranked, data, split="dev")
    test = evaluate_csfcube_rankings(ranked, data, split="test")
    assert dev["all"]["map"] != pytest.approx(test["all"]["map"])
    with pytest.raises(ValueError, match="split"):
        evaluate_csfcube_rankings(ranked, data, split="train")


def test_ap_matches_ranx_on_golden_pools(data: CSFCube) -> None:
    """Hand-written AP == ranx's map-l2 when the qrels are the ranked list's own grades."""
    grades = ranked_grades(read_ranked_pools(SAMPLE), data)
    qrels, run, ours = {}, {}, {}
    for facet, per_q in grades.items():
        for qpid, g in per_q.items():
            key = f"{qpid}_{facet}"
            qrels[key] = {f"d{i}": int(x) for i, x in enumerate(g)}
            run[key] = {f"d{i}": float(len(g) - i) for i in range(len(g))}
            ours[key] = average_precision(g)
    theirs = ranx_per_query(qrels, run, ["map-l2"])["map-l2"]
    assert set(theirs) == set(ours) and len(ours) == 50
    np.testing.assert_allclose([theirs[k] for k in ours], list(ours.values()), rtol=0, atol=1e-12)


def test_fixed_width_ids_give_ranx_its_own_values_with_ties() -> None:
    """ranx_per_query renames document ids to one fixed width (a numba compile per id length
    otherwise): every metric equals ranx run on the original ids, ties in the scores included."""
    from ranx import Qrels, Run, evaluate

    rng = np.random.default_rng(0)
    ids = [f"doc-{'x' * int(n)}{i}" for i, n in enumerate(rng.integers(0, 9, 40))]
    qrels, run = {}, {}
    for q in range(30):
        cands = list(rng.choice(ids, 15, replace=False))
        run[f"q{q}"] = {d: float(rng.integers(0, 4)) for d in cands}  # many tied scores
        qrels[f"q{q}"] = {d: int(rng.integers(1, 3)) for d in rng.choice(cands, 3, replace=False)}
    metrics = ["map", "ndcg@5", "mrr@10", "recall@5"]
    ours = ranx_per_query(qrels, run, metrics)
    run_obj = Run(run)
    evaluate(Qrels(qrels), run_obj, metrics)
    for m in metrics:
        assert ours[m] == pytest.approx(dict(run_obj.scores[m]), abs=1e-12)


def test_rankings_cover_pools_except_self_candidate(data: CSFCube) -> None:
    ranked = read_ranked_pools(SAMPLE)
    for facet in FACETS:
        for qpid, (cands, _) in data.anns[facet].items():
            assert {c for c, _ in ranked[facet][qpid]} == set(cands) - {qpid}


# ----------------------------------------------------------------------------- metrics
@pytest.mark.parametrize(
    "grades, expected",
    [
        ([3, 0, 2, 1, 0, 2], (1 + 2 / 3 + 3 / 6) / 3),
        ([0, 0, 2], 1 / 3),
        ([1, 1, 1], 0.0),  # grade 1 is not relevant
        ([], 0.0),
    ],
)
def test_average_precision(grades: list[int], expected: float) -> None:
    assert average_precision(grades) == pytest.approx(expected, abs=1e-15)


def test_ndcg_discount_first_two_ranks_undiscounted() -> None:
    # DCG@3 of [1, 1, 1] = 1 + 1/log2(2) + 1/log2(3); swapping ranks 1 and 2 changes nothing
    assert ndcg_at_k([0, 3, 0, 0], 2) == pytest.approx(ndcg_at_k([3, 0, 0, 0], 2))
    assert ndcg_at_k([0, 0, 3, 0], 3) == pytest.approx(3 / np.log2(3) / 3)


def test_ndcg_pct_cut_and_ideal_from_same_list() -> None:
    grades = [1, 0, 0, 0, 0, 0, 0, 0, 0, 3]  # k = int(0.2 * 10) = 2
    assert ndcg_pct(grades) == pytest.approx(0.25)  # DCG 1 / ideal DCG (3 + 1)
    assert ndcg_pct([2] * 4) == 0.0  # k = 0
    assert ndcg_pct([0] * 20) == 0.0  # no gain at all
    assert ndcg_pct(list(range(9, -1, -1))) == pytest.approx(1.0)


def test_two_fold_aggregation_on_synthetic_split() -> None:
    folds = {"fold1_test": ["a", "b"], "fold2_test": ["c"], "fold1_dev": ["c"], "fold2_dev": ["a", "b"]}
    per_query = {"a": 1.0, "b": 0.0, "c": 1.0}
    assert fold_mean(per_query, folds) == pytest.approx(0.75)  # mean(0.5, 1.0), not 2/3
    assert fold_mean(per_query, folds, split="dev") == pytest.approx(1.0)
    with pytest.raises(KeyError, match="fold2_test"):
        fold_mean({"a": 1.0, "b": 0.0}, folds)


def test_aggregate_csfcube_synthetic(data: CSFCube) -> None:
    """Perfect rankings give 100 everywhere; aggregation follows evaluation_splits.json."""
    per_query = {f: {q: {"map": 1.0, "ndcg%20": 1.0} for q in data.anns[f]} for f in FACETS}
    agg = aggregate_csfcube(per_query, data)
    assert set(agg) == {*FACETS, "all"}
    assert all(v == pytest.approx(100.0) for d in agg.values() for v in d.values())
    one = {"background": per_query["background"]}
    assert set(aggregate_csfcube(one, data)) == {"background"}  # 'all' needs three facets


def test_oracle_and_reversed_rankings(data: CSFCube) -> None:
    grade = {f: {q: dict(zip(*data.anns[f][q])) for q in data.anns[f]} for f in FACETS}
    oracle = rank_pools(lambda f, q, cands: [grade[f][q][c] for c in cands], data)
    worst = rank_pools(lambda f, q, cands: [-grade[f][q][c] for c in cands], data)
    best, low = evaluate_csfcube_rankings(oracle, data), evaluate_csfcube_rankings(worst, data)
    assert best["all"]["ndcg%20"] == pytest.approx(100.0)
    assert best["all"]["map"] == pytest.approx(100.0)
    assert low["all"]["map"] < 15.0
    assert "8781666" in [c for c, _ in oracle["background"]["8781666"]]  # README recipe: whole pool
    dropped = rank_pools(lambda f, q, cands: np.zeros(len(cands)), data, exclude_query=True)
    assert all(qpid not in [c for c, _ in dropped[f][qpid]] for f in FACETS for qpid in dropped[f])
    assert [c for c, _ in dropped["method"]["1791179"]] == [c for c in data.anns["method"]["1791179"][0]]  # stable ties


def test_rankings_round_trip_and_errors(data: CSFCube, tmp_path: Path) -> None:
    ranked = read_ranked_pools(SAMPLE)
    write_ranked_pools(ranked, tmp_path, "copy")
    assert read_ranked_pools(tmp_path) == ranked
    write_ranked_pools(ranked, tmp_path, "other")
    with pytest.raises(ValueError, match="several rankers"):
        read_ranked_pools(tmp_path)
    assert read_ranked_pools(tmp_path, "other") == ranked
    (tmp_path / "test-pid2pool-csfcube-other-method-ranked.json").unlink()
    with pytest.raises(FileNotFoundError, match="method"):
        read_ranked_pools(tmp_path, "other")
    bad = {f: dict(per_q) for f, per_q in ranked.items()}
    q = next(iter(bad["method"]))
    bad["method"][q] = [("not-a-candidate", 1.0)] + list(bad["method"][q])
    with pytest.raises(ValueError, match="not annotated"):
        csfcube_per_query(bad, data)
    del bad["method"][q]
    bad["method"] = {k: v for k, v in ranked["method"].items() if k != q}
    with pytest.raises(ValueError, match="lack"):
        evaluate_csfcube_rankings(bad, data)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rankings", "{tmp}/missing"], "folder not found"),
        (["--rankings", "{tmp}"], "no files named"),
        ([], "give --rankings"),
        (["--rankings", "{tmp}", "--method", "mean"], "--method applies to --model"),
        (["--method", "bm25", "--no-query-title"], "facet-query only"),
    ],
)
def test_cli_errors_are_one_line(argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from unifar.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "csfcube", *(a.format(tmp=tmp_path) for a in argv)])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("unifar evaluate: error:") and message in last


# ----------------------------------------------------------------------------- loader
def test_loader_contents(data: CSFCube) -> None:
    assert len(data.papers) == 4205
    assert [len(data.anns[f]) for f in FACETS] == [16, 17, 17]
    assert sum(len(c) for f in FACETS for c, _ in data.anns[f].values()) == 6244
    assert len(data.query_pids) == 34
    assert all(data.papers[q]["is_query"] for q in data.query_pids)
    for f in FACETS:  # every query-facet has at least one sentence of its facet
        assert all(data.facet_sentences(q, f) for q in data.anns[f])
    assert len(data.splits["all"]["fold1_test"]) == 26


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    good = {"paper_id": "1", "title": "T", "abstract": ["s"], "pred_labels": ["method_label"]}
    path = tmp_path / "abstracts-csfcube-preds.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"paper_id": "2", "title": \n')
    with pytest.raises(ValueError, match=r"abstracts-csfcube-preds\.jsonl:2: malformed JSON"):
        read_abstracts(path)
    path.write_text(json.dumps({**good, "pred_labels": []}) + "\n")
    with pytest.raises(ValueError, match=r":1: field 'pred_labels'"):
        read_abstracts(path)


def test_upstream_format_without_is_query(tmp_path: Path) -> None:
    src = default_data_dir()
    for name in ("queries-release.csv", "evaluation_splits.json", *(f"test-pid2anns-csfcube-{f}.json" for f in FACETS)):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    with open(src / "abstracts-csfcube-preds.jsonl", encoding="utf-8") as fin, open(
        tmp_path / "abstracts-csfcube-preds.jsonl", "w", encoding="utf-8"
    ) as fout:
        for line in fin:
            rec = json.loads(line)
            rec.pop("is_query")
            rec["pred_labels_truncated"] = rec["pred_labels"]
            fout.write(json.dumps(rec) + "\n")
    data = load_csfcube(tmp_path)
    assert sum(p["is_query"] for p in data.papers.values()) == 34
    with pytest.raises(FileNotFoundError, match="not found"):
        load_csfcube(tmp_path / "nowhere")


def test_split_papers_with_max_queries(data: CSFCube) -> None:
    """max_queries keeps the first query facets of each facet's split and only their pools."""
    from unifar.evaluation.csfcube import csfcube_split_papers

    all_docs, _ = csfcube_split_papers(data, "fold1_dev")
    docs, split_map = csfcube_split_papers(data, "fold1_dev", max_queries=1)
    ids = [data.splits[f]["fold1_dev"][0] for f in FACETS]
    pools = {c for i in ids for c in data.anns[i.split("_", 1)[1]][i.split("_")[0]][0]}
    assert {d["id"] for d in docs} == pools | {i.split("_")[0] for i in ids}
    assert len(docs) < len(all_docs)
    rng = np.random.default_rng(0)
    emb = __import__("torch").from_numpy(rng.normal(size=(len(docs), len(FACETS), 8)))
    got = split_map(emb)
    assert set(got) == {*FACETS, "all"}
    # "all" is the mean of the three kept query facets (one per facet)
    assert got["all"] == pytest.approx(np.mean([got[f] for f in FACETS]), abs=0.01)
    with pytest.raises(ValueError, match="max_queries"):
        csfcube_split_papers(data, "fold1_dev", max_queries=0)
