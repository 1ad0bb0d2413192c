"""How much is there to learn? The untrained model's loss terms on FTU folders (chapter 4, section 4.6).

A training set whose positives the untrained model already ranks above its negatives gives the
objective little to push on. This script scores a fixed random sample of each FTU folder with
chapter 4's CPU profile *before* training (identity-initialised aggregation on frozen MiniLM,
fixed values, w/o MHA_tok) and reports the mean loss terms, computed exactly as training's
held-out loss (``unifar.objective.held_out_loss``: eval mode, batches of ``config.batch_size``,
in-batch negatives). Compare folders mined with different signals:

    python benchmarks/studies/initial_loss.py --ftus default=artifacts/ftus/full \\
        facet-bm25=artifacts/ftus/facet_bm25 --out results/ch04/initial_loss.json

Prints a table and writes JSON (with each folder's manifest command, the git commit and the machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", nargs="+", required=True, metavar="NAME=PATH", help="FTU folders to score")
    ap.add_argument("--n", type=int, default=256, help="FTUs sampled per folder (same seed for each)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/ch04/initial_loss.json")
    args = ap.parse_args(argv)

    import pandas as pd
    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.config import TrainArgs
    from unifar.datasets.ftu_files import load_ftus
    from unifar.files import write_json
    from unifar.objective import held_out_loss
    from unifar.runtime import run_facts

    folders = {}
    for item in args.ftus:
        name, sep, path = item.rpartition("=")  # a name may hold "=", a path rarely does
        if not sep or not name or not path:
            ap.error(f"--ftus takes NAME=PATH, got {item!r}")
        if not Path(path).is_dir():
            ap.error(f"--ftus {name}: {path} is not a folder (chapter 3 writes FTU folders)")
        folders[name] = path

    torch.manual_seed(args.seed)
    config = UniFARConfig(max_tokens=args.max_tokens, train_values=False, use_token_attention=False)
    model = UniFAR(config, device="cpu")
    rows, out = {}, {}
    for name, path in folders.items():
        t0 = time.perf_counter()
        ds = load_ftus(path)
        rng = np.random.default_rng(args.seed)
        idx = np.sort(rng.choice(len(ds.ftus), size=min(args.n, len(ds.ftus)), replace=False))
        terms = held_out_loss(model, [ds.ftus[i] for i in idx], ds.documents, TrainArgs(seed=args.seed),
                               progress=0.0, autocast=contextlib.nullcontext())
        manifest = json.loads((Path(path) / "manifest.json").read_text())
        rows[name] = {k: round(v, 3) for k, v in terms.items()}
        out[name] = {"path": path, "n_ftus": len(ds.ftus), "n_scored": len(idx), "terms": rows[name],
                     "built_by": manifest.get("command"),
                     "mining": (manifest.get("provenance") or {}).get("signals") or (manifest.get("provenance") or {}).get("opts"), "seconds": round(time.perf_counter() - t0, 1)}
        print(f"{name}: {rows[name]} ({out[name]['seconds']} s)", flush=True)

    print("\nuntrained model's loss terms (measured here; lower = less left to learn):")
    print(pd.DataFrame(rows).T.to_string())
    result = {"what": "loss terms of chapter 4's CPU profile before training on a fixed sample of each FTU folder, "
                      "computed as training's held-out loss (measured here)",
              "config": config.to_dict(), "n": args.n, "seed": args.seed, "folders": out,
              "run": run_facts()}
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
