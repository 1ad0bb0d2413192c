"""Training-data construction (paper section 4.1): facet labels for sentences (by an LLM or by the
offline labeller), facet questions, prompts and LLM clients, mining of facet triplets, the FTU
format on disk, and the guard against leaking evaluation papers into training data.
"""
