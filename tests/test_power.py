"""The minimum detectable effect (unifar.evaluation.power): it means what it says, checked by
simulating benchmarks whose true difference is the MDE."""

from __future__ import annotations

import numpy as np
import pytest

from unifar.evaluation.bootstrap import paired_bootstrap
from unifar.evaluation.power import minimum_detectable_effect, power_for, verdict


def test_a_true_difference_of_one_mde_is_detected_about_80_percent_of_the_time():
    rng = np.random.default_rng(0)
    n, sd = 50, 10.0  # CSFCube-sized: 50 query facets, per-query AP differences of 10 points
    base = {f"q{i}": float(x) for i, x in enumerate(rng.uniform(0, 100, n))}
    reference = {q: v + rng.normal(0.0, sd) for q, v in base.items()}
    mde = minimum_detectable_effect(reference, base)
    assert mde.mde == pytest.approx(2.8 * sd / np.sqrt(n), rel=0.2)
    detected = 0
    trials = 200
    for t in range(trials):  # fresh benchmarks of the same kind, true difference = the MDE
        noise = rng.normal(0.0, sd, n)
        noise -= noise.mean() - rng.normal(0.0, sd / np.sqrt(n))  # the sample mean varies as it would
        system = {q: base[q] + mde.mde + e for q, e in zip(base, noise)}
        detected += not paired_bootstrap(system, base, n_resamples=400, seed=t).within_noise
    assert 0.65 <= detected / trials <= 0.92  # 80 % nominal (normal approximation, 200 trials)


def test_strata_and_arguments():
    a = {"a1": 1.0, "a2": 3.0, "b1": 0.0, "b2": 0.0}
    b = {q: 0.0 for q in a}
    flat = minimum_detectable_effect(a, b)
    strat = minimum_detectable_effect(a, b, strata=[["a1", "a2"], ["b1", "b2"]])
    assert strat.se < flat.se  # stratum b has no spread; only a's half varies, at weight 1/2
    with pytest.raises(KeyError, match="different queries"):
        minimum_detectable_effect({"q": 1.0}, {"r": 1.0})
    with pytest.raises(ValueError, match="power"):
        minimum_detectable_effect(a, b, power=1.0)
    assert power_for(strat.mde, strat.se) == pytest.approx(0.8, abs=0.01)
    assert strat.detects(strat.mde) and not strat.detects(0.5 * strat.mde)


def test_verdict_labels():
    from unifar.evaluation.bootstrap import PairedResult

    within = PairedResult(diff=0.1, low=-1.0, high=1.2, flip=0.4, n=50)
    assert verdict(within, 2.5, effect_sought=1.87) == "underpowered"
    assert verdict(within, 1.5, effect_sought=-1.87) == "no detectable difference"
    assert verdict(PairedResult(diff=1.0, low=0.2, high=1.8, flip=0.01, n=50), 9.0, 1.87) == "better"


def _result(rng, n=40):
    """A minimal evaluate_all result: CSFCube (two folds) and PubMedQA, three systems."""
    import numpy as np

    def systems(ids, shift):
        base = {q: float(v) for q, v in zip(ids, rng.uniform(0, 100, len(ids)))}
        ref = {q: v + rng.normal(0, 8) for q, v in base.items()}
        model = {q: v + shift + rng.normal(0, 8) for q, v in base.items()}
        out = {}
        for name, pq in (("mean", base), ("hybrid-mean", ref), ("unifar-trained", model)):
            metric = "all/map" if ids[0].startswith("c") else "mrr@10"
            out[name] = {"metrics": {metric: float(np.mean(list(pq.values())))}, "per_query": {metric: pq}}
        return out

    cs_ids = [f"c{i}" for i in range(n)]
    return {"benchmarks": {
        "csfcube": {"kind": "csfcube", "systems": systems(cs_ids, 20.0),
                    "strata": {"all/map": [cs_ids[: n // 2], cs_ids[n // 2:]]},
                    "strata_names": ["fold1_test", "fold2_test"]},
        "pubmedqa": {"kind": "qdoc", "systems": systems([f"p{i}" for i in range(n)], 0.0)}}}


def test_power_table_and_labelled_verdicts():
    from unifar.evaluation.power import label_verdicts, power_table
    from unifar.evaluation.report import verdict_table

    res = _result(np.random.default_rng(1))
    effects = {"csfcube": {"all/map": 1.87}, "pubmedqa": {"mrr@10": 50.0}}
    power = power_table(res, "mean", "hybrid-mean", effects, folds=(None, "fold1_test"))
    assert list(power.benchmark) == ["csfcube", "csfcube", "pubmedqa"] and list(power.fold) == ["", "fold1_test", ""]
    whole, fold1 = power.iloc[0], power.iloc[1]
    assert fold1.n == 20 and fold1.mde > whole.mde  # half the queries: a larger MDE
    assert not whole.powered and power.iloc[2].powered  # 1.87 is below the MDE, 50 points above it
    verdicts = verdict_table(res, "unifar-trained", ["mean"], metrics={"csfcube": ["all/map"], "pubmedqa": ["mrr@10"]})
    labelled = label_verdicts(verdicts, power).set_index("benchmark")
    assert labelled.loc["csfcube", "verdict"] == "better"  # a 20-point shift shows anyway
    assert labelled.loc["pubmedqa", "verdict"] in ("no detectable difference", "better", "worse")
    assert labelled.loc["csfcube", "mde"] == pytest.approx(whole.mde)
    # labelled verdicts read back and labelled again (chapter 5 on its saved full results)
    again = label_verdicts(label_verdicts(verdicts, power), power)
    assert again.equals(label_verdicts(verdicts, power))
    # the same comparison looking for the paper's +1.87 on PubMedQA instead: underpowered
    small = power_table(res, "mean", "hybrid-mean", {"pubmedqa": {"mrr@10": 0.53}})
    relabelled = label_verdicts(verdicts[verdicts.benchmark == "pubmedqa"], small)
    assert relabelled.verdict.iloc[0] in ("underpowered", "better", "worse")
    if verdicts[verdicts.benchmark == "pubmedqa"].verdict.iloc[0] == "within noise":
        assert relabelled.verdict.iloc[0] == "underpowered"


def test_saved_verdicts_are_labelled_from_the_saved_per_query_scores():
    from unifar.evaluation.power import label_verdicts, labelled_verdicts, power_table
    from unifar.evaluation.report import verdict_table

    res = _result(np.random.default_rng(3))
    verdicts = verdict_table(res, "unifar-trained", ["mean"], metrics={"csfcube": ["all/map"], "pubmedqa": ["mrr@10"]})
    saved = {**res, "verdicts": verdicts.to_dict(orient="records")}  # a record as a chapter writes it
    got = labelled_verdicts(saved, "mean", "hybrid-mean", folds=(None, "fold1_test"), n_resamples=500)
    want = label_verdicts(verdicts, power_table(res, "mean", "hybrid-mean", folds=(None, "fold1_test"), n_resamples=500))
    assert got.equals(want) and "within noise" not in set(got.verdict) and got.mde.notna().all()


def _tune_dev():
    """benchmarks/studies/tune_dev.py as a module (a study script, not part of the package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "studies" / "tune_dev.py"
    spec = importlib.util.spec_from_file_location("tune_dev", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tune_dev_states_fold1_dev_power_before_comparing_its_trained_rows():
    power = _tune_dev().fold1_dev_power
    rng = np.random.default_rng(0)
    qs = [f"q{i}_method" for i in range(24)]
    mean = {q: float(v) for q, v in zip(qs, rng.uniform(10, 90, 24))}
    untrained = {q: v + float(rng.normal(0, 3)) for q, v in mean.items()}
    trained = {q: v + 2.0 for q, v in mean.items()}
    runs = {"mean pooling (base encoder)": {"fold1_dev_ap": mean}, "untrained, w/o MHA_tok": {"fold1_dev_ap": untrained},
            "E1": {"fold1_dev_ap": trained}, "E0 without per-query scores": {"fold1_dev_map": {"all": 40.0}}}
    out = power(runs)
    want = minimum_detectable_effect(mean, untrained)
    assert out["mde"] == round(want.mde, 3) and out["n_queries"] == 24 and out["reference"].startswith("mean pooling")
    assert list(out["paired"]) == ["E1"]  # only trained rows with per-query scores are compared
    assert out["paired"]["E1"]["mean pooling"] == {"diff": 2.0, "low": 2.0, "high": 2.0}
    assert out["paired"]["E1"]["untrained"]["diff"] == round(paired_bootstrap(trained, untrained).diff, 3)
    assert power({"E1": {"fold1_dev_ap": trained}}) is None  # no reference pair, no power statement


def test_committed_whole_stack_study_power_recomputes_from_its_rows():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "results" / "ch04" / "tuning_dev_whole_stack.json"
    study = json.loads(path.read_text())
    assert _tune_dev().fold1_dev_power(study["runs"]) == study["fold1_dev_power"]
    assert study["fold1_dev_power"]["mde"] > 0 and set(study["fold1_dev_power"]["paired"]) == {
        n for n in study["runs"] if n.startswith("E")}


def test_whole_stack_test_record_scores_the_study_models_and_labels_by_power():
    """results/ch04/whole_stack_test.json (chapter 5's evaluation of the study's E1 and E2) and
    the dev study were computed by two code paths; CSFCube's fold2_test is fold1_dev, so the four
    systems they share must agree there, which also shows the record scored the study's models."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results" / "ch04"
    test = json.loads((root / "whole_stack_test.json").read_text())["results"]
    dev = json.loads((root / "tuning_dev_whole_stack.json").read_text())["runs"]
    fold2 = {v["vs"]: v for v in test["fold_verdicts"] if v["fold"] == "fold2_test" and v["metric"] == "all/map"}
    pairs = {"mean": "mean pooling (base encoder)", "unifar-untrained": "untrained, w/o MHA_tok",
             "unifar-frozen-kd10": "E1 KD 10, frozen base"}
    for system, row in pairs.items():
        assert round(fold2[system]["b"], 2) == dev[row]["fold1_dev_map"]["all"], system
        assert round(fold2[system]["a"], 2) == dev["E2 KD 10 w/o L_QD, whole encoder stack"]["fold1_dev_map"]["all"]
    for v in test["verdicts"] + test["fold_verdicts"]:  # a verdict is "underpowered" only where the MDE says so
        if v["verdict"] == "underpowered":
            assert v["mde"] > v["effect_sought"] and v["ci_low"] <= 0 <= v["ci_high"]


def test_a_reference_pair_that_agrees_on_every_query_gives_no_power_estimate():
    """A hybrid teacher tuned to BM25 weight 0 scores every query as the base does: its MDE of 0
    would call every comparison powered (seen in a CPU rehearsal of gpu_profile.py)."""
    from unifar.evaluation.power import label_verdicts, power_table
    from unifar.evaluation.report import verdict_table

    res = _result(np.random.default_rng(2))
    for entry in res["benchmarks"].values():  # the reference pair is the base itself
        entry["systems"]["hybrid-mean"] = entry["systems"]["mean"]
    power = power_table(res, "mean", "hybrid-mean", {"pubmedqa": {"mrr@10": 0.53}})
    assert power.se.iloc[0] == 0.0 and np.isnan(power.mde.iloc[0]) and not power.powered.iloc[0]
    verdicts = verdict_table(res, "unifar-trained", ["mean"], metrics={"pubmedqa": ["mrr@10"]})
    labelled = label_verdicts(verdicts, power)
    assert list(labelled.verdict) == list(verdicts.verdict)  # no estimate: the verdict stands
