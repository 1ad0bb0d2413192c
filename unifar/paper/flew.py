"""Numbers reported in the FLeW paper (Dou et al., 2025): tables 1-3, facts and hyper-parameters.
"""

from __future__ import annotations

from .table import FLEW, Table, build_table

# --- FLeW -----------------------------------------------------------------------------------------

_SCIREPEVAL_COLUMNS = (
    "Relish", "Reviewer", "Same Author", "HighInf Citation", "SciDocs PRX", "[PRX] Avg",
    "Review Score", "Max H-index", "Tweet Mentions", "Citation Count", "Pub Year", "[RGN] Avg",
    "NFCorpus", "TREC Covid", "Search", "[QRY] Avg",
    "Biomimicry", "DRSM", "MeSH", "FoS", "SciDocs MAG", "SciDocs MeSH", "[CLF] Avg",
    "Total AVG",
)
_SCIREPEVAL_METRICS = ("metrics: Relish nDCG, Reviewer Avg. P, Same Author MAP, HighInf Citation MAP, SciDocs PRX "
                       "nDCG; regression Kendall's tau; query tasks nDCG; Biomimicry and DRSM weighted F1, other "
                       "classification F1 (all x100)")

FLEW_TABLE1 = build_table(
    FLEW, "table 1",
    "SciRepEval, 19 tasks in four formats, format averages and total average; " + _SCIREPEVAL_METRICS,
    _SCIREPEVAL_COLUMNS,
    """
    SciBERT   | 82.81 41.68 79.48 33.72 76.15 62.77 20.26 12.38 22.18 39.16 27.71 24.34 53.34 79.73 71.49 68.19 50.00 64.01 76.71 42.67 79.50 79.97 65.48 —
    SPECTER   | 90.07 45.16 86.53 42.89 93.98 71.73 17.35 12.52 24.19 33.21 25.96 22.65 64.90 86.53 73.25 74.89 51.22 66.16 85.46 43.00 79.75 87.80 68.90 —
    SciNCL    | 90.67 45.40 87.47 43.39 95.01 72.39 18.87 13.45 25.79 34.61 28.99 24.34 70.85 87.67 73.46 77.33 50.22 65.10 86.17 43.53 81.11 89.13 69.21 —
    SPECTER-2 | 91.63 45.42 87.00 44.96 94.87 72.78 20.63 12.76 27.11 38.33 33.65 26.50 72.03 89.46 73.76 78.42 50.53 62.96 86.76 42.16 81.03 89.00 68.74 —
    SFR-2_R   | 88.36 45.56 82.09 39.52 87.10 68.53 11.18 8.31 14.09 36.24 31.23 20.21 67.76 86.97 70.89 75.21 47.33 63.40 81.96 38.52 78.63 86.68 66.09 —
    FLeW      | 92.15 45.70 87.03 45.50 94.46 72.97 20.93 15.09 27.01 39.21 33.90 27.23 72.64 89.14 74.13 78.64 50.25 65.41 87.17 44.61 81.71 89.39 69.76 60.81
    """,
    notes="'Total AVG' is legible only for FLeW (60.81); SPECTER-2's (60.21) is in table 3. Table 1 prints the "
          "headers 'Author', 'Citation', 'PRX', 'Biomics' (table 3: Same Author, HighInf Citation, SciDocs PRX, "
          "Biomimicry). Row 'FLeW(ours)' is stored as 'FLeW'.",
)

FLEW_TABLE2 = build_table(
    FLEW, "table 2",
    "MDCR citation recommendation across 19 fields: MAP and Recall@5 per system (percent)",
    tuple(f"{system} {metric}" for metric in ("MAP", "Recall@5")
          for system in ("BM25", "SciBERT", "SPECTER", "SciNCL", "SPECTER-2", "FLeW")),
    """
    Art                   | 38.2 22.4 34.1 34.7 43.4 43.7 32.3 16.6 28.8 29.2 37.8 37.5
    Biology               | 38.3 20.4 34.6 36.8 39.9 43.5 33.6 14.0 30.0 32.3 33.3 37.8
    Business              | 28.1 19.1 27.5 28.5 35.0 35.1 22.5 13.1 21.8 24.6 30.5 30.0
    Chemistry             | 38.0 20.0 33.7 36.5 39.7 43.0 32.6 13.7 29.3 31.5 33.5 38.2
    Computer Science      | 34.8 19.5 35.6 37.2 38.5 39.9 30.5 12.8 30.4 32.2 33.4 36.2
    Economics             | 30.5 21.5 27.3 28.3 33.7 34.7 26.0 15.4 21.9 23.2 28.5 29.7
    Engineering           | 34.6 20.5 31.3 34.2 35.4 39.2 29.3 13.9 27.3 28.0 30.3 33.2
    Environmental Science | 31.6 21.3 30.1 31.5 35.0 37.2 26.2 15.1 24.2 25.5 27.9 32.0
    Geography             | 31.8 21.9 26.4 29.5 37.1 40.1 27.8 16.7 22.2 23.8 31.8 35.0
    Geology               | 33.1 19.5 24.8 25.7 33.4 35.2 28.0 13.9 20.0 19.9 27.7 29.1
    History               | 38.1 20.9 27.1 30.9 41.9 43.2 32.9 15.3 20.6 23.9 34.7 37.6
    Materials Science     | 36.1 22.2 34.1 35.8 39.7 40.6 30.7 15.5 28.2 29.6 34.0 35.4
    Mathematics           | 35.3 22.8 34.2 34.9 40.8 41.2 28.3 18.3 28.9 30.1 34.2 35.0
    Medicine              | 38.6 22.0 41.4 42.7 43.8 46.3 32.5 16.4 36.3 36.5 39.0 41.6
    Philosophy            | 30.2 19.2 27.1 29.9 37.2 36.6 25.7 13.3 21.1 23.5 32.0 31.5
    Physics               | 35.1 23.9 30.8 34.5 37.6 38.4 30.2 18.2 26.3 30.3 32.5 34.5
    Political Science     | 28.6 19.4 24.2 26.4 35.7 35.3 23.1 14.0 18.0 21.7 31.6 30.1
    Psychology            | 32.5 20.3 32.3 34.2 38.8 40.5 28.9 16.2 28.1 30.5 33.2 36.1
    Sociology             | 26.8 20.2 25.2 26.7 34.6 34.8 20.5 15.8 20.5 21.9 29.8 30.2
    Avg                   | 33.7 20.9 30.6 32.6 38.0 39.4 28.5 15.2 25.5 27.3 32.4 34.2
    """,
    notes="Rows are fields, columns '<system> <metric>'; the paper prints system names split over lines "
          "('Sci BERT', 'SPEC TER-2', 'FLeW (ours)').",
)

FLEW_TABLE3 = build_table(
    FLEW, "table 3",
    "Ablation on SciRepEval: facet encoders with / without textual splitting, FLeW without textual splitting "
    "or structural sampling (= SPECTER-2); " + _SCIREPEVAL_METRICS,
    _SCIREPEVAL_COLUMNS,
    """
    FLeW-bg (+ w/ Textual)  | 92.10 45.02 86.54 45.45 93.64 72.55 19.05 12.26 26.20 36.98 31.36 25.17 71.63 88.99 73.69 78.10 48.02 64.14 86.71 41.31 81.04 87.70 68.15 59.57
    FLeW-mt (+ w/ Textual)  | 90.68 44.96 86.38 43.96 93.41 71.88 19.19 12.95 26.70 38.46 32.13 25.89 68.06 87.51 73.34 76.30 48.92 64.28 85.68 43.35 80.95 88.43 68.60 59.44
    FLeW-rs (+ w/ Textual)  | 89.82 45.14 85.53 42.17 93.30 71.19 20.79 14.83 26.13 36.70 32.76 26.24 67.31 85.23 73.02 75.19 49.53 62.06 85.39 42.39 80.90 88.32 68.10 59.02
    FLeW-bg (- w/o Textual) | 91.99 44.79 85.99 45.41 93.21 72.28 18.91 13.24 25.34 37.16 30.58 25.05 71.65 88.64 73.68 77.99 47.82 62.44 86.19 42.01 80.35 88.72 67.92 59.37
    FLeW-mt (- w/o Textual) | 90.50 45.49 86.00 43.95 93.14 71.82 18.80 13.82 26.17 35.11 33.62 25.50 68.87 86.59 73.12 76.19 48.74 64.26 86.37 41.14 80.80 89.01 68.39 59.24
    FLeW-rs (- w/o Textual) | 89.47 44.86 84.66 41.57 92.71 70.65 17.27 13.82 27.42 35.42 31.71 25.13 68.82 85.25 72.65 75.57 46.59 59.96 84.52 43.62 79.83 87.48 67.00 58.30
    FLeW                    | 92.15 45.70 87.03 45.50 94.46 72.97 20.93 15.09 27.01 39.21 33.90 27.23 72.64 89.14 74.13 78.64 50.25 65.41 87.17 44.61 81.71 89.39 69.76 60.81
    FLeW - w/o Textual      | 92.09 45.82 86.65 45.60 94.22 72.88 20.23 14.78 27.57 38.60 34.16 27.07 72.89 88.79 74.00 78.56 49.81 64.47 86.83 44.55 81.57 89.83 69.51 60.66
    FLeW - w/o Structural   | 91.63 45.42 87.00 44.96 94.87 72.78 20.63 12.76 27.11 38.33 33.65 26.50 72.03 89.46 73.76 78.42 50.53 62.96 86.76 42.16 81.03 89.00 68.74 60.21
    """,
    notes="'- w/o Structural' is SPECTER-2 (the paper says so), equal to its table-1 row.",
)

#: FLeW's tables, keyed by label. FLeW reports no CSFCube numbers.
FLEW_TABLES: dict[str, Table] = {t.label: t for t in (FLEW_TABLE1, FLEW_TABLE2, FLEW_TABLE3)}

#: FLeW training data and evaluation scope (sections 3.2, 4.1, 4.3).
FLEW_FACTS_PRINTED = {
    "query_papers": "216k",
    "triplets": "2.16M",                    # not stated whether per facet or in all
    "metadata_background": "2.95M",         # "2.95M, 2.81M and 2.94M metadata ... respectively"
    "metadata_method": "2.81M",
    "metadata_result": "2.94M",
    "splitter_training_papers": "12k",      # GPT-4o outputs used to instruction-tune the splitter
    "scirepeval_tasks": "19",
    "mdcr_fields": "19",
    "tasks_best": "13",                     # best in 13 of 19 tasks (section 4.3)
    "tasks_second_best": "4",               # second best in 4 of the remaining 6
}

#: FLeW pre-training (sections 3.3, 4.1). The learning rate is printed "2^-5" and left out.
FLEW_HYPERPARAMETERS_PRINTED = {
    "triplet_margin": "1",
    "batch_size": "10",
    "epochs": "2",
    "gpus": "2",
    "gpu_memory_gb": "24",
}
