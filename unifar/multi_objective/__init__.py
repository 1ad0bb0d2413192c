"""Multi-objective dense retrieval (Parisot and Zavrel, 2022): one bi-encoder
(:class:`unifar.bi_encoder.BiEncoder`) trained on several objectives. Each module has one concern:

* :mod:`~unifar.multi_objective.objectives`: objectives as data sources with one interface
  (question -> document, document -> cited document) and the leakage guard;
* :mod:`~unifar.multi_objective.icrop`: independent cropping, the self-supervised objective;
* :mod:`~unifar.multi_objective.schedules`: the three ways of combining objectives (in-batch mix,
  alternating batches, fine-tuning A then B), as training phases;
* :mod:`~unifar.multi_objective.training`: the loop, for any loss of
  :mod:`unifar.bi_encoder_losses` (MNRL, triplet);
* :mod:`~unifar.multi_objective.experiments`: the paper's tables 1 and 2 in our terms (which
  objectives, combined how) and a resumable trainer for a list of them (chapter 8);
* :mod:`~unifar.multi_objective.report`: the paper's tables beside ours, and its findings
  counted alike on both.

A run, step by step::

    from unifar.bi_encoder import BiEncoder, BiEncoderRetriever
    from unifar.multi_objective.objectives import pubmedqa_objective, specter_objective
    from unifar.multi_objective.schedules import alternate
    from unifar.multi_objective.training import train_bi_encoder

    model = BiEncoder()                                        # MiniLM, mean pooling
    objs = [pubmedqa_objective(sep=model.sep_token), specter_objective(sep=model.sep_token)]
    result = train_bi_encoder(model, alternate(objs, steps=200), out_dir="runs/mo")
    # evaluate: evaluate_all(retrievers=[BiEncoderRetriever(model, name="mo-alternate")])
"""
