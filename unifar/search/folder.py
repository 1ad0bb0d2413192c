"""An index folder on disk: what it holds, who may write it, and how a reader checks it.

::

    DIR/manifest.json     (encode) model, corpus and documents digests, chunk digests, encoding id
    DIR/documents.jsonl   (encode) id, title, sentences of every paper
    DIR/chunks/           (encode) embeddings and sentence labels
    DIR/index/            (index)  FAISS and BM25 files; index.json: the encoding id it was built
                                   from and every file's size and SHA-256
    DIR/.lock             held by the process writing DIR
    DIR/.verified.json    which files a reader has already hashed, by their stat (see below)

The folder is one versioned unit:

* **one writer** -- ``encode``, ``index`` and :meth:`~unifar.search.corpus_index.Index.save` hold
  ``DIR/.lock`` (:func:`unifar.files.lock_folder`) while they write;
* **nothing of the user's is touched** -- a writer writes only into a new or empty folder, or one
  that holds nothing but the entries above, and deletes only those entries;
* **a stale part is refused** -- the manifest's *encoding id* digests the documents and the chunks;
  ``index/`` records the id it was built from, so an index beside another encoding (encoded
  again since) is refused, not searched;
* **a damaged file is an error, never a ranking** -- readers check every file's size and SHA-256
  against what its writer recorded (:func:`verify_encoding`, :func:`verify_index`), and every
  error names the command that repairs the folder. A file is hashed on its first load; later
  loads skip it while its size, modification and change times and inode are those it had when
  it was hashed (any write changes its change time), unless it was modified within
  :data:`RACY_SECONDS` of its hashing (a write in the same clock tick keeps the times: git's
  "racy" rule). Hashing runs at about 1 GB/s on one core.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..files import (LOCK_NAME, IntegrityError, atomic_file, digest_mismatch, display_path, lock_folder,
                     sha256_file, unlock_folder)

__all__ = [
    "MANIFEST", "DOCUMENTS", "CHUNKS", "INDEX_DIR", "INDEX_JSON", "FORMAT", "VERSION",
    "foreign_entries", "writing", "clear", "read_manifest", "encoding_id", "encode_command",
    "verify_encoding", "read_index_meta", "verify_index",
]

MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks"
INDEX_DIR = "index"
INDEX_JSON = "index.json"
FORMAT = "unifar-search-encoding"
#: 2: the manifest records the documents' digest and the encoding id
VERSION = 2
VERIFIED = ".verified.json"
#: a file modified less than this before it was hashed is hashed again at the next load
RACY_SECONDS = 2.0
_OURS = (MANIFEST, DOCUMENTS, CHUNKS, INDEX_DIR, LOCK_NAME, VERIFIED)


def foreign_entries(folder: Path) -> list[str]:
    """Names in ``folder`` that no unifar search command writes (sorted); temporary files of an
    interrupted atomic write (``.tmp-*``, ``.old-*``) count as ours."""
    if not folder.is_dir():
        return []
    return sorted(e.name for e in folder.iterdir()
                  if e.name not in _OURS and not e.name.startswith((".tmp-", ".old-")))


def _check_writable(folder: Path, option: str) -> None:
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{option} {folder}: is a file, not a folder; choose a new folder")
    foreign = foreign_entries(folder)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise FileExistsError(
            f"{option} {folder}: holds files unifar did not write ({shown}); nothing in it is "
            "replaced or deleted: choose an empty or new folder")


@contextmanager
def writing(folder: str | os.PathLike[str], option: str = "--out") -> Iterator[Path]:
    """Check that ``folder`` is new, empty or unifar's (module docstring), create it and hold its
    lock for the body; ``option`` names the folder in errors."""
    folder = Path(folder)
    _check_writable(folder, option)
    created = not folder.exists()
    lock = lock_folder(folder, "another unifar encode, index or Index.save")
    try:
        yield folder
    except BaseException:
        if created and [e.name for e in folder.iterdir()] == [LOCK_NAME]:  # leave no empty folder
            unlock_folder(lock)
            lock = None
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        unlock_folder(lock)


def clear(folder: Path, keep: str | None = None) -> None:
    """Remove the encoding and the index of ``folder`` (only unifar's entries, and leftovers of
    interrupted writes other than ``keep``; under its lock)."""
    (folder / MANIFEST).unlink(missing_ok=True)  # first: a half-cleared folder is no encoding
    for name in (INDEX_DIR, CHUNKS, DOCUMENTS, VERIFIED):
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for entry in folder.iterdir():
        if entry.name.startswith((".tmp-", ".old-")) and entry.name != keep:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of ``folder``; a clear error for a missing, damaged, foreign or old one."""
    path = folder / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{display_path(folder)} is not an encoding folder: no {MANIFEST} "
            "(make one with `unifar encode CORPUS --model M --out DIR`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IntegrityError(
            f"{display_path(path)}: not readable JSON ({err}): the file is truncated or damaged; "
            f"encode the corpus again (`unifar encode CORPUS --model M --out DIR --overwrite`)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise IntegrityError(f"{display_path(path)}: not a unifar search encoding (format {got!r})")
    if manifest.get("version") != VERSION:
        raise IntegrityError(
            f"{display_path(path)}: written by another version of unifar (manifest version "
            f"{manifest.get('version')}, this one reads {VERSION}); encode the corpus again with --overwrite")
    return manifest


def encoding_id(manifest: dict[str, Any]) -> str:
    """Digest (hex, 24) of what an encoding is: its signature, documents and chunks.

    >>> encoding_id({"signature": {}, "documents_file": {"sha256": "a"}, "chunks": [{"sha256": "b"}]})
    'c39195eb8f06e4745f3addae'
    """
    parts = {"signature": manifest["signature"], "documents": manifest["documents_file"]["sha256"],
             "chunks": [c["sha256"] for c in manifest["chunks"]]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def encode_command(folder: Path, manifest: dict[str, Any]) -> str:
    """The command that (re)makes the encoding of ``folder``, from what its manifest records."""
    corpus = (manifest.get("corpus") or {}).get("file")
    spec = (manifest.get("model") or {}).get("spec") or "M"
    if corpus is None:  # written by Index.save
        return "Index.save of the index again"
    options = " --no-labels" if (manifest.get("labels") or {}).get("source") == "none" else ""
    if manifest.get("chunk_size", 1000) != 1000:
        options += f" --chunk-size {manifest['chunk_size']}"
    return f"`unifar encode {corpus} --model {display_path(spec)} --out {display_path(folder)}{options}`"


def verify_encoding(folder: Path, manifest: dict[str, Any], check: bool = True) -> None:
    """Sizes (always) and SHA-256 (``check``) of the documents and every chunk against the
    manifest; an :class:`~unifar.files.IntegrityError` naming the file and the repair."""
    if manifest.get("encoding_id") != encoding_id(manifest):
        raise IntegrityError(f"{display_path(folder / MANIFEST)}: its encoding id does not match its "
                             f"contents (edited by hand?); run {encode_command(folder, manifest)} "
                             "with --overwrite")
    recorded = {DOCUMENTS: manifest["documents_file"], **{c["file"]: c for c in manifest["chunks"]}}
    bad = _mismatch(folder, recorded, check, folder)
    if bad:
        raise IntegrityError(
            f"{bad}; run {encode_command(folder, manifest)} again: it re-encodes what is damaged")


def _mismatch(folder: Path, recorded: dict[str, Any], check: bool, root: Path) -> str | None:
    """Why a file of ``folder`` differs from ``recorded``: sizes, then (``check``) SHA-256 of the
    files not hashed since they last changed (``root``'s :data:`VERIFIED`; module docstring)."""
    for name, rec in sorted(recorded.items()):  # sizes first: cheap, and they catch truncation
        path = folder / name
        if not path.is_file() or path.stat().st_size != rec["bytes"]:
            return digest_mismatch(folder, {name: rec}, MANIFEST)
    if not check:
        return None
    stamps = _read_stamps(root)
    prefix = folder.relative_to(root).as_posix() + "/" if folder != root else ""
    fresh = {}
    for name, rec in sorted(recorded.items()):
        key, st = prefix + name, (folder / name).stat()
        stat = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        if stamps.get(key) == [*stat, rec["sha256"]]:
            continue
        if sha256_file(folder / name) != rec["sha256"]:
            return digest_mismatch(folder, {name: rec}, MANIFEST)
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_SECONDS * 1e9:
            fresh[key] = [*stat, rec["sha256"]]
    if fresh:
        _write_stamps(root, {**stamps, **fresh})
    return None


def _read_stamps(root: Path) -> dict[str, list[Any]]:
    try:
        stamps = json.loads((root / VERIFIED).read_text(encoding="utf-8"))
        return stamps if isinstance(stamps, dict) else {}
    except (OSError, ValueError):  # none yet, or damaged: hash everything again
        return {}


def _write_stamps(root: Path, stamps: dict[str, list[Any]]) -> None:
    text = json.dumps(stamps)
    try:  # best effort: a read-only folder is searched, only hashed again next time
        atomic_file(root / VERIFIED, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError:
        pass


def read_index_meta(folder: Path) -> dict[str, Any]:
    """``DIR/index/index.json``; a clear error naming ``unifar index`` when it is missing or damaged."""
    path = folder / INDEX_DIR / INDEX_JSON
    fix = f"run `unifar index {display_path(folder)}`"
    if not path.is_file():
        raise FileNotFoundError(f"{display_path(folder)} has no index yet: {fix}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["encoding_id"], meta["files"]  # noqa: B018 -- present in every index this version writes
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise IntegrityError(f"{display_path(path)}: damaged or written by another version of unifar "
                             f"({type(err).__name__}: {err}); {fix} again") from None
    return meta


def verify_index(folder: Path, manifest: dict[str, Any], check: bool = True) -> dict[str, Any]:
    """``index.json`` once checked: built from the encoding beside it (its encoding id), and every
    index file's size (always) and SHA-256 (``check``) as recorded."""
    meta = read_index_meta(folder)
    fix = f"run `unifar index {display_path(folder)}` again"
    if meta["encoding_id"] != manifest.get("encoding_id"):
        raise IntegrityError(
            f"{display_path(folder / INDEX_DIR)} was built from another encoding than the one in "
            f"{display_path(folder)} (encoded again since): {fix}")
    bad = _mismatch(folder / INDEX_DIR, meta["files"], check, folder)
    if bad:
        raise IntegrityError(f"{bad.replace(MANIFEST, INDEX_JSON)}; {fix}")
    return meta
