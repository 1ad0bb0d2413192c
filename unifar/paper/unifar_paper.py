"""Numbers reported in the UniFAR paper (Dou et al., 2026): tables 1, 2, 3, 7, 8, appendix B, facts and
hyper-parameters. See :mod:`unifar.paper` for where each is in the paper.
"""

from __future__ import annotations

from .table import UNIFAR, build_table

# --- UniFAR ---------------------------------------------------------------------------------------

_DORIS_COLUMNS = tuple(f"{level} {metric}" for level in ("Query", "Aspect", "Subquery_2")
                       for metric in ("Recall@5", "MAP", "R-Precision"))

#: UniFAR table 1 (section 5.2): DORIS-MAE q-doc results, percent.
UNIFAR_TABLE1 = build_table(
    UNIFAR, "table 1",
    "DORIS-MAE (q-doc) at the Query, Aspect and Subquery_2 levels: Recall@5, MAP, R-Precision (percent)",
    _DORIS_COLUMNS,
    """
    SciBERT           | 5.13 20.34 17.13 5.41 21.66 18.50 2.43 21.23 17.56
    SciBERT-ID        | 12.86 31.50 27.54 8.88 26.53 22.56 9.41 42.19 39.28
    SPECTER           | 13.34 35.75 32.66 11.56 31.39 28.43 10.51 38.27 35.40
    SciNCL            | 13.21 36.10 31.38 12.69 35.43 30.75 10.75 47.48 43.71
    SPECTER-2         | 14.50 37.12 33.41 12.97 35.77 31.30 11.14 47.26 43.73
    TSAspire          | 14.26 37.00 33.81 14.30 37.31 33.63 13.15 45.85 41.46
    OTAspire          | 13.34 36.70 33.63 14.45 36.09 32.53 12.56 45.53 40.60
    FLeW              | 14.42 38.72 32.71 14.24 37.56 33.28 11.43 47.66 44.01
    UniFAR-SciBERT    | 15.04 39.03 34.01 14.58 37.82 33.86 11.25 48.01 44.25
    Contriever        | 11.90 33.44 28.70 11.15 29.91 26.57 9.49 43.07 40.15
    OSRetriever       | 13.02 36.96 30.88 12.29 32.54 29.09 11.22 47.13 43.37
    UniFAR-Contriever | 16.06 37.52 33.98 13.75 35.41 31.39 11.35 47.38 44.10
    MPNet             | 14.95 40.94 35.06 13.87 37.13 33.77 12.19 48.35 44.31
    UniFAR-MPNet      | 16.08 41.47 37.13 15.68 37.77 34.05 12.42 49.55 45.85
    """,
    groups={
        "SciBERT": ("SciBERT", "SciBERT-ID", "SPECTER", "SciNCL", "SPECTER-2", "TSAspire", "OTAspire", "FLeW",
                    "UniFAR-SciBERT"),
        "Contriever": ("Contriever", "OSRetriever", "UniFAR-Contriever"),
        "MPNet": ("MPNet", "UniFAR-MPNet"),
    },
    notes="-ID: further trained in the benchmark domain. Prose: UniFAR-MPNet '+1.13 MAP on the Query level' "
          "matches the Recall@5 gain (16.08 - 14.95), not MAP (0.53).",
)

_CSFCUBE_COLUMNS = tuple(f"{facet} {metric}" for facet in ("background", "method", "result", "aggregated")
                         for metric in ("MAP", "NDCG%20"))

#: UniFAR table 2 (section 5.2): CSFCube doc-doc results, percent.
UNIFAR_TABLE2 = build_table(
    UNIFAR, "table 2",
    "CSFCube (doc-doc) per facet and aggregated: MAP and NDCG%20 (percent)",
    _CSFCUBE_COLUMNS,
    """
    SciBERT             | 25.89 44.99 19.23 34.41 23.06 42.06 22.63 40.33
    CoSentBERT          | 35.78 61.27 19.27 38.77 32.15 50.68 28.95 50.68
    SPECTER             | 43.95 66.70 22.44 37.41 36.79 56.67 34.23 53.28
    SciNCL              | 49.64 70.02 27.14 46.61 41.83 61.70 39.37 59.24
    SPECTER-2           | 50.79 70.92 27.19 47.28 39.65 63.73 39.86 60.42
    TS+OTAspire-SPECTER | 51.79 70.99 26.68 47.60 43.06 64.82 40.26 60.86
    FaBle-SPECTER       | 42.66 67.38 25.98 44.97 38.60 58.10 35.60 56.60
    FLeW-bg/mt/rs       | 50.93 71.09 23.76 44.37 39.03 62.37 38.01 59.98
    UniFAR-SciBERT      | 51.91 72.55 25.76 47.72 43.19 64.88 39.97 61.27
    Contriever          | 43.17 65.64 23.11 41.35 38.45 62.41 34.74 56.25
    OSRetriever         | 47.18 69.64 23.86 44.35 35.77 61.55 36.08 58.39
    UniFAR-Contriever   | 47.29 69.90 24.71 45.06 38.96 63.44 36.83 58.81
    MPNet               | 50.68 72.30 27.58 47.32 42.81 65.42 40.03 61.46
    UniFAR-MPNet        | 50.88 72.36 27.65 47.42 47.48 66.97 41.90 62.08
    """,
    groups={
        "SciBERT": ("SciBERT", "CoSentBERT", "SPECTER", "SciNCL", "SPECTER-2", "TS+OTAspire-SPECTER",
                    "FaBle-SPECTER", "FLeW-bg/mt/rs", "UniFAR-SciBERT"),
        "Contriever": ("Contriever", "OSRetriever", "UniFAR-Contriever"),
        "MPNet": ("MPNet", "UniFAR-MPNet"),
    },
    notes="-SPECTER: trained from SPECTER's initialisation; FLeW-bg/mt/rs: three facet encoders of FLeW. "
          "CoSentBERT's aggregated NDCG%20 is printed equal to its result NDCG%20 (50.68).",
)

#: UniFAR table 3 (section 6): ablation of UniFAR-SciBERT, MAP (percent).
UNIFAR_TABLE3 = build_table(
    UNIFAR, "table 3",
    "Ablation of UniFAR-SciBERT: MAP (percent) on DORIS-MAE (q-doc) levels and CSFCube (doc-doc) facets",
    ("DORIS-MAE Query MAP", "DORIS-MAE Aspect MAP", "DORIS-MAE Subquery_2 MAP", "CSFCube background MAP",
     "CSFCube method MAP", "CSFCube result MAP", "CSFCube aggregated MAP"),
    """
    UniFAR (full)  | 39.03 37.82 48.01 51.91 25.76 43.19 39.97
    w/o MHA_sent   | 38.90 37.79 47.69 50.65 25.23 41.63 38.76
    w/o MHA_tok    | 37.96 37.11 46.95 51.11 24.76 42.59 38.94
    Freeze A_facet | 38.06 37.75 47.88 51.79 25.37 40.96 39.13
    w/o A_facet    | 36.93 34.66 47.13 51.42 24.85 41.66 38.78
    w/o E_input    | 37.74 37.37 47.78 50.83 25.59 41.12 38.81
    w/o L_KL       | 36.86 35.18 45.08 49.41 23.75 42.26 38.07
    w/o L_QD       | 38.57 37.66 47.01 51.59 25.27 43.08 39.62
    """,
    notes="The full row equals UniFAR-SciBERT's MAP cells of tables 1 and 2.",
)

#: UniFAR appendix B, table 4: training-corpus fields (counts).
UNIFAR_APPENDIX_B = build_table(
    UNIFAR, "appendix B, table 4",
    "Scientific fields of the training corpus (FTUs): number of documents and of questions (x3: three facets "
    "per query document); counts",
    ("# Documents", "# Questions (×3)"),
    """
    Medicine              | 3,002,908 101,065
    Computer Science      | 1,538,273 77,079
    Biology               | 1,158,449 38,820
    Psychology            | 494,617 14,017
    Chemistry             | 400,837 10,400
    Physics               | 384,276 9,904
    Mathematics           | 371,410 16,852
    Engineering           | 310,521 10,280
    Materials Science     | 251,316 7,624
    Economics             | 201,989 8,253
    Business              | 168,263 4,328
    Environmental Science | 107,915 2,570
    Geology               | 100,061 2,003
    Geography             | 93,067 1,514
    Sociology             | 91,846 1,604
    Political Science     | 74,960 2,470
    Art                   | 12,470 59
    Philosophy            | 11,572 24
    History               | 9,271 109
    """,
    notes="No totals row is printed. The columns sum to 8,784,021 and 308,975, not to the text's 7,428,874 "
          "documents and 217,806 FTUs (fields presumably overlap; not stated).",
)

#: UniFAR appendix D, table 7: benchmark statistics (counts).
UNIFAR_TABLE7 = build_table(
    UNIFAR, "appendix D, table 7",
    "Benchmark statistics per evaluated level: number of queries and of candidate documents; counts",
    ("# Queries", "# Candidates"),
    """
    DORIS-MAE Query      | 100 363,133
    DORIS-MAE Aspect     | 100 363,133
    DORIS-MAE Subquery_2 | 1,003 363,133
    CSFCube background   | 16 4,207
    CSFCube method       | 17 4,207
    CSFCube result       | 17 4,207
    LitSearch            | 597 64,183
    """,
    notes="The candidate count is printed once per benchmark (a merged cell) and repeated here on every level.",
)

#: UniFAR appendix E, table 8: LitSearch q-doc results, percent.
UNIFAR_TABLE8 = build_table(
    UNIFAR, "appendix E, table 8",
    "LitSearch (q-doc): Recall, MRR, MAP and nDCG at cutoffs 5, 10, 20 (percent)",
    tuple(f"{metric}@{k}" for metric in ("Recall", "MRR", "MAP", "nDCG") for k in (5, 10, 20)),
    """
    SPECTER        | 22.78 30.15 36.85 15.88 16.85 17.33 15.48 16.40 16.87 17.27 19.55 21.24
    SciNCL         | 28.81 37.02 44.05 20.56 21.69 22.20 19.78 20.86 21.36 21.99 24.59 26.36
    SPECTER-2      | 34.67 44.22 52.09 23.60 24.93 25.46 22.62 23.97 24.50 25.53 28.70 30.68
    FLeW           | 34.17 44.70 52.58 23.67 24.16 24.72 22.61 23.53 24.09 25.36 28.53 30.53
    UniFAR-SciBERT | 35.14 44.89 55.61 23.94 25.17 25.93 23.49 24.71 25.47 25.99 29.29 32.04
    """,
    notes="Prose 'nDCG@20 +1.51' is the margin over FLeW (30.53); over the best baseline (SPECTER-2, 30.68) "
          "it is 1.36.",
)

#: UniFAR facts quoted in prose (appendix B) and in the question prompt (appendix C, table 5).
UNIFAR_FACTS_PRINTED = {
    "ftus": "217,806",                       # appendix B
    "facet_labelled_documents": "7,428,874",  # appendix B ("facet-labeled documents")
    "questions_per_query_document": "3",     # appendix B: "3 facets for each query document"
    "question_words_min": "25",              # table 5 prompt: "between 25–50 words"
    "question_words_max": "50",
}

#: UniFAR appendix A (implementation details). ``lr_base`` / ``lr_anchors`` are for SciBERT and
#: Contriever; ``lr_mpnet`` is "a smaller learning rate" for MPNet (groups not stated).
UNIFAR_HYPERPARAMETERS_PRINTED = {
    "temperature": "0.08",
    "kl_lambda_start": "0.3",
    "kl_lambda_end": "0.5",
    "lr_base": "2e-5",
    "lr_anchors": "2e-5",
    "lr_aggregation": "5e-5",
    "lr_mpnet": "3e-6",
    "batch_size": "4",
    "grad_accumulation": "4",
    "epochs": "2",
    "warmup_percent": "5%",
    "gpus": "four",
    "gpu_memory_gb": "24",
}
