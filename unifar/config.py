"""One dataclass with every hyper-parameter of the paper and every ablation switch of its table 3."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["UniFARConfig", "ABLATIONS"]


@dataclass
class UniFARConfig:
    """Configuration of a UniFAR model and of its training (paper sections 3, 4.2 and appendix A).

    Values marked *paper* are stated in the paper; the others are our choices where it is silent.

    >>> c = UniFARConfig(num_heads=4, use_kl_loss=False)
    >>> UniFARConfig.from_json(c.to_json()) == c
    True
    >>> c.n_facets
    3
    """

    # --- model (section 3) ---------------------------------------------------------------
    base_model: str = "minilm"  # short name (minilm, mpnet), hub id or local path
    facets: tuple[str, ...] = ("background", "method", "result")  # paper: bg, mt, rs
    facet_words: tuple[str, ...] | None = None  # words whose embeddings initialise the anchors
    num_heads: int = 8  # heads of MHA_sent and MHA_tok (paper: not stated)
    mlp_hidden: int | None = None  # hidden width of the query MLP (None: the encoder's width)
    dropout: float = 0.0  # in the aggregation module (paper: not stated)
    max_tokens: int = 512  # input budget, truncated by whole trailing sentences
    # "identity": value/output projections start as the identity and query/key projections
    # near zero, so untrained facet embeddings start near the mean of sentence (or token)
    # states, i.e. at the base encoder's quality. "random": PyTorch's default initialisation.
    init: str = "identity"
    init_qk_std: float = 0.02
    # With the identity init: start the *key* projection at the identity too (queries stay small).
    # Attention logits are bilinear in W_q and W_k; with both near zero each one's gradient is
    # scaled by the other (a saddle; tests/test_model.py measures about 9x more gradient on W_q
    # with K = I). Still uniform at initialisation. Our option, off by default: on chapter 4's
    # dev runs it did not make the frozen profile's attention move (section 4.7,
    # results/ch04/tuning_dev_key_init.json). The paper does not state its initialisation.
    init_key_identity: bool = False
    # False = the value and output projections of MHA_sent and MHA_tok stay at their initial
    # values and only *where* each facet attends is learned (anchors, E_input, query MLP, Q/K):
    # with the identity init every facet embedding stays a weighted mean of the base encoder's
    # states, in the base's own space. Our CPU default (a few thousand weak FTUs); the paper
    # trains them (True).
    train_values: bool = True
    seed: int = 0  # seeds the aggregation module's initialisation

    # --- training (section 4.2, appendix A) ----------------------------------------------
    temperature: float = 0.08  # paper
    kl_lambda_start: float = 0.3  # paper: lambda annealed linearly 0.3 -> 0.5
    kl_lambda_end: float = 0.5
    lr_base: float = 2e-5  # paper (SciBERT, Contriever); 3e-6 for MPNet
    lr_anchors: float = 2e-5  # paper: same as the base model
    lr_aggregation: float = 5e-5  # paper: other aggregation modules
    weight_decay: float = 0.01
    warmup_ratio: float = 0.05  # paper: 5 % linear warm-up
    batch_size: int = 4  # paper: 4 FTUs per step
    grad_accumulation: int = 4  # paper
    epochs: int = 2  # paper

    # --- ablation switches (table 3) ------------------------------------------------------
    use_sentence_attention: bool = True  # False = "w/o MHA_sent" (always the token branch)
    use_token_attention: bool = True  # False = "w/o MHA_tok" (always the sentence branch)
    freeze_anchors: bool = False  # True = "Freeze A_facet"
    use_anchors: bool = True  # False = "w/o A_facet": every facet query is the same vector
    use_input_embedding: bool = True  # False = "w/o E_input": queries ignore the input
    use_kl_loss: bool = True  # False = "w/o L_KL"
    use_qd_loss: bool = True  # False = "w/o L_QD"

    def __post_init__(self) -> None:
        self.facets = tuple(self.facets)
        if self.facet_words is not None:
            self.facet_words = tuple(self.facet_words)
            if len(self.facet_words) != len(self.facets):
                raise ValueError(
                    f"facet_words has {len(self.facet_words)} entries, facets has {len(self.facets)}"
                )
        if len(self.facets) < 1:
            raise ValueError("facets must name at least one facet")
        if self.init not in ("identity", "random"):
            raise ValueError(f"init must be 'identity' or 'random', got {self.init!r}")
        if self.init_key_identity and self.init != "identity":
            raise ValueError("init_key_identity needs init='identity'")
        if not (self.use_sentence_attention or self.use_token_attention):
            raise ValueError("at least one of use_sentence_attention, use_token_attention must be True")
        if self.max_tokens < 8:
            raise ValueError(f"max_tokens must be at least 8, got {self.max_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")

    @property
    def n_facets(self) -> int:
        return len(self.facets)

    @property
    def anchor_words(self) -> tuple[str, ...]:
        return self.facet_words or self.facets

    def kl_lambda(self, progress: float) -> float:
        """lambda at a training progress in [0, 1], linearly annealed (appendix A).

        >>> UniFARConfig().kl_lambda(0.5)
        0.4
        """
        p = min(max(progress, 0.0), 1.0)
        return round(self.kl_lambda_start + p * (self.kl_lambda_end - self.kl_lambda_start), 12)

    # --- JSON round trip ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["facets"] = list(self.facets)
        d["facet_words"] = list(self.facet_words) if self.facet_words else None
        return d

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "UniFARConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown UniFARConfig field(s): {', '.join(unknown)}")
        return cls(**d)

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "UniFARConfig":
        """Load from a JSON string or a file path."""
        s = str(text_or_path)
        if not s.lstrip().startswith("{"):
            path = Path(s)
            try:
                s = path.read_text()
            except OSError as e:
                raise FileNotFoundError(f"cannot read UniFAR config {path}: {e}") from None
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ValueError(f"UniFAR config is not valid JSON: {e}") from None
        return cls.from_dict(d)

    def ablation(self, name: str) -> "UniFARConfig":
        """A copy with one table-3 ablation applied (names in :data:`ABLATIONS`)."""
        if name not in ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)}")
        return UniFARConfig.from_dict({**self.to_dict(), **ABLATIONS[name]})


#: Table 3's rows as config overrides.
ABLATIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "w/o MHA_sent": {"use_sentence_attention": False},
    "w/o MHA_tok": {"use_token_attention": False},
    "freeze anchors": {"freeze_anchors": True},
    "w/o anchors": {"use_anchors": False},
    "w/o E_input": {"use_input_embedding": False},
    "w/o L_KL": {"use_kl_loss": False},
    "w/o L_QD": {"use_qd_loss": False},
}
