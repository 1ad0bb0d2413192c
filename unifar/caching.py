"""Disk caches of a frozen encoder's outputs, so that each input is encoded once per execution.

* :class:`EmbeddingCache` -- one vector per input text, in one safetensors file: ``keys``
  (``uint8 [N, 16]``, BLAKE2b digests) and ``rows`` (``float32 [N, d]``). The file's name carries
  a fingerprint of what computed the rows (the encoder's weights and settings), so rows of one
  encoder are never read for another. :class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder` uses it:
  chapter 1 encodes CSFCube, chapter 3 the training pool, chapter 5 the question collections, and
  each text is encoded by the first chapter that needs it, whatever the subset or order a later
  call asks for.
* :class:`TokenStateCache` -- the token states ``[L, h]`` of each input of a *frozen* UniFAR base
  encoder, keyed by token ids, shared by training with a frozen base and by evaluation.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .files import atomic_file, hash_tensors
from .pooling import length_order
from .text import Batch, EncodedInput, collate

if TYPE_CHECKING:
    from .model import UniFAR

__all__ = ["EmbeddingCache", "TokenStateCache", "base_in_eval_mode", "save_cache_file", "text_digest"]


def save_cache_file(path: Path, write: Callable[[Path], None], what: str) -> bool:
    """Write a cache file atomically; a failed write (a full disk, a read-only folder) is a
    warning, not an error: a cache only saves time, and failing the run would throw away the
    results it has just computed (chapter 5 once lost its evaluation to a full disk this way).
    Returns whether the file was written."""
    try:
        atomic_file(path, write)
    except OSError as e:  # atomic_file has removed its temporary file
        warnings.warn(f"{path}: could not save the {what} ({e}); the run goes on, and a later run "
                      "encodes these inputs again", stacklevel=3)
        return False
    return True


@contextmanager
def base_in_eval_mode(model: "UniFAR") -> Iterator[None]:
    """The base encoder's modules in eval mode (no dropout) while states are computed for a
    cache, each module's own mode restored after (a run that trains its top layers keeps them
    training). A cached state serves every later step and chapter: computed in train mode it
    would carry one random dropout mask for good (and draw from torch's generator, moving the
    run that follows)."""
    modes = [(m, m.training) for m in model.base.modules()]
    model.base.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


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
        or None when there was nothing new or the write failed (a warning says why)."""
        from safetensors.torch import save_file

        if len(self._rows) == self._saved:
            return None
        keys = torch.tensor([list(k) for k in self._index], dtype=torch.uint8)
        order = torch.tensor(list(self._index.values()), dtype=torch.long)
        rows = torch.stack(self._rows)[order].contiguous()
        if not save_cache_file(self.path, lambda tmp: save_file({"keys": keys, "rows": rows}, str(tmp)),
                                "embedding cache"):
            return None
        self._saved = len(self._rows)
        return self.path


class TokenStateCache:
    """Token states of a *frozen* base encoder, computed once per input (by a key) and reused.

    Every input is keyed by its token ids (:meth:`item_key`), so training and evaluation share
    rows: training with ``TrainArgs.freeze_base`` (only the anchors and the aggregation module
    train; our CPU profile) pays the base once per document and question, and at evaluation the
    models that share one base (untrained UniFAR and one trained with a frozen base) run it once
    per input (:meth:`unifar.model.UniFAR.encode`'s ``state_cache``). Missing rows are encoded in batched
    calls. With ``top_layers=k`` it holds the states entering the base's top ``k`` layers, which
    then run (and train) on every use. :meth:`on_disk` backs it by files that later processes
    read back: the chapters of one execution encode each text once (chapter 4 trains on the
    states of the FTU documents and checks fold1_dev, chapter 5 evaluates on what is left).
    """

    def __init__(self, chunk_size: int = 32, top_layers: int = 0) -> None:
        # Keyed by a digest of the caller's key (a document id, or a whole token-id string), so
        # that the keys of a saved cache are short and fixed-size (:meth:`save`).
        self.states: dict[str, torch.Tensor] = {}
        # > 0: cache the states entering the top ``top_layers`` base layers instead of the last
        # ones (those layers then train: ``TrainArgs.train_top_layers``).
        self.top_layers = top_layers
        self.hits = 0
        self.misses = 0
        # Missing rows are encoded in length-sorted chunks, each padded only to its own longest
        # row: one padded batch of a hundred abstracts costs about twice as much.
        self.chunk_size = chunk_size
        self.path: Path | None = None  # set by :meth:`on_disk`
        self.fingerprint: str | None = None
        self._saved = 0  # rows already in the files of ``path``
        self._saved_keys: set[str] = set()

    def __len__(self) -> int:
        return len(self.states)

    @staticmethod
    def _digest(key: str) -> str:
        return hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest()

    @staticmethod
    def item_key(input_ids: Sequence[int]) -> str:
        """The key of one tokenised input: its token ids (the states depend on nothing else).

        >>> TokenStateCache.item_key([101, 7592, 102])
        '101 7592 102'
        """
        return " ".join(map(str, input_ids))

    @classmethod
    def batch_keys(cls, batch: Batch) -> list[str]:
        """:meth:`item_key` of every row of a collated (right-padded) batch."""
        lengths = batch.attention_mask.sum(dim=1).tolist()
        ids = batch.input_ids.tolist()
        return [cls.item_key(row[: int(n)]) for row, n in zip(ids, lengths)]

    @staticmethod
    def base_fingerprint(model: "UniFAR", top_layers: int = 0) -> str:
        """A digest of the base encoder's weights (every tensor's name, shape, dtype and bytes),
        ``top_layers`` and the device type: states cached for one base are never read for another,
        and states computed on CUDA (bf16 autocast by default) never stand in for CPU ones."""
        h = hashlib.blake2b(f"top_layers={top_layers};device={model.device.type}".encode(), digest_size=12)
        return hash_tensors(h, sorted(model.base.state_dict().items()),
                            lambda name, t: f"{name}:{tuple(t.shape)}:{t.dtype}").hexdigest()

    @classmethod
    def on_disk(cls, model: "UniFAR", cache_dir: str | os.PathLike[str], top_layers: int = 0,
                chunk_size: int = 32) -> "TokenStateCache":
        """A cache backed by the files ``cache_dir/states-<fingerprint>-<n>.safetensors``: the rows
        earlier runs saved for the same base weights are loaded, and :meth:`save` adds a file with
        the new rows (so a save never rewrites gigabytes already on disk). Lets a later notebook
        reuse the frozen base's states an earlier one computed, instead of running the encoder
        over the same documents again. A torn file is skipped with a warning (its rows are
        encoded again)."""
        from safetensors.torch import load_file

        cache = cls(chunk_size=chunk_size, top_layers=top_layers)
        cache.fingerprint = cls.base_fingerprint(model, top_layers)
        cache_dir = Path(cache_dir)
        cache.path = cache_dir / f"states-{cache.fingerprint}"
        for shard in sorted(cache_dir.glob(f"states-{cache.fingerprint}*.safetensors")):
            try:
                cache.states.update(load_file(str(shard), device=str(model.device)))
            except Exception as e:  # a torn or foreign file: skip it, never fail the run for a cache
                warnings.warn(f"{shard}: unreadable token-state cache ({e}); its rows will be encoded again", stacklevel=2)
        cache._saved = len(cache.states)
        cache._saved_keys = set(cache.states)
        return cache

    def save(self) -> Path | None:
        """Write the rows added since the cache was read to a new file of :meth:`on_disk`
        (atomically). Returns the path written, or None when there was nothing new, no file, or
        the write failed (a warning says why: a cache never fails the run that fills it)."""
        import uuid

        from safetensors.torch import save_file

        if self.path is None or len(self.states) == self._saved:
            return None
        new = {k: v.to("cpu") for k, v in self.states.items() if k not in self._saved_keys}
        path = self.path.with_name(f"{self.path.name}-{uuid.uuid4().hex[:8]}.safetensors")
        if not save_cache_file(path, lambda tmp: save_file(new, str(tmp), metadata={"fingerprint": str(self.fingerprint)}),
                                "token-state cache"):
            return None  # the rows stay in memory; the next save tries again
        self._saved = len(self.states)
        self._saved_keys |= set(new)
        return path

    def fill(self, model: "UniFAR", items: Sequence[EncodedInput], batch_size: int = 32,
             show_progress: bool = False) -> int:
        """Encode every input not cached yet, in length-sorted batches (the fast way to warm the
        cache before training). Returns how many inputs were encoded."""
        from tqdm.auto import tqdm

        keys = [self._digest(self.item_key(it.input_ids)) for it in items]
        new = list({k: i for i, k in enumerate(keys) if k not in self.states}.values())
        todo = [new[j] for j in length_order([len(items[i].input_ids) for i in new])]
        pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
        for s in tqdm(range(0, len(todo), batch_size), desc="caching base states", disable=not show_progress):
            part = todo[s : s + batch_size]
            batch = collate([items[i] for i in part], pad).to(model.device)
            with torch.no_grad(), base_in_eval_mode(model):
                states = model.lower_states(batch, self.top_layers)
            lengths = batch.attention_mask.sum(dim=1).tolist()
            for j, i in enumerate(part):
                self.states[keys[i]] = states[j, : int(lengths[j])].detach().clone()  # own storage: no padded batch kept alive
        return len(todo)

    def token_states(self, model: "UniFAR", batch: Batch) -> torch.Tensor:
        """``[B, L, h]`` token states of ``batch`` (rows keyed by :meth:`batch_keys`), zero-padded."""
        lengths = batch.attention_mask.sum(dim=1).tolist()
        keys = [self._digest(k) for k in self.batch_keys(batch)]
        missing = [i for i, k in enumerate(keys) if k not in self.states]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        missing = [missing[j] for j in length_order([lengths[i] for i in missing])]
        for start in range(0, len(missing), self.chunk_size):
            part = missing[start : start + self.chunk_size]
            idx = torch.tensor(part, device=batch.input_ids.device)
            width = int(lengths[part[0]])
            sub = Batch(batch.input_ids[idx, :width], batch.attention_mask[idx, :width], batch.sentence_ids[idx, :width],
                        batch.n_sentences[idx], batch.has_title[idx])
            with torch.no_grad(), base_in_eval_mode(model):
                states = model.lower_states(sub, self.top_layers)
            for j, i in enumerate(part):
                self.states[keys[i]] = states[j, : int(lengths[i])].detach().clone()
        # one C++ call pads the rows (a Python loop of row copies cost chapter 6 about 15 s)
        out = torch.nn.utils.rnn.pad_sequence([self.states[k] for k in keys], batch_first=True)
        width = batch.input_ids.shape[1]
        if out.shape[1] < width:  # the batch is padded beyond its longest row
            out = torch.nn.functional.pad(out, (0, 0, 0, width - out.shape[1]))
        return out
