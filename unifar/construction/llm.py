"""Pluggable chat-LLM clients for data construction: the client interface, a test double, an
and an on-disk cache in front of any client.

* :class:`LLMClient`: the interface, ``complete(messages, **gen_kwargs) -> str``; the real back
  ends (a local ``transformers`` model, an OpenAI-compatible endpoint) and
  :func:`~unifar.construction.llm_backends.client_from_spec`, which builds one from a one-line
  spec, are in :mod:`unifar.construction.llm_backends`.
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
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = [
    "Message",
    "LLMClient",
    "LLMError",
    "FakeClient",
    "CachedClient",
    "check_messages",
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
