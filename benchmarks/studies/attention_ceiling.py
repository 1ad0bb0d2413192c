"""How much can facet attention over a *frozen* base encoder's sentence states be worth? (dev data only)

With the CPU profile of chapter 4 (base frozen, value/output projections at the identity), every
facet embedding is a weighted mean of the base encoder's sentence states: training can only move
*where* each facet attends. This script replaces the learned attention by an oracle built from
gold sentence labels and measures the retrieval it gives, which bounds what such a model can
reach by re-weighting alone:

* facet ``f`` attends ``w_f = (1 - a) * uniform + a * gold_f`` over the title and the sentences,
  ``gold_f`` uniform over the sentences labelled ``f`` (uniform over everything when none is), for
  a mixing weight ``a`` in [0, 1] (``a = 0`` is the untrained model: every facet is the mean of the
  sentence states);
* **CSFCube fold1_dev** (doc-doc, MAP; CSFCube's shipped sentence labels): oracle on both sides,
  and on the query paper only (candidates stay uniform);
* **PubMedQA train half** (q-doc, MRR@10 of each question for its own abstract among all 1,000;
  the abstract's own section labels): documents re-weighted, questions = the mean of their
  sentence states, scored by the mean of the diagonal (the paper's q-doc strategy).

With ``--labeller DIR`` (chapter 2's sentence labeller), the CSFCube rows are repeated with the
*labeller's* predicted facets in place of CSFCube's gold ones: the attention that a perfect fit of
``L_KL`` would give, since ``L_KL`` trains toward that labeller's labels on the FTUs. The
labeller's agreement with CSFCube's gold labels is recorded beside it. ``--skip-pubmedqa`` leaves
the PubMedQA part out (it is most of the run time).

With ``--probe FTU_DIR`` they are repeated once more with a *linear probe* of the frozen sentence
states (logistic regression, ``C`` chosen on held-out FTU documents) fitted to the human sentence
labels of the FTU folder's documents (``--probe-sources``; default CSAbstruct, NICTA, PubMedQA):
for fixed facet queries the aggregation module's attention logit is linear in a sentence state, so
this is what a perfect fit of ``L_KL`` on those labels could give the module. Hard labels and
probabilities (``w_f`` proportional to ``p(f | s)``) are both tried.

    python benchmarks/studies/attention_ceiling.py --skip-pubmedqa --probe artifacts/ftus/full \
        --out results/ch05/attention_ceiling_probe.json

Mean pooling of the base encoder (all tokens, the chapter-5 baseline) is measured in the same
run. Nothing here touches a test split: fold1_dev and the PubMedQA train half only.

    python benchmarks/studies/attention_ceiling.py --out results/ch05/attention_ceiling.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np

MIX = (0.0, 0.25, 0.5, 0.75, 1.0)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="base encoder (short name, hub id or path)")
    ap.add_argument("--csfcube", default="data/csfcube")
    ap.add_argument("--pubmedqa", default="data/pubmedqa_pqal")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--out", default="results/ch05/attention_ceiling.json")
    ap.add_argument("--labeller", default=None, metavar="DIR",
                    help="also attend by this sentence labeller's predicted facets (chapter 2's full profile: "
                         "artifacts/ch02/full/labeller; 'shipped': the in-context labeller unifar encode uses)")
    ap.add_argument("--skip-pubmedqa", action="store_true", help="CSFCube fold1_dev only")
    ap.add_argument("--probe", default=None, metavar="FTU_DIR",
                    help="also attend by a linear probe on the frozen sentence states, fitted to the human sentence "
                         "labels of this FTU folder's documents (artifacts/ftus/full)")
    ap.add_argument("--probe-sources", nargs="+", default=None, metavar="SOURCE",
                    help="FTU document sources whose labels the probe learns (default: the human-labelled ones)")
    ap.add_argument("--probe-docs", type=int, default=2000, help="human-labelled FTU documents the probe sees at most")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.csfcube import load_csfcube
    from unifar.datasets.pubmedqa import load_pubmedqa
    from unifar.evaluation.csfcube import csfcube_split_papers
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder
    from unifar.evaluation.texts import document_text
    from unifar.facets import FACETS
    from unifar.files import write_json
    from unifar.objective import unit_labels as labels_of_units
    from unifar.pooling import sentence_states
    from unifar.runtime import run_facts
    from unifar.text import collate

    t0 = time.perf_counter()
    model = UniFAR(UniFARConfig(base_model=args.model, max_tokens=args.max_tokens), device="cpu")
    fidx = {f: i for i, f in enumerate(FACETS)}

    @torch.inference_mode()
    def states(docs: list[dict]) -> tuple[list[torch.Tensor], list[np.ndarray], torch.Tensor]:
        """Per document: sentence states [n, h] (title first), the facet index of each unit (-1: none),
        and [N, h] the L2-normalised mean of *all* its token states ([CLS] and [SEP]s included: the
        untrained token branch; for a question exactly the mean-pooling baseline)."""
        items = model.tokenize_documents(docs)
        order = sorted(range(len(items)), key=lambda i: -len(items[i].input_ids))
        S_all: list[torch.Tensor] = [None] * len(items)  # type: ignore[list-item]
        tok_mean = torch.zeros(len(items), model.hidden_size)
        for s in range(0, len(order), 32):
            idx = order[s : s + 32]
            b = collate([items[i] for i in idx], model.tokenizer.pad_token_id or 0)
            T = model.token_states(b)
            S, _ = sentence_states(T, b.sentence_ids, b.max_sentences)
            m = b.attention_mask.unsqueeze(-1).float()
            tok_mean[idx] = (T * m).sum(1) / m.sum(1)
            for j, i in enumerate(idx):
                S_all[i] = S[j, : items[i].n_sentences].clone()
        return S_all, unit_labels(docs, items), F.normalize(tok_mean, dim=-1)

    def unit_labels(docs: list[dict], items) -> list[np.ndarray]:
        """Per document, the facet index of each unit (title first; -1: no facet label)."""
        return [np.array(labels_of_units(d, it, fidx) or [-1] * it.n_sentences) for d, it in zip(docs, items)]

    def facet_embeddings(S: list[torch.Tensor], labels: list[np.ndarray], a: float) -> torch.Tensor:
        """[N, F, h]: w_f = (1 - a) uniform + a gold_f over each document's units (labels -1: none)."""
        return weighted_facet_embeddings(S, [np.arange(len(FACETS)) == lab[:, None] for lab in labels], a)

    # ---- CSFCube fold1_dev -------------------------------------------------------------------
    cube = load_csfcube(args.csfcube)
    dev = cube.splits["all"]["fold1_dev"]
    docs, dev_map = csfcube_split_papers(cube, "fold1_dev")  # dev_map(query embeddings, candidate embeddings)
    print(f"CSFCube fold1_dev: {len(dev)} query-facets over {len(docs)} papers", flush=True)
    S, labs, doc_tok = states(docs)

    uniform = facet_embeddings(S, labs, 0.0)
    csfcube: dict[str, dict] = {}
    for a in MIX:
        oracle = facet_embeddings(S, labs, a)
        csfcube[f"a={a} both sides"] = dev_map(oracle, oracle)
        csfcube[f"a={a} query only"] = dev_map(oracle, uniform)
        print(f"  a={a}: both {csfcube[f'a={a} both sides']['all']}, query only {csfcube[f'a={a} query only']['all']}", flush=True)
    mean_enc = MeanPoolingEncoder(args.model, max_length=args.max_tokens, show_progress=False)
    mp = mean_enc.encode([document_text(d, mean_enc.sep_token) for d in docs])
    mp = F.normalize(mp.float(), dim=-1)[:, None, :].expand(-1, len(FACETS), -1)
    csfcube["mean pooling (all tokens)"] = dev_map(mp, mp)
    tm = doc_tok[:, None, :].expand(-1, len(FACETS), -1)
    csfcube["all-token mean of the unified input (title [SEP] S1 [SEP] ...)"] = dev_map(tm, tm)
    print("  mean pooling:", csfcube["mean pooling (all tokens)"]["all"], flush=True)

    labeller_info = None
    if args.labeller:
        from unifar.search.encode import DEFAULT_LABELLER, load_labeller

        # either format: chapter 2's FacetLabeller, or an in-context head such as the shipped one
        labeller = load_labeller(DEFAULT_LABELLER if args.labeller == "shipped" else args.labeller)
        predicted = labeller.label_documents(docs)
        plabs = unit_labels([{**d, "labels": p} for d, p in zip(docs, predicted)], model.tokenize_documents(docs))
        gold_units = np.concatenate(labs)
        pred_units = np.concatenate(plabs)
        both = gold_units >= 0  # CSFCube-labelled units (the title and unlabelled sentences are -1)
        labeller_info = {
            "path": args.labeller,
            "agreement_with_csfcube_labels": round(float((pred_units[both] == gold_units[both]).mean()) * 100, 2),
            "n_labelled_units": int(both.sum()),
        }
        print(f"  labeller agrees with CSFCube's labels on {labeller_info['agreement_with_csfcube_labels']}% "
              f"of {labeller_info['n_labelled_units']} sentences", flush=True)
        for a in MIX:
            pe = facet_embeddings(S, plabs, a)
            csfcube[f"labeller a={a} both sides"] = dev_map(pe, pe)
            print(f"  labeller a={a}: both {csfcube[f'labeller a={a} both sides']['all']}", flush=True)

    probe_info = None
    if args.probe:
        probe_info = probe_rows(args, states, docs, S, labs, facet_embeddings, dev_map, csfcube)

    def write(what: str, **pubmedqa_part) -> dict:
        out = {"what": f"{what}; measured here", "model": args.model, "max_tokens": args.max_tokens,
               "csfcube_fold1_dev_map": csfcube, "n_fold1_dev_queries": len(dev), **pubmedqa_part,
               "labeller": labeller_info, "probe": probe_info, "seconds": round(time.perf_counter() - t0, 1), "run": run_facts(t0)}
        print(f"wrote {write_json(args.out, out)}")
        return out

    if args.skip_pubmedqa:
        return write("facet attention over frozen-base sentence states (w_f = (1-a) uniform + a labels_f), "
                     "CSFCube fold1_dev only")

    # ---- PubMedQA train half -----------------------------------------------------------------
    full, train_half = load_pubmedqa(args.pubmedqa), load_pubmedqa(args.pubmedqa, split="train")
    pm_docs = [{"title": d["title"], "sentences": d["sentences"], "labels": d.get("labels")} for d in full.documents]
    gold_row = {d["id"]: i for i, d in enumerate(full.documents)}
    qs = [q["text"] for q in train_half.questions]
    gold = np.array([gold_row[next(iter(train_half.qrels[q["qid"]]))] for q in train_half.questions])
    print(f"PubMedQA train half: {len(qs)} questions against {len(pm_docs)} abstracts", flush=True)
    Sd, labd, d_tok = states(pm_docs)
    Sq, _, q_tok = states([{"title": "", "sentences": [q]} for q in qs])
    q_sent = F.normalize(torch.stack([s.mean(0) for s in Sq]), dim=-1)

    def mrr10(scores: torch.Tensor) -> float:
        s = scores.numpy()
        rank = (s > s[np.arange(len(gold)), gold][:, None]).sum(1) + 1
        return round(float(np.where(rank <= 10, 1.0 / rank, 0.0).mean()) * 100, 2)

    pubmedqa: dict[str, float] = {}
    # question = the mean of its sentence states (the sentence branch, chapter 4's default) or of all
    # its tokens (the untrained token branch = mean pooling); each is one vector for every facet
    for qname, q_emb in (("question: sentence mean", q_sent), ("question: all-token mean", q_tok)):
        for a in MIX:
            d = facet_embeddings(Sd, labd, a)
            key = f"{qname}, documents a={a}"
            pubmedqa[key] = mrr10(q_emb @ d.mean(1).T)  # mean of the diagonal
            print(f"  {key}: MRR@10 {pubmedqa[key]}", flush=True)
        pubmedqa[f"{qname}, documents: all-token mean"] = mrr10(q_emb @ d_tok.T)
    qm = F.normalize(mean_enc.encode(qs).float(), dim=-1)
    dm = F.normalize(mean_enc.encode([document_text(d, mean_enc.sep_token) for d in pm_docs]).float(), dim=-1)
    pubmedqa["mean pooling (all tokens)"] = mrr10(qm @ dm.T)
    print("  mean pooling:", pubmedqa["mean pooling (all tokens)"], flush=True)

    return write("oracle facet attention over frozen-base sentence states (w_f = (1-a) uniform + a gold_f), "
                 "dev data only", **{"pubmedqa_train_half_mrr@10": pubmedqa, "n_pubmedqa_questions": len(qs)})


# Sources whose sentence labels are human (CSAbstruct's annotators, NICTA-PIBOSO's, PubMed's
# structured-abstract headings); the S2 papers of the FTU folder carry the labeller's labels.
HUMAN_LABELLED_SOURCES = ("csabstruct", "nicta", "pubmedqa")


def probe_rows(args, states, docs_dev, S_dev, labs_dev, facet_embeddings, dev_map, csfcube: dict) -> dict:
    """The attention a perfect fit of ``L_KL`` on *human* labels could give, as far as a linear
    read-out of the frozen sentence states can express it (the aggregation module's attention logit
    is linear in a sentence state for fixed facet queries).

    A multinomial logistic regression is fitted on the frozen sentence states of the FTU folder's
    human-labelled documents (C chosen by macro-F1 on a held-out fifth of those documents), then
    applied to the fold1_dev units: its agreement with CSFCube's labels, and fold1_dev MAP when each
    facet attends by the probe's hard labels (``a`` mix as above) or by its probabilities
    (``w_f`` proportional to ``p(f | s)``, mixed the same way)."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    from unifar.datasets.ftu_files import load_ftus

    sources = tuple(args.probe_sources or HUMAN_LABELLED_SOURCES)
    rng = np.random.default_rng(0)
    docs = [dict(d) for d in load_ftus(args.probe).documents.values() if d.get("source") in sources]
    docs = [docs[i] for i in sorted(rng.permutation(len(docs))[: args.probe_docs])]
    S, labs, _ = states(docs)
    held = np.zeros(len(docs), bool)
    held[rng.permutation(len(docs))[: len(docs) // 5]] = True

    def xy(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = torch.cat([s for s, m in zip(S, mask) if m]).numpy()
        y = np.concatenate([l for l, m in zip(labs, mask) if m])
        return X[y >= 0], y[y >= 0]

    Xtr, ytr = xy(~held)
    Xho, yho = xy(held)
    scores = {}
    for C in (0.01, 0.1, 1.0, 10.0):
        clf = LogisticRegression(C=C, max_iter=2000, tol=1e-6).fit(Xtr, ytr)
        scores[C] = round(float(f1_score(yho, clf.predict(Xho), average="macro")), 4)
        print(f"  probe C={C}: held-out macro-F1 {scores[C]}", flush=True)
    C = max(scores, key=scores.get)
    clf = LogisticRegression(C=C, max_iter=2000, tol=1e-6).fit(*xy(np.ones(len(docs), bool)))
    proba = [clf.predict_proba(s.numpy()) for s in S_dev]
    for d, p in zip(docs_dev, proba):
        if (d.get("title") or "").strip():
            p[0] = 0.0  # the title is unit 0 and carries no facet (as in the gold rows)
    hard = [np.where(p.sum(1) > 0, p.argmax(1), -1) for p in proba]
    gold = np.concatenate(labs_dev)
    pred = np.concatenate(hard)
    both = gold >= 0
    agreement = round(float((pred[both] == gold[both]).mean()) * 100, 2)
    print(f"  probe (C={C}) agrees with CSFCube's labels on {agreement}% of {int(both.sum())} sentences", flush=True)
    for a in MIX[1:]:
        csfcube[f"probe hard a={a} both sides"] = dev_map(*(2 * (facet_embeddings(S_dev, hard, a),)))
        soft = weighted_facet_embeddings(S_dev, proba, a)
        csfcube[f"probe soft a={a} both sides"] = dev_map(soft, soft)
        print(f"  probe a={a}: hard {csfcube[f'probe hard a={a} both sides']['all']}, "
              f"soft {csfcube[f'probe soft a={a} both sides']['all']}", flush=True)
    return {"ftus": args.probe, "sources": list(sources), "n_docs": len(docs),
            "n_train_units": int(len(ytr)), "n_held_out_units": int(len(yho)),
            "held_out_macro_f1_by_C": {str(k): v for k, v in scores.items()}, "C": C,
            "agreement_with_csfcube_labels": agreement, "n_labelled_units": int(both.sum())}


def weighted_facet_embeddings(S: list, weights: list, a: float):
    """[N, F, h]: ``w_f = (1 - a) uniform + a g_f`` over each document's units, ``g_f`` the
    document's non-negative unit weights for facet ``f`` ([n, F]: one-hot labels, or a probe's
    ``p(f | s)``) normalised to sum 1, uniform where a facet has no weight at all."""
    import torch
    import torch.nn.functional as F

    out = torch.zeros(len(S), weights[0].shape[1], S[0].shape[-1])
    for i, (s, w) in enumerate(zip(S, weights)):
        n = s.shape[0]
        u = torch.full((n,), 1.0 / n)
        g = torch.from_numpy(np.asarray(w, dtype=np.float32)).T  # [F, n]
        total = g.sum(1, keepdim=True)
        g = torch.where(total > 0, g / total.clamp_min(1e-30), u)
        out[i] = ((1 - a) * u + a * g) @ s
    return F.normalize(out, dim=-1)


if __name__ == "__main__":
    main()
