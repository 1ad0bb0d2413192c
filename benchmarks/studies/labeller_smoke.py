"""Smoke run of the offline facet labeller and of rhetoric retrieval with a plain base encoder.

1. Encode CSAbstruct ``train`` without the CSFCube papers (mean pooling, L2-normalised) and
   ``test``, once.
2. Facet labeller (background+objective / method / result; ``other`` left out): a linear head,
   ``C`` chosen by 3-fold cross-validation over abstracts of ``train`` (grouped by abstract, so
   sentences of one abstract never sit on both sides), then accuracy and macro-F1 on ``test``;
   also a kNN head (k = 10) for comparison.
3. P@1 / MAP@R (paper 002, section 4.1) of the plain encoder on the ``test`` sentences, with the
   5 CSAbstruct labels (all 1,349 sentences, as the paper's table 4) and with the 3 facets.
4. Optionally (``--finetune-steps N``) N steps of SciToricsBERT fine-tuning on the real encoder,
   only to check that the path runs and to time a step (no evaluation).

Writes JSON with the machine and the wall-clock times.

    python benchmarks/studies/labeller_smoke.py --model minilm --threads 1 --out results/labeller_smoke.json
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--C", type=float, nargs="+", default=[0.1, 1.0, 10.0], help="grid for the linear head")
    ap.add_argument("--finetune-steps", type=int, default=0)
    ap.add_argument("--finetune-loss", default="ms")
    ap.add_argument("--cache", default=None, help="safetensors file to reuse the embeddings from (written if missing)")
    ap.add_argument("--limit-docs", type=int, default=None, help="first N train and test abstracts (quick check)")
    ap.add_argument("--out", default="results/labeller_smoke.json")
    args = ap.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)  # scikit-learn's BLAS too
    from sklearn.model_selection import GroupKFold

    from unifar.runtime import run_facts
    from unifar.datasets.labelled_abstracts import load_csabstruct
    from unifar.rhetoric.labeller import FacetLabeller
    from unifar.rhetoric.labeller_data import csabstruct_training_documents
    from unifar.rhetoric.labeller_scores import facet_scores
    from unifar.facets import FACETS
    from unifar.datasets.leakage import forbidden_from_repo_data
    from unifar.rhetoric.encoder import SentenceEncoder
    from unifar.rhetoric.finetune import finetune
    from unifar.rhetoric.retrieval import retrieval_scores

    t_all = time.perf_counter()
    times: dict[str, float] = {}

    t = time.perf_counter()
    train_docs, report = csabstruct_training_documents(("train",), forbidden=forbidden_from_repo_data(include=("csfcube",)))
    excluded = sorted((h.training_id for h in report.hits), key=lambda x: int(x.split("-")[1]))
    test_docs = [dict(d) for d in load_csabstruct(split="test")]
    if args.limit_docs:
        train_docs, test_docs = train_docs[: args.limit_docs], test_docs[: args.limit_docs]
    times["load_data_s"] = time.perf_counter() - t

    t = time.perf_counter()
    encoder = SentenceEncoder.from_name(args.model, max_length=args.max_length)
    times["load_model_s"] = time.perf_counter() - t

    tr_sents, tr_facets, tr_group = [], [], []
    for g, d in enumerate(train_docs):
        for s, f in zip(d["sentences"], d["labels"]):
            if f is not None:
                tr_sents.append(s)
                tr_facets.append(f)
                tr_group.append(g)
    te_sents = [s for d in test_docs for s in d["sentences"]]
    te_raw = [x for d in test_docs for x in d["raw_labels"]]
    te_facet = [x for d in test_docs for x in d["labels"]]

    cache = Path(args.cache) if args.cache else None
    from_cache = False
    if cache is not None and cache.exists():
        from safetensors.torch import load_file

        emb = load_file(str(cache))
        X_tr, X_te = emb["train"], emb["test"]
        if (len(X_tr), len(X_te)) != (len(tr_sents), len(te_sents)):
            raise ValueError(f"{cache}: cached embeddings do not match the sentences; delete it")
        from_cache = True
    else:
        t = time.perf_counter()
        X_tr = encoder.encode(tr_sents, batch_size=args.batch_size, progress=False)
        times["encode_train_s"] = time.perf_counter() - t
        t = time.perf_counter()
        X_te = encoder.encode(te_sents, batch_size=args.batch_size, progress=False)
        times["encode_test_s"] = time.perf_counter() - t
        if cache is not None:
            from safetensors.torch import save_file

            cache.parent.mkdir(parents=True, exist_ok=True)
            save_file({"train": X_tr.contiguous(), "test": X_te.contiguous()}, str(cache))

    # ---- linear head: C by grouped 3-fold CV on train
    t = time.perf_counter()
    cv: dict[str, float] = {}
    folds = list(GroupKFold(n_splits=3).split(np.zeros(len(tr_facets)), groups=tr_group))
    for C in args.C:
        accs = []
        for fit_idx, val_idx in folds:
            lab = FacetLabeller(encoder, head="linear", C=C).fit_embeddings(
                X_tr[fit_idx], [tr_facets[i] for i in fit_idx]
            )
            pred = lab.predict_embeddings(X_tr[val_idx])
            accs.append(facet_scores([tr_facets[i] for i in val_idx], pred)["macro_f1"])
        cv[str(C)] = float(np.mean(accs))
    best_C = float(max(cv, key=cv.get))
    times["cv_s"] = time.perf_counter() - t

    t = time.perf_counter()
    meta = {"training": "csabstruct train", "documents": len(train_docs), "excluded_csfcube_overlap": excluded}
    scored = [i for i, f in enumerate(te_facet) if f is not None]
    heads = {}
    for name, lab in (
        ("linear", FacetLabeller(encoder, head="linear", C=best_C)),
        ("knn10", FacetLabeller(encoder, head="knn", k=10)),
    ):
        lab.fit_embeddings(X_tr, tr_facets, **meta)
        pred = lab.predict_embeddings(X_te[scored])
        heads[name] = {**facet_scores([te_facet[i] for i in scored], pred), **(
            {"lbfgs_iterations": lab.metadata["lbfgs_iterations"]} if "lbfgs_iterations" in lab.metadata else {}
        )}
    times["heads_s"] = time.perf_counter() - t

    t = time.perf_counter()
    retrieval = {
        "csabstruct_test_5_labels": {"n": len(te_raw), **retrieval_scores(X_te, te_raw)},
        "csabstruct_test_3_facets": {
            "n": len(scored), **retrieval_scores(X_te[scored], [te_facet[i] for i in scored])
        },
    }
    times["retrieval_s"] = time.perf_counter() - t

    ft = None
    if args.finetune_steps:
        t = time.perf_counter()
        tr_raw = [x for d in train_docs for x in d["raw_labels"]]
        tr_all = [s for d in train_docs for s in d["sentences"]]
        hist = finetune(encoder, tr_all, tr_raw, loss=args.finetune_loss, max_steps=args.finetune_steps, seed=0, progress=False)
        secs = time.perf_counter() - t
        ft = {"losses": list(hist), "settings": hist.settings, "seconds": secs, "seconds_per_step": secs / len(hist)}
        times["finetune_s"] = secs

    times["total_s"] = time.perf_counter() - t_all
    out = {
        "what": "plain-encoder facet labeller + rhetoric retrieval on CSAbstruct (smoke run)",
        "model": args.model,
        "pooling": "mean, L2-normalised",
        "max_length": args.max_length,
        "limit_docs": args.limit_docs,
        "embeddings_from_cache": from_cache,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "data": {
            "train_documents": len(train_docs),
            "train_sentences_with_facet": len(tr_sents),
            "excluded_csfcube_overlap": excluded,
            "test_documents": len(test_docs),
            "test_sentences": len(te_sents),
            "test_sentences_with_facet": len(scored),
            "facets": list(FACETS),
        },
        "labeller": {"cv_macro_f1_by_C": cv, "C": best_C, "test": heads},
        "retrieval": retrieval,
        "finetune_smoke": ft,
        "timing_s": {k: round(v, 2) for k, v in times.items()},
        "run": run_facts(t_all),
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: out[k] for k in ("labeller", "retrieval", "timing_s")}, indent=2))
    return out


if __name__ == "__main__":
    main()
