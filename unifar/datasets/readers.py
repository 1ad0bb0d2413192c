"""File readers shared by the corpus loaders: repository data paths and JSON / JSON-lines
readers whose errors (malformed JSON, invalid UTF-8) name ``file:line``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

__all__ = ["data_root", "resolve_dir", "find_file", "read_text", "read_json", "iter_lines", "iter_jsonl", "require"]


def data_root() -> Path:
    """The repository's ``data/`` folder (found relative to this package)."""
    return Path(__file__).resolve().parents[2] / "data"


def resolve_dir(path: str | Path | None, folder: str) -> Path:
    """``path`` if given, else ``data/<folder>``; it must be an existing directory."""
    root = Path(path) if path is not None else data_root() / folder
    if not root.is_dir():
        raise FileNotFoundError(f"{folder} data directory not found: {root}")
    return root


def find_file(root: Path, *names: str) -> Path:
    """The first of ``names`` that exists under ``root``; a clear error otherwise."""
    for name in names:
        if (root / name).is_file():
            return root / name
    raise FileNotFoundError(f"none of {list(names)} found in {root}")


def utf8_error(path: str | Path, err: UnicodeDecodeError) -> ValueError:
    """A ``ValueError`` naming the first line of ``path`` that is not valid UTF-8 (the codec's own
    error names neither file nor line). Only called once decoding has failed, so good files are
    read exactly as before."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                byte = raw[bad.start : bad.start + 1]
                return ValueError(f"{path}:{lineno}: invalid UTF-8 (byte {byte!r} at column {bad.start + 1}: "
                                  f"{bad.reason}); save the file as UTF-8")
    return ValueError(f"{path}: invalid UTF-8 ({err.reason} at byte {err.start})")


def read_text(path: str | Path) -> str:
    """The whole file as UTF-8 text; invalid UTF-8 names ``file:line``."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise utf8_error(path, err) from None


def read_json(path: str | Path) -> Any:
    """Load one JSON document; a syntax error or invalid UTF-8 names ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None
        except UnicodeDecodeError as err:
            raise utf8_error(path, err) from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)`` of a UTF-8 text file (text mode, as ``open`` reads it);
    invalid UTF-8 names ``file:line``."""
    with open(path, encoding="utf-8") as f:
        try:
            yield from enumerate(f, start=1)
        except UnicodeDecodeError as err:
            raise utf8_error(path, err) from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line; bad JSON, invalid UTF-8 or a
    non-object names ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno}: malformed JSON ({err.msg})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        yield lineno, rec


def require(rec: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``rec[key]``, checked to exist and be of ``kind``; errors name ``where`` (e.g. ``file:line``)."""
    if key not in rec:
        raise ValueError(f"{where}: missing field {key!r}")
    value = rec[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # True is not an int here
        names = "/".join(k.__name__ for k in kinds)
        raise ValueError(f"{where}: field {key!r} must be {names}, got {type(value).__name__}")
    return value


SPLITS: tuple[str, ...] = ("train", "dev", "test")


def splits(split: str | None) -> tuple[str, ...]:
    """The splits to read: all of :data:`SPLITS` for ``None``, else the one named (checked)."""
    if split is None:
        return SPLITS
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None, got {split!r}")
    return (split,)
