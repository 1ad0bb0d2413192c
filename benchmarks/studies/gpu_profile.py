"""Chapter 4's ``gpu`` profile: the whole base encoder trains, with chapter 4's distillation of the
hybrid teacher, until the fold1_dev curve flattens or the time budget ends; then the test
benchmarks. One script for one lent H100/H200 within one 10-minute device call
(``benchmarks/offline_gpu/README.md`` says how the model and the FTUs travel there); it writes
``OUT/train.json`` (chapter results format: config, results, device, duration, commit), which
belongs in ``results/ch04/gpu/``, where chapter 4 shows it beside its CPU profiles.

    python benchmarks/studies/gpu_profile.py --ftus artifacts/ftus/full --out results/ch04/gpu \\
        --budget 420 --commit "$(git rev-parse HEAD)"
    # a CPU rehearsal of every code path (tiny budget, a few FTUs, short inputs):
    python benchmarks/studies/gpu_profile.py --device cpu --budget 20 --max-ftus 64 --max-tokens 64 \\
        --benchmarks scirepeval --out /tmp/gpu_rehearsal

The base trains at ``--lr-base`` (default 1e-5, half the paper's 2e-5 for the base, and a tenth
of the aggregation module's 5e-5: a lower rate for the base than for the UniFAR heads). Prints
one line per stage and the trained model's scores beside mean pooling and the untrained model.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--base-model", default="minilm", help="minilm, a hub id or a local encoder folder")
    ap.add_argument("--out", default="results/ch04/gpu")
    ap.add_argument("--work", default="artifacts/ch04/gpu", help="the run folder (model, log, dev curve)")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds of training before the run stops")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--dev-every", type=int, default=50)
    ap.add_argument("--lr-base", type=float, default=1e-5)
    ap.add_argument("--distill-weight", type=float, default=10.0)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--max-ftus", type=int, default=None, help="train on the first N FTUs (a rehearsal)")
    ap.add_argument("--benchmarks", nargs="+", default=["csfcube", "scirepeval", "pubmedqa", "cranfield"])
    ap.add_argument("--device", default=None)
    ap.add_argument("--commit", default=None, help="the commit the code is at (the GPU machine has no git)")
    args = ap.parse_args(argv)

    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.config import TrainArgs
    from unifar.datasets.csfcube import load_csfcube
    from unifar.datasets.ftu_files import FTUDataset, load_ftus
    from unifar.evaluation.report import strip_timings, verdict_table
    from unifar.evaluation.runner import evaluate_all
    from unifar.files import write_json
    from unifar.learning_curve import standard_dev_curve
    from unifar.runtime import pick_device, run_facts
    from unifar.train import train

    t_start = time.perf_counter()
    device = pick_device(args.device)
    ftus = load_ftus(args.ftus)
    if args.max_ftus:
        ftus = FTUDataset(ftus.ftus[: args.max_ftus], ftus.documents, ftus.manifest)
    config = UniFARConfig(base_model=args.base_model, max_tokens=args.max_tokens, train_values=True,
                          use_token_attention=False, distill_weight=args.distill_weight, lr_base=args.lr_base,
                          epochs=args.epochs)
    targs = TrainArgs(output_dir=args.work, freeze_base=False, eval_fraction=0.05, eval_every=args.dev_every,
                      save_every=10**6, device=str(device), progress=False, keep_checkpoints_when_done=False)
    model = UniFAR(config, device=device)
    curve = standard_dev_curve(model, ftus, targs, load_csfcube(), None, every=args.dev_every)
    curve.begin()
    print(f"[gpu] {len(ftus)} FTUs, device {device}, untrained fold1_dev {curve.points[0]['fold1_dev_map']:.2f}",
          flush=True)
    t_train = time.perf_counter()

    def budget(record: dict) -> str | None:
        return f"time budget of {args.budget:.0f} s reached" if time.perf_counter() - t_train > args.budget else None

    res = train(None, ftus, targs, model=model, callbacks=[curve, budget])
    print(f"[gpu] trained {res.steps} steps in {time.perf_counter() - t_train:.0f} s; "
          f"stopped: {res.run_info.get('stopped_early')}", flush=True)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    result = strip_timings(evaluate_all(str(res.final_dir), systems=["mean", "unifar", "unifar-untrained"],
                                        benchmarks=args.benchmarks, device=str(device), show_progress=False, log=None))
    verdicts = verdict_table(result, "unifar-trained", ["mean", "unifar-untrained"])
    for b, entry in result["benchmarks"].items():
        line = ", ".join(f"{s} {r['metrics'][next(iter(r['metrics']))]:.2f}" for s, r in entry["systems"].items())
        print(f"[gpu] {b}: {line}", flush=True)
    out = {"format": "unifar-chapter-results/1", "chapter": "ch04", "notebook": "benchmarks/studies/gpu_profile.py",
           "profile": "gpu", "name": "train",
           "config": {"model": config.to_dict(), "train_args": targs.to_dict(), "ftus": args.ftus,
                      "n_ftus": len(ftus), "budget_s": args.budget, "benchmarks": args.benchmarks},
           "results": {"steps": res.steps, "run_info": {k: res.run_info.get(k) for k in
                                                         ("stopped_early", "held_out", "ftus_per_second", "peak_memory",
                                                          "bf16", "n_train_ftus", "total_steps")},
                       "dev_curve": curve.points, "evaluation": result,
                       "verdicts": verdicts.to_dict(orient="records")},
           "run": {**run_facts(t_start, device, commit=args.commit),
                   "command": "python benchmarks/studies/gpu_profile.py " + " ".join(argv or [])}}
    path = write_json(Path(args.out) / "train.json", out)
    print(f"[gpu] wrote {path}", flush=True)
    return out


if __name__ == "__main__":
    main()
