"""Record and print the wall time of each step of `.ci/run` or `.ci/build-book`.

    python .ci/timings.py COMMAND STEPS_TSV [--status passed|failed] [--out FILE | --no-write]

``STEPS_TSV`` has one ``kind<TAB>name<TAB>start<TAB>end`` line per finished step (epoch seconds,
bash's ``$EPOCHREALTIME``), where ``kind`` is
``step`` (setup, tests, book, ...) or ``notebook`` (a notebook's path). The section ``COMMAND``
(``run`` or ``build-book``) of the JSON file is replaced by this run's record: every step and
notebook in seconds, the total, the budget it is held to, the commit, the machine and the date.
The other command's section is kept. A table is printed either way. Standard library only, so
that it also runs before the environment exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What we hold ourselves to on the 2-core CI machine (35 minutes, 4 a chapter); recorded
# beside the measurement, never asserted by a test.
BUDGET_S = {
    "total": 35 * 60,
    "setup": 3 * 60,
    "unit tests": 4 * 60,
    "slow tests": 4 * 60,
    "notebooks": 25 * 60,
    "one chapter": 4 * 60,
    "book build": 2 * 60,
}


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_flags() -> list[str]:
    """The vector instruction sets the CPU offers (they decide the last bits of float sums)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                return sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))
    except OSError:
        pass
    return []


def git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def read_steps(path: Path) -> tuple[dict[str, float], dict[str, float]]:
    steps: dict[str, float] = {}
    notebooks: dict[str, float] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            kind, name, start, end = line.split("\t")
            value = round(float(end) - float(start), 1)
        except ValueError:
            sys.exit(f"{path}:{n}: expected 'kind<TAB>name<TAB>start<TAB>end', got {line!r}")
        (notebooks if kind == "notebook" else steps)[name] = value
    return steps, notebooks


def folder_bytes(path: Path) -> int | None:
    """Bytes of the files under ``path`` (what a run leaves on disk), or None when it is absent."""
    if not path.is_dir():
        return None
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def table(record: dict) -> str:
    def mmss(s: float) -> str:
        m, sec = divmod(int(round(s)), 60)  # round first: 179.6 s is 3:00, not 2:60
        return f"{m:3d}:{sec:02d}"

    budget = record.get("budget_s", {})

    def over(s: float, limit: float | None) -> str:  # a step beyond what we hold ourselves to
        return f"  over {mmss(limit).strip()}" if limit is not None and s > limit else ""

    def notebook_lines() -> list[str]:
        return [f"  {Path(nb).stem:<46} {mmss(ns):>7}{over(ns, budget.get('one chapter'))}"
                for nb, ns in record["notebooks"].items()]

    lines = [f"{'step':<48} {'min:s':>7}"]
    for name, s in record["steps"].items():
        key = "notebooks" if name.startswith("notebooks") else name
        lines.append(f"{name:<48} {mmss(s):>7}{over(s, budget.get(key))}")
        if name.startswith("notebooks"):
            lines += notebook_lines()
    if record["notebooks"] and not any(name.startswith("notebooks") for name in record["steps"]):
        lines += notebook_lines()  # a run that stopped inside the notebook step
    lines.append(f"{'total':<48} {mmss(record['total_s']):>7}{over(record['total_s'], budget.get('total'))}")
    if record.get("artifacts_bytes") is not None:
        lines.append(f"{'disk: artifacts/ (GB)':<48} {record['artifacts_bytes'] / 1e9:>7.1f}")
    lines.append(f"({record['status']}; commit {str(record['commit'])[:10]}{' +changes' if record['dirty'] else ''}; "
                 f"{record['machine']['cpu_count']} CPUs, {record['machine']['cpu_model']})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "build-book"])
    ap.add_argument("steps_tsv", type=Path)
    ap.add_argument("--status", choices=["passed", "failed"], default="passed")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "ci" / "timings.json")
    ap.add_argument("--no-write", action="store_true", help="only print the table (a partial run)")
    args = ap.parse_args()
    steps, notebooks = read_steps(args.steps_tsv)
    status = git("status", "--porcelain", "--untracked-files=no")
    record = {
        "status": args.status,
        # a run that stopped inside the notebook step has no "notebooks" step: count them
        "total_s": round(sum(steps.values()) + (0 if any(k.startswith("notebooks") for k in steps)
                                                 else sum(notebooks.values())), 1),
        "steps": steps,
        "notebooks": notebooks,
        "budget_s": BUDGET_S,
        "artifacts_bytes": folder_bytes(ROOT / "artifacts"),  # the disk a run needs beside .venv
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": {
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpu_flags": cpu_flags(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu_pins": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")},
        },
    }
    if args.no_write:
        print(f"\n[{args.command}] timings (not recorded: a partial run):")
        print(table(record))
        return
    data = {}
    if args.out.exists():
        try:
            data = json.loads(args.out.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            data = {}
    data[args.command] = record
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"\n[{args.command}] timings ({args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}):")
    print(table(record))


if __name__ == "__main__":
    main()
