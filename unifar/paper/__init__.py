"""Numbers reported in the papers (never measured here): the book's single source for them.

The book never types a paper's reported number into prose or notebook code; it takes it from
this module. Every table cell is kept twice: as a number (``Table.rows``) and as the string the
paper prints (``Table.printed``: ``"66.70"``, ``".616"``, ``"3,002,908"``, ``"+5.6%"``), so the
number of printed decimals (``Table.decimals``, per column) is never lost. The facts and
hyper-parameters quoted in prose are dicts of numbers, each with its printed form in
:data:`PRINTED`. Percent metrics are stored in percent, as the papers print them (MAP 34.23
means 34.23 %); SciToricsBERT's P@1 / MAP@R and the multi-objective paper's ndcg@10 are
fractions (``.616``, ``0.270``), as printed there.

>>> reported("unifar/table2", "SPECTER", "aggregated MAP")
34.23
>>> UNIFAR_TABLE2.printed["SPECTER"]["background NDCG%20"], UNIFAR_TABLE2.decimals["background NDCG%20"]
('66.70', 2)
>>> SCITORICSBERT_TABLE4.printed["SciToricsBERT (Softmax loss)"]["CS P@1"]
'.616'
>>> UNIFAR_FACTS["ftus"], PRINTED["unifar/facts"]["ftus"]
(217806, '217,806')
>>> UNIFAR_HYPERPARAMETERS["lr_aggregation"], PRINTED["unifar/hyperparameters"]["lr_aggregation"]
(5e-05, '5e-5')

What is here, and where it is in which paper (the papers are read as plain text; page numbers
are not given where the text does not print them):

**UniFAR** (Dou et al., 2026, arXiv 2602.23766), the paper the book reproduces.

* :data:`UNIFAR_TABLE1` -- table 1 (section 5.2): DORIS-MAE q-doc, 14 systems x (Query, Aspect,
  Subquery_2) x (Recall@5, MAP, R-Precision). Row "UniFAR-X (Ours)" is stored as "UniFAR-X".
* :data:`UNIFAR_TABLE2` -- table 2 (section 5.2): CSFCube doc-doc, 14 systems x (background,
  method, result, aggregated) x (MAP, NDCG%20; the paper prints "nDCG%20").
* :data:`UNIFAR_TABLE3` -- table 3 (section 6): the ablation of UniFAR-SciBERT, MAP only, 8 rows
  x (DORIS-MAE Query, Aspect, Subquery_2; CSFCube background, method, result, aggregated).
* :data:`UNIFAR_APPENDIX_B` -- appendix B, table 4: documents and questions per scientific field
  (19 fields). The paper prints no totals row.
* :data:`UNIFAR_TABLE7` -- appendix D, table 7: benchmark statistics (queries per level,
  candidates).
* :data:`UNIFAR_TABLE8` -- appendix E, table 8: LitSearch q-doc, 5 systems x Recall, MRR, MAP,
  nDCG at 5, 10, 20.
* :data:`UNIFAR_CASE_STUDY_QUESTION`, :data:`UNIFAR_CASE_STUDY_DOCUMENTS` -- appendix F, table 9: the
  case study's LitSearch question and three abstracts, verbatim, with the sentence spans where the
  prose on figure 4 says each facet's attention peaks (:mod:`unifar.paper.unifar_case_study`).
* :data:`UNIFAR_FACTS` -- appendix B and the table-5 prompt: 217,806 FTUs, 7,428,874
  facet-labelled documents, 3 questions per query document, 25-50 words per question.
* :data:`UNIFAR_HYPERPARAMETERS` -- appendix A: tau 0.08, lambda 0.3 -> 0.5, learning rates
  2e-5 (base model and shared facet anchors) / 5e-5 (other aggregation modules) / 3e-6 (MPNet),
  batch 4, gradient accumulation 4, 2 epochs, 5% linear warm-up, four 24 GB GPUs.

**SciToricsBERT** (Sugimoto and Aizawa, 2022), rhetorical sentence embeddings.

* :data:`SCITORICSBERT_TABLE2` -- table 2 (section 4.1): evaluation data sets (sentences,
  labels); CSAbstruct 1,349 sentences, 5 labels.
* :data:`SCITORICSBERT_TABLE3` -- table 3 (section 4.2): P@1 / MAP@R on the CF-labeled sentence
  data set (Introduction, Methods, Results, Discussion, Avg.).
* :data:`SCITORICSBERT_TABLE4` -- table 4 (section 4.2): P@1 / MAP@R on CSAbstruct ("CS") and
  PubMed-RCT ("PubMed"). The header prints "MAP"; the caption says MAP@R, the column names here
  say MAP@R.
* :data:`SCITORICSBERT_HYPERPARAMETERS` -- table 6 (the bulleted values) and appendix B / section
  4.1: margins, scales, temperatures, Adam 2e-5, batch 64, PK batches, at most five epochs.
* :data:`SCITORICSBERT_SEARCH_GRID` -- table 6: every value the hyper-parameter search tried.
* :data:`SCITORICSBERT_FACTS` -- sections 1, 3.2, 3.3, 4.1: CFS3 (100,016 sentences, 77 labels),
  768-dimensional [CLS] embeddings, five seeds, 4:1 train/validation split.

**FLeW** (Dou et al., 2025, arXiv 2509.07531). FLeW reports **no CSFCube results**: its tables are
SciRepEval (table 1), MDCR (table 2) and an ablation on SciRepEval (table 3). The CSFCube row
"FLeW-bg/mt/rs" exists only in UniFAR's table 2.

* ``FLEW_TABLES["table 1"]`` -- section 4.3: SciRepEval, 6 systems x 19 tasks, the four format
  averages and the total average.
* ``FLEW_TABLES["table 2"]`` -- section 4.3: MDCR citation recommendation, 19 fields + Avg x 6
  systems x (MAP, Recall@5).
* ``FLEW_TABLES["table 3"]`` -- section 4.4: the ablation on SciRepEval, same columns as table 1.
* :data:`FLEW_FACTS`, :data:`FLEW_HYPERPARAMETERS` -- sections 3.2, 3.3, 4.1, 4.3.

**Multi-objective dense retrieval** (Parisot and Zavrel, 2022).

* ``MULTI_OBJECTIVE_TABLES["table 1"]`` -- section 1 / 5: single objective vs multi-objective;
  its relative-improvement rows are ``MULTI_OBJECTIVE_TABLES["table 1 (relative improvements)"]``.
* ``MULTI_OBJECTIVE_TABLES["table 2"]`` -- section 5: the combination strategies.
* ``MULTI_OBJECTIVE_TABLES["table 3"]`` -- section 5: independent cropping + fine-tuning.
* ``MULTI_OBJECTIVE_TABLES["table 4"]`` -- section 5: fine-tuning on InPars.
* :data:`MULTI_OBJECTIVE_FACTS`, :data:`MULTI_OBJECTIVE_HYPERPARAMETERS` -- sections 4.1-4.3, 6.

Ambiguities, unreadable cells and where the papers disagree with themselves (nothing below is
guessed into a table):

* UniFAR table 2, CoSentBERT: the aggregated NDCG%20 (50.68) is printed equal to its result
  NDCG%20 (50.68); the query-weighted mean of its facets (16/17/17 queries, table 7) is 50.02.
  Kept as printed. Aggregated is in general not an exact function of the facet columns (the
  protocol averages two test folds): the weighted mean agrees within 0.1 for most rows, but
  differs by 0.88 (SPECTER-2 MAP), 0.94 / 0.36 (FLeW-bg/mt/rs) and 0.71 (OSRetriever MAP).
* UniFAR section 5.2 prose says UniFAR-MPNet improves "+1.13 MAP on the Query level" over MPNet;
  table 1 gives 41.47 - 40.94 = 0.53 MAP, and +1.13 is the Query *Recall@5* gain (16.08 - 14.95).
  The table is stored as printed.
* UniFAR appendix E prose: "nDCG@20 +1.51"; table 8's best baseline at nDCG@20 is SPECTER-2
  (30.68), a margin of 1.36; +1.51 is the margin over FLeW (30.53). Recall@20 +3.03 matches.
* UniFAR table 4 (appendix B): the documents column sums to 8,784,021 and the questions column to
  308,975, while the text gives 7,428,874 documents and 217,806 FTUs (one question triple per
  FTU); fields presumably overlap (a document can have several fields), the paper does not say.
  The header "# Questions (x3)" is read as "query documents, each with 3 questions"; whether the
  printed count must be multiplied by 3 is not stated. No totals row is printed, none is stored.
* UniFAR table 7 prints each benchmark's candidate count once for all its levels (a merged
  cell); here it is repeated on every level's row.
* UniFAR appendix A gives 3e-6 "for MPNet" without saying which parameter groups it replaces
  (base only, or also anchors and the aggregation modules): stored as ``lr_mpnet`` only.
* FLeW table 1: the "Total AVG" column is legible only for FLeW (60.81); the other five rows'
  cells are missing from the text and are left out (:attr:`Table.missing`). SPECTER-2's total
  (60.21) is printed in table 3 (row "- w/o Structural") and in the prose ("+0.60").
* FLeW table 1 prints shorter task headers than table 3 ("Author", "Citation", "PRX",
  "Biomics"); both tables use table 3's names here ("Same Author", "HighInf Citation",
  "SciDocs PRX", "Biomimicry"; "NFC-orpus" is hyphenated NFCorpus).
* FLeW section 4.1 prints the learning rate as "lambda = 2^-5" (0.03125), surely meaning 2e-5
  ("following [4, 13]"); left out. "2.16M triplets" does not say whether per facet or in all;
  stored as printed (``triplets``).
* SciToricsBERT table 2 gives 1,349 CSAbstruct sentences (5 labels) as "dataset statistics"; the
  paper does not say these are CSAbstruct's *test* split. Row names: the paper prints "base" as
  a subscript (BERT_base); stored as "BERT-base avg." etc. Its model name is printed in small
  capitals (SCITORICSBERT); stored as "SciToricsBERT (<loss> loss)".
* Multi-objective table 1 prints the relative improvements with a sign and a percent sign
  ("+5.6%"); they are stored in percent (5.6) in their own table.
"""

from __future__ import annotations

from .flew import (
    FLEW_TABLE1,
    FLEW_TABLE2,
    FLEW_TABLE3,
    FLEW_TABLES,
    FLEW_FACTS_PRINTED,
    FLEW_HYPERPARAMETERS_PRINTED,
)
from .multi_objective import (
    MO_TABLE1,
    MO_TABLE1_DELTAS,
    MO_TABLE2,
    MO_TABLE3,
    MO_TABLE4,
    MULTI_OBJECTIVE_TABLES,
    MULTI_OBJECTIVE_FACTS_PRINTED,
    MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED,
)
from .scitoricsbert import (
    SCITORICSBERT_TABLE2,
    SCITORICSBERT_TABLE3,
    SCITORICSBERT_TABLE4,
    SCITORICSBERT_HYPERPARAMETERS_PRINTED,
    SCITORICSBERT_SEARCH_GRID_PRINTED,
    SCITORICSBERT_FACTS_PRINTED,
)
from .table import FLEW, MULTI_OBJECTIVE, SCITORICSBERT, UNIFAR, Table, parse_number, typed_forms, values_of
from .unifar_case_study import UNIFAR_CASE_STUDY_DOCUMENTS, UNIFAR_CASE_STUDY_QUESTION, CaseStudyDocument
from .unifar_paper import (
    UNIFAR_TABLE1,
    UNIFAR_TABLE2,
    UNIFAR_TABLE3,
    UNIFAR_APPENDIX_B,
    UNIFAR_TABLE7,
    UNIFAR_TABLE8,
    UNIFAR_FACTS_PRINTED,
    UNIFAR_HYPERPARAMETERS_PRINTED,
)

__all__ = [
    "Table",
    "UNIFAR",
    "SCITORICSBERT",
    "FLEW",
    "MULTI_OBJECTIVE",
    "UNIFAR_TABLE1",
    "UNIFAR_TABLE2",
    "UNIFAR_TABLE3",
    "UNIFAR_APPENDIX_B",
    "UNIFAR_TABLE7",
    "UNIFAR_TABLE8",
    "UNIFAR_CASE_STUDY_QUESTION",
    "UNIFAR_CASE_STUDY_DOCUMENTS",
    "CaseStudyDocument",
    "UNIFAR_FACTS",
    "UNIFAR_HYPERPARAMETERS",
    "SCITORICSBERT_TABLE2",
    "SCITORICSBERT_TABLE3",
    "SCITORICSBERT_TABLE4",
    "SCITORICSBERT_HYPERPARAMETERS",
    "SCITORICSBERT_SEARCH_GRID",
    "SCITORICSBERT_FACTS",
    "FLEW_TABLES",
    "FLEW_FACTS",
    "FLEW_HYPERPARAMETERS",
    "MULTI_OBJECTIVE_TABLES",
    "MULTI_OBJECTIVE_FACTS",
    "MULTI_OBJECTIVE_HYPERPARAMETERS",
    "TABLES",
    "PRINTED",
    "reported",
    "all_reported_numbers",
]

# --- registries -----------------------------------------------------------------------------------

#: Every dict of facts / hyper-parameters as the papers print it, keyed "<paper>/<name>".
PRINTED: dict[str, dict[str, str]] = {
    "unifar/facts": UNIFAR_FACTS_PRINTED,
    "unifar/hyperparameters": UNIFAR_HYPERPARAMETERS_PRINTED,
    "scitoricsbert/facts": SCITORICSBERT_FACTS_PRINTED,
    "scitoricsbert/hyperparameters": SCITORICSBERT_HYPERPARAMETERS_PRINTED,
    "flew/facts": FLEW_FACTS_PRINTED,
    "flew/hyperparameters": FLEW_HYPERPARAMETERS_PRINTED,
    "multiobjective/facts": MULTI_OBJECTIVE_FACTS_PRINTED,
    "multiobjective/hyperparameters": MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED,
}


UNIFAR_FACTS: dict[str, float] = values_of(UNIFAR_FACTS_PRINTED)
UNIFAR_HYPERPARAMETERS: dict[str, float | int] = values_of(UNIFAR_HYPERPARAMETERS_PRINTED)
SCITORICSBERT_FACTS: dict[str, float] = values_of(SCITORICSBERT_FACTS_PRINTED)
SCITORICSBERT_HYPERPARAMETERS: dict[str, float | int] = values_of(SCITORICSBERT_HYPERPARAMETERS_PRINTED)
SCITORICSBERT_SEARCH_GRID: dict[str, tuple[float, ...]] = {
    k: tuple(parse_number(v) for v in vs) for k, vs in SCITORICSBERT_SEARCH_GRID_PRINTED.items()
}
FLEW_FACTS: dict[str, float] = values_of(FLEW_FACTS_PRINTED)
FLEW_HYPERPARAMETERS: dict[str, float | int] = values_of(FLEW_HYPERPARAMETERS_PRINTED)
MULTI_OBJECTIVE_FACTS: dict[str, float] = values_of(MULTI_OBJECTIVE_FACTS_PRINTED)
MULTI_OBJECTIVE_HYPERPARAMETERS: dict[str, float | int] = values_of(MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED)

#: Every table above, keyed "<paper>/<table>".
TABLES: dict[str, Table] = {
    "unifar/table1": UNIFAR_TABLE1,
    "unifar/table2": UNIFAR_TABLE2,
    "unifar/table3": UNIFAR_TABLE3,
    "unifar/table4": UNIFAR_APPENDIX_B,
    "unifar/table7": UNIFAR_TABLE7,
    "unifar/table8": UNIFAR_TABLE8,
    "scitoricsbert/table2": SCITORICSBERT_TABLE2,
    "scitoricsbert/table3": SCITORICSBERT_TABLE3,
    "scitoricsbert/table4": SCITORICSBERT_TABLE4,
    "flew/table1": FLEW_TABLE1,
    "flew/table2": FLEW_TABLE2,
    "flew/table3": FLEW_TABLE3,
    "multiobjective/table1": MO_TABLE1,
    "multiobjective/table1-deltas": MO_TABLE1_DELTAS,
    "multiobjective/table2": MO_TABLE2,
    "multiobjective/table3": MO_TABLE3,
    "multiobjective/table4": MO_TABLE4,
}


def reported(key: str, row: str, column: str) -> float:
    """``TABLES[key].value(row, column)``; a KeyError names the known tables, rows or columns.

    >>> reported("unifar/table1", "UniFAR-MPNet", "Query MAP")
    41.47
    >>> reported("scitoricsbert/table4", "SciBERT avg.", "CS MAP@R")
    0.169
    """
    if key not in TABLES:
        raise KeyError(f"no table {key!r}; known tables: {list(TABLES)}")
    return TABLES[key].value(row, column)


def all_reported_numbers() -> set[str]:
    """Every number of every table, fact and hyper-parameter dict, in the forms it may be typed.

    Each printed string is kept as printed ("41.90", ".616", "2e-5", "217,806", "+5.6%", "2.16M")
    together with its plain variants: integers with and without thousands separators ("217806"),
    leading-dot values with a leading zero ("0.616"), signed or percent values without the sign
    or the percent sign ("5.6"), k / M counts written out ("216,000"), exponents as Python prints
    them ("2e-05"). Small integers (2, 4, 5 ...) are included, because hyper-parameters are.

    >>> numbers = all_reported_numbers()
    >>> {"41.90", "34.23", "217,806", "217806", ".616", "0.616", "2e-5", "0.08"} <= numbers
    True
    """
    printed: list[str] = []
    for table in TABLES.values():
        for cells in table.printed.values():
            printed.extend(cells.values())
    for values in PRINTED.values():
        printed.extend(values.values())
    for grid in SCITORICSBERT_SEARCH_GRID_PRINTED.values():
        printed.extend(grid)
    out: set[str] = set()
    for s in printed:
        out |= typed_forms(s)
    return out
