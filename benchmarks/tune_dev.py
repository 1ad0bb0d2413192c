"""Choose the CPU default profile of chapter 4 on CSFCube fold1_dev and the held-out FTU loss.

Trains UniFAR-MiniLM with a frozen base (the chapter's default) on an FTU folder for each variant
of a small grid and scores it on CSFCube **fold1_dev** only (the tuning split; test is never
looked at here). Every variant shares one cache of base token states, for the FTU documents and
for the CSFCube papers, so the base encoder runs once per input for the whole sweep.

    python benchmarks/tune_fold1_dev.py --ftus artifacts/ftus/default --out results/ch04/tuning_fold1_dev.json

Prints a table and writes JSON (machine, FTU folder, per-variant config, fold1_dev MAP and
NDCG%20 per facet, held-out loss, seconds).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

DEFAULT_GRID = {
    "paper lrs (2e-5 / 5e-5), 2 epochs": {"lr_anchors": 2e-5, "lr_aggregation": 5e-5, "epochs": 2},
    "lrs x4 (8e-5 / 2e-4), 2 epochs": {"lr_anchors": 8e-5, "lr_aggregation": 2e-4, "epochs": 2},
    "lrs x10 (2e-4 / 5e-4), 2 epochs": {"lr_anchors": 2e-4, "lr_aggregation": 5e-4, "epochs": 2},
    "lrs x4, 2 epochs, w/o L_KL": {"lr_anchors": 8e-5, "lr_aggregation": 2e-4, "epochs": 2, "use_kl_loss": False},
    "lrs x4, 2 epochs, w/o L_QD": {"lr_anchors": 8e-5, "lr_aggregation": 2e-4, "epochs": 2, "use_qd_loss": False},
}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/default")
    ap.add_argument("--out", default="results/ch04/tuning_fold1_dev.json")
    ap.add_argument("--work", default="artifacts/tune_fold1_dev", help="scratch folder for the runs")
    ap.add_argument("--grid", default=None, help="JSON {name: overrides} replacing the default grid")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from unifar import UniFAR, UniFARConfig
    from unifar.data.csfcube import FACETS, load_csfcube
    from unifar.data.ftu import load_ftus
    from unifar.evaluate import aggregate_csfcube, csfcube_per_query, rank_pools, unifar_score_fn
    from unifar.model import TokenStateCache
    from unifar.suite import git_commit, machine_info
    from unifar.train import TrainArgs, train

    grid = json.loads(args.grid) if args.grid else DEFAULT_GRID
    ftus = load_ftus(args.ftus)
    cube = load_csfcube("data/csfcube")
    cube_cache, ftu_cache = TokenStateCache(), TokenStateCache()

    def fold1_dev(model) -> dict:
        fn = unifar_score_fn(model, cube, show_progress=False, state_cache=cube_cache)
        dev = aggregate_csfcube(csfcube_per_query(rank_pools(fn, cube), cube), cube, split="dev")
        return {f: {m: round(v, 2) for m, v in dev[f].items()} for f in (*FACETS, "all")}

    base = UniFAR(UniFARConfig(max_tokens=args.max_tokens))
    runs = []
    t0 = time.perf_counter()
    untrained = fold1_dev(base)
    runs.append({"name": "untrained (identity init)", "overrides": {}, "dev_map": {f: v["map"] for f, v in untrained.items()},
                 "dev_ndcg": {f: v["ndcg%20"] for f, v in untrained.items()}, "held_out_loss": None,
                 "seconds": round(time.perf_counter() - t0, 1)})
    print(f"{'untrained':<40} dev MAP {untrained['all']['map']:.2f}", flush=True)
    for name, over in grid.items():
        t0 = time.perf_counter()
        cfg = UniFARConfig(**{"max_tokens": args.max_tokens, **over})
        model = UniFAR(cfg, base_model=base.base, tokenizer=base.tokenizer)
        work = Path(args.work) / name.replace(" ", "_").replace("/", "-")
        shutil.rmtree(work, ignore_errors=True)
        res = train(None, ftus, TrainArgs(output_dir=str(work), freeze_base=True, progress=False, seed=args.seed,
                                           save_every=10**6, eval_fraction=0.05),
                    model=model, state_cache=ftu_cache)
        dev = fold1_dev(res.model)
        held = res.run_info.get("held_out") or {}
        runs.append({"name": name, "overrides": over, "dev_map": {f: v["map"] for f, v in dev.items()},
                     "dev_ndcg": {f: v["ndcg%20"] for f, v in dev.items()},
                     "held_out_loss": round(held.get("loss", float("nan")), 4), "held_out": held,
                     "steps": res.steps, "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{name:<40} dev MAP {dev['all']['map']:.2f}  " + " ".join(f"{f[:2]} {dev[f]['map']:.2f}" for f in FACETS)
              + f"  held-out {held.get('loss', float('nan')):.3f}  {runs[-1]['seconds']:.0f}s", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    out = {"what": "CSFCube fold1_dev MAP/NDCG%20 (percent) of UniFAR-MiniLM, frozen base, per training variant",
           "ftus": args.ftus, "ftu_manifest_command": ftus.manifest.get("command"), "n_ftus": len(ftus),
           "seed": args.seed, "max_tokens": args.max_tokens, "runs": runs, "git": git_commit(),
           "machine": machine_info()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
