"""evaluate_all, its JSON, tables, the paired comparison, the bootstrap and the `evaluate all` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from unifar.datasets.csfcube import default_data_dir
from unifar.evaluation import report, runner, systems
from unifar.evaluation.bootstrap import bootstrap_ci, paired_bootstrap, within_noise
from unifar.evaluation.csfcube import read_ranked_pools
from unifar.evaluation.dense import UniFARRetriever
from unifar.evaluation.retrievers import BM25Retriever, Retriever

FIXTURES = Path(__file__).parent / "fixtures"
DORIS = FIXTURES / "doris_mae_mini.json"


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    values = np.random.default_rng(3).uniform(0, 100, size=60)
    ci = bootstrap_ci(values, seed=7)
    assert ci.low < ci.mean < ci.high and ci.mean == pytest.approx(values.mean()) and ci.n == 60
    assert bootstrap_ci(values, seed=7) == ci
    assert bootstrap_ci(values, seed=8) != ci
    # roughly the normal-theory interval of a mean
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * se, rel=0.2)


def test_bootstrap_strata_resample_within_folds():
    values = {"a": 10.0, "b": 20.0, "c": 0.0, "d": 0.0, "e": 30.0}
    ci = bootstrap_ci(values, strata=[["a", "b"], ["c", "d", "e"]])
    assert ci.mean == pytest.approx((15.0 + 10.0) / 2) and ci.low <= ci.mean <= ci.high
    with pytest.raises(KeyError):
        bootstrap_ci(values, strata=[["a", "zz"]])


def test_paired_bootstrap_detects_a_consistent_gain_and_noise():
    rng = np.random.default_rng(0)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(20, 80, size=80))}
    better = {q: v + 3.0 + rng.normal(0, 1) for q, v in base.items()}
    r = paired_bootstrap(better, base)
    assert r.low > 0 and r.flip == 0.0 and not within_noise(r) and r.n == 80
    noisy = {q: v + rng.normal(0, 5) for q, v in base.items()}
    r2 = paired_bootstrap(noisy, base, seed=1)
    assert r2.low <= r2.diff <= r2.high
    assert within_noise(r2) == (r2.low <= 0 <= r2.high)
    with pytest.raises(KeyError, match="unpaired"):
        paired_bootstrap({"a": 1.0}, {"b": 1.0})


# ----------------------------------------------------------------------------- evaluate_all
class SpecterOrder(Retriever):
    """CSFCube only: scores = the order of the shipped SPECTER rankings (golden numbers)."""

    name, label = "specter", "SPECTER sample rankings"

    @property
    def index_key(self):
        return "specter"

    def index(self, documents):  # pragma: no cover
        raise NotImplementedError

    def score(self, questions, index):  # pragma: no cover
        raise NotImplementedError

    def csfcube_score_fn(self, data, cache=None):
        ranked = read_ranked_pools(default_data_dir() / "sample_ranked_pools")
        pos = {f: {q: {c: -i for i, (c, _) in enumerate(items)} for q, items in per_q.items()} for f, per_q in ranked.items()}
        return lambda facet, qpid, cands: np.array([pos[facet][qpid][c] for c in cands], dtype=float)


@pytest.fixture(scope="module")
def tiny_unifar(tokenizer):
    from .conftest import tiny_bert

    from unifar import UniFAR, UniFARConfig

    return UniFAR(UniFARConfig(base_model="tiny-bert", num_heads=4), base_model=tiny_bert(tokenizer), tokenizer=tokenizer, device="cpu")


@pytest.fixture(scope="module")
def result(tiny_unifar):
    retrievers = [BM25Retriever(), UniFARRetriever(tiny_unifar, name="unifar-untrained", batch_size=8)]
    return runner.evaluate_all(
        "tiny", benchmarks=["doris_mae", "litsearch"], doris_mae=DORIS, doris_levels=("query", "subquery_2"),
        litsearch=FIXTURES / "litsearch", retrievers=retrievers, n_resamples=200, show_progress=False, log=None,
    )


def test_result_structure_and_json_round_trip(result, tmp_path):
    assert result["format"] == "unifar-eval/1"
    assert list(result["benchmarks"]) == ["doris_mae_query", "doris_mae_subquery_2", "litsearch"]
    entry = result["benchmarks"]["doris_mae_query"]
    assert entry["kind"] == "qdoc" and entry["protocol"]["metrics"] == ["recall@5", "r-precision", "map"]
    assert entry["data"]["questions"] == 2 and entry["data"]["path"].endswith("doris_mae_mini.json")
    for name, res in entry["systems"].items():
        assert set(res["metrics"]) == set(res["ci"]) == set(res["per_query"])
        for m, v in res["metrics"].items():
            lo, hi = res["ci"][m]
            assert lo <= v <= hi and v == pytest.approx(np.mean(list(res["per_query"][m].values())))
        assert set(res["seconds"]) >= {"index", "score", "rank_eval", "total"}
    # the DORIS-MAE levels share one collection: encoded once per system
    sub = result["benchmarks"]["doris_mae_subquery_2"]["systems"]
    assert sub["unifar-untrained"]["index_reused"] and not entry["systems"]["unifar-untrained"]["index_reused"]
    lit = result["benchmarks"]["litsearch"]["systems"]["bm25"]
    assert set(lit["subsets"]) == {"specificity=0", "specificity=1"} and lit["subsets"]["specificity=1"]["n"] == 2
    meta = result["meta"]
    assert set(meta) >= {"run", "wall_seconds", "bootstrap", "options", "systems", "data_load_seconds", "ranx_warmup_seconds"}
    assert {"commit", "dirty", "date", "machine"} <= set(meta["run"])  # unifar.runtime.run_facts
    assert meta["bootstrap"]["n_resamples"] == 200
    path = runner.save_results(result, tmp_path / "r.json")
    assert runner.load_results(path) == json.loads(json.dumps(result))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a unifar evaluation result"):
        runner.load_results(tmp_path / "bad.json")


def test_tables_and_comparison(result):
    long = report.results_table(result)
    assert list(long.columns) == ["benchmark", "system", "label", "metric", "value", "ci_low", "ci_high", "n_queries", "seconds"]
    assert len(long) == 2 * (3 + 3 + 12)
    wide = report.results_table(result, wide=True)
    assert wide.loc[("litsearch", "bm25"), "recall@5"] == pytest.approx(result["benchmarks"]["litsearch"]["systems"]["bm25"]["metrics"]["recall@5"])
    assert any("[specificity=1]" in m for m in report.results_table(result, subsets=True)["metric"])
    text = report.format_results(result)
    assert "doris_mae_query" in text and "unifar-untrained" in text and "r-precision" in text
    cmp = report.compare_systems(result, "litsearch", "bm25", "unifar-untrained")
    assert list(cmp["metric"]) == list(result["benchmarks"]["litsearch"]["systems"]["bm25"]["metrics"])
    assert (cmp["ci_low"] <= cmp["diff"]).all() and (cmp["diff"] <= cmp["ci_high"]).all()
    with pytest.raises(KeyError, match="no system"):
        report.compare_systems(result, "litsearch", "bm25", "nope")


def test_csfcube_through_the_suite_gives_the_golden_numbers():
    res = runner.evaluate_all(benchmarks=["csfcube"], retrievers=[SpecterOrder()], exclude_self=True,
                             n_resamples=100, show_progress=False, log=None)
    entry = res["benchmarks"]["csfcube"]
    m = entry["systems"]["specter"]["metrics"]
    assert round(m["all/map"], 2) == 34.23 and round(m["all/ndcg%20"], 2) == 53.28
    assert round(m["background/map"], 2) == 43.95 and round(m["result/ndcg%20"], 2) == 56.67
    per_q = entry["systems"]["specter"]["per_query"]["all/map"]
    assert len(per_q) == 50 and all(k.rsplit("_", 1)[1] in ("background", "method", "result") for k in per_q)
    lo, hi = entry["systems"]["specter"]["ci"]["all/map"]
    assert lo < m["all/map"] < hi
    assert [len(s) for s in entry["strata"]["all/map"]] == [26, 24]  # fold1_test, fold2_test
    dev = runner.evaluate_all(benchmarks=["csfcube"], retrievers=[SpecterOrder()], exclude_self=True,
                             csfcube_split="dev", n_resamples=50, show_progress=False, log=None)
    assert len(dev["benchmarks"]["csfcube"]["systems"]["specter"]["per_query"]["all/map"]) == 24  # fold1_dev


class ReversedSpecter(SpecterOrder):
    name, label = "reversed", "SPECTER sample rankings, reversed"

    def csfcube_score_fn(self, data, cache=None):
        fn = super().csfcube_score_fn(data, cache)
        return lambda facet, qpid, cands: -fn(facet, qpid, cands)


def test_compare_systems_on_one_csfcube_fold():
    """fold1_dev is fold2_test, so a comparison can be restricted to the untouched fold1_test."""
    from unifar.datasets.csfcube import load_csfcube

    cube = load_csfcube()
    assert set(cube.splits["all"]["fold1_dev"]) == set(cube.splits["all"]["fold2_test"])
    res = runner.evaluate_all(benchmarks=["csfcube"], retrievers=[SpecterOrder(), ReversedSpecter()], exclude_self=True,
                             n_resamples=100, show_progress=False, log=None)
    entry = res["benchmarks"]["csfcube"]
    assert entry["strata_names"] == ["fold1_test", "fold2_test"]
    both = report.compare_systems(res, "csfcube", "specter", "reversed", metrics=["all/map"]).iloc[0]
    f1 = report.compare_systems(res, "csfcube", "specter", "reversed", metrics=["all/map"], fold="fold1_test").iloc[0]
    per_q = entry["systems"]["specter"]["per_query"]["all/map"]
    ids = cube.splits["all"]["fold1_test"]
    assert f1["n"] == len(ids) == 26 and f1["a"] == pytest.approx(np.mean([per_q[i] for i in ids]))
    assert both["a"] == pytest.approx(34.23, abs=0.005) and f1["a"] != pytest.approx(both["a"])
    assert f1["diff"] > 0 and not f1["within_noise"]  # a ranking beats its own reverse
    with pytest.raises(KeyError, match="no fold"):
        report.compare_systems(res, "csfcube", "specter", "reversed", metrics=["all/map"], fold="fold1_dev")
    # results written before the fold names were stored: the names follow the protocol's split
    del entry["strata_names"]
    assert report.fold_strata(entry, "all/map")["fold1_test"] == ids


def test_build_retrievers_systems_and_errors(tiny_unifar):
    rs, facts = systems.build_retrievers(tiny_unifar, systems=["bm25", "unifar"], show_progress=False)
    assert [r.name for r in rs] == ["bm25", "unifar-trained"] and facts["trained"]
    with pytest.raises(ValueError, match="unknown systems"):
        systems.build_retrievers("minilm", systems=["bm26"])
    with pytest.raises(ValueError, match="need a base encoder"):
        systems.build_retrievers(None, systems=["mean"])
    with pytest.raises(ValueError, match="unknown benchmarks"):
        runner.evaluate_all(benchmarks=["trec"], retrievers=[], log=None)


# ----------------------------------------------------------------------------- CLI
def test_cli_evaluate_all_writes_json(tiny_unifar, tmp_path, capsys):
    from unifar.cli import main

    ckpt = tiny_unifar.save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "all.json"
    main(["evaluate", "all", "--model", str(ckpt), "--systems", "bm25,unifar", "--benchmarks", "doris_mae",
          "--doris-mae", str(DORIS), "--doris-levels", "query", "--n-resamples", "50", "--no-progress", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "doris_mae_query" in printed and "unifar-trained" in printed and "wrote" in printed
    res = runner.load_results(out)
    assert set(res["benchmarks"]["doris_mae_query"]["systems"]) == {"bm25", "unifar-trained"}
    assert res["meta"]["trained"] and res["meta"]["model"] == "ckpt" and res["meta"]["bootstrap"]["n_resamples"] == 50


@pytest.mark.parametrize(
    "argv, message",
    [
        (["all", "--systems", "bm25", "--method", "mean"], "--method apply to 'evaluate csfcube'"),
        (["all"], "give --model"),
        (["all", "--systems", "bm25", "--n-resamples", "0"], "--n-resamples must be positive"),
        (["all", "--systems", "bm25", "--batch-size", "0"], "--batch-size must be positive, got 0"),
        (["all", "--model", "minilm", "--max-length", "4"], "--max-length must be at least 8, got 4"),
        (["csfcube", "--model", "minilm", "--systems", "bm25"], "--systems apply to 'evaluate all'"),
    ],
)
def test_cli_all_errors_are_one_line(argv, message, capsys):
    from unifar.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["evaluate", *argv])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("unifar evaluate: error:") and message in last


def test_eval_options_check_their_values_and_name_unknown_overrides():
    opts = runner.EvalOptions(csfcube_split="dev", n_resamples=50)
    assert runner.EvalOptions.with_overrides(opts, {"seed": 3}) == runner.EvalOptions(
        csfcube_split="dev", n_resamples=50, seed=3)
    assert opts.loader_options()["csfcube_split"] == "dev" and opts.recorded()["doris_levels"] is None
    with pytest.raises(ValueError, match="scirepeval_part must be"):
        runner.EvalOptions(scirepeval_part="val")
    with pytest.raises(TypeError, match=r"unknown evaluation option\(s\) \['n_resample'\]; the options are base_model"):
        runner.evaluate_all(None, ["bm25"], ["cranfield"], n_resample=10)


def test_retrievers_on_one_frozen_base_share_token_states(make_model):
    from unifar.evaluation.dense import UniFARRetriever
    from unifar.evaluation.retrievers import BM25Retriever
    from unifar.evaluation.systems import share_frozen_base

    a, b, c = make_model(), make_model(seed=5), make_model()
    b.base = a.base
    ra, rb, rc = UniFARRetriever(a, name="x"), UniFARRetriever(b, name="y"), UniFARRetriever(c, name="z")
    cache = share_frozen_base([BM25Retriever(), ra, rb, rc])
    assert cache is not None and ra.state_cache is cache and rb.state_cache is cache
    # c's tiny BERT was initialised separately: other weights, no sharing
    assert rc.state_cache is None or torch.equal(next(iter(c.base.parameters())), next(iter(a.base.parameters())))
    docs = [{"title": "T", "sentences": ["One sentence here.", "Another one."]}]
    ra.index(docs), rb.index(docs)
    assert cache.misses == 1 and cache.hits == 1


def test_a_single_model_reads_the_frozen_base_states_saved_on_disk(make_model, tmp_path):
    """With a cache folder, a lone UniFAR retriever (a second training seed evaluated on its own)
    reads the states an earlier evaluation of another model on the same base saved there."""
    from unifar.evaluation.dense import UniFARRetriever
    from unifar.evaluation.systems import share_frozen_base

    a, b = make_model(), make_model(seed=5)
    b.base = a.base
    docs = [{"title": "T", "sentences": ["One sentence here.", "Another one."]}]
    first = share_frozen_base([UniFARRetriever(a, name="a")], tmp_path)
    UniFARRetriever(a, name="a", state_cache=first).index(docs)
    assert first.misses == 1 and first.save() is not None
    rb = UniFARRetriever(b, name="b")
    second = share_frozen_base([rb], tmp_path)
    assert rb.state_cache is second and len(second) == 1
    rb.index(docs)
    assert second.misses == 0 and second.hits == 1
    assert share_frozen_base([UniFARRetriever(b, name="b")]) is None  # no folder: nothing to share


def test_bases_that_differ_only_in_their_top_layer_share_the_states_below(make_model):
    """A model trained with --train-top-layers 1 and its untrained twin share the states entering
    the last layer; each runs its own last layer, so encodings equal those without the cache."""
    import copy

    from unifar.evaluation.dense import UniFARRetriever
    from unifar.evaluation.systems import share_frozen_base

    a = make_model()
    top = copy.deepcopy(a)
    with torch.no_grad():
        top.base.encoder.layer[-1].output.dense.weight.mul_(1.5)
    emb = copy.deepcopy(a)
    with torch.no_grad():
        emb.base.embeddings.word_embeddings.weight.mul_(1.5)
    docs = [{"title": "T", "sentences": ["One sentence here.", "Another one, a bit longer than the first."]},
            {"title": "", "sentences": ["Short."]}]
    alone = top.encode_documents(docs).embeddings
    ra, rt, re_ = UniFARRetriever(a, name="a"), UniFARRetriever(top, name="t"), UniFARRetriever(emb, name="e")
    cache = share_frozen_base([ra, rt, re_])
    assert cache is not None and cache.top_layers == 1
    assert ra.state_cache is cache and rt.state_cache is cache and re_.state_cache is None  # embeddings differ
    ra.index(docs)
    shared = rt.index(docs)
    assert cache.hits == len(docs) and torch.allclose(shared, alone, atol=1e-5)
    assert not torch.allclose(shared, ra.index(docs), atol=1e-3)  # the trained top layer is used


def test_csfcube_split_papers_scores_like_the_whole_collection():
    """Encoding only one split's papers gives each of its queries the MAP it has in the full run."""
    from unifar.datasets.csfcube import load_csfcube
    from unifar.facets import FACETS
    from unifar.evaluation.csfcube import csfcube_per_query, csfcube_split_papers, rank_pools

    cube = load_csfcube()
    docs, split_map = csfcube_split_papers(cube, "fold1_dev")
    ids = cube.splits["all"]["fold1_dev"]
    assert {i.split("_")[0] for i in ids} <= {d["id"] for d in docs}
    gen = torch.Generator().manual_seed(0)
    vec = {p: torch.randn(len(FACETS), 8, generator=gen) for p in sorted(cube.papers)}
    emb = torch.stack([vec[d["id"]] for d in docs])
    full = csfcube_per_query(rank_pools(lambda f, q, c: (torch.stack([vec[x] for x in c])[:, FACETS.index(f)]
                                                          @ vec[q][FACETS.index(f)]).numpy(), cube), cube)
    keyed = {f"{q}_{f}": m["map"] for f, per_q in full.items() for q, m in per_q.items()}
    got = split_map(emb)
    assert got["all"] == round(100 * float(np.mean([keyed[i] for i in ids])), 2)
    assert got["method"] == round(100 * float(np.mean([keyed[i] for i in cube.splits["method"]["fold1_dev"]])), 2)


# ----------------------------------------------------------------------------- chapter helpers
def test_strip_timings_keeps_every_measurement(result):
    stripped = report.strip_timings(result)
    assert "seconds" in result["benchmarks"]["litsearch"]["systems"]["bm25"]  # the input is untouched
    assert not set(stripped["meta"]) & set(report.RUN_FACT_KEYS) and stripped["meta"]["bootstrap"] == result["meta"]["bootstrap"]
    for bench, entry in stripped["benchmarks"].items():
        for name, res in entry["systems"].items():
            assert "seconds" not in res
            full = result["benchmarks"][bench]["systems"][name]
            assert res["metrics"] == full["metrics"] and res["ci"] == full["ci"] and res["per_query"] == full["per_query"]
    assert json.loads(json.dumps(stripped)) == stripped
    long = report.results_table(stripped)
    assert long["seconds"].isna().all() and long["value"].tolist() == report.results_table(result)["value"].tolist()
    assert "nan" in report.format_results(stripped)
    a = report.compare_systems(stripped, "litsearch", "bm25", "unifar-untrained")
    assert a.equals(report.compare_systems(result, "litsearch", "bm25", "unifar-untrained"))


def test_verdict_table_and_seed_spread():
    res = runner.evaluate_all(benchmarks=["csfcube"], retrievers=[SpecterOrder(), ReversedSpecter()], exclude_self=True,
                             n_resamples=100, show_progress=False, log=None)
    table = report.verdict_table(res, "specter", ["reversed", "bm25"], n_resamples=100)  # no bm25 here: skipped
    assert list(table["metric"]) == list(report.HEADLINE_METRICS["csfcube"]) and set(table["vs"]) == {"reversed"}
    assert (table["fold"] == "").all() and table["n"].tolist() == [50, 16, 17, 17]  # all, then per facet
    one = report.compare_systems(res, "csfcube", "specter", "reversed", metrics=["all/map"], n_resamples=100).iloc[0]
    assert table.iloc[0]["diff"] == pytest.approx(one["diff"]) and table.iloc[0]["ci_low"] == pytest.approx(one["ci_low"])
    assert table.iloc[0]["verdict"] == "better"  # a ranking beats its reverse beyond noise
    back = report.verdict_table(res, "reversed", ["specter"], metrics={"csfcube": ["all/map"]}, n_resamples=100)
    assert back["verdict"].tolist() == ["worse"]
    folds = report.verdict_table(res, "specter", ["reversed"], n_resamples=100, folds=["fold1_test", "fold2_test"])
    assert folds.groupby("fold")["n"].first().to_dict() == {"fold1_test": 26, "fold2_test": 24}  # all/map
    assert report.verdict_table(res, "unifar-trained").empty  # no such system: no rows, same columns
    assert list(report.verdict_table(res, "unifar-trained").columns) == list(table.columns)

    seeds = {"seed0": res, "seed1": report.strip_timings(res)}
    spread = report.seed_spread(seeds, system="specter")
    assert list(spread["metric"]) == list(report.HEADLINE_METRICS["csfcube"])
    row = spread.iloc[0]
    assert row["seed0"] == row["seed1"] == row["mean"] == row["min"] == row["max"] and row["range"] == 0 and row["n_seeds"] == 2
    with pytest.raises(KeyError, match="no system"):
        report.seed_spread(seeds, system="unifar-trained")
