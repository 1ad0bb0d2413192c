"""Did training move the facet attention? Statistics of trained checkpoints on CSFCube fold1_dev (dev only).

For every model (the untrained, identity-initialised one first) over the fold1_dev query and
candidate papers, with CSFCube's own sentence labels:

* ``norm_entropy``: entropy of each facet's attention over the title and sentences divided by
  ``log(n)``, averaged (1.0 = uniform, the untrained model);
* ``mass_on_gold``: attention mass a facet puts on the sentences labelled with it, averaged over
  (paper, facet) pairs that have such sentences, beside ``uniform_mass_on_gold`` (what uniform
  attention puts there) and ``title_mass``;
* ``cos_to_untrained``: mean cosine between a facet embedding and the untrained model's;
* ``fold1_dev_map``: aggregated and per-facet MAP.

    python benchmarks/studies/attention_stats.py artifacts/ch04/full/seed0/final --out results/ch04/attention_stats.json
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="UniFAR checkpoint folders (saved with save_pretrained)")
    ap.add_argument("--names", nargs="*", default=None, help="a display name per checkpoint (default: the paths)")
    ap.add_argument("--csfcube", default="data/csfcube")
    ap.add_argument("--out", default="results/ch04/attention_stats.json")
    args = ap.parse_args(argv)
    if args.names and len(args.names) != len(args.models):
        raise SystemExit(f"--names gives {len(args.names)} names for {len(args.models)} models")

    import numpy as np
    import torch.nn.functional as F

    from unifar import UniFAR
    from unifar.datasets.csfcube import load_csfcube
    from unifar.facets import FACETS
    from unifar.evaluation.csfcube import csfcube_split_papers
    from unifar.files import write_json
    from unifar.caching import TokenStateCache
    from unifar.runtime import run_facts
    from unifar.objective import unit_labels

    t0 = time.perf_counter()
    cube = load_csfcube(args.csfcube)
    docs, dev_map = csfcube_split_papers(cube, "fold1_dev")

    cache = TokenStateCache()  # every model here shares the frozen MiniLM: encode each paper once
    models = {}
    for i, path in enumerate(args.models):
        m = UniFAR.from_pretrained(path, device="cpu").eval()
        if not models:  # the untrained reference: the first checkpoint's config, fresh weights
            models["untrained"] = UniFAR(m.config, base_model=m.base, tokenizer=m.tokenizer, device="cpu").eval()
        models[args.names[i] if args.names else path] = m
    fidx = {f: i for i, f in enumerate(FACETS)}
    ref = next(iter(models.values()))
    labels = [np.array(unit_labels(d, it, fidx)) for d, it in zip(docs, ref.tokenize_documents(docs))]
    encs = {name: m.encode_documents(docs, state_cache=cache, show_progress=False) for name, m in models.items()}
    U = encs["untrained"].embeddings
    out: dict[str, dict] = {}
    for name, enc in encs.items():
        ent, gold, frac, title = [], [], [], []
        for A, lab, branch in zip(enc.attention, labels, enc.branch):
            if branch != "sentence":
                continue
            A = A[:, : len(lab)].double().numpy()
            A = A / A.sum(1, keepdims=True)
            ent.append(float((-(A * np.log(A + 1e-12)).sum(1)).mean() / np.log(len(lab))))
            title.append(float(A[:, 0].mean()))
            for f in range(len(FACETS)):
                g = lab == f
                if g.any():
                    gold.append(float(A[f, g].sum()))
                    frac.append(float(g.mean()))
        out[name] = {"norm_entropy": round(float(np.mean(ent)), 4), "mass_on_gold": round(float(np.mean(gold)), 4),
                     "uniform_mass_on_gold": round(float(np.mean(frac)), 4), "title_mass": round(float(np.mean(title)), 4),
                     "cos_to_untrained": round(float(F.cosine_similarity(enc.embeddings, U, dim=-1).mean()), 4),
                     "fold1_dev_map": dev_map(enc.embeddings)}
        print(f"{name:<50} entropy {out[name]['norm_entropy']:.4f}  gold mass {out[name]['mass_on_gold']:.4f} "
              f"(uniform {out[name]['uniform_mass_on_gold']:.4f})  cos {out[name]['cos_to_untrained']:.4f}  "
              f"dev MAP {out[name]['fold1_dev_map']['all']}", flush=True)
    res = {"what": "facet attention statistics on CSFCube fold1_dev papers (dev only); measured here",
           "n_papers": len(docs), "models": out, "checkpoints": args.models,
           "seconds": round(time.perf_counter() - t0, 1), "run": run_facts(t0)}
    print(f"wrote {write_json(args.out, res)}")
    return res


if __name__ == "__main__":
    main()
