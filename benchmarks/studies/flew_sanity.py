"""FLeW sanity check on this CPU: facet triplets from chapter 3's FTUs (the offline substitute for
FLeW's citation-graph triplets), then the top layer of MiniLM trained per facet for a few dozen
steps on cached lower states, with FLeW's triplet margin loss. Prints the triplet count per
facet and each facet's loss curve (means over windows of steps). Not an evaluation.

    nice -n 10 .venv/bin/python benchmarks/studies/flew_sanity.py [--steps 30] [--lr 2e-5]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from unifar.bi_encoder import BiEncoder, BiEncoderConfig
from unifar.caching import TokenStateCache
from unifar.datasets.ftu_files import load_ftus
from unifar.flew.sampling import triplets_from_ftus
from unifar.flew.splitting import facet_text
from unifar.flew.training import FLEW_BATCH_SIZE, FLEW_LR, train_facet_encoders

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default=str(ROOT / "artifacts" / "ftus" / "default"))
    ap.add_argument("--base", default="minilm")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=FLEW_BATCH_SIZE)
    ap.add_argument("--lr", type=float, default=FLEW_LR)
    ap.add_argument("--top-layers", type=int, default=1, help="0: train the whole base (GPU)")
    ap.add_argument("--pooling", default="cls", choices=("cls", "mean"))
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--window", type=int, default=5)
    a = ap.parse_args()

    data = load_ftus(a.ftus)
    triplets = triplets_from_ftus(data.ftus, data.documents)
    docs = {d for t in triplets.values() for row in t for d in row}
    full = {
        f: sum(
            facet_text(data.documents[d], f) == " ".join(data.documents[d]["sentences"])
            for d in {d for row in triplets[f] for d in row}
        )
        for f in triplets
    }
    print(
        json.dumps(
            {
                "ftus": len(data.ftus),
                "documents_in_triplets": len(docs),
                "triplets": {f: len(t) for f, t in triplets.items()},
                "documents_whose_facet_text_is_the_full_abstract": full,
            },
            indent=2,
        ),
        flush=True,
    )
    base = BiEncoder(BiEncoderConfig(a.base, pooling=a.pooling, max_tokens=a.max_tokens))
    top = a.top_layers or None  # 0 -> None: the whole base trains, no cached states
    cache = TokenStateCache(top_layers=a.top_layers) if top else None  # frozen layers agree
    for f, trips in triplets.items():  # one facet at a time, printed as it finishes
        t0 = time.perf_counter()
        out = train_facet_encoders(
            {f: trips},
            data.documents,
            base,
            steps=a.steps,
            top_layers=top,
            batch_size=a.batch_size,
            lr=a.lr,
            state_cache=cache,
            show_progress=False,
        )
        losses = out.losses()[f]
        w = (
            np.asarray(losses[: len(losses) // a.window * a.window])
            .reshape(-1, a.window)
            .mean(axis=1)
        )
        print(
            f"FLeW-{f}: {a.steps} steps (batch {a.batch_size}, lr {a.lr}, "
            f"top {a.top_layers} layer(s), {a.pooling}, max {a.max_tokens} tokens) "
            f"in {time.perf_counter() - t0:.0f} s; "
            f"mean loss per {a.window} steps {np.round(w, 4).tolist()}; "
            f"first {losses[0]:.4f}, last {losses[-1]:.4f}; "
            f"{len(cache) if cache is not None else 0} cached inputs",
            flush=True,
        )


if __name__ == "__main__":
    main()
