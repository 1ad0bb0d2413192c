"""Where does a trained UniFAR lose question -> document retrieval: the question side or the document side?

Encodes the PubMedQA **train half** questions (training data; the test half is for reporting) and
all 1,000 PubMedQA abstracts with a trained checkpoint (T) and with the untrained model on the
same base (U), then scores every pairing: T questions x T documents, T x U, U x T, U x U
(MRR@10, the chapter-5 protocol). It also reports the entropy of the facet attention of
questions and documents, how similar the facet embeddings of one question are to each other, and
one question's token attention.

    python benchmarks/studies/qdoc_diagnosis.py --model artifacts/ch04/full/seed0/final --out results/ch05/qdoc_diagnosis.json
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="artifacts/ch04/full/seed0/final")
    ap.add_argument("--pubmedqa", default="data/pubmedqa_pqal")
    ap.add_argument("--out", default="results/ch05/qdoc_diagnosis.json")
    args = ap.parse_args(argv)

    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.pubmedqa import load_pubmedqa
    from unifar.caching import TokenStateCache
    from unifar.scoring import qdoc_scores
    from unifar.files import write_json
    from unifar.runtime import run_facts

    full, train_half = load_pubmedqa(args.pubmedqa), load_pubmedqa(args.pubmedqa, split="train")
    docs = [{"title": d["title"], "sentences": d["sentences"]} for d in full.documents]
    row = {d["id"]: i for i, d in enumerate(full.documents)}
    texts = [q["text"] for q in train_half.questions]
    gold = np.array([row[next(iter(train_half.qrels[q["qid"]]))] for q in train_half.questions])
    trained = UniFAR.from_pretrained(args.model)
    untrained = UniFAR(UniFARConfig.from_dict(trained.config.to_dict()),
                       base_model=trained.base, tokenizer=trained.tokenizer)
    cache = TokenStateCache()  # one base pass per input for both models (the base is shared)
    enc = {}
    for key, model in (("trained", trained), ("untrained", untrained)):
        enc[key] = (model.encode_questions(texts, show_progress=False, state_cache=cache),
                    model.encode_documents(docs, show_progress=False, state_cache=cache))

    def mrr10(q, d) -> float:
        s = qdoc_scores(q, d).numpy()
        rank = (s > s[np.arange(len(gold)), gold][:, None]).sum(1) + 1
        return round(float(np.where(rank <= 10, 1.0 / rank, 0.0).mean()) * 100, 2)

    def entropy(enc_) -> float:  # mean over inputs and facets, in nats, over the valid columns
        vals = []
        for a, units in zip(enc_.attention, enc_.units):
            a = a[:, : len(units)].float().clamp_min(1e-12)
            vals.append(float(-(a * a.log()).sum(-1).mean()))
        return round(float(np.mean(vals)), 3)

    def facet_spread(e) -> float:  # mean cosine between the first and last facet embedding of one input
        return round(float(torch.nn.functional.cosine_similarity(e[:, 0].float(), e[:, -1].float(), dim=-1).mean()), 4)

    pairings = {f"{a} questions x {b} documents": mrr10(enc[a][0].embeddings, enc[b][1].embeddings)
                for a in ("trained", "untrained") for b in ("trained", "untrained")}
    q_t, q_u = enc["trained"][0], enc["untrained"][0]
    example = {"question": texts[0], "tokens": q_t.units[0],
               "trained_attention_facet0": [round(float(x), 3) for x in q_t.attention[0][0, : len(q_t.units[0])]],
               "untrained_attention_facet0": [round(float(x), 3) for x in q_u.attention[0][0, : len(q_u.units[0])]]}
    out = {"what": "PubMedQA train-half questions vs all 1,000 abstracts, MRR@10 in percent, per pairing of encoders",
           "model": args.model, "n_questions": len(texts), "n_documents": len(docs), "mrr@10": pairings,
           "question_branches": sorted(set(q_t.branch)), "document_branches": sorted(set(enc["trained"][1].branch)),
           "attention_entropy": {"questions": {"untrained": entropy(q_u), "trained": entropy(q_t)},
                                 "documents": {"untrained": entropy(enc["untrained"][1]), "trained": entropy(enc["trained"][1])}},
           "question_facet_cosine": {"untrained": facet_spread(q_u.embeddings), "trained": facet_spread(q_t.embeddings)},
           "example": example, "run": run_facts()}
    for k, v in pairings.items():
        print(f"{k:<40} MRR@10 {v:6.2f}")
    print("attention entropy", out["attention_entropy"], "| question facet cosine", out["question_facet_cosine"])
    print(f"wrote {write_json(args.out, out)}")
    return out


if __name__ == "__main__":
    main()
