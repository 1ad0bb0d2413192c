"""Does the notebook check pass on another CPU, and does it still catch a wrong number?

The committed notebook outputs were made with PyTorch's CPU kernels pinned to AVX2
(`.ci/numerics.sh`). A machine whose kernels round differently in the last bit (AVX-512, another
BLAS path) must still pass `.ci/run`'s notebook check, which compares with the tolerance of
`.ci/nbval_tolerance.py`. This script proves both halves on this machine:

1. it re-executes every notebook of the TOC with nbval, in order (each feeds the next, as in CI),
   with the kernels forced onto another instruction set (``ONEDNN_MAX_CPU_ISA=SSE41
   ATEN_CPU_CAPABILITY=default``, which moves MiniLM's embeddings by about 1e-7:
   ``benchmarks/cpu_pins.py``), and records every printed number that moved, as a fraction of
   the tolerance;
2. it plants a wrong number (a tenth of a point) in a stored output of chapter 1 and checks that
   nbval fails on it.

    python benchmarks/isa_check.py [--notebooks NAME ...] [--out results/ci/isa_check.json]

The JSON holds, per notebook, nbval's verdict, the wall time, how many printed numbers moved and
the largest move as a fraction of the tolerance; the wrong-number check's verdict; the machine.
Run it in a fresh clone (``artifacts/`` absent): a checkout whose ``artifacts/cache`` already
holds encodings, made with this machine's own kernels, would let the chapters read them instead of
recomputing them on the other instruction set, and the check would see nothing (the script
refuses, unless ``--allow-warm``). It then takes as long as `.ci/run`'s notebook step from a fresh
clone (about 30-40 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))
from toc_notebooks import toc_notebooks  # noqa: E402

from unifar.runtime import run_facts  # noqa: E402

OTHER_ISA = {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}


def nbval(notebook: Path, env: dict[str, str]) -> tuple[bool, float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "-p", "nbval_tolerance", "--nbval-sanitize-with", ".ci/nbval_sanitize.cfg", str(notebook)],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    return out.returncode == 0, time.perf_counter() - t0, out.stdout[-3000:]


def plant_wrong_number(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` with the first two-decimal number of a printed table raised by 0.1.
    Returns a description of the change."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/plain" not in data:
                continue
            text = "".join(data["text/plain"])
            m = re.search(r"(?<![\w.])(\d{2}\.\d{2})(?![\w.])", text)
            if m:
                wrong = f"{float(m.group(1)) + 0.1:.2f}"
                data["text/plain"] = text[: m.start()] + wrong + text[m.end() :]
                data.pop("text/html", None)  # keep one representation to compare
                dst.write_text(json.dumps(nb), encoding="utf-8")
                return f"cell {i}: {m.group(1)} -> {wrong}"
    raise ValueError(f"{src}: no two-decimal number in a text/plain output to change")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notebooks", nargs="*", help="notebook stems (default: every notebook of _toc.yml)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "ci" / "isa_check.json")
    ap.add_argument("--allow-warm", action="store_true",
                    help="run even though artifacts/ exists (cached encodings are then not re-checked)")
    args = ap.parse_args()
    if (ROOT / "artifacts").exists() and not args.allow_warm:
        raise SystemExit(f"{ROOT / 'artifacts'} exists: its cached encodings were computed with this "
                         "machine's kernels and would be read instead of recomputed on the other "
                         "instruction set; run benchmarks/isa_check.py in a fresh clone (or pass "
                         "--allow-warm to check only what is recomputed)")
    notebooks = [ROOT / nb for nb in toc_notebooks(ROOT)]
    if args.notebooks:
        notebooks = [nb for nb in notebooks if nb.stem in args.notebooks]
    base_env = {**os.environ, "PYTHONPATH": str(ROOT / ".ci"), "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0",
                "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t_start = time.perf_counter()
    report: dict = {"isa": OTHER_ISA, "notebooks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for nb in notebooks:
            log = Path(tmp) / f"{nb.stem}.jsonl"
            ok, seconds, tail = nbval(nb, {**base_env, **OTHER_ISA, "NBVAL_DEVIATIONS": str(log)})
            moved = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            worst = max((m["of_tolerance"] or 0 for m in moved), default=0.0)
            report["notebooks"][nb.relative_to(ROOT).as_posix()] = {
                "passed": ok, "seconds": round(seconds, 1), "numbers_moved": len(moved),
                "largest_move_of_tolerance": round(worst, 3),
                "largest_moves": sorted(moved, key=lambda m: -(m["of_tolerance"] or 0))[:5],
            }
            print(f"{nb.stem:<45} {'passed' if ok else 'FAILED'}  {seconds:6.0f} s  "
                  f"{len(moved):4d} numbers moved, largest {worst:.2f} of the tolerance", flush=True)
            if not ok:
                print(tail)
        first = notebooks[0]
        wrong = first.with_name(f"_wrong_{first.name}")
        try:
            change = plant_wrong_number(first, wrong)
            ok, seconds, _ = nbval(wrong, {**base_env, **OTHER_ISA})
        finally:
            wrong.unlink(missing_ok=True)
        report["wrong_number"] = {"notebook": first.relative_to(ROOT).as_posix(), "change": change,
                                  "nbval_failed": not ok, "seconds": round(seconds, 1)}
        print(f"planted wrong number ({change}) in {first.stem}: nbval {'failed, as it must' if not ok else 'PASSED (bad)'}")
    report["run"] = run_facts(t_start)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
