"""The real chat-LLM back ends behind :class:`~unifar.construction.llm.LLMClient`.

* :class:`TransformersClient`: a local causal LM given by a directory (loaded lazily, chat
  template when the tokenizer has one). A name that is not an existing directory is passed to
  ``transformers`` as a hub id, which only works where a hub is reachable.
* :class:`OpenAICompatibleClient`: ``POST {base_url}/chat/completions`` with plain ``requests``
  (OpenAI, vLLM, llama.cpp server, ...), retrying transient failures. The key is read from an
  environment variable at request time and never stored on the object, printed or logged.
* :func:`client_from_spec`: one of them from the notebooks' one-line ``llm`` parameter.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .llm import CachedClient, LLMClient, LLMError, Message, check_messages

if TYPE_CHECKING:
    import requests

__all__ = ["TransformersClient", "OpenAICompatibleClient", "client_from_spec"]

logger = logging.getLogger(__name__)


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

    def _content(self, resp: requests.Response) -> str:
        try:
            data = resp.json()
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"malformed chat-completions answer: {resp.text[:300]!r}") from None
        if not isinstance(content, str):
            raise LLMError(f"malformed chat-completions answer: content is {type(content).__name__}")
        return content


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
