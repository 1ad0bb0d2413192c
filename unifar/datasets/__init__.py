"""Dataset loaders and record formats: CSFCube, the labelled sentence corpora (CSAbstruct,
PubMed-RCT, NICTA-PIBOSO), PubMedQA, citation-intent sets and the external benchmarks, returning
plain dataclasses and dicts; the FTU record and folder that chapter 3 writes and training reads
(:mod:`unifar.datasets.ftu`, :mod:`unifar.datasets.ftu_files`); and the guard that keeps every
evaluation paper and question out of training data (:mod:`unifar.datasets.leakage`).

Loaders import no model code: reading a benchmark or an FTU folder never loads torch or an encoder.
"""
