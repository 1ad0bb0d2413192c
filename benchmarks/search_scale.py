"""How does `unifar search` scale: exact matrix product against FAISS (flat, IVF, HNSW)?

Indexes of facet-embedding rows of MiniLM width (384), one row per (paper, facet):

* ``csfcube``: the real CSFCube corpus (4,205 papers x 3 facets = 12,615 rows), encoded by
  ``unifar.search.encode.encode_corpus`` with an untrained UniFAR on MiniLM (resumable, in
  ``artifacts/search/csfcube``; the CPU encoding rate is recorded);
* 100k and 1M synthetic rows: ``normalise(c + 0.5 g / sqrt(d))``, ``c`` a random CSFCube row and
  ``g`` standard normal, so the synthetic rows keep the real rows' uneven directions (plain
  random unit vectors have no neighbours worth finding and flatter every approximate index).

For each size and backend: build time, index bytes (the FAISS file, or the float32 matrix for
exact), queries per second for a batch of queries and milliseconds for one query at a time
(what ``unifar search`` does), and recall@10 of the approximate index against exact.
Queries: 200 rows drawn like the corpus (CSFCube: its own rows, as ``--like`` does)::

    .venv/bin/python benchmarks/search_scale.py           # -> results/search/scale.json

Run it on an otherwise idle machine: the committed file once recorded 4.23 papers/s for the
CSFCube encoding, measured under ``nice`` beside other work and on a resumed run (3,705 of 4,205
papers), where the same encoding runs at about 25 papers/s alone (issue 32). The encoding rate is
now recorded only when this run encoded the whole corpus.

Encoding throughput only (on a GPU, bf16)::

    .venv/bin/python benchmarks/search_scale.py --encode-docs 4000 --device cuda --dtype bf16
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from unifar.files import REPO, display_path, write_json
from unifar.runtime import peak_memory, pick_device, run_facts
from unifar.search.corpus import read_corpus
from unifar.search.encode import encode_corpus, load_model, read_encoding
from unifar.search.vectors import VectorIndex, exact_topk

CSFCUBE = REPO / "data" / "csfcube" / "abstracts-csfcube-preds.jsonl"
WORK = REPO / "artifacts" / "search"


def csfcube_corpus() -> Path:
    """CSFCube's abstracts as a search corpus (id, title, sentences, labels)."""
    path = WORK / "csfcube.jsonl"
    if not path.is_file():
        rows = [json.loads(x) for x in CSFCUBE.read_text(encoding="utf-8").splitlines()]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "id": r["paper_id"],
                        "title": r["title"],
                        "sentences": r["abstract"],
                        "labels": r["pred_labels"],
                    }
                )
                + "\n"
                for r in rows
            ),
            encoding="utf-8",
        )
    return path


def csfcube_rows(model_name: str) -> tuple[torch.Tensor, dict]:
    """The encoded CSFCube facet rows [12615, h] and the encoding's facts."""
    out = WORK / f"csfcube-{model_name}"
    manifest = encode_corpus(
        read_corpus(csfcube_corpus()),
        load_model(model_name, "cpu"),
        out,
        spec=model_name,
        chunk_size=500,
    )
    enc = read_encoding(out)
    return enc.embeddings.reshape(-1, enc.embeddings.shape[-1]), manifest


def synthetic(n: int, centres: torch.Tensor, seed: int, noise: float = 0.5) -> torch.Tensor:
    """``n`` unit rows around random ``centres`` rows (module docstring), in blocks."""
    g = torch.Generator().manual_seed(seed)
    d = centres.shape[1]
    out = torch.empty(n, d)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        c = centres[torch.randint(len(centres), (m,), generator=g)]
        out[s : s + m] = torch.nn.functional.normalize(
            c + noise * torch.randn(m, d, generator=g) / d**0.5, dim=-1
        )
    return out


def measure(
    rows: torch.Tensor, queries: torch.Tensor, backend: str, truth: np.ndarray, k: int, single: int
) -> dict:
    """Build, size, speed and recall of one backend on ``rows``."""
    t0 = time.perf_counter()
    index = VectorIndex(rows, backend)
    build = time.perf_counter() - t0
    if backend == "exact":
        size = rows.numel() * 4
    else:
        with tempfile.TemporaryDirectory() as tmp:
            index.save(Path(tmp) / "x.faiss")
            size = (Path(tmp) / "x.faiss").stat().st_size
    t0 = time.perf_counter()
    _, idx = index.search(queries, k)
    batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in queries[:single]:
        index.search(q[None], k)
    one = (time.perf_counter() - t0) / single
    recall = float(
        np.mean([len(set(a) & set(b)) / k for a, b in zip(idx.tolist(), truth.tolist())])
    )
    return {
        "backend": backend,
        "params": index.params,
        "build_s": round(build, 3),
        "index_bytes": int(size),
        "qps_batch": round(len(queries) / batch, 1),
        "ms_per_query": round(1000 * one, 3),
        f"recall@{k}": round(recall, 4),
    }


def scale(args: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    import faiss

    faiss.omp_set_num_threads(args.threads)
    real, manifest = csfcube_rows(args.model)
    rng = np.random.default_rng(args.seed)
    runs = []
    for size in args.sizes:
        if size == "csfcube":
            rows = real
            queries = real[
                torch.as_tensor(np.sort(rng.choice(len(real), args.queries, replace=False)))
            ]
        else:
            n = int(float(size))
            rows = synthetic(n, real, args.seed)
            queries = synthetic(args.queries, real, args.seed + 1)
        _, truth = exact_topk(rows, queries, args.k)
        for backend in args.backends:
            if backend == "hnsw" and len(rows) > args.hnsw_max_rows:
                continue
            r = {
                "size": size,
                "rows": len(rows),
                "dim": rows.shape[1],
                **measure(rows, queries, backend, truth, args.k, args.single),
            }
            runs.append(r)
            print(
                f"{size:>9} {r['rows']:>9} {backend:>6} build {r['build_s']:>8.2f} s  "
                f"{r['index_bytes'] / 2**20:>8.1f} MiB  {r['qps_batch']:>9.1f} q/s (batch)  "
                f"{r['ms_per_query']:>8.2f} ms/q  recall@{args.k} {r[f'recall@{args.k}']:.3f}",
                flush=True,
            )
        del rows
    enc = dict(manifest.get("last_run") or {})
    if enc.get("documents_encoded") != manifest["counts"]["documents"]:  # resumed or reused
        enc["documents_per_second"] = None  # a part of a run, perhaps on a busy machine: no rate
        enc["note"] = "encoding reused or resumed: no rate (see benchmarks/speed.py for throughput)"
    return {
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "csfcube_encoding": {"documents": manifest["counts"]["documents"], **enc},
        "runs": runs,
        "peak_memory": peak_memory(),
        **run_facts(t_start),
    }


def encode_throughput(args: argparse.Namespace) -> dict:
    """Papers per second of ``encode_documents`` on ``--device`` in ``--dtype``."""
    t_start = time.perf_counter()
    device = pick_device(args.device)
    model = load_model(args.model, str(device))
    docs = read_corpus(csfcube_corpus()).documents
    docs = [docs[i % len(docs)] for i in range(args.encode_docs)]
    bf16 = args.dtype == "bf16"
    model.encode_documents(docs[:64], batch_size=args.batch_size, show_progress=False, bf16=bf16)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    model.encode_documents(docs, batch_size=args.batch_size, show_progress=False, bf16=bf16)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    out = {
        "documents": len(docs),
        "seconds": round(seconds, 3),
        "documents_per_second": round(len(docs) / seconds, 1),
        "device": str(device),
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "model": args.model,
        "peak_memory": peak_memory(device),
        **run_facts(t_start, device),
    }
    print(
        f"encoded {len(docs)} CSFCube papers on {device} ({args.dtype}): "
        f"{out['documents_per_second']} papers/s"
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="csfcube,1e5,1e6", help="csfcube and/or row counts")
    p.add_argument("--backends", default="exact,flat,ivf,hnsw")
    p.add_argument("--hnsw-max-rows", type=float, default=1e6, help="skip HNSW above this")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--single", type=int, default=50, help="queries timed one at a time")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--model", default="minilm")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--encode-docs", type=int, metavar="N", help="only measure encoding of N papers")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--out",
        help="result JSON (default results/search/scale.json, or "
        "results/search/encode_<device>_<dtype>.json with --encode-docs)",
    )
    args = p.parse_args()
    args.sizes = args.sizes.split(",")
    args.backends = args.backends.split(",")
    if args.encode_docs:
        result = encode_throughput(args)
        kind = pick_device(args.device).type
        out = Path(args.out or REPO / "results" / "search" / f"encode_{kind}_{args.dtype}.json")
    else:
        result = scale(args)
        out = Path(args.out or REPO / "results" / "search" / "scale.json")
    write_json(out, result)
    print(f"wrote {display_path(out)}")


if __name__ == "__main__":
    main()
