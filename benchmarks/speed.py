"""Speed of UniFAR in one run: encoding throughput against plain mean pooling of the same base
encoder on CSFCube abstracts, training FTUs per second, peak memory, and the time of a full
CSFCube evaluation.

The ratio ``unifar / mean`` is the cost of the facet aggregation module (the unified input format
adds one separator per sentence; the aggregation adds sentence pooling and two small attention
layers). Both timings include tokenisation. Also reports the agreement of bf16 with fp32 embeddings and the CSFCube score of each
run, so a precision change that hurts retrieval shows up here. Prints a table, writes JSON.

Training (``--train-ftus DIR``): optimizer steps of the paper's batch (4 FTUs x accumulation 4)
on an FTU folder, in each of ``--train-modes``: ``full`` (every parameter trained, the paper),
``frozen`` (the base frozen and its states cached, our CPU default) and ``top`` (the base frozen
but its top ``--train-top-layers`` layers trained on cached states of the layers below). The
cached modes are timed after one warm-up pass fills the cache. Each mode's row also has its model
FLOPs per FTU (:mod:`unifar.flops`: 3 times the forward of what trains, the forward of a frozen
part that is not cached), the TFLOP/s achieved and, on a GPU of ``unifar.flops.PEAK_BF16_TFLOPS``,
the MFU.
``--evaluate`` times the full CSFCube test evaluation of UniFAR (encoding 4,205 papers and
ranking 50 pools) and reports its MAP; with ``--n-docs 0`` it also scores the embeddings of every
timed run (so a bf16 run that hurts retrieval shows up). Peak memory: CUDA's max allocated, else the process RSS.
Each stage is printed and, with ``--json``, written as soon as it is measured (``"complete": false``
until the end), so a run stopped for time keeps what it measured.

    python benchmarks/speed.py --model minilm --device cpu --n-docs 256 --train-ftus artifacts/ftus/full
    python benchmarks/speed.py --model minilm --device cpu --n-docs 64 --train-ftus artifacts/ftus/full \
        --train-modes frozen top --train-steps 8 --json results/ch04/speed_top_layer.json
    python benchmarks/speed.py --model minilm --device cuda --precision fp32 bf16 --evaluate --train-ftus DIR
"""

from __future__ import annotations

import argparse
import platform
import time
from contextlib import nullcontext

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def _flops_per_ftu(model, data, layers: int | None, base_trained: bool) -> float:
    """Model FLOPs of a training step per FTU (:mod:`unifar.flops`), from the FTU batches of
    ``data`` in file order (training shuffles them: an estimate of the same FTUs' cost)."""
    import numpy as np

    from unifar.flops import training_step_flops, unifar_forward_flops
    from unifar.objective import build_ftu_batch

    total, b = 0, model.config.batch_size
    for s in range(0, len(data.ftus), b):
        fb = build_ftu_batch(model, data.ftus[s: s + b], data.documents, rng=np.random.default_rng(0))
        for batch in (fb.documents, fb.questions):
            if batch is not None:
                total += training_step_flops(unifar_forward_flops(model, batch, layers), base_trained)
    return total / max(len(data.ftus), 1)


def _time_training(args: argparse.Namespace, device: torch.device, on_row=None) -> list[dict]:
    """FTUs per second of optimizer steps, full fine-tuning and frozen base (warm cache).

    ``on_row(rows)`` is called after each mode, so a run stopped for time keeps the modes it timed."""
    import tempfile

    from unifar import UniFAR, UniFARConfig
    from unifar.caching import TokenStateCache
    from unifar.config import TrainArgs
    from unifar.datasets.ftu_files import FTUDataset, load_ftus
    from unifar.flops import mfu, peak_tflops
    from unifar.train import train

    data = load_ftus(args.train_ftus)
    cfg = UniFARConfig(base_model=args.model, max_tokens=args.max_length)
    per_step = cfg.batch_size * cfg.grad_accumulation
    sub = FTUDataset(ftus=data.ftus[: per_step * args.train_steps], documents=data.documents)
    out = []
    k = args.train_top_layers
    modes = {"full": ("full fine-tuning", False, 0), "frozen": ("frozen base, cached states", True, 0),
             "top": (f"top {k} layer(s) trained, cached states below", True, k)}
    for key in args.train_modes:
        mode, freeze, top = modes[key]
        model = UniFAR(cfg, device=device)
        cache = TokenStateCache(top_layers=top) if freeze else None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

        def targs(out_dir: str) -> TrainArgs:
            return TrainArgs(output_dir=out_dir, freeze_base=freeze, train_top_layers=top, progress=False,
                             device=str(device), save_every=10**6)

        with tempfile.TemporaryDirectory() as tmp:
            if freeze:  # one untimed pass fills the cache, as every epoch after the first sees it
                train(None, sub, targs(f"{tmp}/warm"), model=UniFAR(cfg, device=device), state_cache=cache)
            res = train(None, sub, targs(f"{tmp}/run"), model=model, state_cache=cache)
        info = res.run_info
        flops = _flops_per_ftu(model, sub, layers=None if not freeze else top, base_trained=not freeze or top > 0)
        achieved = flops * info["ftus_per_second"]
        peak = peak_tflops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        out.append({"mode": mode, "train_top_layers": top, "steps": info["steps"], "ftus_per_step": per_step,
                    "ftus_per_s": info["ftus_per_second"], "seconds": info["train_loop_seconds"], "bf16": info["bf16"],
                    "peak_mib": _peak_mib(device), "gflops_per_ftu": round(flops / 1e9, 3),
                    "tflops": round(achieved / 1e12, 4),
                    "mfu": None if peak is None else round(mfu(achieved, 1.0, peak), 4)})
        if on_row is not None:
            on_row(out)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--device", default=None)
    ap.add_argument("--n-docs", type=int, default=0, help="0 = all 4,205 CSFCube papers")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--evaluate", action="store_true", help="also time a full CSFCube evaluation of UniFAR "
                    "(and, with --n-docs 0, score every timed run's embeddings)")
    ap.add_argument("--train-ftus", default=None, help="FTU folder: also time training steps")
    ap.add_argument("--train-steps", type=int, default=2, help="optimizer steps timed per training mode")
    ap.add_argument("--train-modes", nargs="+", default=["full", "frozen"], choices=["full", "frozen", "top"],
                    help="training modes timed (default: full frozen)")
    ap.add_argument("--train-top-layers", type=int, default=1, help="layers trained in the 'top' mode")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.csfcube import load_csfcube
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder
    from unifar.evaluation.texts import document_text
    from unifar.facets import FACETS
    from unifar.runtime import pick_device

    device = pick_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    data = load_csfcube()
    pids = data.pool_pids()
    if args.n_docs:
        pids = pids[: args.n_docs]
    docs = [{"title": data.papers[p]["title"], "sentences": data.papers[p]["sentences"]} for p in pids]

    unifar = UniFAR(UniFARConfig(base_model=args.model, max_tokens=args.max_length), device=device)
    mean = MeanPoolingEncoder(args.model, max_length=args.max_length, batch_size=args.batch_size, device=device, show_progress=False)
    texts = [document_text(data.papers[p], mean.sep_token) for p in pids]
    items = unifar.tokenize_documents(docs)
    n_tokens_unifar = sum(len(x.input_ids) for x in items)
    n_tokens_mean = sum(len(x) for x in mean.tokenizer(texts, truncation=True, max_length=args.max_length)["input_ids"])

    rows, embeddings = [], {}
    for precision in args.precision:
        bf16 = precision == "bf16"
        ctx = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
        # warm-up on a few documents (CUDA kernels, allocator)
        unifar.encode(items[:64], args.batch_size, False, bf16)
        with ctx:
            mean.encode(texts[:64])
        systems = ("mean", "unifar")
        times: dict[str, list[float]] = {x: [] for x in systems}
        peaks: dict[str, int] = {x: 0 for x in systems}
        # Repeats interleave the two systems, so a drift of the machine's speed (other jobs, memory
        # reclaim on a shared VM) hits both alike; the best of the repeats is reported.
        for _ in range(args.repeats):
            for system in systems:
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                _sync(device)
                t0 = time.perf_counter()
                if system == "unifar":
                    # tokenisation inside the timed region, as for mean pooling below
                    e = unifar.encode_documents(docs, args.batch_size, False, bf16).embeddings
                else:
                    with ctx:
                        e = mean.encode(texts)
                _sync(device)
                times[system].append(time.perf_counter() - t0)
                embeddings[(system, precision)] = e
                if device.type == "cuda":
                    peaks[system] = max(peaks[system], torch.cuda.max_memory_allocated())
        for system in systems:
            best = min(times[system])
            rows.append({
                "system": system, "precision": precision, "docs": len(pids), "seconds": round(best, 3),
                "seconds_per_repeat": [round(t, 3) for t in times[system]],
                "docs_per_s": round(len(pids) / best, 1),
                "tokens": n_tokens_unifar if system == "unifar" else n_tokens_mean,
                "peak_gpu_mib": round(peaks[system] / 2**20) if device.type == "cuda" else None,
            })
    ratios = {p: round(next(r["docs_per_s"] for r in rows if r["system"] == "unifar" and r["precision"] == p)
                        / next(r["docs_per_s"] for r in rows if r["system"] == "mean" and r["precision"] == p), 3)
              for p in args.precision}
    agreement = {}
    if "fp32" in args.precision and "bf16" in args.precision:
        for system in ("mean", "unifar"):
            a, b = embeddings[(system, "fp32")], embeddings[(system, "bf16")]
            agreement[system] = round(float(torch.nn.functional.cosine_similarity(a.flatten(1), b.flatten(1)).min()), 5)
    scores = {}
    if args.evaluate and not args.n_docs:
        from unifar.evaluation.csfcube import evaluate_csfcube_rankings, rank_pools

        index = {p: i for i, p in enumerate(pids)}
        for (system, precision), e in embeddings.items():

            def score(facet, qpid, cands, e=e):
                fi = FACETS.index(facet) if e.dim() == 3 else None
                q = e[index[qpid]] if fi is None else e[index[qpid], fi]
                c = e[[index[x] for x in cands]] if fi is None else e[[index[x] for x in cands], fi]
                return (c @ q).double().numpy()

            res = evaluate_csfcube_rankings(rank_pools(score, data), data)
            scores[f"{system}/{precision}"] = {k: round(v["map"], 2) for k, v in res.items()}

    report = {
        "model": args.model, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine(),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "batch_size": args.batch_size,
        "max_length": args.max_length, "rows": rows, "unifar_over_mean": ratios,
        "bf16_vs_fp32_min_cosine": agreement, "csfcube_map": scores,
        "training": [], "csfcube_full_evaluation_seconds": None, "peak_memory_mib": _peak_mib(device),
        "complete": False,
    }

    def save() -> None:
        """Write what is measured so far (atomically): a run stopped for time keeps its stages."""
        report["peak_memory_mib"] = _peak_mib(device)
        if args.json:
            from unifar.files import write_json

            write_json(args.json, report)

    print(f"{'system':8} {'prec':5} {'docs':>6} {'seconds':>8} {'docs/s':>8} {'tokens':>9} {'peak MiB':>9}")
    for r in rows:
        print(f"{r['system']:8} {r['precision']:5} {r['docs']:>6} {r['seconds']:>8} {r['docs_per_s']:>8} {r['tokens']:>9} {str(r['peak_gpu_mib']):>9}")
    print("unifar/mean throughput:", ratios)
    if agreement:
        print("bf16 vs fp32, min cosine:", agreement)
    for k, v in scores.items():
        print("CSFCube MAP", k, v)
    save()

    def training_row(rows_so_far: list[dict]) -> None:
        r = rows_so_far[-1]
        print(f"training ({r['mode']}): {r['ftus_per_s']} FTUs/s over {r['steps']} steps of {r['ftus_per_step']} FTUs, "
              f"peak {r['peak_mib']} MiB", flush=True)
        report["training"] = rows_so_far
        save()

    if args.train_ftus:
        _time_training(args, device, training_row)
    if args.evaluate:  # always the whole collection, whatever --n-docs timed above
        from unifar.evaluation.csfcube import evaluate_csfcube_rankings, rank_pools
        from unifar.evaluation.dense import UniFARRetriever

        _sync(device)
        t0 = time.perf_counter()
        res = evaluate_csfcube_rankings(rank_pools(UniFARRetriever(unifar, batch_size=args.batch_size), data), data)
        _sync(device)
        report["csfcube_full_evaluation_seconds"] = round(time.perf_counter() - t0, 1)
        scores["unifar/full-evaluation"] = {k: round(v["map"], 2) for k, v in res.items()}
        print(f"full CSFCube evaluation (UniFAR, encode + rank): {report['csfcube_full_evaluation_seconds']} s")
    report["complete"] = True
    save()
    print("peak memory (MiB):", report["peak_memory_mib"])
    if args.json:
        print(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main()
