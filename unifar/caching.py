"""A disk cache of one vector per input text, so a collection is encoded once per execution.

:class:`EmbeddingCache` keeps rows (float32 vectors of one width) keyed by a digest of their
input, in one safetensors file: ``keys`` (``uint8 [N, 16]``, BLAKE2b digests) and ``rows``
(``float32 [N, d]``). The file's name carries a fingerprint of what computed the rows (the
encoder's weights and settings), so rows of one encoder are never read for another.
:class:`unifar.baselines.MeanPoolingEncoder` uses it: chapter 1 encodes CSFCube, chapter 3 the
training pool, chapter 5 the question collections, and each text is encoded by the first
chapter that needs it, whatever the subset or order a later call asks for.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from .files import atomic_file

__all__ = ["EmbeddingCache", "text_digest"]


def text_digest(text: str) -> bytes:
    """16-byte BLAKE2b digest of ``text`` (UTF-8, lone surrogates kept).

    >>> text_digest("a").hex()[:8], len(text_digest("a"))
    ('27c35e6e', 16)
    """
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbeddingCache:
    """Rows keyed by input digest, backed by ``path`` (see the module docstring).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "rows.safetensors"
    >>> cache = EmbeddingCache(path, width=2)
    >>> keys = [text_digest(t) for t in ("x", "y", "x")]
    >>> cache.missing(keys)
    [0, 1]
    >>> cache.put([keys[0], keys[1]], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    >>> cache.save() == path, EmbeddingCache(path, width=2).get(keys).tolist()
    (True, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    """

    def __init__(self, path: str | os.PathLike[str], width: int) -> None:
        self.path = Path(path)
        self.width = int(width)
        self._index: dict[bytes, int] = {}
        self._rows: list[torch.Tensor] = []
        self._saved = 0
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        from safetensors.torch import load_file

        try:
            data = load_file(str(self.path))
            keys, rows = data["keys"], data["rows"]
            if keys.dtype != torch.uint8 or keys.shape[1:] != (16,) or rows.shape != (len(keys), self.width):
                raise ValueError(f"keys {tuple(keys.shape)}, rows {tuple(rows.shape)}, width {self.width}")
        except Exception as e:  # a torn or foreign file: start empty, never fail a run for a cache
            warnings.warn(f"{self.path}: unreadable embedding cache ({e}); starting empty", stacklevel=3)
            return
        self._index = {bytes(k.tolist()): i for i, k in enumerate(keys)}
        self._rows = list(rows.unbind(0))
        self._saved = len(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def missing(self, keys: Sequence[bytes]) -> list[int]:
        """Positions of the first occurrence of every key not cached yet, in input order."""
        seen: set[bytes] = set()
        out = []
        for i, k in enumerate(keys):
            if k not in self._index and k not in seen:
                seen.add(k)
                out.append(i)
        return out

    def put(self, keys: Sequence[bytes], rows: torch.Tensor) -> None:
        """Add ``rows[i]`` under ``keys[i]`` (rows already cached are left as they are)."""
        if rows.shape != (len(keys), self.width):
            raise ValueError(f"expected rows of shape ({len(keys)}, {self.width}), got {tuple(rows.shape)}")
        for k, row in zip(keys, rows.to("cpu", torch.float32)):
            if k not in self._index:
                self._index[k] = len(self._rows)
                self._rows.append(row.clone())

    def get(self, keys: Sequence[bytes]) -> torch.Tensor:
        """``[len(keys), width]`` rows in the order of ``keys``; every key must be cached."""
        if not keys:
            return torch.empty(0, self.width)
        return torch.stack([self._rows[self._index[k]] for k in keys])

    def save(self) -> Path | None:
        """Write the file (atomically) when rows were added since it was read; returns its path,
        or None when there was nothing new."""
        from safetensors.torch import save_file

        if len(self._rows) == self._saved:
            return None
        keys = torch.tensor([list(k) for k in self._index], dtype=torch.uint8)
        order = torch.tensor(list(self._index.values()), dtype=torch.long)
        rows = torch.stack(self._rows)[order].contiguous()
        atomic_file(self.path, lambda tmp: save_file({"keys": keys, "rows": rows}, str(tmp)))
        self._saved = len(self._rows)
        return self.path
