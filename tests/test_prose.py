"""The numbers the chapters' prose quotes (unifar.prose): one function per chapter, checked
against what the committed chapter shows, from the committed results."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unifar import prose
from unifar.book import load_results

ROOT = Path(__file__).resolve().parents[1]
GLUED = re.compile(r"\{glue(?::\w+)?\}`([A-Za-z0-9_]+)")


def committed_glue(notebook: str) -> dict[str, str]:
    """``{name: text}`` of every value the committed notebook glued (myst-nb's record)."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    out = {}
    for cell in cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                out[name] = o["data"]["application/papermill.record/text/plain"]
    return out


def quoted_names(notebook: str) -> set[str]:
    """The glue names the notebook's markdown quotes."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    return {m for c in cells if c["cell_type"] == "markdown" for m in GLUED.findall("".join(c["source"]))}


def parameters(notebook: str) -> dict:
    """The defaults of the notebook's papermill ``parameters`` cell."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    cell = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    values: dict = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.AnnAssign):
            values[node.target.id] = ast.literal_eval(node.value)
    return values


def as_glued(value) -> str:
    """The text myst-nb records for a glued value (:func:`unifar.book.glue` unwraps numpy scalars)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def test_ch7_gives_the_committed_chapters_values():
    from unifar.evaluation.power import labelled_verdicts

    p = parameters("07_flew.ipynb")
    full = load_results(ROOT / "results" / "ch07" / "full" / "flew.json")
    verdicts = labelled_verdicts(full["results"], "mean", "unifar-trained", folds=(None, "fold1_test"),
                                 n_resamples=p["n_resamples"], seed=p["seed"])
    got = prose.ch7(full, verdicts, batch_size=p["batch_size"], steps=10, patience=p["patience"],
                    min_delta=p["min_delta"])
    shown = committed_glue("07_flew.ipynb")
    run_only = {k for k in shown if k.startswith("ch7_moves_")}  # this run's rank changes
    assert set(got) == set(shown) - run_only
    assert {k: as_glued(v) for k, v in got.items()} == {k: shown[k] for k in got}
    assert quoted_names("07_flew.ipynb") <= set(shown)


def test_ch7_quotes_flew_cls_moves_and_refuses_an_ambiguous_verdict():
    full = load_results(ROOT / "results" / "ch07" / "full" / "flew.json")
    cols = ["reordered (%)", "judged pair swapped (%)", "largest shift, median", "smallest judged gap, median"]
    moves = pd.DataFrame([[12.0, 2.0, 0.001, 0.007]], index=["flew-cls"], columns=cols)
    row = dict(system="flew-mean", vs="mean", benchmark="csfcube", metric="all/map", fold="", diff=-0.5,
               verdict="no detectable difference", mde=1.6, effect_sought=1.87)
    verdicts = pd.DataFrame([row, {**row, "vs": "unifar-trained"}])
    got = prose.ch7(full, verdicts, batch_size=10, steps=10, patience=3, min_delta=0.001, moves=moves)
    assert (got["ch7_moves_reordered"], got["ch7_moves_gap"]) == (12.0, 0.007)
    assert "ch7_moves_swapped" not in prose.ch7(full, verdicts, batch_size=10, steps=10, patience=3,
                                                min_delta=0.001, moves=pd.DataFrame())
    with pytest.raises(KeyError, match="2 verdict rows for flew-mean vs mean"):
        prose.ch7(full, pd.DataFrame([row, row, {**row, "vs": "unifar-trained"}]), batch_size=10, steps=10,
                  patience=3, min_delta=0.001)


def test_the_flew_schedule_says_how_the_runs_ended():
    cfg = {"steps": 200, "min_delta": 0.001, "patience": 3}
    ran = lambda n, stopped: {"losses": [0.0] * n, "dev_curve": [{"dev": 1.0}], "stopped": stopped}
    assert prose.chapter7._flew_schedule(cfg, [ran(120, "flat"), ran(150, "flat")]).endswith(
        "all 2 curves flattened, after 120 to 150 steps")
    assert "1 of 2 flattened, after 150 to 200 steps; every other curve" in prose.chapter7._flew_schedule(
        cfg, [ran(150, "flat"), ran(200, None)])
    assert "predates the dev curves" in prose.chapter7._flew_schedule(cfg, [{"losses": [0.0], "dev_curve": [], "stopped": None}])


def _ch8_run_inputs():
    """Stand-ins for what only a run of chapter 8 measures (its objectives, stops, rank changes)."""
    objectives = {"questions": {"examples": 5, "pubmedqa/examples": 2}, "citations": {"examples": 7},
                  "icrop": {"examples": 9}}
    stops = pd.DataFrame({"ended by": ["flat dev curve", "budget", "budget"]}, index=["a", "b", "c"])
    cols = ["reordered (%)", "judged pair swapped (%)", "largest shift, median", "smallest judged gap, median"]
    sci = pd.DataFrame([[10.0, 0.0, 0.002, 0.01], [30.0, 2.0, 0.004, 0.03]], index=["a", "b"], columns=cols)
    pub = pd.DataFrame({"changed": [3, 1], "questions": [500, 500], "reference at the ceiling": [450, 450]},
                       index=["a", "b"])
    return dict(objectives=objectives, n_dev=32, stops=stops, steps=10, sci_changes=sci, pub_changes=pub)


def test_ch8_gives_the_committed_chapters_values():
    from unifar.evaluation.power import labelled_verdicts

    p = parameters("08_multi_objective.ipynb")
    full = load_results(ROOT / "results" / "ch08" / "full" / "multi_objective.json")
    fv = labelled_verdicts(full["results"], "base", "unifar-trained", folds=(None, "fold1_test"),
                           n_resamples=p["n_resamples"], seed=p["seed"])
    fv = fv[(fv.fold == "") & fv.metric.isin(["all/map", "ndcg@10", "mrr@10"])]
    got = prose.ch8(full, fv, **_ch8_run_inputs())
    shown = committed_glue("08_multi_objective.ipynb")
    assert set(got) == set(shown)
    of_full = [k for k in got if k.startswith(("ch8_full_", "ch8_paper_"))]
    assert len(of_full) > 20
    assert {k: as_glued(got[k]) for k in of_full} == {k: shown[k] for k in of_full}
    assert quoted_names("08_multi_objective.ipynb") <= set(shown)


def test_ch8_run_values_come_from_the_run():
    full = load_results(ROOT / "results" / "ch08" / "full" / "multi_objective.json")
    empty = pd.DataFrame(columns=["system", "verdict"])
    got = prose.ch8(full, empty, **_ch8_run_inputs())
    assert (got["ch8_questions"], got["ch8_stopped"], got["ch8_runs"]) == (5, 1, 3)
    assert (got["ch8_sci_reordered"], got["ch8_sci_gap"], got["ch8_pub_changed"]) == (30.0, 0.02, 3)
    assert got["ch8_pub_ceiling"] == 90.0 and got["ch8_full_moved_names"] == "none"
    without = prose.ch8(full, empty, **{**_ch8_run_inputs(), "pub_changes": None})
    assert "ch8_pub_changed" not in without


def test_ch1_gives_the_committed_chapters_values():
    """The default run's rows (BM25, MiniLM mean pooling and facet queries at 512 tokens) are
    the full record's rows of the same name, so the committed record stands in for the run."""
    full = load_results(ROOT / "results" / "ch01" / "full" / "csfcube.json")
    rows = full["results"]["pools_as_annotated"]
    measured = {n: rows[n] for n in ("BM25", "minilm mean pooling", "minilm facet query (title + facet sentences)",
                                     "minilm facet query (facet sentences only)")}
    got = prose.ch1(measured, full, "minilm")
    shown = committed_glue("01_model_and_csfcube.ipynb")
    assert {k: as_glued(v) for k, v in got.items()} == shown
    assert quoted_names("01_model_and_csfcube.ipynb") <= set(shown)


def test_ch6_gives_the_committed_chapters_values():
    full = load_results(ROOT / "results" / "ch06" / "full" / "ablations.json")
    ch4_full = load_results(ROOT / "results" / "ch04" / "full" / "train.json")
    measure = {"contrast": {"scirepeval": 0.5}, "attention": {"mass_on_gold": 0.3},
               "held_out_before": {"l_qd": 1.6}, "held_out_after": None}
    got = prose.ch6(full, structure={"untrained": measure, "full": measure}, steps=20,
                    case_ratio={"untrained": 1.0, "full": 1.5}, ch4_full=ch4_full, left_out=[])
    shown = committed_glue("06_ablations.ipynb")
    assert set(got) == set(shown)
    of_full = [k for k in got if k.startswith(("ch6_full_", "ch6_paper_", "ch6_fig3_", "ch6_ch4_"))]
    assert len(of_full) > 30
    assert {k: as_glued(got[k]) for k in of_full} == {k: shown[k] for k in of_full}
    assert quoted_names("06_ablations.ipynb") <= set(shown)
    assert np.isnan(got["ch6_lqd_after"]) and got["ch6_case_ratio_full"] == 1.5
    left = prose.ch6(full, structure={"untrained": measure, "full": measure}, steps=20,
                     case_ratio={"untrained": 1.0, "full": 1.5}, ch4_full=ch4_full, left_out=["w/o L_KL"])
    assert left["ch6_full_left_out"].startswith("Rows of the `full` profile not yet in its committed results: 'w/o L_KL'")


def _ch5_inputs() -> dict:
    """Chapter 5's inputs as the chapter builds them from the committed records."""
    from unifar.evaluation.attention import ceiling_ladder, ceiling_mixes
    from unifar.evaluation.hybrid import hybrid_study_table
    from unifar.evaluation.power import label_verdicts
    from unifar.evaluation.report import seed_spread_table

    full = load_results(ROOT / "results" / "ch05" / "full" / "evaluation.json")
    res = full["results"]
    power = pd.DataFrame(res["power"])
    read = lambda name: json.loads((ROOT / "results" / "ch05" / name).read_text())
    study = hybrid_study_table({n: read(f"hybrid_{n}.json") for n in ("minilm", "mpnet", "minilm_labeller")})
    ceiling = read("attention_ceiling.json")
    labellers = {"labeller": read("attention_ceiling_labeller.json"), "probe": read("attention_ceiling_probe.json"),
                 "probe_cs": read("attention_ceiling_probe_csabstruct.json")}
    mix = ceiling_mixes(ceiling)
    by_labels = pd.DataFrame({"CSFCube's labels (oracle)": ceiling_ladder(ceiling, "", mix),
                              "probe, human labels (soft)": ceiling_ladder(labellers["probe"], "probe soft ", mix),
                              "probe, human labels (hard)": ceiling_ladder(labellers["probe"], "probe hard ", mix),
                              "probe, CSAbstruct only (soft)": ceiling_ladder(labellers["probe_cs"], "probe soft ", mix),
                              "chapter 2's labeller": ceiling_ladder(labellers["labeller"], "labeller ", mix)},
                             index=pd.Index(mix, name="a"))
    full_verdicts = label_verdicts(pd.DataFrame(res["verdicts"]), power)
    return dict(full=full, profile="default", base="minilm", power=power, verdicts=full_verdicts,
                full_verdicts=full_verdicts,
                full_fold_verdicts=label_verdicts(pd.DataFrame(res["fold_verdicts"]), power),
                study_table=study.drop(index=("minilm_labeller", "mean")),
                full_spread=seed_spread_table(res, res["seed_spread"]),
                diagnosis={"token": read("qdoc_diagnosis_token_branch.json"), "sentence": read("qdoc_diagnosis.json")},
                token_attention=False, train_values=True, ceiling=ceiling, ceiling_by_labels=by_labels,
                labellers=labellers)


def test_ch5_gives_the_committed_chapters_values():
    inputs = _ch5_inputs()
    got = prose.ch5(inputs.pop("full"), **inputs)
    shown = committed_glue("05_evaluation.ipynb")
    assert set(got) == set(shown)
    run_only = {"ch5_n_compared", "ch5_n_agree"}  # this run's verdicts against the full profile's
    same = [k for k in got if k not in run_only]
    assert {k: as_glued(got[k]) for k in same} == {k: shown[k] for k in same}
    assert got["ch5_n_agree"] == got["ch5_n_compared"] > 0  # the full verdicts agree with themselves
    assert quoted_names("05_evaluation.ipynb") <= set(shown)


def test_ch3_gives_the_committed_chapters_values():
    """The full record has the keys of what a run saves, so it stands in for the run: the full
    profile's and the paper's numbers must be the committed chapter's, the run's must exist."""
    from unifar.construction.mining import MiningConfig

    full = load_results(ROOT / "results" / "ch03" / "full" / "ftus.json")
    bench_128 = json.loads((ROOT / "results" / "ch03" / "signal_check_128_tokens.json").read_text())
    got = prose.ch3(full["results"], full, bench_128=bench_128, max_length=512, grid=(0.1, 0.25, 0.5, 1.0),
                    weight=0.25, mining=MiningConfig(), cranfield_docs=1400)
    shown = committed_glue("03_data_construction.ipynb")
    assert set(got) == set(shown)
    of_full = [k for k in got if k.startswith(("ch3_full_", "ch3_128_", "ch3_paper_"))]
    assert len(of_full) > 15
    assert {k: as_glued(got[k]) for k in of_full} == {k: shown[k] for k in of_full}
    assert got["ch3_ftus"] == got["ch3_full_ftus"] and got["ch3_max_cos"] == got["ch3_full_max_cos"]
    assert quoted_names("03_data_construction.ipynb") <= set(shown)


def test_ch2_gives_the_committed_chapters_values():
    """The full record has the shape of what a run saves, so it stands in for the run."""
    import inspect

    from unifar.rhetoric.labeller_scores import choose_regularisation

    full = load_results(ROOT / "results" / "ch02" / "full" / "rhetoric.json")
    read = lambda path: json.loads((ROOT / path).read_text())
    paper_rows = {"base": "SciBERT avg.", "softmax": "SciToricsBERT (Softmax loss)",
                  "triplet": "SciToricsBERT (Triplet loss)", "arcface": "SciToricsBERT (ArcFace loss)",
                  "ms": "SciToricsBERT (MS loss)", "ntxent": "SciToricsBERT (NT-Xent loss)"}
    got = prose.ch2(full["results"], full, losses=["softmax", "triplet", "arcface", "ms", "ntxent"],
                    paper_rows=paper_rows, n_available=1000, smoke=read("results/labeller_smoke.json"),
                    stability=read("results/ch02/labeller_stability.json"), n_dev_facet=100,
                    tolerance=inspect.signature(choose_regularisation).parameters["tolerance"].default,
                    shipped=read("results/search/default_labeller.json"),
                    sentence_alone=read("results/search/sentence_labeller.json"),
                    labeller_cost=read("results/search/labeller_cost.json"))
    shown = committed_glue("02_rhetorical_sentence_embeddings.ipynb")
    assert set(got) == set(shown)
    # this run's numbers, and the two that depend on the run's count of available sentences
    same = [k for k in got if not k.startswith("ch2_run_") and k not in ("ch2_full_train_share", "ch2_full_cfs3_ratio")]
    assert len(same) > 100
    assert {k: as_glued(got[k]) for k in same} == {k: shown[k] for k in same}
    assert got["ch2_run_best_gain"] == got["ch2_full_best_gain"]  # the same function for run and full
    assert quoted_names("02_rhetorical_sentence_embeddings.ipynb") <= set(shown)


def _ch4(full: dict, run: dict | None = None, sources: dict | None = None) -> dict:
    """prose.ch4 with chapter 4's default settings; the full record stands in for the run."""
    from unifar.config import UniFARConfig
    from unifar.datasets.csfcube import load_csfcube
    from unifar.profiles import CH4_CPU_MODEL, PROFILES

    default = PROFILES["ch04"]["default"]  # the chapter's default profile
    cube = load_csfcube(ROOT / "data" / "csfcube")
    return prose.ch4(run or full["results"], full, config=UniFARConfig(**default["config"]),
                     eval_fraction=default["args"]["eval_fraction"], cpu_model=CH4_CPU_MODEL,
                     ftu_sources=sources or {"scirepeval_search": 30, "csfcube": 12},
                     n_fold1_dev=len(cube.splits["all"]["fold1_dev"]), results_dir=ROOT / "results")


def test_ch4_gives_the_committed_chapters_values():
    full = load_results(ROOT / "results" / "ch04" / "full" / "train.json")
    got = _ch4(full)
    shown = committed_glue("04_training.ipynb")
    assert set(got) == set(shown)
    run_only = set(prose.chapter4._this_run(full["results"], {"x": 1}))
    same = [k for k in got if k not in run_only]
    assert len(same) > 250
    assert {k: as_glued(got[k]) for k in same} == {k: shown[k] for k in same}
    assert quoted_names("04_training.ipynb") <= set(shown)


def test_ch4_run_values_come_from_the_run():
    """With the full record as the run, the run's numbers are the full profile's; the FTU
    documents are counted by source."""
    full = load_results(ROOT / "results" / "ch04" / "full" / "train.json")
    got = _ch4(full, sources={"scirepeval_search": 30, "csfcube": 12, None: 3})
    for run_key, full_key in (("ch4_dev_trained", "ch4_full_dev_trained"), ("ch4_entropy", "ch4_full_entropy"),
                              ("ch4_dev_untrained", "ch4_full_dev_untrained"), ("ch4_dev_mean", "ch4_full_dev_mean"),
                              ("ch4_cos_untrained", "ch4_full_cos_untrained"), ("ch4_first_lkl", "ch4_full_first_lkl"),
                              ("ch4_uniform_mass", "ch4_full_uniform_mass")):
        assert got[run_key] == got[full_key], run_key
    assert (got["ch4_n_docs"], got["ch4_n_docs_s2"], got["ch4_n_docs_human"]) == (45, 30, 15)
    assert got["ch4_dev_vs_mean"] == ("above" if got["ch4_full_dev_vs_mean"] == "above" else "not above")
    moved = {**full["results"], "fold1_dev_map": {**full["results"]["fold1_dev_map"],
                                                  "mean pooling": {"all": 0.0}}}
    assert _ch4(full, run=moved)["ch4_dev_vs_mean"] == "above"
