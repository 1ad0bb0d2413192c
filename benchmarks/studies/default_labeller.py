"""Train the sentence labeller that ships with the package (`unifar encode`'s default).

A search user should not have to execute chapter 2 of the book before `unifar encode` can label
the sentences of their papers for facet BM25. Two labellers that need no fine-tuning, each a
linear head (multinomial logistic regression) over the frozen shipped MiniLM, a few kilobytes
saved (``labeller.json`` + ``head.safetensors``; the encoder is loaded by name), against 88 MB for
chapter 2's fine-tuned labeller, which carries its encoder:

* ``--kind in-context`` (shipped): over each sentence's in-context state in UniFAR's own pass
  at 512 tokens (:class:`unifar.rhetoric.context_labeller.InContextLabeller`), so that
  `unifar encode` labels from the pass that encodes the papers;
* ``--kind sentence`` (shipped until 2026-11): over each sentence embedded alone at 64 tokens
  (:class:`unifar.rhetoric.labeller.FacetLabeller`, chapter 2's ``minilm base, linear``); its
  record is ``results/search/sentence_labeller.json``.

Both are trained and scored the same way:

* training: every facet-labelled sentence of CSAbstruct train, without the abstracts that are
  CSFCube papers (:func:`unifar.rhetoric.labeller_data.csabstruct_training_documents`);
* ``C``: chosen on CSAbstruct dev macro-F1 (:func:`unifar.rhetoric.labeller_scores.choose_regularisation`);
* reported: macro-F1 on CSAbstruct dev and test, PubMedQA's and CSFCube's labelled sentences, beside
  chapter 2's labellers of its ``full`` profile (``results/ch02/full/rhetoric.json``).

    python benchmarks/studies/default_labeller.py --C 0.1 0.3 1 3 10    # about 8 min on 2 CPU cores

Writes the labeller to ``unifar/search/default_labeller/`` and the scores (with the git commit
and the machine) to ``results/search/default_labeller.json``; prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def sentence_head(args: argparse.Namespace, docs: dict, meta: dict) -> tuple:
    """A linear head over each sentence embedded alone by the frozen encoder (mean pooling)."""
    from unifar.rhetoric.labeller import FacetLabeller
    from unifar.rhetoric.labeller_data import labelled_sentences
    from unifar.rhetoric.labeller_scores import choose_regularisation, facet_scores
    from unifar.rhetoric.encoder import SentenceEncoder

    sets = {name: labelled_sentences(d) for name, d in docs.items()}
    encoder = SentenceEncoder.from_name(args.model, max_length=args.max_tokens)
    X = {name: encoder.encode(sents, batch_size=64, progress=True) for name, (sents, _) in sets.items()}
    fits, dev_f1 = {}, {}
    for C in args.C:
        fits[C] = FacetLabeller(encoder, head="linear", C=C).fit_embeddings(X["train"], sets["train"][1], **meta)
        dev_f1[C] = facet_scores(sets["dev"][1], fits[C].predict_embeddings(X["dev"]))["macro_f1"]
    C = choose_regularisation(dev_f1)
    labeller = fits[C]
    scores = {name: facet_scores(sets[name][1], labeller.predict_embeddings(X[name]))
              for name in ("dev", "test", "pubmedqa", "csfcube")}
    _record(labeller, dev_f1, scores)
    return labeller, C, dev_f1, scores, labeller.save(args.out, save_encoder=False)


def in_context_head(args: argparse.Namespace, docs: dict, meta: dict) -> tuple:
    """A linear head over the in-context sentence states of UniFAR's base pass (the base is the
    frozen encoder), each set encoded once (:class:`unifar.rhetoric.context_labeller.InContextLabeller`)."""
    from unifar.rhetoric.context_labeller import InContextLabeller
    from unifar.rhetoric.labeller_scores import choose_regularisation

    base = InContextLabeller.for_base(args.model, args.max_tokens, progress=True)
    enc = {name: base.encode(d) for name, d in docs.items()}
    fits, dev_f1 = {}, {}
    for C in args.C:
        fits[C] = InContextLabeller(base.model, C=C).fit(docs["train"], enc["train"], **meta)
        dev_f1[C] = fits[C].evaluate(docs["dev"], enc["dev"])["macro_f1"]
    C = choose_regularisation(dev_f1)
    labeller = fits[C]
    scores = {name: labeller.evaluate(docs[name], enc[name]) for name in ("dev", "test", "pubmedqa", "csfcube")}
    _record(labeller, dev_f1, scores)
    return labeller, C, dev_f1, scores, labeller.save(args.out)


def _record(labeller, dev_f1: dict, scores: dict) -> None:
    labeller.metadata = {**labeller.metadata, "chosen_by": "CSAbstruct dev macro-F1",
                         "dev_macro_f1_by_C": {str(c): f for c, f in dev_f1.items()},
                         **{f"{n}_macro_f1": s["macro_f1"] for n, s in scores.items()}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data", help="folder holding csabstruct/, csfcube/, pubmedqa_pqal/")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--kind", choices=("sentence", "in-context"), default="in-context",
                    help="a head over each sentence encoded alone, or over the in-context sentence "
                         "states of UniFAR's own pass (the default)")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="sentence: chapter 2's sentence length (64); in-context: UniFAR's budget (512)")
    ap.add_argument("--C", type=float, nargs="+", default=[1.0, 10.0, 100.0], help="chapter 2's grid")
    ap.add_argument("--out", default="unifar/search/default_labeller")
    ap.add_argument("--results", default="results/search/default_labeller.json")
    args = ap.parse_args(argv)
    args.max_tokens = args.max_tokens or (64 if args.kind == "sentence" else 512)

    from unifar.rhetoric.labeller_data import csabstruct_training_documents, labelled_sentences
    from unifar.datasets.leakage import forbidden_from_repo_data
    from unifar.datasets.labelled_abstracts import load_csabstruct, load_csfcube_documents
    from unifar.datasets.pubmedqa import load_pubmedqa
    from unifar.files import write_json
    from unifar.runtime import run_facts

    t0 = time.perf_counter()
    root = Path(args.data)
    forbidden = forbidden_from_repo_data(root, include=("csfcube",))
    train_docs, leak = csabstruct_training_documents(("train",), path=root / "csabstruct", forbidden=forbidden)
    docs = {
        "train": train_docs,
        "dev": list(load_csabstruct(root / "csabstruct", split="dev")),
        "test": list(load_csabstruct(root / "csabstruct", split="test")),
        "pubmedqa": list(load_pubmedqa(root / "pubmedqa_pqal").documents),
        "csfcube": list(load_csfcube_documents(root / "csfcube")),
    }
    sizes = {name: len(labelled_sentences(d)[0]) for name, d in docs.items()}
    meta = {"training": f"CSAbstruct train, all {sizes['train']} facet-labelled sentences "
                        f"({len(leak.hits)} abstracts that are CSFCube papers left out)",
            "excluded_csfcube_overlap": sorted(h.training_id for h in leak.hits),
            "script": "benchmarks/studies/default_labeller.py"}
    fit = sentence_head if args.kind == "sentence" else in_context_head
    labeller, C, dev_f1, scores, saved = fit(args, docs, meta)

    chapter2 = json.loads(Path("results/ch02/full/rhetoric.json").read_text(encoding="utf-8"))
    ch2 = chapter2["results"]["labeller"]
    out = {
        "what": "macro-F1 of the shipped default labeller (measured here; csfcube: agreement with the labels CSFCube ships, which a model predicted) beside chapter 2's full-profile "
                "labellers (measured here, results/ch02/full/rhetoric.json)",
        "labeller": {"folder": str(saved), "model": args.model, "kind": args.kind, "head": "linear", "C": C,
                     "max_tokens": args.max_tokens, "bytes": sum(p.stat().st_size for p in saved.iterdir()),
                     "dev_macro_f1_by_C": {str(c): f for c, f in dev_f1.items()}},
        "sizes": sizes,
        "scores": scores,
        "chapter2_full": {"winner": ch2["winner"],
                          "macro_f1": {name: {split: r[split]["macro_f1"] for split in scores}
                                       for name, r in ch2["results"].items()}},
        "run": run_facts(t0), "seconds": round(time.perf_counter() - t0, 1),
    }
    write_json(args.results, out)
    print(f"default labeller: {args.model} frozen + linear head ({args.kind}), C={C:g} (dev macro-F1 by C: "
          + ", ".join(f"{c:g}: {f:.3f}" for c, f in dev_f1.items()) + f"), {out['labeller']['bytes']} bytes")
    print(f"{'labeller':<48} " + " ".join(f"{s:>9}" for s in scores))
    print(f"{'shipped default (this script)':<48} " + " ".join(f"{scores[s]['macro_f1']:9.3f}" for s in scores))
    for name, f1 in out["chapter2_full"]["macro_f1"].items():
        print(f"{'chapter 2 full: ' + name:<48} " + " ".join(f"{f1[s]:9.3f}" for s in scores))
    print(f"wrote {saved} and {args.results} in {out['seconds']} s")
    return out


if __name__ == "__main__":
    main()
