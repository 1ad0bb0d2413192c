"""The two configurations of a run: :class:`UniFARConfig`, every hyper-parameter of the paper and every
ablation switch of its table 3 (the model and its objective), and :class:`TrainArgs`, the run-level
options of training (output folder, steps, checkpoints, held-out loss, device)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .typecheck import check_fields

__all__ = ["UniFARConfig", "TrainArgs", "ABLATIONS", "DISTILL_LOSSES", "PAPER_PROFILE", "TRAINING_FIELDS", "check_training_config"]


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
    # "facets": the paper's facet aggregation. "mean": a single-vector control (not the paper's
    # model): every facet embedding is the mean of all token states of the input, so a model
    # trained by the same loop on the same FTUs differs from UniFAR only in facet-awareness
    # (chapter 5's control). It has no facet attention, so it needs use_kl_loss=False.
    aggregation: str = "facets"

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
    # Beyond the paper: distil the teacher's graded scores over the candidate list stored with
    # each FTU (chapter 3's hybrid teacher): L_total += distill_weight * mean_(d_q, f) L_KD^(f).
    # 0 keeps the paper's objective unchanged.
    distill_weight: float = 0.0
    distill_loss: str = "kl"  # "kl": listwise KL (unifar.losses.listwise_distillation_loss); "margin_mse"
    distill_temperature: float = 1.0  # tau_T, the teacher's softmax temperature (the student keeps tau)

    # --- ablation switches (table 3) ------------------------------------------------------
    use_sentence_attention: bool = True  # False = "w/o MHA_sent" (always the token branch)
    use_token_attention: bool = True  # False = "w/o MHA_tok" (always the sentence branch)
    freeze_anchors: bool = False  # True = "Freeze A_facet"
    use_anchors: bool = True  # False = "w/o A_facet": every facet query is the same vector
    use_input_embedding: bool = True  # False = "w/o E_input": queries ignore the input
    use_kl_loss: bool = True  # False = "w/o L_KL"
    use_qd_loss: bool = True  # False = "w/o L_QD"

    def __post_init__(self) -> None:
        # Types first, before any conversion: tuple("bmr") would be three one-letter facets and a
        # string "false" is truthy (a JSON list for a tuple field is accepted).
        check_fields(self)
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
        if self.aggregation not in ("facets", "mean"):
            raise ValueError(f"aggregation must be 'facets' or 'mean', got {self.aggregation!r}")
        if self.aggregation == "mean" and self.use_kl_loss:
            raise ValueError("aggregation='mean' has no facet attention for L_KL to supervise; set use_kl_loss=False")
        if self.distill_temperature <= 0:
            raise ValueError(f"distill_temperature must be positive, got {self.distill_temperature}")
        if self.distill_loss not in DISTILL_LOSSES:
            raise ValueError(f"distill_loss must be one of {DISTILL_LOSSES}, got {self.distill_loss!r}")
        _check_ranges(self)

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
    def from_dict(cls, d: dict[str, Any], where: str = "") -> "UniFARConfig":
        """Build from a dict (e.g. read from JSON); ``where`` (a file name) prefixes every error."""
        prefix = f"{where}: " if where else ""
        if not isinstance(d, dict):
            raise TypeError(f"{prefix}a UniFAR config must be a JSON object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{prefix}unknown UniFARConfig field(s): {', '.join(unknown)}")
        try:
            return cls(**d)
        except (TypeError, ValueError) as err:
            raise type(err)(f"{prefix}{err}") from None

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "UniFARConfig":
        """Load from a JSON string or a file path."""
        s = str(text_or_path)
        where = ""
        if not s.lstrip().startswith("{"):
            path = Path(s)
            where = str(path)
            try:
                s = path.read_text()
            except OSError as e:
                raise FileNotFoundError(f"cannot read UniFAR config {path}: {e}") from None
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where or 'UniFAR config'} is not valid JSON: {e}") from None
        return cls.from_dict(d, where)

    def ablation(self, name: str) -> "UniFARConfig":
        """A copy with one table-3 ablation applied (names in :data:`ABLATIONS`)."""
        if name not in ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)}")
        return UniFARConfig.from_dict({**self.to_dict(), **ABLATIONS[name]})


def _check(ok: bool, name: str, rule: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{name} must be {rule}, got {value!r}")


def _check_ranges(c: "UniFARConfig") -> None:
    """Ranges of :class:`UniFARConfig`'s fields (their types are checked already)."""
    for f in fields(c):  # NaN and infinity pass every comparison below
        v = getattr(c, f.name)
        _check(not isinstance(v, float) or math.isfinite(v), f.name, "finite", v)
    for i, name in enumerate(c.facets):
        _check(bool(name.strip()), f"facets[{i}]", "a non-empty name", name)
    _check(len(set(c.facets)) == len(c.facets), "facets", "distinct names", list(c.facets))
    for name in ("num_heads", "batch_size", "grad_accumulation", "epochs"):
        _check(getattr(c, name) >= 1, name, "at least 1", getattr(c, name))
    _check(c.mlp_hidden is None or c.mlp_hidden >= 1, "mlp_hidden", "at least 1 (or None)", c.mlp_hidden)
    for name in ("dropout", "warmup_ratio"):
        _check(0.0 <= getattr(c, name) < 1.0, name, "in [0, 1)", getattr(c, name))
    for name in ("init_qk_std", "kl_lambda_start", "kl_lambda_end", "lr_base", "lr_anchors", "lr_aggregation",
                 "weight_decay", "seed", "distill_weight"):
        _check(getattr(c, name) >= 0, name, "at least 0", getattr(c, name))


#: The distillation losses of :mod:`unifar.losses` (``UniFARConfig.distill_loss``).
DISTILL_LOSSES = ("kl", "margin_mse")

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

#: ``--profile paper``: MPNet base with the learning rates of appendix A (3e-6 for the base model
#: and the anchors; the aggregation modules keep 5e-5) and the paper's other training values.
PAPER_PROFILE: dict[str, Any] = {
    "base_model": "mpnet",
    "lr_base": 3e-6,
    "lr_anchors": 3e-6,
    "lr_aggregation": 5e-5,
    "temperature": 0.08,
    "kl_lambda_start": 0.3,
    "kl_lambda_end": 0.5,
    "warmup_ratio": 0.05,
    "batch_size": 4,
    "grad_accumulation": 4,
    "epochs": 2,
}

#: UniFARConfig fields that only the training loop reads; every other field shapes the model.
TRAINING_FIELDS = frozenset({
    "temperature", "kl_lambda_start", "kl_lambda_end", "lr_base", "lr_anchors", "lr_aggregation",
    "weight_decay", "warmup_ratio", "batch_size", "grad_accumulation", "epochs", "use_kl_loss",
    "use_qd_loss", "distill_weight", "distill_loss", "distill_temperature",
})


def check_training_config(model_config: UniFARConfig, config: UniFARConfig) -> None:
    """Refuse to train a model built from ``model_config`` with a ``config`` that differs from it
    in a field that shapes the model (the :data:`TRAINING_FIELDS` may differ).

    >>> check_training_config(UniFARConfig(), UniFARConfig(epochs=5))
    >>> check_training_config(UniFARConfig(), UniFARConfig(num_heads=4))
    Traceback (most recent call last):
    ValueError: config and model.config differ in model field(s) ['num_heads']; ...
    """
    a, b = model_config.to_dict(), config.to_dict()
    differ = sorted(k for k in a if k not in TRAINING_FIELDS and a[k] != b[k])
    if differ:
        raise ValueError(
            f"config and model.config differ in model field(s) {differ}; build the model from the config "
            "or pass config=None to train with model.config"
        )


@dataclass
class TrainArgs:
    """Run-level options (everything the paper's hyper-parameters in :class:`UniFARConfig` are not)."""

    output_dir: str = "runs/unifar"
    epochs: int | None = None  # overrides config.epochs
    max_steps: int | None = None  # stop (and end the schedule) after this many optimizer steps
    max_positives: int | None = None  # per facet and FTU, sampled (our choice; paper: all)
    max_negatives: int | None = None
    # teacher candidates per FTU and step (sampled, the teacher's top ones always kept; None: all)
    max_teacher_candidates: int | None = None
    save_every: int = 500  # optimizer steps between checkpoints (and one at the end)
    keep_checkpoints: int = 2
    # False: delete checkpoints/ once final/ and run.json are written. Checkpoints only serve a
    # resume, and each holds a whole model (about 100 MB for MiniLM): the book's chapters train a
    # dozen runs per execution and keep only the final models.
    keep_checkpoints_when_done: bool = True
    log_every: int = 1  # optimizer steps between log.jsonl records
    eval_fraction: float = 0.0  # FTUs held out (seeded) for a held-out loss
    eval_every: int = 0  # optimizer steps between held-out losses (0: only at the end)
    eval_max_ftus: int | None = 256
    seed: int = 0
    device: str | None = None  # default: cuda when available (the local rank's GPU under torchrun)
    bf16: bool | None = None  # bf16 autocast; default: on CUDA only
    tf32: bool = True  # TF32 matmuls/convolutions on CUDA
    grad_clip: float | None = 1.0  # our choice: the paper does not clip
    max_loss: float = 100.0  # a total loss above this stops the run (InfoNCE at tau=0.08 stays below ~60)
    resume: bool = False
    progress: bool = True  # tqdm bar (rank 0)
    # Our CPU profile: the base encoder is frozen (eval mode, no gradient) and its token states
    # cached per input, so only the anchors and the aggregation module train. The paper
    # fine-tunes the base as well (False).
    freeze_base: bool = False
    # With freeze_base: the top k transformer layers of the base still train (at lr_base), on
    # cached states of the frozen layers below; a CPU-sized step towards the paper's trainable base.
    train_top_layers: int = 0
    # Dropout in those trained layers (the encoder's own rates). Off by default, our CPU choice:
    # on a CPU, dropout's random masks and the unfused attention they force cost about half of
    # a top-layer training step (measured here on MiniLM: 2.97 s -> 1.44 s per 4 FTUs).
    top_layers_dropout: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.output_dir, Path):  # a folder given as a Path is as good as its name
            self.output_dir = str(self.output_dir)
        check_fields(self)  # e.g. epochs="1" from a hand-written dict would fail deep in the loop
        _check(bool(self.output_dir), "output_dir", "a folder name", self.output_dir)
        for name in ("eval_every", "seed"):
            _check(getattr(self, name) >= 0, name, "at least 0", getattr(self, name))
        _check(self.max_loss > 0, "max_loss", "positive", self.max_loss)
        _check(self.grad_clip is None or (math.isfinite(self.grad_clip) and self.grad_clip > 0), "grad_clip",
               "positive and finite (or None)", self.grad_clip)
        for name in ("save_every", "keep_checkpoints", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("epochs", "max_steps", "max_positives", "max_negatives", "max_teacher_candidates",
                     "eval_max_ftus"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} must be at least 1 (or None), got {v}")
        if self.train_top_layers < 0:
            raise ValueError(f"train_top_layers must be at least 0, got {self.train_top_layers}")
        if self.train_top_layers and not self.freeze_base:
            raise ValueError("train_top_layers needs freeze_base=True (without it the whole base trains)")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
