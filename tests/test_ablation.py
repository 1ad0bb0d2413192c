"""Chapter 6's ablation study on a tiny random BERT: the rows, training every row with resume,
the structural measures and the table, verdicts and paper comparison on a synthetic result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from unifar import UniFARConfig, paper
from unifar.ablation import CPU_PROFILE, FULL_MODEL, ROWS, row_config, row_folder, train_rows
from unifar.evaluation.ablation import (COLUMNS, ablation_table, ablation_verdicts, column_mde, column_values,
                                        paper_sign_agreement, seed_mean_result, system_name)
from unifar.evaluation.structure import (case_study_attention, diagonal_contrast, mean_facet_matrix,
                                         parameter_shift, relevant_pairs, sentence_attention, span_shares,
                                         structure_record, structure_table)
from unifar.scoring import facet_similarity

from .test_train import make_dataset, small


def test_rows_are_the_papers_eight_and_ours_three():
    assert list(ROWS)[:8] == ["full", "w/o MHA_sent", "w/o MHA_tok", "freeze anchors", "w/o anchors",
                              "w/o E_input", "w/o L_KL", "w/o L_QD"]
    assert ROWS["full, top layer trained"]["args"] == {"train_top_layers": 1}
    cfg = UniFARConfig(base_model="minilm", train_values=False, use_token_attention=False, distill_weight=10.0)
    full = row_config("full", cfg)
    assert all(getattr(full, k) == v for k, v in FULL_MODEL.items())  # the paper's architecture
    assert full.distill_weight == 10.0  # the base configuration's distillation stays
    assert row_config("w/o L_KL", cfg).use_kl_loss is False
    cpu = row_config("chapter 4 CPU profile", cfg)
    assert (cpu.use_token_attention, cpu.train_values, cpu.distill_weight) == (False, True, 10.0)
    assert row_config("w/o L_KD (the paper's objective)", cfg).distill_weight == 0.0
    # on the paper's objective (chapter 6's base) the CPU profile still distils: it is not
    # "w/o MHA_tok" under another name
    paper_base = UniFARConfig(base_model="minilm")
    assert row_config("chapter 4 CPU profile", paper_base).distill_weight == 10.0
    assert row_config("chapter 4 CPU profile", paper_base) != row_config("w/o MHA_tok", paper_base)
    # chapter 6's rows on its base: no configuration twice ("w/o L_KD" is for a distilling base)
    configs = [row_config(r, paper_base).to_dict() for r in [*list(ROWS)[:8], "chapter 4 CPU profile"]]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)
    # over a distilling base (table 3 re-run on the model that learned from the teacher) the
    # paper's eight and "w/o L_KD" are nine configurations, and the CPU profile is "w/o MHA_tok":
    # such a table lists one of the two, never both
    kd_base = UniFARConfig(base_model="minilm", distill_weight=CPU_PROFILE["distill_weight"])
    configs = [row_config(r, kd_base).to_dict() for r in [*list(ROWS)[:8], "w/o L_KD (the paper's objective)"]]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)
    assert row_config("chapter 4 CPU profile", kd_base) == row_config("w/o MHA_tok", kd_base)
    with pytest.raises(ValueError, match="unknown ablation row 'w/o everything'"):
        row_config("w/o everything", cfg)
    assert len({row_folder(r) for r in ROWS}) == len(ROWS)  # one folder per row


def test_train_rows_trains_each_row_once_and_resumes(make_model, tmp_path):
    shared = make_model(**small(), **FULL_MODEL).eval()
    ftus = make_dataset(n_ftus=12)
    base = UniFARConfig.from_dict(shared.config.to_dict())
    args = {"max_steps": 2, "eval_fraction": 0.2, "eval_every": 0, "save_every": 10}
    rows = ["full", "w/o anchors", "full, top layer trained"]
    runs = train_rows(ftus, base, rows, [0, 1], tmp_path, args, shared=shared, log=None)
    assert list(runs) == [(r, s) for r in rows for s in (0, 1)]
    for (row, seed), run in runs.items():
        rec = json.loads((tmp_path / row_folder(row) / f"seed{seed}" / "ablation_run.json").read_text())
        assert rec["steps"] == run.steps == 2 and rec["seed"] == seed
        assert set(run.held_out) >= {"l_dd", "l_qd", "l_kl"} and set(run.first_held_out) == set(run.held_out)
    assert runs[("w/o anchors", 0)].config["use_anchors"] is False
    assert runs[("full, top layer trained", 0)].args["train_top_layers"] == 1
    # the shared base was not trained by the top-layer row
    assert all(not p.requires_grad or True for p in shared.base.parameters())
    before = {k: r.seconds for k, r in runs.items()}
    again = train_rows(ftus, base, rows, [0, 1], tmp_path, args, shared=shared, log=None)
    assert {k: r.seconds for k, r in again.items()} == before  # finished runs are reused
    moved = tmp_path.parent / f"{tmp_path.name}-moved"
    tmp_path.rename(moved)  # a checkout (or its artifacts/) moved elsewhere: runs are still reused
    reused = train_rows(ftus, base, rows, [0, 1], moved, args, shared=shared, log=None)
    assert {k: r.seconds for k, r in reused.items()} == before
    assert all(Path(r.model_dir) == moved / row_folder(k[0]) / f"seed{k[1]}" / "final"
               and Path(r.model_dir).is_dir() for k, r in reused.items())
    moved.rename(tmp_path)
    changed = train_rows(ftus, base, ["full"], [0], tmp_path, {**args, "max_steps": 3}, shared=shared, log=None)
    assert changed[("full", 0)].steps == 3  # other settings: trained again
    with pytest.raises(ValueError, match="unknown ablation rows"):
        train_rows(ftus, base, ["nope"], [0], tmp_path, args, shared=shared, log=None)


def test_top_layer_row_leaves_the_shared_base_untouched(make_model, tmp_path):
    shared = make_model(**small(), **FULL_MODEL).eval()
    weights = {k: v.clone() for k, v in shared.base.state_dict().items()}
    args = {"max_steps": 2, "eval_fraction": 0.2, "eval_every": 0, "save_every": 10}
    base = UniFARConfig.from_dict(shared.config.to_dict())
    train_rows(make_dataset(n_ftus=8), base, ["full, top layer trained"], [0], tmp_path, args,
               shared=shared, log=None)
    assert all(torch.equal(weights[k], v) for k, v in shared.base.state_dict().items())


def test_mean_facet_matrix_is_the_mean_of_the_pairs_matrices(make_model, docs):
    model = make_model().eval()
    collection = {f"d{i}": d for i, d in enumerate(docs)}
    pairs = [("What do facet anchors do?", "d0"), ("What do facet anchors do?", "d2"),
             ("Which loss trains the model?", "d1")]
    got = mean_facet_matrix(model, pairs, collection)
    q = model.encode_questions([p[0] for p in pairs]).embeddings
    d = model.encode_documents([collection[p[1]] for p in pairs]).embeddings
    want = torch.stack([facet_similarity(q[i : i + 1], d[i : i + 1])[0, 0] for i in range(3)]).double().mean(0)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-6)
    with pytest.raises(KeyError, match="not in the collection"):
        mean_facet_matrix(model, [("q", "missing")], collection)
    with pytest.raises(ValueError, match="at least one"):
        mean_facet_matrix(model, [], collection)


def test_structure_record_gathers_the_measures_and_its_table_has_a_row_per_model(make_model, docs):
    start = make_model().eval()
    moved = make_model().eval()
    with torch.no_grad():
        moved.anchors.add_(0.5)
    collection = {f"d{i}": d for i, d in enumerate(docs)}
    pairs = [("What do facet anchors do?", "d0"), ("Which loss trains the model?", "d1")]
    labelled = [{**docs[0], "labels": ["background", "method", None, "result", "method"]}]
    held = ({"l_dd": 2.0, "l_qd": 1.5}, {"l_dd": 1.0, "l_qd": 1.2})
    rec = structure_record(moved, start, {"toy": (pairs, collection)}, labelled, held_out=held)
    matrix = mean_facet_matrix(moved, pairs, collection)
    assert rec["matrices"]["toy"] == matrix.tolist()
    assert rec["contrast"]["toy"] == diagonal_contrast(matrix)
    assert rec["shift"] == parameter_shift(moved, start) and rec["shift"]["anchors"] > 0
    assert rec["attention"]["n_documents"] == 1
    untrained = structure_record(start, start, {"toy": (pairs, collection)}, labelled)
    assert untrained["shift"]["anchors"] == 0.0 and untrained["held_out_before"] is None
    table = structure_table({"untrained": untrained, "moved": rec})
    assert list(table.index) == ["untrained", "moved"]
    assert table.loc["moved", "held-out l_dd after"] == 1.0
    assert pd.isna(table.loc["untrained", "held-out l_dd after"])
    assert table.loc["moved", "contrast toy"] == rec["contrast"]["toy"]
    assert table.loc["untrained", "anchors moved"] == 0.0


def test_diagonal_contrast_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        diagonal_contrast([[1.0, 2.0]])


def test_sentence_attention_sums_to_one_in_both_branches(make_model, docs):
    for branch_cfg in ({}, {"use_sentence_attention": False}):
        model = make_model(**branch_cfg).eval()
        items = model.tokenize_documents(docs)
        enc = model.encode(items)
        for i, item in enumerate(items):
            a = sentence_attention(enc, i, item)
            assert a.shape == (3, item.n_sentences - (1 if item.has_title else 0))
            np.testing.assert_allclose(a.sum(1), 1.0, atol=1e-9)


def test_case_study_attention_on_the_papers_inputs(make_model):
    model = make_model().eval()
    docs = paper.UNIFAR_CASE_STUDY_DOCUMENTS
    out = case_study_attention(model, paper.UNIFAR_CASE_STUDY_QUESTION, docs)
    assert [len(d["attention"][0]) for d in out["documents"]] == [10, 8, 8]
    assert set(out["documents"][0]["shares"]) == {"background", "method", "result"}
    assert out["documents"][0]["shares"]["result"]["uniform"] == pytest.approx(0.1)
    assert len(out["question"]["units"]) == len(out["question"]["attention"][0])


def test_span_shares_ignore_facets_without_a_span():
    assert span_shares(np.full((3, 4), 0.25), {"method": [1, 2]}, ["background", "method", "result"]) == {
        "method": {"share": 0.5, "uniform": 0.5}}


def test_relevant_pairs_sample_is_seeded():
    class Bench:
        questions = {"qid": ["a", "b"], "text": ["question a", "question b"]}

        def relevant(self, q):
            return {"a": {"d1", "d2"}, "b": {"d3"}}[q]

    assert relevant_pairs(Bench()) == [("question a", "d1"), ("question a", "d2"), ("question b", "d3")]
    assert relevant_pairs(Bench(), 2, seed=1) == relevant_pairs(Bench(), 2, seed=1)
    assert len(relevant_pairs(Bench(), 2)) == 2


# ----------------------------------------------------------------------------- the table
def _system(values: dict[str, dict[str, float]]) -> dict:
    return {"label": "x", "metrics": {m: float(np.mean(list(v.values()))) for m, v in values.items()},
            "per_query": values, "ci": {}, "n_queries": 4}


def _result(shift: dict[str, float]) -> dict:
    """CSFCube (two folds) and SciRepEval; system s has per-query values base + shift[s]."""
    cs_q = {"q1": 40.0, "q2": 30.0, "q3": 50.0, "q4": 20.0}
    sr_q = {"a": 60.0, "b": 70.0, "c": 65.0, "d": 55.0}
    cs = {"kind": "csfcube", "strata": {"all/map": [["q1", "q2"], ["q3", "q4"]]},
          "strata_names": ["fold1_test", "fold2_test"], "systems": {}}
    sr = {"kind": "qdoc", "systems": {}}
    for name, d in shift.items():
        cs["systems"][name] = _system({"all/map": {q: v + d for q, v in cs_q.items()}})
        sr["systems"][name] = _system({"ndcg@10": {q: v + d for q, v in sr_q.items()}})
    return {"benchmarks": {"csfcube": cs, "scirepeval": sr}}


def test_table_verdicts_and_paper_agreement():
    shift = {system_name("full", 0): 0.0, system_name("full", 1): 2.0,
             system_name("w/o L_KL", 0): -5.0, system_name("w/o L_KL", 1): -3.0, "mean": -1.0}
    result = _result(shift)
    assert column_values(result, system_name("full", 0))["CSFCube aggregated MAP, fold1_test"] == 35.0
    means, stds = ablation_table(result, ["full", "w/o L_KL"], [0, 1], references=["mean"])
    assert means.loc["full", "CSFCube aggregated MAP"] == pytest.approx(36.0)  # mean of 35 and 37
    assert means.loc["w/o L_KL", "SciRepEval search nDCG@10"] == pytest.approx(58.5)
    assert stds.loc["full", "CSFCube aggregated MAP"] == pytest.approx(np.std([35.0, 37.0], ddof=1))
    mr = seed_mean_result(result, ["full", "w/o L_KL"], [0, 1])
    v = ablation_verdicts(mr, ["full", "w/o L_KL"], n_resamples=200)
    cell = v[(v["row"] == "w/o L_KL") & (v["column"] == "CSFCube aggregated MAP")].iloc[0]
    assert cell["diff"] == pytest.approx(-5.0) and cell["verdict"] == "worse"  # every query -5
    agree = paper_sign_agreement(v)
    kl = agree[agree["column"] == "CSFCube aggregated MAP"].iloc[0]
    t3 = paper.UNIFAR_TABLE3
    assert kl["paper_diff"] == pytest.approx(t3.value("w/o L_KL", "CSFCube aggregated MAP")
                                             - t3.value("UniFAR (full)", "CSFCube aggregated MAP"))
    assert bool(kl["agree"]) is True  # both negative
    assert "SciRepEval search nDCG@10" not in set(agree["column"])  # the paper has no such column
    assert set(COLUMNS) >= set(v["column"])


def test_column_mde_identical_rows_and_underpowered_verdicts():
    """A row that scores exactly what the full row scores is flagged (identical = 1.0), and with
    an MDE larger than the paper's difference a within-noise row is called underpowered."""
    rng = np.random.default_rng(0)
    shift = {system_name("full", 0): 0.0, system_name("freeze anchors", 0): 0.0, "untrained": -2.0}
    result = _result(shift)
    for bench, metric in (("csfcube", "all/map"), ("scirepeval", "ndcg@10")):  # per-query noise on the untrained
        pq = result["benchmarks"][bench]["systems"]["untrained"]["per_query"][metric]
        for q in pq:
            pq[q] += float(rng.normal(0, 6))
    mr = seed_mean_result(result, ["full", "freeze anchors"], [0])
    mde = column_mde(mr, ("full", "untrained"), n_resamples=200)
    assert set(mde) == {"CSFCube aggregated MAP", "CSFCube aggregated MAP, fold1_test", "SciRepEval search nDCG@10"}
    assert all(v > 0 for v in mde.values())
    v = ablation_verdicts(mr, ["full", "freeze anchors"], n_resamples=200, mde=mde).set_index("column")
    assert (v["identical"] == 1.0).all() and (v["diff"] == 0.0).all()
    cs = v.loc["CSFCube aggregated MAP"]
    t3 = paper.UNIFAR_TABLE3
    sought = t3.value("Freeze A_facet", "CSFCube aggregated MAP") - t3.value("UniFAR (full)", "CSFCube aggregated MAP")
    assert cs["effect_sought"] == pytest.approx(sought)
    assert cs["verdict"] == ("underpowered" if cs["mde"] > abs(sought) else "no detectable difference")
    # no paper column (SciRepEval): no effect sought, the verdict stays "within noise"
    assert v.loc["SciRepEval search nDCG@10", "verdict"] == "within noise"


def test_train_rows_records_each_runs_dev_curve(make_model, tmp_path):
    from unifar.learning_curve import DevCurve

    shared = make_model(**small(), **FULL_MODEL).eval()
    base = UniFARConfig.from_dict(shared.config.to_dict())
    args = {"max_steps": 3, "eval_fraction": 0.2, "eval_every": 0, "save_every": 10}

    def curve(model, targs, cache):
        return DevCurve(model, {"dev": lambda m, r: 1.0}, targs.output_dir, every=1, monitor="dev", patience=1)

    runs = train_rows(make_dataset(n_ftus=12), base, ["full"], [0], tmp_path, args, shared=shared, log=None,
                      dev_curve=curve)
    run = runs[("full", 0)]
    assert [p["step"] for p in run.dev_curve] == [0, 1]  # flat at once: stopped after step 1
    assert run.stopped_early["step"] == 1 and run.steps == 1
    rec = json.loads((tmp_path / "full" / "seed0" / "ablation_run.json").read_text())
    assert rec["dev_curve"] == run.dev_curve
