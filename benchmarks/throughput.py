"""Encoding throughput near the hardware (issue 32): tokens/s, docs/s, padding, FLOPs and MFU.

Encodes the first ``--n-docs`` CSFCube abstracts (title and abstract, up to ``--max-tokens``) with

* ``mean``: MiniLM mean pooling (:class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder`);
* ``unifar``: the untrained UniFAR on the same base (:meth:`unifar.model.UniFAR.encode_documents`,
  the unified input format, which adds a separator per sentence);
* ``sentence-transformers`` (CPU, or ``--st`` on CUDA): ``SentenceTransformer.encode`` of the same
  shipped model on the same texts, maximum length, threads and batch size, in the same run, so
  that ``mean``'s speed is reported as a ratio to it (goal: >= 1.0x) and its embeddings are
  checked against it;

at each ``--batch-sizes`` and ``--precision`` (``bf16``: bfloat16 weights for ``mean`` and the
reference, bfloat16 autocast for ``unifar``; CUDA only). Each run is timed after a warm-up call
on one batch. Reported per run: seconds, docs/s, real tokens/s, the padding fraction of the
batches as the code forms them (length-sorted), the model FLOPs of the texts
(:mod:`unifar.flops`: matrix products of the real tokens only, so padding lowers the MFU),
TFLOP/s achieved, and on a known GPU the MFU against its dense bf16 peak. Peak memory: CUDA's
maximum allocated, else the process's RSS. Prints a table, writes JSON (with the commit and the
machine) as each run finishes, so a run stopped for time keeps what it measured.

Run it on an idle machine (a second job on the cores halves the numbers):

    python benchmarks/throughput.py --device cpu --n-docs 300 --batch-sizes 16 32 \
        --json results/throughput/cpu.json
    python benchmarks/throughput.py --device cuda --n-docs 4205 --batch-sizes 64 256 1024 \
        --precision fp32 bf16 --st --json results/throughput/cuda.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def padding_fraction(lengths: list[int], batch_size: int) -> float:
    """Share of padded positions when length-sorted batches of ``batch_size`` are padded to
    their longest input (:func:`unifar.pooling.length_order`, as every encoder here batches)."""
    from unifar.pooling import length_order

    ordered = np.asarray(lengths)[length_order(lengths)]
    padded = sum(int(ordered[s: s + batch_size].max()) * len(ordered[s: s + batch_size])
                 for s in range(0, len(ordered), batch_size))
    return 1.0 - float(ordered.sum()) / padded


def timed(fn, device: torch.device) -> tuple[float, object]:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="minilm", help="a shipped encoder name, hub id or path")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when present)")
    ap.add_argument("--n-docs", type=int, default=300, help="CSFCube papers to encode (<= 4205)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[32])
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--systems", nargs="+", default=["mean", "unifar"], choices=["mean", "unifar"])
    ap.add_argument("--st", action="store_true",
                    help="also time sentence-transformers on CUDA (always on the CPU)")
    ap.add_argument("--data-dir", default="data/csfcube")
    ap.add_argument("--json", default=None, help="write the results here (e.g. results/throughput/cpu.json)")
    args = ap.parse_args()

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.csfcube import load_csfcube
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder
    from unifar.evaluation.texts import document_text
    from unifar.files import write_json
    from unifar.flops import encoder_flops, mfu, peak_tflops, unifar_forward_flops
    from unifar.runtime import peak_memory, pick_device, run_facts
    from unifar.text import collate

    started = time.perf_counter()
    device = pick_device(args.device)
    if "bf16" in args.precision and device.type != "cuda":
        raise SystemExit("--precision bf16: on CUDA only (the CPU's bf16 kernels are slower here)")
    if any(b < 1 for b in args.batch_sizes) or args.n_docs < 1:
        raise SystemExit("--batch-sizes and --n-docs must be positive")
    papers = list(load_csfcube(args.data_dir).papers.values())[: args.n_docs]
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = peak_tflops(device_name)

    mean = MeanPoolingEncoder(args.model, max_length=args.max_tokens, device=device,
                              show_progress=False)
    texts = [document_text(p, mean.sep_token) for p in papers]
    mean_lengths = [len(ids) for ids in mean.tokenizer(texts, truncation=True,
                                                       max_length=args.max_tokens)["input_ids"]]
    unifar = UniFAR(UniFARConfig(base_model=args.model, max_tokens=args.max_tokens), device=device)
    items = unifar.tokenize_documents(papers)
    unifar_lengths = [len(it.input_ids) for it in items]
    forward = unifar_forward_flops(unifar, collate(items, unifar.tokenizer.pad_token_id or 0))
    flops = {"mean": encoder_flops(mean.model.config, mean_lengths),
             "unifar": forward["base"] + forward["heads"]}
    flops["sentence-transformers"] = flops["mean"]
    lengths = {"mean": mean_lengths, "unifar": unifar_lengths,
               "sentence-transformers": mean_lengths}

    st = None
    if device.type == "cpu" or args.st:
        from sentence_transformers import SentenceTransformer

        from unifar.base_models import resolve_base_model

        st = SentenceTransformer(resolve_base_model(args.model), device=str(device))
        st.max_seq_length = args.max_tokens

    rows: list[dict] = []
    record = {"benchmark": "throughput", "config": vars(args), "device_name": device_name,
              "peak_bf16_tflops": peak, "torch_threads": torch.get_num_threads(), "rows": rows}

    def run(system: str, precision: str, batch_size: int, fn) -> torch.Tensor:
        fn(warmup=True)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds, out = timed(lambda: fn(warmup=False), device)
        tokens = sum(lengths[system])
        row = {"system": system, "precision": precision, "batch_size": batch_size,
               "docs": len(texts), "seconds": round(seconds, 3),
               "docs_per_s": round(len(texts) / seconds, 1),
               "tokens_per_s": round(tokens / seconds), "padding": round(
                   padding_fraction(lengths[system], batch_size), 3),
               "tflops": round(flops[system] / seconds / 1e12, 4),
               "mfu": None if peak is None else round(mfu(flops[system], seconds, peak), 4),
               "peak_memory": peak_memory(device)}
        rows.append(row)
        if args.json:
            write_json(args.json, {**record, "run": run_facts(started, device), "complete": False})
        print(f"{system:>22} {precision:>5} b={batch_size:<5} {row['seconds']:8.2f} s "
              f"{row['docs_per_s']:9.1f} docs/s {row['tokens_per_s']:>9} tok/s "
              f"pad {row['padding']:.2f}  {row['tflops']:.3f} TFLOP/s"
              + (f"  MFU {row['mfu']:.1%}" if row["mfu"] is not None else ""), flush=True)
        return out

    for precision in args.precision:
        if precision == "bf16":
            mean.model.to(torch.bfloat16)
            if st is not None:
                st.to(torch.bfloat16)
        for bs in args.batch_sizes:
            mean.batch_size = bs
            ref = None
            if st is not None:
                ref = run("sentence-transformers", precision, bs, lambda warmup: st.encode(
                    texts[:bs] if warmup else texts, batch_size=bs, convert_to_tensor=True,
                    normalize_embeddings=True, show_progress_bar=False).float().cpu())
            if "mean" in args.systems:
                emb = run("mean", precision, bs, lambda warmup: mean.encode(texts[:bs] if warmup else texts))
                if ref is not None:
                    rows[-1]["ratio_to_sentence_transformers"] = round(
                        rows[-2]["seconds"] / rows[-1]["seconds"], 3)
                    rows[-1]["max_abs_diff_to_sentence_transformers"] = float(
                        (emb.float() - ref).abs().max())
            if "unifar" in args.systems:
                run("unifar", precision, bs, lambda warmup: unifar.encode(
                    items[:bs] if warmup else items, batch_size=bs, show_progress=False,
                    bf16=precision == "bf16"))
    for r in rows:
        if "ratio_to_sentence_transformers" in r:
            print(f"mean pooling at batch {r['batch_size']} ({r['precision']}): "
                  f"{r['ratio_to_sentence_transformers']:.2f}x sentence-transformers' throughput, "
                  f"embeddings within {r['max_abs_diff_to_sentence_transformers']:.1e}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, {**record, "run": run_facts(started, device), "complete": True})
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
