"""Where and how a run executes: the device it uses, and the facts recorded beside every result
(commit, machine, date, duration, peak memory).

Training (``run.json``), evaluation (``results.json``), the chapters' results files, the CLI and
the benchmarks all record the same facts through :func:`run_facts`, in one shape (under the
record's ``"run"`` key), so a number can always be traced to the code and the machine that
produced it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .files import REPO

if TYPE_CHECKING:  # torch is imported only when a run uses it (the CSFCube CLI is torch-free)
    import torch

__all__ = ["available_devices", "pick_device", "git_commit", "machine_facts", "peak_memory", "run_facts", "facts_of",
           "autocast_for"]



def available_devices() -> list[str]:
    """The torch devices this machine can use: ``cpu``, then ``cuda:0`` ... and ``mps`` when present."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def pick_device(device: "str | torch.device | None" = None) -> "torch.device":
    """``device`` if given, else CUDA when present, else CPU.

    A bare ``cuda`` gets the current GPU's index: ``torch.cuda.set_device`` refuses a device
    without one, and ``torch.device("cuda") != torch.device("cuda:0")`` in comparisons. A device
    this machine lacks (``cuda`` without a GPU, ``cuda:3`` with one GPU, ``mps`` off a Mac) or a
    misspelt one (``gpu``) raises :class:`ValueError` naming the devices that exist, instead of
    torch's assertion deep inside the first ``.to()``.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    import torch

    try:
        d = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device {device!r} is not a torch device ({err}); "
                         f"this machine has: {', '.join(available_devices())}") from None
    if d.type == "cuda" and not torch.cuda.is_available():
        built = "without CUDA" if torch.version.cuda is None else f"with CUDA {torch.version.cuda}"
        raise ValueError(f"device {str(device)!r}: no CUDA device exists on this machine (torch {torch.__version__} "
                         f"built {built}); this machine has: {', '.join(available_devices())}")
    if d.type == "cuda" and d.index is not None and d.index >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r}: no such CUDA device, only {torch.cuda.device_count()} exist here; "
                         f"this machine has: {', '.join(available_devices())}")
    if d.type == "mps" and "mps" not in available_devices():
        raise ValueError(f"device {str(device)!r}: MPS (Apple GPU) is not available here; "
                         f"this machine has: {', '.join(available_devices())}")
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


def git_commit(repo: str | os.PathLike[str] = REPO) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of ``repo`` (``dirty``: tracked files
    differ from the commit)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
            return out.stdout.strip() if out.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": sha, "dirty": bool(status) if status is not None else None}


def machine_facts(device: "torch.device | None" = None, world_size: int | None = None) -> dict[str, Any]:
    """The machine a result was measured on: CPU model and count, platform, Python, and the
    torch / transformers versions and threads when the run imported them; the device and the
    number of ranks when given."""
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": cpu or platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        info["transformers"] = transformers.__version__
    if device is not None:
        info["device"] = str(device)
    if world_size is not None:
        info["world_size"] = world_size
    return info


def peak_memory(device: "torch.device | None" = None) -> dict[str, Any]:
    """Peak memory of this process: CUDA's max allocated bytes on a GPU, else the max RSS."""
    if device is not None and device.type == "cuda":
        import torch

        return {"kind": "cuda_max_memory_allocated", "bytes": int(torch.cuda.max_memory_allocated(device))}
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
        return {"kind": "max_rss", "bytes": int(kb) * (1 if sys.platform == "darwin" else 1024)}
    except ImportError:  # pragma: no cover - Windows
        return {"kind": "unavailable", "bytes": None}


def autocast_for(device: "torch.device | str", bf16: bool | None) -> Any:
    """The autocast context of a run on ``device``: bfloat16 autocast when ``bf16`` is true,
    ``None`` meaning on CUDA only; else a no-op context. One rule for encoding and training.

    >>> type(autocast_for("cpu", None)).__name__, type(autocast_for("cpu", True)).__name__
    ('nullcontext', 'autocast')
    """
    import torch  # here, so that importing this module stays torch-free

    kind = torch.device(device).type
    use = kind == "cuda" if bf16 is None else bool(bf16)
    return torch.autocast(kind, dtype=torch.bfloat16) if use else contextlib.nullcontext()


def run_facts(started: float | None = None, device: "torch.device | None" = None,
              world_size: int | None = None, commit: str | None = None) -> dict[str, Any]:
    """Commit (and whether the tree had uncommitted changes), machine, UTC date and, given the
    ``time.perf_counter()`` of the start, the duration in seconds: what every record of the
    library and the benchmarks keeps under its ``"run"`` key. ``commit`` names the commit where
    the run has no git history (a packed tree on a lent GPU machine); ``dirty`` is then None.

    >>> sorted(run_facts(0.0, commit="abc"))
    ['commit', 'date', 'dirty', 'duration_s', 'machine']
    >>> run_facts(commit="abc")["commit"], run_facts(commit="abc")["dirty"]
    ('abc', None)
    """
    facts: dict[str, Any] = {
        **(git_commit() if commit is None else {"commit": commit, "dirty": None}),
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": machine_facts(device, world_size),
    }
    if started is not None:
        facts["duration_s"] = round(time.perf_counter() - started, 1)
    return facts


def facts_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The run facts of a record in either shape: :func:`run_facts` under ``"run"`` (now), or the
    older ``{"git": {...}, "machine": {...}, "date": ...}`` at the top (records and ``run.json``
    files written before the one shape, which committed results and reused runs still hold).

    >>> facts_of({"run": {"commit": "abc", "machine": {"cpu_count": 2}}})["machine"]
    {'cpu_count': 2}
    >>> facts_of({"git": {"commit": "abc", "dirty": False}, "machine": {"cpu_count": 2}})["commit"]
    'abc'
    """
    if isinstance(record.get("run"), Mapping):
        return dict(record["run"])
    git = record.get("git") or {}
    return {"commit": git.get("commit"), "dirty": git.get("dirty"), "date": record.get("date"),
            "machine": record.get("machine") or {}}
