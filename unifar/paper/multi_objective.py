"""Numbers reported in the multi-objective dense retrieval paper (Parisot and Zavrel, 2022): tables
1-4, facts and hyper-parameters.
"""

from __future__ import annotations

from .table import MULTI_OBJECTIVE, Table, build_table

# --- Multi-objective dense retrieval --------------------------------------------------------------

_MO_COLUMNS = ("BEIR subset", "SciDocs", "ICLR2022")
_MO_METRICS = ("BEIR subset: mean ndcg@10 of 5 tasks; SciDocs: mean over its tasks (x100); ICLR2022: "
               "ndcg@10 (doc2doc)")

MO_TABLE1 = build_table(
    MULTI_OBJECTIVE, "table 1",
    "Single objective vs multi-objective training; " + _MO_METRICS,
    _MO_COLUMNS,
    """
    MS MARCO          | 0.270 68.72 0.260
    SPECTER           | 0.207 79.75 0.407
    ICrop+context2doc | 0.285 78.29 0.450
    AllObj-Alt        | 0.278 79.44 0.424
    """,
    groups={"Single objective": ("MS MARCO", "SPECTER"), "Multi-objective": ("ICrop+context2doc", "AllObj-Alt")},
)

MO_TABLE1_DELTAS = build_table(
    MULTI_OBJECTIVE, "table 1 (relative improvements)",
    "Table 1's ∆ rows: relative improvement (percent) of a multi-objective model over a single-objective one",
    _MO_COLUMNS,
    """
    ICrop+context2doc ∆MS MARCO | +5.6% +13.9% +73.1%
    ICrop+context2doc ∆SPECTER  | +37.7% -1.8% +10.6%
    AllObj-Alt ∆MS MARCO        | +3.0% +15.6% +63.1%
    AllObj-Alt ∆SPECTER         | +34.3% -0.4% +4.2%
    """,
)

MO_TABLE2 = build_table(
    MULTI_OBJECTIVE, "table 2",
    "Combination strategies (in-batch mixing, alternating batches, fine-tuning in each direction); " + _MO_METRICS,
    _MO_COLUMNS,
    """
    (1) MS MARCO, (2) ICrop.: in batch mix   | 0.269 74.93 0.342
    (1) MS MARCO, (2) ICrop.: alternate      | 0.282 74.51 0.341
    (1) MS MARCO, (2) ICrop.: finetune 1 → 2 | 0.262 74.27 0.343
    (1) MS MARCO, (2) ICrop.: finetune 2 → 1 | 0.324 75.09 0.396
    (1) SPECTER, (2) MS MARCO: in batch mix   | 0.230 78.90 0.396
    (1) SPECTER, (2) MS MARCO: alternate      | 0.258 79.25 0.381
    (1) SPECTER, (2) MS MARCO: finetune 1 → 2 | 0.307 75.08 0.330
    (1) SPECTER, (2) MS MARCO: finetune 2 → 1 | 0.265 78.91 0.419
    (1) SPECTER, (2) ICrop.: in batch mix   | 0.127 78.85 0.413
    (1) SPECTER, (2) ICrop.: alternate      | 0.239 78.57 0.384
    (1) SPECTER, (2) ICrop.: finetune 1 → 2 | 0.242 75.78 0.375
    (1) SPECTER, (2) ICrop.: finetune 2 → 1 | 0.248 79.40 0.471
    MS MARCO, SPECTER, ICrop.: in batch mix | 0.244 77.78 0.389
    MS MARCO, SPECTER, ICrop.: alternate    | 0.278 79.44 0.424
    """,
    groups={"2 objectives": tuple(f"{pair}: {how}" for pair in ("(1) MS MARCO, (2) ICrop.", "(1) SPECTER, (2) MS MARCO",
                                                                    "(1) SPECTER, (2) ICrop.")
                                  for how in ("in batch mix", "alternate", "finetune 1 → 2", "finetune 2 → 1")),
            "3 objectives": ("MS MARCO, SPECTER, ICrop.: in batch mix", "MS MARCO, SPECTER, ICrop.: alternate")},
)

MO_TABLE3 = build_table(
    MULTI_OBJECTIVE, "table 3",
    "Single objective vs independent cropping (ICrop) pre-training + fine-tuning on the target objective; "
    + _MO_METRICS,
    _MO_COLUMNS,
    """
    ICrop.                       | 0.244 74.93 0.370
    MS MARCO                     | 0.270 68.72 0.260
    ICrop. + MS MARCO            | 0.324 75.09 0.396
    SPECTER                      | 0.207 79.75 0.407
    ICrop. + SPECTER             | 0.248 79.40 0.471
    unarXiv doc2doc              | 0.170 75.42 0.378
    ICrop. + unarXiv doc2doc     | 0.251 78.19 0.467
    unarXiv context2doc          | 0.252 75.08 0.379
    ICrop. + unarXiv context2doc | 0.285 78.29 0.450
    """,
)

MO_TABLE4 = build_table(
    MULTI_OBJECTIVE, "table 4",
    "Fine-tuning on InPars synthetic data (the first three rows: single objective); " + _MO_METRICS,
    _MO_COLUMNS,
    """
    Baselines: MSMARCO            | 0.270 68.72 0.260
    Baselines: SPECTER            | 0.207 79.75 0.407
    Baselines: ICrop.             | 0.244 74.93 0.370
    Finetuning on InPars: MSMARCO | 0.300 69.70 0.248
    Finetuning on InPars: SPECTER | 0.304 74.88 0.300
    Finetuning on InPars: ICrop   | 0.313 75.12 0.341
    """,
    notes="Row names keep the paper's spellings 'MSMARCO' and 'ICrop' (no dot) in this table.",
)

#: The multi-objective paper's tables, keyed by label.
MULTI_OBJECTIVE_TABLES: dict[str, Table] = {
    t.label: t for t in (MO_TABLE1, MO_TABLE1_DELTAS, MO_TABLE2, MO_TABLE3, MO_TABLE4)
}

#: Multi-objective paper: data and benchmark sizes (sections 4.1, 4.2, 5, 6).
MULTI_OBJECTIVE_FACTS_PRINTED = {
    "specter_training_triplets": "684,100",
    "specter_validation_triplets": "145,375",
    "unarxiv_contexts": "343,578",
    "unarxiv_papers": "300,736",
    "unarxiv_context_words": "29.8",
    "unarxiv_document_words": "152.5",
    "unarxiv_doc2doc_triplets": "456,766",
    "beir_tasks": "15",
    "beir_selected_tasks": "5",
    "iclr2022_papers": "1094",
    "iclr2022_queries": "40",
    "iclr2022_retrieved_per_model": "10",
    "iclr2022_annotators": "4",
    "iclr2022_judgements": "1,844",
    "iclr2022_relevant": "358",
    "iclr2022_very_relevant": "83",
    "max_relative_improvement_percent": "73%",
    "minilm_parameters_millions": "22.7",
    "bert_parameters_millions": "345",
}

#: Multi-objective paper: training details (section 4.3).
MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED = {
    "max_steps": "200,000",
    "patience": "2",
    "batch_triplets": "16",
    "grad_accumulation": "2",
    "learning_rate": "2 × 10^-5",
    "adam_epsilon": "10^-8",
    "finetune_learning_rate": "10^-5",
    "finetune_epochs": "1",
}
