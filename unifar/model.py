"""The UniFAR model (paper section 3): a replaceable base encoder and the facet aggregation module.

Reading order, with the paper's symbols:

* :func:`sentence_states` -- section 3.1, ``S_i = MeanPool(T_{S_i})`` for the whole batch at once;
* :meth:`UniFAR.facet_queries` -- section 3.2, ``Q = Add&Norm(MLP([A ; E_input]))``;
* :meth:`UniFAR.aggregate` -- section 3.2, ``E_facet = MHA_sent(Q, S, S)`` if ``|S| >= N_facet``
  else ``MHA_tok(Q, T, T)``, chosen per input inside one batch;
* :meth:`UniFAR.encode_documents` / :meth:`UniFAR.encode_questions` -- the public encoders.

Scoring with the facet similarity matrix (section 3.3) lives in :mod:`unifar.scoring`, the losses
(section 4.2) in :mod:`unifar.losses`.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base_models import load_encoder
from .config import UniFARConfig
from .text import Batch, EncodedInput, collate, encode_inputs, normalize_document, split_sentences

__all__ = ["UniFAR", "UniFAROutput", "FacetEncoding", "TokenStateCache", "sentence_states", "pick_device"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
BASE_DIR = "base"


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` if given, else CUDA when present, else CPU.

    A bare ``cuda`` gets the current GPU's index: ``torch.cuda.set_device`` refuses a device
    without one, and ``torch.device("cuda") != torch.device("cuda:0")`` in comparisons.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    d = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


def sentence_states(tokens: torch.Tensor, sentence_ids: torch.Tensor, n_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of the token states of each sentence, for a whole batch with one batched matmul.

    ``tokens`` [B, L, h]; ``sentence_ids`` [B, L] with -1 for tokens outside any sentence.
    Returns the states [B, n_max, h] and a mask [B, n_max] of sentences that exist.

    >>> T = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])
    >>> S, m = sentence_states(T, torch.tensor([[-1, 0, 0, 1]]), 3)
    >>> S.squeeze(-1).tolist(), m.tolist()
    ([[4.0, 7.0, 0.0]], [[True, True, False]])
    """
    member = (sentence_ids.unsqueeze(-1) == torch.arange(n_max, device=tokens.device)).to(tokens.dtype)  # [B, L, n]
    sums = member.transpose(1, 2) @ tokens  # [B, n, h]
    counts = member.sum(dim=1)  # [B, n]
    return sums / counts.clamp(min=1).unsqueeze(-1), counts > 0


_SPLITTABLE = frozenset({"bert", "roberta", "xlm-roberta", "electra"})


def _layer_attention_mask(config: Any, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None:
    """The padding mask a BERT-style layer expects, built the way the encoder builds it."""
    try:  # transformers >= 4.56: the attention implementation decides the mask's form
        from transformers.masking_utils import create_bidirectional_mask

        return create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask)
    except ImportError:  # older: an additive float mask [B, 1, 1, L]
        m = attention_mask[:, None, None, :].to(hidden.dtype)
        return (1.0 - m) * torch.finfo(hidden.dtype).min


@dataclass
class UniFAROutput:
    """What one forward pass produces."""

    embeddings: torch.Tensor  # [B, F, h], L2-normalised facet embeddings
    attention: torch.Tensor  # [B, F, K]: head-averaged weights over sentences or tokens (padded)
    uses_sentences: torch.Tensor  # [B] bool: which branch each input took
    sentence_mask: torch.Tensor  # [B, n] bool
    token_mask: torch.Tensor  # [B, L] bool
    kl_attention: torch.Tensor | None = None  # [B, F, n]: sentence attention on detached base states


@dataclass
class FacetEncoding:
    """Facet embeddings of a list of inputs, in input order, plus what is needed to explain them."""

    embeddings: torch.Tensor  # [N, F, h] float32, L2-normalised
    attention: list[torch.Tensor]  # per input [F, n_units], head-averaged
    branch: list[str]  # "sentence" or "token" per input
    units: list[list[str]]  # per input: sentence texts (title first) or tokens, one per column of attention
    facets: tuple[str, ...]
    truncated: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return self.embeddings.shape[0]


class TokenStateCache:
    """Token states of a *frozen* base encoder, computed once per input (by a key) and reused.

    Every input is keyed by its token ids (:meth:`item_key`), so training and evaluation share
    rows: training with ``TrainArgs.freeze_base`` (only the anchors and the aggregation module
    train; our CPU profile) pays the base once per document and question, and at evaluation the
    models that share one base (untrained UniFAR and one trained with a frozen base) run it once
    per input (:meth:`UniFAR.encode`'s ``state_cache``). Missing rows are encoded in batched
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
        import hashlib

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
        import hashlib

        h = hashlib.blake2b(f"top_layers={top_layers};device={model.device.type}".encode(), digest_size=12)
        for name, t in sorted(model.base.state_dict().items()):
            t = t.detach().to("cpu").contiguous().reshape(-1)
            h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return h.hexdigest()

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
                import warnings

                warnings.warn(f"{shard}: unreadable token-state cache ({e}); its rows will be encoded again", stacklevel=2)
        cache._saved = len(cache.states)
        cache._saved_keys = set(cache.states)
        return cache

    def save(self) -> Path | None:
        """Write the rows added since the cache was read to a new file of :meth:`on_disk`
        (atomically). Returns the path written, or None when there was nothing new (or no file)."""
        import uuid

        from safetensors.torch import save_file

        from .files import atomic_file

        if self.path is None or len(self.states) == self._saved:
            return None
        new = {k: v.to("cpu") for k, v in self.states.items() if k not in self._saved_keys}
        path = self.path.with_name(f"{self.path.name}-{uuid.uuid4().hex[:8]}.safetensors")
        atomic_file(path, lambda tmp: save_file(new, str(tmp), metadata={"fingerprint": str(self.fingerprint)}))
        self._saved = len(self.states)
        self._saved_keys |= set(new)
        return path

    def fill(self, model: UniFAR, items: Sequence[EncodedInput], batch_size: int = 32,
             show_progress: bool = False) -> int:
        """Encode every input not cached yet, in length-sorted batches (the fast way to warm the
        cache before training). Returns how many inputs were encoded."""
        from tqdm.auto import tqdm

        keys = [self._digest(self.item_key(it.input_ids)) for it in items]
        todo = sorted({k: i for i, k in enumerate(keys) if k not in self.states}.values(), key=lambda i: -len(items[i].input_ids))
        pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
        for s in tqdm(range(0, len(todo), batch_size), desc="caching base states", disable=not show_progress):
            part = todo[s : s + batch_size]
            batch = collate([items[i] for i in part], pad).to(model.device)
            with torch.no_grad():
                states = model.lower_states(batch, self.top_layers)
            lengths = batch.attention_mask.sum(dim=1).tolist()
            for j, i in enumerate(part):
                self.states[keys[i]] = states[j, : int(lengths[j])].detach().clone()  # own storage: no padded batch kept alive
        return len(todo)

    def token_states(self, model: UniFAR, batch: Batch) -> torch.Tensor:
        """``[B, L, h]`` token states of ``batch`` (rows keyed by :meth:`batch_keys`), zero-padded."""
        lengths = batch.attention_mask.sum(dim=1).tolist()
        keys = [self._digest(k) for k in self.batch_keys(batch)]
        missing = [i for i, k in enumerate(keys) if k not in self.states]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        missing.sort(key=lambda i: -lengths[i])
        for start in range(0, len(missing), self.chunk_size):
            part = missing[start : start + self.chunk_size]
            idx = torch.tensor(part, device=batch.input_ids.device)
            width = int(lengths[part[0]])
            sub = Batch(batch.input_ids[idx, :width], batch.attention_mask[idx, :width], batch.sentence_ids[idx, :width],
                        batch.n_sentences[idx], batch.has_title[idx])
            with torch.no_grad():
                states = model.lower_states(sub, self.top_layers)
            for j, i in enumerate(part):
                self.states[keys[i]] = states[j, : int(lengths[i])].detach().clone()
        first = self.states[keys[0]]
        out = first.new_zeros(len(keys), batch.input_ids.shape[1], first.shape[-1])
        for i, k in enumerate(keys):  # one copy per input row (not per token)
            out[i, : int(lengths[i])] = self.states[k]
        return out



class UniFAR(nn.Module):
    """UniFAR: base encoder + learnable facet anchors + multi-granularity attention.

    ``UniFAR(config)`` loads the base encoder named by ``config.base_model`` (``minilm``, ``mpnet``,
    a hub id or a local path). Tests and users with their own encoder can pass ``base_model`` (a
    ``transformers`` encoder) and ``tokenizer`` directly.
    """

    def __init__(
        self,
        config: UniFARConfig | None = None,
        *,
        base_model: nn.Module | None = None,
        tokenizer: Any | None = None,
        device: str | torch.device | None = None,
        init_anchors: bool = True,
    ) -> None:
        super().__init__()
        self.config = config = config or UniFARConfig()
        if base_model is None:
            base_model, shipped_tokenizer = load_encoder(config.base_model)
            tokenizer = tokenizer or shipped_tokenizer
        if tokenizer is None:
            raise ValueError("a tokenizer is needed when base_model is given as a module")
        self.base = base_model
        self.tokenizer = tokenizer
        h = int(self.base.config.hidden_size)
        if h % config.num_heads:
            raise ValueError(f"hidden size {h} is not divisible by num_heads={config.num_heads}")
        self.hidden_size = h
        n_f = config.n_facets

        # The aggregation module is initialised under its own seed, so an untrained model is
        # deterministic whatever the global RNG state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            self.anchors = nn.Parameter(torch.zeros(n_f, h), requires_grad=not config.freeze_anchors)
            self.input_proj = nn.Linear(h, h)  # E_input = W S_title + b (or W T_[CLS] + b)
            m = config.mlp_hidden or h
            self.query_mlp = nn.Sequential(nn.Linear(2 * h, m), nn.GELU(), nn.Linear(m, h))
            self.query_norm = nn.LayerNorm(h)
            self.mha_sent = nn.MultiheadAttention(h, config.num_heads, dropout=config.dropout, batch_first=True)
            self.mha_tok = nn.MultiheadAttention(h, config.num_heads, dropout=config.dropout, batch_first=True)
            if config.init == "identity":
                self._identity_init()
        if not config.train_values:
            self._fix_value_projections()
        # Move first: a base module passed in may already sit on the GPU, and the anchors are
        # computed by running it.
        self.to(pick_device(device))
        if init_anchors:
            self.init_anchors_from_words()

    # ------------------------------------------------------------------ initialisation
    def _identity_init(self) -> None:
        """Start near the base encoder: V and output projections = I, Q/K small (or K = I with
        ``init_key_identity``), MLP output = 0.

        Then attention is nearly uniform and each facet embedding starts close to the mean of the
        sentence (or token) states, i.e. near plain mean pooling of the base encoder.
        """
        h = self.hidden_size
        with torch.no_grad():
            for mha in (self.mha_sent, self.mha_tok):
                w = mha.in_proj_weight
                w[: 2 * h].normal_(0.0, self.config.init_qk_std)
                if self.config.init_key_identity:  # see UniFARConfig.init_key_identity
                    w[h : 2 * h].copy_(torch.eye(h))
                w[2 * h :].copy_(torch.eye(h))
                mha.in_proj_bias.zero_()
                mha.out_proj.weight.copy_(torch.eye(h))
                mha.out_proj.bias.zero_()
            self.query_mlp[-1].weight.zero_()
            self.query_mlp[-1].bias.zero_()

    def _fix_value_projections(self) -> None:
        """Keep V and the output projection of both attentions at their initial values.

        ``nn.MultiheadAttention`` packs Q, K and V in one ``in_proj_weight`` [3h, h], so the V rows
        are fixed by zeroing their gradient (Adam then never moves them) and the whole packed
        matrix is excluded from weight decay (``_unifar_no_decay``, read by the optimiser), which
        would otherwise shrink V a little every step.
        """
        h = self.hidden_size
        keep = torch.ones(3 * h)
        keep[2 * h :] = 0.0
        for mha in (self.mha_sent, self.mha_tok):
            mha.out_proj.weight.requires_grad_(False)
            mha.out_proj.bias.requires_grad_(False)
            mha.in_proj_weight.register_hook(lambda g, k=keep: g * k.to(g).unsqueeze(1))
            mha.in_proj_bias.register_hook(lambda g, k=keep: g * k.to(g))
            mha.in_proj_weight._unifar_no_decay = True

    @torch.no_grad()
    def init_anchors_from_words(self) -> None:
        """A_facet[i] = the base model's embedding of the i-th facet word (mean of its token states)."""
        was_training = self.base.training
        self.base.eval()
        items = encode_inputs(self.tokenizer, [("", [w]) for w in self.config.anchor_words], self.config.max_tokens)
        batch = collate(items, self.tokenizer.pad_token_id or 0).to(self.anchors.device)
        tokens = self.token_states(batch)
        S, _ = sentence_states(tokens, batch.sentence_ids, 1)
        self.anchors.data.copy_(S[:, 0].to(self.anchors.dtype))
        self.base.train(was_training)

    # ------------------------------------------------------------------ forward
    @property
    def device(self) -> torch.device:
        return self.anchors.device

    def token_states(self, batch: Batch) -> torch.Tensor:
        out = self.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        return out.last_hidden_state

    # The base split in two, for training its top ``k`` layers on cached states of the layers
    # below (``TrainArgs.train_top_layers``): ``upper_states(lower_states(b, k), mask, k)`` equals
    # ``token_states(b)`` on every real token.
    def base_layers(self) -> nn.ModuleList:
        """The base encoder's transformer layers (BERT-style encoders: ``base.encoder.layer``)."""
        layers = getattr(getattr(self.base, "encoder", None), "layer", None)
        model_type = getattr(self.base.config, "model_type", "?")
        # MPNet-style encoders add a relative position bias inside the encoder, which a layer
        # called on its own would miss.
        if not isinstance(layers, nn.ModuleList) or model_type not in _SPLITTABLE:
            raise NotImplementedError(
                f"training only the top layers needs a BERT-style base ({', '.join(sorted(_SPLITTABLE))}); "
                f"{self.config.base_model!r} is {model_type!r}: train the whole base or freeze it"
            )
        return layers

    def top_base_layers(self, k: int) -> nn.ModuleList:
        """The top ``k`` (>= 1) layers of the base, checked against its depth."""
        layers = self.base_layers()
        if not 0 < k <= len(layers):
            raise ValueError(f"top_layers must be in [0, {len(layers)}] for this base, got {k}")
        return layers[len(layers) - k :]

    def lower_states(self, batch: Batch, top_layers: int) -> torch.Tensor:
        """``[B, L, h]`` hidden states entering the top ``top_layers`` layers of the base."""
        if top_layers == 0:
            return self.token_states(batch)
        n = len(self.base_layers()) - len(self.top_base_layers(top_layers))
        out = self.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
        return out.hidden_states[n]  # hidden_states[0] is the embedding output

    def upper_states(self, hidden: torch.Tensor, attention_mask: torch.Tensor, top_layers: int,
                     chunk_size: int | None = 8) -> torch.Tensor:
        """Run the top ``top_layers`` layers of the base on ``hidden`` [B, L, h] (from :meth:`lower_states`).

        Rows are sorted by length and run in chunks of ``chunk_size``, each padded only to its own
        longest row (``None``: one padded batch). The layers are where training spends its time,
        and a training batch mixes short questions with long abstracts: one padded batch would
        pay for about twice the tokens. Padding tokens come back as zeros.
        """
        if top_layers == 0:
            return hidden
        layers = self.top_base_layers(top_layers)
        lengths = attention_mask.sum(dim=1)

        def run(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            mask = _layer_attention_mask(self.base.config, h, m)
            for layer in layers:
                out = layer(h, mask)
                h = out[0] if isinstance(out, tuple) else out
            return h

        B = hidden.shape[0]
        if chunk_size is None or B <= chunk_size:
            return run(hidden, attention_mask) * attention_mask.unsqueeze(-1).to(hidden.dtype)
        order = torch.argsort(lengths, descending=True, stable=True)
        parts = []
        for s in range(0, B, chunk_size):
            idx = order[s : s + chunk_size]
            width = int(lengths[idx[0]])
            out = run(hidden[idx, :width], attention_mask[idx, :width]) * attention_mask[idx, :width].unsqueeze(-1).to(hidden.dtype)
            parts.append(F.pad(out, (0, 0, 0, hidden.shape[1] - width)))
        # one differentiable gather back into input order (no in-place writes into a leaf)
        return torch.cat(parts)[torch.argsort(order)]

    def facet_queries(self, e_input: torch.Tensor) -> torch.Tensor:
        """Q_facet = LayerNorm(A + MLP([A ; E_input])) for each input: [B, h] -> [B, F, h]."""
        B, F_ = e_input.shape[0], self.config.n_facets
        anchors = self.anchors if self.config.use_anchors else torch.zeros_like(self.anchors)
        A = anchors.unsqueeze(0).expand(B, F_, -1)
        if not self.config.use_input_embedding:
            e_input = torch.zeros_like(e_input)
        E = e_input.unsqueeze(1).expand(B, F_, -1)
        return self.query_norm(A + self.query_mlp(torch.cat([A, E], dim=-1)))

    def _input_embedding(self, tokens: torch.Tensor, S: torch.Tensor, has_title: torch.Tensor) -> torch.Tensor:
        """E_input: projection of S_title for titled documents, of T_[CLS] otherwise."""
        src = torch.where(has_title.unsqueeze(-1), S[:, 0], tokens[:, 0])
        return self.input_proj(src)

    def _choose_sentence_branch(self, n_sentences: torch.Tensor) -> torch.Tensor:
        c = self.config
        if not c.use_token_attention:
            return n_sentences > 0
        if not c.use_sentence_attention:
            return torch.zeros_like(n_sentences, dtype=torch.bool)
        return n_sentences >= c.n_facets

    @staticmethod
    def _attend(mha: nn.MultiheadAttention, Q: torch.Tensor, KV: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # An input with no valid key (an empty text) would give NaN; let it see position 0.
        # Its result is either discarded by the selector or comes from a [CLS] state.
        valid = valid.clone()
        valid[:, 0] |= ~valid.any(dim=1)
        out, w = mha(Q, KV, KV, key_padding_mask=~valid, need_weights=True, average_attn_weights=True)
        return out, w

    def aggregate(self, tokens: torch.Tensor, batch: Batch, need_kl_attention: bool = False) -> UniFAROutput:
        """Facet aggregation of section 3.2 on base token states [B, L, h]."""
        n_max = batch.max_sentences
        S, sent_mask = sentence_states(tokens, batch.sentence_ids, n_max)
        tok_mask = batch.attention_mask.bool()
        Q = self.facet_queries(self._input_embedding(tokens, S, batch.has_title))
        use_sent = self._choose_sentence_branch(batch.n_sentences)
        B, F_, h = Q.shape
        K = max(n_max, tokens.shape[1])
        emb = Q.new_zeros(B, F_, h)
        attn = Q.new_zeros(B, F_, K)
        # Each branch runs only when some input in the batch takes it.
        if bool(use_sent.any()):
            e, w = self._attend(self.mha_sent, Q, S, sent_mask)
            emb = torch.where(use_sent[:, None, None], e, emb)
            attn = torch.where(use_sent[:, None, None], F.pad(w, (0, K - w.shape[-1])), attn)
        if not bool(use_sent.all()):
            e, w = self._attend(self.mha_tok, Q, tokens, tok_mask)
            emb = torch.where(use_sent[:, None, None], emb, e)
            attn = torch.where(use_sent[:, None, None], attn, F.pad(w, (0, K - w.shape[-1])))
        kl_attn = None
        if need_kl_attention:
            # Figure 2: L_KL trains the aggregation module only, so it sees detached base states.
            Td, Sd = tokens.detach(), S.detach()
            Qd = self.facet_queries(self._input_embedding(Td, Sd, batch.has_title))
            _, kl_attn = self._attend(self.mha_sent, Qd, Sd, sent_mask)
        return UniFAROutput(
            embeddings=F.normalize(emb.float(), dim=-1),
            attention=attn,
            uses_sentences=use_sent,
            sentence_mask=sent_mask,
            token_mask=tok_mask,
            kl_attention=kl_attn,
        )

    def forward(self, batch: Batch, need_kl_attention: bool = False) -> UniFAROutput:
        """Facet aggregation (:meth:`aggregate`) on the base encoder's token states of ``batch``."""
        return self.aggregate(self.token_states(batch), batch, need_kl_attention)

    # ------------------------------------------------------------------ public encoders
    def tokenize_documents(self, docs: Sequence[Mapping[str, Any]]) -> list[EncodedInput]:
        """Documents (``{"title", "sentences"}`` or ``{"title", "abstract"}``) in the unified format."""
        if isinstance(docs, Mapping):
            raise TypeError("encode_documents expects a list of documents, got a single dict")
        texts = [normalize_document(d, i) for i, d in enumerate(docs)]
        return encode_inputs(self.tokenizer, texts, self.config.max_tokens)

    def tokenize_questions(self, questions: Sequence[str]) -> list[EncodedInput]:
        """Questions in the [CLS]-led format, split into sentences."""
        if isinstance(questions, str):
            raise TypeError("encode_questions expects a list of strings, got a single string")
        for i, q in enumerate(questions):
            if not isinstance(q, str):
                raise TypeError(f"question {i}: expected a string, got {type(q).__name__}")
        return encode_inputs(self.tokenizer, [("", split_sentences(q)) for q in questions], self.config.max_tokens)

    def encode_documents(
        self, docs: Sequence[Mapping[str, Any]], batch_size: int = 32, show_progress: bool | None = None,
        bf16: bool | None = None, state_cache: TokenStateCache | None = None,
    ) -> FacetEncoding:
        """Facet embeddings [N, F, h] of documents; see :meth:`encode`."""
        return self.encode(self.tokenize_documents(docs), batch_size, show_progress, bf16, state_cache)

    def encode_questions(
        self, questions: Sequence[str], batch_size: int = 64, show_progress: bool | None = None,
        bf16: bool | None = None, state_cache: TokenStateCache | None = None,
    ) -> FacetEncoding:
        """Facet embeddings [N, F, h] of questions; see :meth:`encode`."""
        return self.encode(self.tokenize_questions(questions), batch_size, show_progress, bf16, state_cache)

    @torch.inference_mode()
    def encode(
        self, items: Sequence[EncodedInput], batch_size: int = 32, show_progress: bool | None = None,
        bf16: bool | None = None, state_cache: TokenStateCache | None = None,
    ) -> FacetEncoding:
        """Encode tokenised inputs in batches sorted by length (less padding), in input order.

        Shows a progress bar when there are more than four batches (or ``show_progress=True``).
        ``bf16`` runs under bfloat16 autocast; by default on CUDA only. Embeddings come back on
        the CPU in float32. ``state_cache`` (shared by models whose base encoders are identical,
        e.g. untrained UniFAR and UniFAR trained with a frozen base) keys inputs by their token
        ids so that the base encoder runs once per input for all of them.
        """
        from tqdm import tqdm

        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        was_training = self.training
        self.eval()
        n = len(items)
        order = sorted(range(n), key=lambda i: -len(items[i].input_ids))
        starts = list(range(0, n, batch_size))
        show = show_progress if show_progress is not None else len(starts) > 4
        dev = self.device
        use_bf16 = (dev.type == "cuda") if bf16 is None else bf16
        autocast = torch.autocast(dev.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()
        embeddings = torch.zeros(n, self.config.n_facets, self.hidden_size)
        attention: list[torch.Tensor | None] = [None] * n
        branch: list[str] = [""] * n
        units: list[list[str]] = [[] for _ in range(n)]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        for s in tqdm(starts, desc="encoding", unit="batch", disable=not show):
            idx = order[s : s + batch_size]
            batch = collate([items[i] for i in idx], pad).to(dev)
            with autocast:
                if state_cache is None:
                    out = self(batch)
                else:
                    tokens = state_cache.token_states(self, batch)
                    out = self.aggregate(self.upper_states(tokens, batch.attention_mask, state_cache.top_layers), batch)
            embeddings[idx] = out.embeddings.float().cpu()
            att = out.attention.float().cpu()
            for j, i in enumerate(idx):
                if bool(out.uses_sentences[j]):
                    k = items[i].n_sentences
                    branch[i], units[i] = "sentence", list(items[i].units)
                else:
                    k = len(items[i].input_ids)
                    branch[i], units[i] = "token", self.tokenizer.convert_ids_to_tokens(items[i].input_ids)
                attention[i] = att[j, :, :k].clone()
        self.train(was_training)
        return FacetEncoding(
            embeddings=embeddings,
            attention=attention,  # type: ignore[arg-type]
            branch=branch,
            units=units,
            facets=self.config.facets,
            truncated=[x.truncated for x in items],
        )

    # ------------------------------------------------------------------ parameter groups
    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by learning-rate group (appendix A): base, anchors, aggregation."""
        groups: dict[str, list[nn.Parameter]] = {"base": [], "anchors": [], "aggregation": []}
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            key = "base" if name.startswith("base.") else "anchors" if name == "anchors" else "aggregation"
            groups[key].append(p)
        return groups

    # ------------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``base/`` (encoder config + tokenizer).

        The folder is self-contained: it loads without the original base weights and without pickle.
        Files are written under temporary names and renamed, so a crash never leaves a torn file.
        """
        from safetensors.torch import save_model

        d = Path(directory)
        (d / BASE_DIR).mkdir(parents=True, exist_ok=True)
        self.base.config.save_pretrained(d / BASE_DIR)
        self.tokenizer.save_pretrained(d / BASE_DIR)
        tmp = d / (WEIGHTS_NAME + ".tmp")
        save_model(self, str(tmp), metadata={"format": "pt", "library": "unifar"})
        os.replace(tmp, d / WEIGHTS_NAME)
        tmp = d / (CONFIG_NAME + ".tmp")
        self.config.to_json(tmp)
        os.replace(tmp, d / CONFIG_NAME)
        return d

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, device: str | torch.device | None = None) -> "UniFAR":
        """Load a folder written by :meth:`save_pretrained` (safetensors only, no pickle)."""
        from safetensors.torch import load_model
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        d = Path(directory)
        missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME, BASE_DIR) if not (d / n).exists()]
        if missing:
            raise FileNotFoundError(f"{d} is not a UniFAR checkpoint: missing {', '.join(missing)}")
        config = UniFARConfig.from_json(d / CONFIG_NAME)
        base = AutoModel.from_config(AutoConfig.from_pretrained(d / BASE_DIR))
        tokenizer = AutoTokenizer.from_pretrained(d / BASE_DIR)
        model = cls(config, base_model=base, tokenizer=tokenizer, device="cpu", init_anchors=False)
        missing, unexpected = load_model(model, str(d / WEIGHTS_NAME), strict=False)
        # An encoder's unused pooler may be absent from (or extra in) the file; nothing else may.
        missing = [k for k in missing if not k.startswith("base.pooler.")]
        unexpected = [k for k in unexpected if not k.startswith("base.pooler.")]
        if missing or unexpected:
            raise RuntimeError(
                f"{d / WEIGHTS_NAME} does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
        return model.to(pick_device(device))
