"""Can the aggregation module fit L_KL on its own? (training documents only; no dev or test data)

Chapter 4's frozen run leaves L_KL flat (0.143 at the first and the last hundred steps) and the
attention uniform. This script asks whether that is a limit of the module or of the joint
objective: it trains the aggregation module of a frozen-base UniFAR-MiniLM (chapter 4's CPU
configuration) on **L_KL alone**, with AdamW, over labelled documents of an FTU folder, and reports
the L_KL of held-out documents of the same folder before and after, for a few learning rates and
both key initialisations (``init_key_identity``).

    python benchmarks/studies/kl_fit.py --ftus artifacts/ftus/full --out results/ch04/kl_fit.json
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--n-docs", type=int, default=384, help="labelled documents: the first 320 train, the rest are held out")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lrs", type=float, nargs="+", default=[5e-5, 5e-4, 5e-3])
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--out", default="results/ch04/kl_fit.json")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.ftu_files import load_ftus
    from unifar.files import write_json
    from unifar.losses import kl_attention_loss
    from unifar.objective import unit_labels
    from unifar.runtime import run_facts
    from unifar.text import collate

    t0 = time.perf_counter()
    torch.manual_seed(0)
    ds = load_ftus(args.ftus)
    docs = [d for d in ds.documents.values() if d.get("labels") and any(d["labels"])][: args.n_docs]
    cpu = dict(base_model="minilm", max_tokens=args.max_tokens, train_values=False, use_token_attention=False)
    ref = UniFAR(UniFARConfig(**cpu), device="cpu").eval()
    items = ref.tokenize_documents(docs)
    fidx = {f: i for i, f in enumerate(ref.config.facets)}
    labels = [unit_labels(d, it, fidx) for d, it in zip(docs, items)]
    batches = []  # (batch, frozen token states, labels): the base runs once
    bs = args.batch_size
    for s in range(0, len(items), bs):
        b = collate(items[s : s + bs], ref.tokenizer.pad_token_id or 0)
        with torch.no_grad():
            T = ref.token_states(b)
        L = torch.full((len(b.input_ids), b.max_sentences), -1)
        for j, lab in enumerate(labels[s : s + bs]):
            L[j, : len(lab)] = torch.tensor(lab[: b.max_sentences])
        batches.append((b, T, L))
    n_train = max(1, int(len(batches) * 5 / 6))
    train_b, held_b = batches[:n_train], batches[n_train:]

    def held_kl(m: UniFAR) -> float:
        with torch.no_grad():
            vals = []
            for b, T, L in held_b:
                out = m.aggregate(T, b, need_kl_attention=True)
                loss, ok = kl_attention_loss(out.kl_attention, L, out.sentence_mask)
                vals.append(loss[ok].mean().item())
        return round(float(np.mean(vals)), 4)

    runs = {}
    for key_identity in (False, True):
        for lr in args.lrs:
            m = UniFAR(UniFARConfig(**cpu, init_key_identity=key_identity), base_model=ref.base, tokenizer=ref.tokenizer, device="cpu")
            params = [p for n, p in m.named_parameters() if not n.startswith("base.") and p.requires_grad]
            opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
            start = held_kl(m)
            for step in range(args.steps):
                b, T, L = train_b[step % len(train_b)]
                out = m.aggregate(T, b, need_kl_attention=True)
                loss, ok = kl_attention_loss(out.kl_attention, L, out.sentence_mask)
                opt.zero_grad()
                loss[ok].mean().backward()
                opt.step()
            name = f"{'K = I' if key_identity else 'small K'}, lr {lr:g}"
            runs[name] = {"init_key_identity": key_identity, "lr": lr, "held_out_kl_before": start, "held_out_kl_after": held_kl(m)}
            print(f"{name:<22} held-out L_KL {start:.4f} -> {runs[name]['held_out_kl_after']:.4f}", flush=True)
    res = {"what": "L_KL alone, aggregation module of a frozen-base UniFAR-MiniLM, AdamW; held-out L_KL before/after "
                   "(training documents only); measured here",
           "ftus": args.ftus, "n_docs": len(docs), "n_train_batches": len(train_b), "n_held_out_batches": len(held_b),
           "steps": args.steps, "batch_size": bs, "max_tokens": args.max_tokens, "runs": runs,
           "seconds": round(time.perf_counter() - t0, 1), "run": run_facts(t0)}
    print(f"wrote {write_json(args.out, res)}")
    return res


if __name__ == "__main__":
    main()
