"""Hybrid retrieval as an evaluation system (unifar.evaluation.hybrid): weights from dev only."""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import pytest

from unifar.datasets.csfcube import load_csfcube
from unifar.datasets.schema import QDocBenchmark, questions_to_dataset, to_dataset
from unifar.evaluation import hybrid, report, runner, systems
from unifar.evaluation.benchmarks import LoadedBenchmark
from unifar.evaluation.csfcube import rank_pools
from unifar.evaluation.labelled_bm25 import LabelledFacetBM25Retriever
from unifar.evaluation.qdoc import QDocProtocol
from unifar.evaluation.retrievers import FacetBM25Retriever, Retriever


class Fixed(Retriever):
    """A system whose CSFCube score function (and q-doc scores) are given."""

    label = "fixed"

    def __init__(self, key: str, fn=None, qdoc_fn=None) -> None:
        self.key, self.fn, self.qdoc_fn, self.name = key, fn, qdoc_fn, key

    @property
    def index_key(self) -> str:
        return self.key

    def index(self, documents):
        return [d["id"] for d in documents]

    def score(self, questions, index):
        return np.array([[self.qdoc_fn(q, d) for d in index] for q in questions], dtype=float)

    def csfcube_score_fn(self, data, cache=None):
        return self.fn


def _noise(tag: str):
    """Deterministic pseudo-random scores of (facet, query, candidate)."""

    def fn(facet, qpid, cands):
        return np.array(
            [
                int(hashlib.sha256(f"{tag}{facet}{qpid}{c}".encode()).hexdigest()[:8], 16)
                for c in cands
            ],
            dtype=float,
        )

    return fn


@pytest.fixture(scope="module")
def cube():
    return load_csfcube()


def _grade_fn(data, noise_share: float):
    """Scores that follow the gold grades, blurred by noise (a dense part that knows something)."""
    grade = {f: {q: dict(zip(*data.anns[f][q])) for q in data.anns[f]} for f in data.anns}
    noise = _noise("g")

    def fn(facet, qpid, cands):
        g = np.array([grade[facet][qpid][c] for c in cands], dtype=float)
        return g + noise_share * noise(facet, qpid, cands) / 2**32

    return fn


def _fused(cube, weights=None, step=0.25):
    dense, lexical = Fixed("d", _grade_fn(cube, 3.0)), Fixed("l", _noise("l"))
    return hybrid.FusedRetriever("h", "h", [dense, lexical], weights=weights, step=step)


def test_weights_are_chosen_on_fold1_dev_only(cube):
    r = _fused(cube)
    r.csfcube_score_fn(cube, {})
    chosen = r.choices["csfcube"]
    assert [c["weights"] for c in chosen["dev_curve"]] == [
        list(w) for w in hybrid.weight_grid(2, 0.25)
    ]
    assert chosen["weights"] == [1.0, 0.0]  # the noise part only hurts
    # scrambling the judgements of every query facet outside fold1_dev changes nothing ...
    dev = set(cube.splits["all"]["fold1_dev"])
    other = copy.deepcopy(cube)
    for f, per_q in other.anns.items():
        for q, (cands, grades) in per_q.items():
            if f"{q}_{f}" not in dev:
                per_q[q] = (cands, [3 - g for g in grades])
    r2 = _fused(cube)  # its dense part reads the original grades: only the judgements differ
    r2.csfcube_score_fn(other, {})
    assert r2.choices["csfcube"] == chosen
    # ... while scrambling fold1_dev's own judgements does change the dev curve
    for f, per_q in other.anns.items():
        for q, (cands, grades) in per_q.items():
            if f"{q}_{f}" in dev:
                per_q[q] = (cands, [3 - g for g in grades])
    r3 = _fused(cube)
    r3.csfcube_score_fn(other, {})
    assert r3.choices["csfcube"]["dev_curve"] != chosen["dev_curve"]


def test_end_weights_give_the_parts_own_rankings(cube):
    dense, lexical = _grade_fn(cube, 3.0), _noise("l")
    for weights, alone in (((1.0, 0.0), dense), ((0.0, 1.0), lexical)):
        r = _fused(cube, weights=weights)
        fused, own = rank_pools(r.csfcube_score_fn(cube, {}), cube), rank_pools(alone, cube)
        assert {f: {q: [c for c, _ in v] for q, v in p.items()} for f, p in fused.items()} == {
            f: {q: [c for c, _ in v] for q, v in p.items()} for f, p in own.items()
        }
        assert r.choices["csfcube"]["dev_curve"] == []  # fixed weights: nothing tuned


def test_evaluate_all_records_the_choice_and_reports_test(cube):
    res = runner.evaluate_all(
        benchmarks=["csfcube"],
        retrievers=[_fused(cube)],
        n_resamples=50,
        show_progress=False,
        log=None,
    )
    described = res["meta"]["systems"]["h"]["weights_by_benchmark"]["csfcube"]
    assert (
        described["chosen_on"] == "csfcube fold1_dev, all/map" and len(described["dev_curve"]) == 4
    )
    assert (
        len(res["benchmarks"]["csfcube"]["systems"]["h"]["per_query"]["all/map"]) == 50
    )  # the 2-fold test
    table = hybrid.hybrid_table(res)  # chapter 5's hybrid table
    cs = res["benchmarks"]["csfcube"]
    fold1_test = report.fold_strata(cs, "all/map")["fold1_test"]
    per_query = cs["systems"]["h"]["per_query"]["all/map"]
    assert table.loc["h", "CSFCube MAP"] == cs["systems"]["h"]["metrics"]["all/map"]
    assert table.loc["h", "fold1_test MAP"] == pytest.approx(np.mean([per_query[q] for q in fold1_test]))
    assert 0 < len(fold1_test) < len(per_query)
    assert table.loc["h", "W (fold1_dev)"] == hybrid.relative_weights(described["weights"])[-1]


def _tiny_qdoc(name: str, flip: bool = False) -> QDocBenchmark:
    docs = to_dataset(
        [{"id": f"d{i}", "title": "", "sentences": [f"text {i}"], "source": "t"} for i in range(6)]
    )
    qs = questions_to_dataset([{"qid": f"q{i}", "text": f"q{i}", "source": "t"} for i in range(4)])
    qrels = {f"q{i}": {f"d{(5 - i) if flip else i}": 1} for i in range(4)}
    return QDocBenchmark(name, docs, qs, qrels)


def test_qdoc_weights_come_from_the_dev_half(monkeypatch):
    # the lexical part knows the answer (d_i for q_i), the dense part prefers d_{5-i}
    dense = Fixed("d", qdoc_fn=lambda q, d: float(int(q[1:]) + int(d[1:]) == 5))
    lexical = Fixed("l", qdoc_fn=lambda q, d: float(q[1:] == d[1:]))
    protocol = QDocProtocol("t", metrics=("mrr@10",))
    test = LoadedBenchmark("scirepeval", "qdoc", _tiny_qdoc("test"), protocol, "c")
    # weights relative to the dense part: (1, 3) is the grid's most lexical point at step 1/4
    for flip, expected in ((False, [1.0, 3.0]), (True, [1.0, 0.0])):
        monkeypatch.setattr(
            hybrid, "qdoc_dev_half", lambda name, opts, flip=flip: _tiny_qdoc("dev", flip)
        )
        r = hybrid.FusedRetriever("h", "h", [dense, lexical], [dense, lexical], step=0.25)
        with pytest.raises(ValueError, match="no weights chosen"):
            r.score(["q0"], r.index(test.data.documents.to_list()))
        r.prepare(test, {})
        assert r.choices["scirepeval"]["weights"] == expected  # whatever the test qrels say
    monkeypatch.setattr(hybrid, "qdoc_dev_half", lambda name, opts: None)
    r.prepare(LoadedBenchmark("cranfield", "qdoc", _tiny_qdoc("c"), protocol, "c"), {})
    assert (
        r.choices["cranfield"]["weights"] == [1.0, 1.0]
        and "no dev half" in r.choices["cranfield"]["chosen_on"]
    )
    assert hybrid.qdoc_dev_half("cranfield", {}) is None


def test_labelled_facet_bm25_with_csfcube_labels_equals_facet_bm25(cube, tmp_path, monkeypatch):
    from unifar.facets import facet_of_csfcube_label

    (tmp_path / "labeller.json").write_text("{}")
    lab = LabelledFacetBM25Retriever(tmp_path)
    monkeypatch.setattr(
        lab,
        "labels",
        lambda papers: {
            p: [facet_of_csfcube_label(x) for x in d["labels"]] for p, d in papers.items()
        },
    )
    q = next(iter(cube.anns["method"]))
    cands = cube.anns["method"][q][0]
    ours = lab.csfcube_score_fn(cube, {})("method", q, cands)
    assert np.allclose(ours, FacetBM25Retriever().csfcube_score_fn(cube, {})("method", q, cands))
    assert lab.agreement == 100.0 and lab.index_key != FacetBM25Retriever().index_key


def test_system_names_and_errors(tiny_unifar, tmp_path):
    rs, _ = systems.build_retrievers(
        tiny_unifar, systems=["unifar", "hybrid-unifar"], show_progress=False
    )
    assert [r.name for r in rs] == ["unifar-trained", "hybrid-unifar-trained"]
    assert (
        rs[0] in rs[1].parts and rs[1].qdoc
    )  # the hybrid fuses the very model of the unifar system
    with pytest.raises(ValueError, match="unknown systems"):
        systems.build_retrievers("minilm", systems=["hybrid-bm25"])
    with pytest.raises(ValueError, match="needs labeller="):
        systems.build_retrievers(None, systems=["hybrid-mean-labeller"], base_model="minilm")
    with pytest.raises(FileNotFoundError, match="labeller.json"):
        hybrid.hybrid_system(
            "hybrid-mean-labeller", lambda k: Fixed(k), labeller=tmp_path / "missing"
        )
    with pytest.raises(ValueError, match="unknown fusion"):
        hybrid.FusedRetriever("h", "h", [Fixed("a")], fusion="max")


@pytest.fixture(scope="module")
def tiny_unifar(tokenizer):
    from unifar import UniFAR, UniFARConfig

    from .conftest import tiny_bert

    return UniFAR(
        UniFARConfig(base_model="tiny-bert", num_heads=4),
        base_model=tiny_bert(tokenizer),
        tokenizer=tokenizer,
        device="cpu",
    )


def test_relative_weights_rank_as_the_shares_they_came_from():
    # one convention (z(dense) + W z(lexical)) for the grid, the CLI and the results of earlier
    # versions, which wrote shares summing to 1: any positive multiple ranks the same
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=50), rng.gamma(2.0, size=50), rng.normal(size=50)]
    for shares in ((0.75, 0.25, 0.0), (0.1, 0.1, 0.8), (0.55, 0.05, 0.4)):
        w = hybrid.relative_weights(shares)
        assert w[0] == 1.0
        for fusion in hybrid.FUSIONS:
            assert np.array_equal(
                np.argsort(-hybrid.fuse(parts, shares, fusion), kind="stable"),
                np.argsort(-hybrid.fuse(parts, w, fusion), kind="stable"),
            )
    assert hybrid.relative_weights((1.0, 0.25)) == (1.0, 0.25)  # already relative: unchanged
    for bad in ((0.0, 1.0), (1.0, -0.5), (1.0, float("nan")), ()):
        with pytest.raises(ValueError, match="positive first"):
            hybrid.relative_weights(bad)
    assert all(w[0] == 1.0 for w in hybrid.weight_grid(3, 0.1))


class _ToyCube:
    """The parts of a CSFCube dataset a dense score function reads."""

    def __init__(self, n: int) -> None:
        self.papers = {f"p{i}": {"title": f"Paper {i}", "sentences": [f"We study topic {i}.", "It works."]}
                       for i in range(n)}

    def pool_pids(self):
        return list(self.papers)


def test_the_hybrid_reuses_the_unifar_systems_csfcube_embeddings(make_model, monkeypatch):
    """hybrid-unifar fuses the very model of the unifar system: one encoding of the collection
    serves both (the run's cache), and a cache never serves another collection or model."""
    from unifar.evaluation.dense import UniFARRetriever

    model, other = make_model(), make_model(seed=5)
    calls = []
    for m in (model, other):
        encode = m.encode_documents
        monkeypatch.setattr(m, "encode_documents", lambda docs, *a, _e=encode, **k: calls.append(len(docs)) or _e(docs, *a, **k))
    plain = UniFARRetriever(model, name="unifar", model_id="run")
    fused = hybrid.FusedRetriever("h", "h", [plain, Fixed("l", _noise("l"))], weights=(1.0, 0.0))
    cube, cache = _ToyCube(5), {}
    alone = plain.csfcube_score_fn(cube, cache)("method", "p0", ["p1", "p2", "p3"])
    via_hybrid = fused.csfcube_score_fn(cube, cache)("method", "p0", ["p1", "p2", "p3"])
    assert calls == [5]  # the hybrid's part did not run the model again
    assert np.array_equal(np.argsort(-alone), np.argsort(-via_hybrid))
    plain.csfcube_score_fn(_ToyCube(4), cache)  # another collection: encoded, not served stale
    UniFARRetriever(other, name="unifar", model_id="run").csfcube_score_fn(_ToyCube(4), cache)  # same id, other model
    assert calls == [5, 4, 4]
