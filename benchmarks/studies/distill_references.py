"""Held-out L_KD of untrained references, the calibration of chapter 4's distillation study.

On the FTUs that ``tune_dev.py`` holds out (15 % of ``artifacts/ftus/full``, seed [0, 777]), the
distillation loss of three untrained students: UniFAR (uniform attention over sentences), its
token branch (uniform over tokens) and the single-vector control (the mean of the unified
input's tokens, the teacher's own dense half), over every candidate and over the first 12.

    python benchmarks/studies/distill_references.py   # about 15 min on 2 cores, cached states
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from unifar import UniFAR, UniFARConfig
from unifar.caching import TokenStateCache
from unifar.config import TrainArgs
from unifar.datasets.ftu_files import load_ftus
from unifar.files import write_json
from unifar.objective import held_out_loss
from unifar.runtime import run_facts

STUDENTS = {
    "untrained UniFAR (uniform over sentences)": {"use_token_attention": False},
    "untrained, token branch (uniform over tokens)": {"use_sentence_attention": False},
    "mean of the unified input's tokens (single-vector control, untrained)":
        {"aggregation": "mean", "use_kl_loss": False},
}


def main(ftu_dir: str = "artifacts/ftus/full", out: str = "results/ch04/distill_references.json") -> dict:
    ds = load_ftus(ftu_dir)
    perm = np.random.default_rng([0, 777]).permutation(len(ds.ftus))  # tune_dev.py's hold-out
    held = [ds.ftus[i] for i in sorted(perm[: int(0.15 * len(ds.ftus))].tolist())]
    base = UniFAR(UniFARConfig(max_tokens=512))
    cache = TokenStateCache.on_disk(base, "artifacts/cache")
    l_kd = {}
    for name, over in STUDENTS.items():
        model = UniFAR(UniFARConfig(max_tokens=512, **over), base_model=base.base, tokenizer=base.tokenizer)
        for cap in (None, 12):
            args = TrainArgs(progress=False, max_teacher_candidates=cap)
            terms = held_out_loss(model, held, ds.documents, args, 0.0, nullcontext(), cache)
            l_kd[f"{name}, candidates {cap or 'all'}"] = round(terms["l_kd"], 4)
            print(f"{name}, candidates {cap or 'all'}: L_KD {terms['l_kd']:.4f}", flush=True)
    cache.save()
    record = {"what": __doc__.splitlines()[0], "command": "python benchmarks/studies/distill_references.py",
              "ftus": ftu_dir, "n_held_out_ftus": len(held), "l_kd": l_kd, "run": run_facts()}
    write_json(Path(out), record)
    return record


if __name__ == "__main__":
    main()
