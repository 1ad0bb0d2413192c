"""The paper's LLM prompt templates (appendix C, tables 5 and 6), verbatim, and their filling.

Table 5 generates one question per facet from the query document's facet sentences and its
facet positives' facet sentences; table 6 labels every abstract sentence with a facet.

The paper prints each template as one flattened paragraph. The *words and punctuation* below are
copied from it unchanged (including the en dash in "25–50" and the literal braces in
"{background, method, result}"); only the layout is ours: a line break before each part of the
prompt ("... sentences from seed paper:", "Requirements:", each numbered requirement, ...), and
plain spaces where the paper's HTML had non-breaking ones after "1.", "2.", "3.".
``tests/test_llm_data.py`` checks that the templates equal the paper's text with all
whitespace removed.

Rendering choices the paper leaves open (ours, stated here once):

* ``{facet_type}`` is the facet's full name: ``background``, ``method`` or ``result``.
* ``{query_text}``: the query document's facet sentences joined by single spaces.
* ``{pos_text}``: one line per positive paper, ``- `` followed by that paper's facet sentences
  joined by spaces; ``(none)`` when there is no positive.
* ``{sentences_list}``: a JSON array of the sentence strings, one per line (``json.dumps`` with
  ``indent=2``, non-ASCII kept), so that the model can echo each sentence exactly in the
  ``"sentence"`` field the expected output format asks for. ``sentences_format="numbered"``
  renders ``1. S1`` lines instead.

Placeholders are filled in a single regex pass, so text that happens to contain ``{pos_text}``
or braces is inserted literally and never re-substituted.
"""

from __future__ import annotations

import json
import re
from typing import Mapping, Sequence

__all__ = [
    "QUESTION_SYSTEM",
    "QUESTION_USER",
    "FACET_REQUIREMENTS",
    "LABELLING_SYSTEM",
    "LABELLING_USER",
    "question_messages",
    "labelling_messages",
    "render_sentences_list",
    "fill_template",
]

# ----- Table 5: question generation -------------------------------------------------------------
QUESTION_SYSTEM = (
    "You are an expert in scientific literature retrieval, specializing in generating professional "
    "academic search queries."
)
QUESTION_USER = (
    "Generate an English query for the {facet_type} facet based on the following sentences from the "
    "seed paper and positive papers.\n"
    "\n"
    "{facet_type} sentences from seed paper:\n"
    "{query_text}\n"
    "\n"
    "{facet_type} sentences from positive papers:\n"
    "{pos_text}\n"
    "\n"
    "Requirements:\n"
    "1. Generate a natural, fluent, concise, and professional query that highlights {requirement}.\n"
    "2. The query should be between 25\u201350 words.\n"
    "3. Output only the query itself, without any explanation or additional content.\n"
    "\n"
    "Generated {facet_type} query:"
)
FACET_REQUIREMENTS: dict[str, str] = {
    "background": "research questions, research motivation, and limitations of existing studies",
    "method": "technical methods, experimental design, and innovations",
    "result": "key findings, data support, and conclusions",
}

# ----- Table 6: sentence labelling --------------------------------------------------------------
LABELLING_SYSTEM = (
    "You are an expert in classifying sentences from scientific paper abstracts into rhetorical roles."
)
LABELLING_USER = (
    "The following sentences come from the same scientific abstract:\n"
    "{sentences_list}\n"
    "\n"
    "Task Description:\n"
    "1. Based on the content and contextual meaning, classify each sentence into one of the following "
    "categories: {background, method, result}.\n"
    "2. Return the output in a structured JSON format, ensuring each sentence is paired with the "
    "correct category.\n"
    '3. The expected output format is: [{ "sentence": "Sentence1", "category": "background" }, '
    '{ "sentence": "Sentence2", "category": "method" }, '
    '{ "sentence": "Sentence3", "category": "result" }]\n'
    "\n"
    "Please output only the structured JSON result without any explanation."
)

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` for every ``name`` in ``values`` in one pass; other braces stay as they are.

    >>> fill_template("a {x} {background, method} {y}", {"x": "{y}", "y": "2"})
    'a {y} {background, method} 2'
    """
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def _clean(s: str) -> str:
    return " ".join(str(s).split())


def _check_facet(facet: str) -> str:
    if facet not in FACET_REQUIREMENTS:
        raise ValueError(f"unknown facet {facet!r}; expected one of {tuple(FACET_REQUIREMENTS)}")
    return facet


def question_messages(
    facet: str,
    query_sentences: Sequence[str],
    positive_sentences: Sequence[Sequence[str]],
) -> list[dict[str, str]]:
    """Chat messages of table 5 for ``facet``.

    ``query_sentences``: the query (seed) document's facet sentences; ``positive_sentences``: one
    list of facet sentences per positive paper.

    >>> msgs = question_messages("method", ["We train a model."], [["We use CNNs."], ["We fine-tune."]])
    >>> [m["role"] for m in msgs]
    ['system', 'user']
    >>> print(msgs[1]["content"].split("Requirements:")[0].strip())
    Generate an English query for the method facet based on the following sentences from the seed paper and positive papers.
    <BLANKLINE>
    method sentences from seed paper:
    We train a model.
    <BLANKLINE>
    method sentences from positive papers:
    - We use CNNs.
    - We fine-tune.
    """
    _check_facet(facet)
    if isinstance(query_sentences, str) or any(isinstance(p, str) for p in positive_sentences):
        raise TypeError("query_sentences must be a list of sentences and positive_sentences a list of such lists")
    query_text = " ".join(_clean(s) for s in query_sentences if _clean(s))
    pos_lines = [" ".join(_clean(s) for s in sents if _clean(s)) for sents in positive_sentences]
    pos_text = "\n".join(f"- {line}" for line in pos_lines if line) or "(none)"
    user = fill_template(
        QUESTION_USER,
        {
            "facet_type": facet,
            "query_text": query_text or "(none)",
            "pos_text": pos_text,
            "requirement": FACET_REQUIREMENTS[facet],
        },
    )
    return [{"role": "system", "content": QUESTION_SYSTEM}, {"role": "user", "content": user}]


def render_sentences_list(sentences: Sequence[str], sentences_format: str = "json") -> str:
    """Render ``{sentences_list}``: a JSON array (default) or numbered lines.

    >>> print(render_sentences_list(['A "b".', "C."]))
    [
      "A \\"b\\".",
      "C."
    ]
    >>> print(render_sentences_list(["A.", "C."], "numbered"))
    1. A.
    2. C.
    """
    cleaned = [_clean(s) for s in sentences]
    if sentences_format == "json":
        return json.dumps(cleaned, ensure_ascii=False, indent=2)
    if sentences_format == "numbered":
        return "\n".join(f"{i}. {s}" for i, s in enumerate(cleaned, start=1))
    raise ValueError(f"sentences_format must be 'json' or 'numbered', got {sentences_format!r}")


def labelling_messages(sentences: Sequence[str], sentences_format: str = "json") -> list[dict[str, str]]:
    """Chat messages of table 6 for one abstract given as a list of sentences.

    >>> msgs = labelling_messages(["We study X.", "X works."])
    >>> msgs[1]["content"].startswith('The following sentences come from the same scientific abstract:\\n[')
    True
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of sentence strings, not one string")
    if not sentences:
        raise ValueError("cannot build a labelling prompt for a document without sentences")
    user = fill_template(LABELLING_USER, {"sentences_list": render_sentences_list(sentences, sentences_format)})
    return [{"role": "system", "content": LABELLING_SYSTEM}, {"role": "user", "content": user}]
