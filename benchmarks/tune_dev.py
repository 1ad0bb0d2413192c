"""Choose chapter 4's CPU training profile on dev data only: CSFCube fold1_dev and held-out FTUs.

Trains UniFAR-MiniLM with a frozen base for each variant of a small grid on 85 % of an FTU
folder (a seeded split; the other 15 % are held out) and measures, per variant:

* CSFCube **fold1_dev** MAP per facet and aggregated (the paper's tuning split; test is never
  looked at here);
* held-out q-doc retrieval: each *real* question of the held-out FTUs (PubMedQA / SciRepEval
  search, origin != icrop) against all documents of the folder, its gold being the document it
  was asked of (MRR@10, R@1); the same for up to 300 held-out cropped questions;
* the held-out loss terms.

Every variant shares one cache of base token states (the base is frozen), so the base encoder
runs once per input for the whole sweep.

    python benchmarks/tune_dev.py --ftus artifacts/ftus/default --out results/ch04/tuning_dev.json

Prints one line per variant and writes JSON (grid, split, per-variant metrics, seconds, git
commit, machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

DEFAULT_GRID = {
    "default (paper lrs, all aggregation parameters)": {},
    "fixed values (V, out_proj kept at init)": {"config": {"train_values": False}},
    "fixed values, lrs x10": {"config": {"train_values": False, "lr_anchors": 2e-4, "lr_aggregation": 5e-4}},
    "w/o L_QD": {"config": {"use_qd_loss": False}},
    "real questions only (no crops)": {"real_only": True},
}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/default")
    ap.add_argument("--out", default="results/ch04/tuning_dev.json")
    ap.add_argument("--work", default="artifacts/tune_dev", help="scratch folder for the runs")
    ap.add_argument("--grid", default=None, help="JSON {name: {config: {...}, real_only: bool, epochs: int}}")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--held-out", type=float, default=0.15, help="fraction of FTUs held out (default 0.15)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.data.csfcube import FACETS, load_csfcube
    from unifar.data.ftu import FTUDataset, load_ftus
    from unifar.evaluate import aggregate_csfcube, csfcube_per_query, rank_pools, unifar_score_fn
    from unifar.model import TokenStateCache
    from unifar.retrievers import UniFARRetriever
    from unifar.files import write_json
    from unifar.suite import git_commit, machine_info
    from unifar.train import TrainArgs, train

    torch.manual_seed(args.seed)
    grid = json.loads(args.grid) if args.grid else DEFAULT_GRID
    ds = load_ftus(args.ftus)
    perm = np.random.default_rng([args.seed, 777]).permutation(len(ds.ftus))
    held = set(perm[: int(args.held_out * len(ds.ftus))].tolist())
    tr = FTUDataset([u for i, u in enumerate(ds.ftus) if i not in held], ds.documents, ds.manifest)
    ev = FTUDataset([u for i, u in enumerate(ds.ftus) if i in held], ds.documents, ds.manifest)
    asked = [q for u in ev.ftus for q in u.questions.values() if q is not None]
    real_q = [(q.text, q.doc_id) for q in asked if q.origin != "icrop"]
    crop_q = [(q.text, q.doc_id) for q in asked if q.origin == "icrop"][:300]
    doc_ids = sorted(ds.documents)
    docs = [ds.documents[i] for i in doc_ids]
    row_of = {d: i for i, d in enumerate(doc_ids)}
    print(f"{len(tr)} training / {len(ev)} held-out FTUs; {len(real_q)} real and {len(crop_q)} cropped held-out "
          f"questions against {len(docs)} documents", flush=True)
    cube = load_csfcube("data/csfcube")
    cube_cache, ftu_cache, qd_cache = TokenStateCache(), TokenStateCache(), TokenStateCache()

    def qdoc(model, qs) -> dict:
        r = UniFARRetriever(model, state_cache=qd_cache)
        scores = r.score([q for q, _ in qs], r.index(docs))
        gold = np.array([row_of[d] for _, d in qs])
        rank = (scores > scores[np.arange(len(qs)), gold][:, None]).sum(1) + 1
        return {"mrr@10": round(float(np.where(rank <= 10, 1 / rank, 0).mean()) * 100, 2),
                "r@1": round(float((rank == 1).mean()) * 100, 2)}

    def evaluate(model) -> dict:
        fn = unifar_score_fn(model, cube, show_progress=False, state_cache=cube_cache)
        dev = aggregate_csfcube(csfcube_per_query(rank_pools(fn, cube), cube), cube, split="dev")
        return {"fold1_dev_map": {f: round(dev[f]["map"], 2) for f in (*FACETS, "all")},
                "heldout_real_questions": qdoc(model, real_q), "heldout_crop_questions": qdoc(model, crop_q)}

    def only_real(d):
        keep = [dataclasses.replace(u, questions={f: q for f, q in u.questions.items() if q is not None and q.origin != "icrop"})
                for u in d.ftus]
        return FTUDataset(keep, d.documents, d.manifest)

    base = UniFAR(UniFARConfig(max_tokens=args.max_tokens))
    runs = {}
    t0 = time.perf_counter()
    runs["untrained (identity init)"] = {**evaluate(base), "seconds": round(time.perf_counter() - t0, 1)}
    print("untrained", runs["untrained (identity init)"], flush=True)
    for name, spec in grid.items():
        t0 = time.perf_counter()
        cfg = UniFARConfig(**{"max_tokens": args.max_tokens, **spec.get("config", {})})
        model = UniFAR(cfg, base_model=base.base, tokenizer=base.tokenizer)
        work = Path(args.work) / name.replace(" ", "_").replace("/", "-")
        res = train(None, only_real(tr) if spec.get("real_only") else tr,
                    TrainArgs(output_dir=str(work), freeze_base=True, progress=False, seed=args.seed, save_every=10**6,
                              epochs=spec.get("epochs")),
                    model=model, state_cache=ftu_cache, eval_dataset=ev)
        held_out = {k: round(v, 3) for k, v in (res.run_info.get("held_out") or {}).items() if isinstance(v, float)}
        runs[name] = {"spec": spec, **evaluate(res.model), "held_out_loss": held_out, "steps": res.steps,
                      "seconds": round(time.perf_counter() - t0, 1)}
        print(name, runs[name], flush=True)
    out = {"what": "dev-only tuning of chapter 4's CPU profile (UniFAR-MiniLM, frozen base): CSFCube fold1_dev MAP "
                   "and held-out FTU question -> source-document retrieval (percent)",
           "ftus": args.ftus, "n_ftus": len(ds), "n_train_ftus": len(tr), "n_held_out_ftus": len(ev),
           "n_real_questions": len(real_q), "n_crop_questions": len(crop_q), "n_documents": len(docs),
           "seed": args.seed, "max_tokens": args.max_tokens, "runs": runs, "git": git_commit(), "machine": machine_info()}
    print(f"wrote {write_json(args.out, out)}")
    return out


if __name__ == "__main__":
    main()
