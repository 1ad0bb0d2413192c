"""Each chapter's profiles: the settings papermill's ``profile`` parameter selects.

Every chapter offers ``smoke`` (every code path on tiny inputs, for tests), ``default`` (the
committed outputs, which CI re-executes: real data and the shipped encoder, about 4 minutes on
2 cores) and ``full`` (the larger CPU run the chapter's conclusions rest on, committed under
``results/<chapter>/full/``); some add ``paper`` (paper scale, for a GPU). :data:`PROFILES` maps
a chapter (``"ch04"``) to its profiles, and :func:`unifar.book.setup_chapter` looks a chapter's
up there. A chapter's parameters cell says what each profile runs and how long it takes; an
explicit papermill parameter (``-p epochs 2``) overrides the profile's value.
"""

from __future__ import annotations

from typing import Any

from .config import ABLATIONS, PAPER_PROFILE

__all__ = ["CH4_CPU_MODEL", "CH4_EXTRA", "CH6_ARGS", "CH6_PAPER_ROWS", "CH8_ALL_BENCHMARKS", "PROFILES"]

Profiles = dict[str, dict[str, Any]]

CH1: Profiles = {
    "smoke": dict(max_tokens=32, untrained_unifar=True, mpnet=False),
    "default": dict(max_tokens=512, untrained_unifar=False, mpnet=False),
    "full": dict(max_tokens=512, untrained_unifar=True, mpnet=True),
}

# train: CSAbstruct train sentences for fine-tuning; labeller_train: for the labeller's head;
# dev / test: CSAbstruct; pubmedqa / csfcube: facet-labelled sentences of the transfer and
# agreement checks (None: the whole set). max_steps caps the PK steps per loss; length_chunks:
# length-sorted pieces per PK batch (a CPU speed-up).
CH2: Profiles = {
    "smoke": dict(train=180, labeller_train=180, epochs=2, max_steps=4, max_tokens=32,
                  dev=60, test=80, pubmedqa=60, csfcube=60, length_chunks=3),
    "default": dict(train=480, labeller_train=1500, epochs=1, max_steps=None, max_tokens=64,
                    dev=200, test=400, pubmedqa=240, csfcube=300, length_chunks=3),
    "full": dict(train=2400, labeller_train=None, epochs=2, max_steps=None, max_tokens=64,
                 dev=600, test=None, pubmedqa=1000, csfcube=2000, length_chunks=3),
    "paper": dict(train=None, labeller_train=None, epochs=5, max_steps=None, max_tokens=128,
                  dev=None, test=None, pubmedqa=None, csfcube=None, length_chunks=1),
}

# the evaluation collections of chapter 3's semantic leakage check; Cranfield (all its abstracts)
# only where a chapter evaluates on it, the full profiles
_SEMANTIC = ["PubMedQA", "SciRepEval search test", "CSFCube"]
CH3: Profiles = {
    "smoke": dict(encoder_max_length=64, semantic=_SEMANTIC, mining=dict(
        max_query_documents=20, positives_per_facet=1, hard_negatives_per_facet=1,
        pool_per_source={"csabstruct": 60, "nicta": 40, "pubmedqa": 40,
                         "scirepeval_triplets": 60, "scirepeval_search": 60})),
    # PubMedQA's training half stays whole: chapter 5 encodes all 1,000 PubMedQA abstracts
    "default": dict(encoder_max_length=512, semantic=_SEMANTIC, mining=dict(
        positives_per_facet=1, hard_negatives_per_facet=1,
        pool_per_source={"csabstruct": 200, "nicta": 150, "scirepeval_triplets": 150,
                         "scirepeval_search": 150})),
    "full": dict(encoder_max_length=512, semantic=["Cranfield", *_SEMANTIC], mining=dict(
        positives_per_facet=1, hard_negatives_per_facet=1, pool_per_source=None)),
}

#: The model settings of chapter 4's CPU profiles, over the paper's hyper-parameters (appendix A):
#: the base encoder frozen and questions sent through the sentence branch (our CPU choices), and,
#: beyond the paper, the distillation of chapter 3's teacher at weight 10 (the dev evidence is in
#: chapter 4's section on distillation).
CH4_CPU_MODEL: dict[str, Any] = dict(base_model="minilm", max_tokens=512, train_values=True,
                                     use_token_attention=False, distill_weight=10.0)
# Checkpoints serve only a resume; a finished run keeps its final model (100 MB less a seed).
_CH4_CPU_ARGS = dict(freeze_base=True, eval_fraction=0.05, save_every=50,
                     keep_checkpoints_when_done=False)
#: The other runs of chapter 4's full profile (seed 0), as config and argument overrides of the
#: CPU profile.
CH4_EXTRA: dict[str, dict[str, dict[str, Any]]] = {
    # With the base frozen the control has nothing to train: it trains the top base layer, which
    # costs about 9.5 s a step on 2 cores, so at most 100 steps (the dev study's C4, UniFAR with
    # its top layer trained, peaked on fold1_dev at step 100). UniFAR's own top-layer run (C4)
    # stays a dev-study row: the whole base is the gpu profile's (benchmarks/studies).
    "single-vector control, top layer": dict(config={"aggregation": "mean", "use_kl_loss": False},
                                             args={"train_top_layers": 1, "max_steps": 100}),
    "paper objective": dict(config={"distill_weight": 0.0, "train_values": False}, args={}),
}
CH4: Profiles = {
    "smoke": dict(config={**CH4_CPU_MODEL, "max_tokens": 128, "epochs": 1}, n_seeds=1, n_ftus=48,
                  dev_queries=1, dev_every=2, extra={},
                  args=dict(freeze_base=True, max_steps=3, eval_fraction=0.1, save_every=2)),
    "default": dict(config={**CH4_CPU_MODEL, "epochs": 1}, args=_CH4_CPU_ARGS, n_seeds=1, n_ftus=None,
                    dev_queries=None, dev_every=25, extra={}),
    "full": dict(config={**CH4_CPU_MODEL, "epochs": 3}, args=_CH4_CPU_ARGS, n_seeds=3, n_ftus=None,
                 dev_queries=None, dev_every=50, extra=CH4_EXTRA),
    "paper": dict(config=dict(PAPER_PROFILE), n_seeds=1, n_ftus=None, dev_queries=None,
                  dev_every=500, extra={},
                  args=dict(freeze_base=False, eval_fraction=0.02, save_every=1000)),
}

_ALL_FOUR = ["csfcube", "cranfield", "pubmedqa", "scirepeval"]
CH5: Profiles = {
    "smoke": dict(benchmarks=["csfcube", "scirepeval"], max_length=64, other_seeds=[]),
    # PubMedQA and Cranfield are the full profile's (the CI's 4 minutes a chapter)
    "default": dict(benchmarks=["csfcube", "scirepeval"], max_length=None, other_seeds=[]),
    "full": dict(benchmarks=_ALL_FOUR, max_length=None, other_seeds=[1, 2]),
}

#: The rows of the paper's table 3 in its order (chapter 6), from :data:`unifar.config.ABLATIONS`.
CH6_PAPER_ROWS = list(ABLATIONS)
#: The training arguments of chapter 6's runs; a finished run keeps its final model only (its
#: checkpoints would add 100 MB a run).
CH6_ARGS = dict(eval_fraction=0.05, eval_every=0, save_every=1000, keep_checkpoints_when_done=False)
CH6: Profiles = {
    "smoke": dict(ftus="smoke", max_steps=2, n_seeds=1, rows=["full", "w/o anchors", "w/o L_KL"],
                  benchmarks=["csfcube", "scirepeval"], max_tokens=128, pairs=64,
                  distill_weight=0.0),
    "default": dict(ftus="default", max_steps=20, n_seeds=1, rows=CH6_PAPER_ROWS,
                    # PubMedQA and Cranfield are the full profile's, as in chapter 5's default
                    benchmarks=["csfcube", "scirepeval"], max_tokens=512, pairs=300,
                    distill_weight=0.0),
    # the paper's rows over a base that distils the teacher (chapter 4's weight), and that
    # base's paper objective
    "full": dict(ftus="full", max_steps=None, n_seeds=3,
                 rows=CH6_PAPER_ROWS + ["w/o L_KD (the paper's objective)"],
                 benchmarks=["csfcube", "scirepeval", "cranfield", "pubmedqa"],
                 max_tokens=512, pairs=1000, distill_weight=CH4_CPU_MODEL["distill_weight"]),
}

CH7: Profiles = {
    "smoke": dict(ftus="smoke", steps=3, poolings=["cls"], benchmarks=["scirepeval"],
                  max_tokens=128, n_ftus=48, dev_queries=6, dev_every=3),
    "default": dict(ftus="default", steps=10, poolings=["cls"],
                    benchmarks=["scirepeval"], max_tokens=512, n_ftus=None, dev_queries=12,
                    dev_every=5),
    "full": dict(ftus="full", steps=200, poolings=["cls", "mean"],
                 benchmarks=["csfcube", "scirepeval", "pubmedqa", "cranfield"], max_tokens=512,
                 n_ftus=None, dev_queries=64, dev_every=20),
}

_CH8_SMALL = ["scirepeval", "pubmedqa"]
#: The four benchmarks of chapter 8's full tables, in their column order.
CH8_ALL_BENCHMARKS = ["csfcube", "scirepeval", "pubmedqa", "cranfield"]
CH8: Profiles = {
    "smoke": dict(ftus="smoke", steps=2, tables=[1], benchmarks=_CH8_SMALL[:1], top_layers=1,
                  dev_every=1, n_dev=8),
    "default": dict(ftus="default", steps=10, tables=[1], benchmarks=_CH8_SMALL, top_layers=1,
                    dev_every=5, n_dev=32),
    "full": dict(ftus="full", steps=100, tables=[1, 2], benchmarks=CH8_ALL_BENCHMARKS, top_layers=1,
                 dev_every=10, n_dev=64),
    "paper": dict(ftus="full", steps=2000, tables=[1, 2], benchmarks=CH8_ALL_BENCHMARKS, top_layers=0,
                  dev_every=100, n_dev=256),
}

#: The profiles of every chapter, by chapter (``"ch04"``) and profile name.
#:
#: :meta hide-value:
PROFILES: dict[str, Profiles] = {"ch01": CH1, "ch02": CH2, "ch03": CH3, "ch04": CH4, "ch05": CH5,
                                 "ch06": CH6, "ch07": CH7, "ch08": CH8}
