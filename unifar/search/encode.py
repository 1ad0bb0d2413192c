"""Encoding a corpus for search: UniFAR facet embeddings and sentence labels, in chunks, resumable.

An encoding folder holds::

    manifest.json          model (spec, weights digest), corpus digest, counts, chunk list
    documents.jsonl        id, title, sentences of every paper, in corpus order
    chunks/chunk-00000.safetensors   embeddings [n, F, h] float32, labels [sentences] int8
                                     (facet index, -1 = none), sentence_counts [n] int32

Each chunk and then the manifest are written atomically (:func:`unifar.files.atomic_file`);
a run that stops keeps every finished chunk, and the same command continues from the first
missing one; a chunk or ``documents.jsonl`` whose digest no longer matches the manifest is
written again. The manifest's ``complete`` turns true after the last chunk, with the *encoding
id* that ``index/`` records. A folder holding another corpus, model or chunk size is refused
(``--overwrite``: its encoding and index are removed first), never mixed; the folder's rules
(one writer, no user file touched) are :mod:`unifar.search.folder`'s.

The model is a UniFAR checkpoint folder or a base encoder name (``minilm``: an untrained UniFAR
on it, identity init, as the evaluation's ``unifar-untrained``); its digest
(:func:`unifar.search.models.model_digest`) lets a search refuse a query encoder other than the
index's.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..facets import FACETS
from ..files import atomic_file, display_path, sha256_file, write_json
from ..rhetoric.context_labeller import FORMAT as CONTEXT_FORMAT, InContextLabeller
from ..rhetoric.labeller import CONFIG_NAME, FacetLabeller
from .folder import (CHUNKS, DOCUMENTS, FORMAT, MANIFEST, VERSION, clear, encoding_id, read_manifest,
                     verify_encoding, writing)
from .models import load_model, model_digest, model_facts, model_spec  # noqa: F401 -- re-exported

if TYPE_CHECKING:
    from ..encoding import FacetEncoding
    from ..model import UniFAR
    from .corpus import Corpus

__all__ = ["MANIFEST", "DOCUMENTS", "DEFAULT_LABELLER", "Encoding", "load_model", "model_digest",
           "model_facts", "load_labeller", "shares_pass", "label_documents", "encode_corpus", "read_encoding",
           "write_encoding"]

#: the labeller that ships with the package: a linear head over the in-context sentence states
#: of UniFAR's pass on the frozen shipped MiniLM (an InContextLabeller: papers encoded with that
#: base are labelled from their own encoding pass), trained on CSAbstruct by
#: ``benchmarks/studies/default_labeller.py`` (its scores beside chapter 2's fine-tuned labeller:
#: ``results/search/default_labeller.json``, shown in chapter 2)
DEFAULT_LABELLER = Path(__file__).resolve().parent / "default_labeller"


@dataclass
class Encoding:
    """An encoding folder read back: documents (with ``labels``), embeddings [N, F, h], manifest."""

    documents: list[dict[str, Any]]
    embeddings: torch.Tensor
    manifest: dict[str, Any]


def load_labeller(path: str | os.PathLike[str] | None) -> FacetLabeller | InContextLabeller:
    """The offline sentence labeller in ``path`` (a
    :class:`~unifar.rhetoric.labeller.FacetLabeller`, or an
    :class:`~unifar.rhetoric.context_labeller.InContextLabeller` by its ``format``), by
    default the shipped one (:data:`DEFAULT_LABELLER`; chapter 2's fine-tuned one
    is ``artifacts/ch02/<profile>/labeller``); a clear error naming the options when there is none."""
    folder = Path(path) if path is not None else DEFAULT_LABELLER
    if not (folder / CONFIG_NAME).is_file():
        given = f"--labeller {path}: " if path is not None else ""
        raise FileNotFoundError(
            f"{given}no sentence labeller in {folder}; facet BM25 needs sentence labels: give them "
            "in the corpus ('sentences' + 'labels'), pass --labeller DIR (a folder written by "
            "FacetLabeller.save, e.g. the book's chapter 2 makes artifacts/ch02/default/labeller), "
            "or pass --no-labels (dense search only, BM25 over title + abstract)"
            + ("; the shipped default labeller is missing: reinstall unifar" if path is None else "")
        )
    cfg = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    if cfg.get("format") == CONTEXT_FORMAT:  # a head over UniFAR's own sentence states
        return InContextLabeller.load(folder)
    return FacetLabeller.load(folder)


def shares_pass(labeller: FacetLabeller | InContextLabeller | None, model: UniFAR) -> bool:
    """Whether ``labeller`` labels from ``model``'s own encoding pass (an
    :class:`~unifar.rhetoric.context_labeller.InContextLabeller` on the same base)."""
    shares = getattr(labeller, "shares_pass_with", None)  # duck-typed: no import for a FacetLabeller
    return shares is not None and bool(shares(model))


def label_documents(docs: Sequence[dict[str, Any]], labeller: FacetLabeller | InContextLabeller | None,
                    encoding: FacetEncoding | None = None, model: UniFAR | None = None) -> list[list[str | None]]:
    """Each document's labels: its own when given, else the labeller's, else none. ``encoding``
    (``model``'s, of all of ``docs``, with sentence states) lets an in-context labeller label from
    that pass."""
    todo = [k for k, d in enumerate(docs) if d["labels"] is None]
    if not todo or labeller is None:
        found = []
    elif encoding is not None and shares_pass(labeller, model):
        every = labeller.label_documents(docs, encoding, model)
        found = [every[k] for k in todo]
    else:
        found = labeller.label_documents([docs[k] for k in todo])
    it = iter(found)
    out = []
    for d in docs:
        if d["labels"] is not None:
            out.append(list(d["labels"]))
        else:
            out.append(next(it) if labeller is not None else [None] * len(d["sentences"]))
    return out


def _chunk_tensors(
    emb: torch.Tensor, labels: Sequence[Sequence[str | None]]
) -> dict[str, torch.Tensor]:
    code = {f: i for i, f in enumerate(FACETS)}
    flat = [code.get(x, -1) if x is not None else -1 for doc in labels for x in doc]
    return {
        "embeddings": emb.float().contiguous(),
        "labels": torch.tensor(flat, dtype=torch.int8),
        "sentence_counts": torch.tensor([len(x) for x in labels], dtype=torch.int32),
    }


def _write_chunk(folder: Path, k: int, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    from safetensors.torch import save_file

    name = f"{CHUNKS}/chunk-{k:05d}.safetensors"
    atomic_file(folder / name, lambda tmp: save_file(tensors, str(tmp)))
    return {
        "file": name,
        "rows": int(tensors["embeddings"].shape[0]),
        "sha256": sha256_file(folder / name),
        "bytes": (folder / name).stat().st_size,
    }


def _write_documents(folder: Path, docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Write ``documents.jsonl``; returns its ``{"sha256", "bytes"}`` for the manifest."""
    data = "".join(
        json.dumps({k: d[k] for k in ("id", "title", "sentences")}, ensure_ascii=False) + "\n"
        for d in docs
    ).encode("utf-8")
    atomic_file(folder / DOCUMENTS, lambda tmp: tmp.write_bytes(data))
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _intact(folder: Path, name: str, rec: dict[str, Any] | None) -> bool:
    """Whether ``folder/name`` is the file ``rec`` records (size, then SHA-256)."""
    path = folder / name
    return (rec is not None and path.is_file() and path.stat().st_size == rec["bytes"]
            and sha256_file(path) == rec["sha256"])


def _counts(docs: Sequence[dict[str, Any]], labels: torch.Tensor) -> dict[str, Any]:
    per = torch.bincount(labels.long() + 1, minlength=len(FACETS) + 1).tolist()
    return {
        "documents": len(docs),
        "sentences": int(labels.numel()),
        "unlabelled_sentences": per[0],
        "labelled_sentences": dict(zip(FACETS, per[1:])),
    }


def _start(out: Path, signature: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """The manifest to continue from (None: start afresh); refuses a folder of another run.
    Under the folder's lock."""
    if not (out / MANIFEST).is_file():
        return None  # a new or empty folder, or one holding only unifar's leftovers
    try:
        manifest = read_manifest(out)
    except ValueError:
        if overwrite:
            return None
        raise
    differ = [k for k in signature if manifest.get("signature", {}).get(k) != signature[k]]
    if differ and not overwrite:
        raise FileExistsError(
            f"--out {out}: holds an encoding with another {', '.join(differ)} "
            f"({out / MANIFEST}); choose another folder or pass --overwrite"
        )
    return None if differ else manifest


def encode_corpus(
    corpus: Corpus,
    model: UniFAR,
    out: str | os.PathLike[str],
    *,
    spec: str | None = None,
    labeller: FacetLabeller | InContextLabeller | None = None,
    chunk_size: int = 1000,
    batch_size: int = 32,
    bf16: bool | None = None,
    progress: bool = True,
    overwrite: bool = False,
    on_chunk: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Encode ``corpus`` (:class:`unifar.search.corpus.Corpus`) into ``out`` chunk by chunk,
    continuing an interrupted run (and repairing damaged files); returns the manifest.
    ``on_chunk(k)`` runs after chunk ``k`` is saved (tests interrupt there)."""
    if chunk_size < 1:
        raise ValueError(f"--chunk-size must be positive, got {chunk_size}")
    if batch_size < 1:
        raise ValueError(f"--batch-size must be positive, got {batch_size}")
    out = Path(out)
    docs = corpus.documents
    unlabelled = [i for i, d in enumerate(docs) if d["labels"] is None]
    source = "corpus" if not unlabelled else "labeller" if labeller is not None else "none"
    facts = model_facts(model, spec)
    signature = {
        "corpus_sha256": corpus.sha256,
        "model_digest": facts["digest"],
        "chunk_size": chunk_size,
        "labels": source,
    }
    with writing(out, "--out"):
        manifest = _start(out, signature, overwrite)
        if manifest is None:
            clear(out)  # --overwrite, or leftovers of a run that stopped before its manifest
            manifest = _new_manifest(corpus, out, signature, facts, labeller)
        elif not _intact(out, DOCUMENTS, manifest["documents_file"]):
            manifest["documents_file"] = _write_documents(out, docs)  # damaged: the corpus is the same
            manifest["complete"] = False
        return _encode_chunks(docs, model, out, manifest, labeller, chunk_size, batch_size, bf16,
                              progress, on_chunk)


def _encode_chunks(docs: Sequence[dict[str, Any]], model: UniFAR, out: Path, manifest: dict[str, Any],
                   labeller: FacetLabeller | InContextLabeller | None, chunk_size: int, batch_size: int, bf16: bool | None,
                   progress: bool, on_chunk: Callable[[int], None] | None) -> dict[str, Any]:
    """Encode every chunk not on disk as the manifest records it, then complete the manifest."""
    from tqdm import tqdm

    done = {c["file"]: c for c in manifest["chunks"]}
    shared = shares_pass(labeller, model)
    starts = range(0, len(docs), chunk_size)
    bar = tqdm(total=len(docs), desc="encoding", unit="doc", disable=not progress)
    t0, encoded = time.perf_counter(), 0
    for k, s in enumerate(starts):
        part = docs[s : s + chunk_size]
        name = f"{CHUNKS}/chunk-{k:05d}.safetensors"
        if _intact(out, name, done.get(name)):
            bar.update(len(part))
            continue
        manifest["complete"] = False  # until every chunk is back (a repair of a complete one too)
        emb = model.encode_documents(part, batch_size=batch_size, show_progress=False, bf16=bf16,
                                     sentence_states=shared)  # labels from this very pass
        labels = label_documents(part, labeller, emb if shared else None, model)
        done[name] = _write_chunk(out, k, _chunk_tensors(emb.embeddings, labels))
        manifest["chunks"] = [done[n] for n in sorted(done)]
        write_json(out / MANIFEST, manifest)
        encoded += len(part)
        bar.update(len(part))
        if on_chunk is not None:
            on_chunk(k)
    bar.close()
    if manifest.get("complete"):  # nothing was missing or damaged
        return {**manifest, "already_complete": True}
    seconds = time.perf_counter() - t0
    _, labels, _ = _chunk_parts(out, manifest["chunks"], embeddings=False)
    manifest.update(
        complete=True,
        encoding_id=encoding_id(manifest),
        counts=_counts(docs, labels),
        last_run={
            "documents_encoded": encoded,
            "seconds": round(seconds, 2),
            "documents_per_second": round(encoded / seconds, 2) if encoded else None,
            "device": str(model.device),
        },
    )
    write_json(out / MANIFEST, manifest)
    return manifest


def _new_manifest(corpus: Corpus, out: Path, signature: dict[str, Any], facts: dict[str, Any],
                  labeller: FacetLabeller | InContextLabeller | None) -> dict[str, Any]:
    """Start an encoding folder: the documents and an empty manifest."""
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "signature": signature,
        "model": facts,
        "corpus": {"file": display_path(corpus.path), "sha256": corpus.sha256},
        "labels": {"source": signature["labels"], "labeller": _labeller_name(labeller)},
        "chunk_size": signature["chunk_size"],
        "documents_file": _write_documents(out, corpus.documents),
        "chunks": [],
        "complete": False,
    }
    write_json(out / MANIFEST, manifest)
    return manifest


def _labeller_name(labeller: FacetLabeller | InContextLabeller | None) -> str | None:
    if labeller is None:
        return None
    if hasattr(labeller, "shares_pass_with"):
        return f"InContextLabeller(linear, base={labeller.model.config.base_model})"
    enc = getattr(labeller, "encoder", None)
    return f"FacetLabeller({labeller.head}, encoder={getattr(enc, 'name', None)})"


def _chunk_parts(
    folder: Path,
    chunks: Sequence[dict[str, Any]],
    embeddings: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Embeddings (None unless ``embeddings``), flat labels and sentence counts of all chunks."""
    from safetensors import safe_open

    emb, labels, counts = [], [], []
    for c in chunks:
        with safe_open(str(folder / c["file"]), framework="pt") as f:
            labels.append(f.get_tensor("labels"))
            counts.append(f.get_tensor("sentence_counts"))
            if embeddings:
                emb.append(f.get_tensor("embeddings"))
    cat = lambda xs, dtype: torch.cat(xs) if xs else torch.empty(0, dtype=dtype)
    return (
        cat(emb, torch.float32) if embeddings else None,
        cat(labels, torch.int8),
        cat(counts, torch.int32),
    )


def read_encoding(folder: str | os.PathLike[str], check: bool = True) -> Encoding:
    """Read a complete encoding folder, its files checked against the manifest (sizes always,
    SHA-256 with ``check``: :func:`unifar.search.folder.verify_encoding`)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    chunks = manifest["chunks"]
    if not manifest.get("complete"):
        n = sum(c["rows"] for c in chunks)
        total = len((folder / DOCUMENTS).read_bytes().splitlines()) if (folder / DOCUMENTS).is_file() else "?"
        raise ValueError(
            f"{folder / MANIFEST}: the encoding is incomplete ({n} of {total} documents); "
            "run the same `unifar encode` command again to finish it"
        )
    verify_encoding(folder, manifest, check)
    docs = _read_documents(folder / DOCUMENTS)
    emb, labels, counts = _chunk_parts(folder, chunks)
    if len(emb) != len(docs) or counts.tolist() != [len(d["sentences"]) for d in docs]:
        raise ValueError(f"{folder / MANIFEST}: the chunks do not match {DOCUMENTS}")
    names = [None, *FACETS]
    for d, lab in zip(docs, torch.split(labels.long() + 1, counts.tolist())):
        d["labels"] = [names[i] for i in lab.tolist()]
    return Encoding(documents=docs, embeddings=emb, manifest=manifest)


def _read_documents(path: Path) -> list[dict[str, Any]]:
    """``documents.jsonl`` (already checked against its digest when ``check``)."""
    docs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            docs.append(json.loads(line))
        except ValueError as err:
            raise ValueError(f"{path}:line {n}: damaged ({err}); encode the corpus again") from None
    return docs


def write_encoding(
    folder: Path,
    docs: Sequence[dict[str, Any]],
    embeddings: torch.Tensor,
    facts: dict[str, Any],
    source: str,
) -> dict[str, Any]:
    """Write documents (with labels) and their embeddings as one-chunk encoding (Index.save)."""
    documents_file = _write_documents(folder, docs)
    labels = [d["labels"] or [None] * len(d["sentences"]) for d in docs]
    tensors = _chunk_tensors(embeddings, labels)
    chunk = _write_chunk(folder, 0, tensors)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "signature": {
            "corpus_sha256": None,
            "model_digest": facts["digest"],
            "chunk_size": len(docs),
            "labels": source,
        },
        "model": facts,
        "corpus": {"file": None, "sha256": None},
        "labels": {"source": source, "labeller": None},
        "chunk_size": len(docs),
        "documents_file": documents_file,
        "chunks": [chunk],
        "complete": True,
        "counts": _counts(docs, tensors["labels"]),
    }
    manifest["encoding_id"] = encoding_id(manifest)
    write_json(folder / MANIFEST, manifest)
    return manifest
