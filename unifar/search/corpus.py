"""A user's corpus for ``unifar search``: JSONL, CSV or Parquet read with ``datasets``, every
row checked, errors naming ``file:line`` (JSONL, CSV) or ``file: row N`` (Parquet).

A row is a paper: ``id`` (string or integer, unique), ``title`` (may be empty) and its text,
either ``abstract`` (a string, split into sentences by :func:`unifar.text.split_sentences`; a
list is read as the sentences) or ``sentences`` (a list of strings). Optional ``labels``: one
facet per sentence (``background``/``method``/``result``, their short forms, CSFCube's
``*_label`` names, ``other`` or null for none), only next to a ``sentences`` list. A row without
text is an error (or, with ``allow_title_only``, encoded from its title alone; a row with
neither title nor text is always an error).

CSV cells are read as strings exactly as written: no NA or number guessing, so the id ``01``
stays ``01`` and a title ``NA`` stays ``NA``; an empty cell is an empty string. JSONL and CSV
must be UTF-8 text; an empty file, or a CSV with only a header row, is an error.
"""

from __future__ import annotations

import csv
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..datasets.readers import iter_jsonl
from ..facets import CSABSTRUCT_TO_FACET, CSFCUBE_LABEL_TO_FACET, FACET_ALIASES
from ..files import sha256_file
from ..text import split_sentences

__all__ = ["CorpusError", "Corpus", "FORMATS", "read_corpus", "check_documents", "facet_label"]

#: file suffix -> ``datasets`` builder
FORMATS = {
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_NO_FACET = {"other", "other_label", "none", ""}
_LABELS: dict[str, str | None] = {
    **CSABSTRUCT_TO_FACET,
    **CSFCUBE_LABEL_TO_FACET,
    **FACET_ALIASES,
    **{k: None for k in _NO_FACET},
}


class CorpusError(ValueError):
    """A corpus row (or file) that cannot be read; the message names the file and line or row."""


@dataclass
class Corpus:
    """Checked documents ``{"id", "title", "sentences", "labels"}`` (``labels`` None when the
    row gave none) in file order, and the file's SHA-256 (what an encoding was made of)."""

    path: Path
    documents: list[dict[str, Any]]
    sha256: str

    def __len__(self) -> int:
        return len(self.documents)


def facet_label(value: Any, where: str) -> str | None:
    """A sentence label as a facet name (None: no facet); unknown labels are errors.

    >>> facet_label("objective_label", "x"), facet_label("MT", "x"), facet_label(None, "x")
    ('background', 'method', None)
    """
    if value is None:
        return None
    key = str(value).strip().lower()
    if key not in _LABELS:
        raise CorpusError(
            f"{where}: unknown sentence label {value!r}; use background, method, "
            "result (or bg, mt, rs, CSFCube's *_label names), other or null"
        )
    return _LABELS[key]


def _text_of(row: Mapping[str, Any], where: str, allow_title_only: bool) -> list[str]:
    sents, abstract = row.get("sentences"), row.get("abstract")
    if isinstance(abstract, (list, tuple)) and sents is None:
        sents, abstract = abstract, None  # CSFCube-style: the abstract as a list of sentences
    if sents is not None:
        if isinstance(sents, str) or not isinstance(sents, Sequence):
            raise CorpusError(f"{where}: field 'sentences' must be a list of strings")
        if any(not isinstance(s, str) for s in sents):
            raise CorpusError(f"{where}: field 'sentences' holds a non-string item")
        out = [" ".join(s.split()) for s in sents]
    elif abstract is not None:
        if not isinstance(abstract, str):
            raise CorpusError(
                f"{where}: field 'abstract' must be a string, got {type(abstract).__name__}"
            )
        out = split_sentences(abstract)
    else:
        out = []
    if not any(out) and not allow_title_only:
        raise CorpusError(
            f"{where}: no text: give a non-empty 'abstract' or 'sentences' "
            "(or pass --allow-title-only to encode papers from their title alone)"
        )
    return out


def _id_type_error(where: str, pid: Any) -> str:
    return (
        f"{where}: 'id' must be a string or an integer, got {type(pid).__name__} {pid!r} "
        "(quote it: ids are compared as text)"
    )


def _check_row(row: Mapping[str, Any], where: str, allow_title_only: bool) -> dict[str, Any]:
    """One checked document of one row (see the module docstring)."""
    pid = row.get("id")
    if isinstance(pid, (bool, float)):
        raise CorpusError(_id_type_error(where, pid))
    if pid is None or not str(pid).strip():
        raise CorpusError(f"{where}: missing or empty 'id' (a string or an integer)")
    title = row.get("title") or ""
    if not isinstance(title, str):
        raise CorpusError(f"{where}: field 'title' must be a string, got {type(title).__name__}")
    sentences = _text_of(row, where, allow_title_only)
    if not any(sentences) and not title.strip():  # only reachable with allow_title_only
        raise CorpusError(f"{where}: no title and no text: nothing to encode")
    labels = row.get("labels")
    if labels is not None:
        if row.get("sentences") is None and not isinstance(row.get("abstract"), (list, tuple)):
            raise CorpusError(f"{where}: 'labels' need a 'sentences' list (one label per sentence)")
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise CorpusError(f"{where}: 'labels' must be a list (one label per sentence)")
        if len(labels) != len(sentences):
            raise CorpusError(f"{where}: {len(sentences)} sentences but {len(labels)} labels")
        labels = [facet_label(x, where) for x in labels]
    keep = [i for i, s in enumerate(sentences) if s]  # empty sentences carry nothing
    return {
        "id": str(pid).strip(),
        "title": " ".join(title.split()),
        "sentences": [sentences[i] for i in keep],
        "labels": [labels[i] for i in keep] if labels is not None else None,
    }


def check_documents(
    rows: Sequence[Mapping[str, Any]],
    where: Callable[[int], str] | None = None,
    allow_title_only: bool = False,
    taken: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Checked documents of ``rows``; ``where(i)`` names row ``i`` in errors; ids must differ from
    each other and from ``taken`` (the ids already indexed)."""
    where = where or (lambda i: f"document {i}")
    out = []
    seen = {p: None for p in taken}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise CorpusError(f"{where(i)}: expected a dict, got {type(row).__name__}")
        doc = _check_row(row, where(i), allow_title_only)
        if doc["id"] in seen:
            first = seen[doc["id"]]
            also = f" (first at {where(first)})" if first is not None else " (already in the index)"
            raise CorpusError(f"{where(i)}: duplicate id {doc['id']!r}{also}")
        seen[doc["id"]] = i
        out.append(doc)
    return out


def _csv_records(f: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """``(first line, cells)`` of each CSV record, skipping the blank lines that pandas skips
    (so the n-th record here is the n-th row ``datasets`` reads)."""
    reader = csv.reader(f)
    start = 1
    for cells in reader:
        if cells and (len(cells) > 1 or cells[0].strip()):
            yield start, cells
        start = reader.line_num + 1


def _row_lines(path: Path, kind: str) -> Callable[[int], str]:
    """``i -> "file:line N"`` for the i-th row, computed on first use (blank JSONL lines and
    multi-line CSV fields make the row index differ from the line)."""
    lines: list[int] = []

    def where(i: int) -> str:
        if kind == "parquet":
            return f"{path}: row {i + 1}"
        if not lines:
            with open(path, encoding="utf-8", newline="") as f:
                if kind == "json":
                    lines.extend(n for n, text in enumerate(f, start=1) if text.strip())
                else:
                    lines.extend(n for n, _ in itertools.islice(_csv_records(f), 1, None))
        return f"{path}:line {lines[i]}" if i < len(lines) else f"{path}: row {i + 1}"

    return where


def _utf8_error(path: Path) -> CorpusError:
    """The first line that is not UTF-8, read as bytes (the codec's error names no line)."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                column = len(raw[: bad.start].decode("utf-8")) + 1  # characters, as editors count
                return CorpusError(
                    f"{path}:line {lineno}: not UTF-8 text (byte 0x{raw[bad.start]:02x} at "
                    f"column {column}); save the file as UTF-8"
                )
    return CorpusError(f"{path}: not UTF-8 text; save the file as UTF-8")


def _check_text(path: Path, kind: str) -> int:
    """Check that a JSONL or CSV file is UTF-8 and has rows, before ``datasets`` reads it (its
    errors name no line, and it stores undecodable JSON bytes as they are); for CSV, the number
    of columns in the header."""
    blank = True
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for chunk in iter(lambda: f.read(1 << 20), ""):
                blank = blank and not chunk.strip()
    except UnicodeDecodeError:
        raise _utf8_error(path) from None
    if blank:
        raise CorpusError(f"{path}: the corpus is empty (no rows)")
    if kind != "csv":
        return 0
    with open(path, encoding="utf-8", newline="") as f:
        records = _csv_records(f)
        header = next(records, (0, []))[1]
        if next(records, None) is None:
            raise CorpusError(f"{path}: the corpus is empty (a header row and no rows)")
    return len(header)


def _load(path: Path, kind: str, columns: int) -> Any:
    """The file as a ``datasets.Dataset`` (in memory; its cache in a temporary folder); CSV cells
    as the strings written (``columns``: how many the header names)."""
    import datasets

    datasets.disable_progress_bars()
    options: dict[str, Any] = {}
    if kind == "csv":
        # pandas would guess types ("01" -> 1, "1.10" -> 1.1) and NAs ("NA", "null" -> missing);
        # CsvConfig has no dtype, and converters by position also work for unnamed columns
        converters = {i: str for i in range(columns)}
        options = {"converters": converters, "keep_default_na": False, "na_filter": False}
    with tempfile.TemporaryDirectory() as cache:
        try:
            return datasets.load_dataset(
                kind, data_files=str(path), split="train", cache_dir=cache, keep_in_memory=True,
                **options,
            )
        except Exception as err:  # datasets names neither the line nor, often, the file
            if "corresponds to no data" in str(err):  # e.g. a Parquet file with no rows
                raise CorpusError(f"{path}: the corpus is empty (no rows)") from None
            if kind == "json":
                for _ in iter_jsonl(path):  # raises ValueError naming file:line
                    pass
            cause = err.__cause__ or err.__context__ or err
            raise CorpusError(f"{path}: cannot be read as {kind}: {cause}") from None


def _float_id_line(path: Path) -> None:
    """Name the JSONL line whose id is a decimal number (one such id makes ``datasets`` read
    the whole column as floats, so the row checks would blame the first row)."""
    for lineno, rec in iter_jsonl(path):
        if isinstance(rec.get("id"), float):
            raise CorpusError(_id_type_error(f"{path}:line {lineno}", rec["id"]))


def read_corpus(path: str | os.PathLike[str], allow_title_only: bool = False) -> Corpus:
    """Read and check a corpus file (module docstring); the format comes from the suffix."""
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix!r}; use {', '.join(sorted(FORMATS))}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    if path.stat().st_size == 0:
        raise CorpusError(f"{path}: the corpus is empty (no rows)")
    columns = _check_text(path, kind) if kind in ("json", "csv") else 0
    ds = _load(path, kind, columns)
    if len(ds) == 0:
        raise CorpusError(f"{path}: the corpus is empty (no rows)")
    if "id" not in ds.column_names:
        raise CorpusError(f"{path}: no 'id' column (columns: {', '.join(ds.column_names)})")
    if not {"abstract", "sentences"} & set(ds.column_names) and not allow_title_only:
        raise CorpusError(
            f"{path}: no 'abstract' or 'sentences' column (columns: {', '.join(ds.column_names)})"
        )
    if kind == "json" and getattr(ds.features["id"], "dtype", "").startswith("float"):
        _float_id_line(path)
    docs = check_documents(ds, _row_lines(path, kind), allow_title_only)
    return Corpus(path=path, documents=docs, sha256=sha256_file(path))
