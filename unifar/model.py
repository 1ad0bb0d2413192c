"""The UniFAR model (paper section 3): a replaceable base encoder and the facet aggregation module.

Reading order, with the paper's symbols:

* :func:`unifar.pooling.sentence_states` -- section 3.1, ``S_i = MeanPool(T_{S_i})`` for the
  whole batch at once;
* :meth:`UniFAR.facet_queries` -- section 3.2, ``Q = Add&Norm(MLP([A ; E_input]))``;
* :meth:`UniFAR.aggregate` -- section 3.2, ``E_facet = MHA_sent(Q, S, S)`` if ``|S| >= N_facet``
  else ``MHA_tok(Q, T, T)``, chosen per input inside one batch (``MHA_tok`` by
  :func:`unifar.attention.folded_attention`, the same function in a sixteenth of the arithmetic);
* :meth:`UniFAR.encode_documents` / :meth:`UniFAR.encode_questions` -- the public encoders (the
  batched loop: :func:`unifar.encoding.encode_batched`).

Scoring with the facet similarity matrix (section 3.3) lives in :mod:`unifar.scoring`, the losses
(section 4.2) in :mod:`unifar.losses`, the cache of a frozen base's token states in
:mod:`unifar.caching`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attend
from .base_models import encoder_and_tokenizer, encoder_layers, run_layers, top_encoder_layers
from .checkpoints import BASE_DIR, CONFIG_NAME, MANIFEST_NAME, WEIGHTS_NAME, check_model_folder, load_weights
from .config import UniFARConfig
from .files import file_digests, write_json
from .optim import parameter_group
from .encoding import FacetEncoding, encode_batched
from .pooling import mean_pool, sentence_states
from .runtime import pick_device
from .text import Batch, EncodedInput, collate, encode_inputs, normalize_document, split_sentences

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from .caching import TokenStateCache

__all__ = ["UniFAR", "UniFAROutput"]  # FacetEncoding is unifar.encoding's (imported here for callers)


@dataclass
class UniFAROutput:
    """What one forward pass produces."""

    embeddings: torch.Tensor  # [B, F, h], L2-normalised facet embeddings
    attention: torch.Tensor  # [B, F, K]: head-averaged weights over sentences or tokens (padded)
    uses_sentences: torch.Tensor  # [B] bool: which branch each input took
    sentence_mask: torch.Tensor  # [B, n] bool
    token_mask: torch.Tensor  # [B, L] bool
    kl_attention: torch.Tensor | None = None  # [B, F, n]: sentence attention on detached base states


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
        tokenizer: PreTrainedTokenizerBase | None = None,
        device: str | torch.device | None = None,
        init_anchors: bool = True,
    ) -> None:
        super().__init__()
        self.config = config = config or UniFARConfig()
        base_model, tokenizer = encoder_and_tokenizer(config.base_model, base_model, tokenizer)
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
        # A forward pass, whose last bits depend on the CPU and its threads: while the anchors are
        # these, a model digest names them by this recipe (unifar.search.models.model_digest).
        self.anchors_from_words = self.anchors.detach().to("cpu", copy=True)

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
        """The base encoder's transformer layers (:func:`~unifar.base_models.encoder_layers`)."""
        return encoder_layers(self.base, self.config.base_model)

    def top_base_layers(self, k: int) -> nn.ModuleList:
        """The top ``k`` (>= 1) layers of the base, checked against its depth."""
        return top_encoder_layers(self.base, k, self.config.base_model)

    def lower_states(self, batch: Batch, top_layers: int) -> torch.Tensor:
        """``[B, L, h]`` hidden states entering the top ``top_layers`` layers of the base."""
        if top_layers == 0:
            return self.token_states(batch)
        n = len(self.base_layers()) - len(self.top_base_layers(top_layers))
        out = self.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
        return out.hidden_states[n]  # hidden_states[0] is the embedding output

    def upper_states(self, hidden: torch.Tensor, attention_mask: torch.Tensor, top_layers: int,
                     chunk_size: int | None = 8) -> torch.Tensor:
        """Run the top ``top_layers`` layers of the base on ``hidden`` [B, L, h] (from
        :meth:`lower_states`) in length-sorted chunks (:func:`~unifar.base_models.run_layers`)."""
        if top_layers == 0:
            return hidden
        return run_layers(self.base, self.top_base_layers(top_layers), hidden, attention_mask, chunk_size)

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

    def aggregate(self, tokens: torch.Tensor, batch: Batch, need_kl_attention: bool = False) -> UniFAROutput:
        """Facet aggregation of section 3.2 on base token states [B, L, h] (``aggregation="mean"``: the control)."""
        if self.config.aggregation == "mean":
            return self._mean_aggregate(tokens, batch)
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
            e, w = attend(self.mha_sent, Q, S, sent_mask)
            emb = torch.where(use_sent[:, None, None], e, emb)
            attn = torch.where(use_sent[:, None, None], F.pad(w, (0, K - w.shape[-1])), attn)
        if not bool(use_sent.all()):
            # Only the inputs that take the token branch (questions, short texts) run it, cut to
            # their own longest row: a batch of long documents with one question in it attended
            # over every document's tokens, which doubled the cost of a training step.
            rows = (~use_sent).nonzero().squeeze(1)
            width = max(int(tok_mask[rows].sum(dim=1).max()), 1)
            e, w = attend(self.mha_tok, Q[rows], tokens[rows, :width], tok_mask[rows, :width], folded=True)
            emb = emb.index_copy(0, rows, e.to(emb.dtype))
            attn = attn.index_copy(0, rows, F.pad(w, (0, K - w.shape[-1])).to(attn.dtype))
        kl_attn = None
        if need_kl_attention:
            # Figure 2: L_KL trains the aggregation module only, so it sees detached base states.
            Td, Sd = tokens.detach(), S.detach()
            Qd = self.facet_queries(self._input_embedding(Td, Sd, batch.has_title))
            _, kl_attn = attend(self.mha_sent, Qd, Sd, sent_mask)
        return UniFAROutput(embeddings=F.normalize(emb.float(), dim=-1), attention=attn, uses_sentences=use_sent,
                            sentence_mask=sent_mask, token_mask=tok_mask, kl_attention=kl_attn)

    def _mean_aggregate(self, tokens: torch.Tensor, batch: Batch) -> UniFAROutput:
        """The single-vector control: every facet embedding is the input's token mean."""
        m, F_ = batch.attention_mask, self.config.n_facets
        w = (m / m.sum(dim=1, keepdim=True).clamp(min=1)).float().unsqueeze(1).expand(-1, F_, -1)
        return UniFAROutput(F.normalize(mean_pool(tokens, m), dim=-1).unsqueeze(1).expand(-1, F_, -1), w, m[:, 0] < 0,
                            sentence_states(tokens, batch.sentence_ids, batch.max_sentences)[1], m.bool())

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
        sentence_states: bool = False,
    ) -> FacetEncoding:
        """Facet embeddings [N, F, h] of documents; see :meth:`encode`."""
        return self.encode(self.tokenize_documents(docs), batch_size, show_progress, bf16, state_cache,
                           sentence_states)

    def encode_questions(
        self, questions: Sequence[str], batch_size: int = 64, show_progress: bool | None = None,
        bf16: bool | None = None, state_cache: TokenStateCache | None = None,
    ) -> FacetEncoding:
        """Facet embeddings [N, F, h] of questions; see :meth:`encode`."""
        return self.encode(self.tokenize_questions(questions), batch_size, show_progress, bf16, state_cache)

    def encode(
        self, items: Sequence[EncodedInput], batch_size: int = 32, show_progress: bool | None = None,
        bf16: bool | None = None, state_cache: TokenStateCache | None = None,
        sentence_states: bool = False,
    ) -> FacetEncoding:
        """Encode tokenised inputs in length-sorted batches, in input order
        (:func:`unifar.encoding.encode_batched`, which documents the options)."""
        return encode_batched(self, items, batch_size, show_progress, bf16, state_cache, sentence_states)

    # ------------------------------------------------------------------ parameter groups
    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by learning-rate group (appendix A): base, anchors, aggregation."""
        groups: dict[str, list[nn.Parameter]] = {"base": [], "anchors": [], "aggregation": []}
        for name, p in ((n, p) for n, p in self.named_parameters() if p.requires_grad):
            groups[parameter_group(name)].append(p)  # unifar.optim.parameter_group
        return groups

    # ------------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json``, ``model.safetensors``, ``base/`` (encoder config + tokenizer) and
        ``manifest.json`` (the SHA-256 of each of them and the config the weights were saved with).

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
        # Written last: a folder with a manifest is complete, and its digests let a load refuse
        # flipped bytes or a truncated file instead of returning NaN embeddings.
        names = [CONFIG_NAME, WEIGHTS_NAME] + [p.relative_to(d).as_posix() for p in (d / BASE_DIR).rglob("*") if p.is_file()]
        write_json(d / MANIFEST_NAME, {"format": "unifar-model", "config": self.config.to_dict(),
                                       "files": file_digests(d, names)})
        return d

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, device: str | torch.device | None = None) -> "UniFAR":
        """Load a folder written by :meth:`save_pretrained` (safetensors only, no pickle), checked by
        :func:`check_model_folder` and :func:`load_weights`."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        d = Path(directory)
        missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME, BASE_DIR) if not (d / n).exists()]
        if missing:
            raise FileNotFoundError(f"{d} is not a UniFAR checkpoint: missing {', '.join(missing)}")
        config = check_model_folder(d)
        base = AutoModel.from_config(AutoConfig.from_pretrained(d / BASE_DIR))
        tokenizer = AutoTokenizer.from_pretrained(d / BASE_DIR)
        model = cls(config, base_model=base, tokenizer=tokenizer, device="cpu", init_anchors=False)
        load_weights(model, d / WEIGHTS_NAME, "cpu")
        return model.to(pick_device(device))

