"""unifar.paper: the reported numbers, transcribed exactly, complete, and consistent where the papers are."""

from __future__ import annotations

import re
from statistics import mean

import pytest

from unifar import paper
from unifar.paper import (
    FLEW_TABLES,
    MULTI_OBJECTIVE_TABLES,
    PRINTED,
    SCITORICSBERT_FACTS,
    SCITORICSBERT_HYPERPARAMETERS,
    SCITORICSBERT_SEARCH_GRID,
    SCITORICSBERT_TABLE2,
    SCITORICSBERT_TABLE3,
    SCITORICSBERT_TABLE4,
    TABLES,
    UNIFAR_APPENDIX_B,
    UNIFAR_FACTS,
    UNIFAR_HYPERPARAMETERS,
    UNIFAR_TABLE1,
    UNIFAR_TABLE2,
    UNIFAR_TABLE3,
    UNIFAR_TABLE7,
    UNIFAR_TABLE8,
    Table,
    all_reported_numbers,
    reported,
)

# The golden SPECTER row of tests/test_csfcube.py (the official protocol reproduces it exactly).
GOLDEN_SPECTER = {
    "background MAP": 43.95, "background NDCG%20": 66.70, "method MAP": 22.44, "method NDCG%20": 37.41,
    "result MAP": 36.79, "result NDCG%20": 56.67, "aggregated MAP": 34.23, "aggregated NDCG%20": 53.28,
}


def _close(a: float, b: float, tol: float = 1e-9) -> bool:
    return abs(a - b) <= tol


# --- structure ------------------------------------------------------------------------------------


def test_specter_row_equals_the_golden_values():
    assert UNIFAR_TABLE2.rows["SPECTER"] == GOLDEN_SPECTER
    assert UNIFAR_TABLE2.printed["SPECTER"]["background NDCG%20"] == "66.70"
    assert reported("unifar/table2", "SPECTER", "aggregated MAP") == 34.23


def test_registry_holds_every_table_under_the_documented_keys():
    for key in ("unifar/table1", "unifar/table2", "unifar/table3", "unifar/table4", "unifar/table8",
                "scitoricsbert/table4", "flew/table1", "flew/table2", "flew/table3", "multiobjective/table1",
                "multiobjective/table2"):
        assert key in TABLES
    assert TABLES["unifar/table4"] is UNIFAR_APPENDIX_B
    for group in (FLEW_TABLES, MULTI_OBJECTIVE_TABLES):
        for label, table in group.items():
            assert table.label == label
            assert any(t is table for t in TABLES.values())
    for name in ("UNIFAR_TABLE1", "UNIFAR_TABLE2", "UNIFAR_TABLE3", "UNIFAR_TABLE7", "UNIFAR_TABLE8",
                 "UNIFAR_APPENDIX_B", "SCITORICSBERT_TABLE2", "SCITORICSBERT_TABLE3", "SCITORICSBERT_TABLE4"):
        assert any(t is getattr(paper, name) for t in TABLES.values()), name


@pytest.mark.parametrize("key", sorted(TABLES))
def test_every_table_is_rectangular_or_documents_its_missing_cells(key):
    table = TABLES[key]
    assert isinstance(table, Table) and table.paper and table.label and table.caption
    assert table.rows and table.columns
    assert set(table.printed) == set(table.rows)
    for row, cells in table.rows.items():
        missing = {c for r, c in table.missing if r == row}
        assert set(cells) == set(table.printed[row])
        assert set(cells) | missing == set(table.columns), (key, row)
        assert not set(cells) & missing
    if table.missing:
        assert "legible" in table.notes  # a missing cell is explained
    for group, members in table.groups.items():
        assert set(members) <= set(table.rows), (key, group)


@pytest.mark.parametrize("key", sorted(TABLES))
def test_printed_strings_keep_the_decimals_and_give_the_stored_values(key):
    table = TABLES[key]
    for row, cells in table.printed.items():
        for column, text in cells.items():
            d = table.decimals[column]
            value = table.rows[row][column]
            bare = text.rstrip("%").lstrip("+").replace(",", "")
            assert (len(bare.split(".")[1]) if "." in bare else 0) == d, (key, row, column, text)
            formatted = f"{value:.{d}f}"
            if bare.startswith(".") or bare.startswith("-."):
                formatted = formatted.replace("0.", ".", 1)
            assert formatted == bare, (key, row, column, text, value)
            if d == 0:
                assert isinstance(value, int)


def test_frame_has_the_rows_and_columns_in_the_paper_order():
    df = UNIFAR_TABLE2.frame()
    assert df.shape == (14, 8)
    assert list(df.columns) == list(UNIFAR_TABLE2.columns)
    assert list(df.index) == list(UNIFAR_TABLE2.rows)
    assert df.loc["SPECTER"].to_dict() == GOLDEN_SPECTER
    flew = FLEW_TABLES["table 1"].frame()
    assert flew["Total AVG"].isna().sum() == 5 and flew.loc["FLeW", "Total AVG"] == 60.81


def test_table_sizes():
    sizes = {key: (len(t.rows), len(t.columns)) for key, t in TABLES.items()}
    assert sizes["unifar/table1"] == (14, 9)
    assert sizes["unifar/table2"] == (14, 8)
    assert sizes["unifar/table3"] == (8, 7)
    assert sizes["unifar/table4"] == (19, 2)
    assert sizes["unifar/table8"] == (5, 12)
    assert sizes["scitoricsbert/table4"] == (12, 4)
    assert sizes["flew/table1"] == (6, 24)
    assert sizes["flew/table2"] == (20, 12)


# --- lookups --------------------------------------------------------------------------------------


def test_value_names_the_known_rows_on_a_typo():
    with pytest.raises(KeyError) as err:
        UNIFAR_TABLE2.value("SPECTRE", "aggregated MAP")
    message = str(err.value)
    assert "SPECTRE" in message and "'SPECTER'" in message and "'UniFAR-MPNet'" in message


def test_value_names_the_known_columns_on_a_typo():
    with pytest.raises(KeyError) as err:
        UNIFAR_TABLE2.value("SPECTER", "all MAP")
    assert "'aggregated MAP'" in str(err.value) and "'background NDCG%20'" in str(err.value)


def test_reported_names_the_known_tables_and_refuses_missing_cells():
    with pytest.raises(KeyError) as err:
        reported("unifar/table9", "SPECTER", "aggregated MAP")
    assert "'unifar/table2'" in str(err.value)
    with pytest.raises(KeyError, match="not legible"):
        reported("flew/table1", "SPECTER-2", "Total AVG")
    assert reported("flew/table1", "FLeW", "Total AVG") == 60.81


def test_notebook_row_names_exist_in_table2():
    for name in ("MPNet", "UniFAR-MPNet", "SciBERT", "UniFAR-SciBERT", "SPECTER", "SciNCL", "SPECTER-2"):
        assert name in UNIFAR_TABLE2.rows


# --- every number the book quotes today (verified against the papers' text) -------------------------


def test_numbers_the_book_quotes():
    # chapters 1 and 5: table 2 rows (MAP, NDCG%20) per facet and aggregated
    quoted = {
        "SciNCL": (49.64, 70.02, 27.14, 46.61, 41.83, 61.70, 39.37, 59.24),
        "SPECTER-2": (50.79, 70.92, 27.19, 47.28, 39.65, 63.73, 39.86, 60.42),
        "UniFAR-SciBERT": (51.91, 72.55, 25.76, 47.72, 43.19, 64.88, 39.97, 61.27),
        "MPNet": (50.68, 72.30, 27.58, 47.32, 42.81, 65.42, 40.03, 61.46),
        "UniFAR-MPNet": (50.88, 72.36, 27.65, 47.42, 47.48, 66.97, 41.90, 62.08),
        "SciBERT": (25.89, 44.99, 19.23, 34.41, 23.06, 42.06, 22.63, 40.33),
    }
    for row, values in quoted.items():
        assert tuple(UNIFAR_TABLE2.rows[row][c] for c in UNIFAR_TABLE2.columns) == values
    # chapter 5: DORIS-MAE Query MAP and LitSearch Recall@10
    assert reported("unifar/table1", "MPNet", "Query MAP") == 40.94
    assert reported("unifar/table1", "UniFAR-MPNet", "Query MAP") == 41.47
    assert reported("unifar/table8", "UniFAR-SciBERT", "Recall@10") == 44.89
    # chapter 2: SciToricsBERT table 4, CS and PubMed columns
    cs = {"GloVe avg.": (0.445, 0.124), "BERT avg.": (0.553, 0.166), "RoBERTa avg.": (0.523, 0.159),
          "SciBERT avg.": (0.563, 0.169), "PubMedBERT avg.": (0.553, 0.169), "SRoBERTa": (0.480, 0.136),
          "SimCSE-RoBERTa": (0.529, 0.164), "SciToricsBERT (Softmax loss)": (0.616, 0.226),
          "SciToricsBERT (Triplet loss)": (0.599, 0.214), "SciToricsBERT (ArcFace loss)": (0.576, 0.205),
          "SciToricsBERT (MS loss)": (0.583, 0.191), "SciToricsBERT (NT-Xent loss)": (0.591, 0.216)}
    for row, (p1, mapr) in cs.items():
        assert SCITORICSBERT_TABLE4.value(row, "CS P@1") == p1 and SCITORICSBERT_TABLE4.value(row, "CS MAP@R") == mapr
    assert SCITORICSBERT_TABLE4.value("SciBERT avg.", "PubMed P@1") == 0.700
    assert SCITORICSBERT_TABLE4.value("SciBERT avg.", "PubMed MAP@R") == 0.204
    assert SCITORICSBERT_TABLE4.value("SciToricsBERT (Softmax loss)", "PubMed P@1") == 0.761
    assert SCITORICSBERT_TABLE4.value("SciToricsBERT (Softmax loss)", "PubMed MAP@R") == 0.325
    assert SCITORICSBERT_FACTS["cfs3_sentences"] == 100016 and SCITORICSBERT_FACTS["cfs3_labels"] == 77
    assert SCITORICSBERT_FACTS["csabstruct_sentences"] == 1349 and SCITORICSBERT_FACTS["csabstruct_labels"] == 5
    assert SCITORICSBERT_HYPERPARAMETERS == {
        "triplet_margin": 0.05, "arcface_margin": 0.5, "arcface_scale": 16, "ms_alpha": 2, "ms_beta": 40,
        "ms_lambda": 0.75, "ntxent_temperature": 0.1, "learning_rate": 2e-5, "batch_size": 64,
        "pk_p_softmax_arcface": 64, "pk_k_softmax_arcface": 1, "pk_p_others": 8, "pk_k_others": 8, "max_epochs": 5,
    }
    # chapter 3: appendix B (rounded there: 3.0 M / 101 k, 1.5 M / 77 k, 1.2 M / 39 k) and the totals
    for field, (docs_m, questions_k) in {"Medicine": (3.0, 101), "Computer Science": (1.5, 77),
                                         "Biology": (1.2, 39)}.items():
        assert round(UNIFAR_APPENDIX_B.value(field, "# Documents") / 1e6, 1) == docs_m
        assert round(UNIFAR_APPENDIX_B.value(field, "# Questions (×3)") / 1e3) == questions_k
    assert len(UNIFAR_APPENDIX_B.rows) == 19  # "19 fields"
    assert UNIFAR_FACTS["ftus"] == 217806 and UNIFAR_FACTS["facet_labelled_documents"] == 7428874
    # chapter 4: appendix A
    assert UNIFAR_HYPERPARAMETERS == {
        "temperature": 0.08, "kl_lambda_start": 0.3, "kl_lambda_end": 0.5, "lr_base": 2e-5, "lr_anchors": 2e-5,
        "lr_aggregation": 5e-5, "lr_mpnet": 3e-6, "batch_size": 4, "grad_accumulation": 4, "epochs": 2,
        "warmup_percent": 5, "gpus": 4, "gpu_memory_gb": 24,
    }


def test_all_reported_numbers_holds_the_printed_and_plain_forms():
    numbers = all_reported_numbers()
    expected = {"41.90", "34.23", "66.70", "217,806", "217806", "7,428,874", "7428874", ".616", "0.616",
                ".226", "0.226", "0.08", "2e-5", "2e-05", "5e-5", "3e-6", "44.89", "40.94", "41.47", "100,016",
                "100016", "1,349", "1349", "3,002,908", "101,065", "60.81", "+5.6%", "5.6", "-1.8%", "216k",
                "2.16M", "0.270", "0.05", "0.75", "5%", "1e-8"}
    assert expected <= numbers, expected - numbers
    assert all(isinstance(n, str) and n == n.strip() and n for n in numbers)
    # every stored fact and hyper-parameter is there as printed
    for values in PRINTED.values():
        assert set(values.values()) <= numbers
    # nothing measured here sneaks in: numbers that no paper prints are absent
    assert not {"39.40", "40.02", "97.84", "1.87"} & numbers


def test_printed_facts_parse_to_the_stored_values():
    dicts = {"unifar/facts": UNIFAR_FACTS, "unifar/hyperparameters": UNIFAR_HYPERPARAMETERS,
             "scitoricsbert/facts": SCITORICSBERT_FACTS, "scitoricsbert/hyperparameters": SCITORICSBERT_HYPERPARAMETERS,
             "flew/facts": paper.FLEW_FACTS, "flew/hyperparameters": paper.FLEW_HYPERPARAMETERS,
             "multiobjective/facts": paper.MULTI_OBJECTIVE_FACTS,
             "multiobjective/hyperparameters": paper.MULTI_OBJECTIVE_HYPERPARAMETERS}
    assert set(dicts) == set(PRINTED)
    for name, values in dicts.items():
        assert set(values) == set(PRINTED[name])
    assert paper.FLEW_FACTS["query_papers"] == 216000 and paper.FLEW_FACTS["triplets"] == 2160000
    assert paper.MULTI_OBJECTIVE_HYPERPARAMETERS["learning_rate"] == 2e-5
    assert paper.MULTI_OBJECTIVE_HYPERPARAMETERS["adam_epsilon"] == 1e-8
    assert SCITORICSBERT_FACTS["train_validation_ratio"] == 4
    for key, value in SCITORICSBERT_HYPERPARAMETERS.items():
        if key in SCITORICSBERT_SEARCH_GRID:  # the bulleted value is one of the values searched
            assert value in SCITORICSBERT_SEARCH_GRID[key]


# --- consistency inside the papers ----------------------------------------------------------------


def test_unifar_ablation_full_row_is_unifar_scibert():
    # Table 3's caption: "Ablation study on UniFAR-SciBERT evaluated by MAP".
    full = UNIFAR_TABLE3.rows["UniFAR (full)"]
    for level in ("Query", "Aspect", "Subquery_2"):
        assert full[f"DORIS-MAE {level} MAP"] == UNIFAR_TABLE1.value("UniFAR-SciBERT", f"{level} MAP")
    for facet in ("background", "method", "result", "aggregated"):
        assert full[f"CSFCube {facet} MAP"] == UNIFAR_TABLE2.value("UniFAR-SciBERT", f"{facet} MAP")
    # every ablation is below the full model on CSFCube aggregated MAP
    assert all(r["CSFCube aggregated MAP"] < full["CSFCube aggregated MAP"]
               for name, r in UNIFAR_TABLE3.rows.items() if name != "UniFAR (full)")


def _gain(table: Table, better: str, worse: str, column: str) -> float:
    return round(table.value(better, column) - table.value(worse, column), 2)


def test_unifar_gains_quoted_in_the_prose():
    t1, t2, t8 = UNIFAR_TABLE1, UNIFAR_TABLE2, UNIFAR_TABLE8
    # section 5.2, q-doc
    assert _gain(t1, "UniFAR-SciBERT", "FLeW", "Query MAP") == 0.31
    assert _gain(t1, "UniFAR-SciBERT", "SPECTER-2", "Query Recall@5") == 0.54
    assert _gain(t1, "UniFAR-SciBERT", "SciBERT-ID", "Query MAP") == 7.53
    assert _gain(t1, "UniFAR-SciBERT", "SciBERT-ID", "Subquery_2 MAP") == 5.82
    assert t1.value("UniFAR-SciBERT", "Subquery_2 Recall@5") == 11.25
    assert _gain(t1, "UniFAR-Contriever", "OSRetriever", "Query Recall@5") == 3.04
    assert _gain(t1, "UniFAR-Contriever", "OSRetriever", "Query R-Precision") == 3.10
    assert _gain(t1, "UniFAR-MPNet", "MPNet", "Subquery_2 MAP") == 1.20
    # section 5.2, doc-doc
    assert _gain(t2, "UniFAR-SciBERT", "FLeW-bg/mt/rs", "background NDCG%20") == 1.46
    assert _gain(t2, "UniFAR-SciBERT", "FaBle-SPECTER", "method NDCG%20") == 2.75
    assert _gain(t2, "UniFAR-SciBERT", "FLeW-bg/mt/rs", "result MAP") == 4.16
    assert _gain(t2, "UniFAR-Contriever", "OSRetriever", "aggregated MAP") == 0.75
    assert _gain(t2, "UniFAR-MPNet", "MPNet", "result MAP") == 4.67
    scibert_group = t2.groups["SciBERT"]
    for column in ("background MAP", "result MAP"):  # "best results on both the Background and Result facets"
        assert max(scibert_group, key=lambda r: t2.value(r, column)) == "UniFAR-SciBERT"
    # appendix E
    assert _gain(t8, "UniFAR-SciBERT", "FLeW", "Recall@20") == 3.03
    for column in t8.columns:  # "consistent improvements over all competitive baselines"
        assert max(t8.rows, key=lambda r: t8.value(r, column)) == "UniFAR-SciBERT"


def test_unifar_prose_mismatches_are_as_documented():
    # "+1.13 MAP on the Query level" (MPNet) is the Recall@5 gain; the MAP gain is 0.53.
    assert _gain(UNIFAR_TABLE1, "UniFAR-MPNet", "MPNet", "Query MAP") == 0.53
    assert _gain(UNIFAR_TABLE1, "UniFAR-MPNet", "MPNet", "Query Recall@5") == 1.13
    # "nDCG@20 +1.51" is the margin over FLeW, not over the best baseline (SPECTER-2).
    assert _gain(UNIFAR_TABLE8, "UniFAR-SciBERT", "FLeW", "nDCG@20") == 1.51
    assert _gain(UNIFAR_TABLE8, "UniFAR-SciBERT", "SPECTER-2", "nDCG@20") == 1.36
    # CoSentBERT's aggregated NDCG%20 is printed equal to its result NDCG%20.
    assert UNIFAR_TABLE2.value("CoSentBERT", "aggregated NDCG%20") == UNIFAR_TABLE2.value("CoSentBERT", "result NDCG%20")
    # Appendix B's columns do not sum to the totals of the text.
    docs = sum(r["# Documents"] for r in UNIFAR_APPENDIX_B.rows.values())
    questions = sum(r["# Questions (×3)"] for r in UNIFAR_APPENDIX_B.rows.values())
    assert (docs, questions) == (8784021, 308975)
    assert "8,784,021" in UNIFAR_APPENDIX_B.notes and "308,975" in UNIFAR_APPENDIX_B.notes


def test_unifar_table7_matches_the_csfcube_protocol():
    csfcube = [UNIFAR_TABLE7.value(f"CSFCube {f}", "# Queries") for f in ("background", "method", "result")]
    assert sum(csfcube) == 50  # the 50 query-facet pairs of chapter 1
    assert UNIFAR_TABLE7.value("LitSearch", "# Queries") == 597


def test_scitoricsbert_averages_and_dataset_statistics():
    for row, cells in SCITORICSBERT_TABLE3.rows.items():
        for metric in ("P@1", "MAP@R"):
            sections = [cells[f"{s} {metric}"] for s in ("Introduction", "Methods", "Results", "Discussion")]
            assert abs(mean(sections) - cells[f"Avg. {metric}"]) <= 0.0011, (row, metric)
    cf = [SCITORICSBERT_TABLE2.value(f"CF-labeled {s}", "#labels") for s in ("Introduction", "Methods", "Results",
                                                                               "Discussion")]
    assert sum(cf) == SCITORICSBERT_FACTS["cf_labeled_labels"] == 32
    assert SCITORICSBERT_TABLE2.value("CSAbstruct", "#sentences") == SCITORICSBERT_FACTS["csabstruct_sentences"]
    assert SCITORICSBERT_TABLE2.value("PubMed-RCT", "#sentences") == SCITORICSBERT_FACTS["pubmed_rct_sentences"]
    # section 4.2: "softmax cross-entropy loss outperforms all other methods in CSAbstruct and PubMed-RCT"
    for column in SCITORICSBERT_TABLE4.columns:
        best = max(SCITORICSBERT_TABLE4.rows, key=lambda r: SCITORICSBERT_TABLE4.value(r, column))
        assert best == "SciToricsBERT (Softmax loss)", column


def test_flew_tables_agree_with_each_other_and_their_averages():
    t1, t2, t3 = FLEW_TABLES["table 1"], FLEW_TABLES["table 2"], FLEW_TABLES["table 3"]
    assert t3.rows["FLeW"] == t1.rows["FLeW"]
    assert t3.rows["FLeW - w/o Structural"] == {**t1.rows["SPECTER-2"], "Total AVG": 60.21}
    assert round(t1.value("FLeW", "Total AVG") - t3.value("FLeW - w/o Structural", "Total AVG"), 2) == 0.60
    formats = {"[PRX] Avg": t1.columns[0:5], "[RGN] Avg": t1.columns[6:11], "[QRY] Avg": t1.columns[12:15],
               "[CLF] Avg": t1.columns[16:22]}
    tasks = [c for cols in formats.values() for c in cols]
    assert len(tasks) == 19
    for table in (t1, t3):
        for row, cells in table.rows.items():
            for avg, cols in formats.items():
                assert abs(mean(cells[c] for c in cols) - cells[avg]) <= 0.006, (table.label, row, avg)
            if "Total AVG" in cells:
                assert abs(mean(cells[c] for c in tasks) - cells["Total AVG"]) <= 0.006, (table.label, row)
    fields = [r for r in t2.rows if r != "Avg"]
    assert len(fields) == 19
    for column in t2.columns:
        assert abs(mean(t2.value(f, column) for f in fields) - t2.value("Avg", column)) <= 0.051, column


def test_multi_objective_tables_agree_with_each_other():
    t1, deltas = MULTI_OBJECTIVE_TABLES["table 1"], MULTI_OBJECTIVE_TABLES["table 1 (relative improvements)"]
    t2, t3, t4 = (MULTI_OBJECTIVE_TABLES[f"table {i}"] for i in (2, 3, 4))
    for model in ("ICrop+context2doc", "AllObj-Alt"):
        for single in ("MS MARCO", "SPECTER"):
            for column in t1.columns:
                rel = 100 * (t1.value(model, column) / t1.value(single, column) - 1)
                assert f"{rel:+.1f}" == f"{deltas.value(f'{model} ∆{single}', column):+.1f}", (model, single, column)
    assert t1.rows["MS MARCO"] == t3.rows["MS MARCO"] == t4.rows["Baselines: MSMARCO"]
    assert t1.rows["SPECTER"] == t3.rows["SPECTER"] == t4.rows["Baselines: SPECTER"]
    assert t3.rows["ICrop."] == t4.rows["Baselines: ICrop."]
    assert t1.rows["ICrop+context2doc"] == t3.rows["ICrop. + unarXiv context2doc"]
    assert t1.rows["AllObj-Alt"] == t2.rows["MS MARCO, SPECTER, ICrop.: alternate"]
    assert t2.rows["(1) MS MARCO, (2) ICrop.: finetune 2 → 1"] == t3.rows["ICrop. + MS MARCO"]
    assert t2.rows["(1) SPECTER, (2) ICrop.: finetune 2 → 1"] == t3.rows["ICrop. + SPECTER"]


# --- the library's constants say what the papers say ----------------------------------------------


def test_config_defaults_are_the_papers_hyper_parameters():
    from unifar.config import UniFARConfig

    c = UniFARConfig()
    h = UNIFAR_HYPERPARAMETERS
    assert (c.temperature, c.kl_lambda_start, c.kl_lambda_end) == (h["temperature"], h["kl_lambda_start"],
                                                                   h["kl_lambda_end"])
    assert (c.lr_base, c.lr_anchors, c.lr_aggregation) == (h["lr_base"], h["lr_anchors"], h["lr_aggregation"])
    assert (c.batch_size, c.grad_accumulation, c.epochs) == (h["batch_size"], h["grad_accumulation"], h["epochs"])
    assert _close(c.warmup_ratio, h["warmup_percent"] / 100)


def test_rhetoric_constants_are_scitoricsberts():
    finetune = pytest.importorskip("unifar.rhetoric.finetune")
    losses = pytest.importorskip("unifar.rhetoric.losses")
    sampling = pytest.importorskip("unifar.rhetoric.sampling")
    h = SCITORICSBERT_HYPERPARAMETERS
    assert finetune.PAPER_LR == h["learning_rate"] and sampling.PAPER_BATCH_SIZE == h["batch_size"]
    p = losses.PAPER_HYPERPARAMETERS
    assert p["triplet"]["margin"] == h["triplet_margin"]
    assert (p["arcface"]["margin"], p["arcface"]["scale"]) == (h["arcface_margin"], h["arcface_scale"])
    assert (p["ms"]["alpha"], p["ms"]["beta"], p["ms"]["base"]) == (h["ms_alpha"], h["ms_beta"], h["ms_lambda"])
    assert p["ntxent"]["temperature"] == h["ntxent_temperature"]
    for loss, pk in sampling.PAPER_PK.items():
        if loss in ("softmax", "arcface"):
            assert pk == (h["pk_p_softmax_arcface"], h["pk_k_softmax_arcface"])
        else:
            assert pk == (h["pk_p_others"], h["pk_k_others"])


def test_module_docstring_names_every_table():
    doc = paper.__doc__
    for table in TABLES.values():
        assert re.search(re.escape(table.label.split(",")[-1].strip()), doc), table.label
