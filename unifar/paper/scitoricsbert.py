"""Numbers reported in the SciToricsBERT paper (Sugimoto and Aizawa, 2022): tables 2-4, facts,
hyper-parameters and the search grid.
"""

from __future__ import annotations

from .table import SCITORICSBERT, build_table

# --- SciToricsBERT --------------------------------------------------------------------------------

#: SciToricsBERT table 2 (section 4.1): evaluation data sets (counts).
SCITORICSBERT_TABLE2 = build_table(
    SCITORICSBERT, "table 2",
    "Evaluation data sets: number of sentences and of labels; counts",
    ("#sentences", "#labels"),
    """
    CF-labeled Introduction | 773 11
    CF-labeled Methods      | 468 6
    CF-labeled Results      | 521 6
    CF-labeled Discussion   | 781 9
    CSAbstruct              | 1,349 5
    PubMed-RCT              | 30,135 5
    """,
    notes="The paper does not say that CSAbstruct's 1,349 sentences are its test split.",
)

_SECTIONS = ("Introduction", "Methods", "Results", "Discussion", "Avg.")

#: SciToricsBERT table 3 (section 4.2): CF-labeled sentence retrieval, fractions.
SCITORICSBERT_TABLE3 = build_table(
    SCITORICSBERT, "table 3",
    "Sentence retrieval on the CF-labeled sentence data set per section: P@1 and MAP@R (fractions, printed .xxx)",
    tuple(f"{s} {m}" for s in _SECTIONS for m in ("P@1", "MAP@R")),
    """
    GloVe avg.                   | .391 .073 .462 .089 .484 .125 .325 .058 .415 .086
    BERT-base avg.               | .523 .099 .434 .099 .511 .140 .361 .063 .457 .100
    RoBERTa-base avg.            | .507 .106 .451 .102 .557 .152 .392 .068 .477 .107
    SciBERT avg.                 | .604 .151 .526 .117 .612 .156 .483 .093 .556 .129
    PubMedBERT avg.              | .547 .134 .521 .108 .570 .140 .435 .078 .518 .115
    SRoBERTa-base                | .422 .099 .325 .075 .501 .148 .335 .072 .396 .099
    SimCSE-RoBERTa-base          | .551 .165 .429 .095 .511 .162 .403 .088 .474 .128
    SciToricsBERT (Softmax loss) | .857 .537 .765 .375 .866 .501 .741 .334 .807 .437
    SciToricsBERT (Triplet loss) | .858 .514 .776 .368 .855 .494 .734 .329 .806 .426
    SciToricsBERT (ArcFace loss) | .840 .513 .741 .378 .845 .462 .708 .301 .783 .414
    SciToricsBERT (MS loss)      | .829 .485 .721 .354 .832 .475 .684 .314 .767 .407
    SciToricsBERT (NT-Xent loss) | .839 .511 .741 .385 .838 .494 .708 .312 .781 .425
    """,
    notes="The header prints 'MAP' (MAP@R per the caption) and 'base' as a subscript (BERT_base).",
)

#: SciToricsBERT table 4 (section 4.2): CSAbstruct ("CS") and PubMed-RCT ("PubMed"), fractions.
SCITORICSBERT_TABLE4 = build_table(
    SCITORICSBERT, "table 4",
    "Sentence retrieval on CSAbstruct (CS) and PubMed-RCT (PubMed): P@1 and MAP@R (fractions, printed .xxx)",
    ("CS P@1", "CS MAP@R", "PubMed P@1", "PubMed MAP@R"),
    """
    GloVe avg.                   | .445 .124 .627 .167
    BERT avg.                    | .553 .166 .681 .196
    RoBERTa avg.                 | .523 .159 .681 .185
    SciBERT avg.                 | .563 .169 .700 .204
    PubMedBERT avg.              | .553 .169 .694 .213
    SRoBERTa                     | .480 .136 .566 .143
    SimCSE-RoBERTa               | .529 .164 .646 .187
    SciToricsBERT (Softmax loss) | .616 .226 .761 .325
    SciToricsBERT (Triplet loss) | .599 .214 .760 .324
    SciToricsBERT (ArcFace loss) | .576 .205 .748 .307
    SciToricsBERT (MS loss)      | .583 .191 .739 .300
    SciToricsBERT (NT-Xent loss) | .591 .216 .752 .324
    """,
    notes="The header prints 'MAP' (MAP@R per the caption); SciToricsBERT rows are SciBERT fine-tuned on CFS3, "
          "mean of five seeds.",
)

#: SciToricsBERT table 6 (bulleted values), appendix B and section 4.1.
SCITORICSBERT_HYPERPARAMETERS_PRINTED = {
    "triplet_margin": "0.05",
    "arcface_margin": "0.5",
    "arcface_scale": "16",
    "ms_alpha": "2",
    "ms_beta": "40",
    "ms_lambda": "0.75",
    "ntxent_temperature": "0.1",
    "learning_rate": "2e-5",      # Adam, appendix B
    "batch_size": "64",
    "pk_p_softmax_arcface": "64",  # P = 64, K = 1 for Softmax and ArcFace losses
    "pk_k_softmax_arcface": "1",
    "pk_p_others": "8",            # P = 8, K = 8 for the others
    "pk_k_others": "8",
    "max_epochs": "five",          # section 4.1: "The maximum number of epochs is set to five."
}

#: SciToricsBERT table 6: every value tried by the hyper-parameter search (bulleted ones above).
SCITORICSBERT_SEARCH_GRID_PRINTED = {
    "triplet_margin": ("0.025", "0.05", "0.1", "0.2", "0.4"),
    "arcface_margin": ("0.1", "0.3", "0.5"),
    "arcface_scale": ("16", "32", "64"),
    "ms_alpha": ("1", "2"),
    "ms_beta": ("30", "40", "50"),
    "ms_lambda": ("0.5", "0.75", "1.0"),
    "ntxent_temperature": ("0.0125", "0.025", "0.05", "0.1", "0.2"),
}

#: SciToricsBERT facts (sections 1, 3.2, 3.3, 4.1, table 2).
SCITORICSBERT_FACTS_PRINTED = {
    "cfs3_sentences": "100,016",
    "cfs3_labels": "77",
    "academic_phrasebank_classes": "80",    # "three classes are assigned to no sentence"
    "ngram_n": "5",                          # footnote 4
    "cf_labeled_labels": "32",               # section 4.1: "(32 labels total)"
    "csabstruct_sentences": "1,349",         # table 2
    "csabstruct_labels": "5",
    "pubmed_rct_sentences": "30,135",
    "pubmed_rct_labels": "5",
    "embedding_dim": "768",                  # [CLS] of the last layer, section 3.3
    "seeds": "five",                         # "average results from five trained models"
    "train_validation_ratio": "4:1",
}
