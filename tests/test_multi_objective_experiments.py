"""Chapter 8's experiments (which objectives, combined how, trained and resumed) and the report
that tests the multi-objective paper's findings (issue 23)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.conftest import tiny_bert
from unifar.bi_encoder import BiEncoder, BiEncoderConfig, BiEncoderRetriever
from unifar.caching import TokenStateCache
from unifar.multi_objective.experiments import (
    OBJECTIVES,
    TABLE1,
    TABLE2,
    Experiment,
    concat_objectives,
    experiment_phases,
    train_experiments,
)
from unifar.multi_objective.objectives import Example, Objective, hold_out
from unifar.multi_objective.report import (
    findings,
    measured_frame,
    paper_frame,
    relative_gains,
)

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


@pytest.fixture
def base(tokenizer) -> BiEncoder:
    cfg = BiEncoderConfig(base_model="tiny-bert", pooling="mean", max_tokens=32)
    return BiEncoder(
        cfg, base_model=tiny_bert(tokenizer), tokenizer=tokenizer, device="cpu"
    )


def _objective(name: str, n: int = 8) -> Objective:
    ex = [
        Example(
            f"{name} {WORDS[i % 12]} {i}",
            f"doc {name} {WORDS[(i * 5) % 12]}",
            f"other {WORDS[(i * 7) % 12]}",
        )
        for i in range(n)
    ]
    return Objective(name, "question->document", ex)


def test_experiments_are_checked_named_and_mapped_to_the_papers_rows():
    with pytest.raises(ValueError, match="takes two objectives"):
        Experiment(("questions",), "finetune")
    with pytest.raises(ValueError, match="takes one objectives"):
        Experiment(("questions", "icrop"))
    with pytest.raises(ValueError, match="distinct"):
        Experiment(("icrop", "icrop"), "mix")
    with pytest.raises(ValueError, match="how="):
        Experiment(("icrop", "questions"), "blend")
    rows = [e.paper_row() for e in TABLE2]
    assert (
        len(TABLE2) == 14
        and len(set(rows)) == 14
        and all(r[0] == "table 2" for r in rows)
    )
    assert [e.paper_row()[1] for e in TABLE1] == [
        "MS MARCO",
        "SPECTER",
        "ICrop.",
        "MS MARCO, SPECTER, ICrop.: alternate",
    ]
    assert (
        len({e.folder for e in TABLE1 + TABLE2}) == 17
    )  # the all-three run is in both tables
    assert Experiment(("citations", "icrop"), "finetune").start == Experiment(
        ("citations",)
    )
    assert Experiment(("mine", "icrop"), "mix").paper_row() is None


def test_concat_keeps_every_example_and_refuses_mixed_kinds():
    a, b = _objective("a", 3), _objective("b", 2)
    c = concat_objectives("ab", [a, b])
    assert c.examples == a.examples + b.examples and c.kind == a.kind
    with pytest.raises(ValueError, match="one kind"):
        concat_objectives("x", [a, Objective("i", "icrop", a.examples)])


def test_phases_follow_the_combination():
    objs = {n: _objective(n) for n in OBJECTIVES}
    (p,) = experiment_phases(
        Experiment(OBJECTIVES, "alternate"), objs, 6, 3, batch_size=4
    )
    assert [set(next(p.batches)[1]) for _ in range(3)] == [
        {"questions"},
        {"citations"},
        {"icrop"},
    ]
    (f,) = experiment_phases(
        Experiment(("questions", "icrop"), "finetune"), objs, 6, 3, batch_size=4
    )
    assert (f.steps, f.lr, set(next(f.batches)[1])) == (3, 1e-5, {"icrop"})
    with pytest.raises(ValueError, match="no objective named"):
        experiment_phases(Experiment(("questions", "other"), "mix"), objs, 6, 3)


def test_fine_tuning_starts_from_the_single_run_and_finished_runs_are_reused(
    base, tmp_path
):
    objs = {"a": _objective("a"), "b": _objective("b")}
    exps = [Experiment(("a", "b"), "finetune"), Experiment(("a", "b"), "mix")]
    kw = dict(steps=4, batch_size=4, lr=1e-3, finetune_lr=5e-4, log=None)
    runs = train_experiments(exps, objs, base, tmp_path, **kw)
    assert list(runs) == [
        "a",
        "mix(a+b)",
        "a → b",
    ]  # start runs first, fine-tuning last
    assert [r["phase"] for r in runs["a → b"].log] == ["b (fine-tune)"] * 2
    probe = ["alpha beta", "doc a gamma"]
    single, tuned = runs["a"].model.encode(probe), runs["a → b"].model.encode(probe)
    assert not torch.equal(single, tuned) and not torch.equal(
        single, base.encode(probe)
    )
    again = train_experiments(exps, objs, base, tmp_path, **kw)
    assert all(r.reused for r in again.values())
    assert torch.equal(again["a → b"].model.encode(probe), tuned)
    longer = train_experiments(exps[1:], objs, base, tmp_path, **{**kw, "steps": 5})
    assert not longer["mix(a+b)"].reused and len(longer["mix(a+b)"].log) == 5


def test_runs_draw_dev_curves_on_their_own_objectives(base, tmp_path):
    objs = {n: hold_out(_objective(n, 12), 4) for n in ("a", "b")}
    exps = [Experiment(("a", "b"), "finetune")]
    kw = dict(steps=4, batch_size=4, lr=1e-3, finetune_lr=5e-4, log=None, dev_every=2, patience=5)
    runs = train_experiments(exps, objs, base, tmp_path, **kw)
    tuned = runs["a → b"].dev_curve
    assert [p["step"] for p in tuned] == [0, 2] and all({"dev/a", "dev/b"} <= set(p) for p in tuned)
    assert all(p["dev"] == p["dev/b"] for p in tuned)  # a fine-tuning run watches its target B
    assert all(p["dev"] == p["dev/a"] for p in runs["a"].dev_curve)
    again = train_experiments(exps, objs, base, tmp_path, **kw)
    assert all(r.reused for r in again.values()) and again["a → b"].dev_curve == tuned
    assert not any(r.reused for r in train_experiments(exps, objs, base, tmp_path, **{**kw, "patience": 4}).values())
    with pytest.raises(ValueError, match="no held-out examples"):
        train_experiments([Experiment(("c",))], {**objs, "c": _objective("c")}, base, tmp_path, **kw)


def test_retriever_on_cached_lower_states_scores_as_without(base):
    docs = [
        {"id": "a", "title": "Dense retrieval", "sentences": ["Vectors."]},
        {"id": "b", "title": "", "sentences": ["Gardening in spring."]},
    ]
    plain = BiEncoderRetriever(base, name="p")
    cached = BiEncoderRetriever(
        base, name="c", state_cache=TokenStateCache(top_layers=1)
    )
    q = ["dense vectors", "spring"]
    np.testing.assert_allclose(
        plain.score(q, plain.index(docs)),
        cached.score(q, cached.index(docs)),
        atol=1e-5,
    )


def test_findings_count_the_comparisons_that_hold():
    names = [e.name for e in dict.fromkeys(TABLE1 + TABLE2)]
    frame = pd.DataFrame({"x": np.arange(len(names), dtype=float)}, index=names)
    f = findings(frame)
    # the all-three alternated run is 4th of 17: above the three singles
    assert (
        f["combined beats each single"]["holds"],
        f["combined beats each single"]["of"],
    ) == (1, 1)
    # in TABLE2 order alternate comes after mix, so it scores higher; fine-tuning after both
    assert f["alternate beats mix (2 objectives)"]["share"] == 1.0
    assert f["fine-tuning beats mixing (2 objectives)"]["holds"] == 3
    # ...but the all-three alternated run (4th) scores below the all-three mix (last)
    assert (
        f["alternate beats mix (3 objectives)"]["holds"],
        f["alternate beats mix (3 objectives)"]["of"],
    ) == (0, 1)
    assert "fine-tuning beats mixing (2 objectives)" not in findings(
        frame.loc[names[:4]]
    )
    assert paper_frame().shape == (17, 3)
    assert float(
        relative_gains(frame, "citations").loc["icrop", "x"]
    ) == pytest.approx(100.0)


def test_measured_frame_takes_each_benchmarks_headline_metric():
    result = {
        "benchmarks": {
            "csfcube": {
                "systems": {"s": {"metrics": {"all/map": 40.0, "method/map": 1.0}}}
            },
            "pubmedqa": {
                "systems": {
                    "s": {"metrics": {"mrr@10": 70.0, "ndcg@10": 1.0}},
                    "t": {"metrics": {"mrr@10": 60.0, "ndcg@10": 1.0}},
                }
            },
        }
    }
    frame = measured_frame(result, ["t", "s", "missing"])
    assert list(frame.index) == ["t", "s"] and frame.loc["s"].tolist() == [40.0, 70.0]
