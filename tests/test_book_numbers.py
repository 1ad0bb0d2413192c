"""No measured number is typed into the book's prose.

Numbers in the chapters' markdown come from computations through myst-nb's glue
(``{glue:text}`name:.2f```), or from the paper module (:mod:`unifar.paper`) when they are
reported numbers. This test scans every markdown cell of every notebook (and the book's own
pages) for decimal numbers and fails on any that is neither glued, nor a number some paper
reports, nor a hyper-parameter of the library's configurations, nor a reference (section 4.2,
table 3, version 2.13). A typed measured number goes stale the day its notebook is re-executed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb"))
PAGES = [ROOT / "book" / "intro.md", ROOT / "book" / "search.md",
         *sorted((ROOT / "book").glob("reproduction*.md"))]

# A decimal number: 0.508, 41.90, .616 (not part of a longer token like v1.2.3 or fold1_dev).
DECIMAL = re.compile(r"(?<![\w.\-])[-+]?(?:\d+\.\d+|\.\d+)(?![\w]|\.\d)")
GLUE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
FENCE = re.compile(r"```.*?```", re.S)
# Words after which a number is a reference, not a measurement; numbers chained to it by
# "and", ",", "/", "-", "to" or "or" are references too ("sections 4.2 and 4.7").
REFERENCE = re.compile(
    r"(?:sections?|§|tables?|figures?|figs?\.|eqs?\.|equations?|chapters?|appendix|appendices|version|"
    r"python|torch|pytorch|transformers|jupyter book|arxiv|v)\s*$",
    re.I,
)
CHAIN = re.compile(r"^\s*(?:,|and|or|/|-|–|to|&)\s*$", re.I)


def allowed_values() -> set[str]:
    """Numbers reported by the papers and the defaults of the library's configurations."""
    from unifar import paper
    from unifar.config import UniFARConfig
    from unifar.construction.mining import MiningConfig
    from unifar.config import TrainArgs

    out = set(paper.all_reported_numbers())
    for cls in (UniFARConfig, MiningConfig, TrainArgs):
        for f in dataclasses.fields(cls):
            value = f.default if f.default is not dataclasses.MISSING else None
            if isinstance(value, float):
                out.update({repr(value), f"{value:g}", f"{value:.2f}", f"{value:.1f}"})
    return out


def markdown_texts() -> list[tuple[str, str]]:
    """``(where, text)`` of every markdown cell and book page, with glue roles and fenced code
    removed."""
    out = []
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                out.append((f"{nb.relative_to(ROOT)} cell {i}", "".join(cell["source"])))
    for page in PAGES:
        if page.exists():
            out.append((str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")))
    return [(where, GLUE.sub("", FENCE.sub("", text))) for where, text in out]


def typed_numbers(text: str, allowed: set[str]) -> list[str]:
    """The decimal numbers of ``text`` that are neither allowed values nor references.

    >>> typed_numbers("MAP 40.02 (section 4.2 and 4.7), tau 0.08", {"0.08"})
    ['40.02']
    """
    found = []
    last_ref_end = -1
    for m in DECIMAL.finditer(text):
        before = text[: m.start()]
        number = m.group().lstrip("+-")
        if REFERENCE.search(before[-40:]):
            last_ref_end = m.end()
            continue
        if last_ref_end >= 0 and CHAIN.match(text[last_ref_end : m.start()]):
            last_ref_end = m.end()
            continue
        last_ref_end = -1
        if number in allowed or number.rstrip("0") in allowed or ("0" + number if number.startswith(".") else number) in allowed:
            continue
        found.append(m.group())
    return found


@pytest.mark.parametrize("where, text", [pytest.param(w, t, id=w) for w, t in markdown_texts()])
def test_no_typed_numbers_in_prose(where, text):
    typed = typed_numbers(text, allowed_values())
    assert not typed, (f"{where}: decimal numbers typed into the prose: {typed}. Glue them from the run or the "
                       "committed full results ({glue:text}`name:.2f`), or take reported ones from unifar.paper.")
