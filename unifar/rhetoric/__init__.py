r"""Sentence embeddings of rhetorical function, after SciToricsBERT (Sugimoto and Aizawa, 2022,
"Incorporating the Rhetoric of Scientific Language into Sentence Embeddings using
Phrase-guided Distant Supervision and Metric Learning", SDP 2022; paper 002 of this book's
reading list).

SciToricsBERT fine-tunes an encoder so that sentences with the same communicative function lie
close together. Its ingredients and its evaluation, one module each:

* :mod:`unifar.rhetoric.losses` -- the five objectives of section 3.3, one builder each
  (softmax cross-entropy with a linear classifier, triplet, ArcFace, multi-similarity,
  NT-Xent), :func:`~unifar.rhetoric.losses.make_loss` to build one by name, and the table-6
  hyper-parameters marked with a bullet as defaults
  (:data:`~unifar.rhetoric.losses.PAPER_HYPERPARAMETERS`);
* :mod:`unifar.rhetoric.sampling` -- PK batches (appendix B, after Hermans et al. 2017:
  sample ``P`` classes, then ``K`` sentences of each), :class:`~unifar.rhetoric.sampling.PKBatchSampler`,
  :func:`~unifar.rhetoric.sampling.pk_for`, and
  :func:`~unifar.rhetoric.sampling.stratified_sample`;
* :mod:`unifar.rhetoric.encoder` -- :class:`~unifar.rhetoric.encoder.SentenceEncoder`, a
  mean-pooled, L2-normalised sentence encoder on any base encoder;
* :mod:`unifar.rhetoric.finetune` -- :func:`~unifar.rhetoric.finetune.finetune`, its training
  loop (Adam, learning rate 2e-5, appendix B);
* :mod:`unifar.rhetoric.retrieval` -- :func:`~unifar.rhetoric.retrieval.retrieval_scores`, P@1
  and MAP@R of leave-one-out sentence retrieval (section 4.1, after Musgrave et al. 2020), and
  :func:`~unifar.rhetoric.retrieval.chance_retrieval_scores`, their expected values for a
  random ranking.

The facet labellers that chapter 2 builds on such sentence states, and that chapter 3 and the
search label sentences with (background, method or result), are here too:

* :mod:`unifar.rhetoric.labeller` -- :class:`~unifar.rhetoric.labeller.FacetLabeller`, a linear
  head over a (fine-tuned) sentence encoder, each sentence embedded alone;
* :mod:`unifar.rhetoric.context_labeller` --
  :class:`~unifar.rhetoric.context_labeller.InContextLabeller`, a linear head over UniFAR's
  in-context sentence states (``unifar encode``'s default: it rides on the encoding pass);
* :mod:`unifar.rhetoric.labeller_data` -- their training sentences (CSAbstruct, with the
  evaluation papers removed by :mod:`unifar.datasets.leakage`), and
  :mod:`unifar.rhetoric.labeller_scores` -- macro-F1 and the choice of the regularisation.

Where this reproduction departs from the paper, and why:

* **Pooling.** SciToricsBERT takes the [CLS] vector of SciBERT; here the base encoders are
  sentence-transformers models trained for mean pooling (``minilm``, ``mpnet``), so the sentence
  vector is the attention-masked mean of the last layer (what the paper itself does for its
  transformer baselines, footnote 8).
* **PK batches with few labels.** The paper trains on 77 classes with ``P = 64, K = 1``
  (softmax, ArcFace) or ``P = 8, K = 8`` (the others), batch 64. CSAbstruct has 5 labels (3
  facets), so ``P`` cannot exceed the number of classes: ``pk_for`` takes
  ``P = min(P_paper, C)`` and ``K = max(K_paper, 64 // P)``, which keeps the batch near 64 and
  class-balanced (5 labels: ``P = 5, K = 12``, batch 60; 3 facets: ``P = 3, K = 21``, batch 63).
* **Which vectors the losses see.** The losses receive the *unnormalised* pooled vector: the
  softmax loss (eq. 1) is a plain linear classifier on it, as in the paper; the other four
  normalise internally (cosine similarity, or Euclidean distance of normalised vectors for the
  triplet loss, as ``pytorch-metric-learning`` does by default). Retrieval uses L2-normalised
  vectors (section 4.1, footnote 6).
* **Triplets.** Footnote 5: "all possible triplets are used for training without negative
  sampling", so no miner is used by default (``pytorch-metric-learning`` then forms every
  triplet of the batch). A ``TripletMarginMiner(type_of_triplets="all")`` gives the same loss
  value (it drops only triplets that contribute zero), which a test checks.
* **The classifier weights** of the softmax and ArcFace losses are trained with the encoder by
  the same Adam optimiser and, by default, the same learning rate (the paper states one).

References: Deng et al. (2019) ArcFace; Wang et al. (2019) multi-similarity loss; Chen et al.
(2020) SimCLR / NT-Xent; Hermans et al. (2017) "In defense of the triplet loss" (PK batches);
Musgrave et al. (2020) "A metric learning reality check" (MAP@R).

Nothing is re-exported here: import from the module that holds a name, e.g.
``from unifar.rhetoric.finetune import finetune``.
"""
