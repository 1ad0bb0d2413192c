"""Facet questions q^(f) of an FTU: the paper's LLM generator (table 5) and an offline one
(independent cropping), behind one interface; every question records its ``origin``.

* :class:`LLMQuestionGenerator` prompts with the query document's facet-f sentences and the
  facet-f sentences of its facet-f positives, cleans the answer (quotes, ``Generated ... query:``
  prefixes, fences, trailing explanations) and warns (:class:`QuestionLengthWarning`) when it is
  outside the 25-50 words the prompt asks for. ``origin = "llm:<model>"``.
* :class:`ICropQuestionGenerator` makes the question a random span of the document's facet-f
  text by *independent cropping* (Izacard et al. 2021, as used by the multi-objective paper,
  section 3.2): a span length is drawn as a uniform ratio in ``[ratio_min, ratio_max]`` of the
  text's length (Contriever's defaults 0.1 and 0.5), at least ``min_tokens`` = 10 tokens long
  ("both the query and document spans contain at least ten tokens"), and its start is uniform
  over the valid positions. Independent cropping draws two such spans (query and positive
  view, which may overlap); UniFAR's positive is the whole document, so only the first span is
  used as the question. ``origin = "icrop"``.

Choices the papers leave open (ours):

* Tokens are whitespace-separated words of the facet sentences joined by spaces, so a crop is
  readable text (Contriever crops tokenizer ids of 256-token chunks).
* A document with no sentence labelled ``f`` falls back to all its sentences (``fallback="all"``,
  recorded as ``meta["fallback"] = True``); ``fallback="skip"`` returns ``None`` instead. The
  paper gives every FTU three questions, so "all" is the default for both generators.
* The ICrop random stream is ``random.Random(f"{seed}:{doc_id}:{facet}")``: the same question
  for the same seed whatever the order documents are processed in.
"""

from __future__ import annotations

import logging
import random
import re
import warnings
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from ..datasets.ftu import Question
from .llm import LLMClient
from .prompts import FACET_REQUIREMENTS, question_messages

__all__ = [
    "QuestionGenerator",
    "QuestionLengthWarning",
    "LLMQuestionGenerator",
    "ICropQuestionGenerator",
    "clean_question",
    "facet_sentences",
    "random_crop_span",
    "independent_crop",
]

logger = logging.getLogger(__name__)
FACET_NAMES = tuple(FACET_REQUIREMENTS)


class QuestionLengthWarning(UserWarning):
    """A generated question is outside the word range the prompt asks for."""


@runtime_checkable
class QuestionGenerator(Protocol):
    """Makes the facet-``facet`` question of a query document (or ``None``)."""

    origin: str

    def generate(
        self, query_doc: Mapping[str, Any], facet: str, positives: Sequence[Mapping[str, Any]] = ()
    ) -> Question | None: ...


def facet_sentences(doc: Mapping[str, Any], facet: str, fallback: str = "all") -> tuple[list[str], bool]:
    """``(sentences of doc labelled facet, fell_back)``; see the module docstring for ``fallback``.

    >>> facet_sentences({"id": "d", "sentences": ["A.", "B."], "labels": ["method", None]}, "method")
    (['A.'], False)
    >>> facet_sentences({"id": "d", "sentences": ["A.", "B."], "labels": ["method", None]}, "result")
    (['A.', 'B.'], True)
    """
    if facet not in FACET_NAMES:
        raise ValueError(f"unknown facet {facet!r}; expected one of {FACET_NAMES}")
    if fallback not in ("all", "skip"):
        raise ValueError(f"fallback must be 'all' or 'skip', got {fallback!r}")
    sents, labels = doc.get("sentences") or [], doc.get("labels")
    if labels is None:
        raise ValueError(f"document {doc.get('id', '?')!r} has no sentence labels; label it before making questions")
    if len(labels) != len(sents):
        raise ValueError(f"document {doc.get('id', '?')!r}: {len(sents)} sentences but {len(labels)} labels")
    chosen = [s for s, lab in zip(sents, labels) if lab == facet]
    if chosen or fallback == "skip":
        return chosen, False
    return list(sents), bool(sents)


_PREFIX = re.compile(
    r"^\s*(?:\*\*)?(?:generated\s+)?(?:(?:background|method|result|english|search|academic)\s+)*"
    r"(?:query|question)\s*(?:\*\*)?\s*[:\-]\s*(?:\*\*)?",
    re.IGNORECASE,
)
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"


def clean_question(text: str) -> str:
    """Strip what LLMs wrap around a question: fences, ``Generated ... query:`` prefixes, quotes,
    and anything after the first paragraph.

    >>> clean_question('Generated method query: "How do graph networks scale?"\\n\\nThis query highlights ...')
    'How do graph networks scale?'
    >>> clean_question("```\\n'What limits X?'\\n```")
    'What limits X?'
    """
    t = str(text).strip()
    fenced = re.search(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", t, re.DOTALL)
    if fenced and fenced.group(1).strip():
        t = fenced.group(1).strip()
    t = t.replace("```", "").strip()
    paragraphs = [p for p in re.split(r"\n\s*\n", t) if p.strip()]
    t = paragraphs[0] if paragraphs else ""
    for _ in range(3):
        before = t
        t = _PREFIX.sub("", t).strip()
        if len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES:
            t = t[1:-1].strip()
        if t == before:
            break
    return " ".join(t.split())


class LLMQuestionGenerator:
    """Table-5 questions through any :class:`~unifar.construction.llm.LLMClient` (wrap it in
    :class:`~unifar.construction.llm.CachedClient` to resume interrupted runs). ``counts`` tallies
    generated, out-of-range and empty answers."""

    def __init__(
        self,
        client: LLMClient,
        max_positives: int | None = None,
        fallback: str = "all",
        min_words: int = 25,
        max_words: int = 50,
        **gen_kwargs: Any,
    ) -> None:
        self.client = client
        self.max_positives = max_positives
        self.fallback = fallback
        self.min_words, self.max_words = min_words, max_words
        self.gen_kwargs = gen_kwargs
        self.counts = {"generated": 0, "out_of_range": 0, "empty": 0}

    @property
    def origin(self) -> str:
        return self.client.origin

    def _positive_sentences(self, facet: str, positives: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        pos = list(positives)[: self.max_positives] if self.max_positives is not None else list(positives)
        return [s for s in (facet_sentences(p, facet, self.fallback)[0] for p in pos) if s]

    def messages(
        self, query_doc: Mapping[str, Any], facet: str, positives: Sequence[Mapping[str, Any]] = ()
    ) -> list[dict[str, str]]:
        """The table-5 messages for this query document, facet and positives."""
        q_sents, _ = facet_sentences(query_doc, facet, self.fallback)
        return question_messages(facet, q_sents, self._positive_sentences(facet, positives))

    def generate(
        self, query_doc: Mapping[str, Any], facet: str, positives: Sequence[Mapping[str, Any]] = ()
    ) -> Question | None:
        q_sents, fell_back = facet_sentences(query_doc, facet, self.fallback)
        if not q_sents:  # fallback="skip" and no facet sentence, or an empty document
            return None
        msgs = question_messages(facet, q_sents, self._positive_sentences(facet, positives))
        text = clean_question(self.client.complete(msgs, **self.gen_kwargs))
        doc_id = query_doc.get("id")
        if not text:
            self.counts["empty"] += 1
            logger.warning("empty question for document %r, facet %s", doc_id, facet)
            return None
        q = Question(text, facet, self.origin, None if doc_id is None else str(doc_id),
                     {"fallback": fell_back, "n_positives": len(positives)})
        self.counts["generated"] += 1
        if not self.min_words <= q.n_words <= self.max_words:
            self.counts["out_of_range"] += 1
            warnings.warn(
                f"question for document {doc_id!r} ({facet}) has {q.n_words} words, outside "
                f"{self.min_words}-{self.max_words}",
                QuestionLengthWarning,
                stacklevel=2,
            )
        return q


def random_crop_span(
    n_tokens: int, rng: random.Random, ratio_min: float = 0.1, ratio_max: float = 0.5, min_tokens: int = 10
) -> tuple[int, int]:
    """``(start, end)`` of one random crop of a sequence of ``n_tokens`` (Contriever's
    ``randomcrop`` with a ``min_tokens`` floor; the whole sequence when it is shorter).

    >>> random_crop_span(100, random.Random(0))
    (48, 91)
    """
    if n_tokens <= 0:
        raise ValueError("cannot crop an empty sequence")
    if not 0 < ratio_min <= ratio_max <= 1:
        raise ValueError(f"need 0 < ratio_min <= ratio_max <= 1, got {ratio_min}, {ratio_max}")
    ratio = rng.uniform(ratio_min, ratio_max)
    length = min(n_tokens, max(int(n_tokens * ratio), min_tokens))
    start = rng.randint(0, n_tokens - length)
    return start, start + length


def independent_crop(
    n_tokens: int, rng: random.Random, ratio_min: float = 0.1, ratio_max: float = 0.5, min_tokens: int = 10
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two independent crops (query view, document view) of one sequence; they may overlap."""
    return (
        random_crop_span(n_tokens, rng, ratio_min, ratio_max, min_tokens),
        random_crop_span(n_tokens, rng, ratio_min, ratio_max, min_tokens),
    )


class ICropQuestionGenerator:
    """Offline facet questions: the query span of an independent crop of the facet-f text."""

    origin = "icrop"

    def __init__(
        self,
        seed: int = 0,
        ratio_min: float = 0.1,
        ratio_max: float = 0.5,
        min_tokens: int = 10,
        fallback: str = "all",
    ) -> None:
        self.seed = seed
        self.ratio_min, self.ratio_max, self.min_tokens = ratio_min, ratio_max, min_tokens
        self.fallback = fallback

    def rng(self, doc_id: Any, facet: str) -> random.Random:
        return random.Random(f"{self.seed}:{doc_id}:{facet}")

    def generate(
        self, query_doc: Mapping[str, Any], facet: str, positives: Sequence[Mapping[str, Any]] = ()
    ) -> Question | None:
        sents, fell_back = facet_sentences(query_doc, facet, self.fallback)
        words = " ".join(sents).split()
        if not words:
            return None
        doc_id = query_doc.get("id")
        (start, end), _ = independent_crop(
            len(words), self.rng(doc_id, facet), self.ratio_min, self.ratio_max, self.min_tokens
        )
        meta = {"fallback": fell_back, "span": [start, end], "n_tokens": len(words), "seed": self.seed}
        return Question(" ".join(words[start:end]), facet, self.origin, None if doc_id is None else str(doc_id), meta)
