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
  :mod:`~unifar.evaluation.labelled_bm25`: its facet-BM25 part on a labeller's sentence labels;
* :mod:`~unifar.evaluation.bootstrap`: bootstrap intervals and the paired bootstrap;
  :mod:`~unifar.evaluation.power`: the smallest difference a comparison can detect (stated
  before it runs);
* :mod:`~unifar.evaluation.benchmarks`, :mod:`~unifar.evaluation.systems`,
  :mod:`~unifar.evaluation.runner`: loading the benchmarks, building the systems, the run
  (:func:`~unifar.evaluation.runner.evaluate_all`);
* :mod:`~unifar.evaluation.report`: tables, paired comparisons, verdicts, seed spread;
* :mod:`~unifar.evaluation.attention`: where a facet model's attention goes (chapter 4);
  :mod:`~unifar.evaluation.structure`: what training changed, measured without ranking
  (chapter 6); :mod:`~unifar.evaluation.ablation`: table 3 (chapter 6);
  :mod:`~unifar.evaluation.dev_studies`: chapter 4's committed dev studies as tables.

A CSFCube score, step by step, as ``python -m unifar evaluate csfcube --model RUN`` walks it:

1. :mod:`unifar.cli` (``_evaluate_csfcube``) checks the options, loads the dataset
   (:func:`unifar.datasets.csfcube.load_csfcube`) and builds the system;
2. :func:`~unifar.evaluation.systems.build_retrievers` loads the checkpoint into a
   :class:`~unifar.evaluation.dense.UniFARRetriever` (the same call builds every system of
   :func:`~unifar.evaluation.runner.evaluate_all`);
3. :meth:`~unifar.evaluation.dense.UniFARRetriever.csfcube_score_fn` encodes the 4,205 papers
   of the pools once (:meth:`unifar.model.UniFAR.encode_documents`; kept in the run's cache,
   so a hybrid that fuses the same system reads them) and scores a candidate by ``M(f, f)``
   (:func:`unifar.scoring.docdoc_scores`);
4. :func:`~unifar.evaluation.csfcube.rank_pools` sorts each annotated pool by that score (the
   one stable sort, :func:`~unifar.evaluation.ranking.rank_order`), and
   :func:`~unifar.evaluation.csfcube.score_csfcube_ranking` grades the ranking, computes AP and
   NDCG%20 per query facet (:func:`~unifar.evaluation.metrics.csfcube_query_metrics`) and
   averages them over the folds: the same function scores ranking files (``--rankings DIR``)
   and every CSFCube system of :func:`~unifar.evaluation.runner.evaluate_all`.

Four evaluation modules (``systems``, ``dense``, ``csfcube``, ``metrics`` with ``ranking``'s
sort) lie between the command line and the metric, beside the model's encoder and the scoring
function. A q-doc benchmark goes through the same retriever's ``index`` and ``score`` and
:mod:`~unifar.evaluation.qdoc` instead of step 4.

Nothing here imports torch until a dense
system is used. The package imports :mod:`unifar.datasets` and :mod:`unifar.rhetoric` (a
labeller's sentence labels for facet-BM25) and is imported by :mod:`unifar.construction` (mining
ranks with its retrievers), never the other way round (``tests/test_import_graph.py``).
"""
