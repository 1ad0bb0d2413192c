"""A single-vector bi-encoder: one shared encoder for questions and documents (multi-objective
paper, section 3.1; FLeW's facet encoders, eq. 1).

:class:`BiEncoder` is a base encoder of :mod:`unifar.base_models` with mean pooling over every
real token (special tokens included; the paper's choice, ``pooling="mean"``) or the [CLS] state
(``pooling="cls"``, FLeW and SPECTER). A text is tokenised as ``[CLS] text [SEP]`` (a document's
text is ``title + sep_token + abstract``, :func:`unifar.evaluation.texts.document_text`), exactly
as :class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder` does, so an untrained mean-pooling
bi-encoder gives the mean-pooling baseline's embeddings.

Training either fine-tunes the whole base (the ``paper`` profile, GPU) or only its top ``k``
layers on the cached states entering them (our CPU profile), with the same machinery as UniFAR
with a frozen base (:mod:`unifar.frozen_base`, :class:`unifar.caching.TokenStateCache`): the
methods :meth:`BiEncoder.lower_states` / :meth:`BiEncoder.top_base_layers` are the ones that
cache expects. The loop is :func:`unifar.multi_objective.training.train_bi_encoder`.

:meth:`BiEncoder.encode` gives L2-normalised float32 vectors; :class:`BiEncoderRetriever` makes a
bi-encoder a :class:`unifar.evaluation.retrievers.Retriever` (cosine similarity, q-doc and
CSFCube doc-doc), for :func:`unifar.evaluation.runner.evaluate_all` ``(retrievers=[...])``.
Saved folders hold ``config.json``, ``model.safetensors``, ``base/`` (encoder config and
tokenizer) and ``manifest.json`` (SHA-256 of each file), written atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base_models import encoder_and_tokenizer, encoder_layers, run_layers, top_encoder_layers
from .caching import TokenStateCache
from .checkpoints import load_weights
from .evaluation.dense import MeanPoolingRetriever
from .files import IntegrityError, atomic_dir, digest_mismatch, file_digests
from .batching import batched_encode
from .pooling import mean_pool
from .runtime import pick_device
from .text import Batch, EncodedInput, collate, encode_inputs

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


__all__ = ["BiEncoderConfig", "BiEncoder", "BiEncoderRetriever"]

CONFIG_NAME, WEIGHTS_NAME, BASE_DIR, MANIFEST_NAME = (
    "config.json",
    "model.safetensors",
    "base",
    "manifest.json",
)
POOLINGS = ("mean", "cls")


@dataclass
class BiEncoderConfig:
    """What defines a bi-encoder besides its weights.

    >>> BiEncoderConfig(pooling="cls").to_dict()
    {'base_model': 'minilm', 'pooling': 'cls', 'max_tokens': 512}
    """

    base_model: str = "minilm"  # short name, hub id or local path (unifar.base_models)
    pooling: str = "mean"  # "mean" (the multi-objective paper) or "cls" (FLeW, SPECTER)
    max_tokens: int = 512  # longer inputs are cut (as MeanPoolingEncoder's max_length)

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if int(self.max_tokens) < 2:
            raise ValueError(f"max_tokens must be at least 2, got {self.max_tokens}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> "BiEncoderConfig":
        """Read ``config.json``; an unknown field or a bad value names the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**data)
        except (json.JSONDecodeError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: not a bi-encoder config ({err})") from None


class BiEncoder(nn.Module):
    """One encoder for questions and documents, pooled to one vector per text.

    ``BiEncoder(config)`` loads ``config.base_model``; tests (or a caller with its own encoder)
    pass ``base_model`` (a ``transformers`` encoder) and ``tokenizer``.
    """

    def __init__(
        self,
        config: BiEncoderConfig | None = None,
        *,
        base_model: nn.Module | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        super().__init__()
        self.config = config = config or BiEncoderConfig()
        base_model, tokenizer = encoder_and_tokenizer(config.base_model, base_model, tokenizer)
        if getattr(base_model, "pooler", None) is not None:
            base_model.pooler = None  # BERT's pooler head is never used here (nor saved)
        self.base = base_model
        self.tokenizer = tokenizer
        self.to(pick_device(device))
        self.eval()  # an encoder until a training loop says otherwise (no dropout when encoding)

    # ------------------------------------------------------------------ what retrievers read
    @property
    def device(self) -> torch.device:
        return next(self.base.parameters()).device

    @property
    def name(self) -> str:
        return self.config.base_model

    @property
    def max_length(self) -> int:
        return self.config.max_tokens

    @property
    def sep_token(self) -> str:
        """The separator between a document's title and abstract (``[SEP]``, ``</s>``)."""
        return self.tokenizer.sep_token

    @property
    def hidden_size(self) -> int:
        return int(self.base.config.hidden_size)

    # ------------------------------------------------------------------ the base split in two
    def top_base_layers(self, k: int) -> nn.ModuleList:
        """The top ``k`` (>= 1) layers of the base (what trains on cached lower states)."""
        return top_encoder_layers(self.base, k, self.config.base_model)

    def lower_states(self, batch: Batch, top_layers: int) -> torch.Tensor:
        """``[B, L, h]`` hidden states entering the top ``top_layers`` layers (all: the output)."""
        out = self.base(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            output_hidden_states=bool(top_layers),
        )
        if not top_layers:
            return out.last_hidden_state
        depth = len(encoder_layers(self.base, self.config.base_model))
        return out.hidden_states[depth - len(self.top_base_layers(top_layers))]

    # ------------------------------------------------------------------ forward
    def tokenize(self, texts: Sequence[str]) -> list[EncodedInput]:
        """``[CLS] text [SEP]`` per text, cut to ``max_tokens`` (the tokenizer maps a literal
        ``[SEP]`` inside a document's text to the separator token)."""
        if isinstance(texts, str):
            raise TypeError("expected a list of texts, got a single string")
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"text {bad}: expected a string, got {type(texts[bad]).__name__}")
        return encode_inputs(self.tokenizer, [("", [t]) for t in texts], self.config.max_tokens)

    def pool(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, h]``: mean over real tokens, or the [CLS] state (float32, not normalised)."""
        if self.config.pooling == "cls":
            return tokens[:, 0].float()
        return mean_pool(tokens, attention_mask)

    def embed(self, batch: Batch, state_cache: "TokenStateCache | None" = None) -> torch.Tensor:
        """Pooled ``[B, h]`` embeddings of a collated batch, with gradient where the weights
        train. With ``state_cache`` the base runs only its top ``state_cache.top_layers`` layers
        on the cached states below them."""
        if state_cache is None:
            tokens = self.base(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask
            ).last_hidden_state
        else:
            lower = state_cache.token_states(self, batch)  # type: ignore[arg-type]
            k = state_cache.top_layers
            tokens = (
                run_layers(self.base, self.top_base_layers(k), lower, batch.attention_mask)
                if k
                else lower
            )
        return self.pool(tokens, batch.attention_mask)

    def embed_texts(
        self, texts: Sequence[str], state_cache: "TokenStateCache | None" = None
    ) -> torch.Tensor:
        """:meth:`embed` of raw texts in one padded batch (the training path)."""
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return self.embed(collate(self.tokenize(texts), pad).to(self.device), state_cache)

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        show_progress: bool | None = None,
        state_cache: "TokenStateCache | None" = None,
        bf16: bool | None = None,
    ) -> torch.Tensor:
        """L2-normalised float32 CPU embeddings ``[N, h]`` in input order, encoded in
        length-sorted batches (:func:`unifar.batching.batched_encode`). ``bf16`` autocast
        defaults to on for CUDA only."""
        items = self.tokenize(list(texts))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

        def encode_batch(idx: list[int]) -> torch.Tensor:
            pooled = self.embed(collate([items[i] for i in idx], pad).to(self.device), state_cache)
            return F.normalize(pooled.float(), dim=-1)

        return batched_encode(encode_batch, [len(it.input_ids) for it in items], batch_size,
                              (self.hidden_size,), module=self, device=self.device, bf16=bf16,
                              show_progress=show_progress, desc=f"encoding ({self.name})")

    def fingerprint(self) -> str:
        """A digest of the weights and the pooling: equal for models that encode alike."""
        weights = TokenStateCache.base_fingerprint(self)  # type: ignore[arg-type]
        return f"{self.config.pooling}-{self.config.max_tokens}-{weights}"

    # ------------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        """Write the folder (module docstring) atomically: a reader sees the old folder or the
        complete new one."""
        from safetensors.torch import save_model

        def write(tmp: Path) -> None:
            self.base.config.save_pretrained(tmp / BASE_DIR)
            self.tokenizer.save_pretrained(tmp / BASE_DIR)
            save_model(
                self, str(tmp / WEIGHTS_NAME), metadata={"format": "pt", "library": "unifar"}
            )
            (tmp / CONFIG_NAME).write_text(
                json.dumps(self.config.to_dict(), indent=2) + "\n", encoding="utf-8"
            )
            names = [p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()]
            manifest = {"format": "unifar-bi-encoder", "files": file_digests(tmp, names)}
            (tmp / MANIFEST_NAME).write_text(
                json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
            )

        return atomic_dir(directory, write)

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike[str], device: str | torch.device | None = None
    ) -> "BiEncoder":
        """Load a folder of :meth:`save_pretrained` (safetensors only), every file checked
        against ``manifest.json`` (:class:`unifar.files.IntegrityError` names the file)."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        d = Path(directory)
        missing = [
            n for n in (CONFIG_NAME, WEIGHTS_NAME, BASE_DIR, MANIFEST_NAME) if not (d / n).exists()
        ]
        if missing:
            raise FileNotFoundError(f"{d} is not a bi-encoder folder: missing {', '.join(missing)}")
        try:
            files = json.loads((d / MANIFEST_NAME).read_text(encoding="utf-8"))["files"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise IntegrityError(f"{d / MANIFEST_NAME} is damaged ({err})") from None
        why = digest_mismatch(d, files, str(d / MANIFEST_NAME))
        if why:
            raise IntegrityError(why)
        config = BiEncoderConfig.from_json(d / CONFIG_NAME)
        base = AutoModel.from_config(AutoConfig.from_pretrained(d / BASE_DIR))
        model = cls(
            config,
            base_model=base,
            tokenizer=AutoTokenizer.from_pretrained(d / BASE_DIR),
            device="cpu",
        )
        load_weights(model, d / WEIGHTS_NAME, "cpu")
        return model.to(pick_device(device))


class BiEncoderRetriever(MeanPoolingRetriever):
    """A :class:`BiEncoder` as a retriever: cosine of its normalised embeddings; document text
    ``title + sep + abstract``; CSFCube query = the whole query paper (as the mean-pooling
    baseline, :class:`unifar.evaluation.dense.MeanPoolingRetriever`, whose code it reuses).

    The index key carries :meth:`BiEncoder.fingerprint`, so that a trained bi-encoder never
    reuses the collection encoded by the base (or by another trained model).
    """

    def __init__(
        self,
        model: BiEncoder,
        name: str = "bi-encoder",
        label: str | None = None,
        state_cache: "TokenStateCache | None" = None,
        show_progress: bool | None = None,
    ) -> None:
        super().__init__(model, name=name)
        # models that train only their top layers share the frozen layers' states of every text
        self.state_cache = state_cache
        self.show_progress = show_progress  # None: unifar.batching.show_progress_bar decides
        self.label = (
            label or f"bi-encoder ({model.config.base_model}, {model.config.pooling} pooling)"
        )
        self.model_id = model.fingerprint()

    def _encode(self, texts: list[str]) -> torch.Tensor:
        return self.encoder.encode(
            texts, state_cache=self.state_cache, show_progress=self.show_progress
        )

    @property
    def index_key(self) -> str:
        return f"bi-encoder:{self.model_id}"

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "pooling": self.encoder.config.pooling,
            "fingerprint": self.model_id,
        }
