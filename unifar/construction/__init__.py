"""Training-data construction (paper section 4.1): facet labels for sentences (by an LLM or by the
offline labeller), facet questions, prompts and LLM clients, mining of facet triplets and their
merging into FTUs (the record and its folder are :mod:`unifar.datasets.ftu` and
:mod:`unifar.datasets.ftu_files`), and the guard against leaking evaluation papers into training
data.
"""
