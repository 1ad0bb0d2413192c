"""Small file utilities shared by the library: hashing (provenance, integrity checks), digests
of a folder's files recorded at writing and checked at reading (model folders, checkpoints), and
atomic folder writes (checkpoints, FTU folders), so an interrupted run never leaves half a folder."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:
    import torch

try:
    import fcntl
except ImportError:  # Windows: no flock; folders are then not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["sha256_file", "hash_tensors", "atomic_dir", "atomic_file", "display_path", "public_path", "write_json", "IntegrityError",
           "file_digests", "digest_mismatch", "LOCK_NAME", "FolderBusy", "lock_folder", "unlock_folder"]

#: the lock file a writing process holds in its output folder (training runs, search indexes)
LOCK_NAME = ".lock"

#: the repository root (the folder holding the ``unifar`` package)
REPO = Path(__file__).resolve().parents[1]


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the repository when it lies inside it (so messages and stored
    notebook outputs carry no machine-specific prefix), else unchanged.

    >>> display_path(REPO / "data" / "x.tsv")
    'data/x.tsv'
    >>> display_path("/elsewhere/x.tsv")
    '/elsewhere/x.tsv'
    """
    try:
        return Path(path).resolve().relative_to(REPO).as_posix()
    except (ValueError, OSError):
        return str(path)


def public_path(path: str | os.PathLike[str] | None) -> str | None:
    """A path relative to the repository when inside it, else its last component: what results
    record, so that no home folder is ever written into a committed file.

    >>> public_path(REPO / "data" / "x.tsv"), public_path("/home/me/x.tsv"), public_path(None)
    ('data/x.tsv', 'x.tsv', None)
    """
    if path is None:
        return None
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return p.name


def atomic_dir(final: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary sibling folder, then rename it to ``final``
    (replacing an existing one); on any error the temporary folder is removed and ``final`` is
    left as it was."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        write(tmp)
        if final.exists():
            old = final.parent / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def sha256_file(path: str | os.PathLike[str], block_size: int = 1 << 22) -> str:
    """SHA-256 hex digest of a file, read in blocks so large weight files do not fill memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(block_size), b""):
            h.update(block)
    return h.hexdigest()


def hash_tensors(h: Any, tensors: Iterable[tuple[str, "torch.Tensor"]],
                 header: Callable[[str, "torch.Tensor"], str] = lambda name, t: name) -> Any:
    """Feed named tensors to the ``hashlib`` object ``h``: for each, ``header(name, flat)`` and the
    raw bytes of the flattened CPU copy (so a digest names the exact weights, whatever device
    they sit on). The one loop behind every weights digest of the library (the frozen-base cache's
    :meth:`~unifar.caching.TokenStateCache.base_fingerprint`, the mean-pooling cache's
    :meth:`~unifar.evaluation.mean_pooling.MeanPoolingEncoder.cache_key`, a search index's
    :func:`~unifar.search.models.model_digest`), each with its own header and order. Returns ``h``.

    >>> import torch
    >>> by_hand = hashlib.sha256(b"w" + torch.ones(2).numpy().tobytes()).hexdigest()
    >>> hash_tensors(hashlib.sha256(), [("w", torch.ones(2))]).hexdigest() == by_hand
    True
    """
    import torch

    for name, t in tensors:
        flat = t.detach().to("cpu").contiguous().reshape(-1)
        h.update(header(name, flat).encode())
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return h


class IntegrityError(ValueError):
    """A file does not match what was recorded when it was written (corrupted, truncated, edited),
    or a folder's parts do not fit together."""


def file_digests(folder: str | os.PathLike[str], names: Iterable[str]) -> dict[str, dict[str, object]]:
    """``{name: {"sha256", "bytes"}}`` of the files ``names`` (paths relative to ``folder``)."""
    folder = Path(folder)
    return {n: {"sha256": sha256_file(folder / n), "bytes": (folder / n).stat().st_size} for n in sorted(names)}


def digest_mismatch(folder: str | os.PathLike[str], recorded: Mapping[str, Mapping[str, object]],
                    record_name: str) -> str | None:
    """Why the files of ``folder`` differ from ``recorded`` (:func:`file_digests` as stored in the
    file ``record_name``), naming the first file that differs; None when all match."""
    folder = Path(folder)
    for name, rec in sorted(recorded.items()):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing (listed in {record_name})"
        size = path.stat().st_size
        if "bytes" in rec and size != rec["bytes"]:
            return f"{path} has {size} bytes, {record_name} records {rec['bytes']} (truncated or changed)"
        if sha256_file(path) != rec.get("sha256"):
            return f"{path}: SHA-256 differs from {record_name} (corrupted or changed after saving)"
    return None


def atomic_file(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path`` (parent folders created), then
    rename it to ``path``; on any error the temporary file is removed and ``path`` is untouched,
    so a killed run never leaves a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike[str], obj: object, indent: int = 2) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (:func:`atomic_file`), so a killed script
    never leaves a torn results file."""
    import json

    text = json.dumps(obj, indent=indent, default=str) + "\n"
    return atomic_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


class FolderBusy(FileExistsError):
    """Another process holds a folder's lock (:func:`lock_folder`)."""


def lock_folder(folder: str | os.PathLike[str], what: str,
                error: type[FolderBusy] = FolderBusy) -> IO[str] | None:
    """Create ``folder`` and take its exclusive lock (``folder/.lock``, holding our pid), or raise
    ``error`` naming the folder, ``what`` holds it (e.g. "another training run") and its pid. The
    OS releases the lock when the process ends, so a crashed process leaves no stale lock. Returns
    the open lock file (None where the file system cannot lock: then nothing is locked)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        return None
    f = open(folder / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 -- held open while locked
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise error(f"{folder} is in use by {what} (pid {holder}); wait for it to end "
                    "or choose another folder") from None
    except OSError as err:  # a file system without flock (some network mounts): run unlocked
        f.close()
        logging.getLogger("unifar").warning("cannot lock %s (%s): nothing stops a second process "
                                            "writing into it", folder, err)
        return None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def unlock_folder(lock: IO[str] | None) -> None:
    """Release what :func:`lock_folder` took (the file stays: removing it would race)."""
    if lock is not None and fcntl is not None:
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        lock.close()
