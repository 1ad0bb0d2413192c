"""The on-disk FTU folder: writing it atomically (:func:`write_ftus`) and reading it back with
every check (:func:`load_ftus`, giving an :class:`FTUDataset`).

A folder of FTUs holds ``documents.jsonl`` (one document per line: ``{"id", "title",
"sentences", "labels", "source", "field"}``), ``ftus.jsonl`` (one
:class:`~unifar.datasets.ftu.FTU` per line, with its optional teacher list) and ``manifest.json`` (``schema_version``,
counts, provenance, the creating command, file hashes, :func:`~unifar.datasets.ftu_statistics.ftu_statistics`).
:func:`write_ftus` writes into a temporary sibling folder and renames it into place;
:func:`load_ftus` checks the schema version, every line, the counts and that every referenced
document exists, naming file and line in its errors.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from .. import __version__
from ..files import atomic_dir, sha256_file
from .ftu import FTU, validate_document
from .ftu_statistics import ftu_statistics
from .readers import iter_lines, read_json

__all__ = ["SCHEMA_VERSION", "READABLE_VERSIONS", "FTUDataset", "write_ftus", "load_ftus"]

#: Version 2 added the optional per-FTU ``teacher`` list (graded scores over candidates, chapter 3);
#: a version-1 folder (no teacher lists) still reads.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


# ----- on disk ----------------------------------------------------------------------------------
@dataclass
class FTUDataset:
    """FTUs with the documents they refer to and the folder's manifest."""

    ftus: list[FTU]
    documents: dict[str, dict[str, Any]]
    manifest: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ftus)

    def query_doc(self, ftu: FTU) -> dict[str, Any]:
        return self.documents[ftu.query]

    def statistics(self) -> dict[str, Any]:
        return ftu_statistics(self.ftus, self.documents)


def write_ftus(
    folder: str | os.PathLike[str],
    ftus: Sequence[FTU],
    documents: Mapping[str, Mapping[str, Any]],
    command: str | None = None,
    provenance: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    all_documents: bool = False,
    created_at: str | None = None,
) -> Path:
    """Write an FTU folder atomically and return its path.

    Only the documents the FTUs refer to (teacher candidates included) are written (in
    first-reference order) unless
    ``all_documents``. ``command`` (how the folder was made, e.g. a CLI line or notebook name)
    and ``provenance`` (free-form, e.g. ``{"labels": "llm:<model>", "triplets": "..."}``) go
    into the manifest verbatim: keep machine paths out of them.
    """
    folder = Path(folder)
    if folder.exists() and not overwrite:
        raise FileExistsError(f"{folder} exists; pass overwrite=True to replace it")
    order: dict[str, None] = {}
    for k, ftu in enumerate(ftus):
        for d in ftu.all_doc_ids():
            if d not in documents:
                raise KeyError(f"FTU {k} (query {ftu.query!r}) refers to document {d!r}, which is not in documents")
            order[d] = None
    if all_documents:
        order.update(dict.fromkeys(documents))
    docs = [validate_document(documents[d], f"document {d!r}") for d in order]

    def write(tmp: Path) -> None:
        with open(tmp / "documents.jsonl", "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
        with open(tmp / "ftus.jsonl", "w", encoding="utf-8") as f:
            for ftu in ftus:
                f.write(json.dumps(ftu.to_dict(), ensure_ascii=False) + "\n")

        stats = ftu_statistics(ftus, {d["id"]: d for d in docs})
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "format": "unifar-ftus",
            "created_by": f"unifar {__version__}",
            "created_at": created_at or datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
            "command": command,
            "provenance": dict(provenance or {}),
            "counts": {"ftus": len(ftus), "documents": len(docs)},
            "statistics": stats,
            "files": {
                name: {"sha256": sha256_file(tmp / name), "lines": n}
                for name, n in (("documents.jsonl", len(docs)), ("ftus.jsonl", len(ftus)))
            },
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    atomic_dir(folder, write)
    return folder


def _read_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"FTU folder file not found: {path}")
    for lineno, line in iter_lines(path):  # invalid UTF-8 names file:line
        if not line.strip():
            continue
        try:
            yield f"{path.name}:{lineno}", json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno}: malformed JSON ({err.msg})") from None


def load_ftus(folder: str | os.PathLike[str], verify_hashes: bool = True) -> FTUDataset:
    """Read an FTU folder written by :func:`write_ftus`, checking it thoroughly."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"FTU folder not found: {folder}")
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise FileNotFoundError(f"{mpath} missing: not an FTU folder")
    manifest = read_json(mpath)  # errors name the file (and line)
    if not isinstance(manifest, dict):
        raise ValueError(f"{mpath}: expected a JSON object (the folder's manifest), got {type(manifest).__name__}")  # noqa: TRY004 (a bad file: ValueError, as every load_ftus error)
    version = manifest.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{mpath}: schema_version {version!r} is not supported; this version of unifar reads "
            f"{' and '.join(map(str, READABLE_VERSIONS))}"
        )
    documents: dict[str, dict[str, Any]] = {}
    dpath = folder / "documents.jsonl"
    for where, rec in _read_jsonl(dpath):
        doc = validate_document(rec, f"{folder / where}")
        if doc["id"] in documents:
            raise ValueError(f"{folder / where}: duplicate document id {doc['id']!r}")
        documents[doc["id"]] = doc
    ftus: list[FTU] = []
    fpath = folder / "ftus.jsonl"
    for where, rec in _read_jsonl(fpath):
        try:
            ftu = FTU.from_dict(rec) if isinstance(rec, Mapping) else None
        except (ValueError, TypeError) as err:
            raise ValueError(f"{folder / where}: {err}") from None
        if ftu is None:
            raise ValueError(f"{folder / where}: expected a JSON object")
        for part, lists in (("positives", ftu.positives), ("negatives", ftu.negatives)):
            for f, ids in lists.items():
                for d in ids:
                    if d not in documents:
                        raise ValueError(f"{folder / where}: {part}[{f}] refers to unknown document {d!r} (not in {dpath.name})")
        if ftu.query not in documents:
            raise ValueError(f"{folder / where}: query refers to unknown document {ftu.query!r} (not in {dpath.name})")
        for d in ftu.teacher_ids():
            if d not in documents:
                raise ValueError(f"{folder / where}: teacher candidates refer to unknown document {d!r} (not in {dpath.name})")
        ftus.append(ftu)
    files = manifest.get("files", {})
    for name, n in (("documents.jsonl", len(documents)), ("ftus.jsonl", len(ftus))):
        expected = files.get(name, {})
        if "lines" in expected and expected["lines"] != n:
            raise ValueError(f"{folder / name}: {n} records but manifest.json says {expected['lines']} (truncated or edited?)")
        if verify_hashes and "sha256" in expected and sha256_file(folder / name) != expected["sha256"]:
            raise ValueError(f"{folder / name}: SHA-256 differs from manifest.json (file changed after writing)")
    return FTUDataset(ftus=ftus, documents=documents, manifest=manifest)

