"""Sanity check of the multi-objective library (issue 23): each objective alone for a few steps.

MiniLM (``resolve_base_model("minilm")``), mean pooling, only the top base layer trains, on the
cached states of the five frozen layers below (chapter 4's CPU profile); MNRL, batch 16. For each
objective (PubMedQA and SciRepEval search train halves, SciRepEval citation triplets, chapter 3's
FTU doc-doc pairs, ICrop over the FTU documents) prints the data counts and the loss curve, and
writes them to ``--out`` as JSON. Not an experiment: no evaluation, a few dozen steps.

    nice -n 10 .venv/bin/python benchmarks/studies/multi_objective_sanity.py --steps 30
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from unifar.bi_encoder import BiEncoder, BiEncoderConfig
from unifar.files import REPO, write_json
from unifar.multi_objective.icrop import icrop_objective
from unifar.multi_objective.objectives import (
    ftu_docdoc_objective,
    pubmedqa_objective,
    scirepeval_search_objective,
    specter_objective,
)
from unifar.multi_objective.schedules import mix
from unifar.multi_objective.training import BiEncoderTrainArgs, train_bi_encoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--ftus", default=str(REPO / "artifacts" / "ftus" / "default"))
    ap.add_argument("--only", nargs="*", help="train only these objectives (names as printed)")
    ap.add_argument("--base", default="minilm", help="base encoder name or folder")
    ap.add_argument("--whole-base", action="store_true",
                    help="train the whole base (the GPU profile) instead of its top layer")
    ap.add_argument(
        "--out", default=str(REPO / "artifacts" / "studies" / "multi_objective_sanity.json")
    )
    a = ap.parse_args()

    sep = "[SEP]"  # MiniLM's separator
    from unifar.datasets.ftu_files import load_ftus

    ftu_docs = list(load_ftus(a.ftus, verify_hashes=False).documents.values())
    objectives = [
        pubmedqa_objective(sep=sep),
        scirepeval_search_objective(sep=sep),
        specter_objective(sep=sep),
        ftu_docdoc_objective(a.ftus, sep=sep),
        icrop_objective(ftu_docs, seed=0),
    ]
    report = {"settings": vars(a), "objectives": {}}
    for obj in objectives:
        print(f"{obj.name:<18} {obj.kind:<20} {obj.stats}")
    for obj in [o for o in objectives if not a.only or o.name in a.only]:
        model = BiEncoder(
            BiEncoderConfig(a.base, "mean", a.max_tokens)
        )  # a fresh base per objective
        t0 = time.perf_counter()
        res = train_bi_encoder(
            model,
            mix([obj], a.steps, batch_size=a.batch_size, lr=a.lr),
            args=BiEncoderTrainArgs(top_layers=None if a.whole_base else 1, show_progress=False),
        )
        losses = res.losses()
        first, last = np.mean(losses[:5]), np.mean(losses[-5:])
        print(
            f"{obj.name:<18} {time.perf_counter() - t0:6.1f} s  "
            f"loss first-5 {first:.3f} -> last-5 {last:.3f}  "
            + " ".join(f"{x:.2f}" for x in losses)
        )
        report["objectives"][obj.name] = {
            "kind": obj.kind,
            "stats": obj.stats,
            "losses": losses,
            "seconds": round(res.seconds, 1),
            "cached_states": res.cached_states,
        }
    write_json(Path(a.out), report)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
