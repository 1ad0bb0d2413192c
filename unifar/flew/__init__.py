"""FLeW (Dou et al., 2025), UniFAR's predecessor, as a baseline: facet triplets from a citation
graph with intents, facet text by an LLM splitter, three facet encoders trained with the triplet
margin loss, and their weighted sum.

The method in the paper's order, one module each:

* :mod:`unifar.flew.graph` -- section 3.1, the citation file with intents and the weighted
  facet subgraphs (eqs. 2-3);
* :mod:`unifar.flew.embedding` -- section 3.1, node embeddings per facet subgraph (a spectral
  embedding, the documented stand-in for PyTorch-BigGraph);
* :mod:`unifar.flew.sampling` -- section 3.1, neighbourhood sampling of ``(query, positive,
  negative)`` per facet, and the offline substitute: triplets from chapter 3's FTUs;
* :mod:`unifar.flew.splitting` -- section 3.2, FLeW's splitter prompt through an
  :class:`~unifar.construction.llm.LLMClient` (offline: the sentence labeller), eq. 4;
* :mod:`unifar.flew.training` -- section 3.3, three facet encoders
  (:class:`unifar.bi_encoder.BiEncoder`, [CLS] pooling) from one base trained with the triplet
  margin loss (eqs. 5-6);
* :mod:`unifar.flew.inference` -- section 3.4, facet embeddings, their weighted sum (eq. 8) and
  the grid search of its weights.

The paper's reported numbers are in :mod:`unifar.paper.flew`.
"""
