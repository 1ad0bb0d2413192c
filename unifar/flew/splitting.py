"""FLeW's textual splitting (section 3.2, eq. 4): an abstract -> its background, method and
result text, through the project's LLM client interface; and the facet text of triplets.

The splitter prompt is FLeW's, quoted verbatim here (not in :mod:`unifar.construction.prompts`,
which holds UniFAR's prompts, nor in :mod:`unifar.paper.flew`, which holds reported numbers):
it belongs to the method it drives. Layout choices: the instruction's lines as printed, the
paper's LaTeX-typeset JSON example written as plain JSON, and the input as the instruction
tuning shows it (``Input: "<abstract>"``), all in one user message.

Back ends, all :class:`~unifar.construction.llm.LLMClient`\\ s: a real LLM (the paper's
instruction-tuned Llama-3.1-8B, or any chat model via
:func:`~unifar.construction.llm_backends.client_from_spec`), and :class:`LabellerClient`, the one that
runs offline: it reads the abstract out of the prompt, splits it into sentences
(:func:`unifar.text.split_sentences`), labels them with a
:class:`~unifar.construction.labelling.SentenceLabeller` (chapter 2's offline labeller) and
answers the JSON FLeW's prompt asks for. Documents that already carry sentence labels (chapter
3's FTU documents) get their facet text straight from them (:func:`facet_text`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from ..construction.labelling import SentenceLabeller, _candidates, _decode
from ..construction.llm import LLMClient, LLMError, check_messages
from ..construction.questions import facet_sentences
from ..facets import FACETS, normalise_facet
from ..text import split_sentences
from .sampling import Triplet

__all__ = [
    "SPLITTER_INSTRUCTION",
    "splitter_messages",
    "parse_split",
    "split_abstract",
    "LabellerClient",
    "facet_text",
    "triplet_texts",
]

#: FLeW section 3.2, the splitter's instruction (verbatim; the JSON example in plain JSON)
SPLITTER_INSTRUCTION = (
    "Here is the abstract of a scientific paper. Your task is to split the text into three "
    "distinct sections based on the content of sentences:\n"
    "1.Background: The context or previous knowledge related to the topic.\n"
    "2.Method: The methodology, approach, or contribution proposed in the paper.\n"
    "3.Result: The findings, outcomes, or conclusions derived from experiments or analysis.\n"
    "Please return the output in a structured JSON format, as shown below:\n"
    '{"background": "xxx", "method": "xxx", "result": "xxx"}\n'
    "Ensure that the original text remains intact in each section and that every sentence is "
    "categorized appropriately."
)
_INPUT = re.compile(r'\nInput: "(.*)"\s*$', re.DOTALL)


def splitter_messages(abstract: str) -> list[dict[str, str]]:
    """FLeW's splitter prompt for one abstract, as chat messages.

    >>> print(splitter_messages("We do X.")[0]["content"].splitlines()[-1])
    Input: "We do X."
    """
    text = " ".join(str(abstract).split())
    if not text:
        raise ValueError("cannot split an empty abstract")
    return [{"role": "user", "content": f'{SPLITTER_INSTRUCTION}\n\nInput: "{text}"'}]


def parse_split(answer: str) -> dict[str, str]:
    """The splitter's JSON answer -> ``{facet: text}`` for all three facets (``""`` where a facet
    is absent). Code fences, prose around the JSON, facet aliases and list values are accepted;
    no JSON object at all is an :class:`~unifar.construction.llm.LLMError`.

    >>> parse_split('```json\\n{"Background": "A.", "methods": ["B.", "C."]}\\n```')
    {'background': 'A.', 'method': 'B. C.', 'result': ''}
    """
    for cand in _candidates(answer):
        try:
            obj = _decode(cand)
        except ValueError:
            continue
        if not isinstance(obj, Mapping):
            continue
        out = dict.fromkeys(FACETS, "")
        for key, value in obj.items():
            try:
                f = normalise_facet(key)
            except ValueError:
                continue  # an extra key (e.g. "other"): not a facet's text
            parts = value if isinstance(value, list) else [value]
            out[f] = " ".join(" ".join(str(p).split()) for p in parts if p is not None).strip()
        return out
    raise LLMError(f"no JSON object with facet keys in the splitter's answer: {answer[:200]!r}")


def split_abstract(client: LLMClient, abstract: str, **gen_kwargs: Any) -> dict[str, str]:
    """Eq. 4's splitter on one abstract: ``{facet: abstract_[facet]}``."""
    return parse_split(client.complete(splitter_messages(abstract), **gen_kwargs))


class LabellerClient(LLMClient):
    """The offline back end of FLeW's splitter: answers :func:`splitter_messages` by labelling the
    abstract's sentences with ``labeller`` and joining each facet's sentences (sentences the
    labeller leaves ``None`` go to no facet). Prompts of another shape are an error."""

    name = "labeller"

    def __init__(self, labeller: SentenceLabeller, model: str = "offline-labeller") -> None:
        self.labeller = labeller
        self.model = model

    def complete(self, messages: Sequence[Mapping[str, str]], **gen_kwargs: Any) -> str:
        msgs = check_messages(messages)
        m = _INPUT.search(msgs[-1]["content"])
        if (
            msgs[-1]["role"] != "user"
            or not msgs[-1]["content"].startswith(SPLITTER_INSTRUCTION)
            or not m
        ):
            raise LLMError("LabellerClient answers only FLeW's splitter prompt (splitter_messages)")
        sentences = split_sentences(m.group(1))
        labels = self.labeller.label_documents([{"id": "abstract", "sentences": sentences}])[0]
        doc = {"sentences": sentences, "labels": labels}
        return json.dumps(
            {f: " ".join(facet_sentences(doc, f, fallback="skip")[0]) for f in FACETS}
        )


def facet_text(doc: Mapping[str, Any], facet: str, textual: bool = True) -> str:
    """``abstract_[facet]`` of a document: its splitter output ``doc["facet_text"][facet]`` if
    present, else its sentences labelled ``facet``; the full abstract when that is empty or when
    ``textual`` is False (FLeW's "w/o Textual" ablation).

    >>> d = {"id": "d", "sentences": ["A.", "B."], "labels": ["method", None]}
    >>> facet_text(d, "method"), facet_text(d, "result"), facet_text(d, "method", textual=False)
    ('A.', 'A. B.', 'A. B.')
    """
    full = " ".join(doc.get("sentences") or [])
    if not textual:
        return full
    split = doc.get("facet_text")
    if isinstance(split, Mapping):
        return str(split.get(facet) or "").strip() or full
    return " ".join(facet_sentences(doc, facet, fallback="all")[0])


def triplet_texts(
    triplets: Sequence[Triplet],
    documents: Mapping[str, Mapping[str, Any]],
    facet: str,
    textual: bool = True,
) -> list[tuple[tuple[str, str], ...]]:
    """Eq. 4: each triplet's documents as ``(title, abstract_[facet])`` pairs, in triplet order."""
    missing = sorted({d for t in triplets for d in t if d not in documents})
    if missing:
        raise KeyError(f"triplet documents not in documents: {missing[:5]}")
    cache = {
        d: (str(documents[d].get("title") or ""), facet_text(documents[d], facet, textual))
        for d in {d for t in triplets for d in t}
    }
    return [tuple(cache[d] for d in t) for t in triplets]
