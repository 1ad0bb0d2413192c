"""Sentence facet labelling: the interface every labeller shares, the LLM labeller of table 6 and
a forgiving parser of what the LLM answers.

A labeller maps each document (``{"id", "title", "sentences", ...}``) to one facet per sentence
(``"background"``, ``"method"``, ``"result"``) or ``None`` where no facet applies or the answer
could not be used. The offline labeller (a sentence-role classifier) implements the same
:class:`SentenceLabeller` protocol.

How :func:`parse_labels` reads an answer:

1. The JSON is cut out of the text: Markdown fences (```json ... ```) and prose before or after
   are dropped.
2. It is decoded with ``json``; failing that, after removing trailing commas; failing that, as
   a Python literal (single quotes, ``True``/``None``); failing that, ``"sentence": ...,
   "category": ...`` pairs are picked out with a regular expression.
3. Items may be ``{"sentence", "category"}`` objects (keys in any case; ``label``/``facet``/
   ``role``/``text`` accepted), ``[sentence, category]`` pairs, one ``{sentence: category}``
   object, or a wrapper object holding such a list.
4. Categories are matched case-insensitively, with synonyms (``methods``/``methodology`` ->
   method, ``results``/``findings``/``conclusion`` -> result, ``objective``/``motivation`` ->
   background, as CSFCube folds objective into background); ``other`` and unknown words -> ``None``.
5. Items are aligned to sentences by exact text, then by text with case, punctuation and spaces
   ignored, then by an explicit index (``"Sentence3"``, ``"id": 3``), then by close fuzzy match
   (``difflib`` ratio >= 0.6), and finally by position when the item's position is still free.
   A sentence nobody claimed gets ``None``; extra items are ignored.
"""

from __future__ import annotations

import ast
import difflib
import json
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from .llm import LLMClient
from .prompts import labelling_messages

__all__ = [
    "SentenceLabeller",
    "LLMLabeller",
    "LabelParseError",
    "parse_labels",
    "parse_labels_detailed",
    "normalise_category",
    "CATEGORY_SYNONYMS",
]

logger = logging.getLogger(__name__)

CATEGORY_SYNONYMS: dict[str, str | None] = {
    **{w: "background" for w in (
        "background", "backgrounds", "bg", "objective", "objectives", "motivation", "introduction",
        "purpose", "aim", "aims", "goal", "goals", "context", "problem", "research question",
        "research questions", "hypothesis",
    )},
    **{w: "method" for w in (
        "method", "methods", "mt", "methodology", "methodologies", "approach", "approaches",
        "materials and methods", "material and methods", "design", "study design", "technique",
        "techniques", "procedure", "procedures", "experiment", "experiments", "experimental setup",
        "setup", "setting", "model",
    )},
    **{w: "result" for w in (
        "result", "results", "rs", "finding", "findings", "conclusion", "conclusions", "outcome",
        "outcomes", "discussion", "evaluation", "observation", "observations", "contribution",
        "contributions",
    )},
    **{w: None for w in ("other", "others", "none", "null", "n/a", "na", "unknown", "")},
}


class LabelParseError(ValueError):
    """No usable JSON could be found in an LLM answer."""


@runtime_checkable
class SentenceLabeller(Protocol):
    """Anything that labels the sentences of documents with facets (LLM or trained classifier)."""

    def label_documents(self, docs: Sequence[Mapping[str, Any]]) -> list[list[str | None]]:
        """One list per document, one facet name or ``None`` per sentence of ``doc["sentences"]``."""
        ...


# ----- categories and text matching -------------------------------------------------------------
def normalise_category(value: Any) -> str | None:
    """Map an LLM category to a facet name, or ``None``.

    >>> [normalise_category(x) for x in ["Methods", " RESULTS.", "objective", "bg", "other", "Method/Result", 3]]
    ['method', 'result', 'background', 'background', None, 'method', None]
    """
    if not isinstance(value, str):
        return None
    text = unicodedata.normalize("NFKC", value).lower().strip()
    text = re.sub(r"_label$", "", text)  # CSAbstruct-style "method_label"
    text = re.sub(r"[\s_\-]+", " ", re.sub(r"[^\w\s/&-]", "", text)).strip()
    if text in CATEGORY_SYNONYMS:
        return CATEGORY_SYNONYMS[text]
    for word in re.split(r"[\s/&,]+| and ", text):  # "Method/Result", "methods and results": first one
        if word in CATEGORY_SYNONYMS and CATEGORY_SYNONYMS[word] is not None:
            return CATEGORY_SYNONYMS[word]
    return None


def _loose(text: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).lower())


_INDEX_TEXT = re.compile(r"^\s*(?:sentence|sent|s)?\s*[#(\[]?\s*(\d{1,3})\s*[)\]]?\s*$", re.IGNORECASE)


def _index_of(item: Mapping[str, Any] | None, text: str | None) -> int | None:
    """A 0-based sentence index from ``"Sentence3"`` or an ``id``/``index`` field (1-based)."""
    if item is not None:
        for k in ("index", "id", "idx", "sentence_id", "number", "no"):
            v = item.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v - 1
            if isinstance(v, str) and v.strip().isdigit():
                return int(v) - 1
    if text is not None:
        m = _INDEX_TEXT.match(text)
        if m:
            return int(m.group(1)) - 1
    return None


# ----- JSON extraction --------------------------------------------------------------------------
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
_PAIR = re.compile(
    r"""["']?sentence["']?\s*:\s*(?P<q>["'])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)\s*,\s*"""
    r"""["']?(?:category|label|facet)["']?\s*:\s*["']?(?P<c>[A-Za-z_ /-]+)""",
    re.IGNORECASE | re.DOTALL,
)


def _candidates(text: str) -> list[str]:
    """Substrings that may hold the JSON answer, most likely first."""
    out: list[str] = []
    for m in _FENCE.finditer(text):
        out.append(m.group(1).strip())
    if "```" in text:  # an unclosed fence: take what follows it
        out.append(text.split("```", 1)[1].split("\n", 1)[-1].replace("```", "").strip())
    for open_, close in (("[", "]"), ("{", "}")):
        start, end = text.find(open_), text.rfind(close)
        if start != -1 and end > start:
            out.append(text[start : end + 1])
    out.append(text.strip())
    return list(dict.fromkeys(c for c in out if c))


def _decode(candidate: str) -> Any:
    attempts = [candidate, _TRAILING_COMMA.sub(r"\1", candidate)]
    for a in attempts:
        try:
            return json.loads(a)
        except ValueError:
            pass
    py = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", attempts[1])))
    try:
        return ast.literal_eval(py)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    raise ValueError("not JSON")


def _items(obj: Any) -> list[tuple[str | None, Any, Mapping[str, Any] | None]] | None:
    """``(sentence text or None, category, raw item)`` triples from a decoded answer."""
    if isinstance(obj, Mapping):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        for key in ("results", "labels", "sentences", "output", "data", "classifications", "items", "result"):
            if isinstance(lowered.get(key), list):
                return _items(lowered[key])
        if any(k in lowered for k in ("sentence", "category", "label")):
            return _items([obj])
        # {"sentence text": "category", ...}
        if obj and all(isinstance(v, str) for v in obj.values()):
            return [(str(k), v, None) for k, v in obj.items()]
        return None
    if not isinstance(obj, (list, tuple)):
        return None
    out: list[tuple[str | None, Any, Mapping[str, Any] | None]] = []
    for it in obj:
        if isinstance(it, Mapping):
            low = {str(k).lower().strip(): v for k, v in it.items()}
            sent = next((low[k] for k in ("sentence", "text", "content", "sent") if k in low), None)
            cat = next((low[k] for k in ("category", "label", "facet", "role", "class", "type") if k in low), None)
            if cat is None and len(low) == 1:  # {"<sentence>": "<category>"}
                (sent, cat), = low.items()
                sent = next(iter(it))
            out.append((sent if isinstance(sent, str) else None, cat, it))
        elif isinstance(it, (list, tuple)) and len(it) == 2:
            out.append((it[0] if isinstance(it[0], str) else None, it[1], None))
        elif isinstance(it, str):  # a bare list of categories, in sentence order
            out.append((None, it, None))
        else:
            out.append((None, None, None))
    return out


def _extract_items(text: str) -> list[tuple[str | None, Any, Mapping[str, Any] | None]]:
    if not isinstance(text, str):
        raise TypeError(f"the LLM answer must be a string, got {type(text).__name__}")
    for cand in _candidates(text):
        try:
            obj = _decode(cand)
        except ValueError:
            continue
        items = _items(obj)
        if items:
            return items
    pairs = [(m.group("s"), m.group("c"), None) for m in _PAIR.finditer(text)]
    if pairs:
        return [(s.replace("\\\"", '"').replace("\\'", "'"), c, r) for s, c, r in pairs]
    raise LabelParseError(f"no sentence/category JSON found in the answer: {text[:200]!r}")


# ----- alignment --------------------------------------------------------------------------------
@dataclass
class ParseInfo:
    """How an answer was aligned: ``matched_by[i]`` says how sentence ``i`` got its label."""

    n_items: int = 0
    matched_by: list[str | None] = field(default_factory=list)
    n_ignored_items: int = 0

    @property
    def n_missing(self) -> int:
        return sum(m is None for m in self.matched_by)


def parse_labels_detailed(text: str, sentences: Sequence[str]) -> tuple[list[str | None], ParseInfo]:
    """:func:`parse_labels` plus a :class:`ParseInfo` describing the alignment."""
    items = _extract_items(text)
    n = len(sentences)
    labels: list[str | None] = [None] * n
    matched_by: list[str | None] = [None] * n
    used = [False] * len(items)

    def assign(item_i: int, sent_i: int, how: str) -> None:
        used[item_i] = True
        labels[sent_i] = normalise_category(items[item_i][1])
        matched_by[sent_i] = how

    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    for i, s in enumerate(sentences):
        exact.setdefault(" ".join(s.split()), []).append(i)
        loose.setdefault(_loose(s), []).append(i)

    for how, table, key in (("exact", exact, lambda t: " ".join(t.split())), ("normalised", loose, _loose)):
        for j, (sent, _, _) in enumerate(items):
            if used[j] or sent is None:
                continue
            free = [i for i in table.get(key(sent), []) if matched_by[i] is None]
            if free:
                assign(j, free[0], how)
    for j, (sent, _, raw) in enumerate(items):  # "Sentence3", {"id": 3}
        if used[j]:
            continue
        idx = _index_of(raw, sent)
        if idx is not None and 0 <= idx < n and matched_by[idx] is None:
            assign(j, idx, "index")
    # Fuzzy: best remaining pairs first.
    scored = []
    for j, (sent, _, _) in enumerate(items):
        if used[j] or not sent or _index_of(None, sent) is not None:
            continue
        a = _loose(sent)
        for i, s in enumerate(sentences):
            if matched_by[i] is None:
                ratio = difflib.SequenceMatcher(None, a, _loose(s), autojunk=False).ratio()
                if ratio >= 0.6:
                    scored.append((ratio, j, i))
    for _, j, i in sorted(scored, key=lambda t: (-t[0], t[1], t[2])):
        if not used[j] and matched_by[i] is None:
            assign(j, i, "fuzzy")
    # Position: item j -> sentence j when both are still free.
    for j in range(min(len(items), n)):
        if not used[j] and matched_by[j] is None:
            assign(j, j, "order")
    info = ParseInfo(n_items=len(items), matched_by=matched_by, n_ignored_items=used.count(False))
    return labels, info


def parse_labels(text: str, sentences: Sequence[str]) -> list[str | None]:
    """Facet per sentence from an LLM's table-6 answer (see the module docstring for the rules).

    Raises :class:`LabelParseError` when the answer holds nothing usable.

    >>> parse_labels('```json\\n[{"sentence": "B.", "category": "Results"}, {"sentence": "A.", "category": "methods"},]\\n```', ["A.", "B.", "C."])
    ['method', 'result', None]
    """
    return parse_labels_detailed(text, sentences)[0]


# ----- the LLM labeller -------------------------------------------------------------------------
class LLMLabeller:
    """Label sentences with the table-6 prompt through any :class:`~unifar.construction.llm.LLMClient`.

    Wrap the client in :class:`~unifar.construction.llm.CachedClient` to make runs resumable. An answer
    with no usable JSON labels the whole document ``None`` (counted, not raised). After
    :meth:`label_documents`, ``summary`` holds the counts of documents, sentences, sentences left
    ``None`` and unparsable answers.
    """

    def __init__(
        self,
        client: LLMClient,
        sentences_format: str = "json",
        progress: bool | None = None,
        progress_min: int = 20,
        **gen_kwargs: Any,
    ) -> None:
        self.client = client
        self.sentences_format = sentences_format
        self.progress = progress
        self.progress_min = progress_min
        self.gen_kwargs = gen_kwargs
        self.summary: dict[str, int] = {}

    @property
    def origin(self) -> str:
        return self.client.origin

    def label_sentences(self, sentences: Sequence[str]) -> tuple[list[str | None], ParseInfo | None]:
        """Labels of one abstract and the parse details (``None`` details: unparsable answer)."""
        if not sentences:
            return [], ParseInfo()
        answer = self.client.complete(labelling_messages(sentences, self.sentences_format), **self.gen_kwargs)
        try:
            return parse_labels_detailed(answer, sentences)
        except LabelParseError as err:
            logger.warning("%s", err)
            return [None] * len(sentences), None

    def label_documents(self, docs: Sequence[Mapping[str, Any]]) -> list[list[str | None]]:
        from tqdm.auto import tqdm

        show = self.progress if self.progress is not None else len(docs) >= self.progress_min
        out: list[list[str | None]] = []
        n_sent = n_none = n_bad = 0
        for k, doc in enumerate(tqdm(docs, desc=f"labelling ({self.client.model})", disable=not show)):
            sents = doc.get("sentences")
            if sents is None or isinstance(sents, str):
                raise ValueError(f"document {k} ({doc.get('id', '?')!r}) needs a 'sentences' list")
            labels, info = self.label_sentences(list(sents))
            n_bad += info is None
            n_sent += len(labels)
            n_none += sum(lab is None for lab in labels)
            out.append(labels)
        self.summary = {"documents": len(docs), "sentences": n_sent, "none": n_none, "unparsable": n_bad}
        if n_sent:
            logger.info(
                "labelled %d documents / %d sentences with %s: %d sentences (%.1f %%) fell back to None, "
                "%d answers unparsable",
                len(docs), n_sent, self.client.model, n_none, 100 * n_none / n_sent, n_bad,
            )
        return out

