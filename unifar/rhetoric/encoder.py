"""The sentence encoder: a base ``transformers`` encoder giving one vector per sentence, the
attention-masked mean of its last layer (:func:`unifar.pooling.mean_pool`), L2-normalised.

SciToricsBERT (paper 002) takes the [CLS] vector of SciBERT; here the base encoders are
sentence-transformers models trained for mean pooling (``minilm``, ``mpnet``), so the sentence
vector is the attention-masked mean of the last layer (what the paper itself does for its
transformer baselines, footnote 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..base_models import load_encoder
from ..batching import batched_encode
from ..pooling import mean_pool

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["SentenceEncoder"]


class SentenceEncoder(nn.Module):
    """A base encoder (``transformers`` model + tokenizer) giving one vector per sentence: the
    attention-masked mean of the last hidden layer, L2-normalised unless ``normalize=False``.

    ``name`` records where the weights came from (a short name of
    :func:`unifar.base_models.load_encoder`, e.g. ``"minilm"``) while they are unchanged;
    :func:`unifar.rhetoric.finetune.finetune` sets ``finetuned = True``. ``max_length`` (tokens,
    default 128) truncates long sentences.
    """

    def __init__(self, model: nn.Module, tokenizer: PreTrainedTokenizerBase, max_length: int = 128,
                 name: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.name = name
        self.finetuned = False

    @classmethod
    def from_name(cls, name: str, max_length: int = 128) -> "SentenceEncoder":
        """Load a base encoder by short name, hub id or path (float32 weights)."""
        model, tok = load_encoder(name)
        return cls(model, tok, max_length=max_length, name=name)

    @property
    def embedding_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def tokenize(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(
            list(sentences), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {k: v.to(self.device) for k, v in enc.items()}

    def forward(self, sentences: Sequence[str], normalize: bool = True) -> torch.Tensor:
        """Embeddings [N, d] (float32) of ``sentences``, with gradients when training."""
        enc = self.tokenize(sentences)
        hidden = self.model(**enc).last_hidden_state
        emb = mean_pool(hidden, enc["attention_mask"])
        return F.normalize(emb, dim=-1) if normalize else emb

    @torch.no_grad()
    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 64,
        normalize: bool = True,
        bf16: bool | None = None,
        progress: bool | None = None,
    ) -> torch.Tensor:
        """Embeddings [N, d] on the CPU in float32, in eval mode; batches of similar length
        (sorted by character count) for speed, returned in the input order
        (:func:`unifar.batching.batched_encode`). ``bf16`` (default: on CUDA only) runs the
        encoder under bfloat16 autocast; ``progress``: a bar (``None``: the library's rule)."""
        sentences = list(sentences)
        return batched_encode(lambda idx: self([sentences[j] for j in idx], normalize=normalize),
                              [len(s) for s in sentences], batch_size, (self.embedding_size,), module=self,
                              device=self.device, bf16=bf16, show_progress=progress,
                              desc="encoding sentences")

    def save_pretrained(self, directory: str | Path) -> Path:
        """Weights (safetensors) and tokenizer, loadable with :meth:`from_name`."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        return path
