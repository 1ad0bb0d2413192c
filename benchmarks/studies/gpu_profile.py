"""Chapter 4's ``gpu`` profile: the whole base encoder trains, with chapter 4's distillation of the
hybrid teacher, until the fold1_dev curve flattens or the run's share of the time budget ends,
for several runs (seeds of UniFAR, and the single-vector control trained on the same FTUs and
teacher); then one evaluation of every trained run beside mean pooling, the untrained model and
the hybrid teacher, with each benchmark's minimum detectable effect stated first (issue 31,
items 2-4). One script for one lent H100/H200 within one 10-minute device call
(``benchmarks/offline_gpu/paper_grid.sh`` runs it there; the README beside it says how the model
and the FTUs travel). It writes ``OUT/train.json`` (chapter results format: config, dev curves,
results, device, duration, commit), which belongs in ``results/ch04/gpu/``, where chapter 4 shows
it beside its CPU profiles.

    python benchmarks/studies/gpu_profile.py --ftus artifacts/ftus/full --out results/ch04/gpu \\
        --budget 420 --commit "$(git rev-parse HEAD)"
    # a CPU rehearsal of every code path (tiny budget, a few FTUs, short inputs):
    python benchmarks/studies/gpu_profile.py --device cpu --budget 20 --max-ftus 64 --max-tokens 64 \\
        --benchmarks scirepeval --out /tmp/gpu_rehearsal

``--runs`` lists the runs in the order they are trained, ``KIND:SEED`` with KIND ``unifar`` (the
facet model) or ``control`` (``aggregation="mean"``: one vector for every facet, no L_KL); the
default trains seed 0 of both first, so that a short budget still gives the comparison that
separates facet-awareness from the data, then seeds 1 and 2. Each run gets the budget left
divided by the runs left (a run that flattens early leaves its time to the next). The base trains
at ``--lr-base`` (default 1e-5, half the paper's 2e-5 for the base, and a tenth of the aggregation
module's 5e-5: a lower rate for the base than for the UniFAR heads).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

RUN_KINDS = {"unifar": {}, "control": {"aggregation": "mean", "use_kl_loss": False}}
CONTROL_NAME = "control-trained"  # chapter 5's name of the single-vector control


def parse_runs(specs: list[str]) -> list[tuple[str, int]]:
    """``["unifar:0", "control:0"]`` -> ``[("unifar", 0), ("control", 0)]``, with a clear error.

    >>> parse_runs(["unifar:0", "control:1"])
    [('unifar', 0), ('control', 1)]
    """
    runs = []
    for spec in specs:
        kind, _, seed = spec.partition(":")
        if kind not in RUN_KINDS or not seed.isdigit():
            raise SystemExit(f"--runs {spec!r}: expected KIND:SEED with KIND one of {sorted(RUN_KINDS)}")
        runs.append((kind, int(seed)))
    if not runs or runs[0][0] != "unifar":
        raise SystemExit("--runs must start with a unifar run (the model every comparison is about)")
    return runs


def system_name(kind: str, seed: int, first_seed: int) -> str:
    """The run's system name in the evaluation: the first UniFAR run is ``unifar-trained``."""
    if kind == "unifar":
        return "unifar-trained" if seed == first_seed else f"unifar-seed{seed}"
    return CONTROL_NAME if seed == first_seed else f"{CONTROL_NAME}-seed{seed}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--base-model", default="minilm", help="minilm, a hub id or a local encoder folder")
    ap.add_argument("--out", default="results/ch04/gpu")
    ap.add_argument("--work", default="artifacts/ch04/gpu", help="the run folders (model, log, dev curve)")
    ap.add_argument("--runs", nargs="+", default=["unifar:0", "control:0", "unifar:1", "unifar:2"])
    ap.add_argument("--budget", type=float, default=420.0, help="seconds of training for all runs together")
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "offline_gpu"))
    from unpack import packed_benchmarks

    covered = packed_benchmarks(args.base_model) if Path(args.base_model).is_dir() else None
    if covered is not None and set(args.benchmarks) - set(covered):
        raise SystemExit(f"--base-model {args.base_model} was packed for {covered} only: the word embeddings of "
                         f"{sorted(set(args.benchmarks) - set(covered))} were not sent (zero rows); pack them "
                         "(benchmarks/offline_gpu/pack.py) or leave them out")
    return args


def train_one(args: argparse.Namespace, kind: str, seed: int, share: float, ftus, cube, device) -> dict:
    """Train one run (whole base, distillation) until its fold1_dev curve flattens, its epochs
    end or ``share`` seconds pass; what the record keeps of it."""
    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.config import TrainArgs
    from unifar.learning_curve import standard_dev_curve
    from unifar.train import train

    config = UniFARConfig(base_model=args.base_model, max_tokens=args.max_tokens, train_values=True,
                          use_token_attention=False, distill_weight=args.distill_weight, lr_base=args.lr_base,
                          epochs=args.epochs, **RUN_KINDS[kind])
    targs = TrainArgs(output_dir=str(Path(args.work) / f"{kind}_seed{seed}"), freeze_base=False,
                      eval_fraction=0.05, eval_every=args.dev_every, save_every=10**6, seed=seed,
                      device=str(device), progress=False, keep_checkpoints_when_done=False)
    shutil.rmtree(targs.output_dir, ignore_errors=True)  # each call trains afresh (a rerun replaces its runs)
    torch.manual_seed(seed)
    model = UniFAR(config, device=device)
    curve = standard_dev_curve(model, ftus, targs, cube, None, every=args.dev_every)
    curve.begin()
    t_run = time.perf_counter()

    def stop(record: dict) -> str | None:
        return f"its {share:.0f} s of the budget ran out" if time.perf_counter() - t_run > share else None

    res = train(None, ftus, targs, model=model, callbacks=[curve, stop])
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"kind": kind, "seed": seed, "model_dir": str(res.final_dir), "steps": res.steps,
            "config": {"model": config.to_dict(), "train_args": targs.to_dict()},
            "seconds": round(time.perf_counter() - t_run, 1), "budget_share_s": round(share, 1),
            "dev_curve": curve.points,
            "run_info": {k: res.run_info.get(k) for k in ("stopped_early", "held_out", "ftus_per_second",
                                                           "peak_memory", "bf16", "n_train_ftus", "total_steps")}}


def evaluate_runs(args: argparse.Namespace, trained: dict[str, dict], device) -> tuple[dict, "pd.DataFrame", "pd.DataFrame"]:
    """One evaluation of every trained run beside mean pooling, the untrained model and the
    hybrid teacher; the power table first (issue 31, item 4: each benchmark's MDE from the base and
    the teacher, which do not depend on the trained models), then the verdicts labelled with it."""
    from unifar.evaluation.dense import UniFARRetriever
    from unifar.evaluation.power import label_verdicts, power_table
    from unifar.evaluation.report import strip_timings, verdict_table
    from unifar.evaluation.runner import evaluate_all
    from unifar.evaluation.systems import load_unifar

    extra = [UniFARRetriever(load_unifar(r["model_dir"], device=str(device)), name=name, model_id=f"gpu:{name}",
                             label=f"{r['kind']} seed {r['seed']}, whole base (gpu profile)")
             for name, r in trained.items() if name != "unifar-trained"]
    result = strip_timings(evaluate_all(trained["unifar-trained"]["model_dir"], extra_retrievers=extra,
                                        systems=["mean", "unifar", "unifar-untrained", "hybrid-mean"],
                                        benchmarks=args.benchmarks, device=str(device), show_progress=False, log=None,
                                        max_length=args.max_tokens))
    power = power_table(result, "mean", "hybrid-mean", folds=(None, "fold1_test", "fold2_test"))
    others = ["mean", "unifar-untrained", "hybrid-mean", *(n for n in trained if n.startswith(CONTROL_NAME))]
    return result, power, label_verdicts(verdict_table(result, "unifar-trained", others), power)


def record(args: argparse.Namespace, argv: list[str] | None, trained: dict[str, dict], n_ftus: int, t_start: float,
           device, evaluated: dict | None = None) -> dict:
    """The chapter results record: the first UniFAR run's fields at the top, as chapter 4 reads
    them, every run under ``runs``, and the evaluation when there is one (``evaluated: false``
    before it, or when the call ran out of time)."""
    from unifar.runtime import run_facts

    first = trained["unifar-trained"]
    results = {"steps": first["steps"], "run_info": first["run_info"], "dev_curve": first["dev_curve"],
               "runs": {n: {k: v for k, v in r.items() if k not in ("model_dir", "config")} for n, r in trained.items()},
               "evaluated": evaluated is not None, **(evaluated or {})}
    return {"format": "unifar-chapter-results/1", "chapter": "ch04", "notebook": "benchmarks/studies/gpu_profile.py",
            "profile": "gpu", "name": "train",
            "config": {"runs": args.runs, **first["config"], "ftus": args.ftus, "n_ftus": n_ftus,
                       "budget_s": args.budget, "benchmarks": args.benchmarks},
            "results": results,
            "run": {**run_facts(t_start, device, commit=args.commit),
                    "command": "python benchmarks/studies/gpu_profile.py " + " ".join(argv or sys.argv[1:])}}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    runs = parse_runs(args.runs)

    from unifar.datasets.csfcube import load_csfcube
    from unifar.datasets.ftu_files import FTUDataset, load_ftus
    from unifar.files import write_json
    from unifar.runtime import pick_device

    t_start = time.perf_counter()
    device = pick_device(args.device)
    ftus = load_ftus(args.ftus)
    if args.max_ftus:
        ftus = FTUDataset(ftus.ftus[: args.max_ftus], ftus.documents, ftus.manifest)
    cube = load_csfcube()
    trained: dict[str, dict] = {}
    deadline = time.perf_counter() + args.budget
    for i, (kind, seed) in enumerate(runs):
        left = deadline - time.perf_counter()
        if left <= 0:
            print(f"[gpu] no time left for {kind}:{seed} and {len(runs) - i - 1} more run(s)", flush=True)
            break
        name = system_name(kind, seed, runs[0][1])
        trained[name] = r = train_one(args, kind, seed, left / (len(runs) - i), ftus, cube, device)
        print(f"[gpu] {name}: {r['steps']} steps in {r['seconds']:.0f} s, fold1_dev "
              f"{r['dev_curve'][0]['fold1_dev_map']:.2f} -> {r['dev_curve'][-1]['fold1_dev_map']:.2f}; "
              f"stopped: {r['run_info'].get('stopped_early')}", flush=True)
    if "unifar-trained" not in trained:
        raise SystemExit("[gpu] the first UniFAR run did not train: nothing to evaluate")
    # the runs are saved before the evaluation: a call cut short by its time limit keeps them
    path = write_json(Path(args.out) / "train.json", record(args, argv, trained, len(ftus), t_start, device))
    print(f"[gpu] wrote {path} (trained, not evaluated yet)", flush=True)
    result, power, verdicts = evaluate_runs(args, trained, device)
    for b, entry in result["benchmarks"].items():
        line = ", ".join(f"{s} {r['metrics'][next(iter(r['metrics']))]:.2f}" for s, r in entry["systems"].items())
        print(f"[gpu] {b}: {line}", flush=True)
    out = record(args, argv, trained, len(ftus), t_start, device,
                 {"evaluation": result, "power": power.to_dict(orient="records"),
                  "verdicts": verdicts.to_dict(orient="records")})
    path = write_json(Path(args.out) / "train.json", out)
    print(f"[gpu] wrote {path}", flush=True)
    return out


if __name__ == "__main__":
    main()
