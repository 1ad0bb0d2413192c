"""The mean-pooling encoder: a plain Hugging Face encoder, mean of its last hidden states over
all non-pad tokens (special tokens included), L2-normalised, compared by cosine similarity.

It is the mean-pooling baseline of every benchmark (:class:`unifar.evaluation.dense.MeanPoolingRetriever`),
the encoder of the mining signals (:mod:`unifar.construction.mining`) and of the leakage check,
and the reference the chapters compare UniFAR with. Document text: ``title + sep_token +
abstract`` (:func:`unifar.evaluation.texts.document_text`), truncated to ``max_length`` tokens.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from ..base_models import load_encoder
from ..caching import EmbeddingCache, text_digest
from ..files import hash_tensors
from ..batching import batched_encode
from ..pooling import mean_pool
from ..runtime import pick_device

__all__ = ["MeanPoolingEncoder"]


class MeanPoolingEncoder:
    """A Hugging Face encoder with mean pooling over non-pad tokens, L2-normalised output.

    ``model`` is a short name of a shipped encoder (``"minilm"``, ``"mpnet"``), a hub name or a
    local path (resolved by :func:`unifar.base_models.resolve_base_model`). ``show_progress``:
    a progress bar while encoding (``None``: :func:`unifar.batching.show_progress_bar`'s rule).
    """

    def __init__(
        self,
        model: str,
        max_length: int = 512,
        batch_size: int = 32,
        device: str | torch.device | None = None,
        show_progress: bool | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.name = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.device = pick_device(device)  # a device this machine lacks fails here, before the weights load
        encoder, self.tokenizer = load_encoder(model)
        self.model = encoder.eval().to(self.device)

    @property
    def sep_token(self) -> str:
        """The tokenizer's separator (``[SEP]`` for BERT-style, ``</s>`` for MPNet/RoBERTa)."""
        return self.tokenizer.sep_token

    @torch.inference_mode()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Embed ``texts`` -> float32 CPU tensor ``[N, hidden]`` with unit L2 norm, input order.

        e = sum_t m_t h_t / sum_t m_t over the attention mask m; batches are formed from
        length-sorted texts to limit padding, then the original order is restored.
        With ``cache_dir`` set, every text's embedding is stored there, keyed by a digest of the
        text, in one file per encoder (:meth:`cache_key`: weights and ``max_length``;
        :class:`unifar.caching.EmbeddingCache`): a later call, in this process or in another
        chapter, encodes only the texts no call has encoded before.
        """
        texts = list(texts)
        hidden = self.model.config.hidden_size
        if not texts:
            return torch.empty(0, hidden)
        if self.cache_dir is None:
            return self._encode(texts)

        cache = EmbeddingCache(self.cache_dir / f"mean-rows-{self.cache_key()}.safetensors", hidden)
        keys = [text_digest(t) for t in texts]
        todo = cache.missing(keys)
        if todo:
            cache.put([keys[i] for i in todo], self._encode([texts[i] for i in todo]))
            cache.save()
        return cache.get(keys)

    def cache_key(self) -> str:
        """SHA-256 (hex, 24 chars) of the encoder's weights and ``max_length``: the name of its
        embedding cache file.

        The weights are hashed on every call (well under a second for MiniLM), so an encoder
        fine-tuned in memory never reads embeddings cached for its earlier weights.
        """
        h = hashlib.sha256(f"max_length={self.max_length}".encode())
        return hash_tensors(h, self.model.state_dict().items()).hexdigest()[:24]

    def _encode(self, texts: list[str]) -> torch.Tensor:
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)

        def encode_batch(idx: list[int]) -> torch.Tensor:
            features = [{k: enc[k][i] for k in enc.keys()} for i in idx]
            batch = self.tokenizer.pad(features, return_tensors="pt").to(self.device)
            pooled = mean_pool(self.model(**batch).last_hidden_state, batch["attention_mask"])
            return torch.nn.functional.normalize(pooled, dim=-1)

        # float32 everywhere (bf16=False): the baseline's numbers must not depend on the device
        return batched_encode(encode_batch, [len(ids) for ids in enc["input_ids"]], self.batch_size,
                              (self.model.config.hidden_size,), module=self.model, device=self.device,
                              bf16=False, show_progress=self.show_progress, desc=f"encoding ({self.name})")
