"""Training-data construction (paper section 4.1): facet labels for sentences by an LLM
(:mod:`unifar.construction.labelling`; the offline labellers are :mod:`unifar.rhetoric.labeller`
and :mod:`unifar.rhetoric.context_labeller`), facet questions, prompts and LLM clients, mining of
facet triplets and their merging into FTUs. The FTU record and folder
(:mod:`unifar.datasets.ftu`, :mod:`unifar.datasets.ftu_files`) and the guard against leaking
evaluation papers into training data (:mod:`unifar.datasets.leakage`) live with the data.
"""
