"""Dataset loaders: CSFCube, the labelled sentence corpora (CSAbstruct, PubMed-RCT, NICTA-PIBOSO),
PubMedQA, citation-intent sets and the external benchmarks, returning plain dataclasses and dicts.

Loaders import no model code: reading a benchmark never loads torch or an encoder.
"""
