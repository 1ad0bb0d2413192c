"""Text side of UniFAR: sentence splitting, the unified input format of section 3.1, truncation, batches.

A document becomes ``[CLS] Title [SEP] S1 [SEP] ... [SEP] Sd [SEP]`` and a question (or a
document without a title) ``[CLS] S1 [SEP] ... [SEP] Sq [SEP]``, always with the tokenizer's own
special tokens (``<s>``/``</s>`` for MPNet). Every token carries the index of the sentence it
belongs to (the title is sentence 0 of a document; special tokens belong to none), so sentence
states can be pooled for the whole batch with one matrix product
(:func:`unifar.pooling.sentence_states`).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import weakref
from array import array
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TYPE_CHECKING

if TYPE_CHECKING:  # torch loads only when a batch is built: the dataset loaders use this module torch-free
    import torch
    from transformers import PreTrainedTokenizerBase


__all__ = [
    "split_sentences",
    "normalize_document",
    "EncodedInput",
    "Batch",
    "encode_inputs",
    "collate",
]

# Abbreviations after which a period does not end a sentence (lower-cased, without the period).
_ABBREVIATIONS = {
    "e.g", "i.e", "et al", "al", "fig", "figs", "eq", "eqs", "vs", "cf", "etc", "approx", "resp",
    "sec", "no", "dr", "mr", "mrs", "ms", "prof", "inc", "ltd", "co", "jr", "sr", "st", "vol",
    "pp", "ref", "refs", "tab", "ca", "viz", "u.s", "e.u", "ph.d", "m.sc", "b.sc",
}
# A candidate boundary: ``.``/``!``/``?`` (then closing quotes or brackets) and space before a
# non-space, which :func:`_opens_sentence` then checks; or a CJK full-width terminator (then
# closers, possibly more terminators), which ends a sentence with or without a following space.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)|(?<=[。｡！？])(?P<cjk>[。｡！？」』）】〕〉》”’\"')\]]*)\s*(?=\S)")
_OPENERS = "\"'(["


def _opens_sentence(text: str, i: int) -> bool:
    r"""Whether ``text[i:]`` can start a sentence after ``.``/``!``/``?`` and space: an optional
    opening quote or bracket, then an upper-case (or title-case) letter of any script, an ASCII
    digit, or a letter of a caseless wide (CJK, kana, hangul) script. For ASCII this is exactly
    ``["'(\[]?[A-Z0-9]``, the rule every English split of the book was made with."""
    if text[i] in _OPENERS:
        i += 1
        if i == len(text):
            return False
    c = text[i]
    if c.isascii():
        return "A" <= c <= "Z" or "0" <= c <= "9"
    category = unicodedata.category(c)
    return category in ("Lu", "Lt") or (category == "Lo" and unicodedata.east_asian_width(c) in ("W", "F"))


def split_sentences(text: str) -> list[str]:
    """Split an abstract into sentences with a rule-based splitter that needs no download.

    A sentence ends at ``.``, ``!`` or ``?`` followed by space and an upper-case letter (of any
    script: Latin, Greek, Cyrillic, ...), a digit or a CJK character, unless the period closes a
    known abbreviation or a single initial; and at a CJK full-width ``。``, ``！`` or ``？``
    (with the closing quotes or brackets after it), whatever follows.

    >>> split_sentences("We study graphs, e.g. trees (Smith et al. 2020). Results improve by 3.5%. Is it good? Yes.")
    ['We study graphs, e.g. trees (Smith et al. 2020).', 'Results improve by 3.5%.', 'Is it good?', 'Yes.']
    >>> split_sentences("Это тест. Élan vital. 我们研究图。「结果很好！」真的吗？")
    ['Это тест.', 'Élan vital.', '我们研究图。', '「结果很好！」', '真的吗？']
    >>> split_sentences("  ")
    []
    """
    text = " ".join(text.split())
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m.group("cjk") is not None:  # the closers stay with the sentence they close
            sentences.append(text[start : m.end("cjk")].strip())
            start = m.end()
            continue
        if not _opens_sentence(text, m.end()):
            continue
        candidate = text[start : m.start()].strip()
        last_word = candidate.rsplit(" ", 1)[-1].rstrip(".!?\"')]").lower()
        if candidate.endswith(".") and (last_word in _ABBREVIATIONS or len(last_word) == 1):
            continue  # "et al. Smith", "J. Doe": not a boundary
        sentences.append(candidate)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def normalize_document(doc: Mapping[str, Any], index: int | None = None) -> tuple[str, list[str]]:
    """Return ``(title, sentences)`` of a document given as ``{"title", "sentences"}`` or
    ``{"title", "abstract"}``; empty sentences are dropped. Errors name the field and the index.

    ``sentences`` wins when both are given, except that an *empty* ``sentences`` list next to an
    ``abstract`` counts as absent (the abstract is split): an exporter that writes ``[]`` for
    "not split yet" must not leave the document with its title only.

    >>> normalize_document({"title": "T", "abstract": "One. Two."})
    ('T', ['One.', 'Two.'])
    >>> normalize_document({"title": "T", "sentences": [], "abstract": "One. Two."})
    ('T', ['One.', 'Two.'])
    """
    where = f"document {index}" if index is not None else "document"
    if not isinstance(doc, Mapping):
        raise TypeError(f"{where}: expected a dict with 'title' and 'sentences' or 'abstract', got {type(doc).__name__}")
    if "title" not in doc:
        raise KeyError(f"{where}: missing field 'title' (use '' for a document without a title)")
    title = doc["title"] if doc["title"] is not None else ""
    if not isinstance(title, str):
        raise TypeError(f"{where}: field 'title' must be a string, got {type(title).__name__}")
    sents = doc.get("sentences")
    if isinstance(sents, Sequence) and not isinstance(sents, str) and len(sents) == 0 and doc.get("abstract") is not None:
        sents = None  # an empty list beside an abstract: use the abstract
    if sents is not None:
        if isinstance(sents, str) or not isinstance(sents, Sequence):
            raise TypeError(f"{where}: field 'sentences' must be a list of strings")
        bad = [i for i, s in enumerate(sents) if not isinstance(s, str)]
        if bad:
            raise TypeError(f"{where}: field 'sentences' item {bad[0]} is not a string")
        sentences = [" ".join(s.split()) for s in sents]
    elif "abstract" in doc and doc["abstract"] is not None:
        abstract = doc["abstract"]
        if not isinstance(abstract, str):
            raise TypeError(f"{where}: field 'abstract' must be a string, got {type(abstract).__name__}")
        sentences = split_sentences(abstract)
    else:
        raise KeyError(f"{where}: needs a 'sentences' list or an 'abstract' string")
    return " ".join(title.split()), [s for s in sentences if s]


@dataclass
class EncodedInput:
    """One input in the unified format, before padding."""

    input_ids: list[int]
    sentence_ids: list[int]  # per token: sentence index, -1 for special tokens
    units: list[str]  # the text of each kept sentence (the title first, for documents)
    has_title: bool
    truncated: bool
    # per unit: its index among the input's title + sentences as given to encode_inputs (a
    # sentence that tokenises to nothing is dropped, so units and given sentences can differ)
    unit_index: list[int] = field(default_factory=list)

    @property
    def n_sentences(self) -> int:
        return len(self.units)


def _fit(pieces: list[list[int]], budget: int) -> tuple[list[list[int]], bool]:
    """Keep whole leading pieces within ``budget`` tokens (each costs its length + 1 separator).

    Trailing pieces are dropped first; a piece is cut only when it is the first one or when
    nothing of the text after the title would otherwise survive, so no input is emptied.
    """
    kept: list[list[int]] = []
    used = 0
    for i, p in enumerate(pieces):
        cost = len(p) + 1
        if used + cost <= budget:
            kept.append(p)
            used += cost
            continue
        room = budget - used - 1
        if room > 0 and len(kept) <= 1:  # cut a single over-long sentence rather than lose it
            kept.append(p[:room])
        return kept, True
    return kept, False


# Token ids of every text a tokenizer has split, shared by all tokenizers with the same rules:
# a chapter that evaluates ten models on one collection tokenises its sentences once, not ten
# times (tokenising was a third of chapter 6's evaluation). Keyed by a fingerprint of the fast
# tokenizer's serialised rules; ids are stored as int32 arrays (about 180 bytes a sentence).
_MEMO_LIMIT = 2_000_000  # texts per memo; a larger one starts again (memory, not correctness)
_MEMOS: dict[str, dict[str, array]] = {}
_MEMO_OF: "weakref.WeakKeyDictionary[Any, dict[str, array]]" = weakref.WeakKeyDictionary()


def _tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """A digest of a fast tokenizer's rules (vocabulary, normaliser, pre-tokeniser, model), without
    its per-call truncation and padding state; None for a tokenizer with no serialised form."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    spec = json.loads(backend.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=16).hexdigest()


def _sentence_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """Token ids (no special tokens) of each text; texts seen before come from the memo, the
    others go through the tokenizer in one batched call."""
    if not texts:
        return []
    # verbose=False: sentences longer than the model's limit are cut by the caller (whole
    # trailing sentences, then the last one), so the tokenizer's "sequence length" warning is moot
    try:
        memo = _MEMO_OF.get(tokenizer)
    except TypeError:  # an unhashable tokenizer: no memo
        memo = None
    if memo is None:
        fingerprint = _tokenizer_fingerprint(tokenizer)
        if fingerprint is None:
            return tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        memo = _MEMOS.setdefault(fingerprint, {})
        try:
            _MEMO_OF[tokenizer] = memo
        except TypeError:
            pass
    todo = list(dict.fromkeys(t for t in texts if t not in memo))
    if todo and len(memo) + len(todo) > _MEMO_LIMIT:
        memo.clear()
        todo = list(dict.fromkeys(texts))
    if todo:
        new = tokenizer(todo, add_special_tokens=False, verbose=False)["input_ids"]
        memo.update(zip(todo, (array("i", x) for x in new)))
    return [memo[t].tolist() for t in texts]


def encode_inputs(
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[tuple[str, list[str]]],
    max_tokens: int,
) -> list[EncodedInput]:
    """Tokenise ``(title, sentences)`` pairs in the unified format; ``title == ""`` means [CLS]-led.

    All sentences of all inputs go through the (fast) tokenizer in one call.
    """
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        raise ValueError("the tokenizer needs a CLS (or <s>) and a SEP (or </s>) token")
    flat: list[str] = []
    for title, sentences in texts:
        flat.extend(([title] if title else []) + list(sentences))
    ids = _sentence_ids(tokenizer, flat)
    out: list[EncodedInput] = []
    k = 0
    for title, sentences in texts:
        units = ([title] if title else []) + list(sentences)
        pieces = ids[k : k + len(units)]
        k += len(units)
        # Sentences that tokenise to nothing (e.g. lone control characters) are dropped.
        keep = [i for i, p in enumerate(pieces) if p]
        units = [units[i] for i in keep]
        pieces = [pieces[i] for i in keep]
        kept, truncated = _fit(pieces, max_tokens - 1)  # -1 for [CLS]
        input_ids = [cls_id]
        sentence_ids = [-1]
        for j, p in enumerate(kept):
            input_ids += p + [sep_id]
            sentence_ids += [j] * len(p) + [-1]
        if not kept:  # an empty input is still a valid sequence: [CLS] [SEP]
            input_ids.append(sep_id)
            sentence_ids.append(-1)
        out.append(
            EncodedInput(
                input_ids=input_ids,
                sentence_ids=sentence_ids,
                units=units[: len(kept)],
                has_title=bool(title) and len(kept) > 0,
                truncated=truncated,
                unit_index=keep[: len(kept)],
            )
        )
    return out


@dataclass
class Batch:
    """Padded tensors for a batch of :class:`EncodedInput`."""

    input_ids: torch.Tensor  # [B, L] long
    attention_mask: torch.Tensor  # [B, L] long, 1 = real token
    sentence_ids: torch.Tensor  # [B, L] long, -1 = special or padding
    n_sentences: torch.Tensor  # [B] long
    has_title: torch.Tensor  # [B] bool

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.sentence_ids, self.n_sentences, self.has_title)))

    @property
    def max_sentences(self) -> int:
        return max(int(self.n_sentences.max()), 1) if self.n_sentences.numel() else 1


def collate(items: Sequence[EncodedInput], pad_id: int) -> Batch:
    """Right-pad a list of inputs into a :class:`Batch`."""
    import torch

    if not items:
        raise ValueError("cannot collate an empty batch")
    L = max(len(x.input_ids) for x in items)
    B = len(items)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attention = torch.zeros((B, L), dtype=torch.long)
    sentence_ids = torch.full((B, L), -1, dtype=torch.long)
    for b, x in enumerate(items):
        n = len(x.input_ids)
        input_ids[b, :n] = torch.tensor(x.input_ids)
        attention[b, :n] = 1
        sentence_ids[b, :n] = torch.tensor(x.sentence_ids)
    return Batch(
        input_ids=input_ids,
        attention_mask=attention,
        sentence_ids=sentence_ids,
        n_sentences=torch.tensor([x.n_sentences for x in items], dtype=torch.long),
        has_title=torch.tensor([x.has_title for x in items], dtype=torch.bool),
    )
