"""The chapters as a reader meets them: what the rendered book must not trip on.

Static checks of every notebook of the book (no execution): one number per chapter title (the
book numbers chapters and sections itself), the set-up cell hidden and under 15 lines (profiles in
unifar.profiles), code that fits the page (at most 100 characters a line), markdown cells short
enough to sit next to what they discuss (at most 600 words), no links that download library
source files (chapters link to the API reference), every cross-reference and every glued number
defined.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb"))


def cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.stem)
def notebook(request) -> Path:
    return request.param


def test_titles_and_headings_carry_no_number(notebook):
    # lines of fenced code (an exercise's solution) are comments, not headings
    headings = [line for c in cells(notebook) if c["cell_type"] == "markdown"
                for line in re.sub(r"```.*?```", "", text(c), flags=re.S).splitlines()
                if line.startswith("#")]
    assert headings and headings[0].startswith("# ")
    numbered = [h for h in headings if re.match(r"#+\s+\d+(\.\d+)*\.?\s", h)]
    assert not numbered, f"{notebook.name}: the book numbers these itself: {numbered}"


def test_setup_cell_is_hidden(notebook):
    code = [c for c in cells(notebook) if c["cell_type"] == "code"]
    setup = next(c for c in code if "setup_chapter(" in text(c))
    tags = set(setup.get("metadata", {}).get("tags", []))
    assert tags & {"hide-input", "remove-input", "remove-cell"}, f"{notebook.name}: the set-up cell is shown"
    assert "os.chdir" not in "".join(text(c) for c in code), "setup_chapter moves to the repository root"


def test_setup_cell_is_short_and_takes_the_profiles_from_the_library(notebook):
    """The set-up cell sets up (the chapter, its profile, the parameters it resolves); the profiles
    live in unifar.profiles and the imports sit in the cells that use them."""
    if notebook.parent.name != "notebooks":  # the reproduction summary is not a chapter
        return
    setup = next(c for c in cells(notebook) if "setup_chapter(" in text(c))
    lines = [line for line in text(setup).splitlines() if line.strip()]
    assert len(lines) < 15, f"{notebook.name}: a set-up cell of {len(lines)} lines"
    assert not any(re.search(r"\bPROFILES\s*=", text(c)) for c in cells(notebook)), (
        f"{notebook.name}: profiles belong in unifar.profiles")


def test_code_lines_fit_the_page(notebook):
    long = [(i, line) for i, c in enumerate(cells(notebook)) if c["cell_type"] == "code"
            for line in text(c).splitlines() if len(line) > 100]
    assert not long, f"{notebook.name}: code lines over 100 characters: {long[:3]}"


def test_markdown_cells_are_short(notebook):
    # prose words: the code of an exercise's worked solution (a fenced block) does not count
    prose = lambda c: re.sub(r"```.*?```", "", text(c), flags=re.S)
    words = [(i, len(prose(c).split())) for i, c in enumerate(cells(notebook)) if c["cell_type"] == "markdown"]
    assert max(n for _, n in words) <= 600, f"{notebook.name}: split cells over 600 words: {[w for w in words if w[1] > 600]}"


def test_no_links_to_library_source_files(notebook):
    md = "".join(text(c) for c in cells(notebook) if c["cell_type"] == "markdown")
    links = re.findall(r"\]\((?:\.\./)?unifar/[^)]*\.py\)", md)
    assert not links, f"{notebook.name}: link the API reference ({{py:func}}`unifar...`), not source files: {links}"


def test_references_are_defined():
    labels, refs = set(), set()
    for nb in NOTEBOOKS:
        for c in cells(nb):
            if c["cell_type"] == "markdown":
                labels.update(re.findall(r"^\(([\w-]+)\)=", text(c), re.M))
                refs.update(re.findall(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`", text(c)))
    assert not refs - labels, f"cross-references to missing labels: {sorted(refs - labels)}"


def test_every_glued_number_of_the_prose_is_in_the_stored_outputs(notebook):
    """myst-nb fills {glue:text}`name` from the notebook's own stored outputs; a name the last run
    did not glue would render as an error (and fail the build's warnings-as-errors)."""
    used, stored = set(), set()
    for c in cells(notebook):
        if c["cell_type"] == "markdown":
            used.update(re.findall(r"\{glue(?::\w+)?\}`([\w]+)", text(c)))
        for out in c.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                stored.add(name)
    assert not used - stored, f"{notebook.name}: glued in the prose but not in the stored outputs: {sorted(used - stored)[:10]}"
