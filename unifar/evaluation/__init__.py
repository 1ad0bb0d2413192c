"""Evaluation: the systems, the benchmark protocols, and the run that scores every system on
every benchmark. Each module has one concern:

* :mod:`~unifar.evaluation.texts`: the text a system reads of a document (title + abstract, one facet's sentences);
* :mod:`~unifar.evaluation.ranking`: ranking by score (one stable sort);
* :mod:`~unifar.evaluation.retrievers`: the :class:`~unifar.evaluation.retrievers.Retriever`
  interface every system implements, and the lexical systems (BM25, facet-BM25);
* :mod:`~unifar.evaluation.mean_pooling`: the mean-pooling encoder;
* :mod:`~unifar.evaluation.dense`: mean pooling, the facet-restricted query and UniFAR as retrievers;
* :mod:`~unifar.evaluation.metrics`: ranking metrics (CSFCube's by hand, the others through ranx);
* :mod:`~unifar.evaluation.csfcube`: the CSFCube protocol (pools, ranking files, official scores, folds);
* :mod:`~unifar.evaluation.qdoc`: the question -> document protocols;
* :mod:`~unifar.evaluation.hybrid`: fusing several retrievers' scores (one weight convention),
  with weights chosen by :mod:`~unifar.evaluation.tuning` on dev splits only;
* :mod:`~unifar.evaluation.bootstrap`: bootstrap intervals and the paired bootstrap;
* :mod:`~unifar.evaluation.benchmarks`, :mod:`~unifar.evaluation.systems`,
  :mod:`~unifar.evaluation.runner`: loading the benchmarks, building the systems, the run
  (:func:`~unifar.evaluation.runner.evaluate_all`);
* :mod:`~unifar.evaluation.report`: tables, paired comparisons, verdicts, seed spread;
* :mod:`~unifar.evaluation.attention`: where a facet model's attention goes (chapter 4).

A CSFCube score, step by step: :class:`~unifar.evaluation.dense.UniFARRetriever` (or another
retriever) encodes the collection and gives a score function; :func:`~unifar.evaluation.csfcube.rank_pools`
ranks each annotated pool (:func:`~unifar.evaluation.ranking.rank_order`);
:func:`~unifar.evaluation.csfcube.csfcube_scores` grades the ranking and averages AP and NDCG%20
(:mod:`~unifar.evaluation.metrics`) over the folds. Nothing here imports torch until a dense
system is used. The package imports :mod:`unifar.datasets` and :mod:`unifar.rhetoric` (a
labeller's sentence labels for facet-BM25) and is imported by :mod:`unifar.construction` (mining
ranks with its retrievers), never the other way round (``tests/test_import_graph.py``).
"""
