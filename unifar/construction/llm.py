"""Pluggable chat-LLM clients for data construction, and an on-disk cache in front of any of them.

* :class:`TransformersClient`: a local causal LM given by a directory (loaded lazily, chat
  template when the tokenizer has one). A name that is not an existing directory is passed to
  ``transformers`` as a hub id, which only works where a hub is reachable.
* :class:`OpenAICompatibleClient`: ``POST {base_url}/chat/completions`` with plain ``requests``
  (OpenAI, vLLM, llama.cpp server, ...). The key is read from an environment variable at request
  time and never stored on the object, printed or logged.
* :class:`FakeClient`: canned answers for tests.
* :class:`CachedClient`: wraps a client; every answer is a file keyed by a hash of (client name,
  model, client settings, messages, generation arguments), written atomically, so an interrupted
  run resumes without paying twice.

Every client has ``name`` (the back-end kind), ``model`` and ``origin`` (``"llm:<model>"``,
recorded on every generated question).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = [
    "Message",
    "LLMClient",
    "LLMError",
    "TransformersClient",
    "OpenAICompatibleClient",
    "FakeClient",
    "CachedClient",
    "check_messages",
    "client_from_spec",
]

logger = logging.getLogger(__name__)

Message = dict[str, str]
_ROLES = ("system", "user", "assistant")


class LLMError(RuntimeError):
    """A back end failed (configuration, HTTP error after retries, malformed answer)."""


def check_messages(messages: Sequence[Mapping[str, str]]) -> list[Message]:
    """Validate chat messages (``[{"role", "content"}, ...]``) and return plain-dict copies."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise TypeError("messages must be a non-empty list of {'role', 'content'} dicts")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or set(m) != {"role", "content"}:
            raise ValueError(f"message {i} must have exactly the keys 'role' and 'content', got {m!r}")
        if m["role"] not in _ROLES:
            raise ValueError(f"message {i}: role must be one of {_ROLES}, got {m['role']!r}")
        if not isinstance(m["content"], str):
            raise TypeError(f"message {i}: content must be a string")
        out.append({"role": m["role"], "content": m["content"]})
    return out


class LLMClient(ABC):
    """A chat LLM: ``complete(messages, **gen_kwargs) -> str``."""

    name: str = "llm"
    model: str = "unknown"

    @abstractmethod
    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        """Return the assistant's answer to ``messages``."""

    @property
    def origin(self) -> str:
        """Provenance tag of generated data, ``"llm:<model>"``."""
        return f"llm:{self.model}"

    def settings(self) -> dict[str, Any]:
        """Settings that change answers (default generation arguments); part of the cache key."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


# ----- local transformers model -----------------------------------------------------------------
class TransformersClient(LLMClient):
    """A causal LM run with ``transformers``; ``temperature=0`` means greedy decoding.

    The model is loaded on the first :meth:`complete`. ``path`` should be a local directory;
    anything else is treated as a hub id (only then may ``transformers`` go online).
    A path that looks like a path (``./x``, ``/x``, ``a/b/c``) but does not exist is an error.
    Without a chat template in the tokenizer, messages are joined as ``System: ...`` /
    ``User: ...`` paragraphs followed by ``Assistant:``. ``model`` (used in cache keys and in
    ``origin``) is ``model_name`` or the directory's name, never the machine path; give two
    different local checkpoints with the same directory name distinct ``model_name`` values.
    """

    name = "transformers"

    def __init__(
        self,
        path: str | os.PathLike[str],
        device: str | None = None,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        dtype: str | None = None,
        trust_remote_code: bool = False,
        model_name: str | None = None,
    ) -> None:
        p = str(path)
        self.is_local = Path(p).expanduser().is_dir()
        looks_like_path = p.startswith((".", "/", "~")) or p.count("/") > 1 or "\\" in p
        if not self.is_local and looks_like_path:
            raise FileNotFoundError(f"model directory not found: {p}")
        self.path = str(Path(p).expanduser()) if self.is_local else p
        # Cache keys and origins carry a name (default: the directory's name), never a machine path.
        self.model = model_name or (Path(self.path).name if self.is_local else p)
        self.device = device
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.dtype = dtype
        self.trust_remote_code = trust_remote_code
        self._model: Any = None
        self._tokenizer: Any = None

    def settings(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature}

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kw: dict[str, Any] = {"trust_remote_code": self.trust_remote_code}
        if self.is_local:
            kw["local_files_only"] = True
        else:
            logger.warning("TransformersClient: %r is not a local directory; loading it as a hub id", self.path)
        self._tokenizer = AutoTokenizer.from_pretrained(self.path, **kw)
        model_kw = dict(kw)
        if self.dtype is not None:
            model_kw["dtype"] = getattr(torch, self.dtype)
        self._model = AutoModelForCausalLM.from_pretrained(self.path, **model_kw)
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._model.to(device).eval()
        self.device = device

    def _prompt_ids(self, messages: list[Message]) -> Any:
        tok = self._tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            return ids["input_ids"]
        text = "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages) + "\n\nAssistant:"
        return tok(text, return_tensors="pt")["input_ids"]

    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        import torch

        msgs = check_messages(messages)
        self._load()
        input_ids = self._prompt_ids(msgs).to(self.device)
        temperature = float(gen_kwargs.pop("temperature", self.temperature))
        kw: dict[str, Any] = {"max_new_tokens": int(gen_kwargs.pop("max_new_tokens", self.max_new_tokens))}
        if temperature > 0:
            kw.update(do_sample=True, temperature=temperature)
        else:
            kw.update(do_sample=False)
        pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = self._tokenizer.eos_token_id
        kw["pad_token_id"] = pad
        kw.update(gen_kwargs)
        with torch.inference_mode():
            out = self._model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **kw)
        return self._tokenizer.decode(out[0, input_ids.shape[1] :], skip_special_tokens=True).strip()


# ----- OpenAI-compatible HTTP endpoint ----------------------------------------------------------
class OpenAICompatibleClient(LLMClient):
    """Chat completions over HTTP: ``POST {base_url}/chat/completions``.

    The key comes from the environment variable ``api_key_env`` when a request is made (a fully
    cached run needs none); ``api_key_env=None`` sends no ``Authorization`` header (local
    servers). Connection errors, timeouts, HTTP 429 and 5xx are retried ``retries`` times with
    exponential backoff (``backoff * 2**attempt`` seconds, at most ``max_backoff``); other HTTP
    errors fail at once. Error messages never contain the key.
    """

    name = "openai-compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int | None = 512,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self._sleep = sleep

    def settings(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env is not None:
            key = os.environ.get(self.api_key_env, "").strip()
            if not key:
                raise LLMError(
                    f"no API key: set the environment variable {self.api_key_env} "
                    f"(or pass api_key_env=None for a server without authentication)"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        import requests

        payload: dict[str, Any] = {"model": self.model, "messages": check_messages(messages), "temperature": self.temperature}
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        payload.update(gen_kwargs)
        url = f"{self.base_url}/chat/completions"
        headers = self._headers()
        last = ""
        for attempt in range(self.retries + 1):
            try:
                resp = requests.post(url, json=payload, headers=headers, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as err:
                last = f"{type(err).__name__}"
            else:
                if resp.status_code == 200:
                    return self._content(resp)
                body = resp.text[:300].replace("\n", " ")
                last = f"HTTP {resp.status_code}: {body}"
                if resp.status_code != 429 and resp.status_code < 500:
                    raise LLMError(f"{url} answered {last}")
            if attempt < self.retries:
                delay = min(self.max_backoff, self.backoff * 2**attempt)
                logger.warning("%s failed (%s); retry %d/%d in %.1fs", url, last, attempt + 1, self.retries, delay)
                self._sleep(delay)
        raise LLMError(f"{url} failed after {self.retries + 1} attempts; last error: {last}")

    def _content(self, resp: Any) -> str:
        try:
            data = resp.json()
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"malformed chat-completions answer: {resp.text[:300]!r}") from None
        if not isinstance(content, str):
            raise LLMError(f"malformed chat-completions answer: content is {type(content).__name__}")
        return content


# ----- tests ------------------------------------------------------------------------------------
class FakeClient(LLMClient):
    """Canned answers: a list (returned in order; an error when used up) or a function
    ``f(messages, **gen_kwargs) -> str``. ``calls`` records every request.

    >>> c = FakeClient(["a", "b"])
    >>> c.complete([{"role": "user", "content": "hi"}]), c.complete([{"role": "user", "content": "hi"}])
    ('a', 'b')
    """

    name = "fake"

    def __init__(self, responses: Sequence[str] | Callable[..., str], model: str = "fake") -> None:
        self.model = model
        self._fn = responses if callable(responses) else None
        self._responses = None if callable(responses) else list(responses)
        self.calls: list[tuple[list[Message], dict[str, Any]]] = []

    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        msgs = check_messages(messages)
        self.calls.append((msgs, dict(gen_kwargs)))
        if self._fn is not None:
            return str(self._fn(msgs, **gen_kwargs))
        assert self._responses is not None
        i = len(self.calls) - 1
        if i >= len(self._responses):
            raise LLMError(f"FakeClient has only {len(self._responses)} responses; call {i + 1} asked for more")
        return self._responses[i]


# ----- cache ------------------------------------------------------------------------------------
class CachedClient(LLMClient):
    """An on-disk cache in front of ``client``; ``hits`` and ``misses`` count lookups.

    One JSON file per answer, ``<cache_dir>/<key[:2]>/<key>.json``, written to a temporary file
    and moved into place with ``os.replace``, so a crash never leaves a half-written entry.
    """

    def __init__(self, client: LLMClient, cache_dir: str | os.PathLike[str]) -> None:
        self.client = client
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.client.name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self.client.model

    def settings(self) -> dict[str, Any]:
        return self.client.settings()

    def __repr__(self) -> str:
        return f"CachedClient({self.client!r}, hits={self.hits}, misses={self.misses})"

    def key_material(self, messages: Sequence[Mapping[str, str]], gen_kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "client": self.client.name,
            "model": self.client.model,
            "settings": self.client.settings(),
            "messages": check_messages(messages),
            "gen_kwargs": dict(gen_kwargs),
        }

    def key(self, messages: Sequence[Mapping[str, str]], gen_kwargs: Mapping[str, Any] | None = None) -> str:
        """SHA-256 of the canonical JSON of :meth:`key_material`."""
        blob = json.dumps(self.key_material(messages, gen_kwargs or {}), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            return str(json.loads(path.read_text(encoding="utf-8"))["response"])
        except (OSError, ValueError, KeyError) as err:
            logger.warning("ignoring unreadable cache entry %s (%s)", path.name, err)
            return None

    def put(self, key: str, response: str, material: Mapping[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"key": key, **material, "response": response}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, ensure_ascii=False, default=str)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        material = self.key_material(messages, gen_kwargs)
        key = self.key(messages, gen_kwargs)
        cached = self.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        response = self.client.complete(messages, **gen_kwargs)
        self.put(key, response, material)
        self.misses += 1
        return response

    def __len__(self) -> int:
        return sum(1 for _ in self.cache_dir.glob("*/*.json"))


def client_from_spec(spec: str | None, cache_dir: str | os.PathLike[str] | None = None) -> LLMClient | None:
    """A client from a one-line spec (the notebooks' ``llm`` parameter), cached when ``cache_dir``:

    * ``"none"`` or ``None``: no LLM (the offline back ends are used);
    * ``"transformers:<path>"``: a local causal LM directory (or hub id where a hub is reachable);
    * ``"openai:<base_url>#<model>"``: an OpenAI-compatible endpoint; the key comes from
      ``$OPENAI_API_KEY``.

    >>> client_from_spec("none") is None
    True
    >>> client_from_spec("openai:http://localhost:8000/v1#qwen").model
    'qwen'
    """
    if spec is None or spec.strip().lower() in ("", "none"):
        return None
    kind, _, rest = spec.partition(":")
    if kind == "transformers" and rest:
        client: LLMClient = TransformersClient(rest)
    elif kind == "openai" and "#" in rest:
        url, _, model = rest.rpartition("#")
        client = OpenAICompatibleClient(url, model)
    else:
        raise ValueError(
            f"LLM spec {spec!r} not understood; use 'none', 'transformers:<path>' or 'openai:<base_url>#<model>'"
        )
    return CachedClient(client, cache_dir) if cache_dir is not None else client
