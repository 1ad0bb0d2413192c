"""Train some of table 3's rows (unifar.ablation.ROWS) for a few steps and print their speed.

A check of chapter 6's training path on any device (the chapter runs it on the CPU): every row
trains on one frozen base whose states are cached once, the top-layer row on the states below
its top layer. Prints one line per (row, seed) and writes a JSON of steps, FTUs per second and
held-out losses before and after.

    python benchmarks/studies/ablation_rows.py --device cuda --steps 30 \
        --rows full "w/o L_KL" "full, top layer trained" --out results/gpu/ablation_rows.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from unifar import UniFARConfig
from unifar.ablation import ROWS, train_rows
from unifar.datasets.ftu_files import load_ftus
from unifar.files import write_json
from unifar.runtime import run_facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ftus", default="artifacts/ftus/default")
    ap.add_argument("--base", default="minilm", help="base encoder name or folder")
    ap.add_argument("--rows", nargs="+", default=list(ROWS), help="rows of unifar.ablation.ROWS")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="result JSON")
    a = ap.parse_args()

    t_start = time.perf_counter()
    ftus = load_ftus(a.ftus)
    base = UniFARConfig(base_model=a.base, max_tokens=a.max_tokens, epochs=1)
    args = {"max_steps": a.steps, "eval_fraction": 0.05, "eval_every": 0, "save_every": 10_000}
    with tempfile.TemporaryDirectory() as tmp:
        runs = train_rows(ftus, base, a.rows, a.seeds, Path(tmp), args, device=a.device)
    rows = []
    for (row, seed), run in runs.items():
        rate = run.ftus_seen / run.seconds if run.seconds else float("nan")
        rows.append({"row": row, "seed": seed, "steps": run.steps, "seconds": run.seconds,
                     "ftus_per_second": round(rate, 1), "held_out_before": run.first_held_out,
                     "held_out_after": run.held_out})
        print(f"{row:<26} seed {seed}: {run.steps} steps in {run.seconds:6.1f} s, "
              f"{rate:6.1f} FTUs/s; held-out L_total "
              f"{(run.first_held_out or {}).get('loss', float('nan')):.4f} -> "
              f"{(run.held_out or {}).get('loss', float('nan')):.4f}")
    if a.out:
        write_json(Path(a.out), {"settings": vars(a), "runs": rows,
                                 "run": run_facts(t_start, a.device)})
        print("wrote", a.out)


if __name__ == "__main__":
    main()
