"""Do `.ci/numerics.sh`'s CPU kernel pins change any bit here, and do the other settings?

PyTorch picks its ATen, oneDNN and MKL kernels by the widest instruction set of the CPU, so two
machines round differently in the last bit (CI once flipped one labeller decision that way).
`.ci/numerics.sh` pins ATen and oneDNN to AVX2, and MKL to AVX2 or, where the CPU has
AVX-512, to MKL's AVX512 branch (faster). This script embeds CSFCube abstracts with MiniLM mean
pooling at 512 tokens in a fresh process per setting (the variables are read when torch loads),
times it, and compares each result with the unpinned default: on an AVX2 machine
``identical`` must hold for the AVX2 pins, and a setting that differs shows that the variable
does steer the kernels used.

    python benchmarks/cpu_pins.py --out results/ci/cpu_pins.json

Prints a table and writes JSON (with the git commit and the machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

PINS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}  # = .ci/numerics.sh, AVX2 CPU
SETTINGS = {
    "unpinned (default)": {},
    "AVX2 pins of .ci/numerics.sh": PINS,
    "AVX-512 pins of .ci/numerics.sh": {**PINS, "MKL_CBWR": "AVX512"},
    "ONEDNN_MAX_CPU_ISA=SSE41": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
}
CHILD = """
import json, sys, time, numpy as np, torch
from unifar.evaluation.mean_pooling import MeanPoolingEncoder
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
texts = [r["title"] + " " + " ".join(r["abstract"]) for r in rows]
encoder = MeanPoolingEncoder("minilm", max_length=512, show_progress=False)
start = time.perf_counter()
e = encoder.encode(texts).numpy()
np.save(sys.argv[3], e)
print(f"{time.perf_counter() - start:.2f}")
print(torch.backends.cpu.get_cpu_capability())
"""


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--abstracts", default="data/csfcube/abstracts-csfcube-preds.jsonl")
    ap.add_argument("--n", type=int, default=200, help="abstracts embedded per setting")
    ap.add_argument("--work", default="artifacts/cpu_pins")
    ap.add_argument("--out", default="results/ci/cpu_pins.json")
    args = ap.parse_args(argv)

    from unifar.files import write_json
    from unifar.runtime import run_facts

    if not Path(args.abstracts).is_file():
        ap.error(f"--abstracts: {args.abstracts} not found (CSFCube's abstracts-csfcube-preds.jsonl)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if k not in PINS}  # start from the unpinned default
    embeddings, rows = {}, {}
    for name, extra in SETTINGS.items():
        path = work / f"{hashlib.sha1(name.encode()).hexdigest()[:10]}.npy"
        done = subprocess.run([sys.executable, "-c", CHILD, args.abstracts, str(args.n), str(path)],
                              env={**base_env, **extra}, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"setting {name!r} failed:\n{done.stderr[-2000:]}")
        embeddings[name] = np.load(path)
        ref = embeddings["unpinned (default)"]
        seconds, capability = done.stdout.strip().splitlines()[-2:]
        rows[name] = {"env": extra, "aten_capability": capability, "encode_seconds": float(seconds),
                      "sha1": hashlib.sha1(embeddings[name].tobytes()).hexdigest()[:12],
                      "identical_to_default": bool(np.array_equal(embeddings[name], ref)),
                      "max_abs_diff": float(np.abs(embeddings[name] - ref).max())}
        print(f"{name:30s} {json.dumps(rows[name])}", flush=True)

    result = {"what": f"MiniLM mean-pooling embeddings of {args.n} CSFCube abstracts (512 tokens) under CPU "
                      "kernel settings, compared bit for bit with the unpinned default (measured here)",
              "settings": rows, "run": run_facts()}
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
